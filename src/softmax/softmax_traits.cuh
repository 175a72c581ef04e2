// Softmax forward and backward as row-op traits (the skeleton: src/row/op_traits.cuh).
//
//   forward   y = e^(x − m) / s,   (m, s) = (max_j x_j, Σ_j e^(x_j − m))   online, one exchange
//   backward  dx = y·(dy − Σ_j y_j·dy_j)
//
// Method: QuACK 0.2.0 (quack/softmax.py): the online (max, sum) pair reduced in one pass and one
// exchange (Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018), fp32
// math, e^x as 2^(x·log2 e) on the MUFU; the output as 2^((x − m)·log2 e − log2 s) (FADD, FFMA,
// MUFU per element; log2_denominator). −inf inputs give 0; a row of all −inf gives NaN
// (e^(−inf − (−inf))), as PyTorch does; a row of 2^k equal values gives exactly 2^-k, other
// lengths 1/N within a few fp32 ulp.
#pragma once

#include "row/op_traits.cuh"
#include "row/row_math.cuh"
#include "row/row_reduce.cuh"

namespace quack::detail {

struct SoftmaxFwd : RowOpBase {
  static constexpr int kIn = 1;   // x
  static constexpr int kOut = 1;  // y
  // The cluster register entries (QuACK's softmax geometry) and the rest under trial compiled;
  // the plan takes cl-t256v8 on 16-bit rows beyond 64 KB (row_plan.cpp, preferred_entry).
  static constexpr bool kTrialConfigs = true;
  using Red = OnlineMaxSum;
  // The held cluster register entry (cl-t256v8-h): e^(x − m_t) kept from the
  // fold (reduce_held / finish_held / apply_held, op_traits.cuh).
  static constexpr bool kHeldFold = true;
  struct Row {
    float m, log2_s;
    float scale;  // held folds: e^(m_t − m) / s (m_t: the thread's max); else unset
  };

  template <class View>
  __device__ __forceinline__ static Red::Val reduce(const RowParams&, const RowIn&, const View& v) {
    return Red::fold_in0(v);
  }
  __device__ __forceinline__ static Row finish(const RowParams&, const RowIn&, const Red::Val& t,
                                               int64_t, bool) {
    float l = log2_denominator(t.v[1]);
    // Opaque: otherwise the compiler recomputes the select inside log2_denominator in every
    // vector of the output loop (FSETP + FSEL per 8 elements) rather than hold the register.
    asm volatile("" : "+f"(l));
    return {t.v[0], l, 0.f};
  }
  template <class View, int kVecs, int kVec>
  __device__ __forceinline__ static Red::Val reduce_held(const RowParams&, const RowIn&,
                                                         const View& v, float (&h)[kVecs][kVec]) {
    return Red::fold_in0_held(v, h);
  }
  /// h = e^(x − m_t) (m_t: the thread's max, taken as 0 where it is −inf: then every h is 0);
  /// y = h·e^(m_t − m)/s. A row of equal values: h = 1 and e^0 = 1, so y is 1/s correctly
  /// rounded (exactly torch's 1/N); one finite element: 1. A thread of all −inf: e^(−inf − m)
  /// = 0, y = 0; a row of all −inf: e^(−inf − (−inf)) = NaN; a NaN or +inf element: s NaN.
  __device__ __forceinline__ static Row finish_held(const RowParams&, const RowIn&,
                                                    const Red::Val& t, const Red::Val& part,
                                                    int64_t, bool) {
    return {t.v[0], 0.f, exp_diff(part.v[0], t.v[0]) / t.v[1]};
  }
  __device__ __forceinline__ static void apply_held(const RowParams&, const Row& r, float h,
                                                    float (&out)[kOut]) {
    out[0] = h * r.scale;
  }
  __device__ __forceinline__ static void apply(const RowParams&, const Row& r,
                                               const RowElem<kIn, kCols>& e, float (&out)[kOut]) {
    // e^(x − m) / s = 2^((x − m)·log2 e − log2 s): FADD, FFMA, MUFU (no reciprocal multiply).
    // The difference first (exact for x near m, so shifted inputs such as x + 100 lose nothing):
    // where x = m the output is 2^(−log2 s), exactly 1/s for s a power of two
    // (log2_denominator: one finite element gives 1, a row of 2^k equal values 2^-k).
    out[0] = exp2_approx(fmaf(e.in[0] - r.m, kLog2e, -r.log2_s));
  }
};

struct SoftmaxBwd : RowOpBase {
  static constexpr int kIn = 2;   // y, dy
  static constexpr int kOut = 1;  // dx
  using Red = RedSum;             // Σ y·dy
  struct Row {
    float dot;
  };

  template <class View>
  __device__ __forceinline__ static Red::Val reduce(const RowParams&, const RowIn&, const View& v) {
    return Red::fold(v, [](const auto& e) { return e.in[0] * e.in[1]; });
  }
  __device__ __forceinline__ static Row finish(const RowParams&, const RowIn&, const Red::Val& t,
                                               int64_t, bool) {
    return {t.v[0]};
  }
  __device__ __forceinline__ static void apply(const RowParams&, const Row& r,
                                               const RowElem<kIn, kCols>& e, float (&out)[kOut]) {
    out[0] = e.in[0] * (e.in[1] - r.dot);
  }
};

}  // namespace quack::detail
