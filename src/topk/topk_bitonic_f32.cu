// The register (bitonic) top-k kernels for x = float (truncated entries and the exactness
// fix-up of topk_bitonic_kernel.cuh): lists of 8 and 16 entries, 16 to 64 elements per thread
// (6 instances); lists of 32 in topk_bitonic_f32_l32.cu (compile time).
#include "topk/topk_bitonic_kernel.cuh"
#include "topk/topk_internal.h"

namespace quack::detail {

void topk_bitonic_f32(const TopkPlan& plan, const TopkParams& p, cudaStream_t stream,
                      const char* where) {
  if (plan.list == 32) return topk_bitonic_f32_l32(plan, p, stream, where);
  launch_topk_bitonic<float, false, 1 | 2>(plan, p, stream, where);
}

}  // namespace quack::detail
