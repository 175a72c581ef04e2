// One cross-entropy case on the device against the float64 reference (cross_entropy_ref.h):
// random logits (never zeros) in x's dtype and layout, random targets with a share of rows
// ignored (or given targets), every output poisoned with NaN first, an optional forced
// configuration of the row skeleton (kRowConfigs index; kRowConfigCount: the general policy),
// and the checks: per-row losses, lse, z parts, the reduced scalars, dx row by row (scale:
// max(max|ref row|, the row's terms)), exact zeros for ignored rows, NaN for out-of-range
// rows, and no byte written outside the output tensors.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cross_entropy/cross_entropy_internal.h"
#include "gpu/gpu_util.h"
#include "quack/cross_entropy.h"
#include "reference/cross_entropy_ref.h"
#include "reference/random.h"
#include "reference/tolerance.h"
#include "row/row_config.h"

namespace quack::test {

struct CeCase {
  int64_t M = 4, V = 1000;
  DType x = DType::kBFloat16;
  DType target = DType::kInt64;
  DType out = DType::kFloat32;      // loss, lse, z_loss
  Layout x_l;                       // x's layout (dx, when its own: contiguous)
  Reduction red = Reduction::kMean;
  int64_t ignore = -100;
  double ignore_frac = 0.3;         // share of rows whose target is ignore_index
  std::vector<int64_t> targets;     // given targets (size M), instead of random ones
  double eps = 0.0, zs = 0.0, cap = 0.0;
  bool weight = false;
  bool grad = false;                // dx in the forward
  bool inplace = false;             // dx = x
  bool lse_out = true, z_out = false;
  int partial_k = 0;                // > 0: lse_partial of K column chunks instead of x's lse
  bool given = false;               // target_logit given
  bool keep_x = true;               // with partial_k and given: x passed too (else absent)
  bool bwd = false;                 // cross_entropy_bwd from the reference lse
  bool dloss_scalar = false;        // bwd: dloss a (1) tensor (stride 0 for every row)
  bool specials = false;            // rows with −inf / NaN (see ce_input)
  double sd = 2.0;                  // logits' standard deviation
  double shift = 0.0;               // added to every logit
  int config = -1;                  // forced plan entry; -1: the library's plan (public API)
  uint64_t seed = 1;
  // Logits drawn by the caller (at least M·V, exact in x's dtype), their first M·V used instead
  // of a draw: one draw shared by cases of different shapes (CeTrain.ManyRowBlocks).
  const std::vector<double>* logits = nullptr;
  // bwd (each row's dx its own: a per-row dloss): dx compared with the reference on
  // sample_rows(M, V) only, every row of small cases; the other rows checked finite (counted
  // targets) or exactly 0 (ignored rows); lse from the reference for every row either way.
  bool sample_rows = false;
};

inline std::string case_name(const CeCase& c) {
  const char* red[] = {"none", "sum", "mean"};
  std::string s = std::string(c.bwd ? "ce_bwd" : c.grad ? "ce_fwd_grad" : "ce_fwd") +
                  " M=" + std::to_string(c.M) + " V=" + std::to_string(c.V) + " " +
                  short_name(c.x) + " " + red[static_cast<int>(c.red)];
  if (c.eps > 0) s += " eps=" + std::to_string(c.eps);
  if (c.zs > 0) s += " zs=" + std::to_string(c.zs);
  if (c.cap > 0) s += " cap=" + std::to_string(c.cap);
  if (c.weight) s += " weight";
  if (c.inplace) s += " inplace";
  if (c.partial_k) s += " lse_partial K=" + std::to_string(c.partial_k);
  if (c.given) s += " target_logit";
  if (c.config >= 0)
    s += std::string(" config ") +
         (c.config < detail::kRowConfigCount ? detail::kRowConfigs[c.config].name : "general");
  return s;
}

/// Logits: normal(shift, sd) rounded to t. specials (M ≥ 4): row 0 all −inf; row 1 every
/// third −inf; row 2 −inf except its target column (loss 0); row 3 a NaN.
inline std::vector<double> ce_input(Rng& rng, const CeCase& c, const std::vector<int64_t>& t) {
  if (c.logits) {
    EXPECT_GE(static_cast<int64_t>(c.logits->size()), c.M * c.V) << "too few logits given";
  }
  std::vector<double> v =
      c.logits && static_cast<int64_t>(c.logits->size()) >= c.M * c.V
          ? std::vector<double>(c.logits->begin(), c.logits->begin() + c.M * c.V)
          : random_values(rng, c.M * c.V, c.x, c.shift, c.sd);
  if (c.specials && c.M >= 4) {
    const double inf = std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < c.V; ++j) {
      v[j] = -inf;
      if (j % 3 == 0) v[c.V + j] = -inf;
      if (j != t[2]) v[2 * c.V + j] = -inf;
    }
    v[3 * c.V + c.V / 2] = std::numeric_limits<double>::quiet_NaN();
  }
  return v;
}

/// Targets: uniform in [0, V), a share ignore_frac of them ignore_index (row 2 never, for the
/// specials).
inline std::vector<int64_t> ce_targets(Rng& rng, const CeCase& c) {
  if (!c.targets.empty()) return c.targets;
  std::vector<int64_t> t(static_cast<size_t>(c.M));
  for (int64_t i = 0; i < c.M; ++i) {
    t[i] = static_cast<int64_t>(rng.uniform() * static_cast<double>(c.V));
    if (t[i] >= c.V) t[i] = c.V - 1;
    if (rng.uniform() < c.ignore_frac && !(c.specials && i == 2)) t[i] = c.ignore;
  }
  return t;
}

inline DeviceTensor upload_targets(const std::vector<int64_t>& t, DType dt) {
  const int64_t n = static_cast<int64_t>(t.size());
  DeviceTensor d;
  d.rows = 1;
  d.cols = n;
  d.vector = true;
  const int es = dtype_size(dt);
  d.buf = DeviceBuffer(static_cast<size_t>(n > 0 ? n : 1) * es);
  std::vector<unsigned char> img(d.buf.bytes(), 0);
  for (int64_t i = 0; i < n; ++i) {
    if (dt == DType::kInt64) std::memcpy(img.data() + i * 8, &t[i], 8);
    else {
      const int32_t v = static_cast<int32_t>(t[i]);
      std::memcpy(img.data() + i * 4, &v, 4);
    }
  }
  EXPECT_EQ(cudaMemcpy(d.buf.get(), img.data(), img.size(), cudaMemcpyHostToDevice), cudaSuccess);
  d.ref = TensorRef::vector(d.buf.get(), dt, n, 0, 1);
  return d;
}

/// A 1-D output of n elements, NaN-poisoned.
inline DeviceTensor alloc_vector(DType t, int64_t n) {
  Layout l;
  return alloc_tensor(t, 1, n, l, /*vector=*/true);
}

/// Row-wise comparison of (M, V) values: tolerance.h's rule with the row's scale max(max|ref
/// row|, floors[i]).
inline ::testing::AssertionResult ce_close_rows(const std::string& what,
                                                const std::vector<double>& got,
                                                const std::vector<double>& ref, int64_t M,
                                                int64_t V, double rel,
                                                const std::vector<double>& floors) {
  if (got.size() != static_cast<size_t>(M * V) || ref.size() != got.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << ", expected "
                                         << ref.size() << " (" << M << " x " << V << ")";
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < M; ++i) {
    const CompareResult cr = compare_n(what + " row " + std::to_string(i), got.data() + i * V,
                                       ref.data() + i * V, static_cast<size_t>(V), rel, 0,
                                       floors[static_cast<size_t>(i)]);
    if (!cr.ok && bad++ == 0) first = cr.message;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << M << " rows off; first: " << first;
}

/// Runs case c and checks it. Returns the row kernel's plan.
inline detail::RowPlan run_ce_case(const CeCase& c) {
  SCOPED_TRACE(case_name(c));
  Rng rng(c.seed);
  const int64_t M = c.M, V = c.V;
  const std::vector<int64_t> targets = ce_targets(rng, c);
  DeviceTensor x = upload(ce_input(rng, c, targets), c.x, M, V, c.x_l);
  const std::vector<double> xh = download(x);  // exactly what the device holds
  DeviceTensor tg = upload_targets(targets, c.target);
  std::vector<double> wh;
  DeviceTensor w;
  if (c.weight) {
    wh = random_uniform(rng, V, DType::kFloat32, 0.25, 2.0);
    w = upload_vector(wh, DType::kFloat32, V);
  }
  ref::CeOptions o;
  o.ignore_index = c.ignore;
  o.reduction = static_cast<int>(c.red);
  o.eps = c.eps;
  o.zs = c.zs;
  o.cap = c.cap;
  o.weight = c.weight ? &wh : nullptr;
  std::vector<double> dloss_h;
  DeviceTensor dloss;
  if (c.bwd) {
    dloss_h = random_values(rng, c.dloss_scalar ? 1 : M, DType::kFloat32, 0.0, 1.0);
    dloss = upload_vector(dloss_h, DType::kFloat32, c.dloss_scalar ? 1 : M);
    if (c.dloss_scalar) dloss_h.assign(static_cast<size_t>(M), dloss_h[0]);
  }
  const bool want_dx = c.grad || c.bwd;
  std::vector<int64_t> rows;  // sample_rows: the rows whose dx is compared
  if (c.sample_rows && c.bwd && !c.specials) rows = sample_rows(M, V);
  const bool sampled = !rows.empty() && static_cast<int64_t>(rows.size()) < M;
  const ref::CeRef r = ref::cross_entropy_ref(M, V, xh.data(), targets.data(), o,
                                              want_dx && !sampled,
                                              c.bwd ? dloss_h.data() : nullptr);
  // dx: x itself (in place) or its own NaN-poisoned contiguous tensor.
  DeviceTensor dx_own;
  if (want_dx && !c.inplace) dx_own = alloc_tensor(c.x, M, V);
  const DeviceTensor& dx = c.inplace ? x : dx_own;
  detail::RowPlan plan;
  const bool none = c.red == Reduction::kNone;

  if (c.bwd) {
    std::vector<double> lse_h = r.lse;
    round_all(DType::kFloat32, lse_h);
    DeviceTensor lse = upload_vector(lse_h, DType::kFloat32, M);
    CrossEntropyBwdArgs a;
    a.x = x.ref;
    a.target = tg.ref;
    a.lse = lse.ref;
    a.dloss = dloss.ref;
    if (c.weight) a.weight = w.ref;
    a.dx = dx.ref;
    a.ignore_index = c.ignore;
    a.label_smoothing = static_cast<float>(c.eps);
    a.z_loss_scale = static_cast<float>(c.zs);
    a.logit_softcap = static_cast<float>(c.cap);
    const detail::RowCall call = detail::cross_entropy_bwd_call(a);
    plan = detail::plan_row_call(call, c.config);
    if (c.config >= 0) {
      EXPECT_NE(plan.policy, detail::RowPolicy::kNone)
          << "the forced configuration does not take the case";
      if (plan.policy == detail::RowPolicy::kNone) return plan;
      detail::run_row_call(call, plan, nullptr);
    } else {
      cross_entropy_bwd(a, nullptr);
    }
  } else {
    DeviceTensor loss = alloc_vector(c.out, none ? M : 1);
    DeviceTensor lse = alloc_vector(c.out, M);
    DeviceTensor z = alloc_vector(c.out, none ? M : 1);
    DeviceTensor part, tl;
    CrossEntropyFwdArgs a;
    if (!(c.partial_k > 0 && c.given && !c.keep_x)) a.x = x.ref;
    a.target = tg.ref;
    if (c.weight) a.weight = w.ref;
    if (c.partial_k > 0) {
      // lse of K column chunks of the logits (softcap 0 here), fp32.
      const int64_t K = c.partial_k, chunk = (V + K - 1) / K;
      std::vector<double> ph(static_cast<size_t>(M * K));
      for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < K; ++k) {
          double m = -std::numeric_limits<double>::infinity(), s = 0.0;
          const int64_t end = std::min(V, (k + 1) * chunk);
          for (int64_t j = k * chunk; j < end; ++j) m = std::fmax(m, xh[i * V + j]);
          for (int64_t j = k * chunk; j < end; ++j) s += std::exp(xh[i * V + j] - m);
          ph[i * K + k] = m + std::log(s);
        }
      round_all(DType::kFloat32, ph);
      part = upload(ph, DType::kFloat32, M, K);
      a.lse_partial = part.ref;
      if (!c.keep_x) a.num_classes = V;
    }
    if (c.given) {
      std::vector<double> th(static_cast<size_t>(M), 0.5);
      for (int64_t i = 0; i < M; ++i)
        if (targets[i] >= 0 && targets[i] < V) th[i] = xh[i * V + targets[i]];
      tl = upload_vector(th, c.x, M);
      a.target_logit = tl.ref;
    }
    a.loss = loss.ref;
    if (c.lse_out) a.lse = lse.ref;
    if (c.z_out) a.z_loss = z.ref;
    if (c.grad) a.dx = dx.ref;
    a.ignore_index = c.ignore;
    a.reduction = c.red;
    a.label_smoothing = static_cast<float>(c.eps);
    a.z_loss_scale = static_cast<float>(c.zs);
    a.logit_softcap = static_cast<float>(c.cap);
    const size_t ws_bytes = cross_entropy_fwd_workspace_size(a);
    DeviceBuffer ws(ws_bytes);
    ws.poison();
    a.workspace = ws.get();
    a.workspace_bytes = ws_bytes;
    const detail::CeFwdCall call = detail::cross_entropy_fwd_call(a);
    plan = detail::plan_row_call(call.row, c.config);
    if (c.config >= 0) {
      EXPECT_NE(plan.policy, detail::RowPolicy::kNone)
          << "the forced configuration does not take the case";
      if (plan.policy == detail::RowPolicy::kNone) return plan;
      detail::run_cross_entropy_fwd(call, plan, nullptr);
    } else {
      cross_entropy_fwd(a, nullptr);
    }
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const double tol = tolerance(c.out);
    if (none) {
      const std::vector<double> got = download(loss);
      EXPECT_TRUE(close("loss", got, r.loss_rows, tol, 0, 0.0));
      for (int64_t i = 0; i < M; ++i) {
        if (r.state[i] == 1) {
          EXPECT_EQ(got[i], 0.0) << "ignored row " << i << ": loss exactly 0";
        } else if (r.loss_rows[i] == 0.0) {  // V = 1, or the target the only finite logit
          EXPECT_EQ(got[i], 0.0) << "row " << i << ": loss exactly 0";
        }
      }
      if (c.z_out) {
        EXPECT_TRUE(close("z_loss", download(z), r.z_rows, tol, 0, 0.0));
      }
    } else {
      const double got = download(loss)[0];
      if (std::isnan(r.loss)) {
        EXPECT_TRUE(std::isnan(got)) << "loss " << got << ", expected NaN";
      } else {
        EXPECT_NEAR(got, r.loss, tol * std::fmax(std::fabs(r.loss), r.loss_terms) + 1e-30)
            << "reduced loss";
      }
      if (c.z_out) {
        const double gz = download(z)[0];
        if (std::isnan(r.z)) EXPECT_TRUE(std::isnan(gz)) << "z_loss " << gz << ", expected NaN";
        else EXPECT_NEAR(gz, r.z, tol * std::fabs(r.z) + 1e-30) << "reduced z_loss";
      }
    }
    if (c.lse_out) {
      // lse = m + ln s: its terms are m and ln s (shifted logits: |m| ≫ |lse − m|).
      EXPECT_TRUE(close("lse", download(lse), r.lse, tol, 0, 0.0));
    }
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (want_dx && M > 0 && V > 0) {
    const std::vector<double> got = download(dx);
    if (sampled) {
      // The reference of the rows compared (their logits, targets and dloss gathered: with a
      // per-row dloss each row's dx depends on that row alone); every counted row finite.
      const int64_t R = static_cast<int64_t>(rows.size());
      std::vector<double> xs, gs, ds;
      std::vector<int64_t> ts;
      for (int64_t i : rows) {
        xs.insert(xs.end(), xh.begin() + i * V, xh.begin() + (i + 1) * V);
        gs.insert(gs.end(), got.begin() + i * V, got.begin() + (i + 1) * V);
        ts.push_back(targets[static_cast<size_t>(i)]);
        ds.push_back(dloss_h[static_cast<size_t>(i)]);
      }
      const ref::CeRef rs = ref::cross_entropy_ref(R, V, xs.data(), ts.data(), o, true, ds.data());
      SCOPED_TRACE("dx rows compared: " + std::to_string(R) + " of " + std::to_string(M) +
                   " ('row' below counts the rows compared)");
      EXPECT_TRUE(ce_close_rows("dx", gs, rs.dx, R, V, tolerance(c.x), rs.row_terms));
      int64_t nonfinite = 0;
      for (int64_t i = 0; i < M; ++i)
        if (r.state[i] == 0)
          for (int64_t j = 0; j < V; ++j) nonfinite += std::isfinite(got[i * V + j]) ? 0 : 1;
      EXPECT_EQ(nonfinite, 0) << "dx: non-finite elements in counted rows (unwritten: NaN poison)";
    } else {
      EXPECT_TRUE(ce_close_rows("dx", got, r.dx, M, V, tolerance(c.x), r.row_terms));
    }
    for (int64_t i = 0; i < M; ++i) {
      if (r.state[i] != 1) continue;
      bool exact = true;
      for (int64_t j = 0; j < V; ++j) exact = exact && got[i * V + j] == 0.0;
      EXPECT_TRUE(exact) << "ignored row " << i << ": dx exactly 0";
    }
    if (!c.inplace) {
      EXPECT_TRUE(gaps_untouched("dx", dx_own));
    }
  }
  return plan;
}

}  // namespace quack::test
