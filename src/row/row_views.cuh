// What the policies hand an op's traits: views of the elements a thread holds (for the fold)
// and the per-vector output step (apply + conversion + 16-byte stores).
//
// A view has `static constexpr bool kOnChip` (its elements sit in registers or shared memory,
// so a fold may sweep them more than once) and `for_each(f)`, which calls
// f(const RowElem<kIn, kCols>&) once per element the thread holds, in a fixed order.
#pragma once

#include <cstdint>

#include "common/row_general.cuh"
#include "common/vec.cuh"
#include "row/op_traits.cuh"
#include "row/row_params.h"

namespace quack::detail {

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
