// Vector-path backward instances of one x dtype T (rmsnorm_bwd_kernel.cuh), compiled per dtype
// and dbias flag in rmsnorm_bwd_{bf16,f16,f32}{,_dbias}.cu so the instances build in parallel
// TUs (each well under the row-kernel compile budget, also in a 2-job build); rmsnorm_bwd.cu
// picks one.
#pragma once

#include "norm/rmsnorm_bwd_kernel.cuh"

namespace quack::detail {

/// The instance for x dtype T without dbias: dweight? and the plain variant (rmsnorm_bwd_plain).
template <typename T>
RmsNormBwdKernel rmsnorm_bwd_vec_kernel_t(bool has_dw, bool plain) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kV = kNormBwdVectorsPerThread;
  if (plain)
    return has_dw ? rmsnorm_bwd_kernel<T, kVec, kV, true, false, true>
                  : rmsnorm_bwd_kernel<T, kVec, kV, false, false, true>;
  return has_dw ? rmsnorm_bwd_kernel<T, kVec, kV, true, false>
                : rmsnorm_bwd_kernel<T, kVec, kV, false, false>;
}

/// The instance for x dtype T with dbias (no plain variant): dweight?
template <typename T>
RmsNormBwdKernel rmsnorm_bwd_vec_dbias_kernel_t(bool has_dw) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kV = kNormBwdVectorsPerThread;
  return has_dw ? rmsnorm_bwd_kernel<T, kVec, kV, true, true>
                : rmsnorm_bwd_kernel<T, kVec, kV, false, true>;
}

}  // namespace quack::detail
