// The register (bitonic) top-k kernels for x = float with N = T·E (the plan's `fit`
// configuration: no tail loads, no column masks): lists of 8 and 16 entries, 16 to 64
// elements per thread, and 128 for lists of 8 (topk_bitonic_max_fit_elems: forced only), and
// the candidate-filter instance of lists of 8 at E = 64 (TopkPlan::filter; 8 instances); lists
// of 32 in topk_bitonic_fit_f32_l32.cu.
#include "topk/topk_bitonic_kernel.cuh"
#include "topk/topk_internal.h"

namespace quack::detail {

void topk_bitonic_fit_f32(const TopkPlan& plan, const TopkParams& p, cudaStream_t stream,
                          const char* where) {
  if (plan.list == 32) return topk_bitonic_fit_f32_l32(plan, p, stream, where);
  launch_topk_bitonic<float, true, 1 | 2>(plan, p, stream, where);
}

}  // namespace quack::detail
