// Approximate math of the row ops (device): the hardware's base-2 exponential and logarithm (MUFU),
// as QuACK uses them (ex2.approx / lg2.approx; relative error ≤ 2^-22 over the range used).
#pragma once

namespace quack::detail {

inline constexpr float kLog2e = 1.4426950408889634f;  // log2(e)
inline constexpr float kLn2 = 0.6931471805599453f;    // ln(2)
inline constexpr float kNegInf = -__builtin_huge_valf();

/// 2^x (ex2.approx.ftz.f32: subnormal results flush to 0; 2^-inf = 0, 2^NaN = NaN).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// log2(x) (lg2.approx.ftz.f32: log2(0) = -inf, log2(NaN) = NaN).
__device__ __forceinline__ float log2_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// e^(x - m) with the difference taken first (exact when x and m are close, so shifted inputs
/// such as x + 100 lose no accuracy), then one multiply and the MUFU.
__device__ __forceinline__ float exp_diff(float x, float m) {
  return exp2_approx((x - m) * kLog2e);
}

}  // namespace quack::detail
