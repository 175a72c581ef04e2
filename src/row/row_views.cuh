// What the policies hand an op's traits: views of the elements a thread holds (for the fold)
// and the per-vector output step (apply + conversion + 16-byte stores + column accumulations).
//
// A view has `static constexpr bool kOnChip` (its elements sit in registers or shared memory,
// so a fold may sweep them more than once) and `for_each(f)`, which calls
// f(const RowElem<kIn, kCols>&) once per element the thread holds, in a fixed order.
// Per-column vectors reach the fold only for traits with kReduceCols (a column source `Cols`
// fills them per 16-byte vector of the row); otherwise e.vec is left unset there.
#pragma once

#include <cstdint>

#include "common/row_general.cuh"
#include "common/vec.cuh"
#include "row/op_traits.cuh"
#include "row/row_params.h"

namespace quack::detail {

template <typename U, int K>
__device__ __forceinline__ void zero_packed(Packed<U, K>& v) {
#pragma unroll
  for (int w = 0; w < Packed<U, K>::kWords; ++w) {
    if constexpr (Packed<U, K>::kWordBytes == 16) v.word[w] = make_uint4(0, 0, 0, 0);
    else if constexpr (Packed<U, K>::kWordBytes == 8) v.word[w] = make_uint2(0, 0);
    else v.word[w] = 0;
  }
}

/// A 16-byte shared-memory load the compiler may not merge with an earlier one (ld.volatile).
template <typename U, int K>
__device__ __forceinline__ void lds_volatile(const U* p, Packed<U, K>& v) {
  static_assert(Packed<U, K>::kBytes == 16, "one 16-byte word");
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.word[0].x), "=r"(v.word[0].y), "=r"(v.word[0].z), "=r"(v.word[0].w)
               : "r"(a));
}

/// Makes a packed value opaque to the optimizer at this point (no instructions): values
/// derived from it cannot be hoisted above it. A persistent kernel calls it on loop-invariant
/// registers (the ring's vector slices) at the top of each row, so the compiler does not keep
/// their unpacked fp32 copies live across the row loop (which spilled LayerNorm's ring kernel).
template <typename U, int K>
__device__ __forceinline__ void opaque(Packed<U, K>& v) {
#pragma unroll
  for (int w = 0; w < Packed<U, K>::kWords; ++w) {
    if constexpr (Packed<U, K>::kWordBytes == 16) {
      asm volatile("" : "+r"(v.word[w].x), "+r"(v.word[w].y), "+r"(v.word[w].z), "+r"(v.word[w].w));
    } else if constexpr (Packed<U, K>::kWordBytes == 8) {
      asm volatile("" : "+r"(v.word[w].x), "+r"(v.word[w].y));
    } else if constexpr (Packed<U, K>::kWordBytes == 4) {
      asm volatile("" : "+r"(v.word[w]));
    } else {
      asm volatile("" : "+h"(v.word[w]));
    }
  }
}

// ---------------------------------------------------------------------- column sources
//
// load(j, v): the per-column vectors' values (fp32) at the columns of the thread's 16-byte
// input vector j.

/// No vector values (ops without kCols, or folds that do not read them).
struct NoCols {
  template <int kC, int kV>
  __device__ __forceinline__ void load(int, float (&)[kC][kV]) const {}
};

/// Vector slices held packed in registers (ring policy; register policy when loaded early):
/// vals[c][j] holds vector c at the columns of the thread's input vector j.
template <typename TVec, int kC, int kVecs, int kVec>
struct PackedCols {
  const Packed<TVec, kVec> (&vals)[kC][kVecs];
  template <int kCd, int kV>
  __device__ __forceinline__ void load(int j, float (&v)[kCd][kV]) const {
#pragma unroll
    for (int c = 0; c < kC; ++c) unpack(vals[c][j], v[c]);
  }
};

/// Vector slices converted to fp32 in shared memory (staged policy): vector c's slice at
/// base + c·stride; the thread's input vector j at element local0 + j·step of it.
template <int kC, int kVec>
struct SharedCols {
  const float* base;
  int stride, local0, step;
  template <int kCd, int kV>
  __device__ __forceinline__ void load(int j, float (&v)[kCd][kV]) const {
#pragma unroll
    for (int c = 0; c < kC; ++c)
      load_vec<float, kVec, Cache::kShared>(base + c * stride + local0 + j * step, v[c]);
  }
};

/// Loads vector c's kVec values at column `col` of a contiguous vector (16-byte read-only
/// loads; absent: zeros).
template <typename TVec, int kVec>
__device__ __forceinline__ void load_col_packed(const RowIO& v, int64_t col,
                                                Packed<TVec, kVec>& out) {
  if (v.ptr) load_packed<Cache::kReadOnly>(static_cast<const TVec*>(v.ptr) + col, out);
  else zero_packed(out);
}

// ---------------------------------------------------------------------- views

template <class Op, int kVec>
__device__ __forceinline__ void fill_elem(RowElem<Op::kIn, Op::kCols>& e,
                                          const float (&x)[Op::kIn][kVec],
                                          const float (&v)[row_dim(Op::kCols)][kVec], int i,
                                          int64_t col) {
#pragma unroll
  for (int s = 0; s < Op::kIn; ++s) e.in[s] = x[s][i];
  if constexpr (Op::kCols > 0) {
#pragma unroll
    for (int c = 0; c < Op::kCols; ++c) e.vec[c] = v[c][i];
  }
  e.col = col;
}

/// Elements held as kVecs packed 16-byte vectors per input stream (registers, or one pass of
/// the looped policy; absent optional streams hold zeros): vector j of the thread exists when
/// j·kTpr < n; its elements are columns col0 + j·kTpr·kVec + i.
template <class Op, typename TIn, int kVecs, int kTpr, class Cols = NoCols>
struct RegisterView {
  static constexpr bool kOnChip = true;
  static constexpr int kIn = Op::kIn;
  static constexpr int kVec = 16 / sizeof(TIn);
  using V = Packed<TIn, kVec>;
  const V (&vals)[kIn][kVecs];
  int n;
  int64_t col0;
  Cols cols;

  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      if (j * kTpr < n) {
        float x[kIn][kVec], v[row_dim(Op::kCols)][kVec];
#pragma unroll
        for (int s = 0; s < kIn; ++s) unpack(vals[s][j], x[s]);
        cols.load(j, v);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          RowElem<kIn, Op::kCols> e;
          fill_elem<Op, kVec>(e, x, v, i, col0 + int64_t{j} * kTpr * kVec + i);
          f(e);
        }
      }
    }
  }
};

/// Elements staged in shared memory (the ring and staged policies): buf[s] points at the
/// thread's first element of stream s; vector j at buf[s] + j·step elements (consecutive
/// threads on consecutive 16-byte words: conflict-free), when j·kStride < n (ring: step =
/// kTpr·kVec, kStride = kTpr; staged: runtime step, kStride = 1 and n = the thread's vectors).
/// Absent optional streams (present[s] false) read as 0.
template <class Op, typename TIn, int kVecs, int kStride, class Cols = NoCols>
struct SharedView {
  static constexpr bool kOnChip = true;
  static constexpr int kIn = Op::kIn;
  static constexpr int kVec = 16 / sizeof(TIn);
  const TIn* const (&buf)[kIn];
  const bool (&present)[kIn];
  int n;
  int step;     // elements between the thread's vectors j and j + 1
  int64_t col0; // column of the thread's vector 0
  Cols cols;

  /// The thread's vector j of every stream, in fp32. Each sweep reads shared memory again
  /// (volatile loads): keeping a first sweep's values live for a second one (what the compiler
  /// does with plain loads) spilled LayerNorm's ring kernel beside its weight and bias slices.
  __device__ __forceinline__ void load(int j, float (&x)[kIn][kVec]) const {
#pragma unroll
    for (int s = 0; s < kIn; ++s) {
      if (!row_in_optional<Op>(s) || present[s]) {
        Packed<TIn, kVec> v;
        lds_volatile(buf[s] + j * step, v);
        unpack(v, x[s]);
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i) x[s][i] = 0.f;
      }
    }
  }

  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      if (j * kStride < n) {
        float x[kIn][kVec], v[row_dim(Op::kCols)][kVec];
        load(j, x);
        cols.load(j, v);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          RowElem<kIn, Op::kCols> e;
          fill_elem<Op, kVec>(e, x, v, i, col0 + int64_t{j} * step + i);
          f(e);
        }
      }
    }
  }
};

/// One element of stream s of the general policy (absent optional streams: 0).
template <class Op>
__device__ __forceinline__ float load_in1(const RowParams& p, int s, int64_t row, int64_t col) {
  if (row_in_optional<Op>(s) && p.in[s].ptr == nullptr) return 0.f;
  return load1(p.in[s], row, col);
}

/// The per-column vectors at `col` (general policy; absent: 0).
template <class Op>
__device__ __forceinline__ void load_vec1(const RowParams& p, int64_t col,
                                          RowElem<Op::kIn, Op::kCols>& e) {
  if constexpr (Op::kCols > 0) {
#pragma unroll
    for (int c = 0; c < Op::kCols; ++c) e.vec[c] = p.vec[c].ptr ? load1(p.vec[c], 0, col) : 0.f;
  }
}

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
      for (int s = 0; s < kIn; ++s) e.in[s] = load_in1<Op>(p, s, row, col);
      if constexpr (Op::kReduceCols) load_vec1<Op>(p, col, e);
      e.col = col;
      f(e);
    }
  }
};

// ---------------------------------------------------------------------- outputs

/// One element's outputs through the traits; for ops with column accumulations, its terms are
/// added into acc(k, i) (a float& per accumulation k and element i of the vector).
template <class Op, class AccF>
__device__ __forceinline__ void apply_elem(const RowParams& p, const typename Op::Row& r,
                                           const RowElem<Op::kIn, Op::kCols>& e,
                                           float (&o)[row_dim(Op::kOut)], AccF&& acc, int i) {
  if constexpr (Op::kAcc > 0) {
    float a[Op::kAcc];
    Op::apply(p, r, e, o, a);
#pragma unroll
    for (int k = 0; k < Op::kAcc; ++k) acc(k, i) += a[k];
  } else {
    Op::apply(p, r, e, o);
  }
}

/// No column accumulations.
struct NoAcc {
  mutable float sink = 0.f;  // never written: apply_elem adds only for ops with kAcc > 0
  __device__ __forceinline__ float& operator()(int, int) const { return sink; }
};

/// One 16-byte input vector's outputs: Op::apply per element (inputs x, vectors v), converted to
/// TOut and stored with 16-byte (or, for outputs narrower than the input, 8-byte) streaming
/// stores at dst[s] + off; absent optional outputs (dst[s] == nullptr) are not stored. For ops
/// with column accumulations, each element's terms are added into acc(k, i).
template <class Op, typename TOut, int kVec, class AccF = NoAcc>
__device__ __forceinline__ void apply_store(const RowParams& p, const typename Op::Row& r,
                                            const float (&x)[Op::kIn][kVec],
                                            const float (&v)[row_dim(Op::kCols)][kVec],
                                            int64_t col, TOut* const (&dst)[row_dim(Op::kOut)],
                                            int64_t off, AccF&& acc = AccF{}) {
  Packed<TOut, kVec> y[row_dim(Op::kOut)];
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    RowElem<Op::kIn, Op::kCols> e;
    fill_elem<Op, kVec>(e, x, v, i, col + i);
    float o[row_dim(Op::kOut)];
    apply_elem<Op>(p, r, e, o, acc, i);
#pragma unroll
    for (int s = 0; s < Op::kOut; ++s) y[s].elt[i] = from_float<TOut>(o[s]);
  }
#pragma unroll
  for (int s = 0; s < Op::kOut; ++s)
    if (!row_out_optional<Op>(s) || dst[s] != nullptr) store_packed(dst[s] + off, y[s]);
}

/// The output pointers of a vector policy: stream s at row `row`, column `col` (nullptr for an
/// absent optional output).
template <class Op, typename TOut>
__device__ __forceinline__ void out_ptrs(const RowParams& p, int64_t row, int64_t col,
                                         TOut* (&dst)[row_dim(Op::kOut)]) {
#pragma unroll
  for (int s = 0; s < row_dim(Op::kOut); ++s) {
    if (s >= Op::kOut || (row_out_optional<Op>(s) && p.out[s].ptr == nullptr))
      dst[s] = nullptr;
    else
      dst[s] = static_cast<TOut*>(p.out[s].ptr) + row * p.out[s].row_stride + col;
  }
}

}  // namespace quack::detail
