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

/// 1/x (rcp.approx.ftz.f32: 1/inf = 0, 1/0 = inf; relative error ≤ 2^-23).
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// e^(x − m) for many x against one m in one FFMA and the MUFU each, for sums: Σ e^(x − m) =
/// Σ 2^(x·k − km) / 2^(m·k − km), with k = log2 e and km = m·k rounded; the FFMA x·k − km
/// rounds once, and the division by term(m) (normalize) removes km's rounding exactly, so
/// shifted inputs (x + 100) lose nothing and one element at the max sums to exactly 1. The
/// terms themselves are not e^(x − m) (exp_diff is, exactly 1 at x = m: softmax's outputs and
/// sums of equal values). |m| ≥ 2^30 (m·k − km could reach 2^7, over- or underflowing the
/// terms): k = 2 and km = 2m exactly; the terms are then 2^(2(x − m)) instead of e^(x − m),
/// equal (1) where x = m, and elsewhere |x − m| ≥ 64 (the spacing of fp32 numbers at 2^30;
/// 2^23 for bf16), so both are ≤ e^-64 and the sums agree to fp32 rounding. m = +inf or NaN:
/// NaN sums (as e^(inf − inf)). A caller with m = −inf passes 0 instead (every term is then 0).
struct ExpShift {
  float m, k, km;
  __device__ __forceinline__ static ExpShift make(float m) {
    ExpShift e;
    e.m = m;
    e.k = fabsf(m) < 0x1p30f ? kLog2e : 2.f;
    e.km = __fmul_rn(m, e.k);
    return e;
  }
  /// 2^(x·k − km): e^(x − m) times term(m).
  __device__ __forceinline__ float term(float x) const { return exp2_approx(fmaf(x, k, -km)); }
  /// Σ e^(x − m) from s = Σ term(x): s / term(m) (= 2^(m·k − km), |m·k − km| ≤ 64) by a
  /// reciprocal and one Newton step: the rounded quotient, so s = term(m) gives exactly 1.
  __device__ __forceinline__ float normalize(float s) const {
    const float t = term(m), rt = rcp_approx(t);
    const float q = s * rt;
    return fmaf(fmaf(-q, t, s), rt, q);
  }
};

/// log2(s) of a softmax denominator s = Σ e^(x − m) (s ≥ 1: the element at the max adds exactly
/// 1), so that e^(x − m) / s is one FFMA and the MUFU, 2^((x − m)·log2 e − l), with no
/// reciprocal and no multiply per element. s = 2^e·f, f ∈ [1, 2) split exactly from the bits:
/// l = e + log2(f), log2(f) by lg2.approx (absolute error ≤ 2^-22 on [1, 2)) and exactly 0 for
/// f = 1, so powers of two give their exponent exactly and 2^(−l) = 1/s exactly there (one
/// finite element: s = 1, output 1; a row of 2^k equal values: 2^-k); other s give 1/s to a
/// few fp32 ulp. s < 1 (0: a row of all −inf) or NaN: NaN.
__device__ __forceinline__ float log2_denominator(float s) {
  const int b = __float_as_int(s);
  const float f = __int_as_float((b & 0x007fffff) | 0x3f800000);
  const float l = static_cast<float>((b >> 23) - 127) + (f == 1.f ? 0.f : log2_approx(f));
  return s >= 1.f ? l : __int_as_float(0x7fffffff);
}

/// e^(x - m) with the difference taken first (exact when x and m are close, so shifted inputs
/// such as x + 100 lose no accuracy), then one multiply and the MUFU.
__device__ __forceinline__ float exp_diff(float x, float m) {
  return exp2_approx((x - m) * kLog2e);
}

}  // namespace quack::detail
