// What the policies hand an op's traits: views of the elements a thread holds (for the fold)
// and the per-vector output step (apply + conversion + 16-byte stores).
//
// A view has `static constexpr bool kOnChip` (its elements sit in registers or shared memory,
// so a fold may sweep them more than once) and `for_each(f)`, which calls
// f(const RowElem<kIn, kCols>&) once per element the thread holds, in a fixed order. On-chip
// views also give the max of stream 0 from the packed values (max_in0) and one element by its
// column (value_at: exactly one thread of a row holds each column).
#pragma once

#include <cstdint>

#include "common/row_general.cuh"
#include "common/vec.cuh"
#include "row/op_traits.cuh"
#include "row/row_math.cuh"
#include "row/row_params.h"

namespace quack::detail {

/// Running max over 16-byte vectors of T, fmaxf's semantics (NaN ignored; −inf for none):
/// 16-bit types compare packed pairs (max.bf16x2 / max.f16x2: one instruction per two
/// elements, no conversion until value()).
template <typename T>
struct PackedMax {
  float m = kNegInf;
  template <int K>
  __device__ __forceinline__ void add(const Packed<T, K>& v) {
#pragma unroll
    for (int i = 0; i < K; ++i) m = fmaxf(m, to_float(v.elt[i]));
  }
  __device__ __forceinline__ float value() const { return m; }
};

template <typename T>
struct PackedMax16 {
  static constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  uint32_t m = kBf16 ? 0xff80ff80u : 0xfc00fc00u;  // (−inf, −inf)
  template <int K>
  __device__ __forceinline__ void add(const Packed<T, K>& v) {
    static_assert(Packed<T, K>::kWordBytes == 16, "16-byte vectors");
#pragma unroll
    for (int w = 0; w < Packed<T, K>::kWords; ++w) {
      const uint32_t u[4] = {v.word[w].x, v.word[w].y, v.word[w].z, v.word[w].w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if constexpr (kBf16) asm("max.bf16x2 %0, %0, %1;" : "+r"(m) : "r"(u[k]));
        else asm("max.f16x2 %0, %0, %1;" : "+r"(m) : "r"(u[k]));
      }
    }
  }
  __device__ __forceinline__ float value() const {
    if constexpr (kBf16) return fmaxf(__uint_as_float(m << 16), __uint_as_float(m & 0xffff0000u));
    else
      return fmaxf(__half2float(__ushort_as_half(static_cast<unsigned short>(m & 0xffffu))),
                   __half2float(__ushort_as_half(static_cast<unsigned short>(m >> 16))));
  }
};
template <>
struct PackedMax<__nv_bfloat16> : PackedMax16<__nv_bfloat16> {};
template <>
struct PackedMax<__half> : PackedMax16<__half> {};

/// Which of a thread's vectors holds column `col`, for a thread whose first element is column
/// col0 and whose vector j holds columns col0 + j·kTpr·kVec + [0, kVec) when j·kTpr < n: the
/// vector j and element i, or false. Columns of the vector policies are < 2^31 (32-bit math).
template <int kTpr, int kVec, int kVecs>
__device__ __forceinline__ bool row_view_owner(int64_t col, int64_t col0, int n, int& j, int& i) {
  const int d = static_cast<int>(col) - static_cast<int>(col0);
  if (d < 0) return false;
  constexpr unsigned kSpan = kTpr * kVec;  // columns from one of the thread's vectors to the next
  const unsigned ud = static_cast<unsigned>(d);
  j = static_cast<int>(ud / kSpan);
  i = static_cast<int>(ud % kSpan);
  return i < kVec && j < kVecs && j * kTpr < n;
}

/// Elements held as kVecs packed 16-byte vectors per input stream (registers, or one pass of
/// the looped policy): vector j of the thread exists when j·kTpr < n; its elements are
/// columns col0 + j·kTpr·kVec + i.
template <class Op, typename TIn, int kVecs, int kTpr>
struct RegisterView {
  static constexpr bool kOnChip = true;
  static constexpr int kIn = Op::kIn;
  static constexpr int kVec = 16 / sizeof(TIn);
  using V = Packed<TIn, kVec>;
  const V (&vals)[kIn][kVecs];
  int n;
  int64_t col0;

  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      if (j * kTpr < n) {
        float x[kIn][kVec];
#pragma unroll
        for (int s = 0; s < kIn; ++s) unpack(vals[s][j], x[s]);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          RowElem<kIn, Op::kCols> e;
#pragma unroll
          for (int s = 0; s < kIn; ++s) e.in[s] = x[s][i];
          e.col = col0 + int64_t{j} * kTpr * kVec + i;
          f(e);
        }
      }
    }
  }

  __device__ __forceinline__ float max_in0() const {
    PackedMax<TIn> pm;
#pragma unroll
    for (int j = 0; j < kVecs; ++j)
      if (j * kTpr < n) pm.add(vals[0][j]);
    return pm.value();
  }

  /// Whether this thread holds column `col` of stream 0, and its value: the 32-bit word holding
  /// it selected from the registers by compile-time indices (no local memory), then converted.
  __device__ __forceinline__ bool value_at(int64_t col, float& x) const {
    int j, i;
    if (!row_view_owner<kTpr, kVec, kVecs>(col, col0, n, j, i)) return false;
    static_assert(V::kWordBytes == 16, "16-byte vectors");
    constexpr int kPerWord = 4 / sizeof(TIn);     // elements per 32-bit word
    const int w = j * 4 + i / kPerWord;           // the word among the thread's kVecs·4
    uint32_t u = vals[0][0].word[0].x;
#pragma unroll
    for (int jj = 0; jj < kVecs; ++jj) {
      const uint32_t q[4] = {vals[0][jj].word[0].x, vals[0][jj].word[0].y, vals[0][jj].word[0].z,
                             vals[0][jj].word[0].w};
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (jj * 4 + k == w) u = q[k];
    }
    if constexpr (sizeof(TIn) == 4) {
      x = __uint_as_float(u);
    } else if constexpr (std::is_same_v<TIn, __nv_bfloat16>) {
      x = __uint_as_float((i & 1) ? u & 0xffff0000u : u << 16);
    } else {
      x = __half2float(__ushort_as_half(static_cast<unsigned short>((i & 1) ? u >> 16 : u)));
    }
    return true;
  }
};

/// Elements staged in shared memory (the ring policy): buf[s] points at the thread's first
/// vector of stream s in the stage; vector j at buf[s][j·kTpr] (consecutive threads on
/// consecutive 16-byte words: conflict-free), when j·kTpr < n.
template <class Op, typename TIn, int kVecs, int kTpr>
struct SharedView {
  static constexpr bool kOnChip = true;
  static constexpr int kIn = Op::kIn;
  static constexpr int kVec = 16 / sizeof(TIn);
  using V = Packed<TIn, kVec>;
  const V* const (&buf)[kIn];
  int n;
  int64_t col0;

  /// The thread's vector j of every stream, in fp32.
  __device__ __forceinline__ void load(int j, float (&x)[kIn][kVec]) const {
#pragma unroll
    for (int s = 0; s < kIn; ++s) {
      V v;
      load_packed<Cache::kShared>(buf[s][j * kTpr].elt, v);
      unpack(v, x[s]);
    }
  }

  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      if (j * kTpr < n) {
        float x[kIn][kVec];
        load(j, x);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          RowElem<kIn, Op::kCols> e;
#pragma unroll
          for (int s = 0; s < kIn; ++s) e.in[s] = x[s][i];
          e.col = col0 + int64_t{j} * kTpr * kVec + i;
          f(e);
        }
      }
    }
  }

  __device__ __forceinline__ float max_in0() const {
    PackedMax<TIn> pm;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      if (j * kTpr < n) {
        V v;
        load_packed<Cache::kShared>(buf[0][j * kTpr].elt, v);
        pm.add(v);
      }
    }
    return pm.value();
  }

  /// Whether this thread holds column `col` of stream 0, and its value (one shared load).
  __device__ __forceinline__ bool value_at(int64_t col, float& x) const {
    int j, i;
    if (!row_view_owner<kTpr, kVec, kVecs>(col, col0, n, j, i)) return false;
    x = to_float(buf[0][j * kTpr].elt[i]);
    return true;
  }
};

/// Elements read from global memory one at a time in their runtime dtypes and strides (the
/// general policy): columns begin, begin + step, ... < end of `row`.
template <class Op>
struct GlobalView {
  static constexpr bool kOnChip = false;
  static constexpr int kIn = Op::kIn;
  const RowParams& p;
  int64_t row;
  int64_t begin, end;
  int step;

  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
#pragma unroll 4
    for (int64_t col = begin; col < end; col += step) {
      RowElem<kIn, Op::kCols> e;
#pragma unroll
      for (int s = 0; s < kIn; ++s) e.in[s] = load1(p.in[s], row, col);
      e.col = col;
      f(e);
    }
  }
};

/// One vector's outputs: Op::apply per element, converted to TOut, stored with 16-byte (or,
/// for outputs narrower than the input, 8-byte) streaming stores at dst[s] + off.
template <class Op, typename TOut, int kVec>
__device__ __forceinline__ void apply_store(const RowParams& p, const typename Op::Row& r,
                                            const float (&x)[Op::kIn][kVec], int64_t col,
                                            TOut* const (&dst)[Op::kOut], int64_t off) {
  Packed<TOut, kVec> y[Op::kOut];
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    RowElem<Op::kIn, Op::kCols> e;
#pragma unroll
    for (int s = 0; s < Op::kIn; ++s) e.in[s] = x[s][i];
    e.col = col + i;
    float o[Op::kOut];
    Op::apply(p, r, e, o);
#pragma unroll
    for (int s = 0; s < Op::kOut; ++s) y[s].elt[i] = from_float<TOut>(o[s]);
  }
#pragma unroll
  for (int s = 0; s < Op::kOut; ++s) store_packed(dst[s] + off, y[s]);
}

}  // namespace quack::detail
