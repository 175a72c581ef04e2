// Epilogue functors of the Hopper GEMM (device). The kernel (gemm_kernel.cuh) hands each functor
// one fragment of kFrg fp32 accumulator values of a thread, and C's values at the same positions
// converted to fp32 when the functor reads C, and stores what the functor leaves in the fragment.
// A functor is a small trivially copyable struct (it travels in the kernel's __grid_constant__
// parameters) with:
//   bool reads_c() const;                                   uniform over the grid
//   void operator()(Array<float, N>& x) const;              x := f(acc)
//   void operator()(Array<float, N>& x, Array<float, N> const& c) const;   x := f(acc, c)
// Later stages (activation, gated activation, activation gradient, bias, extra outputs) are
// further functors of this shape plus, where they need it, their own smem stage in the kernel.
#pragma once

#include <cutlass/array.h>
#include <cute/config.hpp>

namespace quack::detail::sm90 {

/// D = alpha · acc + beta · C (CUTLASS's LinearCombination). C is read only when beta ≠ 0.
struct LinearCombination {
  float alpha = 1.f;
  float beta = 0.f;

  CUTE_HOST_DEVICE bool reads_c() const { return beta != 0.f; }

  /// Device scalars (GemmArgs::alpha_device / beta_device) replace the host values when given.
  CUTE_DEVICE void load_scalars(const float* alpha_dev, const float* beta_dev) {
    if (alpha_dev) alpha = *alpha_dev;
    if (beta_dev) beta = *beta_dev;
  }

  template <int N>
  CUTE_DEVICE void operator()(cutlass::Array<float, N>& x) const {
    CUTE_UNROLL
    for (int i = 0; i < N; ++i) x[i] = alpha * x[i];
  }

  template <int N>
  CUTE_DEVICE void operator()(cutlass::Array<float, N>& x, cutlass::Array<float, N> const& c) const {
    CUTE_UNROLL
    for (int i = 0; i < N; ++i) x[i] = alpha * x[i] + beta * c[i];
  }
};

}  // namespace quack::detail::sm90
