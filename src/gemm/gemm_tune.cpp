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

constexpr int kWarmups = 2;  // launches per candidate before the timed rounds
constexpr int kRounds = 7;   // timed launches per candidate, one per round

// A start and an end event, destroyed with it (also when a timing throws).
struct EventPair {
  cudaEvent_t e[2] = {nullptr, nullptr};
  EventPair() {
    for (auto& x : e) check_cuda(cudaEventCreate(&x), "gemm (tuning)", "cudaEventCreate");
  }
  ~EventPair() {
    for (auto& x : e)
      if (x) cudaEventDestroy(x);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;

  // Milliseconds of one launch of run on p.
  float time(GemmLauncher run, const GemmProblem& p, cudaStream_t stream) {
    check_cuda(cudaEventRecord(e[0], stream), "gemm (tuning)", "cudaEventRecord");
    run(p, stream);
    check_cuda(cudaEventRecord(e[1], stream), "gemm (tuning)", "cudaEventRecord");
    check_cuda(cudaEventSynchronize(e[1]), "gemm (tuning)", "cudaEventSynchronize");
    float t = 0.f;
    check_cuda(cudaEventElapsedTime(&t, e[0], e[1]), "gemm (tuning)", "cudaEventElapsedTime");
    return t;
  }
};

// Each candidate's median milliseconds a launch on p, timed in rounds of one launch each whose
// order rotates (round r starts at candidate r mod n): the clock falls as the GPU heats towards
// its power limit, and timing the candidates one after another would give that drift to the
// last ones.
std::vector<float> time_candidates(const std::vector<GemmCandidate>& candidates,
                                   const GemmProblem& p, cudaStream_t stream) {
  const size_t n = candidates.size();
  EventPair events;
  std::vector<std::vector<float>> ms(n);
  for (const GemmCandidate& c : candidates)
    for (int i = 0; i < kWarmups; ++i) c.run(p, stream);
  for (int r = 0; r < kRounds; ++r)
    for (size_t j = 0; j < n; ++j) {
      const size_t i = (j + size_t(r)) % n;
      ms[i].push_back(events.time(candidates[i].run, p, stream));
    }
  std::vector<float> median(n);
  for (size_t i = 0; i < n; ++i) {
    std::sort(ms[i].begin(), ms[i].end());
    median[i] = ms[i][ms[i].size() / 2];
  }
  return median;
}

// Whether TMA can address an operand of p, as the epilogue decides between TMA and its plain
// loads and stores. An absent operand counts as addressable.
bool tma_addressable(const GemmProblem& p, const void* ptr, DType t, int64_t ld, int64_t batch) {
  return ptr == nullptr || tma_rows_addressable(ptr, dtype_size(t), ld, batch, p.l > 1);
}

}  // namespace

size_t gemm_tune_pick(const std::vector<float>& ms, int incumbent, float margin) {
  size_t best = 0;
  for (size_t i = 1; i < ms.size(); ++i)
    if (ms[i] < ms[best]) best = i;
  if (incumbent < 0 || size_t(incumbent) >= ms.size()) return best;
  const size_t inc = size_t(incumbent);
  return ms[best] < ms[inc] * (1.f - margin) ? best : inc;
}

std::string gemm_tune_key(const GemmProblem& p, int sms, int cc) {
  const std::string dtypes = std::string(short_name(p.ab_dtype)) + "." + short_name(p.ab_dtype) + ">" +
                             short_name(p.d_dtype);
  // C's dtype where C is read ("-" otherwise): an fp32 C into a bf16 D is another kernel than a
  // bf16 C (gemm_dact's and gemm_dgated's preact is always read as C).
  // " io:plain" where C, D or D1 is out of TMA's reach: the epilogue then loads and stores
  // every subtile by plain instructions, another kernel to time.
  const bool plain = !tma_addressable(p, p.c, p.c_dtype, p.ldc, p.batch_c) ||
                     !tma_addressable(p, p.d, p.d_dtype, p.ldd, p.batch_d) ||
                     !tma_addressable(p, p.d1, p.d1_dtype, p.ldd1, p.batch_d1);
  const std::string majors = std::string("A:") + (p.a_major == GemmMajor::kK ? "k" : "m") +
                             " B:" + (p.b_major == GemmMajor::kK ? "k" : "m") +
                             " C:" + (p.c ? short_name(p.c_dtype) : "-") + (plain ? " io:plain" : "");
  const bool two = gemm_epilogue_outputs(p.epilogue) == 2;
  const std::string epi =
      std::string(gemm_epilogue_name(p.epilogue)) + (two ? std::string(",") + short_name(p.d1_dtype) : "");
  return autotune_key(cc, sms, p.m, p.n, p.k, p.l, dtypes, majors, epi);
}

GemmLauncher gemm_tuned_launcher(const GemmProblem& p, const std::vector<GemmCandidate>& candidates,
                                 GemmLauncher untuned, cudaStream_t stream) {
  if (candidates.size() == 1) return candidates[0].run;
  // The device in the key: the fastest tile depends on the SM count (waves of tiles) and the
  // architecture, and one cache file serves every GPU of the machine (and may be shared).
  int major = 0, minor = 0;
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, p.device), "gemm",
             "cudaDeviceGetAttribute");
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, p.device), "gemm",
             "cudaDeviceGetAttribute");
  const std::string key = gemm_tune_key(p, sm_count(p.device), major * 10 + minor);
  if (auto hit = cache().lookup(key))
    for (const GemmCandidate& c : candidates)
      if (c.name == *hit) return c.run;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream, &capture), "gemm", "cudaStreamIsCapturing");
  // Never time in a capture (no launch may be recorded besides the caller's): the call runs what
  // it would run untuned (the tile rule or QUACK_GEMM_TILE), not candidates[0] (the group's base,
  // e.g. 128x256, which can be far from the rule's pick); the next uncaptured call tunes.
  if (capture != cudaStreamCaptureStatusNone) return untuned;

  // Scratch outputs spanning the problem's D and D1 (kernel terms: row-major (L, M, N) with their
  // leading and batch strides) at the caller's addresses modulo 256 bytes, so a D that TMA cannot
  // address is timed on the plain stores it will take; C stays the caller's (read only), also
  // when C is D.
  auto span_bytes = [&](int64_t ld, int64_t batch, DType t) {
    return (size_t(p.l - 1) * size_t(batch) + size_t(p.m - 1) * size_t(ld) + size_t(p.n)) * size_t(dtype_size(t));
  };
  const size_t d_mod = reinterpret_cast<uintptr_t>(p.d) % 256, d1_mod = reinterpret_cast<uintptr_t>(p.d1) % 256;
  const size_t d_end = p.d ? d_mod + span_bytes(p.ldd, p.batch_d, p.d_dtype) : 0;
  const size_t d1_end = p.d1 ? d1_mod + span_bytes(p.ldd1, p.batch_d1, p.d1_dtype) : 0;
  const size_t d1_base = (d_end + 255) / 256 * 256;
  void* scratch = nullptr;
  check_cuda(cudaMalloc(&scratch, d1_base + d1_end), "gemm (tuning)", "cudaMalloc");
  GemmProblem q = p;
  if (p.d) q.d = static_cast<char*>(scratch) + d_mod;
  if (p.d1) q.d1 = static_cast<char*>(scratch) + d1_base + d1_mod;
  std::vector<float> ms;
  try {
    ms = time_candidates(candidates, q, stream);
  } catch (...) {
    cudaFree(scratch);
    throw;
  }
  cudaFree(scratch);
  int incumbent = -1;  // the untuned choice, where it is a candidate
  for (size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].run == untuned) incumbent = int(i);
  const size_t best = gemm_tune_pick(ms, incumbent, kTuneMargin);
  cache().store(key, candidates[best].name);
  return candidates[best].run;
}

}  // namespace quack::detail
