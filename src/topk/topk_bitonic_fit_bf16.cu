// The register (bitonic) top-k kernels for x = __nv_bfloat16 with N = T·E (the plan's
// `fit` configuration: no tail loads, no column masks): lists of 8, 16 and 32 entries, 16 to
// 128 elements per thread (11 instances).
#include "topk/topk_bitonic_kernel.cuh"
#include "topk/topk_internal.h"

namespace quack::detail {

void topk_bitonic_fit_bf16(const TopkPlan& plan, const TopkParams& p, cudaStream_t stream,
                         const char* where) {
  launch_topk_bitonic<__nv_bfloat16, true>(plan, p, stream, where);
}

}  // namespace quack::detail
