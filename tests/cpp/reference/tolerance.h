// The one tolerance table of the C++ tests (DESIGN.md §6), keyed by the dtype of the tensor
// being compared, for comparisons of a device result with the float64 reference. The Python
// tests keep a twin of these numbers; change both together.
//
// Rule: an element passes when |got − ref| ≤ bound, with
//     bound = rel(dtype) · scale                                  (elementwise: out, dx, ...)
//     bound = (rel(dtype) + kAccumPerSqrtRow · sqrt(M)) · scale   (sums over M rows: dw, db)
//     scale = max(max|ref|, floor)
// max|ref| is taken over the whole compared tensor (for a Large test: over the rows checked).
// `floor` is the magnitude of the terms the op adds up, where they can cancel: fp32 rounding
// is relative to the terms, not to their difference. dx: max |rstd·g| + |rstd·xhat·mean| +
// |dresidual_out| (for N = 1, dx = rstd·g·(1 − xhat²) ~ rstd·g·eps/x² is pure cancellation);
// dw / db: max over columns of Σ_rows |term| / sqrt(M) (the size of a random-sign sum, so a
// column whose sum happens to cancel is not held to a bound relative to its tiny value).
// The reference returns these (rmsnorm_ref.h: out_terms, dx_terms, dw_abs, db_abs).
// A non-finite value where the reference is finite always fails (so does any NaN left by the
// NaN poison of an unwritten element). scale = 0 (reference exactly 0 everywhere, no floor)
// demands exact zeros.
//
// Why these numbers (the device computes in fp32 from inputs that are exact in their dtype,
// then rounds once to the output dtype):
//   fp32  1e-5  : ~80 fp32 ulps of max|ref|. Covers rsqrtf (≤ 2 ulp), the fp32 row sums over
//                 up to 2^19 columns (tree reduction, ~log2(N) roundings) and a few products.
//   fp16  1e-3  : the output rounding is ≤ 2^-11 (4.9e-4) relative of max|ref|; 2 of those.
//   bf16  8e-3  : the output rounding is ≤ 2^-8 (3.9e-3) relative; 2 of those.
//   Reductions over M rows accumulate in fp32 (per-CTA partials, then a column sum). With
//   random signs a sum of M terms has |ref| ~ sqrt(M)·|term| and an fp32 rounding error of
//   ~ 2^-24·sqrt(M)·|ref| (random walk of the partial sums), hence the extra
//   kAccumPerSqrtRow·sqrt(M) (8 × 2^-24 × sqrt(M): 1.2e-4 at M = 65536).
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "quack/tensor.h"

namespace quack::test {

/// rel(dtype): the bound is rel · scale.
inline double tolerance(DType t) {
  switch (t) {
    case DType::kFloat32: return 1e-5;
    case DType::kFloat16: return 1e-3;
    case DType::kBFloat16: return 8e-3;
    default: return 0.0;  // integer outputs compare exactly
  }
}

constexpr double kAccumPerSqrtRow = 8.0 / 16777216.0;  // 8 · 2^-24

/// rel for a sum over M rows accumulated in fp32 and stored as `t` (dweight, dbias).
inline double reduction_tolerance(DType t, int64_t M) {
  return tolerance(t) + kAccumPerSqrtRow * std::sqrt(static_cast<double>(M < 1 ? 1 : M));
}

struct CompareResult {
  bool ok = true;
  int64_t bad = 0;        // elements out of bound or non-finite
  int64_t worst = -1;     // index of the largest error (or of the first non-finite value)
  double max_err = 0.0;   // largest |got − ref| over finite values
  double bound = 0.0;     // rel · max(max|ref|, floor)
  std::string message;    // empty when ok
};

/// The floor of the scale of a sum over M rows: max over columns of Σ|terms| / sqrt(M).
inline double reduction_floor(const std::vector<double>& abs_sums, int64_t M) {
  double m = 0.0;
  for (double v : abs_sums) m = std::fmax(m, v);
  return M > 0 ? m / std::sqrt(static_cast<double>(M)) : 0.0;
}

/// compare() on n elements at got and ref (a row of a larger array, without copying it).
inline CompareResult compare_n(const std::string& what, const double* got, const double* ref,
                               size_t n, double rel, int64_t cols = 0, double floor = 0.0) {
  CompareResult r;
  double scale = 0.0;
  for (size_t i = 0; i < n; ++i)
    if (std::isfinite(ref[i])) scale = std::fmax(scale, std::fabs(ref[i]));
  scale = std::fmax(scale, floor);
  r.bound = rel * scale;
  int64_t first_nonfinite = -1;
  for (size_t i = 0; i < n; ++i) {
    const double g = got[i], e = ref[i];
    if (!std::isfinite(e)) {  // the reference itself is inf/NaN: demand the same class
      const bool same = (std::isnan(e) && std::isnan(g)) || g == e;
      if (!same) {
        ++r.bad;
        if (first_nonfinite < 0) first_nonfinite = static_cast<int64_t>(i);
      }
      continue;
    }
    if (!std::isfinite(g)) {
      ++r.bad;
      if (first_nonfinite < 0) first_nonfinite = static_cast<int64_t>(i);
      continue;
    }
    const double err = std::fabs(g - e);
    if (err > r.bound) ++r.bad;
    if (err >= r.max_err) {
      r.max_err = err;
      r.worst = static_cast<int64_t>(i);
    }
  }
  if (first_nonfinite >= 0) r.worst = first_nonfinite;
  r.ok = r.bad == 0;
  if (!r.ok) {
    std::ostringstream s;
    s.precision(9);
    const int64_t w = r.worst;
    s << what << ": " << r.bad << " of " << n << " elements off; worst at " << w;
    if (cols > 0 && w >= 0) s << " (row " << w / cols << ", col " << w % cols << ")";
    if (w >= 0) s << ": got " << got[w] << ", ref " << ref[w];
    s << "; max |err| " << r.max_err << " > bound " << r.bound << " (rel " << rel
      << " · scale " << scale << ")";
    r.message = s.str();
  }
  return r;
}

/// Compares got with ref elementwise under bound = rel · max(max|ref|, floor). `cols` (> 0)
/// only shapes the message: the worst index is shown as (row, col).
inline CompareResult compare(const std::string& what, const std::vector<double>& got,
                             const std::vector<double>& ref, double rel, int64_t cols = 0,
                             double floor = 0.0) {
  if (got.size() != ref.size()) {
    CompareResult r;
    r.ok = false;
    r.message = what + ": size " + std::to_string(got.size()) + ", expected " +
                std::to_string(ref.size());
    return r;
  }
  return compare_n(what, got.data(), ref.data(), ref.size(), rel, cols, floor);
}

}  // namespace quack::test
