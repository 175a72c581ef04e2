// Float64 CPU reference of RMSNorm forward and backward (../shared/cases/handed.md, "Float64
// reference and tolerance rules"). Header-only; no CUDA.
//
// Inputs are dense row-major (M, N) arrays of doubles holding exactly the values the device
// sees (the tests round their random floats to the tensor dtype first, half_host.h round_to).
// Optional inputs are nullptr when absent (weight = 1, bias = 0, residual = 0).
//
//   forward:  h = x + residual                      (the sum the norm consumes; a device
//                                                    residual_out stores h rounded to its dtype)
//             rstd = 1 / sqrt(mean_j h_j^2 + eps)   (eps inside the sqrt)
//             xhat = h·rstd;  y = xhat·w + b
//   backward: g = dy·w;  dx = rstd·(g − xhat·mean_j(g_j·xhat_j)) + dresidual_out
//             dw = Σ_rows dy·xhat;  db = Σ_rows dy
//
// The norm consumes the unrounded sum h (x + residual in full precision), as the library
// documents ("fp32 sum") and as QuACK's own reference does; only residual_out is rounded.
// The backward takes rstd as an input (the fp32 values the kernel is given) so that reference
// and device use the same numbers; rmsnorm_rstd_ref computes it.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace quack::ref {

/// rstd of each row of the (M, N) array h: 1 / sqrt(mean(h^2) + eps).
inline std::vector<double> rmsnorm_rstd_ref(int64_t M, int64_t N, const double* h, double eps) {
  std::vector<double> rstd(static_cast<size_t>(M));
  for (int64_t i = 0; i < M; ++i) {
    const double* r = h + i * N;
    double s = 0;
    for (int64_t j = 0; j < N; ++j) s += r[j] * r[j];
    rstd[i] = 1.0 / std::sqrt(s / static_cast<double>(N) + eps);
  }
  return rstd;
}

/// rstd of each row of h = x + residual (residual nullptr: h = x) without storing h: the
/// values rmsnorm_fwd_ref gives (the same sums in the same order).
inline std::vector<double> rmsnorm_rstd_ref(int64_t M, int64_t N, const double* x,
                                            const double* residual, double eps) {
  std::vector<double> rstd(static_cast<size_t>(M));
  for (int64_t i = 0; i < M; ++i) {
    const double* xr = x + i * N;
    const double* rr = residual ? residual + i * N : nullptr;
    double s = 0;
    for (int64_t j = 0; j < N; ++j) {
      const double h = rr ? xr[j] + rr[j] : xr[j];
      s += h * h;
    }
    rstd[i] = 1.0 / std::sqrt(s / static_cast<double>(N) + eps);
  }
  return rstd;
}

struct RmsNormFwdRef {
  std::vector<double> out;   // (M, N)
  std::vector<double> h;     // (M, N): x + residual, before any rounding (residual_out)
  std::vector<double> rstd;  // (M)
  double out_terms = 0;      // max over elements of |xhat·w| + |b| (scale of out's terms)
};

inline RmsNormFwdRef rmsnorm_fwd_ref(int64_t M, int64_t N, const double* x, const double* weight,
                                     const double* bias, const double* residual, double eps) {
  RmsNormFwdRef r;
  const size_t MN = static_cast<size_t>(M * N);
  r.h.assign(x, x + MN);
  if (residual)
    for (size_t k = 0; k < MN; ++k) r.h[k] += residual[k];
  r.rstd = rmsnorm_rstd_ref(M, N, r.h.data(), eps);
  r.out.resize(MN);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const size_t k = static_cast<size_t>(i * N + j);
      double y = r.h[k] * r.rstd[i];
      if (weight) y *= weight[j];
      r.out_terms = std::fmax(r.out_terms, std::fabs(y) + (bias ? std::fabs(bias[j]) : 0.0));
      if (bias) y += bias[j];
      r.out[k] = y;
    }
  return r;
}

struct RmsNormBwdRef {
  std::vector<double> dx;  // (M, N) = dh = d(residual)
  std::vector<double> dw;  // (N)
  std::vector<double> db;  // (N)
  // Magnitudes of the terms that are added (for tolerances under cancellation, e.g. N = 1,
  // where dx = rstd·g·(1 − xhat²) is a small difference of two large terms):
  double dx_terms = 0;         // max over elements of |rstd·g| + |rstd·xhat·mean| + |dres_out|
  std::vector<double> dw_abs;  // (N): Σ_rows |dy·xhat|
  std::vector<double> db_abs;  // (N): Σ_rows |dy|
};

/// x: the norm's input h; rstd: (M); dresidual_out optional. dw and db are zeros for M = 0.
inline RmsNormBwdRef rmsnorm_bwd_ref(int64_t M, int64_t N, const double* x, const double* weight,
                                     const double* dout, const double* rstd,
                                     const double* dresidual_out) {
  RmsNormBwdRef r;
  r.dx.resize(static_cast<size_t>(M * N));
  r.dw.assign(static_cast<size_t>(N), 0.0);
  r.db.assign(static_cast<size_t>(N), 0.0);
  r.dw_abs.assign(static_cast<size_t>(N), 0.0);
  r.db_abs.assign(static_cast<size_t>(N), 0.0);
  std::vector<double> xhat(static_cast<size_t>(N));
  for (int64_t i = 0; i < M; ++i) {
    const double* xr = x + i * N;
    const double* dy = dout + i * N;
    double dot = 0;
    for (int64_t j = 0; j < N; ++j) {
      xhat[j] = xr[j] * rstd[i];
      const double g = dy[j] * (weight ? weight[j] : 1.0);
      dot += g * xhat[j];
      r.dw[j] += dy[j] * xhat[j];
      r.db[j] += dy[j];
      r.dw_abs[j] += std::fabs(dy[j] * xhat[j]);
      r.db_abs[j] += std::fabs(dy[j]);
    }
    const double mean = dot / static_cast<double>(N);
    for (int64_t j = 0; j < N; ++j) {
      const double g = dy[j] * (weight ? weight[j] : 1.0);
      double d = rstd[i] * (g - xhat[j] * mean);
      double terms = std::fabs(rstd[i] * g) + std::fabs(rstd[i] * xhat[j] * mean);
      if (dresidual_out) {
        d += dresidual_out[i * N + j];
        terms += std::fabs(dresidual_out[i * N + j]);
      }
      r.dx_terms = std::fmax(r.dx_terms, terms);
      r.dx[static_cast<size_t>(i * N + j)] = d;
    }
  }
  return r;
}

}  // namespace quack::ref
