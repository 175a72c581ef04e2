// The radix-select top-k kernel for rows that fit on chip (16-byte loads, N ≤ kTopkRadixMaxN16
// for 16-bit x, ≤ kTopkRadixMaxN32 for fp32; k ≤ kTopkRadixMaxK). Planned for 16-bit x by
// topk_radix_planned (topk_plan.h: N from kTopkRadixPlanMinN, with its measurements); fp32 rows
// only when forced (plan_topk's forced_path kRadix).
//
// Thread -> data: one CTA of T threads per row (T a multiple of 32, ≤ kTopkRadixMaxThreads);
// thread t holds V 16-byte vectors, vector u·T + t of the row (u < V; each u one coalesced
// access of the CTA), E = V·(16 / sizeof(x)) elements, all loads issued first.
//
// Entries: entry = key << 16 | (0xffff − column), key the order key of topk_warp.cuh (x' = x or
// −x; NaN above every number, +0 above −0), in a uint32_t for 16-bit x and in the low 48 bits
// of a uint64_t for fp32 (N < 2^16 here). One unsigned compare orders entries by key, then lower
// column first (the documented tie rule), so the k best elements are exactly the k largest
// entries, all distinct: selecting "entry ≥ the k-th largest entry" keeps exactly k elements,
// ties at the k-th value included in column order, with no tie pass. Every entry of a real
// element is ≥ 1 (column part ≥ 1); 0 marks columns ≥ N (16-bit x; fp32 keeps keys and tests
// the column where it matters).
//
// Method, per row:
//   1. Bound. The key of each vector's best element (a delegate, its top 16 bits for fp32): the
//      G vectors are disjoint groups, so the k-th largest delegate b is ≤ the row's k-th best
//      key (k groups each hold an element at least that large). b is radix-selected over the
//      delegates (two 8-bit digits, below). Used when 2·k ≤ G (else b = 0: no pruning); a
//      random normal row then keeps ~1.05–1.15·k candidates (keys ≥ b) out of N, sorted rows
//      ~8·k (16-bit x) / ~4·k (fp32), rows of 8 distinct values ~N / 8
//      (scripts/topk_radix_model.py, which checks these steps against a sort).
//   2. Candidates: elements with key ≥ b (≥ k of them), compacted into a shared list (per-thread
//      count, warp scan, one atomic per warp), C entries.
//   3. C ≤ kTopkRadixMaxK: one warp sorts the list (bitonic over 32·R registers, R = 1..8,
//      topk_warp.cuh) and stores the first k. Otherwise (ties around b, sorted rows, k close to
//      G): radix select of the k-th largest entry over the list, 8-bit digits from the top (4
//      for 16-bit x, 6 for fp32, stopping once the digit's bin holds exactly the rank still
//      wanted); the k entries ≥ it go to a second buffer, which one warp sorts and stores.
//   Radix step: a 256-bin histogram of the digit over the entries that match the digits found
//   so far (shared memory; each warp adds the counts of its two most common digits by one atomic
//   each, the rest per lane: the hot bins of real data would otherwise serialize whole warps on
//   one address), then warp 0 scans the bins from the top for the bin holding the rank kk, and
//   kk drops by the count above it. Two histograms alternate, so one step costs two barriers.
//
// Softmax: kRow folds each thread's online (max, Σ e^(x − max)) per vector, all-reduces it per
// warp and combines the warps in the storing warp; kSelected over the k values (as the queue
// kernel).
//
// Why: the queue kernel spends its time on acceptances and merges (issue 19's misses at N =
// 4096, k = 32 and 128), the bitonic kernel on networks whose size grows with k; here a random
// row costs per element a key, a max, a compare and a count (~10 instructions), plus per row
// a few radix steps over G = N / 8 (16-bit) or N / 4 delegates and a sort of ~k entries.
// Expected costs not measured: the barriers (2 per radix step, ~6 per row) and the shared
// atomics of the delegate step.
//
// Shared memory (topk_radix_smem_layout): 2 KB of histograms (the fallback's k selected entries
// reuse them), counters, per-warp softmax statistics, the list (N entries: 4 bytes each for
// 16-bit x, 8 for fp32). Rows per CTA: one; grid = M.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "common/launch.h"
#include "common/row_general.cuh"
#include "common/vec.cuh"
#include "row/row_math.cuh"
#include "row/row_reduce.cuh"
#include "topk/topk_bitonic_kernel.cuh"
#include "topk/topk_plan.h"
#include "topk/topk_queue_kernel.cuh"
#include "topk/topk_warp.cuh"

namespace quack::detail {

/// The radix kernel's entries: key << 16 | (0xffff − column); P = uint32_t (16-bit keys) or
/// uint64_t (32-bit keys, 48 bits used).
template <typename P>
struct TopkRadixEntry {
  __device__ __forceinline__ static P make(uint32_t key, int col) {
    return (static_cast<P>(key) << 16) | static_cast<P>(0xffffu - static_cast<uint32_t>(col));
  }
  __device__ __forceinline__ static uint32_t key(P e) { return static_cast<uint32_t>(e >> 16); }
  __device__ __forceinline__ static int col(P e) {
    return 0xffff - static_cast<int>(static_cast<uint32_t>(e) & 0xffffu);
  }
};

// misc[] words (TopkRadixSmem::misc): the radix step's result, the list and selection counts.
inline constexpr int kTopkRadixDigit = 0, kTopkRadixAbove = 1, kTopkRadixCount = 2,
                     kTopkRadixListN = 4, kTopkRadixSelN = 5;

/// The inclusive prefix sum of v over the warp's lanes (lane l: Σ_{j ≤ l} v_j).
template <typename I>
__device__ __forceinline__ I topk_warp_inclusive_sum(I v, int lane) {
#pragma unroll
  for (int off = 1; off < 32; off *= 2) {
    const I t = __shfl_up_sync(0xffffffffu, v, off);
    if (lane >= off) v += t;
  }
  return v;
}

/// h[digit] += 1 for every lane with `pred` (the whole warp calls it, any lanes with pred).
/// The digits of the first two active lanes are added once each with their lanes' count, the
/// remaining lanes one atomic each: data concentrated in a few bins (the exponent bits of real
/// rows) costs a few conflict-free atomics instead of one serialized per lane.
__device__ __forceinline__ void topk_radix_count(uint32_t* h, uint32_t digit, bool pred,
                                                 int lane) {
  constexpr unsigned kFull = 0xffffffffu;
  unsigned act = __ballot_sync(kFull, pred);
#pragma unroll
  for (int round = 0; round < 2; ++round) {
    if (act == 0u) return;  // warp-uniform
    const int leader = __ffs(act) - 1;
    const uint32_t d = __shfl_sync(kFull, digit, leader);
    const unsigned m = __ballot_sync(kFull, digit == d) & act;
    if (lane == leader) atomicAdd(&h[d], static_cast<uint32_t>(__popc(m)));
    act &= ~m;
  }
  if ((act >> lane) & 1u) atomicAdd(&h[digit], 1u);
}

/// Warp 0 of the CTA: the bin d of histogram h (256 bins) that holds rank kk counted from the
/// top (1-based: Σ_{b > d} h[b] < kk ≤ Σ_{b ≥ d} h[b]; kk ≤ Σ h), written to out as (d,
/// Σ_{b > d} h[b], h[d]); zeroes `next`, the histogram of the following step. Lane l scans bins
/// 255 − 8l down to 248 − 8l; a warp scan finds the lane, which finds the bin.
__device__ __forceinline__ void topk_radix_find(const uint32_t* h, uint32_t* next, uint32_t kk,
                                                int lane, uint32_t* out) {
  constexpr unsigned kFull = 0xffffffffu;
  const uint4* const h4 = reinterpret_cast<const uint4*>(h);
  const uint4 hi = h4[63 - 2 * lane], lo = h4[62 - 2 * lane];
  const uint32_t c[8] = {hi.w, hi.z, hi.y, hi.x, lo.w, lo.z, lo.y, lo.x};  // bins descending
  uint32_t s = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += c[j];
  const uint32_t incl = topk_warp_inclusive_sum(s, lane);
  const uint32_t excl = incl - s;
  const unsigned hit = __ballot_sync(kFull, excl < kk && kk <= incl);
  const int src = hit ? __ffs(hit) - 1 : 0;
  uint32_t acc = excl, d = 0, above = 0, cnt = 0;
  bool found = false;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if (!found && acc + c[j] >= kk) {
      found = true;
      d = static_cast<uint32_t>(255 - 8 * lane - j);
      above = acc;
      cnt = c[j];
    }
    acc += c[j];
  }
  d = __shfl_sync(kFull, d, src);
  above = __shfl_sync(kFull, above, src);
  cnt = __shfl_sync(kFull, cnt, src);
  if (lane == 0) {
    out[kTopkRadixDigit] = d;
    out[kTopkRadixAbove] = above;
    out[kTopkRadixCount] = cnt;
  }
  uint4* const n4 = reinterpret_cast<uint4*>(next);
  n4[lane] = make_uint4(0u, 0u, 0u, 0u);
  n4[lane + 32] = make_uint4(0u, 0u, 0u, 0u);
}

struct TopkRadixDigit {
  uint32_t d, above, count;
};

/// One radix step after the CTA's counts went into histogram `pass` & 1 (of the two at `hist`):
/// barrier, warp 0 finds the bin of rank kk and zeroes the other histogram, barrier, every
/// thread reads the result.
__device__ __forceinline__ TopkRadixDigit topk_radix_step(uint32_t* hist, int pass, uint32_t kk,
                                                          uint32_t* misc, int warp, int lane) {
  __syncthreads();
  if (warp == 0)
    topk_radix_find(hist + 256 * (pass & 1), hist + 256 * ((pass + 1) & 1), kk, lane, misc);
  __syncthreads();
  return {misc[kTopkRadixDigit], misc[kTopkRadixAbove], misc[kTopkRadixCount]};
}

/// One warp: sorts the `count` entries of buf (count ≤ 32·R, k ≤ count) descending and stores
/// the first k (values, indices, the softmax; kRow's per-warp statistics in `stats`).
template <typename T, typename P, int R>
__device__ __forceinline__ void topk_radix_sort_store(const TopkParams& p, int64_t row,
                                                      const P* buf, int count,
                                                      const float* stats, int warps, int lane) {
  using Key = TopkKey<T>;
  using En = TopkRadixEntry<P>;
  P v[R];
#pragma unroll
  for (int r = 0; r < R; ++r) v[r] = r * 32 + lane < count ? buf[r * 32 + lane] : P(0);
  warp_bitonic_sort<true, R>(v, lane);
  const int k = p.k;
  const uint32_t sgn = p.largest ? 0u : 0x80000000u;
  float val[R];
#pragma unroll
  for (int r = 0; r < R; ++r) val[r] = topk_flip(Key::value(En::key(v[r])), sgn);
  OnlineMaxSum::Val st = OnlineMaxSum::identity();
  if (p.softmax == kTopkSoftmaxRow) {
    for (int w = 0; w < warps; ++w)
      st = OnlineMaxSum::combine(st, {{stats[2 * w], stats[2 * w + 1]}});
  } else if (p.softmax == kTopkSoftmaxSelected) {
    st = topk_selected_stats(val, k, lane);
  }
  const TopkSoftmaxScale sc = topk_softmax_scale(p, row, st, lane == 0);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int e = r * 32 + lane;
    if (e < k) topk_store_entry(p, row, e, val[r], En::col(v[r]), sc.m, sc.inv_s);
  }
}

template <typename T, typename P, int kVecs>
__global__ void __launch_bounds__(kTopkRadixMaxThreads) topk_radix_kernel(const TopkParams p) {
  using Key = TopkKey<T>;
  using En = TopkRadixEntry<P>;
  constexpr bool k16 = sizeof(T) == 2;
  static_assert(k16 ? std::is_same_v<P, uint32_t> : std::is_same_v<P, uint64_t>,
                "32-bit entries for 16-bit keys, 64-bit (48 used) for fp32");
  constexpr int kV = 16 / sizeof(T);              // elements per 16-byte vector
  constexpr int kE = kVecs * kV;                  // elements per thread
  constexpr int kEntryBits = Key::kBits + 16;     // 32 or 48
  constexpr unsigned kFull = 0xffffffffu;

  extern __shared__ __align__(16) unsigned char topk_smem[];
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int nt = static_cast<int>(blockDim.x), warps = nt >> 5;
  const int64_t row = blockIdx.x;
  const int n = static_cast<int>(p.N);  // ≤ kTopkRadixMaxN16
  const int k = p.k;
  const TopkRadixSmem lay = topk_radix_smem_layout(n, sizeof(P), warps);
  uint32_t* const hist = reinterpret_cast<uint32_t*>(topk_smem + lay.hist);
  uint32_t* const misc = reinterpret_cast<uint32_t*>(topk_smem + lay.misc);
  float* const stats = reinterpret_cast<float*>(topk_smem + lay.stats);
  P* const list = reinterpret_cast<P*>(topk_smem + lay.list);
  const T* const xrow = static_cast<const T*>(p.x.ptr) + row * p.x.row_stride;
  const bool largest = p.largest;
  const uint32_t sgn = largest ? 0u : 0x80000000u;
  auto first_col = [&](int u) { return (u * nt + tid) * kV; };

  // Loads: whole vectors by one 16-byte load; the row's last partial vector element by element;
  // past the row zeros (masked below).
  Packed<T, kV> pk[kVecs];
#pragma unroll
  for (int u = 0; u < kVecs; ++u) {
    const int c0 = first_col(u);
    if (c0 + kV <= n) {
      load_packed<Cache::kStream>(xrow + c0, pk[u]);
    } else {
      pk[u].word[0] = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
      for (int i = 0; i < kV; ++i)
        if (c0 + i < n) pk[u].elt[i] = xrow[c0 + i];
    }
  }
  for (int i = tid; i < 2 * 256; i += nt) hist[i] = 0u;
  if (tid < 16) misc[tid] = 0u;

  if (p.softmax == kTopkSoftmaxRow) {  // per-warp (max, Σ e^(x − max)) into stats
    OnlineMaxSum::Val st = OnlineMaxSum::identity();
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {
      const int c0 = first_col(u);
      st = topk_fold_vector(st, pk[u], [&](int i) { return c0 + i < n; });
    }
    st = warp_allreduce_red<OnlineMaxSum>(st, 32);
    if (lane == 0) {
      stats[2 * warp] = st.v[0];
      stats[2 * warp + 1] = st.v[1];
    }
#pragma unroll
    for (int u = 0; u < kVecs; ++u) pk[u] = topk_opaque(pk[u]);  // no CSE with the keys
  }

  // w[s] (s = u·kV + i): 16-bit x: the entry, 0 past the row; fp32: the key, 0 past the row.
  // dv[u]: the delegate, the top 16 bits of the vector's best key.
  uint32_t w[kE];
  uint32_t dv[kVecs];
#pragma unroll
  for (int u = 0; u < kVecs; ++u) {
    const int c0 = first_col(u);
    if constexpr (k16) {
      const uint32_t flip = largest ? 0u : 0xffffffffu;
      const uint32_t cp0 = 0xfffeffffu - static_cast<uint32_t>(c0) * 0x00010001u;
      const uint4 w4 = pk[u].word[0];
      const uint32_t words[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t key2 = topk_keys2<T>(words[j], flip);
        const uint32_t cp = cp0 - static_cast<uint32_t>(2 * j) * 0x00010001u;
        w[u * kV + 2 * j] = __byte_perm(key2, cp, 0x1054);      // key_lo << 16 | column part
        w[u * kV + 2 * j + 1] = __byte_perm(key2, cp, 0x3276);  // key_hi << 16 | column part
      }
      if (c0 + kV > n) {
#pragma unroll
        for (int i = 0; i < kV; ++i)
          if (c0 + i >= n) w[u * kV + i] = 0u;
      }
      uint32_t mx = w[u * kV];
#pragma unroll
      for (int i = 1; i < kV; ++i) mx = max(mx, w[u * kV + i]);
      dv[u] = mx >> 16;
    } else {
      if (c0 + kV <= n) {
#pragma unroll
        for (int i = 0; i < kV; ++i)
          w[u * kV + i] = Key::key(topk_flip(pk[u].elt[i], sgn), largest);
      } else {
#pragma unroll
        for (int i = 0; i < kV; ++i)
          w[u * kV + i] = c0 + i < n ? Key::key(topk_flip(pk[u].elt[i], sgn), largest) : 0u;
      }
      uint32_t mx = w[u * kV];
#pragma unroll
      for (int i = 1; i < kV; ++i) mx = max(mx, w[u * kV + i]);
      dv[u] = mx >> 16;
    }
  }
  __syncthreads();  // the zeroed histograms and counters

  // 1. The bound: the k-th largest delegate (16 bits), by two radix steps.
  int pass = 0;
  uint32_t bound = 0;  // in the key's domain: keys ≥ bound hold the k best
  const int vectors = (n + kV - 1) / kV;
  if (2 * k <= vectors) {  // CTA-uniform; at least 2k delegates: a useful bound
    uint32_t* h = hist + 256 * (pass & 1);
#pragma unroll
    for (int u = 0; u < kVecs; ++u) topk_radix_count(h, dv[u] >> 8, first_col(u) < n, lane);
    const TopkRadixDigit a =
        topk_radix_step(hist, pass++, static_cast<uint32_t>(k), misc, warp, lane);
    const uint32_t kk = static_cast<uint32_t>(k) - a.above;
    uint32_t b16 = a.d << 8;
    if (a.count != kk) {  // else the bin's delegates are exactly the rank still wanted
      h = hist + 256 * (pass & 1);
#pragma unroll
      for (int u = 0; u < kVecs; ++u)
        topk_radix_count(h, dv[u] & 255u, first_col(u) < n && (dv[u] >> 8) == a.d, lane);
      b16 |= topk_radix_step(hist, pass++, kk, misc, warp, lane).d;
    }
    bound = b16 << (Key::kBits - 16);
  }

  // 2. The candidates (key ≥ bound) into the list.
  auto is_cand = [&](int u, int i) -> bool {
    if constexpr (k16) return w[u * kV + i] > (bound << 16);  // 0 past the row
    else return bound > 0u ? w[u * kV + i] >= bound : first_col(u) + i < n;
  };
  auto entry_of = [&](int u, int i) -> P {
    if constexpr (k16) return w[u * kV + i];
    else return En::make(w[u * kV + i], first_col(u) + i);
  };
  {
    int cnt = 0;
#pragma unroll
    for (int u = 0; u < kVecs; ++u)
#pragma unroll
      for (int i = 0; i < kV; ++i) cnt += is_cand(u, i) ? 1 : 0;
    const int incl = topk_warp_inclusive_sum(cnt, lane);
    uint32_t base = 0;
    if (lane == 31) base = atomicAdd(&misc[kTopkRadixListN], static_cast<uint32_t>(incl));
    base = __shfl_sync(kFull, base, 31);
    P* dst = list + (static_cast<int>(base) + incl - cnt);  // a pointer: STS + add per entry
#pragma unroll
    for (int u = 0; u < kVecs; ++u)
#pragma unroll
      for (int i = 0; i < kV; ++i)
        if (is_cand(u, i)) *dst++ = entry_of(u, i);
  }
  __syncthreads();
  const int C = static_cast<int>(misc[kTopkRadixListN]);  // ≥ k

  // 3. Few candidates: sort them all. Else radix-select the k-th largest entry over the list.
  const P* out = list;
  int count = C;
  if (C > kTopkRadixMaxK) {  // CTA-uniform
    P desired = 0, mask = 0;
    uint32_t kk = static_cast<uint32_t>(k);
    for (int shift = kEntryBits - 8; shift >= 0; shift -= 8) {
      uint32_t* const h = hist + 256 * (pass & 1);
      for (int b = warp * 32; b < C; b += nt) {  // warp-uniform trip count
        const int i = b + lane;
        const P e = i < C ? list[i] : P(0);
        topk_radix_count(h, static_cast<uint32_t>(e >> shift) & 255u,
                         i < C && (e & mask) == desired, lane);
      }
      const TopkRadixDigit r = topk_radix_step(hist, pass++, kk, misc, warp, lane);
      kk -= r.above;
      desired |= static_cast<P>(r.d) << shift;
      mask |= static_cast<P>(255) << shift;
      if (r.count == kk) break;  // the bin's entries are exactly the rank still wanted
    }
    // Exactly k entries have (e & mask) ≥ desired; into the histograms' space (free now).
    P* const sel = reinterpret_cast<P*>(topk_smem + lay.hist);
    for (int i = tid; i < C; i += nt) {
      const P e = list[i];
      if ((e & mask) >= desired) sel[atomicAdd(&misc[kTopkRadixSelN], 1u)] = e;
    }
    __syncthreads();
    out = sel;
    count = k;
  }
  if (warp != 0) return;
  if (count <= 32) topk_radix_sort_store<T, P, 1>(p, row, out, count, stats, warps, lane);
  else if (count <= 64) topk_radix_sort_store<T, P, 2>(p, row, out, count, stats, warps, lane);
  else if (count <= 128) topk_radix_sort_store<T, P, 4>(p, row, out, count, stats, warps, lane);
  else topk_radix_sort_store<T, P, 8>(p, row, out, count, stats, warps, lane);
}

/// Launches topk_radix_kernel<T, P, plan.elems / V> (V elements per 16-byte vector) on
/// `stream`: one CTA of plan.threads threads per row.
template <typename T, typename P>
void launch_topk_radix(const TopkPlan& plan, const TopkParams& p, cudaStream_t stream,
                       const char* where) {
  constexpr int kV = 16 / sizeof(T);
  auto go = [&](auto v_tag) {
    constexpr int kVecs = decltype(v_tag)::value;
    launch(topk_radix_kernel<T, P, kVecs>, plan.grid, plan.threads, plan.smem, 1, stream, where,
           p);
  };
  const bool ok = (plan.elems == 8 || plan.elems == 16 || plan.elems == 32) &&
                  plan.threads % 32 == 0 && plan.threads >= 32 &&
                  plan.threads <= kTopkRadixMaxThreads &&
                  plan.threads == p.threads_per_row &&
                  static_cast<int64_t>(plan.threads) * plan.elems >= p.N && p.N < 0xffff &&
                  p.k >= 1 && p.k <= kTopkRadixMaxK && p.k <= p.N && plan.grid == p.M &&
                  plan.packed_bits == static_cast<int>(8 * sizeof(P));
  if (!ok)
    throw InvalidArgument(std::string(where) + ": internal error: a radix plan with E = " +
                          std::to_string(plan.elems) + ", T = " + std::to_string(plan.threads) +
                          " (N = " + std::to_string(p.N) + ", k = " + std::to_string(p.k) + ")");
  switch (plan.elems) {
    case 8: return go(std::integral_constant<int, 8 / kV>{});
    case 16: return go(std::integral_constant<int, 16 / kV>{});
    case 32: return go(std::integral_constant<int, 32 / kV>{});
  }
}

}  // namespace quack::detail
