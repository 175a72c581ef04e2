// The warp-queue top-k kernels for x = __nv_bfloat16 with uint64_t entries, one per queue size.
#include "topk/topk_internal.h"
#include "topk/topk_queue_kernel.cuh"

namespace quack::detail {

void topk_queue_bf16_p64(const TopkPlan& plan, const TopkParams& p, cudaStream_t stream,
                         const char* where) {
  launch_topk_queue<__nv_bfloat16, uint64_t>(plan, p, stream, where);
}

}  // namespace quack::detail
