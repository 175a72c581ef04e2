// The register top-k kernel for 16-bit x (k ≤ kTopkBitonicMaxK, N ≤ kTopkBitonicMaxN): QuACK
// 0.2.0's method (quack/topk.py, quack/sort/bitonic_sort.py) with exact (key, column) entries.
//
// Thread -> data: T threads per row (a power of 2 ≤ 32, aligned groups of a warp), 128 / T rows
// per 128-thread CTA. Thread r of a row holds V = E / 8 16-byte vectors: vector u·T + r of the
// row (u < V; columns 8·(u·T + r) .. +7), so each u is one coalesced 16·T-byte access of the
// group. Every load is issued before any compute (V·16 bytes in flight per thread).
//
// Entries (uint32_t): key << 16 | (0xffff − column), the order of topk_warp.cuh (TopkKey,
// TopkPack<uint32_t>): one unsigned compare orders by value, then lower column first; 0 is the
// empty entry (columns ≥ N) and sorts below every element. Built two columns at a time from a
// 32-bit word of two 16-bit values h (integer operations only):
//   NaN → 0x7fff (every NaN one key: the largest for largest, 0 for smallest, as TopkKey);
//   key = h ^ (sign(h) ? 0xffff : 0x8000), then ^ 0xffff for smallest (key(−x) = ~key(x) for
//   every non-NaN x, +0/−0 included); the sign masks by one PRMT with sign replication;
//   the entry = PRMT(key, column part) per element.
//
// Selection, in registers: the thread sorts each chunk of K entries (an optimal sorting
// network, topk_networks.h) and merges it into its list of the K best (elementwise max of the
// descending list with the ascending chunk is bitonic and holds the best K; a bitonic merge
// sorts it). Then log2(T) butterfly rounds: each thread takes its partner's list by K shuffles
// and merges it the same way, so every thread of the row ends with the row's K best, sorted.
// Thread r stores entries r, r + T, ... (< k).
//
// kFit (the plan's `fit`: power-of-2 N, or forced): N = T·E, so every vector of every thread lies inside
// the row: no partial-vector loads, no per-element masks of columns ≥ N. Rows beyond M load
// row 0 (M ≥ 1; every column of it exists) and their results are dropped before the stores.
// The generic kernel spends ~15 SASS instructions per vector on the tail test and its fallback
// branch and 2 per element (ISETP + SEL) on the masks (K 8, E 64, T 16: 332 of the 1421
// instructions per thread up to the stores; registers 78 → 56).
//
// Softmax: kSelected over the k values (each thread has them all); kRow folds the online
// (max, Σ e^(x − max)) of the thread's elements per vector (as topk_queue_kernel.cuh) and
// all-reduces it over the T threads.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "common/launch.h"
#include "common/row_general.cuh"
#include "common/vec.cuh"
#include "row/row_math.cuh"
#include "row/row_reduce.cuh"
#include "topk/topk_networks.h"
#include "topk/topk_plan.h"
#include "topk/topk_queue_kernel.cuh"
#include "topk/topk_warp.cuh"

namespace quack::detail {

/// PRMT in its generic mode (selector nibbles with bit 3 set replicate the byte's sign bit).
__device__ __forceinline__ uint32_t topk_prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

/// The order keys of the two 16-bit values of `w` (low half: the lower column), in the same
/// halves. flip = 0 (largest) or 0xffffffff (smallest).
template <typename T>
__device__ __forceinline__ uint32_t topk_keys2(uint32_t w, uint32_t flip) {
  // |h| + c carries into bit 15 exactly when |h| is above the infinity pattern (a NaN).
  constexpr uint32_t kNanAdd = std::is_same_v<T, __nv_bfloat16> ? 0x007f007fu : 0x03ff03ffu;
  const uint32_t t = (w & 0x7fff7fffu) + kNanAdd;
  const uint32_t nan = topk_prmt(t, 0u, 0xbb99u);            // 0xffff per NaN half
  const uint32_t h = (w & ~nan) | (0x7fff7fffu & nan);         // NaN → 0x7fff
  const uint32_t neg = topk_prmt(h, 0u, 0xbb99u);            // 0xffff per negative half
  return (h ^ (neg | 0x80008000u)) ^ flip;
}

/// Sorts a bitonic list of K entries descending.
template <int K>
__device__ __forceinline__ void topk_bitonic_merge_desc(uint32_t (&v)[K]) {
#pragma unroll
  for (int s = K / 2; s >= 1; s /= 2)
#pragma unroll
    for (int i = 0; i < K; ++i)
      if ((i & s) == 0) topk_cas<false>(v[i], v[i + s]);
}

/// top (descending) := the best K of top ∪ other, descending; `other` ascending.
template <int K>
__device__ __forceinline__ void topk_merge_lists(uint32_t (&top)[K], const uint32_t (&other)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) top[i] = top[i] > other[i] ? top[i] : other[i];
  topk_bitonic_merge_desc<K>(top);
}

template <typename T, int K, int V, bool kFit>
__global__ void __launch_bounds__(kTopkBitonicThreads) topk_bitonic_kernel(const TopkParams p) {
  static_assert(sizeof(T) == 2, "16-bit x: (16-bit key, 16-bit column) entries");
  constexpr int kV = 8;       // elements per 16-byte vector
  constexpr int kE = V * kV;  // elements per thread
  static_assert(kE % K == 0 && (K == 8 || K == 16 || K == 32), "chunks of K entries");
  constexpr int kWordsPerChunk = K / 2;
  constexpr unsigned kFull = 0xffffffffu;

  const int tpr = p.threads_per_row;  // T
  const int tid = static_cast<int>(threadIdx.x);
  const int r = tid & (tpr - 1);
  const int64_t row = static_cast<int64_t>(blockIdx.x) * p.rows_per_cta + tid / tpr;
  const bool row_ok = row < p.M;
  const int64_t N = p.N;  // ≤ kTopkBitonicMaxN: columns fit in int
  const int n = static_cast<int>(N);
  const T* const xrow = static_cast<const T*>(p.x.ptr) + (row_ok ? row * p.x.row_stride : 0);
  const bool largest = p.largest;
  const uint32_t flip = largest ? 0u : 0xffffffffu;
  const uint32_t sgn = largest ? 0u : 0x80000000u;

  // Loads: whole vectors inside the row in one 16-byte load; the row's last partial vector
  // element by element; past the row (or past M) zeros, whose entries are masked below.
  // kFit: every vector is inside the row (N = T·E); rows beyond M read row 0 (xrow).
  Packed<T, kV> pk[V];
#pragma unroll
  for (int u = 0; u < V; ++u) {
    const int c0 = (u * tpr + r) * kV;
    if constexpr (kFit) {
      load_packed<Cache::kStream>(xrow + c0, pk[u]);
    } else if (row_ok && c0 + kV <= n) {
      load_packed<Cache::kStream>(xrow + c0, pk[u]);
    } else {
      pk[u].word[0] = make_uint4(0u, 0u, 0u, 0u);
      if (row_ok) {
#pragma unroll
        for (int i = 0; i < kV; ++i)
          if (c0 + i < n) pk[u].elt[i] = xrow[c0 + i];
      }
    }
  }

  OnlineMaxSum::Val st = OnlineMaxSum::identity();
  if (p.softmax == kTopkSoftmaxRow) {
#pragma unroll
    for (int u = 0; u < V; ++u) {
      const int c0 = (u * tpr + r) * kV;
      st = topk_fold_vector(st, pk[u], [&](int i) { return kFit || c0 + i < n; });
    }
    st = warp_allreduce_red<OnlineMaxSum>(st, tpr);
#pragma unroll
    for (int u = 0; u < V; ++u) pk[u] = topk_opaque(pk[u]);  // no CSE with the entries
  }

  // Entries of chunk c (K consecutive elements of the thread: vectors c·K/8 ..), and the list.
  // Column part of element i of vector u: 0xffff − 8·(u·T + r) − i; as a pair per word j
  // (low half: column 2j, high half: column 2j + 1) it is cp_r − (8·u·T + 2j)·0x00010001.
  const uint32_t cp_r = 0xfffeffffu - static_cast<uint32_t>(8 * r) * 0x00010001u;
  auto make_chunk = [&](int c, uint32_t(&e)[K]) {
#pragma unroll
    for (int j = 0; j < kWordsPerChunk; ++j) {
      const int t0 = c * K + 2 * j;  // the word's first element of the thread
      const int u = t0 / kV, jw = t0 % kV / 2;  // its vector, its word in the vector
      const uint4 w4 = pk[u].word[0];
      const uint32_t w = jw == 0 ? w4.x : jw == 1 ? w4.y : jw == 2 ? w4.z : w4.w;
      const uint32_t key2 = topk_keys2<T>(w, flip);
      const uint32_t cp =
          cp_r - static_cast<uint32_t>(8 * u * tpr + 2 * jw) * 0x00010001u;
      e[2 * j] = __byte_perm(key2, cp, 0x1054);      // key_lo << 16 | column part lo
      e[2 * j + 1] = __byte_perm(key2, cp, 0x3276);  // key_hi << 16 | column part hi
      const int col = (u * tpr + r) * kV + 2 * jw;
      // The row's tail (or no row): mask. kFit: no tail; a row beyond M keeps its entries
      // (row 0's), never stored.
      if (!kFit && ((u * tpr + r) * kV + kV > n || !row_ok)) {
        if (col >= n || !row_ok) e[2 * j] = 0u;
        if (col + 1 >= n || !row_ok) e[2 * j + 1] = 0u;
      }
    }
  };

  uint32_t top[K];
  make_chunk(0, top);
  TopkNetwork<K>::template sort<false>(top);
#pragma unroll
  for (int c = 1; c < kE / K; ++c) {
    // Opaque (no instruction): the chunk's entries are made here, not hoisted next to the
    // loads (twice the registers of the packed values: 168 instead of 77 at E = 128, K = 8).
#pragma unroll
    for (int u = c * K / kV; u < (c + 1) * K / kV; ++u) pk[u] = topk_opaque(pk[u]);
    uint32_t e[K];
    make_chunk(c, e);
    TopkNetwork<K>::template sort<true>(e);
    topk_merge_lists<K>(top, e);
  }

  // Butterfly over the row's T threads: the partner's list reversed is ascending.
  for (int off = 1; off < tpr; off *= 2) {
    uint32_t o[K];
#pragma unroll
    for (int i = 0; i < K; ++i) o[i] = __shfl_xor_sync(kFull, top[K - 1 - i], off);
    topk_merge_lists<K>(top, o);
  }

  if (!row_ok) return;
  using Key = TopkKey<T>;
  using Pk = TopkPack<uint32_t>;
  const int k = p.k;
  if (p.softmax == kTopkSoftmaxSelected) {
    float mx = kNegInf;
#pragma unroll
    for (int i = 0; i < K; ++i)
      if (i < k) mx = fmaxf(mx, topk_flip(Key::value(Pk::key(top[i])), sgn));
    const float mr = mx == kNegInf ? 0.f : mx;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < K; ++i)
      if (i < k) s += exp_diff(topk_flip(Key::value(Pk::key(top[i])), sgn), mr);
    st = {{mx, s}};
  }
  const TopkSoftmaxScale sc = topk_softmax_scale(p, row, st, r == 0);
#pragma unroll
  for (int i = 0; i < K; ++i) {
    if (i < k && (i & (tpr - 1)) == r) {
      const float val = topk_flip(Key::value(Pk::key(top[i])), sgn);
      topk_store_entry(p, row, i, val, Pk::col(top[i]), sc.m, sc.inv_s);
    }
  }
}

/// Launches topk_bitonic_kernel<T, plan.list, plan.elems / 8, kFit> on `stream`; kFit must
/// equal plan.fit (then p.N = T·E).
template <typename T, bool kFit>
void launch_topk_bitonic(const TopkPlan& plan, const TopkParams& p, cudaStream_t stream,
                         const char* where) {
  auto go = [&](auto k_tag, auto v_tag) {
    constexpr int kK = decltype(k_tag)::value, kVecs = decltype(v_tag)::value;
    if constexpr (kVecs * 8 >= kK)
      launch(topk_bitonic_kernel<T, kK, kVecs, kFit>, plan.grid, plan.threads, 0, 1, stream,
             where, p);
  };
  auto by_elems = [&](auto k_tag) {
    switch (plan.elems) {
      case 16: return go(k_tag, std::integral_constant<int, 2>{});
      case 32: return go(k_tag, std::integral_constant<int, 4>{});
      case 64: return go(k_tag, std::integral_constant<int, 8>{});
      case 128: return go(k_tag, std::integral_constant<int, 16>{});
    }
  };
  const bool ok = (plan.list == 8 || plan.list == 16 || plan.list == 32) &&
                  (plan.elems == 16 || plan.elems == 32 || plan.elems == 64 ||
                   plan.elems == 128) &&
                  plan.elems >= plan.list && plan.threads_per_row >= 1 &&
                  plan.threads_per_row <= 32 &&
                  (plan.threads_per_row & (plan.threads_per_row - 1)) == 0 &&
                  plan.fit == kFit &&
                  (!kFit || p.N == static_cast<int64_t>(plan.threads_per_row) * plan.elems);
  if (!ok)
    throw InvalidArgument(std::string(where) + ": internal error: a bitonic plan with K = " +
                          std::to_string(plan.list) + ", E = " + std::to_string(plan.elems) +
                          ", T = " + std::to_string(plan.threads_per_row) +
                          (plan.fit ? ", fit" : "") + " (N = " + std::to_string(p.N) + ")" +
                          (kFit ? " in the fit launcher" : ""));
  switch (plan.list) {
    case 8: return by_elems(std::integral_constant<int, 8>{});
    case 16: return by_elems(std::integral_constant<int, 16>{});
    case 32: return by_elems(std::integral_constant<int, 32>{});
  }
}

}  // namespace quack::detail
