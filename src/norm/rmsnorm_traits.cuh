// RMSNorm forward and backward as row-op traits (the skeleton: src/row/op_traits.cuh).
//
//   forward   h = x (+ residual);  rstd = 1/sqrt(mean_j(h_j²) + eps)
//             y = h·rstd·(w + offset) (+ b);  residual_out = h;  rstd per row
//   backward  x̂ = x·rstd,  g = dy·(w + offset)
//             dh = rstd·g − x·rstd²·mean_j(g_j·x̂_j) + dresidual_out
//             dx = dresidual = dh;  dweight += dy·x̂;  dbias += dy   (column accumulations)
//
// Scalars (RowParams::scalar, set by rmsnorm.cpp): [0] eps (forward), [1] the weight's offset
// (the call's weight_offset with a weight; 1 without one, whose vector then reads as 0, so
// w + offset = 1), [2] 1/N.
// Method: QuACK 0.2.0 (quack/rmsnorm.py): one fp32 sum of squares per row, reduced over
// threads, warps, CTAs and clusters; the prenorm residual gradient of QuACK ≥ 0.2.3 (0.2.0 was
// wrong); weight_offset as in QuACK ≥ 0.6 (Gemma's zero-centred weights). The backward takes as
// many operations per element as RMSNorm's own kernel before the skeleton: the offset rides in
// its fp32 weight copy (kColShift) and the dweight terms come from the fold's sweep, where x̂
// is at hand (kAccInFold); the forward adds the offset (one FADD per element, its operand in
// the kernel's parameters).
//
// Instances (row_ops.cmake): the forward without and with the residual stream (residual and
// residual_out, either optional), each without and with a bias (kCols = 1 keeps the ring's
// weight slice at RMSNorm's 32 registers); the backward plain (x, dy -> dx: the "plain"
// kernels of RMSNorm's own backward, 5-8 % ahead of its general-purpose one), with the
// residual gradients, and with them and dbias (kAcc = 2: the dbias sums take registers).
#pragma once

#include "row/op_traits.cuh"
#include "row/row_reduce.cuh"

namespace quack::detail {

/// The forward: kRes = false: x -> y; kRes = true: x and the optional residual -> y and the
/// optional residual_out (h). Vectors weight (kVectors = 1) and bias (2); per-row output rstd
/// (row_out[0]) when present. The plain forward has no second stream at all (its register
/// instances keep RMSNorm's simple-forward register counts: t1024v4 at 32 with an fp32 weight).
template <bool kRes, int kVectors>
struct RmsNormFwdT : RowOpBase {
  static constexpr int kIn = kRes ? 2 : 1;   // x (, residual)
  static constexpr int kOptIn = kRes ? 1 : 0;
  static constexpr int kOut = kRes ? 2 : 1;  // y (, residual_out)
  static constexpr int kOptOut = kRes ? 1 : 0;
  static constexpr int kCols = kVectors;  // weight (, bias)
  static constexpr bool kLateCols = true;
  using Red = RedSum;  // Σ h²
  struct Row {
    float rstd;
  };

  __device__ __forceinline__ static float h_of(const RowElem<kIn, kCols>& e) {
    if constexpr (kRes) return e.in[0] + e.in[1];
    else return e.in[0];
  }
  template <class View>
  __device__ __forceinline__ static Red::Val reduce(const RowParams&, const RowIn&, const View& v) {
    return Red::fold(v, [](const auto& e) {
      const float h = h_of(e);
      return h * h;
    });
  }
  __device__ __forceinline__ static Row finish(const RowParams& p, const RowIn&, const Red::Val& t,
                                               int64_t row, bool writer) {
    const float rstd = rsqrtf(t.v[0] * p.scalar[2] + p.scalar[0]);
    if (writer && p.row_out[0].ptr)
      static_cast<float*>(p.row_out[0].ptr)[row * p.row_out[0].row_stride] = rstd;
    return {rstd};
  }
  // w + offset adds the scalar from the kernel's parameters (no register: h·(rstd·w + rstd·
  // offset) held rstd·offset in one, which took the t1024v4 instance from 32 to 40 registers,
  // one CTA per SM, and spilled the ring's).
  __device__ __forceinline__ static void apply(const RowParams& p, const Row& r,
                                               const RowElem<kIn, kCols>& e, float (&out)[kOut]) {
    const float h = h_of(e);
    const float y = h * r.rstd * (e.vec[0] + p.scalar[1]);
    if constexpr (kCols == 2) out[0] = y + e.vec[1];
    else out[0] = y;
    if constexpr (kRes) out[1] = h;
  }
};

using RmsNormFwd = RmsNormFwdT<false, 1>;
using RmsNormFwdRes = RmsNormFwdT<true, 1>;
using RmsNormFwdBias = RmsNormFwdT<false, 2>;
using RmsNormFwdResBias = RmsNormFwdT<true, 2>;

/// The backward: inputs x (the forward's h), dy and (kRes) the optional dresidual_out; outputs
/// dx and (kRes) the optional dresidual (both dh); vector weight (absent: 0); per-row input
/// rstd (row_in[0]); column accumulations dweight (Σ dy·x̂) and, with kDbias, dbias (Σ dy).
/// The plain backward (no residual gradients, training's usual call) has no third stream and
/// no second output: fewer registers and instructions than the residual one.
template <bool kRes, bool kDbias>
struct RmsNormBwdT : RowOpBase {
  static constexpr int kIn = kRes ? 3 : 2;  // x, dy (, dresidual_out)
  static constexpr int kOptIn = kRes ? 1 : 0;
  static constexpr int kOut = kRes ? 2 : 1;  // dx (, dresidual)
  static constexpr int kOptOut = kRes ? 1 : 0;
  static constexpr int kCols = 1;  // weight, shifted by the offset where converted (kColShift)
  static constexpr bool kReduceCols = true;
  static constexpr int kAcc = kDbias ? 2 : 1;  // dweight (, dbias)
  static constexpr bool kAccInFold = true;     // dy·x̂ where the fold computes x̂
  static constexpr bool kColShift = true;
  using Red = RedSum;  // Σ g·x̂
  struct RowIn {
    float rstd;
  };
  struct Row {
    float rstd, c;  // c = rstd²·mean(g·x̂)
  };

  __device__ __forceinline__ static RowIn load_row(const RowParams& p, int64_t row) {
    return {static_cast<const float*>(p.row_in[0].ptr)[row * p.row_in[0].row_stride]};
  }
  __device__ __forceinline__ static float col_shift(const RowParams& p, int) {
    return p.scalar[1];
  }
  // e.vec[0] = w + offset (col_shift).
  template <class View>
  __device__ __forceinline__ static Red::Val reduce(const RowParams&, const RowIn& in,
                                                    const View& v) {
    return Red::fold(v, [&](const auto& e) { return e.in[1] * e.vec[0] * (e.in[0] * in.rstd); });
  }
  __device__ __forceinline__ static void accumulate(const RowParams&, const RowIn& in,
                                                    const RowElem<kIn, kCols>& e,
                                                    float (&acc)[kAcc]) {
    acc[0] = e.in[1] * (e.in[0] * in.rstd);
    if constexpr (kDbias) acc[1] = e.in[1];
  }
  __device__ __forceinline__ static Row finish(const RowParams& p, const RowIn& in,
                                               const Red::Val& t, int64_t, bool) {
    const float mean = t.v[0] * p.scalar[2];
    return {in.rstd, in.rstd * in.rstd * mean};
  }
  __device__ __forceinline__ static void apply(const RowParams&, const Row& r,
                                               const RowElem<kIn, kCols>& e, float (&out)[kOut]) {
    const float dh = fmaf(e.in[1] * e.vec[0], r.rstd, -e.in[0] * r.c);
    if constexpr (kRes) {
      out[0] = dh + e.in[2];
      out[1] = out[0];
    } else {
      out[0] = dh;
    }
  }
};

using RmsNormBwd = RmsNormBwdT<false, false>;
using RmsNormBwdRes = RmsNormBwdT<true, false>;
using RmsNormBwdDbias = RmsNormBwdT<true, true>;

}  // namespace quack::detail
