// Row-block backward instances for x = __nv_bfloat16, weight in x's dtype (see rmsnorm_bwd_rowblock.cuh).
#include "norm/rmsnorm_bwd_rowblock.cuh"

namespace quack::detail {

template void launch_rmsnorm_bwd_rowblock_w<__nv_bfloat16, __nv_bfloat16, true>(const RmsNormBwdParams&, int,
                                                         const RowBlockBwdGrid&, cudaStream_t);

}  // namespace quack::detail
