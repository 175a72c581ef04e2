// The radix-select top-k kernels for x = float with uint64_t entries: 8, 16 and 32
// elements per thread (3 instances).
#include "topk/topk_internal.h"
#include "topk/topk_radix_kernel.cuh"

namespace quack::detail {

void topk_radix_f32(const TopkPlan& plan, const TopkParams& p, cudaStream_t stream,
                   const char* where) {
  launch_topk_radix<float, uint64_t>(plan, p, stream, where);
}

}  // namespace quack::detail
