// Float64 CPU reference of cross-entropy (header-only, no CUDA): the forward's per-row loss,
// z part and lse, the reduced loss, and the gradient for a per-row dloss (or the reduction's
// own scale), with every option of quack/cross_entropy.h. Inputs are dense row-major (M, V)
// doubles holding exactly the values the device sees.
//
// Row i, target t, ε smoothing, w weights (1 without), c softcap, zs z-loss scale:
//   y_j = c·tanh(x_j / c) (x_j without c);  lse = m + log Σ_j e^(y_j − m),  m = max_j y_j
//   CE  = (1−ε)·w_t·(lse − y_t) + (ε/V)·Σ_j w_j·(lse − y_j)       (the sum only when ε > 0)
//   z   = zs·lse²                                                  (0 when zs = 0)
//   counted: t ≠ ignore_index and 0 ≤ t < V; ignored rows 0; other rows NaN (the library's
//   documented result for out-of-range targets)
//   'sum'  Σ CE + Σ z;   'mean'  Σ CE / Σ_counted w_t + Σ z / #counted
//   dx_j = [σ_ce·(((1−ε)w_t + (ε/V)W)·p_j − (ε/V)·w_j − (1−ε)w_t·[j = t]) + σ_z·2·zs·lse·p_j]
//          ·(1 − tanh²(x_j / c)),   p_j = e^(y_j − lse),  W = Σ_j w_j
// A row with a NaN, or whose max is +inf, has lse NaN (the kernels' rule); a row of all −inf
// has lse −inf.
// row_terms[i]: the largest |term| the device adds for one dx element of row i (the tolerance
// floor where the difference cancels, tolerance.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace quack::ref {

struct CeOptions {
  int64_t ignore_index = -100;
  int reduction = 2;  // 0 none, 1 sum, 2 mean (quack::Reduction's values)
  double eps = 0.0, zs = 0.0, cap = 0.0;
  const std::vector<double>* weight = nullptr;  // (V) or null
};

struct CeRef {
  std::vector<double> loss_rows;  // (M) CE + z
  std::vector<double> ce_rows;    // (M)
  std::vector<double> z_rows;     // (M)
  std::vector<double> lse;        // (M)
  double loss = 0.0, z = 0.0;     // 'sum' / 'mean'
  double loss_terms = 0.0;        // Σ |CE_i|·σ + Σ |z_i|·σ (the scalar's tolerance floor)
  double denom_loss = 0.0, denom_z = 0.0;
  std::vector<double> dx;         // (M, V) when asked
  std::vector<double> row_terms;  // (M)
  std::vector<int> state;         // (M) 0 counted, 1 ignored, 2 out of range
};

/// The forward (and dx when want_dx). dloss: per-row upstream gradients (the backward's σ for
/// both parts), or null: the reduction's own scales (grad_output 1).
inline CeRef cross_entropy_ref(int64_t M, int64_t V, const double* x, const int64_t* target,
                               const CeOptions& o, bool want_dx,
                               const double* dloss = nullptr) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CeRef r;
  r.loss_rows.assign(M, 0.0);
  r.ce_rows.assign(M, 0.0);
  r.z_rows.assign(M, 0.0);
  r.lse.assign(M, 0.0);
  r.state.assign(M, 1);
  r.row_terms.assign(M, 0.0);
  if (want_dx) r.dx.assign(static_cast<size_t>(M * V), 0.0);
  const auto w = [&](int64_t j) { return o.weight ? (*o.weight)[static_cast<size_t>(j)] : 1.0; };
  double W = 0.0;
  for (int64_t j = 0; j < V; ++j) W += w(j);
  std::vector<double> y(static_cast<size_t>(V));
  for (int64_t i = 0; i < M; ++i) {
    const int64_t t = target[i];
    r.state[i] = t == o.ignore_index ? 1 : (t < 0 || t >= V) ? 2 : 0;
    if (r.state[i] == 0) {
      r.denom_loss += w(t);
      r.denom_z += 1.0;
    }
  }
  for (int64_t i = 0; i < M; ++i) {
    const double* xr = x + i * V;
    double m = -inf;
    bool has_nan = false;
    for (int64_t j = 0; j < V; ++j) {
      y[j] = o.cap > 0.0 ? o.cap * std::tanh(xr[j] / o.cap) : xr[j];
      if (std::isnan(y[j])) has_nan = true;
      else m = std::fmax(m, y[j]);
    }
    double lse;
    if (has_nan || m == inf) lse = nan;
    else if (m == -inf) lse = -inf;
    else {
      double s = 0.0;
      for (int64_t j = 0; j < V; ++j) s += std::exp(y[j] - m);
      lse = m + std::log(s);
    }
    r.lse[i] = lse;
    const int st = r.state[i];
    if (st == 1) continue;  // ignored: zeros everywhere
    if (st == 2) {
      r.ce_rows[i] = r.z_rows[i] = r.loss_rows[i] = nan;
      if (want_dx)
        for (int64_t j = 0; j < V; ++j) r.dx[i * V + j] = nan;
      continue;
    }
    const int64_t t = target[i];
    double ce = (1.0 - o.eps) * w(t) * (lse - y[t]);
    if (o.eps > 0.0) {
      double sm = 0.0;
      for (int64_t j = 0; j < V; ++j) sm += w(j) * (lse - y[j]);
      ce += o.eps / static_cast<double>(V) * sm;
    }
    const double z = o.zs != 0.0 ? o.zs * lse * lse : 0.0;
    r.ce_rows[i] = ce;
    r.z_rows[i] = z;
    r.loss_rows[i] = ce + z;
    if (!want_dx) continue;
    double sce = 1.0, sz = 1.0;
    if (dloss) sce = sz = dloss[i];
    else if (o.reduction == 2) {
      sce = 1.0 / r.denom_loss;
      sz = 1.0 / r.denom_z;
    }
    const double ev = o.eps / static_cast<double>(V);
    const double a = sce * ((1.0 - o.eps) * w(t) + ev * W) +
                     (o.zs != 0.0 ? sz * 2.0 * o.zs * lse : 0.0);
    const double c = sce * (1.0 - o.eps) * w(t);
    for (int64_t j = 0; j < V; ++j) {
      const double p = std::exp(y[j] - lse);
      const double chain = o.cap > 0.0 ? 1.0 - std::pow(std::tanh(xr[j] / o.cap), 2) : 1.0;
      const double b = sce * ev * w(j);
      const double onehot = j == t ? c : 0.0;
      r.dx[i * V + j] = (a * p - b - onehot) * chain;
      const double term = (std::fabs(a * p) + std::fabs(b) + std::fabs(onehot)) * std::fabs(chain);
      if (std::isfinite(term)) r.row_terms[i] = std::fmax(r.row_terms[i], term);
    }
  }
  double ce_sum = 0.0, z_sum = 0.0, ce_abs = 0.0, z_abs = 0.0;
  for (int64_t i = 0; i < M; ++i) {
    ce_sum += r.ce_rows[i];
    z_sum += r.z_rows[i];
    ce_abs += std::fabs(r.ce_rows[i]);
    z_abs += std::fabs(r.z_rows[i]);
  }
  if (o.reduction == 2) {
    r.loss = ce_sum / r.denom_loss + z_sum / r.denom_z;
    r.z = z_sum / r.denom_z;
    r.loss_terms = ce_abs / r.denom_loss + z_abs / r.denom_z;
  } else {
    r.loss = ce_sum + z_sum;
    r.z = z_sum;
    r.loss_terms = ce_abs + z_abs;
  }
  return r;
}

}  // namespace quack::ref
