// Vector-path backward instances for x = float without dbias (see rmsnorm_bwd_vec.cuh).
#include "norm/rmsnorm_bwd_vec.cuh"

namespace quack::detail {

template RmsNormBwdKernel rmsnorm_bwd_vec_kernel_t<float>(bool, bool);

}  // namespace quack::detail
