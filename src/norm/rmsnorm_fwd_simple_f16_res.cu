// Simple-path forward instances for x = __half, with a residual (see rmsnorm_fwd_simple.cuh).
#include "norm/rmsnorm_fwd_simple.cuh"

namespace quack::detail {

template void launch_rmsnorm_fwd_simple_t<__half, true>(const RmsNormFwdParams&, int, int,
                                                                 cudaStream_t);

}  // namespace quack::detail
