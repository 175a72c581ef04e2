// Float64 CPU reference of softmax and log_softmax, forward and backward (header-only, no CUDA).
//
// Inputs are dense row-major (M, N) arrays of doubles holding exactly the values the device
// sees (rounded to the tensor's dtype by the test first).
//
//   forward:   m = max_j x_j,  s = Σ_j e^(x_j − m)
//              softmax y_j = e^(x_j − m) / s;   log_softmax y_j = x_j − m − ln s
//   backward:  softmax dx_j = y_j·(dy_j − Σ_k y_k·dy_k)
//              log_softmax dx_j = dy_j − e^(y_j)·Σ_k dy_k
//
// Non-finite inputs follow PyTorch: −inf entries give 0 (log: −inf); a row of all −inf, or with
// a NaN, gives NaN everywhere.
// The backward's term scale per row (the tolerance floor, tolerance.h): the largest |term| the
// device adds up for one element of the row, where the difference can cancel:
// |y·dy| + |y·Σ y·dy| (softmax), |dy| + |e^y·Σ dy| (log_softmax).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace quack::ref {

inline std::vector<double> softmax_fwd_ref(int64_t M, int64_t N, const double* x, bool log) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> y(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M; ++i) {
    const double* r = x + i * N;
    double* o = y.data() + i * N;
    double m = -inf;
    bool has_nan = false;
    for (int64_t j = 0; j < N; ++j) {
      if (std::isnan(r[j])) has_nan = true;
      else m = std::fmax(m, r[j]);
    }
    if (has_nan || m == -inf || m == inf) {
      for (int64_t j = 0; j < N; ++j) o[j] = nan;
      continue;
    }
    double s = 0;
    for (int64_t j = 0; j < N; ++j) s += std::exp(r[j] - m);
    const double ls = std::log(s);
    for (int64_t j = 0; j < N; ++j) o[j] = log ? r[j] - m - ls : std::exp(r[j] - m) / s;
  }
  return y;
}

struct SoftmaxBwdRef {
  std::vector<double> dx;         // (M, N)
  std::vector<double> row_terms;  // (M): max over the row of the terms' magnitude
  double terms = 0;               // max over all rows
};

inline SoftmaxBwdRef softmax_bwd_ref(int64_t M, int64_t N, const double* y, const double* dy,
                                     bool log) {
  SoftmaxBwdRef r;
  r.dx.resize(static_cast<size_t>(M * N));
  r.row_terms.assign(static_cast<size_t>(M), 0.0);
  for (int64_t i = 0; i < M; ++i) {
    const double* yr = y + i * N;
    const double* dr = dy + i * N;
    double* o = r.dx.data() + i * N;
    double red = 0;
    for (int64_t j = 0; j < N; ++j) red += log ? dr[j] : yr[j] * dr[j];
    for (int64_t j = 0; j < N; ++j) {
      double t;
      if (log) {
        const double e = std::exp(yr[j]);
        o[j] = dr[j] - e * red;
        t = std::fabs(dr[j]) + std::fabs(e * red);
      } else {
        o[j] = yr[j] * (dr[j] - red);
        t = std::fabs(yr[j] * dr[j]) + std::fabs(yr[j] * red);
      }
      if (std::isfinite(t)) r.row_terms[i] = std::fmax(r.row_terms[i], t);
    }
    r.terms = std::fmax(r.terms, r.row_terms[i]);
  }
  return r;
}

}  // namespace quack::ref
