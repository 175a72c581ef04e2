// Simple-path backward instances for x = __half (see rmsnorm_bwd_simple.cuh).
#include "norm/rmsnorm_bwd_simple.cuh"

namespace quack::detail {

template int64_t rmsnorm_bwd_simple_resident_t<__half>(const RmsNormBwdParams&, int, int, int);
template void launch_rmsnorm_bwd_simple_t<__half>(const RmsNormBwdParams&, int, int, int64_t,
                                              cudaStream_t);

}  // namespace quack::detail
