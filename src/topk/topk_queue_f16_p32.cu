// The warp-queue top-k kernels for x = __half with uint32_t entries, one per queue size.
#include "topk/topk_internal.h"
#include "topk/topk_queue_kernel.cuh"

namespace quack::detail {

void topk_queue_f16_p32(const TopkPlan& plan, const TopkParams& p, cudaStream_t stream,
                        const char* where) {
  launch_topk_queue<__half, uint32_t>(plan, p, stream, where);
}

}  // namespace quack::detail
