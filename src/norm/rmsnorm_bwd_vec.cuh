// Vector-path backward instances of one x dtype T (rmsnorm_bwd_kernel.cuh), compiled per dtype
// in rmsnorm_bwd_{bf16,f16,f32}.cu so the instances build in parallel TUs (each under the
// row-kernel compile budget); rmsnorm_bwd.cu picks the dtype.
#pragma once

#include "norm/rmsnorm_bwd_kernel.cuh"

namespace quack::detail {

/// The instance for x dtype T, dweight?, dbias? and the plain variant (rmsnorm_bwd_plain;
/// plain instances exist without dbias only, so `plain` is ignored when has_db).
template <typename T>
RmsNormBwdKernel rmsnorm_bwd_vec_kernel_t(bool has_dw, bool has_db, bool plain) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kV = kNormBwdVectorsPerThread;
  if (has_db)
    return has_dw ? rmsnorm_bwd_kernel<T, kVec, kV, true, true>
                  : rmsnorm_bwd_kernel<T, kVec, kV, false, true>;
  if (plain)
    return has_dw ? rmsnorm_bwd_kernel<T, kVec, kV, true, false, true>
                  : rmsnorm_bwd_kernel<T, kVec, kV, false, false, true>;
  return has_dw ? rmsnorm_bwd_kernel<T, kVec, kV, true, false>
                : rmsnorm_bwd_kernel<T, kVec, kV, false, false>;
}

}  // namespace quack::detail
