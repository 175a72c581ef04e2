// What the policies hand an op's traits: views of the elements a thread holds (for the fold)
// and the per-vector output step (apply + conversion + 16-byte stores + column accumulations).
//
// A view has `static constexpr bool kOnChip` (its elements sit in registers or shared memory,
// so a fold may sweep them more than once) and `for_each(f)`, which calls
// f(const RowElem<kIn, kCols>&) once per element the thread holds, in a fixed order.
// Per-column vectors reach the fold only for traits with kReduceCols (a column source `Cols`
// fills them per 16-byte vector of the row); otherwise e.vec is left unset there. On-chip
// views also give the max of stream 0 from the packed values (max_in0), one element by its
// column (value_at: exactly one thread of a row holds each column) and for_each_at(f), which
// calls f(e, j, i) for element i of the thread's 16-byte vector j (kVec elements each; the
// vectors present are a prefix j = 0, 1, ...: a fold may work per vector).
#pragma once

#include <cstdint>

#include "common/row_general.cuh"
#include "common/vec.cuh"
#include "row/op_traits.cuh"
#include "row/row_dtypes.cuh"
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


template <typename U, int K>
__device__ __forceinline__ void zero_packed(Packed<U, K>& v) {
#pragma unroll
  for (int w = 0; w < Packed<U, K>::kWords; ++w) {
    if constexpr (Packed<U, K>::kWordBytes == 16) v.word[w] = make_uint4(0, 0, 0, 0);
    else if constexpr (Packed<U, K>::kWordBytes == 8) v.word[w] = make_uint2(0, 0);
    else v.word[w] = 0;
  }
}

/// 16-byte shared-memory loads (one per word of the vector) the compiler may not merge with
/// earlier ones (ld.volatile).
template <typename U, int K>
__device__ __forceinline__ void lds_volatile(const U* p, Packed<U, K>& v) {
  static_assert(Packed<U, K>::kWordBytes == 16, "whole 16-byte words");
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
#pragma unroll
  for (int w = 0; w < Packed<U, K>::kWords; ++w)
    asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.word[w].x), "=r"(v.word[w].y), "=r"(v.word[w].z), "=r"(v.word[w].w)
                 : "r"(a + 16 * w));
}

/// The packed input vectors a thread holds in registers (register and looped policies):
/// kVecs vectors of each input stream, each stream in its own dtype (D), kept as 16-byte
/// words (a 16-bit stream one word per vector, an fp32 stream beside it two; unused words of
/// the narrower streams are never touched, so they take no registers).
template <class Op, class D, int kVecs>
struct RowInRegs {
  static constexpr int kIn = Op::kIn;
  static constexpr int kVec = row_vec_elems<D, kIn>();
  static constexpr int kMaxWords = row_in_max_words<D, kIn>();
  template <int s>
  using T = row_in_t<D, s>;
  template <int s>
  using V = Packed<T<s>, kVec>;
  uint4 w[kIn][kVecs][kMaxWords];

  template <int s>
  __device__ __forceinline__ V<s> get(int j) const {
    V<s> v;
#pragma unroll
    for (int k = 0; k < V<s>::kWords; ++k) v.word[k] = w[s][j][k];
    return v;
  }
  /// Vector j of stream s from global memory at p (its kVec elements).
  template <int s, Cache kCache>
  __device__ __forceinline__ void load(int j, const T<s>* p) {
    V<s> v;
    load_packed<kCache>(p, v);
#pragma unroll
    for (int k = 0; k < V<s>::kWords; ++k) w[s][j][k] = v.word[k];
  }
  template <int s>
  __device__ __forceinline__ void zero(int j) {
#pragma unroll
    for (int k = 0; k < V<s>::kWords; ++k) w[s][j][k] = make_uint4(0, 0, 0, 0);
  }
  /// Where the row's loads go. Plain loads, except beside column vectors (weight, bias) whose
  /// slice (kTpr·kVecs·kVec columns, up to 4 bytes each) exceeds 32 KB: those rows skip L1
  /// (Cache::kNoL1, L2's normal policy) so that they do not push the vectors, which every CTA on
  /// the SM re-reads, out of L1, without the evict-first hint's cost behind dirty L2 lines. By
  /// the acceptance method (run AK3, plain against evict-first): softmax fwd −4 to −6 % time at
  /// 4096-65536 columns, RMSNorm fwd −6 % at 4096 columns (t128v4) and +5 % at 32768 / 65536
  /// (t1024v4, cluster); the evict-first load cost 4-6 % behind the L2 of dirty lines the
  /// benchmark's flush leaves (scripts/diag_cache_hints.cu).
  template <int kTpr>
  static constexpr Cache kRowCache =
      Op::kCols * kTpr * kVecs * kVec * 4 > 32 * 1024 ? Cache::kNoL1 : Cache::kNormal;
  /// This thread's vectors of row r, every input stream: vector j (j·kTpr < n) from column
  /// col_t + j·kTpr·kVec, 16-byte loads (kRowCache); an absent optional stream (null pointer)
  /// gives zeros. The register and cluster register policies' row load.
  template <int kTpr>
  __device__ __forceinline__ void load_row(const RowParams& p, int64_t r, int64_t col_t, int n) {
    row_for<kIn>([&](auto S) {
      constexpr int s = decltype(S)::value;
      const bool present = !row_in_optional<Op>(s) || p.in[s].ptr != nullptr;
      const T<s>* src =
          present ? static_cast<const T<s>*>(p.in[s].ptr) + r * p.in[s].row_stride + col_t
                  : nullptr;
#pragma unroll
      for (int j = 0; j < kVecs; ++j) {
        if (j * kTpr < n) {
          if (present) load<s, kRowCache<kTpr>>(j, src + j * kTpr * kVec);
          else zero<s>(j);
        }
      }
    });
  }
  /// Vector j of every stream in fp32.
  __device__ __forceinline__ void unpack_all(int j, float (&x)[kIn][kVec]) const {
    row_for<kIn>([&](auto S) {
      constexpr int s = decltype(S)::value;
      unpack(get<s>(j), x[s]);
    });
  }
};

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

/// Elements held as kVecs packed vectors per input stream (registers, or one pass of the looped
/// policy; absent optional streams hold zeros): vector j of the thread exists when j·kTpr < n;
/// its elements are columns col0 + j·kTpr·kVec + i.
template <class Op, class D, int kVecs, int kTpr, class Cols = NoCols>
struct RegisterView {
  static constexpr bool kOnChip = true;
  static constexpr int kIn = Op::kIn;
  static constexpr int kVec = row_vec_elems<D, kIn>();
  const RowInRegs<Op, D, kVecs>& vals;
  int n;
  int64_t col0;
  Cols cols;

  /// f(e, j, i) for element i of the thread's vector j (as for_each: the vectors present are
  /// j = 0, 1, ... while j·kTpr < n, a prefix).
  template <class F>
  __device__ __forceinline__ void for_each_at(F&& f) const {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      if (j * kTpr < n) {
        float x[kIn][kVec], v[row_dim(Op::kCols)][kVec];
        vals.unpack_all(j, x);
        cols.load(j, v);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          RowElem<kIn, Op::kCols> e;
          fill_elem<Op, kVec>(e, x, v, i, col0 + int64_t{j} * kTpr * kVec + i);
          f(e, j, i);
        }
      }
    }
  }
  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
    for_each_at([&](const RowElem<kIn, Op::kCols>& e, int, int) { f(e); });
  }

  /// The max of stream 0 over the thread's elements, from the packed values.
  __device__ __forceinline__ float max_in0() const {
    static_assert(!row_in_optional<Op>(0), "stream 0 is always present");
    PackedMax<row_in_t<D, 0>> pm;
#pragma unroll
    for (int j = 0; j < kVecs; ++j)
      if (j * kTpr < n) pm.add(vals.template get<0>(j));
    return pm.value();
  }

  /// Whether this thread holds column `col` of stream 0, and its value: the 32-bit word holding
  /// it selected from the registers by compile-time indices (no local memory), then converted.
  __device__ __forceinline__ bool value_at(int64_t col, float& x) const {
    static_assert(!row_in_optional<Op>(0), "stream 0 is always present");
    using T0 = row_in_t<D, 0>;
    constexpr int kWords0 = row_in_words_of<D, kIn, 0>();  // 16-byte words per vector
    constexpr int kPerWord = 4 / int{sizeof(T0)};          // elements per 32-bit word
    int j, i;
    if (!row_vector_owner(col, col0, kTpr * kVec, kTpr, n, kVec, kVecs, j, i)) return false;
    const int w = j * kWords0 * 4 + i / kPerWord;  // the 32-bit word among the thread's
    uint32_t u = vals.w[0][0][0].x;
#pragma unroll
    for (int jj = 0; jj < kVecs; ++jj) {
#pragma unroll
      for (int kk = 0; kk < kWords0; ++kk) {
        const uint4 q4 = vals.w[0][jj][kk];
        const uint32_t q[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if ((jj * kWords0 + kk) * 4 + k == w) u = q[k];
      }
    }
    if constexpr (sizeof(T0) == 4) {
      x = __uint_as_float(u);
    } else if constexpr (std::is_same_v<T0, __nv_bfloat16>) {
      x = __uint_as_float((i & 1) ? u & 0xffff0000u : u << 16);
    } else {
      x = __half2float(__ushort_as_half(static_cast<unsigned short>((i & 1) ? u >> 16 : u)));
    }
    return true;
  }
};

/// Elements staged in shared memory (the ring and staged policies): buf[s] points at the
/// thread's first element of stream s (in its dtype, D); vector j at that + j·step elements
/// (consecutive threads on consecutive 16-byte words: conflict-free), when j·kStride < n
/// (ring: step = kTpr·kVec, kStride = kTpr; staged: runtime step, kStride = 1 and n = the
/// thread's vectors). Absent optional streams (present[s] false) read as 0.
template <class Op, class D, int kVecs, int kStride, class Cols = NoCols>
struct SharedView {
  static constexpr bool kOnChip = true;
  static constexpr int kIn = Op::kIn;
  static constexpr int kVec = row_vec_elems<D, kIn>();
  const void* const (&buf)[kIn];
  const bool (&present)[kIn];
  int n;
  int step;     // elements between the thread's vectors j and j + 1
  int64_t col0; // column of the thread's vector 0
  Cols cols;

  /// The thread's vector j of every stream, in fp32. Each sweep reads shared memory again
  /// (volatile loads): keeping a first sweep's values live for a second one (what the compiler
  /// does with plain loads) spilled LayerNorm's ring kernel beside its weight and bias slices.
  __device__ __forceinline__ void load(int j, float (&x)[kIn][kVec]) const {
    row_for<kIn>([&](auto S) {
      constexpr int s = decltype(S)::value;
      using T = row_in_t<D, s>;
      if (!row_in_optional<Op>(s) || present[s]) {
        Packed<T, kVec> v;
        lds_volatile(static_cast<const T*>(buf[s]) + j * step, v);
        unpack(v, x[s]);
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i) x[s][i] = 0.f;
      }
    });
  }

  /// f(e, j, i) for element i of the thread's vector j (the vectors present are j = 0, 1, ...
  /// while j·kStride < n, a prefix).
  template <class F>
  __device__ __forceinline__ void for_each_at(F&& f) const {
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
          f(e, j, i);
        }
      }
    }
  }
  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
    for_each_at([&](const RowElem<kIn, Op::kCols>& e, int, int) { f(e); });
  }

  /// The max of stream 0 over the thread's elements, from the packed values.
  __device__ __forceinline__ float max_in0() const {
    static_assert(!row_in_optional<Op>(0), "stream 0 is always present");
    using T0 = row_in_t<D, 0>;
    PackedMax<T0> pm;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      if (j * kStride < n) {
        Packed<T0, kVec> v;
        lds_volatile(static_cast<const T0*>(buf[0]) + j * step, v);
        pm.add(v);
      }
    }
    return pm.value();
  }

  /// Whether this thread holds column `col` of stream 0 (its vector j covers columns
  /// col0 + j·step + [0, kVec)), and its value (one shared load).
  __device__ __forceinline__ bool value_at(int64_t col, float& x) const {
    static_assert(!row_in_optional<Op>(0), "stream 0 is always present");
    using T0 = row_in_t<D, 0>;
    int j, i;
    if (!row_vector_owner(col, col0, step, kStride, n, kVec, kVecs, j, i)) return false;
    x = to_float(static_cast<const T0*>(buf[0])[j * step + i]);
    return true;
  }
};

/// A view whose first sweep also adds each element's column-accumulation terms
/// (Op::accumulate) into the thread's sums acc(k, j, i): traits with kAccInFold (the staged
/// policy). Later sweeps of the same fold only fold.
template <class Op, class Base, class AccF>
struct AccFoldView {
  static constexpr bool kOnChip = Base::kOnChip;
  const Base& base;
  const RowParams& p;
  const typename Op::RowIn& in;
  AccF acc;
  mutable bool first = true;

  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
    const bool add = first;
    first = false;
    base.for_each_at([&](const RowElem<Op::kIn, Op::kCols>& e, int j, int i) {
      f(e);
      if (add) {
        float a[Op::kAcc];
        Op::accumulate(p, in, e, a);
#pragma unroll
        for (int k = 0; k < Op::kAcc; ++k) acc(k, j, i) += a[k];
      }
    });
  }
};

/// One element of stream s of the general policy (absent optional streams: 0).
template <class Op>
__device__ __forceinline__ float load_in1(const RowParams& p, int s, int64_t row, int64_t col) {
  if (row_in_optional<Op>(s) && p.in[s].ptr == nullptr) return 0.f;
  return load1(p.in[s], row, col);
}

/// The per-column vectors at `col` (general policy; absent: 0), plus the op's shift.
template <class Op>
__device__ __forceinline__ void load_vec1(const RowParams& p, int64_t col,
                                          RowElem<Op::kIn, Op::kCols>& e) {
  if constexpr (Op::kCols > 0) {
#pragma unroll
    for (int c = 0; c < Op::kCols; ++c) {
      e.vec[c] = p.vec[c].ptr ? load1(p.vec[c], 0, col) : 0.f;
      if constexpr (Op::kColShift) e.vec[c] += Op::col_shift(p, c);
    }
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

/// One element's outputs through the traits; for ops with column accumulations from apply
/// (not kAccInFold), its terms are added into acc(k, i) (a float& per accumulation k and
/// element i of the vector).
template <class Op, class AccF>
__device__ __forceinline__ void apply_elem(const RowParams& p, const typename Op::Row& r,
                                           const RowElem<Op::kIn, Op::kCols>& e,
                                           float (&o)[row_dim(Op::kOut)], AccF&& acc, int i) {
  if constexpr (Op::kAcc > 0 && !Op::kAccInFold) {
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

/// One vector's outputs o[s][0..kVec) (fp32), each output stream converted to its dtype (D) and
/// stored with 16-byte (or, for outputs narrower than the vector's 16 bytes, 8-byte) streaming
/// stores at element `off` of dst[s]; absent optional outputs (dst[s] == nullptr) are not
/// stored. The tail of apply_store, and the held-fold output step (policy_cluster_register.cuh).
template <class Op, class D, int kVec>
__device__ __forceinline__ void store_vector_outputs(const float (&o)[row_dim(Op::kOut)][kVec],
                                                     void* const (&dst)[row_dim(Op::kOut)],
                                                     int64_t off) {
  row_for<Op::kOut>([&](auto S) {
    constexpr int s = decltype(S)::value;
    using TO = row_out_t<D, s>;
    if ((!row_out_optional<Op>(s) && Op::kGate != RowGate::kOutputs) || dst[s] != nullptr) {
      Packed<TO, kVec> y;
#pragma unroll
      for (int i = 0; i < kVec; ++i) y.elt[i] = from_float<TO>(o[s][i]);
      store_packed(static_cast<TO*>(dst[s]) + off, y);
    }
  });
}

/// One input vector's outputs: Op::apply per element (inputs x, vectors v; with kFixVector
/// Op::apply_bulk per element, then Op::fix_vector once), each output stream converted to its
/// dtype (D) and stored with 16-byte (or, for outputs narrower than the vector's 16 bytes,
/// 8-byte) streaming stores at element `off` of dst[s]; absent optional outputs
/// (dst[s] == nullptr) are not stored. For ops with column accumulations, each element's terms
/// are added into acc(k, i). fix false: Op::fix_vector is not called (kFixVector: the vector is
/// outside the op's fix_mask).
template <class Op, class D, int kVec, class AccF = NoAcc>
__device__ __forceinline__ void apply_store(const RowParams& p, const typename Op::Row& r,
                                            const float (&x)[Op::kIn][kVec],
                                            const float (&v)[row_dim(Op::kCols)][kVec],
                                            int64_t col, void* const (&dst)[row_dim(Op::kOut)],
                                            int64_t off, AccF&& acc = AccF{},
                                            bool fix = true) {
  if constexpr (Op::kGate == RowGate::kOutputs) {  // gate closed: out_ptrs gave no pointer
    bool any = false;
#pragma unroll
    for (int s = 0; s < row_dim(Op::kOut); ++s) any |= dst[s] != nullptr;
    if (!any) return;
  }
  static_assert(!Op::kFixVector || Op::kAcc == 0, "kFixVector: no column accumulations");
  float o[row_dim(Op::kOut)][kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    RowElem<Op::kIn, Op::kCols> e;
    fill_elem<Op, kVec>(e, x, v, i, col + i);
    float oi[row_dim(Op::kOut)];
    if constexpr (Op::kFixVector) Op::apply_bulk(p, r, e, oi);
    else apply_elem<Op>(p, r, e, oi, acc, i);
#pragma unroll
    for (int s = 0; s < Op::kOut; ++s) o[s][i] = oi[s];
  }
  if constexpr (Op::kFixVector) {
    if (fix) Op::fix_vector(p, r, x, v, col, o);
  }
  store_vector_outputs<Op, D, kVec>(o, dst, off);
}

/// The output pointers of a vector policy: stream s at row `row`, column `col`, in its dtype
/// (nullptr for an absent optional output, and for every output of a closed kOutputs gate).
template <class Op, class D>
__device__ __forceinline__ void out_ptrs(const RowParams& p, int64_t row, int64_t col,
                                         void* (&dst)[row_dim(Op::kOut)]) {
#pragma unroll
  for (int s = 0; s < row_dim(Op::kOut); ++s) dst[s] = nullptr;
  if (!row_gate_outputs_on<Op>(p)) return;
  row_for<Op::kOut>([&](auto S) {
    constexpr int s = decltype(S)::value;
    using TO = row_out_t<D, s>;
    if (!(row_out_optional<Op>(s) && p.out[s].ptr == nullptr))
      dst[s] = static_cast<TO*>(p.out[s].ptr) + row * p.out[s].row_stride + col;
  });
}

}  // namespace quack::detail
