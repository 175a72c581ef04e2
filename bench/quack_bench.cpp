// quack-bench: C++ timings of the library's kernels. One subcommand per op; JSON lines out.
//
//   quack-bench copy                         4 GiB device-to-device copy (the roofline)
//   quack-bench rmsnorm [--dtype bf16|fp16|fp32] [--shapes 16384x4096,8192x262144]
//                       [--dir fwd|bwd|both] [--ms 100]
//   quack-bench rmsnorm-sweep [same options]   every geometry knob setting (tuning)
//
// Method (device tool METHOD.md): warm-up, then CUDA events around each launch, median over
// the repeats; inputs rotate over enough buffer sets to exceed 2x the L2, so no run reads a
// warm cache. Bytes (QuACK's model): fwd 2·M·N·elt (x read, y written), bwd 3·M·N·elt (x and
// dy read, dx written); weights, rstd and partials are not counted.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "norm/rmsnorm_tuning.h"
#include "quack/quack.h"

namespace {

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
          const char* extra = "") {
  std::printf("{\"op\": \"%s\", \"impl\": \"quack\", \"dtype\": \"%s\", \"M\": %lld, \"N\": %lld, "
              "\"ms\": %.5f, \"tbps\": %.4f%s}\n",
              op, dtype, M, N, ms, bytes / (ms * 1e-3) / 1e12, extra);
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
                  const std::string& dir, double budget_ms, bool sweep) {
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
    if (dir != "bwd") {
      const auto def = quack::detail::rmsnorm_fwd_knobs(dt);
      for (const auto& k : knob_grid(def, sweep, vec, 16 * vec)) {
        double ms = time_median(
            [&](int s) { quack::detail::rmsnorm_fwd_with_knobs(fwd_args(s), k, nullptr); }, sets,
            budget_ms);
        emit("rmsnorm_fwd", name, M, N, ms, 2.0 * mn * es, sweep ? knob_json(k).c_str() : "");
      }
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
    std::fprintf(stderr, "usage: quack-bench copy|rmsnorm [--dtype bf16] [--shapes MxN,...] [--dir fwd|bwd|both] [--ms 100]\n");
    return 2;
  }
  std::string cmd = argv[1], dtype = "bf16", dir = "both";
  std::string shapes = "16384x4096,16384x32768,16384x131072,8192x262144";
  double budget_ms = 100;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--dtype") dtype = v;
    else if (k == "--shapes") shapes = v;
    else if (k == "--dir") dir = v;
    else if (k == "--ms") budget_ms = std::atof(v.c_str());
    else {
      std::fprintf(stderr, "quack-bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "quack-bench: no CUDA device\n");
    return 3;
  }
  try {
    if (cmd == "copy") return bench_copy(budget_ms);
    if (cmd == "rmsnorm" || cmd == "rmsnorm-sweep")
      return bench_rmsnorm(parse_dtype(dtype), parse_shapes(shapes), dir, budget_ms,
                           cmd == "rmsnorm-sweep");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quack-bench: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "quack-bench: unknown subcommand %s\n", cmd.c_str());
  return 2;
}
