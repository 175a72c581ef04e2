// quack-bench: C++ timings of the library's kernels. One subcommand per op; JSON lines out.
//
//   quack-bench copy                         4 GiB device-to-device copy (the roofline)
//   quack-bench rmsnorm [--dtype bf16|fp16|fp32] [--shapes 16384x4096,8192x262144]
//                       [--dir fwd|bwd|both] [--ms 100] [--fwd-path staged|simple|both|simple-all]
//                       forward path (rmsnorm_tuning.h): default the library's (QUACK_RMSNORM_FWD);
//                       both = staged then simple per shape ("impl": "quack" / "quack-simple");
//                       simple-all = every compiled simple instance that takes the shape
//                       ("config": its name)
//   quack-bench rmsnorm-sweep [same options]   every geometry knob setting (tuning)
//   quack-bench softmax [--dtype bf16|fp16|fp32] [--shapes MxN,...] [--dir fwd|bwd|both]
//                       [--log 0|1] [--config auto|all] [--ms 100]
//                       softmax (--log 1: log_softmax), out and dx in x's dtype; "config": the
//                       row skeleton's plan (row_plan_name); all = every configuration of
//                       src/row/row_config.h that takes the shape, and the general policy
//   quack-bench gemm [--shapes 8192x8192x8192,...] [--layout rr|rc|cr|cc] [--ms 300]
//                                            bf16 GEMM beside cuBLAS (default: issue 3's set)
//     (env QUACK_GEMM_TILE_N forces a tile; QUACK_BENCH_TILE_COUNTER=1 uses the dynamic scheduler)
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
// read, y written), bwd 3·M·N·elt (y and dy read, dx written).
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
#include <vector>

#include "norm/rmsnorm_tuning.h"
#include "row/row_config.h"
#include "row/row_op.h"
#include "softmax/softmax_internal.h"
#include "quack/gemm.h"
#include "quack/quack.h"

cudaError_t gpu_busy(double us);  // gpu_busy.cu

namespace {

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

// Geometry knob settings to time: the defaults first, then a grid around them.
std::vector<quack::detail::RowConfigKnobs> knob_grid(quack::detail::RowConfigKnobs def, bool sweep,
                                                     int vec, int max_values) {
  std::vector<quack::detail::RowConfigKnobs> out{def};
  if (!sweep) return out;
  for (int vpt : {2, 4, 8, 16})
    for (int row_threads : {64, 128, 256, 512})
      for (int min_cta : {128, 256, 512}) {
        auto k = def;
        k.values_per_thread = vpt * vec;
        k.max_cta_row_threads = row_threads;
        k.min_cta_threads = min_cta;
        if (k.values_per_thread > max_values || k.min_cta_threads > k.max_cta_threads) continue;
        out.push_back(k);
      }
  return out;
}

std::string knob_json(const quack::detail::RowConfigKnobs& k) {
  return ", \"values_per_thread\": " + std::to_string(k.values_per_thread) +
         ", \"max_cta_row_threads\": " + std::to_string(k.max_cta_row_threads) +
         ", \"min_cta_threads\": " + std::to_string(k.min_cta_threads);
}

int bench_rmsnorm(quack::DType dt, const std::vector<std::pair<long long, long long>>& shapes,
                  const std::string& dir, double budget_ms, bool sweep,
                  const std::string& fwd_path) {
  using quack::detail::RmsNormFwdPath;
  const char* name = quack::dtype_name(dt);
  const size_t es = quack::dtype_size(dt);
  for (auto [M, N] : shapes) {
    const size_t mn = static_cast<size_t>(M) * N;
    // Buffer sets: enough that one pass over all of them exceeds 2x a 60 MB L2.
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
    Buffer w(N * 4), rstd(M * 4), dw(N * 4);
    fill_random(w.p, N, quack::DType::kFloat32, 7);
    auto fwd_args = [&](int s) {
      quack::RmsNormFwdArgs a;
      a.x = quack::TensorRef::matrix(x[s]->p, dt, M, N);
      a.weight = quack::TensorRef::vector(w.p, quack::DType::kFloat32, N);
      a.out = quack::TensorRef::matrix(y[s]->p, dt, M, N);
      a.rstd = quack::TensorRef::vector(rstd.p, quack::DType::kFloat32, M);
      return a;
    };
    const int vec = 16 / static_cast<int>(es);
    // One forward timing on `path` (simple_config as rmsnorm_fwd_with_path); "impl" says which
    // kernel ran: quack (staged) or quack-simple.
    auto time_fwd = [&](RmsNormFwdPath path, int simple_config) {
      const int cfg = path == RmsNormFwdPath::kSimple
                          ? quack::detail::rmsnorm_fwd_simple_config(fwd_args(0), simple_config)
                          : -1;
      double ms = time_median(
          [&](int s) {
            quack::detail::rmsnorm_fwd_with_path(fwd_args(s), path, simple_config, nullptr);
          },
          sets, budget_ms);
      const std::string extra =
          cfg >= 0 ? std::string(", \"config\": \"") + quack::detail::kSimpleFwdConfigs[cfg].name + "\"" : "";
      emit("rmsnorm_fwd", name, M, N, ms, 2.0 * mn * es, extra.c_str(),
           cfg >= 0 ? "quack-simple" : "quack");
    };
    if (dir != "bwd" && sweep) {
      const auto def = quack::detail::rmsnorm_fwd_knobs(dt);
      for (const auto& k : knob_grid(def, sweep, vec, 16 * vec)) {
        double ms = time_median(
            [&](int s) { quack::detail::rmsnorm_fwd_with_knobs(fwd_args(s), k, nullptr); }, sets,
            budget_ms);
        emit("rmsnorm_fwd", name, M, N, ms, 2.0 * mn * es, knob_json(k).c_str());
      }
    } else if (dir != "bwd") {
      if (fwd_path.empty()) {
        time_fwd(quack::detail::rmsnorm_fwd_path(), -1);
      } else if (fwd_path == "staged" || fwd_path == "both") {
        time_fwd(RmsNormFwdPath::kStaged, -1);
      }
      if (fwd_path == "simple" || fwd_path == "both") time_fwd(RmsNormFwdPath::kSimple, -1);
      if (fwd_path == "simple-all")
        for (int c = 0; c < quack::detail::kSimpleFwdConfigCount; ++c)
          if (quack::detail::rmsnorm_fwd_simple_config(fwd_args(0), c) == c)
            time_fwd(RmsNormFwdPath::kSimple, c);
    }
    if (dir != "fwd") {
      quack::rmsnorm_fwd(fwd_args(0), nullptr);  // a real rstd
      auto bwd_args = [&](int s) {
        quack::RmsNormBwdArgs a;
        a.x = quack::TensorRef::matrix(x[s]->p, dt, M, N);
        a.weight = quack::TensorRef::vector(w.p, quack::DType::kFloat32, N);
        a.dout = quack::TensorRef::matrix(dy[s]->p, dt, M, N);
        a.rstd = quack::TensorRef::vector(rstd.p, quack::DType::kFloat32, M);
        a.dx = quack::TensorRef::matrix(dx[s]->p, dt, M, N);
        a.dweight = quack::TensorRef::vector(dw.p, quack::DType::kFloat32, N);
        return a;
      };
      const auto def = quack::detail::rmsnorm_bwd_knobs(dt);
      for (const auto& k : knob_grid(def, sweep, vec, def.values_per_thread)) {
        const size_t ws_bytes = quack::detail::rmsnorm_bwd_workspace_size_with_knobs(bwd_args(0), k);
        Buffer ws(ws_bytes);
        double ms = time_median(
            [&](int s) {
              quack::detail::rmsnorm_bwd_with_knobs(bwd_args(s), k, ws.p, ws_bytes, nullptr);
            },
            sets, budget_ms);
        emit("rmsnorm_bwd", name, M, N, ms, 3.0 * mn * es, sweep ? knob_json(k).c_str() : "");
      }
    }
  }
  return 0;
}

// softmax / log_softmax forward and backward, every tensor in `dt`, contiguous. all_configs:
// every configuration of the row skeleton's table that takes the shape, then the general
// policy (forced through the internal call, quack::detail::run_row_call); otherwise the public
// functions with the library's plan.
int bench_softmax(quack::DType dt, const std::vector<std::pair<long long, long long>>& shapes,
                  const std::string& dir, double budget_ms, bool log, bool all_configs) {
  namespace d = quack::detail;
  const char* name = quack::dtype_name(dt);
  const size_t es = quack::dtype_size(dt);
  const std::string fwd_op = std::string(log ? "log_softmax" : "softmax") + "_fwd";
  const std::string bwd_op = std::string(log ? "log_softmax" : "softmax") + "_bwd";
  std::vector<int> configs = {-1};
  if (all_configs) {
    configs.clear();
    for (int c = 0; c <= d::kRowConfigCount; ++c) configs.push_back(c);  // last: general
  }
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
      const d::RowPlan plan = d::plan_row_call(d::softmax_fwd_call(fwd_args(0), log), cfg);
      if (plan.policy == d::RowPolicy::kNone) continue;
      const double ms = time_median(
          [&](int s) {
            if (cfg < 0) run_fwd(s);
            else d::run_row_call(d::softmax_fwd_call(fwd_args(s), log), plan, nullptr);
          },
          sets, budget_ms);
      const std::string extra =
          std::string(", \"config\": \"") + d::row_plan_name(plan, plan_name, sizeof(plan_name)) + "\"";
      emit(fwd_op.c_str(), name, M, N, ms, 2.0 * mn * es, extra.c_str());
    }
    if (dir == "fwd") continue;
    for (int s = 0; s < sets; ++s) run_fwd(s);  // y: real forward outputs
    for (int cfg : configs) {
      const d::RowPlan plan = d::plan_row_call(d::softmax_bwd_call(bwd_args(0), log), cfg);
      if (plan.policy == d::RowPolicy::kNone) continue;
      const double ms = time_median(
          [&](int s) {
            if (cfg < 0) run_bwd(s);
            else d::run_row_call(d::softmax_bwd_call(bwd_args(s), log), plan, nullptr);
          },
          sets, budget_ms);
      const std::string extra =
          std::string(", \"config\": \"") + d::row_plan_name(plan, plan_name, sizeof(plan_name)) + "\"";
      emit(bwd_op.c_str(), name, M, N, ms, 3.0 * mn * es, extra.c_str());
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

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: quack-bench copy|rmsnorm|rmsnorm-sweep [--dtype bf16|fp16|fp32] [--shapes MxN,...] "
                 "[--dir fwd|bwd|both] [--ms 100] [--fwd-path staged|simple|both|simple-all]\n"
                 "       quack-bench softmax [--dtype bf16|fp16|fp32] [--shapes MxN,...] [--dir fwd|bwd|both] "
                 "[--log 0|1] [--config auto|all] [--ms 100]\n"
                 "       quack-bench gemm [--shapes MxNxK,...] [--layout rr|rc|cr|cc] [--ms 300]\n");
    return 2;
  }
  std::string cmd = argv[1], dtype = "bf16", dir = "both";
  std::string shapes = "16384x4096,16384x32768,16384x131072,8192x262144";
  double budget_ms = 100;
  bool shapes_given = false;
  std::string layout = "rr";  // gemm: A then B, r = row-major, c = column-major
  std::string fwd_path;       // rmsnorm: empty = the library's default path
  bool log = false;           // softmax: log_softmax
  std::string config = "auto";  // softmax: auto (the plan) or all
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--dtype") dtype = v;
    else if (k == "--shapes") shapes = v, shapes_given = true;
    else if (k == "--dir") dir = v;
    else if (k == "--ms") budget_ms = std::atof(v.c_str());
    else if (k == "--layout") layout = v;
    else if (k == "--fwd-path") fwd_path = v;
    else if (k == "--log") log = v == "1" || v == "true";
    else if (k == "--config") config = v;
    else {
      std::fprintf(stderr, "quack-bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (!fwd_path.empty() && fwd_path != "staged" && fwd_path != "simple" && fwd_path != "both" &&
      fwd_path != "simple-all") {
    std::fprintf(stderr, "quack-bench: --fwd-path is staged, simple, both or simple-all\n");
    return 2;
  }
  if (config != "auto" && config != "all") {
    std::fprintf(stderr, "quack-bench: --config is auto or all\n");
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
    if (cmd == "softmax")
      return bench_softmax(parse_dtype(dtype), parse_shapes(shapes), dir, budget_ms, log,
                           config == "all");
    if (cmd == "rmsnorm" || cmd == "rmsnorm-sweep")
      return bench_rmsnorm(parse_dtype(dtype), parse_shapes(shapes), dir, budget_ms,
                           cmd == "rmsnorm-sweep", fwd_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quack-bench: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "quack-bench: unknown subcommand %s\n", cmd.c_str());
  return 2;
}
