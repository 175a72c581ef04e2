// Simple-path forward instances for x = __half, no residual (see rmsnorm_fwd_simple.cuh).
#include "norm/rmsnorm_fwd_simple.cuh"

namespace quack::detail {

template void launch_rmsnorm_fwd_simple_t<__half, false>(const RmsNormFwdParams&, int, int,
                                                                 cudaStream_t);

}  // namespace quack::detail
