// Float64 reference of top-k (quack/topk.h) and its backward, for the host and GPU tests.
//
// Order (the library's documented rule): NaN is larger than every number; +0 ranks above −0;
// largest: descending, smallest: ascending (NaN last); among equal values (and among NaNs) the
// lower column first. A stable sort of the columns by that order, then the first k.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

namespace quack::test {

enum class TopkRefSoftmax { kNone = 0, kSelected = 1, kRow = 2 };

/// a ranks strictly above b when selecting the largest (NaN top, +0 above −0).
inline bool topk_ref_above(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && !std::isnan(b);
  if (a != b) return a > b;
  return !std::signbit(a) && std::signbit(b);
}

/// a ranks strictly before b in the output order of the mode.
inline bool topk_ref_before(double a, double b, bool largest) {
  if (largest) return topk_ref_above(a, b);
  if (std::isnan(a) || std::isnan(b)) return std::isnan(b) && !std::isnan(a);
  return topk_ref_above(b, a);
}

/// The columns of one row in the output order (stable: ties keep the lower column first).
inline std::vector<int64_t> topk_ref_order(const double* row, int64_t N, bool largest) {
  std::vector<int64_t> cols(static_cast<size_t>(N));
  std::iota(cols.begin(), cols.end(), int64_t{0});
  std::stable_sort(cols.begin(), cols.end(),
                   [&](int64_t a, int64_t b) { return topk_ref_before(row[a], row[b], largest); });
  return cols;
}

struct TopkRef {
  std::vector<double> values;    // (M, k)
  std::vector<int64_t> indices;  // (M, k)
  std::vector<double> lse;       // (M): ln Σ e^x of each row
};

/// ln Σ_n e^(x_n) of one row (−inf for a row of −inf; NaN when a NaN or +inf is in it).
inline double topk_ref_lse(const double* row, int64_t N) {
  double m = -INFINITY;
  for (int64_t n = 0; n < N; ++n) {
    if (std::isnan(row[n])) return NAN;
    m = std::fmax(m, row[n]);
  }
  if (m == INFINITY) return NAN;  // e^(inf − inf), as torch
  if (m == -INFINITY) return -INFINITY;
  double s = 0.0;
  for (int64_t n = 0; n < N; ++n) s += std::exp(row[n] - m);
  return m + std::log(s);
}

/// Softmax of v (NaN everywhere when a NaN or +inf is in it, or all are −inf).
inline void topk_ref_softmax(std::vector<double>& v) {
  double m = -INFINITY;
  bool nan = false;
  for (double e : v) {
    nan = nan || std::isnan(e);
    m = std::fmax(m, e);
  }
  if (nan || m == INFINITY || m == -INFINITY) {
    for (double& e : v) e = NAN;
    return;
  }
  double s = 0.0;
  for (double e : v) s += std::exp(e - m);
  for (double& e : v) e = std::exp(e - m) / s;
}

/// Top-k of the M rows of x (dense row-major M × N).
inline TopkRef topk_reference(const std::vector<double>& x, int64_t M, int64_t N, int64_t k,
                              bool largest, TopkRefSoftmax softmax = TopkRefSoftmax::kNone) {
  TopkRef r;
  r.values.resize(static_cast<size_t>(M * k));
  r.indices.resize(static_cast<size_t>(M * k));
  r.lse.resize(static_cast<size_t>(M));
  for (int64_t i = 0; i < M; ++i) {
    const double* row = x.data() + i * N;
    const std::vector<int64_t> order = topk_ref_order(row, N, largest);
    std::vector<double> v(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) v[j] = row[order[j]];
    r.lse[i] = topk_ref_lse(row, N);
    if (softmax == TopkRefSoftmax::kSelected) topk_ref_softmax(v);
    if (softmax == TopkRefSoftmax::kRow)
      for (double& e : v) e = std::exp(e - r.lse[i]);
    for (int64_t j = 0; j < k; ++j) {
      r.values[i * k + j] = v[j];
      r.indices[i * k + j] = order[j];
    }
  }
  return r;
}

/// The backward (quack/topk.h, topk_bwd) from its inputs, dense row-major: dvalues, indices,
/// values (kSelected), x and lse (kRow) -> dx (M, N). Out-of-range indices are skipped.
inline std::vector<double> topk_bwd_reference(const std::vector<double>& dvalues,
                                              const std::vector<int64_t>& indices,
                                              const std::vector<double>& values,
                                              const std::vector<double>& x,
                                              const std::vector<double>& lse, int64_t M, int64_t N,
                                              int64_t k, TopkRefSoftmax softmax) {
  std::vector<double> dx(static_cast<size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i) {
    auto prob = [&](int64_t j, int64_t c) {
      return softmax == TopkRefSoftmax::kSelected ? values[i * k + j]
                                                  : std::exp(x[i * N + c] - lse[i]);
    };
    double s = 0.0;
    if (softmax != TopkRefSoftmax::kNone)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t c = indices[i * k + j];
        if (c >= 0 && c < N) s += prob(j, c) * dvalues[i * k + j];
      }
    if (softmax == TopkRefSoftmax::kRow)
      for (int64_t c = 0; c < N; ++c) dx[i * N + c] = -std::exp(x[i * N + c] - lse[i]) * s;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t c = indices[i * k + j];
      if (c < 0 || c >= N) continue;
      const double dv = dvalues[i * k + j];
      dx[i * N + c] = softmax == TopkRefSoftmax::kNone ? dv : prob(j, c) * (dv - s);
    }
  }
  return dx;
}

}  // namespace quack::test
