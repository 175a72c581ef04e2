// The top-k host emulations' shared pieces (scripts/topk_radix_emu, scripts/topk_bitonic_emu):
// 16-bit conversions and the check of one case's outputs against the float64 reference.
#pragma once

#include "cuda_mock.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#include "reference/topk_ref.h"

template <typename T>
uint16_t to16(float f) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(f).x;
  else return __float2half_rn(f).x;
}
template <typename T>
double from16(uint16_t b) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float({b});
  else return __half2float({b});
}

/// Whether the outputs of case `name` (M rows, k each; x of type T) differ from `ref`: indices
/// equal (int32 or int64 as idx32 says), values bit for bit without softmax (NaN and the sign
/// of zero too), within 2e-2 relative with it (softmax 1, 2), lse within 1e-4 (softmax 2).
/// Prints the first three differences.
template <typename T>
bool topk_outputs_differ(const char* name, const quack::test::TopkRef& ref, int64_t M, int64_t k,
                         int softmax, bool idx32, const std::vector<int32_t>& i32,
                         const std::vector<int64_t>& i64, const std::vector<T>& vals,
                         const std::vector<float>& lse) {
  int bad = 0;
  for (int64_t i = 0; i < M * k && bad < 3; ++i) {
    const int64_t gi = idx32 ? i32[i] : i64[i];
    if (gi != ref.indices[i]) {
      std::printf("FAIL %s: index (%ld, %ld) = %ld, expected %ld\n", name, (long)(i / k),
                  (long)(i % k), (long)gi, (long)ref.indices[i]);
      ++bad;
      continue;
    }
    double gv;
    if constexpr (sizeof(T) == 2) {
      uint16_t b;
      std::memcpy(&b, &vals[i], 2);
      gv = from16<T>(b);
    } else {
      gv = vals[i];
    }
    const double e = ref.values[i];
    const bool ok =
        softmax == 0
            ? (std::isnan(e) && std::isnan(gv)) || (gv == e && std::signbit(gv) == std::signbit(e))
            : (std::isnan(e) && std::isnan(gv)) || std::fabs(gv - e) <= 2e-2 * std::fabs(e) + 1e-6;
    if (!ok) {
      std::printf("FAIL %s: value (%ld, %ld) = %.9g, expected %.9g\n", name, (long)(i / k),
                  (long)(i % k), gv, e);
      ++bad;
    }
  }
  if (softmax == 2)
    for (int64_t i = 0; i < M && bad < 3; ++i) {
      const double e = ref.lse[i];
      const bool ok = std::isfinite(e) ? std::fabs(lse[i] - e) <= 1e-4 * std::fmax(1.0, std::fabs(e))
                                       : (std::isnan(e) ? std::isnan(lse[i]) : lse[i] == e);
      if (!ok) {
        std::printf("FAIL %s: lse %ld = %g, expected %g\n", name, (long)i, lse[i], e);
        ++bad;
      }
    }
  return bad > 0;
}
