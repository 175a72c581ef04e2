// Host-side fp16 / bf16 conversions for the tests (no CUDA headers; plain bit code).
//
// float -> fp16 / bf16 round to nearest, ties to even (the rounding of __float2half_rn and
// __float2bfloat16_rn, which the kernels use), with overflow to ±inf, fp16 subnormals, and
// NaN kept a (quiet) NaN of the same sign. fp16 / bf16 -> float is exact.
// round_to(dtype, v) gives the value a tensor of `dtype` stores for v: the tests round their
// random inputs with it before uploading, so device and reference see the same numbers.
// Values reach it as fp32 (double -> float first; our values are floats already, so the
// double rounding of the double -> float -> half route never occurs in the tests).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "quack/tensor.h"

namespace quack::test {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// float -> bf16 bits, round to nearest even.
inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // ties to even; carries into the exponent (-> inf) as due
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_bits_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

/// float -> fp16 bits, round to nearest even (normals, subnormals, overflow to inf, NaN).
inline uint16_t float_to_half_bits(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // ≥ 65520 (or inf) -> inf
  if (a < 0x38800000u) {
    // |f| < 2^-14: fp16 subnormal (or zero). Value = mant · 2^-24 with mant = round(|f|·2^24).
    const int e = static_cast<int>(a >> 23);  // biased fp32 exponent
    if (e < 102) return sign;                 // |f| < 2^-25: rounds to 0 (2^-25 itself is a tie -> 0)
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;  // 24-bit significand, value m·2^(e-150)
    const int shift = 126 - e;                        // m·2^(e-150) / 2^-24 = m >> (126 - e)
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);  // q may reach 0x400: the smallest normal, as due
  }
  // Normal: rebias the exponent (127 -> 15), keep 10 mantissa bits, round to nearest even.
  uint32_t r = a - 0x38000000u;  // exponent - 112
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {  // zero or subnormal: m · 2^-24, exact in float
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign ? -v : v;
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));  // inf / NaN
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

/// The value a tensor of dtype `t` stores for v (fp32 for fp32; RNE to 16 bits otherwise).
inline float round_to(DType t, float v) {
  switch (t) {
    case DType::kFloat16: return half_bits_to_float(float_to_half_bits(v));
    case DType::kBFloat16: return bf16_bits_to_float(float_to_bf16_bits(v));
    default: return v;
  }
}
inline double round_to(DType t, double v) { return round_to(t, static_cast<float>(v)); }

/// Stores v as dtype `t` at `dst` (fp32, fp16 or bf16 bytes, host memory).
inline void store_as(DType t, float v, void* dst) {
  switch (t) {
    case DType::kFloat16: {
      const uint16_t h = float_to_half_bits(v);
      std::memcpy(dst, &h, 2);
      return;
    }
    case DType::kBFloat16: {
      const uint16_t h = float_to_bf16_bits(v);
      std::memcpy(dst, &h, 2);
      return;
    }
    default: std::memcpy(dst, &v, 4); return;
  }
}

/// Reads one element of dtype `t` at `src` as float (exact).
inline float load_as(DType t, const void* src) {
  switch (t) {
    case DType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, src, 2);
      return half_bits_to_float(h);
    }
    case DType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, src, 2);
      return bf16_bits_to_float(h);
    }
    default: {
      float f;
      std::memcpy(&f, src, 4);
      return f;
    }
  }
}

}  // namespace quack::test
