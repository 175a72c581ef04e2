// quack-bench: C++ timings of the library's kernels. One subcommand per op; JSON lines out.
//
//   quack-bench copy                         4 GiB device-to-device copy (the roofline)
//   quack-bench rmsnorm [--dtype bf16|fp16|fp32] [--shapes 16384x4096,8192x262144]
//                       [--dir fwd|bwd|both] [--wdtype fp32|x] [--residual none|x|fp32]
//                       [--offset 0] [--config auto|all|ENTRY] [--ring-l2 -1..2] [--ms 100]
//                       RMSNorm with a weight in fp32 (default) or x's dtype, out and dx in x's
//                       dtype; the forward writes rstd, the backward dweight (fp32; its
//                       workspace allocated once); --residual x|fp32: the forward takes a
//                       residual and writes residual_out in that dtype, the backward takes
//                       dresidual_out and writes dresidual (the fp32 residual stream's prenorm
//                       backward: x, dresidual_out, dresidual fp32; dy, dx in --dtype);
//                       "config" as for softmax
//                       --ring-l2 N (also softmax, layernorm and cross-entropy): the ring policy's L2 use
//                       forced to quack::detail::RingL2 value N (row_params.h: 0 hinted, 1 plain,
//                       2 no prefetch); -1: the plan's
//   quack-bench softmax [--dtype bf16|fp16|fp32] [--shapes MxN,...] [--dir fwd|bwd|both]
//                       [--log 0|1] [--config auto|all|ENTRY] [--ms 100]
//                       softmax (--log 1: log_softmax), out and dx in x's dtype; "config": the
//                       row skeleton's plan (row_plan_name); all = every configuration of
//                       src/row/row_config.h that takes the shape, and the general policy; an
//                       entry's name forces that entry (nothing where it does not take the shape)
//   quack-bench topk [--dtype bf16|fp16|fp32] [--shapes MxNxK,...] [--softmax none|selected|row]
//                    [--largest 0|1] [--dir fwd|bwd|both] [--config auto|all]
//                    [--path auto|queue|queue-dense|queue-noprefix|queue-sparse|queue-narrow|
//                            queue-sparse-narrow|bitonic|bitonic-fit|bitonic-nofilter|radix]
//                    [--ms 100]
//                    top-k, values in x's dtype, int64 indices (default: issue 19's shapes,
//                    forward only); TB/s = M·N·elt of x / time; "config": the plan
//                    (topk_plan_name; "-pre": the queue kernel's prefix bound); all = each
//                    warps-per-row count forced (with a prefix bound: also without it, the A/B
//                    that --path queue-noprefix runs alone), one warp with prefixes of 2, 4,
//                    8, 16 and 32 iterations (any k), one warp with the sparse offer ("-sp",
//                    TopkPlan::sparse; the other queue entries without it, and --path
//                    queue-dense the plan's queue entry without it), the narrowed search ("-nw",
//                    TopkPlan::prefix_narrow) and both (--path queue-sparse, queue-narrow,
//                    queue-sparse-narrow: each alone, at the plan's warps), the element path,
//                    then the bitonic kernel (16-bit x, N ≤ 4096, k ≤ 32) with its own elements
//                    per thread and each of 16..128, then each of those forced `fit` where
//                    N = T·E ("-fit": no tail loads or column masks), then the radix kernel
//                    (16-byte rows, N ≤ 8192 / 4096 for fp32, k ≤ 256) with E = 8, 16 (its
//                    own), 32 ("radix-e16-t256"); --path forces the queue, bitonic or radix
//                    kernel (bitonic-fit: the fit plan; nothing where T·E ≠ N;
//                    bitonic-nofilter: the fit plan without the candidate filter, which --config
//                    all also times beside each plan that has it, "-flt"; radix: its own E,
//                    nothing outside its range)
//   quack-bench layernorm [--dtype bf16|fp16|fp32] [--shapes MxN,...] [--dir fwd|bwd|both]
//                       [--wdtype fp32|x] [--bias 0|1] [--config auto|all|ENTRY] [--ms 100]
//                       LayerNorm with a weight and (--bias 1) a bias in fp32 or x's dtype, out
//                       and dx in x's dtype; the forward writes mean and rstd, the backward
//                       dweight and dbias (fp32; its workspace allocated once); "config" as for
//                       softmax
//   quack-bench cross-entropy [--dtype bf16|fp16|fp32] [--shapes MxV,...] [--dir fwd|bwd|fwdbwd|all]
//                       [--config auto|all] [--ring-l2 -1..2] [--ms 100]
//                       ce_fwd: reduction 'none', no dx (loss only); ce_bwd: dx from x, lse and a
//                       per-row dloss; ce_fwd_bwd: the training path, 'mean' with the predicted
//                       dx (cross_entropy_fwd with lse, dx_state, dx_predict: prep + row kernel +
//                       finish, then cross_entropy_train_bwd) at grad_output 1 every step (dx in
//                       the forward, the backward returns at once), and ce_fwd_bwd_scaled at 0.5
//                       every step (no dx in the forward, the backward recomputes it from x);
//                       ce_fwd_bwd_rescale / ce_fwd_bwd_scaled_rescale: the same with dx always
//                       written and cross_entropy_scale_grad (A/B); the two halves of
//                       ce_fwd_bwd_scaled alone: ce_fwd_dx_off, the training forward with the
//                       word at 0 (prep + its row kernels + finish: split, the loss-only kernel
//                       working and the dx kernel returning; single, the dx instance with its
//                       stores gated; compare ce_fwd, the loss-only instance alone), and
//                       ce_train_bwd_recompute, cross_entropy_train_bwd after it (the scale
//                       kernel's early return + the recompute; its own plan, timed once per
//                       shape; with --config all also ce_train_bwd_recompute_row, the
//                       recompute's row kernel alone on each entry that takes it); random targets, none ignored; "config" as softmax's (the
//                       forward's row kernel; the training lines: the fwd+dx kernel's,
//                       "config_loss" the loss-only kernel's). The training forward is split
//                       (the loss-only kernel where the word is 0, the loss + dx kernel where
//                       it is 1; --config all forces the entry on both where it is compiled
//                       and takes the row, else that kernel keeps its plan); env
//                       QUACK_BENCH_CE_FWD=single runs it as one kernel instead (the dx
//                       instance with its stores gated: the A/B of the split), "fwd_form"
//                       says which
//   quack-bench gemm [--shapes 8192x8192x8192,...] [--layout rr|rc|cr|cc] [--ms 300]
//                                            bf16 GEMM beside cuBLAS (default: issue 3's set)
//     (env QUACK_GEMM_TILE or QUACK_GEMM_TILE_N forces a tile, for gemm-act / gemm-dact on both the
//     fused and the plain GEMM; QUACK_BENCH_TILE_COUNTER=1 uses the dynamic scheduler;
//     QUACK_GEMM_STREAMK=0|1|auto passes a stream-K workspace to gemm: off, forced, the rule)
//   quack-bench gemm-act [--shapes MxNxK,...] [--act gelu_tanh_approx] [--store-preact 1|0] [--ms 300]
//   quack-bench gemm-dact [--shapes MxNxK,...] [--act gelu_tanh_approx] [--ms 300]
//                                            bf16 gemm_act / gemm_dact beside our plain gemm of the
//                                            same shape and layout (default shapes: 16384x14336x4096,
//                                            16384x4096x14336, 8192x8192x8192; act as
//                                            quack::activation_name, or "all"): gemm_act's a row-major,
//                                            b column-major (y = x·Wᵀ); gemm_dact's a and b row-major
//                                            (dout·W); "ratio" = ms_gemm / ms_fused (≥ 0.97: the
//                                            fusion costs ≤ 3 %)
//
// Method (device tool METHOD.md): warm-up, then CUDA events around each launch, median over
// the repeats; inputs rotate over enough buffer sets to exceed 2x the L2, so no run reads a
// warm cache. Each timed launch is enqueued behind a 100 µs spin kernel (gpu_busy.cu), so its
// host-side launch work is not timed as GPU idle time (as bench_gemm.py's torch.cuda._sleep
// and triton's do_bench); GEMM lines also report that host work ("host_us_*": median wall
// time of the call) and the ratio with the launch started on an idle GPU ("ratio_idle").
// GEMM: ours and cuBLAS alternate launch by launch (A B A B) so clock drift hits both alike;
// TFLOP/s = 2·M·N·K / time. Bytes (QuACK's model): fwd 2·M·N·elt (x read, y written), bwd 3·M·N·elt (x and
// dy read, dx written); weights, rstd and partials are not counted. softmax: fwd 2·M·N·elt (x
// read, y written), bwd 3·M·N·elt (y and dy read, dx written). layernorm: as rmsnorm (weight,
// bias, mean, rstd and partials are not counted). cross-entropy: fwd M·V·elt
// (logits read once), bwd and fwd+bwd 2·M·V·elt (logits read, dx written); targets, losses,
// lse and the scaled pass of ce_fwd_bwd_scaled are not counted.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "norm/layernorm_internal.h"
#include "norm/rmsnorm_internal.h"
#include "row/row_config.h"
#include "row/row_op.h"
#include "cross_entropy/cross_entropy_internal.h"
#include "softmax/softmax_internal.h"
#include "topk/topk_internal.h"
#include "quack/gemm.h"
#include "quack/gemm_act.h"
#include "quack/quack.h"

cudaError_t gpu_busy(double us);  // gpu_busy.cu

namespace {

// --ring-l2 N (rmsnorm, softmax, layernorm forwards, softmax backward, cross-entropy's forward
// and backward, its training pair's forward): the ring policy's L2 use forced to
// quack::detail::RingL2 value N on every plan (through run_row_call); -1: the plan's. Other
// policies ignore it.
int g_ring_l2 = -1;
quack::detail::RowPlan with_ring_l2(quack::detail::RowPlan plan) {
  if (g_ring_l2 >= 0) plan.ring_l2 = static_cast<quack::detail::RingL2>(g_ring_l2);
  return plan;
}
// The mode a ring plan ran with, for its JSON line (other policies ignore it: no tag).
std::string ring_l2_extra(const quack::detail::RowPlan& plan) {
  return g_ring_l2 >= 0 && plan.policy == quack::detail::RowPolicy::kRing
             ? ", \"ring_l2\": " + std::to_string(g_ring_l2)
             : std::string();
}

constexpr double kBusyUs = 100.0;  // longer than the host call times measured (GEMM: ours 7–26 µs, cuBLAS 8–70 µs)

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "quack-bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Buffer {
  void* p = nullptr;
  explicit Buffer(size_t bytes) { check(cudaMalloc(&p, bytes ? bytes : 16), "cudaMalloc"); }
  ~Buffer() { cudaFree(p); }
  Buffer(const Buffer&) = delete;
};

// Median milliseconds of fn(i) over repeats, i cycling over the buffer sets.
double time_median(const std::function<void(int)>& fn, int sets, double budget_ms) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  for (int i = 0; i < 3; ++i) fn(i % sets);  // warm-up: module load, first-touch
  check(cudaDeviceSynchronize(), "warm-up");
  std::vector<float> ms;
  float spent = 0.f;
  for (int i = 0; (spent < budget_ms || ms.size() < 10) && ms.size() < 2000; ++i) {
    check(gpu_busy(kBusyUs), "gpu_busy");
    check(cudaEventRecord(a), "record");
    fn(i % sets);
    check(cudaEventRecord(b), "record");
    check(cudaEventSynchronize(b), "sync");
    float t = 0.f;
    check(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t);
    spent += t;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Random normal values: 1M generated on the host, then tiled over the buffer by doubling
// device-to-device copies (host generation of gigabytes would dominate the run).
void fill_random(void* p, size_t total, quack::DType t, unsigned seed) {
  const size_t n = std::min<size_t>(total, size_t(1) << 20);
  std::mt19937 gen(seed);
  std::normal_distribution<float> d;
  std::vector<float> f(n);
  for (auto& v : f) v = d(gen);
  const size_t es = quack::dtype_size(t);
  std::vector<unsigned char> raw(n * es);
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &f[i], 4);
    if (t == quack::DType::kFloat32) {
      std::memcpy(&raw[i * 4], &bits, 4);
    } else if (t == quack::DType::kBFloat16) {
      uint16_t h = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
      std::memcpy(&raw[i * 2], &h, 2);
    } else {  // fp16 via a plain conversion of the float (values are small normals)
      uint32_t sign = (bits >> 16) & 0x8000u;
      int exp = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
      uint32_t man = (bits >> 13) & 0x3ffu;
      uint16_t h = exp <= 0 ? static_cast<uint16_t>(sign) : static_cast<uint16_t>(sign | (exp << 10) | man);
      std::memcpy(&raw[i * 2], &h, 2);
    }
  }
  check(cudaMemcpy(p, raw.data(), raw.size(), cudaMemcpyHostToDevice), "upload");
  auto* base = static_cast<unsigned char*>(p);
  for (size_t done = n; done < total;) {
    const size_t len = std::min(done, total - done);
    check(cudaMemcpy(base + done * es, base, len * es, cudaMemcpyDeviceToDevice), "tile");
    done += len;
  }
}

quack::DType parse_dtype(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return quack::DType::kBFloat16;
  if (s == "fp16" || s == "float16") return quack::DType::kFloat16;
  if (s == "fp32" || s == "float32") return quack::DType::kFloat32;
  std::fprintf(stderr, "quack-bench: unknown dtype %s\n", s.c_str());
  std::exit(2);
}

void emit(const char* op, const char* dtype, long long M, long long N, double ms, double bytes,
          const char* extra = "", const char* impl = "quack") {
  std::printf("{\"op\": \"%s\", \"impl\": \"%s\", \"dtype\": \"%s\", \"M\": %lld, \"N\": %lld, "
              "\"ms\": %.5f, \"tbps\": %.4f%s}\n",
              op, impl, dtype, M, N, ms, bytes / (ms * 1e-3) / 1e12, extra);
  std::fflush(stdout);
}

int bench_copy(double budget_ms) {
  const size_t bytes = size_t(4) << 30;
  Buffer a(bytes), b(bytes);
  check(cudaMemset(a.p, 1, bytes), "memset");
  double ms = time_median([&](int) { check(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice), "copy"); }, 1, budget_ms);
  emit("copy", "uint8", 1, static_cast<long long>(bytes), ms, 2.0 * bytes);
  return 0;
}

// The plan entries a row bench times: "auto" the plan (-1), "all" every entry and the general
// policy, otherwise the one entry of that name; empty for an unknown name.
std::vector<int> row_configs(const std::string& config) {
  namespace d = quack::detail;
  if (config == "auto") return {-1};
  std::vector<int> configs;
  if (config == "all") {
    for (int c = 0; c <= d::kRowConfigCount; ++c) configs.push_back(c);  // last: general
  } else if (d::row_config_index(config.c_str()) >= 0) {
    configs.push_back(d::row_config_index(config.c_str()));
  }
  return configs;
}

// RMSNorm forward and backward (see the header comment); configs as row_configs gives them (the
// plan, every configuration that takes the shape then the general policy, or one entry). Bytes: QuACK's model (x read,
// y written; bwd x and dy read, dx written), the residual stream's tensors not counted.
int bench_rmsnorm(quack::DType dt, quack::DType wdt, const std::string& residual, float offset,
                  const std::vector<std::pair<long long, long long>>& shapes,
                  const std::string& dir, double budget_ms, const std::vector<int>& configs) {
  namespace d = quack::detail;
  using quack::TensorRef;
  const char* name = quack::dtype_name(dt);
  const size_t es = quack::dtype_size(dt), ws = quack::dtype_size(wdt);
  const bool res = residual != "none";
  const quack::DType rdt = residual == "fp32" ? quack::DType::kFloat32 : dt;
  const size_t rs = quack::dtype_size(rdt);
  const auto F32 = quack::DType::kFloat32;
  const std::string wextra = std::string(", \"weight\": \"") + quack::dtype_name(wdt) +
                             "\", \"residual\": \"" + residual + "\"";
  for (auto [M, N] : shapes) {
    const size_t mn = static_cast<size_t>(M) * N;
    const int sets = static_cast<int>(std::max<size_t>(1, std::min<size_t>(8, (256ull << 20) / (mn * es) + 1)));
    std::vector<std::unique_ptr<Buffer>> x, y, r, ro, dy, dx, dro, dres, rstd;
    Buffer w(N * ws), dw(N * 4);
    fill_random(w.p, N, wdt, 7);
    for (int s = 0; s < sets; ++s) {
      x.emplace_back(new Buffer(mn * es));
      y.emplace_back(new Buffer(mn * es));
      rstd.emplace_back(new Buffer(M * 4));
      fill_random(x.back()->p, mn, dt, 1 + s);
      if (res) {
        r.emplace_back(new Buffer(mn * rs));
        ro.emplace_back(new Buffer(mn * rs));
        fill_random(r.back()->p, mn, rdt, 50 + s);
      }
      if (dir != "fwd") {
        dy.emplace_back(new Buffer(mn * es));
        dx.emplace_back(new Buffer(mn * es));
        fill_random(dy.back()->p, mn, dt, 100 + s);
        if (res) {
          dro.emplace_back(new Buffer(mn * rs));
          dres.emplace_back(new Buffer(mn * rs));
          fill_random(dro.back()->p, mn, rdt, 150 + s);
        }
      }
    }
    auto fwd_args = [&](int s) {
      quack::RmsNormFwdArgs a;
      a.x = TensorRef::matrix(x[s]->p, dt, M, N);
      a.weight = TensorRef::vector(w.p, wdt, N);
      a.out = TensorRef::matrix(y[s]->p, dt, M, N);
      a.rstd = TensorRef::vector(rstd[s]->p, F32, M);
      a.weight_offset = offset;
      if (res) {
        a.residual = TensorRef::matrix(r[s]->p, rdt, M, N);
        a.residual_out = TensorRef::matrix(ro[s]->p, rdt, M, N);
      }
      return a;
    };
    auto bwd_args = [&](int s) {
      quack::RmsNormBwdArgs a;
      // The backward's x is the forward's h: residual_out with a residual.
      a.x = res ? TensorRef::matrix(ro[s]->p, rdt, M, N) : TensorRef::matrix(x[s]->p, dt, M, N);
      a.weight = TensorRef::vector(w.p, wdt, N);
      a.dout = TensorRef::matrix(dy[s]->p, dt, M, N);
      a.rstd = TensorRef::vector(rstd[s]->p, F32, M);
      a.dx = TensorRef::matrix(dx[s]->p, dt, M, N);
      a.dweight = TensorRef::vector(dw.p, F32, N);
      a.weight_offset = offset;
      if (res) {
        a.dresidual_out = TensorRef::matrix(dro[s]->p, rdt, M, N);
        a.dresidual = TensorRef::matrix(dres[s]->p, rdt, M, N);
      }
      return a;
    };
    char plan_name[96];
    for (int cfg : configs) {
      if (dir == "bwd") break;
      const d::RowPlan plan = with_ring_l2(d::plan_row_call(d::rmsnorm_fwd_call(fwd_args(0)), cfg));
      if (plan.policy == d::RowPolicy::kNone) continue;
      const double ms = time_median(
          [&](int s) {
            if (cfg < 0 && g_ring_l2 < 0) quack::rmsnorm_fwd(fwd_args(s), nullptr);
            else d::run_row_call(d::rmsnorm_fwd_call(fwd_args(s)), plan, nullptr);
          },
          sets, budget_ms);
      const std::string extra = std::string(", \"config\": \"") +
                                d::row_plan_name(plan, plan_name, sizeof(plan_name)) + "\"" + wextra +
                                ring_l2_extra(plan);
      emit("rmsnorm_fwd", name, M, N, ms, 2.0 * mn * es, extra.c_str());
    }
    if (dir == "fwd") continue;
    for (int s = 0; s < sets; ++s) quack::rmsnorm_fwd(fwd_args(s), nullptr);  // rstd, h
    for (int cfg : configs) {
      const d::RowCall call0 = d::rmsnorm_bwd_call(bwd_args(0));
      d::RowPlan plan = d::plan_row_call(call0, cfg);
      if (plan.policy == d::RowPolicy::kNone) continue;
      const size_t bytes = d::row_call_workspace(call0, plan);  // fixes the persistent grid
      Buffer work(std::max<size_t>(bytes, 16));
      const double ms = time_median(
          [&](int s) {
            d::run_row_call(d::rmsnorm_bwd_call(bwd_args(s)), plan, nullptr, work.p, bytes);
          },
          sets, budget_ms);
      const std::string extra = std::string(", \"config\": \"") +
                                d::row_plan_name(plan, plan_name, sizeof(plan_name)) +
                                "\", \"partials\": " + std::to_string(plan.partials) + wextra;
      emit("rmsnorm_bwd", name, M, N, ms, 3.0 * mn * es, extra.c_str());
    }
  }
  return 0;
}

// softmax / log_softmax forward and backward, every tensor in `dt`, contiguous. configs
// (row_configs): -1 runs the public functions with the library's plan; an entry (the last:
// the general policy) is forced through the internal call, quack::detail::run_row_call.
int bench_softmax(quack::DType dt, const std::vector<std::pair<long long, long long>>& shapes,
                  const std::string& dir, double budget_ms, bool log, const std::vector<int>& configs) {
  namespace d = quack::detail;
  const char* name = quack::dtype_name(dt);
  const size_t es = quack::dtype_size(dt);
  const std::string fwd_op = std::string(log ? "log_softmax" : "softmax") + "_fwd";
  const std::string bwd_op = std::string(log ? "log_softmax" : "softmax") + "_bwd";
  for (auto [M, N] : shapes) {
    const size_t mn = static_cast<size_t>(M) * N;
    const int sets = static_cast<int>(std::max<size_t>(1, std::min<size_t>(8, (256ull << 20) / (mn * es) + 1)));
    std::vector<std::unique_ptr<Buffer>> x, y, dy, dx;
    for (int s = 0; s < sets; ++s) {
      x.emplace_back(new Buffer(mn * es));
      y.emplace_back(new Buffer(mn * es));
      fill_random(x.back()->p, mn, dt, 1 + s);
      if (dir != "fwd") {
        dy.emplace_back(new Buffer(mn * es));
        dx.emplace_back(new Buffer(mn * es));
        fill_random(dy.back()->p, mn, dt, 100 + s);
      }
    }
    auto fwd_args = [&](int s) {
      quack::SoftmaxFwdArgs a;
      a.x = quack::TensorRef::matrix(x[s]->p, dt, M, N);
      a.out = quack::TensorRef::matrix(y[s]->p, dt, M, N);
      return a;
    };
    auto bwd_args = [&](int s) {
      quack::SoftmaxBwdArgs a;
      a.y = quack::TensorRef::matrix(y[s]->p, dt, M, N);
      a.dy = quack::TensorRef::matrix(dy[s]->p, dt, M, N);
      a.dx = quack::TensorRef::matrix(dx[s]->p, dt, M, N);
      return a;
    };
    auto run_fwd = [&](int s) {
      if (log) quack::log_softmax_fwd(fwd_args(s), nullptr);
      else quack::softmax_fwd(fwd_args(s), nullptr);
    };
    auto run_bwd = [&](int s) {
      if (log) quack::log_softmax_bwd(bwd_args(s), nullptr);
      else quack::softmax_bwd(bwd_args(s), nullptr);
    };
    char plan_name[64];
    for (int cfg : configs) {
      if (dir == "bwd") break;
      const d::RowPlan plan = with_ring_l2(d::plan_row_call(d::softmax_fwd_call(fwd_args(0), log), cfg));
      if (plan.policy == d::RowPolicy::kNone) continue;
      const double ms = time_median(
          [&](int s) {
            if (cfg < 0 && g_ring_l2 < 0) run_fwd(s);
            else d::run_row_call(d::softmax_fwd_call(fwd_args(s), log), plan, nullptr);
          },
          sets, budget_ms);
      const std::string extra =
          std::string(", \"config\": \"") + d::row_plan_name(plan, plan_name, sizeof(plan_name)) + "\"" +
          ring_l2_extra(plan);
      emit(fwd_op.c_str(), name, M, N, ms, 2.0 * mn * es, extra.c_str());
    }
    if (dir == "fwd") continue;
    for (int s = 0; s < sets; ++s) run_fwd(s);  // y: real forward outputs
    for (int cfg : configs) {
      const d::RowPlan plan = with_ring_l2(d::plan_row_call(d::softmax_bwd_call(bwd_args(0), log), cfg));
      if (plan.policy == d::RowPolicy::kNone) continue;
      const double ms = time_median(
          [&](int s) {
            if (cfg < 0 && g_ring_l2 < 0) run_bwd(s);
            else d::run_row_call(d::softmax_bwd_call(bwd_args(s), log), plan, nullptr);
          },
          sets, budget_ms);
      const std::string extra =
          std::string(", \"config\": \"") + d::row_plan_name(plan, plan_name, sizeof(plan_name)) + "\"" +
          ring_l2_extra(plan);
      emit(bwd_op.c_str(), name, M, N, ms, 3.0 * mn * es, extra.c_str());
    }
  }
  return 0;
}

// top-k (issue 19): values in x's dtype, int64 indices, contiguous x. TB/s = input bytes
// (M·N·elt) / time, the anchors' model. all_configs: the plan with each warps-per-row count
// (1..16, quack::detail::plan_topk forced), then the element path, then the bitonic kernel
// (plan_topk's forced_path, each elements-per-thread count), then the radix kernel (the same,
// forced_path kRadix). path: auto, queue, bitonic, bitonic-fit, bitonic-nofilter or radix. bwd: topk_bwd of the same
// softmax mode into dx in x's dtype (TB/s = dx bytes / time).
int bench_topk(quack::DType dt, const std::vector<std::vector<long long>>& shapes,
               const std::string& dir, double budget_ms, const std::string& softmax,
               bool largest, bool all_configs, const std::string& path) {
  namespace d = quack::detail;
  const char* name = quack::dtype_name(dt);
  const size_t es = quack::dtype_size(dt);
  const quack::TopkSoftmax sm = softmax == "selected" ? quack::TopkSoftmax::kSelected
                                : softmax == "row"    ? quack::TopkSoftmax::kRow
                                                      : quack::TopkSoftmax::kNone;
  for (const auto& s : shapes) {
    const long long M = s[0], N = s[1], K = s[2];
    const size_t mn = static_cast<size_t>(M) * N, mk = static_cast<size_t>(M) * K;
    const int sets = static_cast<int>(std::max<size_t>(1, std::min<size_t>(8, (256ull << 20) / (mn * es) + 1)));
    std::vector<std::unique_ptr<Buffer>> x, vals, idx, lse, dv, dx;
    for (int i = 0; i < sets; ++i) {
      x.emplace_back(new Buffer(mn * es));
      vals.emplace_back(new Buffer(mk * es));
      idx.emplace_back(new Buffer(mk * 8));
      lse.emplace_back(new Buffer(M * 4));
      fill_random(x.back()->p, mn, dt, 1 + i);
      if (dir != "fwd") {
        dv.emplace_back(new Buffer(mk * es));
        dx.emplace_back(new Buffer(mn * es));
        fill_random(dv.back()->p, mk, dt, 100 + i);
      }
    }
    auto fwd_args = [&](int i) {
      quack::TopkFwdArgs a;
      a.x = quack::TensorRef::matrix(x[i]->p, dt, M, N);
      a.values = quack::TensorRef::matrix(vals[i]->p, dt, M, K);
      a.indices = quack::TensorRef::matrix(idx[i]->p, quack::DType::kInt64, M, K);
      if (sm == quack::TopkSoftmax::kRow)
        a.lse = quack::TensorRef::vector(lse[i]->p, quack::DType::kFloat32, M);
      a.largest = largest;
      a.softmax = sm;
      return a;
    };
    const size_t ws_bytes = quack::topk_fwd_workspace_size(fwd_args(0));
    Buffer ws(ws_bytes);
    // (forced warps, vector loads, forced bitonic elements per thread: -1 none, 0 the plan's;
    // the bitonic plan's forced `fit`: N = T·E, no tail loads or column masks)
    // prefix: the queue kernel's prefix bound, -1 the plan's, 0 none (quack-bench's A/B of it:
    // --path queue-noprefix, and --config all runs each queue plan that has one without it too)
    // radix: the radix kernel forced with `elems` elements per thread (0: the plan's).
    // nofilter: the bitonic plan with the candidate filter forced off (plan_topk's
    // forced_filter 0; --config all times it beside each plan that has the filter, and --path
    // bitonic-nofilter is the fit plan without it).
    // sparse / narrow: the queue plan with the sparse offer (plan_topk's forced_sparse 1) / the
    // narrowed prefix search (forced_narrow 1); --path queue-sparse, queue-narrow and
    // queue-sparse-narrow at the plan's own warps and prefix, --config all at one warp.
    struct Forced {
      int w; bool vec; int elems; bool fit; int prefix; bool radix; bool nofilter; bool sparse;
      bool narrow;
    };
    std::vector<Forced> plans = {{0, true,
                                  path == "bitonic" || path == "bitonic-fit" || path == "radix" ||
                                          path == "bitonic-nofilter" ? 0 : -1,
                                  path == "bitonic-fit" || path == "bitonic-nofilter",
                                  path == "queue-noprefix" ? 0 : -1, path == "radix",
                                  path == "bitonic-nofilter",
                                  path == "queue-sparse" || path == "queue-sparse-narrow",
                                  path == "queue-narrow" || path == "queue-sparse-narrow"}};
    if (all_configs) {
      plans.clear();
      for (int w : {1, 2, 4, 8, 16}) {
        plans.push_back({w, true, -1, false, -1, false, false, false, false});
        plans.push_back({w, true, -1, false, 0, false, false, false, false});
      }
      // Its length at one warp (k < 32 too, where the plan has none: the first-block bound).
      for (int pre : {2, 4, 8, 16, 32})
        plans.push_back({1, true, -1, false, pre, false, false, false, false});
      plans.push_back({1, true, -1, false, -1, false, false, true, false});
      plans.push_back({1, true, -1, false, -1, false, false, false, true});
      plans.push_back({1, true, -1, false, -1, false, false, true, true});
      plans.push_back({0, false, -1, false, -1, false, false, false, false});
      for (int e : {0, 16, 32, 64, 128})
        plans.push_back({0, true, e, false, -1, false, false, false, false});
      for (int e : {0, 16, 32, 64, 128}) {
        plans.push_back({0, true, e, true, -1, false, false, false, false});
        plans.push_back({0, true, e, true, -1, false, true, false, false});
      }
      for (int e : {8, 16, 32})
        plans.push_back({0, true, e, false, -1, true, false, false, false});
    }
    char plan_name[96];
    for (auto [w, vec, elems, fit, prefix, radix, nofilter, sparse, narrow] : plans) {
      if (dir == "bwd") break;
      d::TopkCall call = d::topk_fwd_call(fwd_args(0));
      if (!vec) call.problem.vec_ok = false;
      d::TopkPlan plan = call.plan;
      if (radix) {
        if (!d::topk_radix_ok(call.problem)) {
          if (!all_configs)
            std::fprintf(stderr, "quack-bench: the radix kernel does not take %lldx%lldx%lld\n", M, N, K);
          continue;
        }
        plan = d::plan_topk(call.problem, 0, d::TopkPath::kRadix, elems);
        if (elems > 0 && plan.elems != elems) continue;  // E not usable at this shape
      } else if (elems >= 0) {
        if (!d::topk_bitonic_ok(call.problem)) continue;
        plan = d::plan_topk(call.problem, 0, d::TopkPath::kBitonic, elems, fit, -1,
                            nofilter ? 0 : -1);
        if (elems > 0 && plan.elems != elems) continue;  // E not usable at this shape
        if (fit && !plan.fit) continue;                  // T·E ≠ N at this shape
        if (nofilter && all_configs &&
            !d::plan_topk(call.problem, 0, d::TopkPath::kBitonic, elems, fit).filter)
          continue;  // the same plan as without nofilter
      } else if (w > 0 || !vec || path == "queue" || path == "queue-dense" || prefix >= 0 || sparse ||
                 narrow) {
        const d::TopkPlan own = d::plan_topk(call.problem, w, d::TopkPath::kQueue);
        if (prefix == 0 && all_configs && own.prefix_iters == 0) continue;  // the same plan
        // The sparse offer: on where forced, off for queue-dense and --config all's other
        // queue entries (its A/B), else the plan's.
        const int forced_sparse = sparse ? 1 : all_configs || path == "queue-dense" ? 0 : -1;
        plan = d::plan_topk(call.problem, w, d::TopkPath::kQueue, 0, false, prefix, -1,
                            forced_sparse, narrow ? 1 : -1);
        // The sparse offer: vector path, ≤ 128 threads per CTA (≤ 4 warps per row); the
        // narrowed search: a prefix bound.
        if ((sparse && !plan.sparse) || (narrow && !plan.prefix_narrow)) {
          if (!all_configs)
            std::fprintf(stderr, "quack-bench: --path %s does not take %lldx%lldx%lld\n",
                         path.c_str(), M, N, K);
          continue;
        }
      }
      if (plan.path == d::TopkPath::kQueue && w > 0 && (N + plan.slice - 1) / plan.slice < w) continue;
      const double ms = time_median(
          [&](int i) {
            d::TopkCall c = d::topk_fwd_call(fwd_args(i));
            c.problem = call.problem;
            c.plan = plan;
            d::topk_run_call(c, ws.p, ws_bytes, nullptr);
          },
          sets, budget_ms);
      const std::string extra = ", \"k\": " + std::to_string(K) + ", \"softmax\": \"" + softmax +
                                "\", \"config\": \"" + d::topk_plan_name(plan, plan_name, sizeof(plan_name)) + "\"";
      emit("topk_fwd", name, M, N, ms, 1.0 * mn * es, extra.c_str());
    }
    if (dir == "fwd") continue;
    for (int i = 0; i < sets; ++i) quack::topk_fwd(fwd_args(i), ws.p, ws_bytes, nullptr);
    const double ms = time_median(
        [&](int i) {
          quack::TopkBwdArgs b;
          b.dvalues = quack::TensorRef::matrix(dv[i]->p, dt, M, K);
          b.indices = quack::TensorRef::matrix(idx[i]->p, quack::DType::kInt64, M, K);
          b.dx = quack::TensorRef::matrix(dx[i]->p, dt, M, N);
          b.softmax = sm;
          if (sm == quack::TopkSoftmax::kSelected) b.values = quack::TensorRef::matrix(vals[i]->p, dt, M, K);
          if (sm == quack::TopkSoftmax::kRow) {
            b.x = quack::TensorRef::matrix(x[i]->p, dt, M, N);
            b.lse = quack::TensorRef::vector(lse[i]->p, quack::DType::kFloat32, M);
          }
          quack::topk_bwd(b, nullptr);
        },
        sets, budget_ms);
    const std::string extra = ", \"k\": " + std::to_string(K) + ", \"softmax\": \"" + softmax + "\"";
    emit("topk_bwd", name, M, N, ms, 1.0 * mn * es, extra.c_str());
  }
  return 0;
}

// LayerNorm forward and backward, x, out, dout, dx in `dt`, weight (and bias) in `wdt`,
// contiguous; configs as bench_softmax's.
int bench_layernorm(quack::DType dt, quack::DType wdt, bool bias,
                    const std::vector<std::pair<long long, long long>>& shapes,
                    const std::string& dir, double budget_ms, const std::vector<int>& configs) {
  namespace d = quack::detail;
  const char* name = quack::dtype_name(dt);
  const size_t es = quack::dtype_size(dt), ws = quack::dtype_size(wdt);
  const std::string wextra = std::string(", \"weight\": \"") + quack::dtype_name(wdt) +
                             "\", \"bias\": " + (bias ? "true" : "false");
  for (auto [M, N] : shapes) {
    const size_t mn = static_cast<size_t>(M) * N;
    const int sets = static_cast<int>(std::max<size_t>(1, std::min<size_t>(8, (256ull << 20) / (mn * es) + 1)));
    std::vector<std::unique_ptr<Buffer>> x, y, dy, dx, mean, rstd;
    Buffer w(N * ws), b(N * ws), dw(N * 4), db(N * 4);
    fill_random(w.p, N, wdt, 7);
    fill_random(b.p, N, wdt, 8);
    for (int s = 0; s < sets; ++s) {
      x.emplace_back(new Buffer(mn * es));
      y.emplace_back(new Buffer(mn * es));
      mean.emplace_back(new Buffer(M * 4));
      rstd.emplace_back(new Buffer(M * 4));
      fill_random(x.back()->p, mn, dt, 1 + s);
      if (dir != "fwd") {
        dy.emplace_back(new Buffer(mn * es));
        dx.emplace_back(new Buffer(mn * es));
        fill_random(dy.back()->p, mn, dt, 100 + s);
      }
    }
    auto fwd_args = [&](int s) {
      quack::LayerNormFwdArgs a;
      a.x = quack::TensorRef::matrix(x[s]->p, dt, M, N);
      a.weight = quack::TensorRef::vector(w.p, wdt, N);
      if (bias) a.bias = quack::TensorRef::vector(b.p, wdt, N);
      a.out = quack::TensorRef::matrix(y[s]->p, dt, M, N);
      a.mean = quack::TensorRef::vector(mean[s]->p, quack::DType::kFloat32, M);
      a.rstd = quack::TensorRef::vector(rstd[s]->p, quack::DType::kFloat32, M);
      return a;
    };
    auto bwd_args = [&](int s) {
      quack::LayerNormBwdArgs a;
      a.x = quack::TensorRef::matrix(x[s]->p, dt, M, N);
      a.weight = quack::TensorRef::vector(w.p, wdt, N);
      a.dout = quack::TensorRef::matrix(dy[s]->p, dt, M, N);
      a.mean = quack::TensorRef::vector(mean[s]->p, quack::DType::kFloat32, M);
      a.rstd = quack::TensorRef::vector(rstd[s]->p, quack::DType::kFloat32, M);
      a.dx = quack::TensorRef::matrix(dx[s]->p, dt, M, N);
      a.dweight = quack::TensorRef::vector(dw.p, quack::DType::kFloat32, N);
      if (bias) a.dbias = quack::TensorRef::vector(db.p, quack::DType::kFloat32, N);
      return a;
    };
    char plan_name[96];
    for (int cfg : configs) {
      if (dir == "bwd") break;
      const d::RowPlan plan = with_ring_l2(d::plan_row_call(d::layernorm_fwd_call(fwd_args(0)), cfg));
      if (plan.policy == d::RowPolicy::kNone) continue;
      const double ms = time_median(
          [&](int s) {
            if (cfg < 0 && g_ring_l2 < 0) quack::layernorm_fwd(fwd_args(s), nullptr);
            else d::run_row_call(d::layernorm_fwd_call(fwd_args(s)), plan, nullptr);
          },
          sets, budget_ms);
      const std::string extra = std::string(", \"config\": \"") +
                                d::row_plan_name(plan, plan_name, sizeof(plan_name)) + "\"" + wextra +
                                ring_l2_extra(plan);
      emit("layernorm_fwd", name, M, N, ms, 2.0 * mn * es, extra.c_str());
    }
    if (dir == "fwd") continue;
    for (int s = 0; s < sets; ++s) quack::layernorm_fwd(fwd_args(s), nullptr);  // mean, rstd
    for (int cfg : configs) {
      const d::RowCall call0 = d::layernorm_bwd_call(bwd_args(0));
      d::RowPlan plan = d::plan_row_call(call0, cfg);
      if (plan.policy == d::RowPolicy::kNone) continue;
      const size_t bytes = d::row_call_workspace(call0, plan);  // fixes the persistent grid
      Buffer work(std::max<size_t>(bytes, 16));
      const double ms = time_median(
          [&](int s) {
            d::run_row_call(d::layernorm_bwd_call(bwd_args(s)), plan, nullptr, work.p, bytes);
          },
          sets, budget_ms);
      const std::string extra = std::string(", \"config\": \"") +
                                d::row_plan_name(plan, plan_name, sizeof(plan_name)) +
                                "\", \"partials\": " + std::to_string(plan.partials) + wextra;
      emit("layernorm_bwd", name, M, N, ms, 3.0 * mn * es, extra.c_str());
    }
  }
  return 0;
}

// Cross-entropy forward, backward and the training path (fwd with dx, then the rescale), every
// logits tensor in `dt`, contiguous, fp32 loss/lse/dloss, int64 targets uniform in [0, V).
int bench_cross_entropy(quack::DType dt, const std::vector<std::pair<long long, long long>>& shapes,
                        const std::string& dir, double budget_ms, bool all_configs) {
  namespace d = quack::detail;
  using quack::TensorRef;
  const char* name = quack::dtype_name(dt);
  const size_t es = quack::dtype_size(dt);
  const auto F32 = quack::DType::kFloat32;
  const std::vector<int> configs = row_configs(all_configs ? "all" : "auto");
  const bool run_fwd = dir == "fwd" || dir == "all", run_bwd = dir == "bwd" || dir == "all";
  const bool run_train = dir == "fwdbwd" || dir == "all";
  for (auto [M, V] : shapes) {
    const size_t mv = static_cast<size_t>(M) * V;
    const int sets = static_cast<int>(std::max<size_t>(1, std::min<size_t>(8, (256ull << 20) / (mv * es) + 1)));
    std::vector<std::unique_ptr<Buffer>> x, dx;
    for (int s = 0; s < sets; ++s) {
      x.emplace_back(new Buffer(mv * es));
      fill_random(x.back()->p, mv, dt, 1 + s);
      if (run_bwd || run_train) dx.emplace_back(new Buffer(mv * es));
    }
    std::vector<int64_t> th(static_cast<size_t>(M));
    std::mt19937_64 gen(static_cast<uint64_t>(M * 31 + V));
    for (auto& t : th) t = static_cast<int64_t>(gen() % static_cast<uint64_t>(V));
    Buffer tg(static_cast<size_t>(M) * 8), loss(static_cast<size_t>(M) * 4),
        lse(static_cast<size_t>(M) * 4), dloss(static_cast<size_t>(M) * 4), grad(16),
        state(quack::kCrossEntropyDxStateFloats * 4), word(16);
    check(cudaMemcpy(tg.p, th.data(), th.size() * 8, cudaMemcpyHostToDevice), "targets");
    fill_random(dloss.p, static_cast<size_t>(M), F32, 7);
    const TensorRef target = TensorRef::vector(tg.p, quack::DType::kInt64, M);
    auto mat = [&](void* p) { return TensorRef::matrix(p, dt, M, V); };
    auto fwd_args = [&](int s, bool train) {
      quack::CrossEntropyFwdArgs a;
      a.x = mat(x[s]->p);
      a.target = target;
      a.reduction = train ? quack::Reduction::kMean : quack::Reduction::kNone;
      a.loss = TensorRef::vector(loss.p, F32, train ? 1 : M);
      if (train) a.dx = mat(dx[s]->p);
      return a;
    };
    // dx buffers exist only when a backward runs: the training call's workspace needs them.
    const size_t ws_bytes = run_train ? quack::cross_entropy_fwd_workspace_size(fwd_args(0, true)) : 0;
    Buffer ws(ws_bytes);
    auto with_ws = [&](quack::CrossEntropyFwdArgs a) {
      a.workspace = ws.p;
      a.workspace_bytes = ws_bytes;
      return a;
    };
    auto bwd_args = [&](int s) {
      quack::CrossEntropyBwdArgs a;
      a.x = mat(x[s]->p);
      a.target = target;
      a.lse = TensorRef::vector(lse.p, F32, M);
      a.dloss = TensorRef::vector(dloss.p, F32, M);
      a.dx = mat(dx[s]->p);
      return a;
    };
    auto set_grad = [&](float g) {
      check(cudaMemcpy(grad.p, &g, 4, cudaMemcpyHostToDevice), "grad_output");
    };
    auto scale = [&](int s) {
      quack::CrossEntropyScaleGradArgs a;
      a.dx = mat(dx[s]->p);
      a.grad_output = TensorRef::vector(grad.p, F32, 1);
      quack::cross_entropy_scale_grad(a, nullptr);
    };
    const TensorRef state_ref = TensorRef::vector(state.p, F32, quack::kCrossEntropyDxStateFloats);
    const TensorRef word_ref = TensorRef::vector(word.p, quack::DType::kInt32, 1);
    const int32_t one = 1;  // the word's first value (any value is correct)
    check(cudaMemcpy(word.p, &one, 4, cudaMemcpyHostToDevice), "dx_predict");
    auto predicted = [&](quack::CrossEntropyFwdArgs a) {  // the training forward's extras
      a.lse = TensorRef::vector(lse.p, F32, M);
      a.dx_state = state_ref;
      a.dx_predict = word_ref;
      return a;
    };
    auto train_args = [&](int s) {
      quack::CrossEntropyTrainBwdArgs a;
      a.x = mat(x[s]->p);
      a.target = target;
      a.lse = TensorRef::vector(lse.p, F32, M);
      a.grad_output = TensorRef::vector(grad.p, F32, 1);
      a.dx = mat(dx[s]->p);
      a.dx_state = state_ref;
      a.dx_predict = word_ref;
      return a;
    };
    auto train_bwd = [&](int s) { quack::cross_entropy_train_bwd(train_args(s), nullptr); };
    char plan_name[64];
    // The predicted forward's form (env QUACK_BENCH_CE_FWD=single: one kernel, for an A/B).
    const char* form_env = std::getenv("QUACK_BENCH_CE_FWD");
    const d::CePredictedForm pred_form = form_env != nullptr && std::strcmp(form_env, "single") == 0
                                             ? d::CePredictedForm::kSingle
                                             : d::CePredictedForm::kSplit;
    auto extra_of = [&](const d::RowPlan& plan) {
      return std::string(", \"config\": \"") + d::row_plan_name(plan, plan_name, sizeof(plan_name)) + "\"";
    };
    bool recompute_timed = false;  // ce_train_bwd_recompute: once per shape
    for (int cfg : configs) {
      if (run_fwd) {
        const d::RowPlan plan = with_ring_l2(d::plan_row_call(d::cross_entropy_fwd_call(fwd_args(0, false)).row, cfg));
        if (plan.policy != d::RowPolicy::kNone) {
          const double ms = time_median(
              [&](int s) { d::run_cross_entropy_fwd(d::cross_entropy_fwd_call(fwd_args(s, false)), plan, nullptr); },
              sets, budget_ms);
          emit("ce_fwd", name, M, V, ms, 1.0 * mv * es, (extra_of(plan) + ring_l2_extra(plan)).c_str());
        }
      }
      if (run_bwd) {
        {  // the lse of set 0 (every set reads it: timing only)
          quack::CrossEntropyFwdArgs a = fwd_args(0, false);
          a.lse = TensorRef::vector(lse.p, F32, M);
          quack::cross_entropy_fwd(a, nullptr);
        }
        const d::RowPlan plan = with_ring_l2(d::plan_row_call(d::cross_entropy_bwd_call(bwd_args(0)), cfg));
        if (plan.policy != d::RowPolicy::kNone) {
          const double ms = time_median(
              [&](int s) { d::run_row_call(d::cross_entropy_bwd_call(bwd_args(s)), plan, nullptr); },
              sets, budget_ms);
          emit("ce_bwd", name, M, V, ms, 2.0 * mv * es, (extra_of(plan) + ring_l2_extra(plan)).c_str());
        }
      }
      if (run_train) {
        // The forward with dx (the rescale lines), and the predicted forward's kernels.
        const d::RowPlan plan = with_ring_l2(d::plan_row_call(d::cross_entropy_fwd_call(with_ws(fwd_args(0, true))).row, cfg));
        if (plan.policy == d::RowPolicy::kNone) continue;
        auto pred_call = [&](int s) {
          return d::cross_entropy_fwd_call(predicted(with_ws(fwd_args(s, true))), pred_form);
        };
        const d::CeFwdCall pc = pred_call(0);
        d::CeFwdPlan pplan = d::plan_cross_entropy_fwd(pc, cfg, cfg);
        if (pplan.row.policy == d::RowPolicy::kNone) pplan.row = d::plan_row_call(pc.row);
        if (pc.split && pplan.dx.policy == d::RowPolicy::kNone) pplan.dx = d::plan_row_call(pc.row_dx);
        pplan.row = with_ring_l2(pplan.row);
        pplan.dx = with_ring_l2(pplan.dx);
        const d::RowPlan& pmain = pc.split ? pplan.dx : pplan.row;  // the kernel writing dx
        std::string pextra = extra_of(pmain) + ring_l2_extra(pmain);
        pextra += std::string(", \"config_loss\": \"") +
                  (pc.split ? d::row_plan_name(pplan.row, plan_name, sizeof(plan_name)) : "-") +
                  "\", \"fwd_form\": \"" + (pc.split ? "split" : "single") + "\"";
        for (float g : {1.f, 0.5f}) {
          set_grad(g);
          // The predicted pair: the word follows grad_output after the first step (warm-up).
          const double ms = time_median(
              [&](int s) {
                d::run_cross_entropy_fwd(pred_call(s), pplan, nullptr);
                train_bwd(s);
              },
              sets, budget_ms);
          emit(g == 1.f ? "ce_fwd_bwd" : "ce_fwd_bwd_scaled", name, M, V, ms, 2.0 * mv * es,
               pextra.c_str());
          const double ms_rescale = time_median(
              [&](int s) {
                d::run_cross_entropy_fwd(d::cross_entropy_fwd_call(with_ws(fwd_args(s, true))), plan, nullptr);
                scale(s);
              },
              sets, budget_ms);
          emit(g == 1.f ? "ce_fwd_bwd_rescale" : "ce_fwd_bwd_scaled_rescale", name, M, V,
               ms_rescale, 2.0 * mv * es, extra_of(plan).c_str());
        }
        // The halves of ce_fwd_bwd_scaled. The forward with the word at 0 (no dx stored; loss
        // and lse only), bytes as ce_fwd's: split, the loss-only kernel and the dx kernel
        // closed; single, the dx instance with its stores gated.
        const int32_t zero = 0;
        check(cudaMemcpy(word.p, &zero, 4, cudaMemcpyHostToDevice), "dx_predict");
        const double ms_off = time_median(
            [&](int s) { d::run_cross_entropy_fwd(pred_call(s), pplan, nullptr); }, sets,
            budget_ms);
        emit("ce_fwd_dx_off", name, M, V, ms_off, 1.0 * mv * es, pextra.c_str());
        if (!recompute_timed) {
          recompute_timed = true;
          // The backward after it (the state says dx not written; grad_output 0.5 keeps the
          // word at 0): the scale kernel returns, the recompute runs on its own plan.
          set_grad(0.5f);
          const d::RowPlan bplan = d::plan_row_call(d::cross_entropy_train_bwd_call(train_args(0)));
          const double ms_bwd = time_median([&](int s) { train_bwd(s); }, sets, budget_ms);
          emit("ce_train_bwd_recompute", name, M, V, ms_bwd, 2.0 * mv * es, extra_of(bplan).c_str());
          // --config all: the recompute's row kernel alone on each entry that takes it (the
          // state still says dx not written).
          for (int rc : all_configs ? configs : std::vector<int>{}) {
            quack::CrossEntropyTrainBwdArgs ta = train_args(0);
            const d::RowPlan rplan = d::plan_row_call(d::cross_entropy_train_bwd_call(ta), rc);
            if (rplan.policy == d::RowPolicy::kNone) continue;
            const double ms_row = time_median(
                [&](int s) {
                  d::run_row_call(d::cross_entropy_train_bwd_call(train_args(s)), rplan, nullptr);
                },
                sets, budget_ms);
            emit("ce_train_bwd_recompute_row", name, M, V, ms_row, 2.0 * mv * es,
                 extra_of(rplan).c_str());
          }
        }
        check(cudaMemcpy(word.p, &one, 4, cudaMemcpyHostToDevice), "dx_predict");
      }
    }
  }
  return 0;
}

// GEMM D = A·B, bf16 in and out, fp32 accumulation, D (M, N) row-major; A (M, K) and B (K, N)
// each row- or column-major (layout "rc" = A row-major, B column-major, and so on). cuBLAS
// (column-major) computes the same product as Dᵀ (N×M) = Bᵀ·Aᵀ: op(B) = N for a row-major B
// (ld N), T for a column-major one (ld K); op(A) = N for a row-major A (ld K), T for a
// column-major one (ld M) — as torch.matmul does for the same strides.
int bench_gemm(const std::vector<std::vector<long long>>& shapes, const std::vector<std::string>& layouts,
               double budget_ms) {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "quack-bench: cublasCreate failed\n");
    return 1;
  }
  const auto bf = quack::DType::kBFloat16;
  for (size_t si = 0; si < shapes.size(); ++si) {
    const auto& s = shapes[si];
    const std::string lay = layouts[si];
    const bool a_row = lay[0] == 'r', b_row = lay[1] == 'r';
    const long long M = s[0], N = s[1], K = s[2];
    Buffer a(M * K * 2), b(K * N * 2), d(M * N * 2), d_ref(M * N * 2);
    fill_random(a.p, M * K, bf, 1);
    fill_random(b.p, K * N, bf, 2);
    quack::GemmArgs g;
    g.a = a_row ? quack::TensorRef::matrix(a.p, bf, M, K, 0, K, 1) : quack::TensorRef::matrix(a.p, bf, M, K, 0, 1, M);
    g.b = b_row ? quack::TensorRef::matrix(b.p, bf, K, N, 0, N, 1) : quack::TensorRef::matrix(b.p, bf, K, N, 0, 1, K);
    g.d = quack::TensorRef::matrix(d.p, bf, M, N);
    // QUACK_BENCH_TILE_COUNTER=1: the dynamic tile scheduler (GemmArgs::tile_counter).
    const char* dyn_env = std::getenv("QUACK_BENCH_TILE_COUNTER");
    const bool dyn = dyn_env && std::string(dyn_env) == "1";
    Buffer counter(4);
    if (dyn) {
      check(cudaMemset(counter.p, 0, 4), "memset");
      g.tile_counter = static_cast<uint32_t*>(counter.p);
    }
    // QUACK_GEMM_STREAMK set (0, 1 or auto): a stream-K workspace, zeroed once and kept for the
    // shape, so the library's setting decides (0 off, 1 forced, auto the rule); unset: none.
    const bool sk = std::getenv("QUACK_GEMM_STREAMK") != nullptr;
    Buffer sk_ws(sk ? quack::gemm_streamk_workspace_size(0) : 16);
    if (sk) {
      check(cudaMemset(sk_ws.p, 0, quack::gemm_streamk_workspace_size(0)), "memset");
      g.streamk_workspace = sk_ws.p;
      g.streamk_workspace_bytes = quack::gemm_streamk_workspace_size(0);
    }
    const float one = 1.f, zero = 0.f;
    auto ours = [&] { quack::gemm(g, nullptr); };
    auto cublas = [&] {
      auto st = cublasGemmEx(h, b_row ? CUBLAS_OP_N : CUBLAS_OP_T, a_row ? CUBLAS_OP_N : CUBLAS_OP_T, N, M, K, &one,
                             b.p, CUDA_R_16BF, b_row ? N : K, a.p, CUDA_R_16BF, a_row ? K : M, &zero, d_ref.p,
                             CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      if (st != CUBLAS_STATUS_SUCCESS) {
        std::fprintf(stderr, "quack-bench: cublasGemmEx failed (%d)\n", static_cast<int>(st));
        std::exit(1);
      }
    };
    // Agreement with cuBLAS on this input (same inputs, both fp32-accumulated): max |diff|
    // relative to max |cuBLAS|, so a broken kernel shows in the bench too.
    ours();
    cublas();
    check(cudaDeviceSynchronize(), "gemm");
    std::vector<uint16_t> hd(M * N), hr(M * N);
    check(cudaMemcpy(hd.data(), d.p, M * N * 2, cudaMemcpyDeviceToHost), "download");
    check(cudaMemcpy(hr.data(), d_ref.p, M * N * 2, cudaMemcpyDeviceToHost), "download");
    auto f = [](uint16_t v) { uint32_t u = uint32_t(v) << 16; float x; std::memcpy(&x, &u, 4); return x; };
    double max_diff = 0, max_ref = 0;
    for (long long i = 0; i < M * N; i += 7) {
      max_diff = std::max<double>(max_diff, std::fabs(f(hd[i]) - f(hr[i])));
      max_ref = std::max<double>(max_ref, std::fabs(f(hr[i])));
    }
    // A B A B: one launch of each per step, each timed by its own events, each enqueued behind
    // the spin kernel (its host work hidden); then the same pair started on an idle GPU (the
    // host work counted: what a caller that waits on each result sees).
    cudaEvent_t e[6];
    for (auto& x : e) check(cudaEventCreate(&x), "event");
    for (int i = 0; i < 5; ++i) { ours(); cublas(); }
    check(cudaDeviceSynchronize(), "warm-up");
    std::vector<float> t_ours, t_cublas, t_ours_idle, t_cublas_idle, h_ours, h_cublas;
    auto host_us = [](auto&& fn) {
      auto t0 = std::chrono::steady_clock::now();
      fn();
      return std::chrono::duration<float, std::micro>(std::chrono::steady_clock::now() - t0).count();
    };
    auto elapsed = [&](int i, int j) {
      float x = 0.f;
      check(cudaEventElapsedTime(&x, e[i], e[j]), "elapsed");
      return x;
    };
    float spent = 0.f;
    while ((spent < budget_ms || t_ours.size() < 10) && t_ours.size() < 2000) {
      check(gpu_busy(kBusyUs), "gpu_busy");
      check(cudaEventRecord(e[0]), "record");
      h_ours.push_back(host_us(ours));
      check(cudaEventRecord(e[1]), "record");
      check(gpu_busy(kBusyUs), "gpu_busy");
      check(cudaEventRecord(e[2]), "record");
      h_cublas.push_back(host_us(cublas));
      check(cudaEventRecord(e[3]), "record");
      check(cudaEventSynchronize(e[3]), "sync");
      t_ours.push_back(elapsed(0, 1));
      t_cublas.push_back(elapsed(2, 3));
      check(cudaEventRecord(e[4]), "record");  // idle start: ours, then cuBLAS behind it
      ours();
      check(cudaEventRecord(e[5]), "record");
      check(cudaEventSynchronize(e[5]), "sync");
      t_ours_idle.push_back(elapsed(4, 5));
      check(cudaEventRecord(e[4]), "record");
      cublas();
      check(cudaEventRecord(e[5]), "record");
      check(cudaEventSynchronize(e[5]), "sync");
      t_cublas_idle.push_back(elapsed(4, 5));
      spent += 2.f * (t_ours.back() + t_cublas.back());
    }
    for (auto& x : e) cudaEventDestroy(x);
    auto median = [](std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    const double flop = 2.0 * M * N * K, mo = median(t_ours), mc = median(t_cublas);
    const double ratio_idle = median(t_cublas_idle) / median(t_ours_idle);
    const char* tile_env = std::getenv("QUACK_GEMM_TILE_N");  // gemm.cpp's choose_tile
    const std::string tile = std::string(tile_env ? tile_env : "auto") + (dyn ? "+dyn" : "");
    std::printf("{\"op\": \"gemm\", \"dtype\": \"bf16\", \"tile_n\": \"%s\", \"majors\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, "
                "\"ms_quack\": %.5f, \"ms_cublas\": %.5f, \"tflops_quack\": %.1f, "
                "\"tflops_cublas\": %.1f, \"ratio\": %.3f, \"ratio_idle\": %.3f, \"host_us_quack\": %.1f, "
                "\"host_us_cublas\": %.1f, \"rel_diff_vs_cublas\": %.2e}\n",
                tile.c_str(), lay.c_str(), M, N, K, mo, mc, flop / (mo * 1e-3) / 1e12, flop / (mc * 1e-3) / 1e12, mc / mo,
                ratio_idle, median(h_ours), median(h_cublas), max_ref > 0 ? max_diff / max_ref : max_diff);
    std::fflush(stdout);
  }
  cublasDestroy(h);
  return 0;
}

// Medians (ms) of launches of fa and fb alternated (A B A B), each enqueued behind the spin
// kernel and timed by its own events, for about budget_ms of GPU time (≥ 10 pairs).
std::pair<double, double> time_alternating(const std::function<void()>& fa, const std::function<void()>& fb,
                                           double budget_ms) {
  cudaEvent_t e[4];
  for (auto& x : e) check(cudaEventCreate(&x), "event");
  for (int i = 0; i < 5; ++i) { fa(); fb(); }
  check(cudaDeviceSynchronize(), "warm-up");
  std::vector<float> ta, tb;
  float spent = 0.f;
  while ((spent < budget_ms || ta.size() < 10) && ta.size() < 2000) {
    check(gpu_busy(kBusyUs), "gpu_busy");
    check(cudaEventRecord(e[0]), "record");
    fa();
    check(cudaEventRecord(e[1]), "record");
    check(gpu_busy(kBusyUs), "gpu_busy");
    check(cudaEventRecord(e[2]), "record");
    fb();
    check(cudaEventRecord(e[3]), "record");
    check(cudaEventSynchronize(e[3]), "sync");
    float x = 0.f, y = 0.f;
    check(cudaEventElapsedTime(&x, e[0], e[1]), "elapsed");
    check(cudaEventElapsedTime(&y, e[2], e[3]), "elapsed");
    ta.push_back(x);
    tb.push_back(y);
    spent += x + y;
  }
  for (auto& x : e) cudaEventDestroy(x);
  auto median = [](std::vector<float> v) { std::sort(v.begin(), v.end()); return double(v[v.size() / 2]); };
  return {median(ta), median(tb)};
}

// gemm_act (dact = false: preact = A·B with A row-major, B column-major; postact = act(preact),
// preact stored when store_preact) or gemm_dact (A, B row-major; preact read; dpreact and
// postact written), bf16 everywhere, beside our plain gemm D = A·B on the same A and B.
int bench_gemm_act(const std::vector<std::vector<long long>>& shapes, const std::vector<quack::Activation>& acts,
                   bool dact, bool store_preact, double budget_ms) {
  const auto bf = quack::DType::kBFloat16;
  const char* op = dact ? "gemm_dact" : "gemm_act";
  for (const auto& s : shapes) {
    const long long M = s[0], N = s[1], K = s[2];
    Buffer a(M * K * 2), b(K * N * 2), d(M * N * 2), pre(M * N * 2), post(M * N * 2);
    fill_random(a.p, M * K, bf, 1);
    fill_random(b.p, K * N, bf, 2);
    fill_random(pre.p, M * N, bf, 3);  // gemm_dact's preact input (gemm_act overwrites it)
    const quack::TensorRef ta = quack::TensorRef::matrix(a.p, bf, M, K, 0, K, 1);
    const quack::TensorRef tb = dact ? quack::TensorRef::matrix(b.p, bf, K, N, 0, N, 1)
                                     : quack::TensorRef::matrix(b.p, bf, K, N, 0, 1, K);
    quack::GemmArgs g;
    g.a = ta;
    g.b = tb;
    g.d = quack::TensorRef::matrix(d.p, bf, M, N);
    auto plain = [&] { quack::gemm(g, nullptr); };
    for (quack::Activation act : acts) {
      std::function<void()> fused;
      quack::GemmActArgs ga;
      quack::GemmDActArgs gd;
      if (dact) {
        gd.a = ta;
        gd.b = tb;
        gd.preact = quack::TensorRef::matrix(pre.p, bf, M, N);
        gd.dpreact = quack::TensorRef::matrix(d.p, bf, M, N);
        gd.postact = quack::TensorRef::matrix(post.p, bf, M, N);
        gd.activation = act;
        fused = [&] { quack::gemm_dact(gd, nullptr); };
      } else {
        ga.a = ta;
        ga.b = tb;
        if (store_preact) ga.preact = quack::TensorRef::matrix(pre.p, bf, M, N);
        ga.postact = quack::TensorRef::matrix(post.p, bf, M, N);
        ga.activation = act;
        fused = [&] { quack::gemm_act(ga, nullptr); };
      }
      // Agreement of the fused op's first output with the plain GEMM (gemm_act's preact, or
      // gemm_dact with identity's dpreact): max |diff| / max |plain|, so a broken kernel shows.
      double rel_diff = -1.0;
      if (act == quack::Activation::kIdentity && (dact || store_preact)) {
        plain();
        check(cudaDeviceSynchronize(), "gemm");
        std::vector<uint16_t> hd(M * N), hf(M * N);
        check(cudaMemcpy(hd.data(), d.p, M * N * 2, cudaMemcpyDeviceToHost), "download");
        fused();
        check(cudaDeviceSynchronize(), op);
        check(cudaMemcpy(hf.data(), dact ? d.p : pre.p, M * N * 2, cudaMemcpyDeviceToHost), "download");
        auto f = [](uint16_t v) { uint32_t u = uint32_t(v) << 16; float x; std::memcpy(&x, &u, 4); return x; };
        double max_diff = 0, max_ref = 0;
        for (long long i = 0; i < M * N; i += 7) {
          max_diff = std::max<double>(max_diff, std::fabs(f(hd[i]) - f(hf[i])));
          max_ref = std::max<double>(max_ref, std::fabs(f(hd[i])));
        }
        rel_diff = max_ref > 0 ? max_diff / max_ref : max_diff;
      }
      const auto [ms_fused, ms_gemm] = time_alternating(fused, plain, budget_ms);
      const double flop = 2.0 * M * N * K;
      const char* tile_env = std::getenv("QUACK_GEMM_TILE");
      if (tile_env == nullptr || *tile_env == 0) tile_env = std::getenv("QUACK_GEMM_TILE_N");
      std::printf("{\"op\": \"%s\", \"act\": \"%s\", \"dtype\": \"bf16\", \"tile\": \"%s\", \"store_preact\": %s, "
                  "\"M\": %lld, \"N\": %lld, \"K\": %lld, \"ms_fused\": %.5f, \"ms_gemm\": %.5f, "
                  "\"tflops_fused\": %.1f, \"tflops_gemm\": %.1f, \"ratio\": %.3f, \"rel_diff_vs_gemm\": %.2e}\n",
                  op, quack::activation_name(act), tile_env ? tile_env : "auto",
                  dact ? "null" : (store_preact ? "true" : "false"), M, N, K, ms_fused, ms_gemm,
                  flop / (ms_fused * 1e-3) / 1e12, flop / (ms_gemm * 1e-3) / 1e12, ms_gemm / ms_fused, rel_diff);
      std::fflush(stdout);
    }
  }
  return 0;
}

std::vector<std::vector<long long>> parse_dims(const std::string& s) {
  std::vector<std::vector<long long>> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::vector<long long> dims;
    std::string item = s.substr(pos, end - pos);
    for (size_t p = 0; p <= item.size();) {
      size_t x = item.find('x', p);
      if (x == std::string::npos) x = item.size();
      dims.push_back(std::atoll(item.substr(p, x - p).c_str()));
      p = x + 1;
    }
    out.push_back(dims);
    pos = end + 1;
  }
  return out;
}

std::vector<std::pair<long long, long long>> parse_shapes(const std::string& s) {
  std::vector<std::pair<long long, long long>> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    size_t x = item.find('x');
    out.emplace_back(std::atoll(item.substr(0, x).c_str()), std::atoll(item.substr(x + 1).c_str()));
    pos = end + 1;
  }
  return out;
}

}  // namespace

// Entry points of the shared library quack-bench-lib for scripts/diag_bench_in_torch.py (unused
// by the executable): quack-bench's timing (time_median: a spin, events around the call alone)
// of the public softmax_fwd on caller-given bf16 buffers (torch's tensors), and the spin kernel
// alone, so Python can time its own calls behind the same spin.
extern "C" double quack_bench_softmax_fwd_ms(void* x, void* y, long long M, long long N, double budget_ms) {
  quack::SoftmaxFwdArgs a;
  a.x = quack::TensorRef::matrix(x, quack::DType::kBFloat16, M, N);
  a.out = quack::TensorRef::matrix(y, quack::DType::kBFloat16, M, N);
  return time_median([&](int) { quack::softmax_fwd(a, nullptr); }, 1, budget_ms);
}

extern "C" int quack_bench_gpu_busy(double us) { return static_cast<int>(gpu_busy(us)); }

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: quack-bench copy\n"
                 "       quack-bench rmsnorm [--dtype bf16|fp16|fp32] [--shapes MxN,...] [--dir fwd|bwd|both] "
                 "[--wdtype fp32|x] [--residual none|x|fp32] [--offset 0] [--config auto|all|ENTRY] [--ring-l2 -1..2] [--ms 100]\n"
                 "       quack-bench softmax [--dtype bf16|fp16|fp32] [--shapes MxN,...] [--dir fwd|bwd|both] "
                 "[--log 0|1] [--config auto|all|ENTRY] [--ring-l2 -1..2] [--ms 100]\n"
                 "       quack-bench topk [--dtype bf16|fp16|fp32] [--shapes MxNxK,...] [--softmax none|selected|row] "
                 "[--largest 0|1] [--dir fwd|bwd|both] [--config auto|all] [--path auto|queue|queue-noprefix|queue-sparse|queue-narrow|queue-sparse-narrow|bitonic|bitonic-fit|bitonic-nofilter|radix] [--ms 100]\n"
                 "       quack-bench layernorm [--dtype bf16|fp16|fp32] [--shapes MxN,...] [--dir fwd|bwd|both] "
                 "[--wdtype fp32|x] [--bias 0|1] [--config auto|all|ENTRY] [--ring-l2 -1..2] [--ms 100]\n"
                 "       quack-bench cross-entropy [--dtype bf16|fp16|fp32] [--shapes MxV,...] "
                 "[--dir fwd|bwd|fwdbwd|all] [--config auto|all] [--ring-l2 -1..2] [--ms 100]\n"
                 "       quack-bench gemm [--shapes MxNxK,...] [--layout rr|rc|cr|cc] [--ms 300]\n"
                 "       quack-bench gemm-act|gemm-dact [--shapes MxNxK,...] [--act NAME|all] [--store-preact 1|0] [--ms 300]\n");
    return 2;
  }
  std::string cmd = argv[1], dtype = "bf16", dir = "both";
  std::string shapes = "16384x4096,16384x32768,16384x131072,8192x262144";
  double budget_ms = 100;
  bool shapes_given = false;
  std::string layout = "rr";  // gemm: A then B, r = row-major, c = column-major
  std::string residual = "none";  // rmsnorm: residual stream dtype (none, x, fp32)
  float offset = 0.f;              // rmsnorm: weight_offset
  bool log = false;           // softmax: log_softmax
  std::string config = "auto";  // softmax, layernorm, rmsnorm, topk: auto (the plan) or all
  std::string wdtype = "fp32";  // layernorm, rmsnorm: weight (and bias) dtype (fp32 or x)
  bool bias = true;             // layernorm: with a bias
  std::string act = "gelu_tanh_approx";  // gemm-act, gemm-dact
  bool store_preact = true;              // gemm-act
  std::string softmax = "none";  // topk: none, selected or row
  bool largest = true;           // topk
  std::string path = "auto";     // topk: auto (the plan), queue, bitonic, bitonic-fit, radix (forced)
  bool dir_given = false;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--dtype") dtype = v;
    else if (k == "--shapes") shapes = v, shapes_given = true;
    else if (k == "--dir") dir = v, dir_given = true;
    else if (k == "--softmax") softmax = v;
    else if (k == "--largest") largest = !(v == "0" || v == "false");
    else if (k == "--path") path = v;
    else if (k == "--ms") budget_ms = std::atof(v.c_str());
    else if (k == "--layout") layout = v;
    else if (k == "--residual") residual = v;
    else if (k == "--offset") offset = static_cast<float>(std::atof(v.c_str()));
    else if (k == "--log") log = v == "1" || v == "true";
    else if (k == "--config") config = v;
    else if (k == "--wdtype") wdtype = v;
    else if (k == "--bias") bias = v == "1" || v == "true";
    else if (k == "--act") act = v;
    else if (k == "--store-preact") store_preact = v != "0";
    else if (k == "--ring-l2")  // -1 or one digit (else -2: refused below)
      g_ring_l2 = v == "-1" ? -1 : v.size() == 1 && v[0] >= '0' && v[0] <= '9' ? v[0] - '0' : -2;
    else {
      std::fprintf(stderr, "quack-bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (g_ring_l2 < -1 || g_ring_l2 >= quack::detail::kRingL2Count) {
    std::fprintf(stderr, "quack-bench: --ring-l2 is -1 (the plan's) or 0..%d (RingL2)\n",
                 quack::detail::kRingL2Count - 1);
    return 2;
  }
  if (residual != "none" && residual != "x" && residual != "fp32") {
    std::fprintf(stderr, "quack-bench: --residual is none, x or fp32\n");
    return 2;
  }
  const bool row_bench = cmd == "rmsnorm" || cmd == "softmax" || cmd == "layernorm";
  if (config != "auto" && config != "all" && (!row_bench || row_configs(config).empty())) {
    std::fprintf(stderr, "quack-bench: --config is auto, all or (rmsnorm, softmax, layernorm) a row entry's name\n");
    return 2;
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "quack-bench: no CUDA driver/GPU\n");
    return 3;
  }
  try {
    if (cmd == "copy") return bench_copy(budget_ms);
    if (cmd == "gemm") {
      // Default: issue 3's set, A and B row-major, then the other three layouts at 8192³.
      std::vector<std::string> lays;
      if (!shapes_given) {
        shapes = "8192x8192x8192,4096x4096x4096,2048x2048x2048,16384x14336x4096,16384x4096x14336,"
                 "16384x28672x4096,8192x128256x4096,128x8192x8192,8192x8192x128,"
                 "8192x8192x8192,8192x8192x8192,8192x8192x8192";
        lays = {"rr", "rr", "rr", "rr", "rr", "rr", "rr", "rr", "rr", "rc", "cr", "cc"};
      }
      const auto dims = parse_dims(shapes);
      for (const auto& d : dims)
        if (d.size() != 3) { std::fprintf(stderr, "quack-bench: gemm shapes are MxNxK\n"); return 2; }
      if (lays.empty()) lays.assign(dims.size(), layout);
      for (const auto& l : lays)
        if (l.size() != 2 || (l[0] != 'r' && l[0] != 'c') || (l[1] != 'r' && l[1] != 'c')) {
          std::fprintf(stderr, "quack-bench: --layout is rr, rc, cr or cc (A then B)\n");
          return 2;
        }
      return bench_gemm(dims, lays, budget_ms);
    }
    if (cmd == "topk") {
      if (softmax != "none" && softmax != "selected" && softmax != "row") {
        std::fprintf(stderr, "quack-bench: --softmax is none, selected or row\n");
        return 2;
      }
      if (!shapes_given) shapes = "65536x1024x8,65536x4096x32,16384x4096x128,16384x32768x64,4096x131072x256";
      const auto dims = parse_dims(shapes);
      for (const auto& d : dims)
        if (d.size() != 3 || d[2] < 1 || d[2] > d[1]) {
          std::fprintf(stderr, "quack-bench: topk shapes are MxNxK with 1 <= K <= N\n");
          return 2;
        }
      if (path != "auto" && path != "queue" && path != "queue-dense" && path != "queue-noprefix" &&
          path != "queue-sparse" && path != "queue-narrow" && path != "queue-sparse-narrow" &&
          path != "bitonic" && path != "bitonic-fit" && path != "bitonic-nofilter" &&
          path != "radix") {
        std::fprintf(stderr, "quack-bench: topk --path is auto, queue, queue-dense, queue-noprefix, "
                             "queue-sparse, queue-narrow, queue-sparse-narrow, bitonic, "
                             "bitonic-fit, bitonic-nofilter or radix\n");
        return 2;
      }
      return bench_topk(parse_dtype(dtype), dims, dir_given ? dir : "fwd", budget_ms, softmax,
                        largest, config == "all", path);
    }
    if (cmd == "cross-entropy") {
      if (dir == "both") dir = "all";
      if (dir != "fwd" && dir != "bwd" && dir != "fwdbwd" && dir != "all") {
        std::fprintf(stderr, "quack-bench: cross-entropy --dir is fwd, bwd, fwdbwd or all\n");
        return 2;
      }
      if (!shapes_given) shapes = "16384x4096,16384x32768,16384x131072,8192x262144";
      return bench_cross_entropy(parse_dtype(dtype), parse_shapes(shapes), dir, budget_ms,
                                 config == "all");
    }
    if (cmd == "softmax")
      return bench_softmax(parse_dtype(dtype), parse_shapes(shapes), dir, budget_ms, log,
                           row_configs(config));
    if (cmd == "layernorm") {
      const quack::DType xt = parse_dtype(dtype);
      return bench_layernorm(xt, wdtype == "x" ? xt : parse_dtype(wdtype), bias,
                             parse_shapes(shapes), dir, budget_ms, row_configs(config));
    }
    if (cmd == "gemm-act" || cmd == "gemm-dact") {
      if (!shapes_given) shapes = "16384x14336x4096,16384x4096x14336,8192x8192x8192";
      const auto dims = parse_dims(shapes);
      for (const auto& d : dims)
        if (d.size() != 3) { std::fprintf(stderr, "quack-bench: %s shapes are MxNxK\n", cmd.c_str()); return 2; }
      std::vector<quack::Activation> acts;
      if (act == "all") {
        for (int v = 0; std::strcmp(quack::activation_name(static_cast<quack::Activation>(v)), "unknown") != 0; ++v)
          if (!quack::is_gated(static_cast<quack::Activation>(v))) acts.push_back(static_cast<quack::Activation>(v));
      } else {
        quack::Activation a;
        if (!quack::activation_from_name(act.c_str(), &a)) {
          std::fprintf(stderr, "quack-bench: --act is all or an elementwise name of quack/gemm_act.h (relu, gelu_erf, ...)\n");
          return 2;
        }
        acts.push_back(a);
      }
      return bench_gemm_act(dims, acts, cmd == "gemm-dact", store_preact, budget_ms);
    }
    if (cmd == "rmsnorm") {
      const quack::DType xt = parse_dtype(dtype);
      return bench_rmsnorm(xt, wdtype == "x" ? xt : parse_dtype(wdtype), residual, offset,
                           parse_shapes(shapes), dir, budget_ms, row_configs(config));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quack-bench: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "quack-bench: unknown subcommand %s\n", cmd.c_str());
  return 2;
}
