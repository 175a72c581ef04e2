// LayerNorm forward and backward as row-op traits (the skeleton: src/row/op_traits.cuh).
//
//   forward   h = x (+ residual);  μ, M2 = mean and Σ (h − μ)² of the row (RedMeanM2: each
//             16-byte vector's own M2 about its mean, merged by Chan's formula; never
//             E[h²] − E[h]²)
//             rstd = 1/sqrt(M2/N + eps)   (biased variance)
//             y = (h − μ)·rstd·(w + offset) + b;  residual_out = h;  mean, rstd per row
//   backward  x̂ = (h − μ)·rstd,  g = dy·(w + offset)
//             dh = rstd·(g − mean_j(g_j) − x̂·mean_j(g_j·x̂_j)) + dresidual_out
//             dx = dresidual = dh;  dweight += dy·x̂;  dbias += dy   (column accumulations)
//
// Scalars (RowParams::scalar, set by layernorm.cpp): [0] eps (forward), [1] the weight's offset
// (the call's weight_offset with a weight; 1 without one, whose vector then reads as 0, so
// w + offset = 1), [2] 1/N (backward).
// Method: QuACK (quack/layernorm.py, 0.2.0: two-pass mean and variance over the row on chip;
// the backward and weight_offset of its later releases); Welford/Chan for the statistics
// (Chan, Golub & LeVeque, "Algorithms for computing the sample variance", 1983). fp32 math;
// h is the unrounded fp32 sum x + residual (residual_out stores it rounded to its dtype).
// The backward's per-element work as RMSNorm's: the offset rides in its fp32 weight copy
// (kColShift), the dweight and dbias terms come from the fold's sweep, where x̂ is at hand
// (kAccInFold), and the output pass computes dh alone.
//
// Instances (row_ops.cmake): the forward without and with the residual stream; the backward
// plain (h, dy -> dx) and with the residual gradients (dresidual_out, dresidual; also the
// prenorm backward of an fp32 residual stream, with or without them).
#pragma once

#include "row/op_traits.cuh"
#include "row/row_reduce.cuh"

namespace quack::detail {

/// The forward: kIn = 1 (x) or 2 (x, residual); outputs y and residual_out (h; optional);
/// vectors weight and bias (either may be absent: 0); per-row outputs mean (row_out[0]) and
/// rstd (row_out[1]) when present.
template <int kInputs>
struct LayerNormFwdT : RowOpBase {
  static constexpr int kIn = kInputs;  // x (, residual)
  static constexpr int kOut = 2;       // y, residual_out
  static constexpr int kOptOut = 1;    // residual_out
  static constexpr int kCols = 2;      // weight, bias
  // Register policy: weight and bias loaded at apply, not held beside the row (fp32 vectors
  // at 4 vectors per thread held with the row took 103 registers; at apply 40: op_traits.cuh).
  // apply is called there once per output stream (residual_out first): a pure function.
  static constexpr bool kColsAtApply = true;
  // Without a residual: the cluster register entries and the rest under trial compiled
  // (weight and bias at apply there too), of the persistent ones cl-t256v8-s1 only, with
  // 16-bit weight and bias (row_config_usable: no -s2); the plan takes cl-t256v8 on 16-bit
  // rows beyond 64 KB with fp32 weight and bias, the ring with 16-bit ones (row_plan.cpp,
  // preferred_entry; run AE).
  static constexpr bool kTrialConfigs = kInputs == 1;
  using Red = RedMeanM2;
  struct Row {
    float mean, rstd;
  };

  __device__ __forceinline__ static float h_of(const RowElem<kIn, kCols>& e) {
    if constexpr (kIn == 2) return e.in[0] + e.in[1];
    else return e.in[0];
  }
  template <class View>
  __device__ __forceinline__ static Red::Val reduce(const RowParams&, const RowIn&, const View& v) {
    return Red::fold(v, [](const auto& e) { return h_of(e); });
  }
  __device__ __forceinline__ static Row finish(const RowParams& p, const RowIn&, const Red::Val& t,
                                               int64_t row, bool writer) {
    // t.v[0] = N (every element of the row folded once); biased variance M2 / N.
    const float rstd = rsqrtf(t.v[2] / t.v[0] + p.scalar[0]);
    if (writer) {
      if (p.row_out[0].ptr) static_cast<float*>(p.row_out[0].ptr)[row * p.row_out[0].row_stride] = t.v[1];
      if (p.row_out[1].ptr) static_cast<float*>(p.row_out[1].ptr)[row * p.row_out[1].row_stride] = rstd;
    }
    return {t.v[1], rstd};
  }
  __device__ __forceinline__ static void apply(const RowParams& p, const Row& r,
                                               const RowElem<kIn, kCols>& e, float (&out)[kOut]) {
    const float h = h_of(e);
    out[0] = (h - r.mean) * r.rstd * (e.vec[0] + p.scalar[1]) + e.vec[1];
    out[1] = h;
  }
};

using LayerNormFwd = LayerNormFwdT<1>;
using LayerNormFwdRes = LayerNormFwdT<2>;

/// The backward: kRes = false: h (the forward's x + residual) and dy -> dx; kRes = true: h,
/// dy and the optional dresidual_out -> dx and the optional dresidual (both dh). Vector weight
/// (absent: 0), shifted by the offset where converted (kColShift); per-row inputs mean
/// (row_in[0]) and rstd (row_in[1]); column accumulations dweight (Σ dy·x̂) and dbias (Σ dy),
/// their terms taken in the fold's sweep, where x̂ is at hand (kAccInFold). The plain backward
/// (no residual gradients) has no third stream and no second output: fewer registers and
/// instructions than the residual one.
template <bool kRes>
struct LayerNormBwdT : RowOpBase {
  static constexpr int kIn = kRes ? 3 : 2;  // h, dy (, dresidual_out)
  static constexpr int kOptIn = kRes ? 1 : 0;
  static constexpr int kOut = kRes ? 2 : 1;  // dx (, dresidual)
  static constexpr int kOptOut = kRes ? 1 : 0;
  static constexpr int kCols = 1;  // weight + offset (kColShift)
  static constexpr bool kReduceCols = true;
  static constexpr int kAcc = 2;               // dweight, dbias
  static constexpr bool kAccInFold = true;     // dy·x̂ where the fold computes x̂
  static constexpr bool kColShift = true;
  // The plain backward compiles staged-v4-ra (mean and rstd one row block ahead; row_config.h),
  // which the plan takes in staged-v4's place on 16-bit rows.
  static constexpr bool kTrialConfigs = !kRes;
  using Red = RedSums<2>;  // (Σ g, Σ g·x̂)
  struct RowIn {
    float mean, rstd;
  };
  struct Row {
    float mean, rstd, mean_g, k;  // k = rstd·mean(g·x̂)
  };

  __device__ __forceinline__ static RowIn load_row(const RowParams& p, int64_t row) {
    return {static_cast<const float*>(p.row_in[0].ptr)[row * p.row_in[0].row_stride],
            static_cast<const float*>(p.row_in[1].ptr)[row * p.row_in[1].row_stride]};
  }
  __device__ __forceinline__ static float col_shift(const RowParams& p, int) {
    return p.scalar[1];
  }
  __device__ __forceinline__ static float xhat(const RowIn& in, const RowElem<kIn, kCols>& e) {
    return (e.in[0] - in.mean) * in.rstd;
  }
  // e.vec[0] = w + offset (col_shift). g rounded as in apply (see there).
  template <class View>
  __device__ __forceinline__ static Red::Val reduce(const RowParams&, const RowIn& in,
                                                    const View& v) {
    return Red::fold(v, [&](const auto& e) {
      const float g = __fmul_rn(e.in[1], e.vec[0]);
      return Red::Val{{g, g * xhat(in, e)}};
    });
  }
  __device__ __forceinline__ static void accumulate(const RowParams&, const RowIn& in,
                                                    const RowElem<kIn, kCols>& e,
                                                    float (&acc)[kAcc]) {
    acc[0] = e.in[1] * xhat(in, e);
    acc[1] = e.in[1];
  }
  __device__ __forceinline__ static Row finish(const RowParams& p, const RowIn& in,
                                               const Red::Val& t, int64_t, bool) {
    return {in.mean, in.rstd, t.v[0] * p.scalar[2], in.rstd * (t.v[1] * p.scalar[2])};
  }
  // dh = rstd·(g − mean_g − (h − μ)·k): x̂·mean(g·x̂) as (h − μ)·k saves a multiply per element;
  // h − μ stays explicit (rows of large mean: h·k − μ·k would cancel).
  __device__ __forceinline__ static void apply(const RowParams&, const Row& r,
                                               const RowElem<kIn, kCols>& e, float (&out)[kOut]) {
    // g rounded as in the fold: contracted into an FMA with − mean_g, a row of N = 1 would
    // give rstd·(rounding of dy·w) instead of exactly 0.
    const float g = __fmul_rn(e.in[1], e.vec[0]);
    const float dh = r.rstd * fmaf(r.mean - e.in[0], r.k, g - r.mean_g);
    if constexpr (kRes) {
      out[0] = dh + e.in[2];
      out[1] = out[0];
    } else {
      out[0] = dh;
    }
  }
};

using LayerNormBwd = LayerNormBwdT<false>;
using LayerNormBwdRes = LayerNormBwdT<true>;

}  // namespace quack::detail
