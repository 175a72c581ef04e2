// One LayerNorm case (forward or backward) on the device against the float64 reference:
// random inputs (never zeros) in each tensor's dtype and layout, every output poisoned with NaN,
// the public API or a forced configuration of the row skeleton (kRowConfigs index;
// kRowConfigCount: the general policy), comparison row by row at the scale of each row's terms
// (tolerance.h), and no byte outside an output written.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "norm/layernorm_internal.h"
#include "quack/norm.h"
#include "reference/layernorm_ref.h"
#include "reference/random.h"
#include "reference/tolerance.h"
#include "row/row_config.h"

namespace quack::test {

struct LayerNormCase {
  int64_t M = 1, N = 1;
  bool bwd = false;
  DType x = DType::kBFloat16;     // fwd: x; bwd: x (h) and, by default, dout
  DType out = DType::kBFloat16;   // fwd: out; bwd: dx
  std::optional<DType> weight = DType::kFloat32;
  std::optional<DType> bias = DType::kFloat32;  // fwd
  std::optional<DType> residual;      // fwd
  std::optional<DType> residual_out;  // fwd
  bool stats = true;                  // fwd: mean and rstd outputs
  std::optional<DType> dout;          // bwd (default: x's dtype)
  std::optional<DType> dresidual_out; // bwd
  std::optional<DType> dresidual;     // bwd
  std::optional<DType> dweight = DType::kFloat32;  // bwd (needs weight)
  std::optional<DType> dbias = DType::kFloat32;    // bwd
  float eps = 1e-5f;
  float offset = 0.f;
  double shift = 0.0;       // added to x: rows with a large mean
  Layout x_l, out_l, res_l, dout_l;
  int64_t stat_stride = 1;  // mean / rstd element stride
  bool broadcast_x = false; // fwd: every row of x at one address (row stride 0)
  bool inplace = false;     // fwd: out is x; bwd: dx is dout (same dtype and layout)
  int config = -1;          // forced plan entry; -1: the public API
  uint64_t seed = 1;
};

inline std::string case_name(const LayerNormCase& c) {
  std::string s = std::string(c.bwd ? "layernorm_bwd" : "layernorm_fwd") + " M=" +
                  std::to_string(c.M) + " N=" + std::to_string(c.N) + " " + short_name(c.x) +
                  "->" + short_name(c.out) + " w=" + (c.weight ? short_name(*c.weight) : "-");
  if (!c.bwd) s += std::string(" b=") + (c.bias ? short_name(*c.bias) : "-");
  if (c.residual) s += std::string(" res=") + short_name(*c.residual);
  if (c.residual_out) s += std::string(" res_out=") + short_name(*c.residual_out);
  if (c.bwd && c.dresidual_out) s += std::string(" dres_out=") + short_name(*c.dresidual_out);
  if (c.offset != 0.f) s += " offset=" + std::to_string(c.offset);
  if (c.config >= 0)
    s += std::string(" config ") +
         (c.config < detail::kRowConfigCount ? detail::kRowConfigs[c.config].name : "general");
  return s;
}

/// Row-by-row comparison: tolerance.h's rule with scale = max(max|ref of the row|, floor[i]).
inline ::testing::AssertionResult close_rows_ln(const std::string& what,
                                                const std::vector<double>& got,
                                                const std::vector<double>& ref, int64_t M,
                                                int64_t N, double rel,
                                                const std::vector<double>& floors) {
  if (got.size() != static_cast<size_t>(M * N) || ref.size() != got.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << ", expected "
                                         << ref.size() << " (" << M << " x " << N << ")";
  int64_t bad_rows = 0;
  std::string first;
  for (int64_t i = 0; i < M; ++i) {
    const CompareResult cr = compare_n(what + " row " + std::to_string(i), got.data() + i * N,
                                       ref.data() + i * N, static_cast<size_t>(N), rel, 0,
                                       floors[static_cast<size_t>(i)]);
    if (!cr.ok) {
      if (bad_rows == 0) first = cr.message;
      ++bad_rows;
    }
  }
  if (bad_rows == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad_rows << " of " << M << " rows off; first: " << first;
}

inline std::vector<double> round_copy(DType t, std::vector<double> v) {
  round_all(t, v);
  return v;
}

/// A device (N) vector of dtype t, random normal (mean `mean`).
inline DeviceTensor random_vector(Rng& rng, int64_t N, DType t, double mean,
                                  std::vector<double>* host) {
  *host = random_values(rng, N, t, mean, 1.0);
  return upload_vector(*host, t, N);
}

/// A device (M) fp32 vector with element stride `stride`, NaN-poisoned.
inline DeviceTensor stat_vector(int64_t M, int64_t stride) {
  Layout l;
  l.col_stride = stride;
  return alloc_tensor(DType::kFloat32, 1, M, l, /*vector=*/true);
}

/// Runs a forced plan (or the public API when config < 0) of a prepared backward call.
inline detail::RowPlan run_ln_bwd(const LayerNormBwdArgs& args, int config) {
  if (config < 0) {
    const size_t bytes = layernorm_bwd_workspace_size(args);
    DeviceBuffer ws(bytes);
    ws.poison();
    layernorm_bwd(args, ws.get(), bytes, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const detail::RowCall call = detail::layernorm_bwd_call(args);
    return detail::plan_row_call(call);
  }
  const detail::RowCall call = detail::layernorm_bwd_call(args);
  detail::RowPlan plan = detail::plan_row_call(call, config);
  EXPECT_NE(plan.policy, detail::RowPolicy::kNone) << "the forced configuration does not take the case";
  if (plan.policy == detail::RowPolicy::kNone) return plan;
  const size_t bytes = detail::row_call_workspace(call, plan);
  DeviceBuffer ws(bytes);
  ws.poison();
  detail::run_row_call(call, plan, nullptr, ws.get(), bytes);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return plan;
}

/// Runs case c and checks every output. Returns the plan run.
inline detail::RowPlan run_layernorm_case(const LayerNormCase& c) {
  SCOPED_TRACE(case_name(c));
  Rng rng(c.seed);
  const int64_t M = c.M, N = c.N;
  detail::RowPlan plan;
  std::vector<double> w_host, b_host;
  DeviceTensor w, b;
  if (c.weight) w = random_vector(rng, N, *c.weight, 1.0 - c.offset, &w_host);
  if (c.bias && !c.bwd) b = random_vector(rng, N, *c.bias, 0.0, &b_host);
  std::vector<double> xv = random_values(rng, M * N, c.x, c.shift, 1.0);
  if (c.broadcast_x)
    for (int64_t i = 1; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) xv[i * N + j] = xv[j];
  DeviceTensor x = upload(xv, c.x, M, N, c.x_l);
  const std::vector<double> x_host = download(x);

  if (!c.bwd) {
    DeviceTensor res, res_out, out, mean, rstd;
    std::vector<double> r_host;
    if (c.residual) {
      res = upload(random_values(rng, M * N, *c.residual, 0.0, 1.0), *c.residual, M, N, c.res_l);
      r_host = download(res);
    }
    const ref::LayerNormFwdRef ref = ref::layernorm_fwd_ref(
        M, N, x_host.data(), c.weight ? w_host.data() : nullptr,
        c.bias ? b_host.data() : nullptr, c.residual ? r_host.data() : nullptr, c.eps, c.offset);
    if (!c.inplace) out = alloc_tensor(c.out, M, N, c.out_l);
    if (c.residual_out) res_out = alloc_tensor(*c.residual_out, M, N);
    if (c.stats) {
      mean = stat_vector(M, c.stat_stride);
      rstd = stat_vector(M, c.stat_stride);
    }
    const DeviceTensor& o = c.inplace ? x : out;
    if (c.inplace) {
      EXPECT_EQ(o.ref.dtype, c.out) << "in place: out is x";
    }
    LayerNormFwdArgs a;
    a.x = x.ref;
    if (c.weight) a.weight = w.ref;
    if (c.bias) a.bias = b.ref;
    if (c.residual) a.residual = res.ref;
    a.out = o.ref;
    if (c.residual_out) a.residual_out = res_out.ref;
    if (c.stats) {
      a.mean = mean.ref;
      a.rstd = rstd.ref;
    }
    a.eps = c.eps;
    a.weight_offset = c.offset;
    const detail::RowCall call = detail::layernorm_fwd_call(a);
    plan = detail::plan_row_call(call, c.config);
    if (c.config < 0) {
      layernorm_fwd(a, nullptr);
    } else {
      EXPECT_NE(plan.policy, detail::RowPolicy::kNone) << "the forced configuration does not take the case";
      if (plan.policy == detail::RowPolicy::kNone) return plan;
      detail::run_row_call(call, plan, nullptr);
    }
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (M == 0) return plan;
    EXPECT_TRUE(close_rows_ln("out", download(o), ref.out, M, N, tolerance(c.out), ref.out_terms));
    if (!c.inplace) {
      EXPECT_TRUE(gaps_untouched("out", out));
    }
    if (c.residual_out) {
      EXPECT_TRUE(close_rows_ln("residual_out", download(res_out), ref.h, M, N,
                                tolerance(*c.residual_out), ref.h_max));
    }
    if (c.stats) {
      // mean: at the scale of the row's |h| (a sum of N terms); rstd: relative.
      EXPECT_TRUE(close_rows_ln("mean", download(mean), ref.mean, M, 1, tolerance(DType::kFloat32),
                                ref.h_max));
      const std::vector<double> rs = download(rstd);
      for (int64_t i = 0; i < M; ++i) {
        const double e = ref.rstd[static_cast<size_t>(i)], g = rs[static_cast<size_t>(i)];
        if (!(std::fabs(g - e) <= 2e-5 * e)) {
          ADD_FAILURE() << "rstd row " << i << ": got " << g << ", ref " << e;
          break;
        }
      }
      EXPECT_TRUE(gaps_untouched("mean", mean));
      EXPECT_TRUE(gaps_untouched("rstd", rstd));
    }
    return plan;
  }

  // Backward: mean and rstd of x as the forward computes them (fp32), dout and dresidual_out
  // random.
  const ref::LayerNormFwdRef f =
      ref::layernorm_fwd_ref(M, N, x_host.data(), nullptr, nullptr, nullptr, c.eps, 0.0);
  const std::vector<double> mean_h = round_copy(DType::kFloat32, f.mean);
  const std::vector<double> rstd_h = round_copy(DType::kFloat32, f.rstd);
  DeviceTensor mean = stat_vector(M, c.stat_stride), rstd = stat_vector(M, c.stat_stride);
  upload_into(mean, mean_h);
  upload_into(rstd, rstd_h);
  const DType dt = c.dout.value_or(c.x);
  DeviceTensor dy = upload(random_values(rng, M * N, dt, 0.0, 1.0), dt, M, N, c.dout_l);
  const std::vector<double> dy_host = download(dy);
  DeviceTensor dres_out, dres, dx, dw, db;
  std::vector<double> dro_host;
  if (c.dresidual_out) {
    dres_out = upload(random_values(rng, M * N, *c.dresidual_out, 0.0, 1.0), *c.dresidual_out, M,
                      N);
    dro_host = download(dres_out);
  }
  const ref::LayerNormBwdRef ref = ref::layernorm_bwd_ref(
      M, N, x_host.data(), c.weight ? w_host.data() : nullptr, dy_host.data(), mean_h.data(),
      rstd_h.data(), c.dresidual_out ? dro_host.data() : nullptr, c.offset);
  if (!c.inplace) dx = alloc_tensor(c.out, M, N, c.out_l);
  if (c.dresidual) dres = alloc_tensor(*c.dresidual, M, N);
  const bool want_dw = c.weight && c.dweight;
  if (want_dw) dw = alloc_tensor(*c.dweight, 1, N, {}, true);
  if (c.dbias) db = alloc_tensor(*c.dbias, 1, N, {}, true);
  const DeviceTensor& o = c.inplace ? dy : dx;
  LayerNormBwdArgs a;
  a.x = x.ref;
  if (c.weight) a.weight = w.ref;
  a.dout = dy.ref;
  a.mean = mean.ref;
  a.rstd = rstd.ref;
  if (c.dresidual_out) a.dresidual_out = dres_out.ref;
  a.dx = o.ref;
  if (c.dresidual) a.dresidual = dres.ref;
  if (want_dw) a.dweight = dw.ref;
  if (c.dbias) a.dbias = db.ref;
  a.weight_offset = c.offset;
  plan = run_ln_bwd(a, c.config);
  if (c.config >= 0 && plan.policy == detail::RowPolicy::kNone) return plan;
  if (M > 0) {
    EXPECT_TRUE(close_rows_ln("dx", download(o), ref.dx, M, N, tolerance(c.out), ref.dx_terms));
    if (!c.inplace) {
      EXPECT_TRUE(gaps_untouched("dx", dx));
    }
    if (c.dresidual) {
      EXPECT_TRUE(close_rows_ln("dresidual", download(dres), ref.dx, M, N,
                                tolerance(*c.dresidual), ref.dx_terms));
    }
  }
  if (want_dw) {
    EXPECT_TRUE(close("dweight", download(dw), ref.dw, reduction_tolerance(*c.dweight, M), 0,
                      reduction_floor(ref.dw_abs, M)));
    EXPECT_TRUE(gaps_untouched("dweight", dw));
  }
  if (c.dbias) {
    EXPECT_TRUE(close("dbias", download(db), ref.db, reduction_tolerance(*c.dbias, M), 0,
                      reduction_floor(ref.db_abs, M)));
    EXPECT_TRUE(gaps_untouched("dbias", db));
  }
  return plan;
}

}  // namespace quack::test
