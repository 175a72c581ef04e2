// Row-block backward instances for x = __half, fp32 weight (see rmsnorm_bwd_rowblock.cuh).
#include "norm/rmsnorm_bwd_rowblock.cuh"

namespace quack::detail {

template void launch_rmsnorm_bwd_rowblock_w<__half, float, true>(const RmsNormBwdParams&, int,
                                                         const RowBlockBwdGrid&, cudaStream_t);

}  // namespace quack::detail
