// Vector-path backward instances for x = float with dbias (see rmsnorm_bwd_vec.cuh).
#include "norm/rmsnorm_bwd_vec.cuh"

namespace quack::detail {

template RmsNormBwdKernel rmsnorm_bwd_vec_dbias_kernel_t<float>(bool);

}  // namespace quack::detail
