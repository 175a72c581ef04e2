#include "gemm/gemm_tune.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "common/launch.h"
#include "gemm/autotune_cache.h"

namespace quack::detail {

namespace {

AutotuneCache& cache() {
  static AutotuneCache c;  // path from QUACK_CACHE_DIR / XDG at first use
  return c;
}

const char* short_name(DType t) {
  return t == DType::kBFloat16 ? "bf16" : t == DType::kFloat16 ? "f16" : "f32";
}

// Median milliseconds of one launch of run on p (events on stream; warm-up first).
float time_launches(GemmLauncher run, const GemmProblem& p, cudaStream_t stream) {
  cudaEvent_t e[2];
  for (auto& x : e) check_cuda(cudaEventCreate(&x), "gemm (tuning)", "cudaEventCreate");
  for (int i = 0; i < 2; ++i) run(p, stream);
  std::vector<float> ms;
  for (int i = 0; i < 5; ++i) {
    check_cuda(cudaEventRecord(e[0], stream), "gemm (tuning)", "cudaEventRecord");
    run(p, stream);
    check_cuda(cudaEventRecord(e[1], stream), "gemm (tuning)", "cudaEventRecord");
    check_cuda(cudaEventSynchronize(e[1]), "gemm (tuning)", "cudaEventSynchronize");
    float t = 0.f;
    check_cuda(cudaEventElapsedTime(&t, e[0], e[1]), "gemm (tuning)", "cudaEventElapsedTime");
    ms.push_back(t);
  }
  for (auto& x : e) cudaEventDestroy(x);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

std::string gemm_tune_key(const GemmProblem& p) {
  const std::string dtypes = std::string(short_name(p.ab_dtype)) + "." + short_name(p.ab_dtype) + ">" +
                             short_name(p.d_dtype);
  const std::string majors = std::string("A:") + (p.a_major == GemmMajor::kK ? "k" : "m") +
                             " B:" + (p.b_major == GemmMajor::kK ? "k" : "m");
  return autotune_key(p.m, p.n, p.k, p.l, dtypes, majors, p.c ? "lincomb+c" : "lincomb");
}

GemmLauncher gemm_tuned_launcher(const GemmProblem& p, const std::vector<GemmCandidate>& candidates,
                                 cudaStream_t stream) {
  if (candidates.size() == 1) return candidates[0].run;
  const std::string key = gemm_tune_key(p);
  if (auto hit = cache().lookup(key))
    for (const GemmCandidate& c : candidates)
      if (c.name == *hit) return c.run;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream, &capture), "gemm", "cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone) return candidates[0].run;  // never time in a capture

  // Scratch D spanning the problem's D (kernel terms: row-major (L, M, N) with ldd, batch_d).
  const size_t es = dtype_size(p.d_dtype);
  const size_t span = size_t(p.l - 1) * size_t(p.batch_d) + size_t(p.m - 1) * size_t(p.ldd) + size_t(p.n);
  void* scratch = nullptr;
  check_cuda(cudaMalloc(&scratch, span * es), "gemm (tuning)", "cudaMalloc");
  GemmProblem q = p;
  q.d = scratch;  // q.c stays the caller's C (read only), also when C is D
  size_t best = 0;
  float best_ms = 0.f;
  try {
    for (size_t i = 0; i < candidates.size(); ++i) {
      const float ms = time_launches(candidates[i].run, q, stream);
      if (i == 0 || ms < best_ms) best = i, best_ms = ms;
    }
  } catch (...) {
    cudaFree(scratch);
    throw;
  }
  cudaFree(scratch);
  cache().store(key, candidates[best].name);
  return candidates[best].run;
}

}  // namespace quack::detail
