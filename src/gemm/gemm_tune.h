// Autotuning of the GEMM's kernel instance (GemmArgs::tuned; host only).
//
// On first use per key (device, M, N, K rounded up to powers of two, L, dtypes, majors, C's
// dtype, epilogue) the
// candidates -- every compiled instance of the problem's dtypes and majors -- are timed on the
// caller's stream (2 warm-up launches each, then 7 rounds of one timed launch each in an order
// that rotates between rounds; medians, CUDA events) writing a scratch D, so the caller's D is
// never written while tuning (in-place C = D stays read-only); the fastest one's name is stored
// in the AutotuneCache (memory and disk, src/gemm/autotune_cache.h), unless it is less than
// kTuneMargin faster than the untuned choice (the tile rule's; QUACK_GEMM_TILE's where that is
// set, so a forced tile can be what the cache keeps), which then stays. While
// the stream is capturing a CUDA graph nothing is timed: the cached choice, else the untuned
// choice (the tile rule's, as GemmArgs::tuned = false). Method: QuACK 0.2.0's autotuner (first call per key, disk cache),
// CUTLASS's profiler for the timing loop.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "gemm/gemm_problem.h"

namespace quack::detail {


struct GemmCandidate {
  std::string name;  // e.g. "128x256", "128x64c1"
  GemmLauncher run;
};

/// How much faster than the untuned choice a candidate must time to replace it. Run AV3 (H100)
/// read the tuned pick 1.9 / 2.1 % slower than the rule's by do_bench at 16384 x 4096 x 14336
/// and 8192^3 (10 % faster at 4096^3; the picks' names not recorded): a pick within a few
/// launches' spread of the rule's is not worth a change of tile.
inline constexpr float kTuneMargin = 0.01f;

/// The index of ms (milliseconds per candidate) to keep: the fastest, unless `incumbent` (the
/// untuned choice's index; -1 for none) is within `margin` of it (ms[best] ≥ ms[incumbent] ·
/// (1 − margin)). ms must not be empty.
size_t gemm_tune_pick(const std::vector<float>& ms, int incumbent, float margin);

/// Key of a problem in the autotuning cache on a device of `sms` SMs and compute capability `cc`
/// (major · 10 + minor, e.g. 90), see autotune_key.
std::string gemm_tune_key(const GemmProblem& p, int sms, int cc);

/// The launcher to use for p: candidates[0] when there is one candidate; else the cached or
/// freshly timed choice, or `untuned` (what the call runs without tuning: the tile rule's pick)
/// while `stream` is capturing a graph and the cache has no entry (see the file comment). Throws
/// CudaError when a CUDA call fails.
GemmLauncher gemm_tuned_launcher(const GemmProblem& p, const std::vector<GemmCandidate>& candidates,
                                 GemmLauncher untuned, cudaStream_t stream);

}  // namespace quack::detail
