// One softmax / log_softmax case (forward or backward) on the device against the float64
// reference: random inputs (never zeros) in each tensor's dtype and layout, outputs poisoned with
// NaN, an optional forced configuration of the row skeleton (kRowConfigs index, kRowConfigCount:
// the general policy), comparison row by row (tolerance.h's rule with the row's own scale), and
// no byte outside the output tensor written.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "quack/softmax.h"
#include "reference/random.h"
#include "reference/softmax_ref.h"
#include "reference/tolerance.h"
#include "row/row_config.h"
#include "softmax/softmax_internal.h"

namespace quack::test {

struct SoftmaxCase {
  int64_t M = 1, N = 1;
  bool log = false;
  bool bwd = false;
  DType in = DType::kBFloat16;     // fwd: x; bwd: y
  std::optional<DType> dy;         // bwd: dy (default: y's dtype)
  DType out = DType::kBFloat16;    // fwd: out; bwd: dx
  Layout in_l, dy_l, out_l;
  bool broadcast_in = false;       // x (fwd) / dy (bwd) rows all equal: row stride 0
  bool inplace = false;            // fwd: out is x; bwd: dx is dy (same dtype and layout)
  bool specials = false;           // rows 0-3: all −inf, every third −inf, one NaN, one finite
  int config = -1;                 // forced plan entry; -1: the library's plan (public API)
  uint64_t seed = 1;
  // Inputs drawn by the caller (M·N each, exact in their dtypes, dense; no broadcast, no
  // specials), used instead of a draw: one draw shared by the cases that read the same
  // numbers (SoftmaxConfigs). x: the forward's input (bwd: the x whose forward gives y); dy.
  const std::vector<double>* x_values = nullptr;
  const std::vector<double>* dy_values = nullptr;
  // The output compared with the reference on sample_rows(M, N) only (every row of small
  // cases), the other rows checked finite (no specials).
  bool sample_rows = false;
};

inline std::string case_name(const SoftmaxCase& c) {
  std::string s = std::string(c.log ? "log_softmax" : "softmax") + (c.bwd ? "_bwd" : "_fwd") +
                  " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " " +
                  short_name(c.in);
  if (c.bwd) s += std::string("/") + short_name(c.dy.value_or(c.in));
  s += std::string("->") + short_name(c.out);
  if (c.config >= 0)
    s += std::string(" config ") +
         (c.config < detail::kRowConfigCount ? detail::kRowConfigs[c.config].name : "general");
  return s;
}

/// Smallest magnitude an output of dtype t can be wrong by through underflow (the kernels flush
/// fp32 subnormal exponentials; fp16 has subnormals of 2^-24 steps).
inline double underflow_floor(DType t) {
  return t == DType::kFloat16 ? 6e-8 : 1.2e-38;
}

/// Row-by-row comparison: tolerance.h's rule with scale = max(max|ref of the row|, floor[i])
/// (floors: log_softmax max|x| + max|y|, the backward's terms, softmax_ref.h);
/// with `elementwise`, also |got − ref| ≤ rel·|ref| + underflow for every element (softmax
/// outputs: positive, relative errors; a row-wide scale would hide wrong small elements).
inline ::testing::AssertionResult close_rows(const std::string& what, const std::vector<double>& got,
                                             const std::vector<double>& ref, int64_t M, int64_t N,
                                             double rel, const std::vector<double>* floors,
                                             bool elementwise, double underflow) {
  if (got.size() != static_cast<size_t>(M * N) || ref.size() != got.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << ", expected "
                                         << ref.size() << " (" << M << " x " << N << ")";
  int64_t bad_rows = 0;
  std::string first;
  for (int64_t i = 0; i < M; ++i) {
    const double* g = got.data() + i * N;  // the row, in place
    const double* r = ref.data() + i * N;
    CompareResult cr = compare_n(what + " row " + std::to_string(i), g, r,
                                 static_cast<size_t>(N), rel, 0,
                                 floors ? (*floors)[static_cast<size_t>(i)] : 0.0);
    if (cr.ok && elementwise) {
      for (int64_t j = 0; j < N; ++j) {
        if (!std::isfinite(r[j])) continue;  // compare checked the class
        if (std::fabs(g[j] - r[j]) > rel * std::fabs(r[j]) + underflow) {
          cr.ok = false;
          cr.message = what + " row " + std::to_string(i) + " col " + std::to_string(j) +
                       ": got " + std::to_string(g[j]) + ", ref " + std::to_string(r[j]) +
                       " (relative bound " + std::to_string(rel) + ")";
          break;
        }
      }
    }
    if (!cr.ok) {
      if (bad_rows == 0) first = cr.message;
      ++bad_rows;
    }
  }
  if (bad_rows == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad_rows << " of " << M << " rows off; first: " << first;
}

/// Host values of an (M, N) input: random normal (stddev `sd`), rounded to t; broadcast: every
/// row equal to row 0; specials (M ≥ 4): row 0 all −inf, row 1 every third −inf, row 2 a NaN,
/// row 3 one finite value.
inline std::vector<double> softmax_input(Rng& rng, int64_t M, int64_t N, DType t, double sd,
                                         bool broadcast, bool specials) {
  std::vector<double> v = random_values(rng, M * N, t, 0.0, sd);
  if (broadcast)
    for (int64_t i = 1; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) v[i * N + j] = v[j];
  if (specials && M >= 4) {
    const double inf = std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < N; ++j) {
      v[j] = -inf;
      if (j % 3 == 0) v[N + j] = -inf;
      if (j != N / 2) v[3 * N + j] = -inf;
    }
    v[2 * N + N / 2] = std::numeric_limits<double>::quiet_NaN();
  }
  return v;
}

/// Rows `rows` (N each) of a dense (M, N) array.
inline std::vector<double> gather_rows(const std::vector<double>& v, int64_t N,
                                       const std::vector<int64_t>& rows) {
  std::vector<double> out;
  out.reserve(rows.size() * static_cast<size_t>(N));
  for (int64_t i : rows) out.insert(out.end(), v.begin() + i * N, v.begin() + (i + 1) * N);
  return out;
}

/// Runs case c (forced configuration or the public API) and checks it. Returns the plan run.
inline detail::RowPlan run_softmax_case(const SoftmaxCase& c) {
  SCOPED_TRACE(case_name(c));
  Rng rng(c.seed);
  const int64_t M = c.M, N = c.N;
  detail::RowPlan plan;
  const bool given = c.x_values != nullptr;
  if (given) {
    EXPECT_TRUE(!c.broadcast_in && !c.specials && c.in_l.row_stride < 0 && c.in_l.col_stride == 1 &&
                c.in_l.offset == 0 && c.dy_l.row_stride < 0 && c.dy_l.col_stride == 1 &&
                c.dy_l.offset == 0 && (!c.bwd || c.dy_values != nullptr) &&
                static_cast<int64_t>(c.x_values->size()) == M * N &&
                (!c.bwd || static_cast<int64_t>(c.dy_values->size()) == M * N))
        << "given inputs: dense, M x N, no broadcast, no specials";
  }
  // a: x (fwd) or y (bwd); host copies exactly what the device holds (given inputs are exact in
  // their dtype and dense: the upload holds them as they are).
  DeviceTensor a = upload(given ? *c.x_values
                                : softmax_input(rng, M, N, c.in, 2.0, c.broadcast_in && !c.bwd,
                                                c.specials),
                          c.in, M, N, c.in_l);
  std::vector<double> a_host = given ? *c.x_values : download(a);
  DeviceTensor b, out;
  std::vector<double> b_host;
  if (c.bwd) {
    // y: the forward's output of random x, rounded to y's dtype (re-uploaded in a's layout).
    std::vector<double> y = ref::softmax_fwd_ref(M, N, a_host.data(), c.log);
    round_all(c.in, y);
    upload_into(a, y);
    a_host = given ? std::move(y) : download(a);
    const DType dyt = c.dy.value_or(c.in);
    b = upload(given ? *c.dy_values : softmax_input(rng, M, N, dyt, 1.0, c.broadcast_in, false),
               dyt, M, N, c.dy_l);
    b_host = given ? *c.dy_values : download(b);
  }
  if (!c.inplace) out = alloc_tensor(c.out, M, N, c.out_l);  // NaN-poisoned
  const DeviceTensor& o = c.inplace ? (c.bwd ? b : a) : out;
  if (c.inplace) {
    EXPECT_EQ(o.ref.dtype, c.out) << "in place: the output is the input";
  }

  detail::RowCall call;
  if (!c.bwd) {
    SoftmaxFwdArgs args;
    args.x = a.ref;
    args.out = o.ref;
    call = detail::softmax_fwd_call(args, c.log);
    plan = detail::plan_row_call(call, c.config);
    if (c.config < 0) {
      if (c.log) log_softmax_fwd(args, nullptr);
      else softmax_fwd(args, nullptr);
    }
  } else {
    SoftmaxBwdArgs args;
    args.y = a.ref;
    args.dy = b.ref;
    args.dx = o.ref;
    call = detail::softmax_bwd_call(args, c.log);
    plan = detail::plan_row_call(call, c.config);
    if (c.config < 0) {
      if (c.log) log_softmax_bwd(args, nullptr);
      else softmax_bwd(args, nullptr);
    }
  }
  if (c.config >= 0) {
    EXPECT_NE(plan.policy, detail::RowPolicy::kNone) << "the forced configuration does not take the case";
    if (plan.policy == detail::RowPolicy::kNone) return plan;
    detail::run_row_call(call, plan, nullptr);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (M == 0 || N == 0) return plan;

  // The rows compared: every row, or a sample (the other rows checked finite: written).
  std::vector<int64_t> rows;
  if (c.sample_rows && !c.specials) rows = sample_rows(M, N);
  const bool sampled = static_cast<int64_t>(rows.size()) < M && !rows.empty();
  std::vector<double> got;
  if (sampled) {
    int64_t nonfinite = 0;
    got = download_rows(o, rows, &nonfinite);
    EXPECT_EQ(nonfinite, 0) << (c.bwd ? "dx" : "out") << ": non-finite elements (unwritten: NaN poison)";
    a_host = gather_rows(a_host, N, rows);
    if (c.bwd) b_host = gather_rows(b_host, N, rows);
  } else {
    got = download(o);
  }
  const int64_t R = sampled ? static_cast<int64_t>(rows.size()) : M;
  SCOPED_TRACE(sampled ? "rows compared: " + std::to_string(R) + " of " + std::to_string(M) +
                             " ('row' below counts the rows compared)"
                       : std::string("every row compared"));
  std::vector<double> ref;
  const std::vector<double>* floors = nullptr;
  ref::SoftmaxBwdRef bref;
  std::vector<double> log_floors;
  if (!c.bwd) {
    ref = ref::softmax_fwd_ref(R, N, a_host.data(), c.log);
    if (c.log) {
      // log_softmax's terms x and lse cancel (N = 1: y = 0): floor each row's scale at their
      // size, max|x| + max|y|.
      log_floors.assign(static_cast<size_t>(R), 0.0);
      for (int64_t i = 0; i < R; ++i) {
        double mx = 0, my = 0;
        for (int64_t j = 0; j < N; ++j) {
          if (std::isfinite(a_host[i * N + j])) mx = std::fmax(mx, std::fabs(a_host[i * N + j]));
          if (std::isfinite(ref[i * N + j])) my = std::fmax(my, std::fabs(ref[i * N + j]));
        }
        log_floors[static_cast<size_t>(i)] = mx + my;
      }
      floors = &log_floors;
    }
  } else {
    bref = ref::softmax_bwd_ref(R, N, a_host.data(), b_host.data(), c.log);
    ref = std::move(bref.dx);
    floors = &bref.row_terms;
  }
  const bool elementwise = !c.bwd && !c.log;
  EXPECT_TRUE(close_rows(c.bwd ? "dx" : "out", got, ref, R, N, tolerance(c.out), floors,
                         elementwise, underflow_floor(c.out)));
  if (!c.inplace) {
    EXPECT_TRUE(gaps_untouched(c.bwd ? "dx" : "out", out));
  }
  return plan;
}

}  // namespace quack::test
