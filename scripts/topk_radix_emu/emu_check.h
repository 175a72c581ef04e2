// The top-k host emulations' shared pieces (scripts/topk_radix_emu, scripts/topk_bitonic_emu):
// 16-bit conversions, one case's host buffers and the check of its outputs against the float64
// reference.
#pragma once

#include "cuda_mock.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#include "reference/topk_ref.h"
#include "topk/topk_plan.h"

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

/// One case's host buffers: M rows of N values (row(i) -> std::vector<float>, rounded to T), the
/// rows padded to 16 bytes with the padding poisoned (NaN bits: the kernel must not read it as
/// x), x in float64 for the reference, and poisoned outputs for k values per row.
template <typename T>
struct EmuBuffers {
  int64_t M, N, k, ld;
  std::vector<double> x;
  std::vector<uint4> xbuf;
  std::vector<T> vals;
  std::vector<int64_t> idx64;
  std::vector<int32_t> idx32;
  std::vector<float> lse;

  template <class RowFn>
  EmuBuffers(int64_t M_, int64_t N_, int64_t k_, RowFn row)
      : M(M_), N(N_), k(k_), ld((N_ * int64_t{sizeof(T)} + 15) / 16 * 16 / int64_t{sizeof(T)}),
        x(static_cast<size_t>(M_ * N_)),
        xbuf(static_cast<size_t>((M_ * ld * int64_t{sizeof(T)} + 15) / 16 + 1)),
        vals(static_cast<size_t>(M_ * k_)), idx64(vals.size(), -7), idx32(vals.size(), -7),
        lse(static_cast<size_t>(M_), -123.f) {
    std::memset(xbuf.data(), 0xff, xbuf.size() * sizeof(uint4));
    std::memset(vals.data(), 0xab, vals.size() * sizeof(T));
    T* xp = reinterpret_cast<T*>(xbuf.data());
    for (int64_t i = 0; i < M; ++i) {
      const std::vector<float> r = row(i);
      for (int64_t j = 0; j < N; ++j) {
        double& ref = x[static_cast<size_t>(i * N + j)];
        if constexpr (sizeof(T) == 2) {
          const uint16_t b = to16<T>(r[j]);
          std::memcpy(xp + i * ld + j, &b, 2);
          ref = from16<T>(b);
        } else {
          xp[i * ld + j] = r[j];
          ref = r[j];
        }
      }
    }
  }

  static quack::DType dtype() {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) return quack::DType::kBFloat16;
    else if constexpr (sizeof(T) == 2) return quack::DType::kFloat16;
    else return quack::DType::kFloat32;
  }
  /// The problem as the plan sees it (16-byte rows).
  quack::detail::TopkProblem problem() const {
    quack::detail::TopkProblem pr;
    pr.M = M;
    pr.N = N;
    pr.k = k;
    pr.x = dtype();
    pr.vec_ok = true;
    return pr;
  }
  /// The kernel's parameters over these buffers (the plan's geometry is the caller's).
  quack::detail::TopkParams params(int softmax, bool largest, bool use_idx32) {
    using quack::detail::RowIO;
    quack::detail::TopkParams p;
    p.x = {xbuf.data(), ld, 1, dtype()};
    p.values = {vals.data(), k, 1, dtype()};
    p.indices = use_idx32 ? RowIO{idx32.data(), k, 1, quack::DType::kInt32}
                          : RowIO{idx64.data(), k, 1, quack::DType::kInt64};
    if (softmax == 2) p.lse = {lse.data(), 0, 1, quack::DType::kFloat32};
    p.M = M;
    p.N = N;
    p.k = static_cast<int>(k);
    p.softmax = softmax;
    p.largest = largest;
    return p;
  }
  /// topk_outputs_differ against the float64 reference of x.
  bool differ(const char* name, int softmax, bool largest, bool use_idx32) const {
    const auto ref = quack::test::topk_reference(
        x, M, N, k, largest, static_cast<quack::test::TopkRefSoftmax>(softmax));
    return topk_outputs_differ<T>(name, ref, M, k, softmax, use_idx32, idx32, idx64, vals, lse);
  }
};
