// Simple-path backward instances for x = __nv_bfloat16, weight in x's dtype (see rmsnorm_bwd_simple.cuh).
#include "norm/rmsnorm_bwd_simple.cuh"

namespace quack::detail {

template int64_t rmsnorm_bwd_simple_resident_w<__nv_bfloat16, __nv_bfloat16, true>(const RmsNormBwdParams&, int,
                                                                 int, int);
template void launch_rmsnorm_bwd_simple_w<__nv_bfloat16, __nv_bfloat16, true>(const RmsNormBwdParams&, int, int,
                                                           int64_t, cudaStream_t);

}  // namespace quack::detail
