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

/// The backward: inputs h (the forward's x + residual), dy and, optionally, dresidual_out;
/// outputs dx and, optionally, dresidual (both dh); vector weight (absent: 0); per-row inputs
/// mean (row_in[0]) and rstd (row_in[1]); column accumulations dweight (Σ dy·x̂) and dbias
/// (Σ dy).
struct LayerNormBwd : RowOpBase {
  static constexpr int kIn = 3;   // h, dy, dresidual_out
  static constexpr int kOptIn = 1;
  static constexpr int kOut = 2;  // dx, dresidual
  static constexpr int kOptOut = 1;
  static constexpr int kCols = 1;  // weight
  static constexpr bool kReduceCols = true;
  static constexpr int kAcc = 2;   // dweight, dbias
  using Red = RedSums<2>;          // (Σ g, Σ g·x̂)
  struct RowIn {
    float mean, rstd;
  };
  struct Row {
    float mean, rstd, mean_g, mean_gx;
  };

  __device__ __forceinline__ static RowIn load_row(const RowParams& p, int64_t row) {
    return {static_cast<const float*>(p.row_in[0].ptr)[row * p.row_in[0].row_stride],
            static_cast<const float*>(p.row_in[1].ptr)[row * p.row_in[1].row_stride]};
  }
  template <class View>
  __device__ __forceinline__ static Red::Val reduce(const RowParams& p, const RowIn& in,
                                                    const View& v) {
    const float off = p.scalar[1];
    return Red::fold(v, [&](const auto& e) {
      const float xh = (e.in[0] - in.mean) * in.rstd;
      const float g = __fmul_rn(e.in[1], e.vec[0] + off);  // as apply's g (see there)
      return Red::Val{{g, g * xh}};
    });
  }
  __device__ __forceinline__ static Row finish(const RowParams& p, const RowIn& in,
                                               const Red::Val& t, int64_t, bool) {
    return {in.mean, in.rstd, t.v[0] * p.scalar[2], t.v[1] * p.scalar[2]};
  }
  __device__ __forceinline__ static void apply(const RowParams& p, const Row& r,
                                               const RowElem<kIn, kCols>& e, float (&out)[kOut],
                                               float (&acc)[kAcc]) {
    const float xh = (e.in[0] - r.mean) * r.rstd;
    const float dy = e.in[1];
    // g rounded as in the fold: contracted into an FMA with − mean_g, a row of N = 1 would
    // give rstd·(rounding of dy·w) instead of exactly 0.
    const float g = __fmul_rn(dy, e.vec[0] + p.scalar[1]);
    const float dh = r.rstd * (g - r.mean_g - xh * r.mean_gx) + e.in[2];
    out[0] = dh;
    out[1] = dh;
    acc[0] = dy * xh;
    acc[1] = dy;
  }
};

}  // namespace quack::detail
