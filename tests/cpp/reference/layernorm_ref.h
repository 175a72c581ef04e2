// Float64 CPU reference of LayerNorm forward and backward (../shared/cases/handed.md, "Float64
// reference and tolerance rules"). Header-only; no CUDA.
//
// Inputs are dense row-major (M, N) arrays of doubles holding exactly the values the device
// sees (rounded to the tensor dtype first). Optional inputs are nullptr when absent.
//
//   forward:  h = x + residual                      (unrounded, as the library documents)
//             mean = Σ h / N;  var = Σ (h − mean)² / N   (two passes, biased)
//             rstd = 1 / sqrt(var + eps)
//             y = (h − mean)·rstd·w' + b,  w' = weight + offset (1 when weight is absent)
//   backward: xhat = (h − mean)·rstd;  g = dy·w'
//             dx = rstd·(g − mean_j g_j − xhat·mean_j(g_j·xhat_j)) + dresidual_out
//             dw = Σ_rows dy·xhat;  db = Σ_rows dy
//
// The backward takes mean and rstd as inputs (the fp32 values the kernel is given).
// Term scales for the tolerance rule (tolerance.h): out_terms per row, max over the row of
// (|h| + |mean|)·rstd·|w'| + |b| (h − mean cancels when the row has a large mean); dx_terms per
// row, max of |rstd·g| + |rstd·mean(g)| + |rstd·xhat·mean(g·xhat)| + |dresidual_out|.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace quack::ref {

struct LayerNormFwdRef {
  std::vector<double> out;        // (M, N)
  std::vector<double> h;          // (M, N): x + residual, before any rounding
  std::vector<double> mean, rstd; // (M)
  std::vector<double> out_terms;  // (M)
  std::vector<double> h_max;      // (M): max |h| of the row (the mean's scale)
};

inline LayerNormFwdRef layernorm_fwd_ref(int64_t M, int64_t N, const double* x,
                                         const double* weight, const double* bias,
                                         const double* residual, double eps, double offset) {
  LayerNormFwdRef r;
  const size_t MN = static_cast<size_t>(M * N);
  r.h.assign(x, x + MN);
  if (residual)
    for (size_t k = 0; k < MN; ++k) r.h[k] += residual[k];
  r.out.resize(MN);
  r.mean.resize(static_cast<size_t>(M));
  r.rstd.resize(static_cast<size_t>(M));
  r.out_terms.assign(static_cast<size_t>(M), 0.0);
  r.h_max.assign(static_cast<size_t>(M), 0.0);
  for (int64_t i = 0; i < M; ++i) {
    const double* h = r.h.data() + i * N;
    double s = 0;
    for (int64_t j = 0; j < N; ++j) s += h[j];
    const double mean = s / static_cast<double>(N);
    double ss = 0;
    for (int64_t j = 0; j < N; ++j) ss += (h[j] - mean) * (h[j] - mean);
    const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(N) + eps);
    r.mean[i] = mean;
    r.rstd[i] = rstd;
    for (int64_t j = 0; j < N; ++j) {
      const double w = weight ? weight[j] + offset : 1.0;
      const double b = bias ? bias[j] : 0.0;
      r.out[static_cast<size_t>(i * N + j)] = (h[j] - mean) * rstd * w + b;
      r.out_terms[i] = std::fmax(r.out_terms[i],
                                 (std::fabs(h[j]) + std::fabs(mean)) * rstd * std::fabs(w) +
                                     std::fabs(b));
      r.h_max[i] = std::fmax(r.h_max[i], std::fabs(h[j]));
    }
  }
  return r;
}

struct LayerNormBwdRef {
  std::vector<double> dx;        // (M, N) = dh = d(residual)
  std::vector<double> dw, db;    // (N)
  std::vector<double> dx_terms;  // (M)
  std::vector<double> dw_abs;    // (N): Σ_rows |dy·xhat|
  std::vector<double> db_abs;    // (N): Σ_rows |dy|
};

/// h: the norm's input; mean, rstd: (M); weight, dresidual_out optional. dw and db are zeros
/// for M = 0.
inline LayerNormBwdRef layernorm_bwd_ref(int64_t M, int64_t N, const double* h,
                                         const double* weight, const double* dout,
                                         const double* mean, const double* rstd,
                                         const double* dresidual_out, double offset) {
  LayerNormBwdRef r;
  r.dx.resize(static_cast<size_t>(M * N));
  r.dw.assign(static_cast<size_t>(N), 0.0);
  r.db.assign(static_cast<size_t>(N), 0.0);
  r.dw_abs.assign(static_cast<size_t>(N), 0.0);
  r.db_abs.assign(static_cast<size_t>(N), 0.0);
  r.dx_terms.assign(static_cast<size_t>(M), 0.0);
  std::vector<double> xhat(static_cast<size_t>(N)), g(static_cast<size_t>(N));
  for (int64_t i = 0; i < M; ++i) {
    const double* hr = h + i * N;
    const double* dy = dout + i * N;
    double sg = 0, sgx = 0;
    for (int64_t j = 0; j < N; ++j) {
      xhat[j] = (hr[j] - mean[i]) * rstd[i];
      g[j] = dy[j] * (weight ? weight[j] + offset : 1.0);
      sg += g[j];
      sgx += g[j] * xhat[j];
      r.dw[j] += dy[j] * xhat[j];
      r.db[j] += dy[j];
      r.dw_abs[j] += std::fabs(dy[j] * xhat[j]);
      r.db_abs[j] += std::fabs(dy[j]);
    }
    const double mg = sg / static_cast<double>(N), mgx = sgx / static_cast<double>(N);
    for (int64_t j = 0; j < N; ++j) {
      double d = rstd[i] * (g[j] - mg - xhat[j] * mgx);
      double terms = std::fabs(rstd[i] * g[j]) + std::fabs(rstd[i] * mg) +
                     std::fabs(rstd[i] * xhat[j] * mgx);
      if (dresidual_out) {
        d += dresidual_out[i * N + j];
        terms += std::fabs(dresidual_out[i * N + j]);
      }
      r.dx_terms[i] = std::fmax(r.dx_terms[i], terms);
      r.dx[static_cast<size_t>(i * N + j)] = d;
    }
  }
  return r;
}

}  // namespace quack::ref
