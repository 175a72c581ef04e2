// The register (bitonic) top-k kernels for x = float with N = T·E, lists of 32 entries, 32
// elements per thread (1 instance; topk_bitonic_fit_f32.cu dispatches here).
#include "topk/topk_bitonic_kernel.cuh"
#include "topk/topk_internal.h"

namespace quack::detail {

void topk_bitonic_fit_f32_l32(const TopkPlan& plan, const TopkParams& p, cudaStream_t stream,
                              const char* where) {
  launch_topk_bitonic<float, true, 4>(plan, p, stream, where);
}

}  // namespace quack::detail
