// Simple-path backward instances for x = __half, weight in x's dtype (see rmsnorm_bwd_simple.cuh).
#include "norm/rmsnorm_bwd_simple.cuh"

namespace quack::detail {

template int64_t rmsnorm_bwd_simple_resident_w<__half, __half, true>(const RmsNormBwdParams&, int,
                                                                 int, int);
template void launch_rmsnorm_bwd_simple_w<__half, __half, true>(const RmsNormBwdParams&, int, int,
                                                           int64_t, cudaStream_t);

}  // namespace quack::detail
