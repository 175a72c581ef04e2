// Vector-path backward instances for x = __nv_bfloat16 with dbias (see rmsnorm_bwd_vec.cuh).
#include "norm/rmsnorm_bwd_vec.cuh"

namespace quack::detail {

template RmsNormBwdKernel rmsnorm_bwd_vec_dbias_kernel_t<__nv_bfloat16>(bool);

}  // namespace quack::detail
