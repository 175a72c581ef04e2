// Runs one RMSNorm forward or backward case on the device and compares every output with the
// float64 reference (reference/rmsnorm_ref.h) under the tolerance table (reference/tolerance.h).
// Inputs are random (never zero, fixed seed), rounded to their dtype before upload; outputs
// are NaN-poisoned before the call, so an unwritten element fails; the padding of strided
// outputs must stay untouched. A case runs through the public API, or through a forced
// configuration of the row skeleton (kRowConfigs index; kRowConfigCount: the general policy;
// norm/rmsnorm_internal.h), which must take it.
#pragma once

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "norm/rmsnorm_internal.h"
#include "quack/norm.h"
#include "reference/random.h"
#include "reference/rmsnorm_ref.h"
#include "row/row_config.h"
#include "row/row_op.h"

namespace quack::test {

inline std::string layout_name(const Layout& l) {
  std::ostringstream s;
  if (l.row_stride >= 0 || l.col_stride != 1 || l.offset != 0)
    s << "[rs" << l.row_stride << ",cs" << l.col_stride << ",off" << l.offset << "]";
  return s.str();
}

// ---------------------------------------------------------------- forward

/// "auto" (the public API's plan), a kRowConfigs name, or "general".
inline std::string config_name(int config) {
  if (config < 0) return "auto";
  if (config >= detail::kRowConfigCount) return "general";
  return detail::kRowConfigs[config].name;
}

/// The weight as the kernels use it: w + offset (the reference's weight); none when absent.
inline std::vector<double> shifted(const std::vector<double>& w, double offset) {
  std::vector<double> r(w);
  for (double& v : r) v += offset;
  return r;
}

struct FwdCase {
  int64_t M = 1, N = 1;
  DType x = DType::kBFloat16;
  std::optional<DType> weight = DType::kFloat32, bias, residual, residual_out;
  std::optional<DType> out;  // default: x's dtype
  bool rstd = true;
  int64_t rstd_stride = 1, weight_stride = 1;
  Layout x_l, out_l, res_l, res_out_l;
  bool out_aliases_x = false;               // in place: out = x (same dtype and layout)
  bool residual_out_aliases_residual = false;
  float eps = 1e-6f;
  float offset = 0.f;  // weight_offset
  uint64_t seed = 1;
  int config = -1;     // forced plan entry (kRowConfigCount: general); -1: the public API
  bool require_vector = false;  // the public API must plan a vector policy
  bool allow_untaken = false;   // a forced configuration may refuse the case (nothing runs)
  bool sample_rows = false;     // out and residual_out compared on sample_rows(M, N) (run_fwd)

  DType out_dtype() const { return out ? *out : x; }
  std::string name() const {
    std::ostringstream s;
    s << "fwd M=" << M << " N=" << N << " x=" << short_name(x) << layout_name(x_l);
    if (weight) s << " w=" << short_name(*weight) << (weight_stride != 1 ? "[s" + std::to_string(weight_stride) + "]" : "");
    if (bias) s << " b=" << short_name(*bias);
    if (residual) s << " res=" << short_name(*residual) << layout_name(res_l);
    if (residual_out) s << " res_out=" << short_name(*residual_out) << layout_name(res_out_l);
    s << " out=" << short_name(out_dtype()) << layout_name(out_l);
    if (rstd) s << " rstd" << (rstd_stride != 1 ? "[s" + std::to_string(rstd_stride) + "]" : "");
    if (out_aliases_x) s << " out=x";
    if (residual_out_aliases_residual) s << " res_out=res";
    if (offset != 0.f) s << " offset=" << offset;
    s << " config=" << config_name(config);
    return s.str();
  }
};

/// A forward case's inputs: host values (dense, exact in their dtypes) and device tensors (in
/// the case's layouts); absent ones null. run_fwd(c) draws and uploads its own. A test that runs
/// several cases on the same numbers (RmsNormFwdConfigs: one x per dtype and shape for every
/// weight and variant) draws and uploads them once and hands them to run_fwd(c, in): the
/// kernels only read them (no case sharing inputs aliases an output to one).
struct FwdInputs {
  const std::vector<double>* x = nullptr;
  const std::vector<double>* w = nullptr;
  const std::vector<double>* b = nullptr;
  const std::vector<double>* res = nullptr;
  const DeviceTensor* dx = nullptr;
  const DeviceTensor* dw = nullptr;
  const DeviceTensor* db = nullptr;
  const DeviceTensor* dres = nullptr;
};

/// Runs case c on inputs `in` and checks it. With c.sample_rows, out and residual_out are
/// compared with the reference on sample_rows(M, N) only (all rows of small cases) and checked
/// finite everywhere; rstd, one value per row, is compared on every row.
inline void run_fwd(const FwdCase& c, const FwdInputs& in) {
  SCOPED_TRACE(c.name());
  const int64_t M = c.M, N = c.N;
  const std::vector<double>& x = *in.x;
  static const std::vector<double> none;
  const std::vector<double>& w = c.weight ? *in.w : none;
  const std::vector<double>& b = c.bias ? *in.b : none;
  const std::vector<double>& res = c.residual ? *in.res : none;
  const DeviceTensor& dx = *in.dx;
  DeviceTensor dout, dres_out, drstd;
  RmsNormFwdArgs a;
  a.x = dx.ref;
  a.eps = c.eps;
  a.weight_offset = c.offset;
  if (c.weight) a.weight = in.dw->ref;
  if (c.bias) a.bias = in.db->ref;
  if (c.residual) a.residual = in.dres->ref;
  if (c.out_aliases_x) {
    a.out = dx.ref;
  } else {
    dout = alloc_tensor(c.out_dtype(), M, N, c.out_l);
    a.out = dout.ref;
  }
  if (c.residual_out) {
    if (c.residual_out_aliases_residual) {
      a.residual_out = in.dres->ref;
    } else {
      dres_out = alloc_tensor(*c.residual_out, M, N, c.res_out_l);
      a.residual_out = dres_out.ref;
    }
  }
  if (c.rstd) {
    Layout l;
    l.col_stride = c.rstd_stride;
    drstd = alloc_tensor(DType::kFloat32, 1, M, l, /*vector=*/true);
    a.rstd = drstd.ref;
  }

  if (c.config >= 0) {
    const detail::RowCall call = detail::rmsnorm_fwd_call(a);
    const detail::RowPlan plan = detail::plan_row_call(call, c.config);
    if (plan.policy == detail::RowPolicy::kNone && c.allow_untaken) return;
    ASSERT_NE(plan.policy, detail::RowPolicy::kNone) << "the forced configuration does not take it";
    ASSERT_NO_THROW(detail::run_row_call(call, plan, nullptr));
  } else {
    if (c.require_vector) {
      const detail::RowPlan plan = detail::plan_row_call(detail::rmsnorm_fwd_call(a));
      ASSERT_NE(plan.policy, detail::RowPolicy::kGeneral) << "expected a vector policy";
    }
    ASSERT_NO_THROW(rmsnorm_fwd(a, nullptr));
  }
  QUACK_CUDA_OK(cudaDeviceSynchronize());

  const std::vector<double> w_eff = shifted(w, c.offset);
  const DeviceTensor& out_t = c.out_aliases_x ? dx : dout;
  const DeviceTensor* res_out_t =
      !c.residual_out ? nullptr : c.residual_out_aliases_residual ? in.dres : &dres_out;
  const std::vector<int64_t> rows =
      c.sample_rows ? sample_rows(M, N) : std::vector<int64_t>{};
  if (c.sample_rows && !rows.empty() && static_cast<int64_t>(rows.size()) < M) {
    // A sample of rows: the reference of those rows (their inputs gathered), the outputs there,
    // and every element of the outputs finite; rstd on every row.
    SCOPED_TRACE("rows compared: " + std::to_string(rows.size()) + " of " + std::to_string(M) +
                 " (every " + std::to_string(rows.size() > 4 ? rows[2] - rows[0] : 1) +
                 "th, the first and last two; 'row' below counts the rows compared)");
    const int64_t R = static_cast<int64_t>(rows.size());
    std::vector<double> xs, rs;
    xs.reserve(static_cast<size_t>(R * N));
    for (int64_t i : rows) xs.insert(xs.end(), x.begin() + i * N, x.begin() + (i + 1) * N);
    if (c.residual) {
      rs.reserve(static_cast<size_t>(R * N));
      for (int64_t i : rows) rs.insert(rs.end(), res.begin() + i * N, res.begin() + (i + 1) * N);
    }
    const auto ref = ref::rmsnorm_fwd_ref(R, N, xs.data(), c.weight ? w_eff.data() : nullptr,
                                          c.bias ? b.data() : nullptr,
                                          c.residual ? rs.data() : nullptr, c.eps);
    int64_t nonfinite = 0;
    const std::vector<double> got = download_rows(out_t, rows, &nonfinite);
    EXPECT_EQ(nonfinite, 0) << "out: non-finite elements (unwritten: NaN poison)";
    EXPECT_TRUE(close("out", got, ref.out, tolerance(c.out_dtype()), N, ref.out_terms));
    EXPECT_TRUE(gaps_untouched("out", out_t));
    if (res_out_t) {
      const std::vector<double> got_h = download_rows(*res_out_t, rows, &nonfinite);
      EXPECT_EQ(nonfinite, 0) << "residual_out: non-finite elements (unwritten: NaN poison)";
      EXPECT_TRUE(close("residual_out", got_h, ref.h, tolerance(*c.residual_out), N));
      EXPECT_TRUE(gaps_untouched("residual_out", *res_out_t));
    }
    if (c.rstd) {
      const auto rstd = ref::rmsnorm_rstd_ref(M, N, x.data(), c.residual ? res.data() : nullptr,
                                              c.eps);
      EXPECT_TRUE(close("rstd", download(drstd), rstd, tolerance(DType::kFloat32)));
      EXPECT_TRUE(gaps_untouched("rstd", drstd));
    }
    return;
  }
  const auto ref = ref::rmsnorm_fwd_ref(M, N, x.data(), c.weight ? w_eff.data() : nullptr,
                                        c.bias ? b.data() : nullptr,
                                        c.residual ? res.data() : nullptr, c.eps);
  EXPECT_TRUE(close("out", download(out_t), ref.out, tolerance(c.out_dtype()), N, ref.out_terms));
  EXPECT_TRUE(gaps_untouched("out", out_t));
  if (res_out_t) {
    EXPECT_TRUE(close("residual_out", download(*res_out_t), ref.h, tolerance(*c.residual_out), N));
    EXPECT_TRUE(gaps_untouched("residual_out", *res_out_t));
  }
  if (c.rstd) {
    EXPECT_TRUE(close("rstd", download(drstd), ref.rstd, tolerance(DType::kFloat32)));
    EXPECT_TRUE(gaps_untouched("rstd", drstd));
  }
}

/// Runs case c on inputs drawn from c.seed and checks it.
inline void run_fwd(const FwdCase& c) {
  const int64_t M = c.M, N = c.N;
  Rng rng(c.seed);
  const auto x = random_values(rng, M * N, c.x);
  std::vector<double> w, b, res;
  if (c.weight) w = random_values(rng, N, *c.weight, 1.0, 0.5);
  if (c.bias) b = random_values(rng, N, *c.bias, 0.0, 0.5);
  if (c.residual) res = random_values(rng, M * N, *c.residual);
  DeviceTensor dx = upload(x, c.x, M, N, c.x_l), dw, db, dres;
  if (c.weight) dw = upload_vector(w, *c.weight, N, c.weight_stride);
  if (c.bias) db = upload_vector(b, *c.bias, N);
  if (c.residual) dres = upload(res, *c.residual, M, N, c.res_l);
  FwdInputs in;
  in.x = &x;
  in.w = &w;
  in.b = &b;
  in.res = &res;
  in.dx = &dx;
  in.dw = &dw;
  in.db = &db;
  in.dres = &dres;
  run_fwd(c, in);
}

// ---------------------------------------------------------------- backward

struct BwdCase {
  int64_t M = 1, N = 1;
  DType x = DType::kBFloat16;
  std::optional<DType> weight = DType::kFloat32;
  std::optional<DType> dout;  // default: x's dtype
  std::optional<DType> dresidual_out, dresidual;
  std::optional<DType> dx;  // default: x's dtype
  std::optional<DType> dweight = DType::kFloat32, dbias = DType::kFloat32;
  Layout x_l, dout_l, dres_out_l, dx_l, dres_l;
  std::optional<double> dout_constant;  // every dout element equal (needed for stride 0)
  int64_t rstd_stride = 1;
  bool dx_aliases_dout = false;  // in place: dx = dout (same dtype and layout)
  float eps = 1e-6f;
  float offset = 0.f;            // weight_offset
  uint64_t seed = 1;
  bool weight_ones = false;      // weight = 1 (C01)
  int config = -1;               // forced plan entry (kRowConfigCount: general); -1: the API

  DType dout_dtype() const { return dout ? *dout : x; }
  DType dx_dtype() const { return dx ? *dx : x; }
  std::string name() const {
    std::ostringstream s;
    s << "bwd M=" << M << " N=" << N << " x=" << short_name(x) << layout_name(x_l);
    if (weight) s << " w=" << short_name(*weight) << (weight_ones ? "(ones)" : "");
    s << " dout=" << short_name(dout_dtype()) << layout_name(dout_l);
    if (dout_constant) s << "(const " << *dout_constant << ")";
    if (dresidual_out) s << " dres_out=" << short_name(*dresidual_out) << layout_name(dres_out_l);
    s << " dx=" << short_name(dx_dtype()) << layout_name(dx_l);
    if (dresidual) s << " dres=" << short_name(*dresidual) << layout_name(dres_l);
    if (dweight) s << " dw=" << short_name(*dweight);
    if (dbias) s << " db=" << short_name(*dbias);
    if (rstd_stride != 1) s << " rstd[s" << rstd_stride << "]";
    if (dx_aliases_dout) s << " dx=dout";
    if (offset != 0.f) s << " offset=" << offset;
    s << " config=" << config_name(config);
    return s.str();
  }
};

/// Workspace for a backward call, sized by rmsnorm_bwd_workspace_size (or, for a forced
/// configuration, by the plan's row_call_workspace).
inline DeviceBuffer bwd_workspace(const RmsNormBwdArgs& a, int config, size_t* bytes) {
  if (config < 0) {
    *bytes = rmsnorm_bwd_workspace_size(a);
  } else {
    const detail::RowCall call = detail::rmsnorm_bwd_call(a);
    detail::RowPlan plan = detail::plan_row_call(call, config);
    *bytes = detail::row_call_workspace(call, plan);
  }
  DeviceBuffer ws(*bytes);
  ws.poison();
  return ws;
}

/// rmsnorm_bwd, or the forced configuration's plan (which must take the case).
inline void run_bwd_call(const RmsNormBwdArgs& a, int config, void* ws, size_t bytes) {
  if (config < 0) {
    EXPECT_NO_THROW(rmsnorm_bwd(a, ws, bytes, nullptr));
    return;
  }
  const detail::RowCall call = detail::rmsnorm_bwd_call(a);
  detail::RowPlan plan = detail::plan_row_call(call, config);
  ASSERT_NE(plan.policy, detail::RowPolicy::kNone) << "the forced configuration does not take it";
  EXPECT_NO_THROW(detail::run_row_call(call, plan, nullptr, ws, bytes));
}

struct BwdResult {  // raw results, for bitwise comparisons between runs
  std::vector<unsigned char> dx, dweight, dbias;
};

inline BwdResult run_bwd(const BwdCase& c, int runs = 1) {
  SCOPED_TRACE(c.name());
  BwdResult result;
  const int64_t M = c.M, N = c.N;
  Rng rng(c.seed);
  const auto x = random_values(rng, M * N, c.x);
  std::vector<double> w, dy, dro;
  if (c.weight) w = c.weight_ones ? std::vector<double>(N, 1.0) : random_values(rng, N, *c.weight, 1.0, 0.5);
  if (c.dout_constant)
    dy.assign(static_cast<size_t>(M * N), round_to(c.dout_dtype(), *c.dout_constant));
  else
    dy = random_values(rng, M * N, c.dout_dtype());
  if (c.dresidual_out) dro = random_values(rng, M * N, *c.dresidual_out);
  // rstd as the forward stores it: fp32.
  auto rstd = ref::rmsnorm_rstd_ref(M, N, x.data(), c.eps);
  for (auto& r : rstd) r = static_cast<float>(r);

  DeviceTensor dx_in = upload(x, c.x, M, N, c.x_l), dwt, ddy, ddro, drstd, ddx, ddres, ddw, ddb;
  RmsNormBwdArgs a;
  a.x = dx_in.ref;
  a.weight_offset = c.offset;
  if (c.weight) {
    dwt = upload_vector(w, *c.weight, N);
    a.weight = dwt.ref;
  }
  ddy = upload(dy, c.dout_dtype(), M, N, c.dout_l);
  a.dout = ddy.ref;
  drstd = upload_vector(rstd, DType::kFloat32, M, c.rstd_stride);
  a.rstd = drstd.ref;
  if (c.dresidual_out) {
    ddro = upload(dro, *c.dresidual_out, M, N, c.dres_out_l);
    a.dresidual_out = ddro.ref;
  }
  if (c.dx_aliases_dout) {
    a.dx = ddy.ref;
  } else {
    ddx = alloc_tensor(c.dx_dtype(), M, N, c.dx_l);
    a.dx = ddx.ref;
  }
  if (c.dresidual) {
    ddres = alloc_tensor(*c.dresidual, M, N, c.dres_l);
    a.dresidual = ddres.ref;
  }
  if (c.dweight) {
    ddw = alloc_tensor(*c.dweight, 1, N, {}, true);
    a.dweight = ddw.ref;
  }
  if (c.dbias) {
    ddb = alloc_tensor(*c.dbias, 1, N, {}, true);
    a.dbias = ddb.ref;
  }

  size_t ws_bytes = 0;
  DeviceBuffer ws;
  EXPECT_NO_THROW(ws = bwd_workspace(a, c.config, &ws_bytes));
  if ((c.dweight || c.dbias) && M > 0) {
    EXPECT_GT(ws_bytes, 0u);
  }
  if (!c.dweight && !c.dbias) {
    EXPECT_EQ(ws_bytes, 0u);
  }
  const DeviceTensor& dx_t = c.dx_aliases_dout ? ddy : ddx;
  const std::vector<double> w_eff = shifted(w, c.offset);
  const auto ref = ref::rmsnorm_bwd_ref(M, N, x.data(), c.weight ? w_eff.data() : nullptr,
                                        dy.data(), rstd.data(),
                                        c.dresidual_out ? dro.data() : nullptr);
  for (int run = 0; run < runs; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    if (run > 0) {  // fresh poison (and fresh dout for in place)
      if (c.dx_aliases_dout) upload_into(ddy, dy); else ddx.poison();
      if (c.dresidual) ddres.poison();
      if (c.dweight) ddw.poison();
      if (c.dbias) ddb.poison();
      ws.poison();
    }
    run_bwd_call(a, c.config, ws.get(), ws_bytes);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);

    if (run == 0) {  // later runs: bitwise equal to run 0 (below)
      EXPECT_TRUE(close("dx", download(dx_t), ref.dx, tolerance(c.dx_dtype()), N, ref.dx_terms));
      EXPECT_TRUE(gaps_untouched("dx", dx_t));
      if (c.dresidual) {
        EXPECT_TRUE(close("dresidual", download(ddres), ref.dx, tolerance(*c.dresidual), N,
                          ref.dx_terms));
        EXPECT_TRUE(gaps_untouched("dresidual", ddres));
      }
      if (c.dweight) {
        EXPECT_TRUE(close("dweight", download(ddw), ref.dw, reduction_tolerance(*c.dweight, M), 0,
                          reduction_floor(ref.dw_abs, M)));
      }
      if (c.dbias) {
        EXPECT_TRUE(close("dbias", download(ddb), ref.db, reduction_tolerance(*c.dbias, M), 0,
                          reduction_floor(ref.db_abs, M)));
      }
    }
    BwdResult r;
    r.dx = download_bytes(dx_t);
    if (c.dweight) r.dweight = download_bytes(ddw);
    if (c.dbias) r.dbias = download_bytes(ddb);
    if (run == 0) {
      result = r;
    } else {
      EXPECT_TRUE(r.dx == result.dx) << "dx differs between runs";
      EXPECT_TRUE(r.dweight == result.dweight) << "dweight differs between runs";
      EXPECT_TRUE(r.dbias == result.dbias) << "dbias differs between runs";
    }
  }
  return result;
}

}  // namespace quack::test
