// The warp-queue top-k kernel (k ≤ kTopkQueueMaxK): RAFT's warp_sort_filtered / FAISS's
// WarpSelect, with the softmax of the MoE router fused.
//
// Thread -> data: a CTA holds R rows × W warps (topk_plan.h); warp w of a row scans columns
// [w·slice, min(N, (w+1)·slice)) in iterations of kTopkUnroll·32·V columns (V = 16 / sizeof(T)
// elements per 16-byte vector). Vector path: lane l loads vectors u·32 + l (u < kTopkUnroll)
// of the iteration, one 16-byte streaming load each; element path (any strides): element
// (u, i) of lane l is column u·32·V + 32·i + l of the iteration (coalesced for unit stride).
//
// Per row, in registers: the queue q (32·kQ entries (key, column) packed as P, sorted
// descending across the warp: topk_warp.cuh), the threshold thr (the k-th entry of q, or the
// first-block bound below), and its value thr_f as an fp32 x'. Per element the fast path is one
// fp32 compare (x' < thr_f: not a candidate; NaN never compares below, so it is always looked
// at); an iteration with no candidate in the warp costs nothing more. Otherwise each of the
// lane's kU·V slots is offered in turn: lanes whose entry beats thr write it to the warp's
// buffer in shared memory (ballot + popc positions); every 32 buffered entries are sorted and
// merged into q (warp_queue_merge), which raises thr. At the end the buffer's rest is merged;
// with W > 1 warp 0 of the row merges the other warps' queues from shared memory.
//
// First-block bound (k ≤ 16·kU = 64): the k-th largest of 32 lane maxima (k ≤ 8) or of 32·kU
// vector maxima of the first iteration is ≤ the k-th best of the row (k disjoint groups each
// hold an element at least that large), so elements with a smaller key are rejected from the
// start instead of after the queue has filled.
//
// Prefix bound (p.prefix_iters > 0: the plan's for k ≥ kTopkPrefixMinK, or forced): the warp
// first reads up to p.prefix_iters full iterations of its slice (fewer where the slice has
// fewer; none: the first-block bound instead) and takes the k-th largest of 512 group maxima as
// thr (details at the code); the scan then starts with it, so a random slice accepts ~1.2·k
// elements of the prefix instead of ~k·(1 + ln(prefix / k)). The prefix is read twice. The
// groups' count (512 ≥ kTopkQueueMaxK) and the registers do not depend on the iterations.
// p.prefix_narrow (forced only): the search skips the leading bits that the delegates' extremes
// fix (below, "narrowed start").
//
// Sparse offer (kSparse, TopkPlan::sparse, planned with the prefix bound; vector path): each
// lane offers its own candidates one per ballot round instead of the warp passing over every
// slot with a candidate in some lane (below); its candidate mask is the fast path. Its
// instances also take the prefix maxima without a flip per element and a full iteration's loads
// from one lane address.
//
// Softmax (kRow): each lane folds the online (max, Σ e^(x − max)) of its elements per
// iteration (one exponential per element), reduced over the warp and the row's warps at the
// end (row_reduce.cuh's OnlineMaxSum). kSelected: the same over the k selected values.
//
// Shared memory: per warp kTopkBufEntries entries (a slot's insertion can take the buffer from
// ≤ 31 to ≤ 63); with W > 1 the queues and (max, sum) pairs of every warp (topk_smem_layout).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "common/launch.h"
#include "common/row_general.cuh"
#include "common/vec.cuh"
#include "row/row_math.cuh"
#include "row/row_reduce.cuh"
#include "topk/topk_plan.h"
#include "topk/topk_warp.cuh"

namespace quack::detail {

inline constexpr int kTopkSoftmaxNone = 0, kTopkSoftmaxSelected = 1, kTopkSoftmaxRow = 2;

/// x ↦ x' (sgn = 0: largest) or −x (sgn = 0x80000000: smallest), and back.
__device__ __forceinline__ float topk_flip(float v, uint32_t sgn) {
  return __uint_as_float(__float_as_uint(v) ^ sgn);
}

/// The worst value of T for the mode: −inf (largest) or +inf (smallest).
template <typename T>
__device__ __forceinline__ T topk_worst(bool largest) {
  if constexpr (std::is_same_v<T, float>)
    return __uint_as_float(largest ? 0xff800000u : 0x7f800000u);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __ushort_as_bfloat16(largest ? 0xff80 : 0x7f80);
  else return __ushort_as_half(largest ? 0xfc00 : 0x7c00);
}

/// Element i of a packed vector in fp32 (bf16: one bit operation on its 32-bit word).
template <typename T, int kV>
__device__ __forceinline__ float topk_elem(const Packed<T, kV>& v, int i) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    static_assert(kV == 8, "one 16-byte word");
    const uint4 w4 = v.word[0];
    const int j = i / 2;  // compile-time after unrolling
    const uint32_t w = j == 0 ? w4.x : j == 1 ? w4.y : j == 2 ? w4.z : w4.w;
    return __uint_as_float(i % 2 ? (w & 0xffff0000u) : (w << 16));
  } else {
    return to_float(v.elt[i]);
  }
}

/// st folded with one vector's (max, Σ e^(x − max)) over its elements i with valid(i): the
/// row softmax's online statistics, vector by vector (queue, bitonic and radix kernels).
template <typename T, int kV, class Valid>
__device__ __forceinline__ OnlineMaxSum::Val topk_fold_vector(OnlineMaxSum::Val st,
                                                              const Packed<T, kV>& v, Valid valid) {
  float m = kNegInf;
#pragma unroll
  for (int i = 0; i < kV; ++i)
    if (valid(i)) m = fmaxf(m, topk_elem(v, i));
  const float mr = m == kNegInf ? 0.f : m;
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < kV; ++i)
    if (valid(i)) s += exp_diff(topk_elem(v, i), mr);
  return OnlineMaxSum::combine(st, {{m, s}});
}

/// v unchanged, through an empty asm the compiler cannot see into (no instruction).
__device__ __forceinline__ int topk_opaque(int v) {
  asm volatile("" : "+r"(v));
  return v;
}
__device__ __forceinline__ int64_t topk_opaque(int64_t v) {
  asm volatile("" : "+l"(v));
  return v;
}
template <typename T, int kV>
__device__ __forceinline__ Packed<T, kV> topk_opaque(Packed<T, kV> v) {
  static_assert(Packed<T, kV>::kWords == 1 && Packed<T, kV>::kWordBytes == 16, "one uint4");
  asm volatile("" : "+r"(v.word[0].x), "+r"(v.word[0].y), "+r"(v.word[0].z), "+r"(v.word[0].w));
  return v;
}

/// Slot s (runtime, s < kU·kV) of the lane's kU vectors in fp32, where slot s = u·kV + i is
/// element i of vector u: a chain of selects over the 4·kU 32-bit words (one compare and one
/// select a word: a select tree costs half the selects but holds half the words again in
/// registers beside pk, 91 against 80 registers at fp32, kQ = 1), then the half for 16-bit x.
/// No dynamic register index (NVVM would put pk in local memory for one).
template <typename T, int kV, int kU>
__device__ __forceinline__ float topk_slot_value(const Packed<T, kV> (&pk)[kU], int s) {
  static_assert(Packed<T, kV>::kWords == 1 && Packed<T, kV>::kWordBytes == 16, "one uint4");
  constexpr int kWords = 4 * kU, kPerWord = kV / 4;  // elements per 32-bit word: 1 or 2
  static_assert((kWords & (kWords - 1)) == 0, "a power of 2 of words");
  uint32_t w[kWords];
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    w[4 * u] = pk[u].word[0].x;
    w[4 * u + 1] = pk[u].word[0].y;
    w[4 * u + 2] = pk[u].word[0].z;
    w[4 * u + 3] = pk[u].word[0].w;
  }
  const int wi = s / kPerWord;
  uint32_t r = w[0];
#pragma unroll
  for (int j = 1; j < kWords; ++j) r = wi == j ? w[j] : r;
  if constexpr (std::is_same_v<T, float>) {
    return __uint_as_float(r);
  } else {
    const bool upper = s % kPerWord != 0;
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
      return __uint_as_float(upper ? (r & 0xffff0000u) : (r << 16));
    else
      return __half2float(__ushort_as_half(static_cast<unsigned short>(upper ? r >> 16 : r)));
  }
}

/// indices[row, j] = col in the tensor's integer dtype (int64 or int32).
__device__ __forceinline__ void topk_store_index(const RowIO& t, int64_t row, int64_t j,
                                                 int64_t col) {
  const int64_t off = row * t.row_stride + j * t.col_stride;
  if (t.dtype == DType::kInt64) static_cast<int64_t*>(t.ptr)[off] = col;
  else static_cast<int32_t*>(t.ptr)[off] = static_cast<int32_t>(col);
}

/// Writes the k entries of a sorted list: entry e (value x' of `xp`, column `col`) to
/// values[row, e] / indices[row, e], with the softmax's (m, 1/s) applied when `softmax`.
__device__ __forceinline__ void topk_store_entry(const TopkParams& p, int64_t row, int64_t e,
                                                 float x, int64_t col, float m, float inv_s) {
  const float out = p.softmax == kTopkSoftmaxNone ? x : exp_diff(x, m) * inv_s;
  store1(p.values, row, e, out);
  topk_store_index(p.indices, row, e, col);
}

/// The softmax's (m, 1/Σ) from its statistics st = (max, Σ e^(x − max)) (m = 0 where the max is
/// −inf), applied by topk_store_entry; with kTopkSoftmaxRow and an lse output, `lse_writer`
/// also writes lse[row] = max + ln Σ. Shared by the queue, bitonic and radix kernels.
struct TopkSoftmaxScale {
  float m = 0.f, inv_s = 1.f;
};
__device__ __forceinline__ TopkSoftmaxScale topk_softmax_scale(const TopkParams& p, int64_t row,
                                                               const OnlineMaxSum::Val& st,
                                                               bool lse_writer) {
  if (p.softmax == kTopkSoftmaxNone) return {};
  if (p.softmax == kTopkSoftmaxRow && p.lse.ptr != nullptr && lse_writer)
    static_cast<float*>(p.lse.ptr)[row * p.lse.col_stride] = st.v[0] + log2_approx(st.v[1]) * kLn2;
  return {st.v[0] == kNegInf ? 0.f : st.v[0], 1.f / st.v[1]};
}

/// (max, Σ e^(v − max)) over the thread's values val[r] with valid(r) (the others ignored):
/// the softmax statistics of kTopkSoftmaxSelected where the thread holds selected values.
template <int R, class Valid>
__device__ __forceinline__ OnlineMaxSum::Val topk_list_stats(const float (&val)[R], Valid valid) {
  float mx = kNegInf;
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (valid(r)) mx = fmaxf(mx, val[r]);
  const float mr = mx == kNegInf ? 0.f : mx;
  float s = 0.f;
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (valid(r)) s += exp_diff(val[r], mr);
  return {{mx, s}};
}

/// topk_list_stats over a warp's k values val[r] (lane's r·32 + lane < k), all-reduced over the
/// warp.
template <int R>
__device__ __forceinline__ OnlineMaxSum::Val topk_selected_stats(const float (&val)[R], int k, int lane) {
  return warp_allreduce_red<OnlineMaxSum>(
      topk_list_stats(val, [&](int r) { return r * 32 + lane < k; }), 32);
}

// The sparse offer's instances: at most kTopkSparseMaxThreads = 128 threads, 6 CTAs per SM for
// fp32 x (80 registers, the other fp32 instances' count at k ≤ 128; unbounded they took 88, 5
// CTAs), 5 for 16-bit x (96 registers, as the other 16-bit instances; at 80 they spilled), 4
// for 16-bit x with kQ = 8, or kQ = 4 and 64-bit entries (at 96 they spilled; the others there
// take 96–128).
template <typename T, typename P, int kQ, bool kSparse>
__global__ void __launch_bounds__(kSparse ? kTopkSparseMaxThreads : 512,
                                  !kSparse                                 ? 1
                                  : sizeof(T) == 4                         ? 6
                                  : kQ == 8 || (sizeof(P) == 8 && kQ == 4) ? 4
                                                                           : 5)
    topk_queue_kernel(const TopkParams p) {
  using Key = TopkKey<T>;
  using Pk = TopkPack<P>;
  constexpr int kV = 16 / sizeof(T);  // elements per 16-byte vector
  constexpr int kU = kTopkUnroll;     // vectors per lane per iteration
  constexpr int kStep = 32 * kV;      // columns per warp and vector
  constexpr int kIter = kU * kStep;   // columns per warp and iteration
  constexpr int kSlots = kU * kV;     // elements per lane and iteration
  constexpr unsigned kFull = 0xffffffffu;
  static_assert(sizeof(P) == 8 || sizeof(T) == 2, "32-bit entries hold 16-bit keys only");
  static_assert(kSlots <= 32, "one bit per slot");

  extern __shared__ __align__(16) unsigned char topk_smem[];
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  const int W = p.warps_per_row;
  const int row_local = warp / W, wr = warp - row_local * W;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * p.rows_per_cta + row_local;
  const bool row_ok = row < p.M;
  const TopkSmem lay = topk_smem_layout(W, p.rows_per_cta, kQ, sizeof(P));
  P* const buf = reinterpret_cast<P*>(topk_smem + lay.buf) + warp * kTopkBufEntries;
  const unsigned lanes_below = (1u << lane) - 1u;

  const bool largest = p.largest;
  const uint32_t sgn = largest ? 0u : 0x80000000u;
  const int64_t c_begin = min(p.N, static_cast<int64_t>(wr) * p.slice);
  const int64_t c_end = row_ok ? min(p.N, c_begin + p.slice) : c_begin;
  const T* const xrow = static_cast<const T*>(p.x.ptr) + (row_ok ? row * p.x.row_stride : 0);
  // 1 on the vector path (or N = 1, where only column 0 is read); the sparse offer's plans
  // have the vector path, so its instances hold neither the element path nor the stride.
  const int64_t cs = kSparse ? 1 : p.x.col_stride;
  const bool vec = kSparse || p.vec_io;
  const bool row_softmax = p.softmax == kTopkSoftmaxRow;
  const T filler = topk_worst<T>(largest);

  // Column of the lane's element (u, i), relative to its iteration's first column: the lane
  // holds vectors u·32 + lane of the iteration (the element path reads them element by element).
  auto off_of = [&](int u, int i) -> int { return (u * 32 + lane) * kV + i; };

  P q[kQ];
#pragma unroll
  for (int r = 0; r < kQ; ++r) q[r] = 0;
  P thr = 0;                                   // entries ≤ thr are out
  float thr_f = __uint_as_float(0x7fffffffu);  // x' below it is out (NaN: nothing is)
  int buf_n = 0;                               // entries in buf (warp-uniform)
  OnlineMaxSum::Val st = OnlineMaxSum::identity();
  bool first = true;

  auto merge_buffer = [&]() {  // buf_n ≥ 32: merge the first 32 entries into q
    __syncwarp();
    const P b = buf[lane];
    const bool more = lane + 32 < buf_n;
    const P rest = more ? buf[lane + 32] : P(0);
    __syncwarp();
    if (more) buf[lane] = rest;
    __syncwarp();
    buf_n -= 32;
    warp_queue_merge<kQ>(q, b, lane);
    thr = topk_max(thr, warp_queue_at<kQ>(q, p.k - 1));
    thr_f = Key::value(Pk::key(thr));
  };

  // Prefix bound (p.prefix_iters > 0, vector path): before the scan, a lower bound of the
  // slice's k-th best from its first full iterations (≤ p.prefix_iters), read twice (the scan
  // re-reads them, from L2: normal loads here). Lane l's delegate j (< kD) is the largest x' of
  // slots j, j + kD, … of lane l over those iterations: 32·kD disjoint groups, so the k-th
  // largest delegate key is ≤ the slice's k-th best key (k groups each hold an element at least
  // that large). fmaxf from NaN gives a group's largest number, or NaN for a group of NaNs (as
  // the first-block bound); a key ≤ the group's best. The k-th is found by a binary search over
  // the key's top 16 bits (count of delegates ≥ the candidate, summed over the warp), so the
  // bound is the k-th delegate key with its low bits cleared for fp32 (still ≤ it).
  bool bounded = false;
  if (p.prefix_iters > 0 && vec) {
    const int64_t n_pre = min((c_end - c_begin) / kIter, static_cast<int64_t>(p.prefix_iters));
    if (n_pre > 0) {  // warp-uniform
      constexpr int kD = 16;  // delegates per lane: 512 per warp (a useful bound for k ≤ 256)
      static_assert(kSlots % kD == 0, "whole groups");
      float dm[kD];
#pragma unroll
      for (int j = 0; j < kD; ++j) dm[j] = __uint_as_float(0x7fffffffu);
      // Two iterations a step (2·kU loads in flight; an odd count re-reads the last one,
      // harmless for a maximum).
#pragma unroll 1
      for (int64_t it = 0; it < n_pre; it += 2) {
        const T* const xa = xrow + (c_begin + it * kIter);
        const T* const xb = xrow + (c_begin + min(it + 1, n_pre - 1) * kIter);
        Packed<T, kV> pk[2 * kU];
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          load_packed<Cache::kNormal>(xa + off_of(u, 0), pk[u]);
          load_packed<Cache::kNormal>(xb + off_of(u, 0), pk[kU + u]);
        }
        if constexpr (!kSparse) {
#pragma unroll
          for (int s = 0; s < 2 * kSlots; ++s)
            dm[s % kD] = fmaxf(dm[s % kD], topk_flip(topk_elem(pk[s / kV], s % kV), sgn));
        } else if (largest) {  // the sparse instances: no flip per element (fp32: 1 of 2 ops)
#pragma unroll
          for (int s = 0; s < 2 * kSlots; ++s)
            dm[s % kD] = fmaxf(dm[s % kD], topk_elem(pk[s / kV], s % kV));
        } else {  // smallest: max of −x = −(min of x), flipped after the loop
#pragma unroll
          for (int s = 0; s < 2 * kSlots; ++s)
            dm[s % kD] = fminf(dm[s % kD], topk_elem(pk[s / kV], s % kV));
        }
      }
      if constexpr (kSparse) {
        // −0 / +0 and NaN: fminf may return either zero (−(+0) = −0 has the lower key: still a
        // lower bound), and a group of NaNs stays NaN, whose key ignores the sign.
#pragma unroll
        for (int j = 0; j < kD; ++j) dm[j] = topk_flip(dm[j], sgn);
      }
      uint32_t dk[kD];
#pragma unroll
      for (int j = 0; j < kD; ++j) dk[j] = Key::key(dm[j], largest);
      constexpr int kShift = Key::kBits - 16;
      uint32_t v = 0;  // the top 16 bits found so far
      int top = 15;    // the highest bit still to search
      if (p.prefix_narrow) {
        // Narrowed start: lo ≤ the k-th largest delegate key ≤ hi, so its top 16 bits share the
        // leading bits on which lo's and hi's agree; the search starts below them. hi: the
        // largest delegate; lo: for k ≤ 32 the smallest lane maximum (32 delegates, one per
        // lane, are ≥ it), else the smallest delegate. Random rows at k ≤ 32 (fp32 or bf16):
        // lo and hi share sign and exponent, 7 steps instead of 16.
        uint32_t mx = dk[0], mn = dk[0];
#pragma unroll
        for (int j = 1; j < kD; ++j) {
          mx = max(mx, dk[j]);
          mn = min(mn, dk[j]);
        }
        const uint32_t hi = __reduce_max_sync(kFull, mx) >> kShift;
        const uint32_t lo = __reduce_min_sync(kFull, p.k <= 32 ? mx : mn) >> kShift;
        const uint32_t diff = lo ^ hi;
        top = diff == 0 ? -1 : 31 - __clz(diff);
        v = top < 0 ? hi : hi & ~((2u << top) - 1u);
      }
#pragma unroll 1
      for (int b = top; b >= 0; --b) {
        const uint32_t cand = v | (1u << b), t = cand << kShift;
        unsigned n = 0;
#pragma unroll
        for (int j = 0; j < kD; ++j) n += dk[j] >= t ? 1u : 0u;
        if (__reduce_add_sync(kFull, n) >= static_cast<unsigned>(p.k)) v = cand;
      }
      const uint32_t bound = v << kShift;  // 0 (no bound) when fewer than k delegates
      thr = Pk::floor(bound);
      thr_f = Key::value(bound);  // NaN for 0: the fast path rejects nothing
      bounded = true;
    }
  }

  for (int64_t c0 = c_begin; c0 < c_end; c0 += kIter) {
    const int lim = static_cast<int>(min(c_end - c0, static_cast<int64_t>(kIter)));
    const T* const xit = xrow + c0 * cs;
    // The lane's elements, packed (16-bit x stays 16-bit in registers); past c_end the worst
    // value (−inf for largest, +inf for smallest), which the fast path rejects.
    Packed<T, kV> pk[kU];
    if (vec && lim == kIter) {  // a full iteration: the kU loads issue back to back
      if constexpr (kSparse) {
        // One address for the lane, the vectors at constant offsets from it (immediates of the
        // loads) instead of a 64-bit address per vector.
        const T* const xl = xit + lane * kV;
#pragma unroll
        for (int u = 0; u < kU; ++u) load_packed<Cache::kStream>(xl + u * kStep, pk[u]);
      } else {
#pragma unroll
        for (int u = 0; u < kU; ++u) load_packed<Cache::kStream>(xit + off_of(u, 0), pk[u]);
      }
    } else {
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int ov = off_of(u, 0);
        if (vec && ov + kV <= lim) {
          load_packed<Cache::kStream>(xit + ov, pk[u]);
        } else {
#pragma unroll
          for (int i = 0; i < kV; ++i) pk[u].elt[i] = ov + i < lim ? xit[(ov + i) * cs] : filler;
        }
      }
    }
    auto x_at = [&](int u, int i) { return topk_elem(pk[u], i); };

    if (row_softmax) {  // the lane's online (max, Σ e^(x − max)), folded vector by vector
#pragma unroll
      for (int u = 0; u < kU; ++u)
        st = topk_fold_vector(st, pk[u], [&](int i) { return off_of(u, i) < lim; });
#pragma unroll
      for (int u = 0; u < kU; ++u) pk[u] = topk_opaque(pk[u]);  // no CSE with the fast path
    }

    if (first) {  // first-block bound (warp-uniform branch)
      first = false;
      if (p.k <= 16 * kU && !bounded) {  // a useful bound: at least 2k delegates
        // Maxima of x' per vector over its valid elements, starting from NaN (fmaxf ignores a
        // NaN operand): a vector of only NaNs keeps NaN, whose key is its elements' key; a
        // vector with numbers gets its largest number, whose key is ≤ its best element's
        // (NaN ranks above every number; −0 or +0 for a zero, and key(−0) < key(+0)).
        // A vector without a valid element has key 0, the bound that excludes nothing.
        uint32_t d[kU];
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          float mx = __uint_as_float(0x7fffffffu);
#pragma unroll
          for (int i = 0; i < kV; ++i)
            if (off_of(u, i) < lim) mx = fmaxf(mx, topk_flip(x_at(u, i), sgn));
          d[u] = off_of(u, 0) < lim ? Key::key(mx, largest) : 0u;
        }
        uint32_t bound;
        if (p.k <= 8) {  // k-th of the 32 lane maxima
          uint32_t t[1] = {d[0]};
#pragma unroll
          for (int u = 1; u < kU; ++u) t[0] = max(t[0], d[u]);
          warp_bitonic_sort<true, 1>(t, lane);
          bound = __shfl_sync(kFull, t[0], p.k - 1);
        } else {  // k-th of the 32·kU vector maxima
          warp_bitonic_sort<true, kU>(d, lane);
          bound = warp_queue_at<kU>(d, p.k - 1);
        }
        thr = Pk::floor(bound);
        thr_f = Key::value(bound);
      }
    }

    // Fast path, on x: a candidate is not below the threshold (largest) or not above it.
    const float thr_x = topk_flip(thr_f, sgn);
    bool hit = false;
    if constexpr (kSparse) {
      // The sparse offer's candidate mask is its fast path (7.9 of 8 iterations have a
      // candidate at fp32 (4096, 32): one pass of compares, not two).
    } else if (largest) {
#pragma unroll
      for (int u = 0; u < kU; ++u)
#pragma unroll
        for (int i = 0; i < kV; ++i) hit |= !(x_at(u, i) < thr_x);
    } else {
#pragma unroll
      for (int u = 0; u < kU; ++u)
#pragma unroll
        for (int i = 0; i < kV; ++i) hit |= !(x_at(u, i) > thr_x);
    }
    if (!kSparse && !__any_sync(kFull, hit)) continue;

    if constexpr (kSparse) {
      // Sparse offer: each lane offers its own candidates (its slots not below the threshold at
      // the iteration's start), one per round, lowest slot first; a round is one ballot for the
      // warp, so an iteration costs max over lanes of the lane's candidates in rounds (~1 on a
      // random row once the prefix bound holds) instead of a pass over every slot with a
      // candidate in some lane. The threshold is re-tested per offer (it rises at a merge).
      // NaN is never below: a candidate, as on the fast path.
      unsigned cand = 0;
      if (largest) {
#pragma unroll
        for (int s = 0; s < kSlots; ++s)
          cand |= static_cast<unsigned>(!(x_at(s / kV, s % kV) < thr_x)) << s;
      } else {
#pragma unroll
        for (int s = 0; s < kSlots; ++s)
          cand |= static_cast<unsigned>(!(x_at(s / kV, s % kV) > thr_x)) << s;
      }
      while (__any_sync(kFull, cand != 0)) {
        const bool has = cand != 0;
        const int s = has ? __ffs(cand) - 1 : 0;
        cand &= cand - 1u;
        const float xv = topk_flip(topk_slot_value(pk, s), sgn);
        const int o = ((s / kV) * 32 + lane) * kV + s % kV;
        bool pred = false;
        P e = 0;
        if (has && !(xv < thr_f) && o < lim) {
          e = Pk::pack(Key::key(xv, largest), c0 + o);
          pred = e > thr;
        }
        const unsigned m = __ballot_sync(kFull, pred);
        if (pred) buf[buf_n + __popc(m & lanes_below)] = e;
        buf_n += __popc(m);
        if (buf_n >= 32) merge_buffer();  // ≤ 31 + 32 entries before it: the buffer holds 64
      }
      continue;
    }

    // The slots with a candidate in some lane (the threshold only rises from here, so this is
    // a superset of the slots that can still insert): the others are skipped by one test.
    unsigned cand = 0;
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        const float x = x_at(u, i);
        cand |= static_cast<unsigned>(largest ? !(x < thr_x) : !(x > thr_x)) << (u * kV + i);
      }
    const unsigned slots = __reduce_or_sync(kFull, cand);

    // Offer the slots in order; one copy of the slot code and one of the merge: a pass stops
    // when the buffer holds 32, merges, and the next pass resumes at the following slot.
    int next = 0;
    while (true) {
      // Opaque (no instruction): keeps the compiler from hoisting the slots' unpacked values
      // and columns out of this loop, a register each (which spilled).
#pragma unroll
      for (int u = 0; u < kU; ++u) pk[u] = topk_opaque(pk[u]);
      const int ln = topk_opaque(lane), lm = topk_opaque(lim);
      const int64_t cb = topk_opaque(c0);
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        if (((slots >> s) & 1u) && s >= next && buf_n < 32) {
          next = s + 1;
          const int u = s / kV, i = s % kV;
          const float xv = topk_flip(topk_elem(pk[u], i), sgn);
          const int o = (u * 32 + ln) * kV + i;
          bool pred = false;
          P e = 0;
          if (!(xv < thr_f) && o < lm) {
            e = Pk::pack(Key::key(xv, largest), cb + o);
            pred = e > thr;
          }
          const unsigned m = __ballot_sync(kFull, pred);
          if (pred) buf[buf_n + __popc(m & lanes_below)] = e;
          buf_n += __popc(m);
        }
      }
      if (buf_n < 32) break;
      merge_buffer();
    }
  }

  if (buf_n > 0) {  // the buffer's rest (< 32 entries; empty slots are 0)
    __syncwarp();
    const P b = lane < buf_n ? buf[lane] : P(0);
    warp_queue_merge<kQ>(q, b, lane);
  }
  if (row_softmax) st = warp_allreduce_red<OnlineMaxSum>(st, 32);

  if (W > 1) {  // warp 0 of each row merges the row's other queues (CTA-uniform branch)
    P* const ex = reinterpret_cast<P*>(topk_smem + lay.exchange);
    float* const sts = reinterpret_cast<float*>(topk_smem + lay.stats);
#pragma unroll
    for (int r = 0; r < kQ; ++r) ex[(warp * kQ + r) * 32 + lane] = q[r];
    if (lane == 0) {
      sts[2 * warp] = st.v[0];
      sts[2 * warp + 1] = st.v[1];
    }
    __syncthreads();
    if (wr == 0) {
      P kth = warp_queue_at<kQ>(q, p.k - 1);
#pragma unroll 1
      for (int w = 1; w < W; ++w) {
        const P* const other = ex + (warp + w) * kQ * 32;
#pragma unroll 1
        for (int r = 0; r < kQ; ++r) {
          if (other[r * 32] <= kth) break;  // block r's best is out: so is everything after it
          warp_queue_merge<kQ>(q, other[r * 32 + lane], lane);
          kth = warp_queue_at<kQ>(q, p.k - 1);
        }
        if (row_softmax)
          st = OnlineMaxSum::combine(st, {{sts[2 * (warp + w)], sts[2 * (warp + w) + 1]}});
      }
    }
  }

  if (wr != 0 || !row_ok) return;
  const int k = p.k;
  float val[kQ];
#pragma unroll
  for (int r = 0; r < kQ; ++r) val[r] = topk_flip(Key::value(Pk::key(q[r])), sgn);
  if (p.softmax == kTopkSoftmaxSelected) st = topk_selected_stats(val, k, lane);
  const TopkSoftmaxScale sc = topk_softmax_scale(p, row, st, lane == 0);
#pragma unroll
  for (int r = 0; r < kQ; ++r) {
    const int e = r * 32 + lane;
    if (e < k) topk_store_entry(p, row, e, val[r], Pk::col(q[r]), sc.m, sc.inv_s);
  }
}

/// Launches topk_queue_kernel<T, P, plan.queue_regs, plan.sparse> on `stream`.
template <typename T, typename P>
void launch_topk_queue(const TopkPlan& plan, const TopkParams& p, cudaStream_t stream,
                       const char* where) {
  auto go = [&](auto q_tag) {
    constexpr int kQ = decltype(q_tag)::value;
    if (plan.sparse)
      launch(topk_queue_kernel<T, P, kQ, true>, plan.grid, plan.threads, plan.smem, 1, stream,
             where, p);
    else
      launch(topk_queue_kernel<T, P, kQ, false>, plan.grid, plan.threads, plan.smem, 1, stream,
             where, p);
  };
  switch (plan.queue_regs) {
    case 1: return go(std::integral_constant<int, 1>{});
    case 2: return go(std::integral_constant<int, 2>{});
    case 4: return go(std::integral_constant<int, 4>{});
    case 8: return go(std::integral_constant<int, 8>{});
    default:
      throw InvalidArgument(std::string(where) + ": internal error: a queue of " +
                            std::to_string(plan.queue_regs) + " registers");
  }
}

}  // namespace quack::detail
