// Vector-path backward instances for x = __nv_bfloat16 without dbias (see rmsnorm_bwd_vec.cuh).
#include "norm/rmsnorm_bwd_vec.cuh"

namespace quack::detail {

template RmsNormBwdKernel rmsnorm_bwd_vec_kernel_t<__nv_bfloat16>(bool, bool);

}  // namespace quack::detail
