// log_softmax forward and backward as row-op traits (the skeleton: src/row/op_traits.cuh; the
// worked example of docs/architecture.md, "The row skeleton").
//
//   forward   y = (x − m) − ln s,   (m, s) = (max_j x_j, Σ_j e^(x_j − m))   online, one exchange
//   backward  dx = dy − e^y·Σ_j dy_j
//
// Method: as softmax (softmax_traits.cuh); ln s = log2(s)·ln 2 on the MUFU. x − m first, as
// PyTorch: it is exact near the maximum, where x − (m + ln s) would round m + ln s at m's
// magnitude (a row offset by 1000: 3e-5 against torch's 1e-6). −inf inputs give −inf; a row
// of all −inf gives NaN, as PyTorch does.
#pragma once

#include "row/op_traits.cuh"
#include "row/row_math.cuh"
#include "row/row_reduce.cuh"

namespace quack::detail {

struct LogSoftmaxFwd : RowOpBase {
  static constexpr int kIn = 1;   // x
  static constexpr int kOut = 1;  // y
  // The cluster register entries (QuACK's softmax geometry) and the rest under trial compiled;
  // the plan takes cl-t256v8 on 16-bit rows beyond 64 KB (row_plan.cpp, preferred_entry).
  static constexpr bool kTrialConfigs = true;
  using Red = OnlineMaxSum;
  struct Row {
    float m, ln_s;
  };

  template <class View>
  __device__ __forceinline__ static Red::Val reduce(const RowParams&, const RowIn&, const View& v) {
    return Red::fold_in0(v);
  }
  __device__ __forceinline__ static Row finish(const RowParams&, const RowIn&, const Red::Val& t,
                                               int64_t, bool) {
    // s = 1 (one finite element, or N = 1): ln s = 0 exactly, so that element's output is
    // exactly 0 as torch's (lg2.approx(1) is not).
    return {t.v[0], t.v[1] == 1.f ? 0.f : log2_approx(t.v[1]) * kLn2};
  }
  __device__ __forceinline__ static void apply(const RowParams&, const Row& r,
                                               const RowElem<kIn, kCols>& e, float (&out)[kOut]) {
    out[0] = (e.in[0] - r.m) - r.ln_s;
  }
};

struct LogSoftmaxBwd : RowOpBase {
  static constexpr int kIn = 2;   // y, dy
  static constexpr int kOut = 1;  // dx
  using Red = RedSum;             // Σ dy
  struct Row {
    float sum;
  };

  template <class View>
  __device__ __forceinline__ static Red::Val reduce(const RowParams&, const RowIn&, const View& v) {
    return Red::fold(v, [](const auto& e) { return e.in[1]; });
  }
  __device__ __forceinline__ static Row finish(const RowParams&, const RowIn&, const Red::Val& t,
                                               int64_t, bool) {
    return {t.v[0]};
  }
  __device__ __forceinline__ static void apply(const RowParams&, const Row& r,
                                               const RowElem<kIn, kCols>& e, float (&out)[kOut]) {
    out[0] = e.in[1] - exp2_approx(e.in[0] * kLog2e) * r.sum;
  }
};

}  // namespace quack::detail
