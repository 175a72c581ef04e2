// The register top-k kernel (k ≤ kTopkBitonicMaxK, N ≤ kTopkBitonicMaxN): QuACK 0.2.0's method
// (quack/topk.py, quack/sort/bitonic_sort.py) with exact results: exact (key, column) entries
// for 16-bit x; for fp32 truncated entries and an exactness fix-up (below, "fp32").
//
// Thread -> data: T threads per row (a power of 2 ≤ 32, aligned groups of a warp), 128 / T rows
// per 128-thread CTA. Thread r of a row holds V = E / kV 16-byte vectors (kV = 8 elements for
// 16-bit x, 4 for fp32): vector u·T + r of the row (u < V; columns kV·(u·T + r) .. +kV − 1), so
// each u is one coalesced 16·T-byte access of the group. Every load is issued before any
// compute (V·16 bytes in flight per thread).
//
// Entries (uint32_t): key << 16 | (0xffff − column), the order of topk_warp.cuh (TopkKey,
// TopkPack<uint32_t>): one unsigned compare orders by value, then lower column first; 0 is the
// empty entry (columns ≥ N) and sorts below every element. Built two columns at a time from a
// 32-bit word of two 16-bit values h (integer operations only):
//   key = h ^ (sign(h) ? 0xffff : 0x8000), NaN → 0xffff (every NaN one key: the largest for
//   largest, 0 for smallest, as TopkKey), then ^ 0xffff for smallest (key(−x) = ~key(x) for
//   every non-NaN x, +0/−0 included); the sign masks by one PRMT with sign replication, the NaN
//   masks by one HSET2; the entry = PRMT(key, column part) per element.
//
// Selection, in registers: the thread sorts each chunk of K entries (an optimal sorting
// network, topk_networks.h) and merges it into its list of the K best (elementwise max of the
// descending list with the ascending chunk is bitonic and holds the best K; a bitonic merge
// sorts it). Lists of 8 from 16-bit x take two chunks at a time: their best 8, sorted, by
// TopkBest8Of16 (the 16-key network pruned to those outputs), then the same merge. bf16, K 8,
// E 128, fit (SASS per thread, largest, no softmax): 72 instructions to the loads, 445 making
// entries (7 per word of two elements), 972 min / max, 3 × 43 per butterfly round, ~100 to the
// store: ~13.6 per element. Then log2(T) butterfly rounds: each thread takes its partner's list by K shuffles
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
//
// fp32 (QuACK 0.2.0 packs the column into the low log2 N bits of the value and returns the
// truncated values; exact here). Entry = (key & ~m) | (m − column), key = the fp32 order key of
// x' (topk_key_f32: TopkKey<float>'s order, NaN one key), m = 2^b − 1 with b the bits of the
// columns: 2^b ≥ N (kFit: no empty entries) or 2^b > N (generic: every real entry ≥ 1 > the
// empty 0); b ≤ 13. The x bits are first prepared in registers: a NaN test per two elements
// (FSETP.NAN, OR-ed), and only where a NaN is found (a branch) NaN → 0x7fffffff | sgn; for
// smallest (a branch) the sign flipped. Then key = w ^ (sign ? ~0 : 0x80000000) equals
// topk_key_f32 of the raw bits, and an entry costs SHF + LOP3 + LOP3 + the column part's IADD
// (kFit: SHF + LOP3 + one LOP3 of the key and two column registers, topk_entry_lop3).
// The selection above runs on these entries unchanged (lists of 8 over pairs of chunks too), and
// also keeps d, an upper bound of the best dropped entry: exact at the merges (the elementwise
// min of the descending list and the ascending chunk is the worse half) and butterfly partners,
// and each pair's 8th best for the entries TopkBest8Of16 drops (it does not compute the 9th).
// The cheap test below fires where H(d) ≥ H(e_k) (d ≥ e_k is possible with the pairs' bound:
// then the reload finds the exact answer). fp32 K 8 E 64 fit, per thread (largest, no softmax):
// ~70 to the loads, ~40 NaN test, 269 making entries, 486 min / max, 38 for d, 4 × ~50
// butterfly rounds, ~210 to the stores: ~21 per element (the stores' bodies run by every lane together). fp32 K 8 E 128 T 8 fit (the fit-only E, topk_bitonic_max_fit_elems; forced), the same
// path walked in SASS: 128 to the loads, 69 the NaN test, 1653 making entries and the min / max
// (with d), 3 × 57 butterfly rounds, ~155 to the stores: ~17 per element (E 64 T 16 counted the
// same way: ~20.5); 162 registers (the row's 128 values), no local memory: 3 CTAs per SM (E 64:
// 80 under __launch_bounds__(128, 6), topk_bitonic_min_ctas: 6 CTAs; the T 16 instance with
// T and N constant: 72, 7 CTAs, 224 KB of loads in flight per SM; E 128: 192 KB). Let H(e) = e >> b (the truncated key), e_k the k-th selected entry, G the
// "boundary group" {elements with H = H(e_k)}. Elements with H > H(e_k) are in the exact top-k
// and those with H < H(e_k) are not, so the selected set is exact
// unless G has an unselected member (then the (k+1)-th entry, top[k] for k < K else d, has H =
// H(e_k): the cheap test, row-uniform) with an exact key above a selected member's (selected
// members are G's lowest columns). Only then (rare on real rows: equal top 32 − b key bits at the
// cut) the row's T threads reload it (L2) and take the exact max key of G's unselected members and
// the min of its selected ones (max / min over the T threads); if max > min, G's best k − a members
// (a = selected entries above G) are chosen again exactly by the (2b + 1)-bit entries 1 << 2b |
// (key & m) << b | (m − column), one per step (max over the thread's elements below the previous
// pick, max over the T threads): k − a steps, each a reload of the row and ~10 instructions per
// element (slow; crafted rows, e.g. values 1 + j ulp). Last, thread r loads the values of its
// entries r, r + T, ... from x (exact outputs; L2) in one loop whose body the lanes run together
// and, where two of the k entries share H (possibly misordered; a branch), places entry i at its
// rank by (exact key, lower column) among the k. (Not a body per entry taken by one lane, one
// after another: the rank's branches per entry make the K 32 instance's code ~300 KB, and ~11 %
// of random rows at (1024, 32) tie, 2.4 ms there.)
//
// fp32 float keys (kFltKeys: the T 16 instance, fit K 8 E 64 with T and N constant). Where no x of
// the warp is ±inf or NaN (Σ x0·x1 over the thread's pairs by FFMA, FMA pipe, one per two elements,
// and one FSETP.GEU; a VOTE.ANY makes it warp-uniform), the selection runs on f = (w & ~m) | c as a
// float, c = m − column (largest) or the column (smallest), w x's prepared bits: one LOP3 per
// element against SHF + LOP3 + LOP3 for the integer entry, compared by FMNMX. The f are finite,
// distinct (distinct c) and never +0 and −0 both (only c = 0 can give ±0), so the float order is
// strict and orders by the truncated key H first; inside one H it orders by c for positive w and
// against c for negative w: the lower column first in positive groups (largest) or negative ones
// (smallest: positive x), the higher column first in the other sign's groups ("reversed"). The set
// at H granularity, d and the cheap test mean what they mean for the entries. After the butterfly
// the smallest path's f ^= m, so that the low bits are m − column for the finish, which reads the
// columns there, tests ties by H equality (the same bits) and the cheap test on the floats of the
// truncations (monotone in f); only the fix-up converts, E = f ^ (f < 0 ? ~m : 0x80000000) (the
// entry exactly), and in a reversed G takes the selected members as those ≤ e_k and re-picks on an
// equal key too (the unselected members have the lower columns): rows whose boundary group is
// reversed and holds exact duplicates (largest over negative values, smallest over negative x) take
// the re-pick's k − a reloads where the integer entries took none. A warp with an infinity or NaN
// (or a product or the sum overflowing: |x| ≳ 1e19) takes the integer entries below. fp32 K 8 E 64
// T 16, per storing thread (largest, no softmax): 1028 SASS instructions against 1122 (the entries
// 64 LOP3 against 192; the inf / NaN test 32 FFMA + 3 FADD + 1 FSETP against 32 FSETP.NAN; FMNMX
// has no 3-input form as VIMNMX3: +~25), ALU-pipe instructions ~830 against ~961; smallest 1102
// against 1187.
//
// fp32 filter (kFilter: lists of 8, E 64, fit, T ≥ kTopkBitonicFilterMinT; TopkPlan::filter).
// The networks spend ~8 min / max on every element; here only candidates reach the list. Each
// thread's max of its prepared values (FMNMX, NaN ignored), its key (0 from a thread with a NaN),
// a bitonic sort of the T keys over the lanes, t9 = the 9th largest: 9 elements have key ≥ t9,
// so every element of the entry-order top 9 has H ≥ H(t9) (entries with a lower H rank below all
// 9). Candidates: x ≥ the float of key t9 & ~m (−inf below −inf's key), a mask per thread by
// FSETP + predicated LOP3; the loop over its set bits reloads each candidate (L1), makes its
// entry and inserts it into the sorted list, d = the best entry dropped. The list and d are then
// those of the networks over the candidates, which hold the row's top 9: the butterfly and
// topk_finish_f32 run unchanged. A thread with a NaN (its NaN bits fail the compare) takes all
// 64 as candidates (the loop prepares each reloaded x as above), as does every thread at T < 16
// (t9 = 0): the instance has no networks (80 registers under the 6-CTA bound of
// topk_bitonic_min_ctas, as the networks' instance). Random rows:
// ~10 candidates per row, ~3–4 loop iterations per warp of ~46 SASS (the next candidate's load
// issued before the insert); rows of equal values, or a NaN, make all 64 candidates (64
// iterations: ~3× the networks' time, exact).
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

/// 0xffff per NaN half of `w` (two 16-bit values of type T), else 0: one HSET2.
template <typename T>
__device__ __forceinline__ uint32_t topk_nan2(uint32_t w) {
  uint32_t d;
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm("set.nan.u32.bf16x2 %0, %1, %1;" : "=r"(d) : "r"(w));
  else
    asm("set.nan.u32.f16x2 %0, %1, %1;" : "=r"(d) : "r"(w));
  return d;
}

/// The order keys of the two 16-bit values of `w` (low half: the lower column), in the same
/// halves. flip = 0 (largest) or 0xffffffff (smallest). 4 instructions per word: PRMT, HSET2,
/// 2 LOP3.
template <typename T>
__device__ __forceinline__ uint32_t topk_keys2(uint32_t w, uint32_t flip) {
  const uint32_t neg = topk_prmt(w, 0u, 0xbb99u);  // 0xffff per negative half
  // h ^ (sign ? 0xffff : 0x8000) per half; a NaN half (any sign or payload) becomes 0xffff, the
  // key of the NaN pattern 0x7fff: every NaN one key.
  return ((w ^ (neg | 0x80008000u)) | topk_nan2<T>(w)) ^ flip;
}

/// The fp32 order key of x' for x's bits w (flip = 0 largest, 0xffffffff smallest): the order of
/// TopkKey<float>::key by integer operations; every NaN → 0xffffffff ^ flip (the largest for
/// largest, 0 for smallest), else w ^ (sign ? 0xffffffff : 0x80000000) ^ flip (−0 < +0).
__device__ __forceinline__ uint32_t topk_key_f32(uint32_t w, uint32_t flip) {
  const uint32_t h = (w & 0x7fffffffu) > 0x7f800000u ? 0x7fffffffu : w;
  const uint32_t neg = static_cast<uint32_t>(static_cast<int32_t>(h) >> 31);
  return h ^ (neg | 0x80000000u) ^ flip;
}

/// The fp32 order key (largest) of x's bits w without the NaN and smallest cases: w ^ (sign ?
/// 0xffffffff : 0x80000000), SHF + LOP3. The kernel's x bits are prepared for it (NaN →
/// 0x7fffffff | sgn, smallest: sign flipped), so it equals topk_key_f32 of the raw bits.
/// sh: any value ≥ 31 (PTX clamps the shift of shr to 32); the kernel passes one made from the
/// list (top[K − 1] | 31), so that ptxas makes each chunk's keys after the previous merge, not
/// all next to the loads (fp32 K 8 E 64: 167 registers with the constant 31).
__device__ __forceinline__ uint32_t topk_key_f32_plain(uint32_t w, uint32_t sh) {
  uint32_t s;
  asm("shr.s32 %0, %1, %2;" : "=r"(s) : "r"(w), "r"(sh));
  return w ^ (s | 0x80000000u);
}

/// kFit fp32 entry in one LOP3 (header, "fp32"): where r and q are both 1 (the bits above m:
/// both hold ~m there) the key's bit, else r | q (r and q are disjoint below m: the column
/// part's bits 2.. in r, its bits 0–1 in q). LUT (a & b & c) | (b ^ c) = 0xe6.
__device__ __forceinline__ uint32_t topk_entry_lop3(uint32_t key, uint32_t r, uint32_t q) {
  uint32_t e;
  asm("lop3.b32 %0, %1, %2, %3, 0xe6;" : "=r"(e) : "r"(key), "r"(r), "r"(q));
  return e;
}

/// c |= bit where x ≥ t (false for NaN): FSETP and a predicated LOP3 (a compare's 0 / ~0
/// result AND-ed in compiles to FSETP, SEL and LOP3).
__device__ __forceinline__ void topk_or_if_ge(uint32_t& c, float x, float t, uint32_t bit) {
  asm("{\n\t.reg .pred p;\n\tsetp.ge.f32 p, %1, %2;\n\t@p or.b32 %0, %0, %3;\n\t}"
      : "+r"(c)
      : "f"(x), "f"(t), "r"(bit));
}

/// Whether a or b is NaN: one FSETP.NAN (its OR into a running flag folds into the next one).
__device__ __forceinline__ bool topk_nan_or(float a, float b) { return (a != a) | (b != b); }

/// max / min of two entries: unsigned (VIMNMX) or float (FMNMX; the float keys of the fp32 T 16
/// instance, never NaN).
__device__ __forceinline__ uint32_t topk_max(uint32_t a, uint32_t b) { return max(a, b); }
__device__ __forceinline__ uint32_t topk_min(uint32_t a, uint32_t b) { return min(a, b); }
__device__ __forceinline__ float topk_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ float topk_min(float a, float b) { return fminf(a, b); }

/// Sorts a bitonic list of K entries descending.
template <int K, typename P>
__device__ __forceinline__ void topk_bitonic_merge_desc(P (&v)[K]) {
#pragma unroll
  for (int s = K / 2; s >= 1; s /= 2)
#pragma unroll
    for (int i = 0; i < K; ++i)
      if ((i & s) == 0) topk_cas<false>(v[i], v[i + s]);
}

/// top (descending) := the best K of top ∪ other, descending; `other` ascending.
template <int K, typename P>
__device__ __forceinline__ void topk_merge_lists(P (&top)[K], const P (&other)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) top[i] = topk_max(top[i], other[i]);
  topk_bitonic_merge_desc<K>(top);
}

/// The entries of chunks c and c + 1 side by side (the paired selection's 16-entry input):
/// make(chunk, entries[K]) builds one chunk's K entries (uint32 keys, or float keys).
template <int K, typename E, class Make>
__device__ __forceinline__ void topk_make_pair(const Make& make, int c, E (&e16)[2 * K]) {
  E a[K], b[K];
  make(c, a);
  make(c + 1, b);
#pragma unroll
  for (int i = 0; i < K; ++i) {
    e16[i] = a[i];
    e16[K + i] = b[i];
  }
}

/// topk_merge_lists, and d := max(d, the best entry it drops): the elementwise min of the
/// descending `top` and the ascending `other` is the worse half of their union.
template <int K, typename P>
__device__ __forceinline__ void topk_merge_lists_track(P (&top)[K], const P (&other)[K], P& d) {
#pragma unroll
  for (int i = 0; i < K; ++i) d = topk_max(d, topk_min(top[i], other[i]));
  topk_merge_lists<K>(top, other);
}

/// fp32: f(w, col) for each element of the thread (x's bits w, column col < N; kFit: every
/// one), reloading the row (L1 / L2) four vectors at a time: the rare paths keep few registers
/// live (all V vectors at once took the generic kernel from 150 to 246 registers).
template <int V, bool kFit, class F>
__device__ __forceinline__ void topk_rescan_f32(const float* xrow, int n, int tpr, int r, F f) {
#pragma unroll 4
  for (int u = 0; u < V; ++u) {
    const int c0 = (u * tpr + r) * 4;
    Packed<float, 4> pk;
    if (kFit || c0 + 4 <= n) {
      load_packed<Cache::kNormal>(xrow + c0, pk);
    } else {
      pk.word[0] = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (c0 + i < n) pk.elt[i] = xrow[c0 + i];
    }
    const uint4 w4 = pk.word[0];
    const uint32_t w[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (kFit || c0 + i < n) f(w[i], static_cast<uint32_t>(c0 + i));
  }
}

/// fp32, the rare path of the fix-up (header, "fp32"): the boundary group G = {H = hs} may have
/// an unselected member. Reloads the row; where an unselected member of G has a larger exact
/// key than a selected one, replaces entries a .. k − 1 of top (those of G) by G's best k − a
/// members in the exact order, as entries (hs << b) | (m − column). Row-uniform (T threads).
/// Each pass (the test, each re-pick step) reloads the row (L1 / L2, topk_rescan_f32) instead of
/// keeping E entries live: registers and local memory stay those of the main path.
/// flt_order: the list was selected by the float keys (kFltKeys, header "fp32 float keys"):
/// inside a reversed G (below) the selected members are G's highest columns, the entries ≤ ek.
template <int K, int V, bool kFit>
__device__ __forceinline__ void topk_fix_group_f32(const float* xrow, int n, int k, int tpr, int r,
                                                int b, uint32_t flip, uint32_t ek,
                                                uint32_t (&top)[K], bool flt_order = false) {
  const uint32_t m = (1u << b) - 1u, hs = ek >> b;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const unsigned gmask =
      tpr == 32 ? 0xffffffffu : ((1u << tpr) - 1u) << (lane & ~(tpr - 1));
  uint32_t max_out = 0u, min_in = 0xffffffffu;
  // flt_order: G's highest columns chosen where the float keys' column part runs against the
  // entries' (negative G for largest, positive G for smallest: kFltKeys' col_asc).
  const bool rev = flt_order && (ek < 0x80000000u) == (flip == 0u);
  topk_rescan_f32<V, kFit>(xrow, n, tpr, r, [&](uint32_t w, uint32_t col) {
    const uint32_t key = topk_key_f32(w, flip);
    if ((key >> b) == hs) {
      const uint32_t e = (key & ~m) | (m - col);
      if (rev ? e <= ek : e >= ek) min_in = min(min_in, key);
      else max_out = max(max_out, key);
    }
  });
  max_out = __reduce_max_sync(gmask, max_out);  // over the row's T threads
  min_in = __reduce_min_sync(gmask, min_in);
  // The selected members of G beat every other one: the exact set. In a reversed G (rev) the
  // unselected members have the lower columns, so an equal key beats a selected one.
  if (rev ? max_out < min_in : max_out <= min_in) return;
  int a = 0;
#pragma unroll
  for (int i = 0; i < K; ++i) a += i < k && (top[i] >> b) > hs;
  // Step i: G's best member below the previous pick by (1 << 2b) | (key & m) << b | (m − col)
  // (exact order inside G; the marker bit keeps every member above the non-members' 0).
  uint32_t prev = 0xffffffffu;
#pragma unroll 1
  for (int i = a; i < k; ++i) {
    uint32_t best = 0u;
    topk_rescan_f32<V, kFit>(xrow, n, tpr, r, [&](uint32_t w, uint32_t col) {
      const uint32_t key = topk_key_f32(w, flip);
      const uint32_t ep =
          (key >> b) == hs ? (1u << (2 * b)) | ((key & m) << b) | (m - col) : 0u;
      best = max(best, ep < prev ? ep : 0u);
    });
    best = __reduce_max_sync(gmask, best);
    prev = best;
    const uint32_t e = (hs << b) | (best & m);
#pragma unroll
    for (int q = 0; q < K; ++q) {  // top[i] = e by masks (a select chain becomes local memory)
      const uint32_t sel = 0u - static_cast<uint32_t>(q == i);
      top[q] = (top[q] & ~sel) | (e & sel);
    }
  }
}

/// %tid.x and %ctaid.x read again (volatile asm: NVVM keeps the read; ptxas may still reuse
/// the entry's S2R where registers allow): the fp32 fit kernel remakes its row, row pointer and
/// lane at the finish from them instead of holding ~8 registers through the selection.
__device__ __forceinline__ uint32_t topk_fresh_tid() {
  uint32_t t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}
/// %tid.x as %laneid | (%tid.x & ~31): the same value by an expression ptxas does not merge
/// with the entry's (it kept the entry's shared-memory address of the thread's slot live).
__device__ __forceinline__ uint32_t topk_fresh_tid_by_lane() {
  uint32_t l;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));
  return l | (topk_fresh_tid() & ~31u);
}
__device__ __forceinline__ uint32_t topk_fresh_ctaid() {
  uint32_t c;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(c));
  return c;
}

/// p unchanged, through an empty volatile asm (no instruction): what is computed from it stays
/// after this point (in its branch), not hoisted or made unconditional.
__device__ __forceinline__ const float* topk_opaque_ptr(const float* p) {
  asm volatile("" : "+l"(p));
  return p;
}

/// softmax = selected: (max, sum of exponentials) of the k selected values, read from x at the
/// list's columns (an opaque pointer, no instruction: the loads and their addresses stay in the
/// caller's branch).
template <int K>
__device__ __forceinline__ OnlineMaxSum::Val topk_selected_stats_f32(const float* xrow, const uint32_t (&top)[K],
                                                                     int k, uint32_t m) {
  const float* const xs = topk_opaque_ptr(xrow);
  float v[K];
#pragma unroll
  for (int i = 0; i < K; ++i) v[i] = i < k ? xs[m - (top[i] & m)] : 0.f;
  return topk_list_stats(v, [&](int i) { return i < k; });
}

/// Entry e's (value v) place among the k by (exact key, lower column: larger column part), for
/// lists where two entries share a cheap key (the tie path; opaque pointer as above).
template <int K>
__device__ __forceinline__ int topk_tie_rank_f32(const float* xrow, const uint32_t (&top)[K], int k, uint32_t m,
                                                 uint32_t e, float v, uint32_t flip) {
  const float* const xs = topk_opaque_ptr(xrow);
  const uint32_t kx = topk_key_f32(__float_as_uint(v), flip);
  int pos = 0;
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const uint32_t kj = topk_key_f32(__float_as_uint(xs[m - (top[j] & m)]), flip);
    pos += (j < k) & ((kj > kx) | ((kj == kx) & ((top[j] & m) > (e & m))));
  }
  return pos;
}

/// fp32: the end of the kernel for a row inside M (header, "fp32"): the cheap test and the
/// fix-up of the selected set, the exact values from x, their exact order, the stores. Thread r
/// stores entries r, r + T, ... (< k) by a loop whose body every lane runs together (a body per
/// entry, each taken by one lane of the T, ran the lanes' stores one after another).
template <int K, int V, bool kFit, int kT = 0>
__device__ __forceinline__ void topk_finish_f32(const TopkParams& p, int64_t row, const float* xrow,
                                                int n, int tpr, int r, int b, uint32_t flip,
                                                uint32_t (&top)[K], uint32_t d,
                                                OnlineMaxSum::Val st, bool fdom = false) {
  const int k = p.k;
  const uint32_t m = (1u << b) - 1u;
  // The k-th entry; the (k + 1)-th (top[k] for k < K, else d, which may be an upper bound of it
  // above the k-th: lists of 8 over pairs). Masks, not a select chain (NVVM's select chain over
  // the list crashed cicc at K = 8, E ≥ 64).
  uint32_t ek = top[K - 1], next = d;
  if (k < K) {
    ek = 0u;
    next = 0u;
#pragma unroll
    for (int i = 0; i < K; ++i) {
      ek |= top[i] & (0u - static_cast<uint32_t>(i == k - 1));
      next |= top[i] & (0u - static_cast<uint32_t>(i == k));
    }
  }
  // fdom: top and d are float keys (kFltKeys, header "fp32 float keys"): H(next) ≥ H(ek) as
  // the floats of their truncations (monotone; +0 and −0 compare equal: a harmless extra fire),
  // and the fix-up takes the entries, converted: E = f ^ (f < 0 ? ~m : 0x80000000).
  const bool fire = fdom ? __uint_as_float(next & ~m) >= __uint_as_float(ek & ~m)
                         : (next >> b) >= (ek >> b);
  if (fire) {
    if (fdom) {
      auto entry = [&](uint32_t f) {
        return f ^ ((static_cast<uint32_t>(static_cast<int32_t>(f) >> 31) & ~m) | 0x80000000u);
      };
#pragma unroll
      for (int i = 0; i < K; ++i) top[i] = entry(top[i]);
      ek = entry(ek);
    }
    topk_fix_group_f32<K, V, kFit>(xrow, n, k, tpr, r, b, flip, ek, top, fdom);
  }
  if constexpr (kT >= K) {
    // T constant ≥ K: lane r stores entry r (r < k), taken by a select tree on r's bits; the
    // tie test is lane r's pair (r, r + 1) (entry r + 1 from lane r + 1), a ballot over the
    // row's lanes (the mask loop, the 7 pairs' compares on every lane and the tie path's
    // hoisted operands were ~60 instructions per lane).
    static_assert(K == 8, "the select tree: lists of 8");
    const int lane = static_cast<int>(threadIdx.x & 31);
    const unsigned gmask = (kT == 32 ? 0xffffffffu : ((1u << kT) - 1u) << (lane & ~(kT - 1)));
    const bool s0 = (r & 1) != 0, s1 = (r & 2) != 0, s2 = (r & 4) != 0;
    const uint32_t a0 = s0 ? top[1] : top[0], a1 = s0 ? top[3] : top[2];
    const uint32_t a2 = s0 ? top[5] : top[4], a3 = s0 ? top[7] : top[6];
    const uint32_t c0 = s1 ? a1 : a0, c1 = s1 ? a3 : a2;
    const uint32_t e = s2 ? c1 : c0;  // top[r & 7]
    const uint32_t e_next = __shfl_down_sync(gmask, e, 1, kT);  // top[r + 1] (r + 1 < K)
    const bool tie_pair = r + 1 < k && ((e ^ e_next) >> b) == 0u;
    const bool tie = (__ballot_sync(gmask, tie_pair) & gmask) != 0u;
    if (p.softmax == kTopkSoftmaxSelected) st = topk_selected_stats_f32(xrow, top, k, m);
    const TopkSoftmaxScale sc = topk_softmax_scale(p, row, st, r == 0);
    if (r >= k) return;
    const uint32_t col = m - (e & m);
    const float v = xrow[col];
    const int pos = tie ? topk_tie_rank_f32(xrow, top, k, m, e, v, flip) : r;
    topk_store_entry(p, row, pos, v, col, sc.m, sc.inv_s);
    return;
  }
  bool tie = false;  // two of the k entries with one H: their order needs the exact keys
#pragma unroll
  for (int i = 0; i + 1 < K; ++i)
    tie |= (i + 1 < k) & ((top[i] >> b) == (top[i + 1] >> b));
  if (p.softmax == kTopkSoftmaxSelected) st = topk_selected_stats_f32(xrow, top, k, m);
  const TopkSoftmaxScale sc = topk_softmax_scale(p, row, st, r == 0);
#pragma unroll 1
  for (int i = r; i < k; i += tpr) {
    uint32_t e = 0u;  // top[i] by masks
#pragma unroll
    for (int q = 0; q < K; ++q) e |= top[q] & (0u - static_cast<uint32_t>(q == i));
    const uint32_t col = m - (e & m);
    const float v = xrow[col];
    const int pos = tie ? topk_tie_rank_f32(xrow, top, k, m, e, v, flip) : i;
    topk_store_entry(p, row, pos, v, col, sc.m, sc.inv_s);
  }
}

/// The T of the instance with a constant T (topk_bitonic_kernel's kT) beside the general one,
/// else 0: fp32 fit lists of 8 at E 64, T 16 (N = 1024).
constexpr int topk_bitonic_const_t(size_t elt, int list, int elems, bool fit) {
  return elt == 4 && fit && list == 8 && elems == 64 ? 16 : 0;
}

/// The CTAs per SM an instance asks ptxas for (__launch_bounds__' second argument; 0: none,
/// since a bound of 1 raises other instances' registers: K 8 E 128 157 → 218, K 16 E 64 91 → 120).
/// fp32 fit lists of 8 at E = 64 (networks and filter): 6, ≤ 80 registers (their live peak
/// without a cap: ~78 on the selection's path, 84 in the row-softmax fold's exponentials;
/// allocated 89 → 96, 5 CTAs); the T 16 instance (kT, N = 1024): 7, ≤ 72 registers, no
/// spills with its row pointer from shared memory and its lane from %laneid (QuACK 0.2.0's
/// kernel: 72, 7 CTAs).
template <typename T, int K, int V, bool kFit, int kT>
constexpr int topk_bitonic_min_ctas() {
  return std::is_same_v<T, float> && kFit && K == 8 && V == 16 ? (kT == 16 ? 7 : 6) : 0;
}

/// kT: T as a constant (0: p.threads_per_row). fp32 fit K 8 E 64 at T 16 (N = 1024) has its
/// own instance (topk_bitonic_const_t): the loads' addresses become one base and immediate
/// offsets, the butterfly unrolled.
template <typename T, int K, int V, bool kFit, bool kFilter = false, int kT = 0>
__global__ void __launch_bounds__(kTopkBitonicThreads, (topk_bitonic_min_ctas<T, K, V, kFit, kT>()))
    topk_bitonic_kernel(const TopkParams p) {
  constexpr bool kF32 = std::is_same_v<T, float>;
  static_assert(!kFilter || (kF32 && kFit && K == 8), "the candidate filter: fp32, fit, lists of 8");
  static_assert(sizeof(T) == 2 || kF32,
                "16-bit x: (16-bit key, 16-bit column) entries; fp32: truncated entries");
  constexpr int kV = 16 / sizeof(T);  // elements per 16-byte vector
  constexpr int kE = V * kV;  // elements per thread
  static_assert(kE % K == 0 && (K == 8 || K == 16 || K == 32), "chunks of K entries");
  constexpr int kWordsPerChunk = K / 2;
  // Lists of 8: pairs of chunks through TopkBest8Of16. fp32's d then takes, for each pair, its
  // 8th best (an upper bound of the pair's dropped entries: the pruned network does not compute
  // its 9th) and the merges' dropped entries exactly (header, "fp32").
  constexpr bool kPairs = K == 8 && kE % 16 == 0;
  constexpr unsigned kFull = 0xffffffffu;

  const int tpr = kT != 0 ? kT : p.threads_per_row;  // T
  const int tid = static_cast<int>(threadIdx.x);
  const int r = tid & (tpr - 1);
  // kFit: tid / T by a shift (T a power of 2; the division takes ~20 instructions per thread).
  // The generic instances keep the division: with the shift ptxas gave some of them more
  // registers (K 32, E 64: 107 -> 128).
  const int64_t row = static_cast<int64_t>(blockIdx.x) * p.rows_per_cta +
                      (kFit ? tid >> (__ffs(tpr) - 1) : tid / tpr);
  const bool row_ok = row < p.M;
  const int64_t N = p.N;  // ≤ kTopkBitonicMaxN: columns fit in int
  // kT (fit): N = T·E, a constant (so are b and m below: the entries' column parts become
  // immediates).
  const int n = kFit && kT != 0 ? kT * kE : static_cast<int>(N);
  const T* const xrow = static_cast<const T*>(p.x.ptr) + (row_ok ? row * p.x.row_stride : 0);
  const bool largest = p.largest;
  const uint32_t flip = largest ? 0u : 0xffffffffu;
  const uint32_t sgn = largest ? 0u : 0x80000000u;

  // Loads: whole vectors inside the row in one plain 16-byte load (not evict-first: see Cache
  // in vec.cuh; the queue kernel keeps evict-first, which its fp32 rows read 22 % faster in
  // run AL); the row's last partial vector element by element; past the row (or past M)
  // zeros, whose entries are masked below.
  // kFit: every vector is inside the row (N = T·E); rows beyond M read row 0 (xrow).
  Packed<T, kV> pk[V];
  // kT: the thread's first vector's address, then constant offsets (immediates in the loads).
  const T* const xth = xrow + r * kV;
#pragma unroll
  for (int u = 0; u < V; ++u) {
    const int c0 = (u * tpr + r) * kV;
    if constexpr (kFit && kT != 0) {
      load_packed<Cache::kNormal>(xth + u * (kT * kV), pk[u]);
    } else if constexpr (kFit) {
      load_packed<Cache::kNormal>(xrow + c0, pk[u]);
    } else if (row_ok && c0 + kV <= n) {
      load_packed<Cache::kNormal>(xrow + c0, pk[u]);
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
  // fp32 fit: the row's (max, sum) waits in shared memory for the finish (not 2 registers held
  // through the selection, whose register peak it raised).
  __shared__ float2 st_sm[kF32 && kFit ? kTopkBitonicThreads : 1];
  // kT (fp32 fit): the thread's row pointer waits here for the finish too (ptxas held x's base
  // in two registers through the selection to remake it: at the 72-register cap of 7 CTAs it
  // spilled).
  __shared__ const T* xrow_sm[kF32 && kFit && kT != 0 ? kTopkBitonicThreads : 1];
  if constexpr (kF32 && kFit && kT != 0) xrow_sm[tid] = xrow;
  if (p.softmax == kTopkSoftmaxRow) {
    if constexpr (kF32 && kFit) {
      // The thread's max, then Σ e^(x − max) in one chain (the vector-by-vector fold let ptxas
      // hold every vector's exponentials at once: 159 live registers at K 8, E 64, fit). Each
      // pass reads a copy of each vector: reading pk[u] in place makes this branch the kernel's
      // register peak (fp32 fit K 8 E 64: 116 registers against the copies' 96, those of the
      // kernel without this branch; E 128: 210 against 162).
      float mx = kNegInf;
#pragma unroll
      for (int u = 0; u < V; ++u) {
        const Packed<T, kV> v = pk[u];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          mx = fmaxf(mx, v.elt[i]);
      }
      const float mr = mx == kNegInf ? 0.f : mx;
      float sum = 0.f;
#pragma unroll
      for (int u = 0; u < V; ++u) {
        const Packed<T, kV> v = pk[u];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          sum += exp_diff(v.elt[i], mr);
      }
      st = {{mx, sum}};
    } else {
#pragma unroll
      for (int u = 0; u < V; ++u) {
        const int c0 = (u * tpr + r) * kV;
        st = topk_fold_vector(st, pk[u], [&](int i) { return kFit || c0 + i < n; });
      }
    }
    st = warp_allreduce_red<OnlineMaxSum>(st, tpr);
    if constexpr (kF32 && kFit) st_sm[tid] = make_float2(st.v[0], st.v[1]);
#pragma unroll
    for (int u = 0; u < V; ++u) pk[u] = topk_opaque(pk[u]);  // no CSE with the entries
  }

  // fp32: x's bits in place as those whose largest-order key is the entry's (header, "fp32"):
  // NaN (rare: one FSETP per two elements finds them) → 0x7fffffff | sgn, then for smallest
  // the sign flipped (key(−x) = ~key(x)); the entries below need no NaN test and no flip.
  // kFltKeys (header, "fp32 float keys"): any_nan is also set by an infinity (or an overflowing
  // product or sum: the integer path, exact), which the float keys cannot hold.
  constexpr bool kFltKeys = kF32 && kFit && kT != 0 && !kFilter;
  bool any_nan = false;
  if constexpr (kF32) {
    if constexpr (kFltKeys) {
      // Σ x0·x1 over the pairs, four sums (FFMA, FMA pipe: one per two elements): ±inf or NaN
      // where some x is (inf·0 = NaN, inf + −inf = NaN, neither ever finite again), or where a
      // product or a sum overflows (|x| ≳ 1e19: the integer path, exact); one FSETP.GEU at the
      // end (the integer path's pairwise FSETP.NAN, below, looks for NaN only).
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int u = 0; u < V; ++u) {
        acc[u % 4] = fmaf(pk[u].elt[0], pk[u].elt[1], acc[u % 4]);
        acc[u % 4] = fmaf(pk[u].elt[2], pk[u].elt[3], acc[u % 4]);
      }
      any_nan = !(fabsf((acc[0] + acc[1]) + (acc[2] + acc[3])) < __builtin_huge_valf());
    } else {
#pragma unroll
      for (int u = 0; u < V; ++u)
#pragma unroll
        for (int i = 0; i < 4; i += 2) any_nan |= topk_nan_or(pk[u].elt[i], pk[u].elt[i + 1]);
    }
    // kFltKeys: warp-uniform (VOTE.ANY), the float and the integer path's butterflies must not
    // meet (the NaN canonicalisation below leaves a thread without NaN as the sign flip would).
    if constexpr (kFltKeys) any_nan = __any_sync(kFull, any_nan);
    if (any_nan) {
#pragma unroll
      for (int u = 0; u < V; ++u)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint32_t w = __float_as_uint(pk[u].elt[i]);
          pk[u].elt[i] = __uint_as_float((w & 0x7fffffffu) > 0x7f800000u ? 0x7fffffffu | sgn
                                                                          : w ^ sgn);
        }
    } else if (!largest) {  // volatile: a branch, not XORs with 0 on the largest path
#pragma unroll
      for (int u = 0; u < V; ++u)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          uint32_t w = __float_as_uint(pk[u].elt[i]);
          asm volatile("xor.b32 %0, %0, 0x80000000;" : "+r"(w));
          pk[u].elt[i] = __uint_as_float(w);
        }
    }
#pragma unroll
    for (int u = 0; u < V; ++u) pk[u] = topk_opaque(pk[u]);  // the entries made chunk by chunk
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

  // fp32: entries (key & ~m) | (m − column); m = 2^b − 1, 2^b ≥ N (kFit) or > N (header).
  const int bits = 32 - __clz(kFit ? n - 1 : n);
  const uint32_t m = (1u << bits) - 1u;
  const uint32_t cpf_r = m - static_cast<uint32_t>(4 * r);
  uint32_t sh = 31u;  // fp32: the keys' shift (topk_key_f32_plain), from the list once it exists
  // kFit: m − column = m ^ column (column ≤ m) and column = 4·(u·T + r) | i, so the column
  // part's bits 2.. depend on the vector only and its bits 0–1 are 3 − i (b ≥ 4: N = T·E ≥
  // 16). The entry is then one LOP3 of the key, fr − 4·u·T (~m above the column part, bits 0–1
  // clear) and fq[i] (~m | 3 − i): the same bits as (key & ~m) | (m − column), without the
  // IADD per element (one per vector).
  const uint32_t fr = (cpf_r - 3u) | ~m;
  const uint32_t fa = ~m | static_cast<uint32_t>(4 * (tpr - 1 - r));  // kT: r's bits of m − col
  uint32_t fq[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) fq[i] = ~m | (3u - static_cast<uint32_t>(i));
  auto make_chunk_f32 = [&](int c, uint32_t(&e)[K]) {
    uint32_t ru = 0u;  // kFit: fr − 4·u·T of the current vector
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int t0 = c * K + j;  // the element of the thread
      const int u = t0 / 4, i = t0 % 4;  // its vector, its word in the vector
      const uint4 w4 = pk[u].word[0];
      const uint32_t w = i == 0 ? w4.x : i == 1 ? w4.y : i == 2 ? w4.z : w4.w;
      if constexpr (kFit && kT != 0) {
        // m constant: m − column = (bits of r: fa, per thread) | (bits of u and i: an
        // immediate), disjoint below m, both ~m above it: one LOP3 as below, no IADD per
        // vector (checked in Python for T 1..32, E 16..128, every r, u, i, random keys).
        const uint32_t fb = ~m | ((m & ~(4u * (kT - 1) | 3u)) ^ static_cast<uint32_t>(4 * u * kT)) |
                            (3u - static_cast<uint32_t>(i));
        e[j] = topk_entry_lop3(topk_key_f32_plain(w, sh), fa, fb);  // SHF, LOP3, LOP3
        continue;
      } else if constexpr (kFit) {
        // Opaque (no instruction): made here, once per vector, not hoisted (V live parts).
        if (i == 0)
          ru = static_cast<uint32_t>(topk_opaque(static_cast<int>(
              fr - static_cast<uint32_t>(4 * u) * static_cast<uint32_t>(tpr))));
        e[j] = topk_entry_lop3(topk_key_f32_plain(w, sh), ru, fq[i]);  // SHF, LOP3, LOP3
        continue;
      }
      // The column part m − (4·(u·T + r) + i): the vector's base, less i. Opaque (no
      // instruction): made here, not hoisted (E live column parts).
      const uint32_t cp =
          static_cast<uint32_t>(topk_opaque(static_cast<int>(
              cpf_r - static_cast<uint32_t>(4 * u) * static_cast<uint32_t>(tpr)))) -
          static_cast<uint32_t>(i);
      e[j] = (topk_key_f32_plain(w, sh) & ~m) | cp;  // SHF, LOP3, LOP3 (+ the IADD of cp)
      const int col = (u * tpr + r) * 4 + i;
      if (!kFit && ((u * tpr + r) * 4 + 4 > n || !row_ok))
        if (col >= n || !row_ok) e[j] = 0u;
    }
  };
  auto make = [&](int c, uint32_t(&e)[K]) {
    if constexpr (kF32) make_chunk_f32(c, e);
    else make_chunk(c, e);
  };
  uint32_t d = 0u;  // fp32: the best entry dropped so far (header)

  uint32_t top[K];
  // kFltKeys without an infinity or NaN in the warp's x (header, "fp32 float keys"): the
  // selection, the butterfly and d on the float keys f = (w & ~m) | (m − column) (one LOP3 of x's
  // bits each, FMNMX), left as their bits in top and d for the finish (fdom).
  const bool fdom = kFltKeys && !any_nan;
  if (fdom) {
    if constexpr (kFltKeys) {
      // col_asc: the low bits the column (smallest: x's sign flipped above, so that positive x,
      // negative prepared keys, keep the lower column first among equal keys), else m − column
      // (largest: positive x). At the end ^ m: the low bits m − column for the finish.
      auto float_path = [&](auto col_asc) {
        constexpr bool kColAsc = decltype(col_asc)::value;
        // r's bits of the low part (m − column's: fa; col_asc: the column's), ~m above
        // (The keys are one LOP3 in place of x's bits: ptxas may make them all next to the
        // loads, with no more registers.)
        const uint32_t fr = kColAsc ? ~m | static_cast<uint32_t>(4 * r) : fa;
        auto make_f = [&](int c, float(&e)[K]) {
#pragma unroll
          for (int j = 0; j < K; ++j) {
            const int t0 = c * K + j;
            const int u = t0 / 4, i = t0 % 4;
            const uint4 w4 = pk[u].word[0];
            const uint32_t w = i == 0 ? w4.x : i == 1 ? w4.y : i == 2 ? w4.z : w4.w;
            // the low part's bits of u and i (an immediate): m − column's as make_chunk_f32's
            // kT branch, or the column's 4·u·T | i
            const uint32_t fb =
                kColAsc ? ~m | static_cast<uint32_t>(4 * u * kT + i)
                        : ~m | ((m & ~(4u * (kT - 1) | 3u)) ^ static_cast<uint32_t>(4 * u * kT)) |
                              (3u - static_cast<uint32_t>(i));
            e[j] = __uint_as_float(topk_entry_lop3(w, fr, fb));  // LOP3
          }
        };
        static_assert(kPairs, "the float keys: lists of 8 over pairs of chunks");
        float ft[K], fd;
        float e16[16];
        topk_make_pair<K>(make_f, 0, e16);
        TopkBest8Of16::select<false>(e16);
#pragma unroll
        for (int i = 0; i < K; ++i) ft[i] = e16[i];
        fd = e16[K - 1];  // the pair's 8th best ≥ its dropped entries
#pragma unroll
        for (int c = 2; c < kE / K; c += 2) {
#pragma unroll
          for (int u = c * K / kV; u < (c + 2) * K / kV; ++u) pk[u] = topk_opaque(pk[u]);
          topk_make_pair<K>(make_f, c, e16);
          TopkBest8Of16::select<true>(e16);
          float e[K];
#pragma unroll
          for (int i = 0; i < K; ++i) e[i] = e16[K + i];
          fd = fmaxf(fd, e[0]);  // the pair's 8th best (ascending)
          topk_merge_lists_track<K>(ft, e, fd);
        }
        // The butterfly and d as the integer path's kOwnD below.
        float own[K];
#pragma unroll
        for (int i = 0; i < K; ++i) own[i] = ft[i];
#pragma unroll
        for (int off = 1; off < kT; off *= 2) {
          float o[K];
#pragma unroll
          for (int i = 0; i < K; ++i) o[i] = __shfl_xor_sync(kFull, ft[K - 1 - i], off);
          topk_merge_lists<K>(ft, o);
        }
#pragma unroll
        for (int i = 0; i < K; ++i) fd = fmaxf(fd, own[i] < ft[K - 1] ? own[i] : fd);
#pragma unroll
        for (int off = 1; off < kT; off *= 2) fd = fmaxf(fd, __shfl_xor_sync(kFull, fd, off));
#pragma unroll
        for (int i = 0; i < K; ++i) top[i] = __float_as_uint(ft[i]) ^ (kColAsc ? m : 0u);
        d = __float_as_uint(fd);  // (its low bits unread: the cheap test takes its truncation)
      };
      if (largest) float_path(std::false_type{});
      else float_path(std::true_type{});
    }
  } else {  // the integer entries: every other instance, and kFltKeys with an infinity or NaN
    // kFilter (header, "fp32 filter"): the list from the candidates above the row's bound (every
    // element of a thread with a NaN, every element at T < kTopkBitonicFilterMinT); else the
    // networks.
    if constexpr (kFilter) {
      {
        // The thread's largest x (fmax: x's prepared bits, NaN ignored; NaN threads give 0).
        float mx = pk[0].elt[0];
#pragma unroll
        for (int u = 0; u < V; ++u)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            if (u + i > 0) mx = fmaxf(mx, pk[u].elt[i]);
        uint32_t v = any_nan ? 0u : topk_key_f32_plain(__float_as_uint(mx), 31u);
        // The 9th largest of the row's T keys: a bitonic sort over the T lanes (16 or 32),
        // descending.
        auto sort_lanes = [&](auto tt) {
          constexpr int kLanes = decltype(tt)::value;
#pragma unroll
          for (int k2 = 2; k2 <= kLanes; k2 *= 2)
#pragma unroll
            for (int j = k2 / 2; j >= 1; j /= 2) {
              const uint32_t o = __shfl_xor_sync(kFull, v, j);
              v = (((r & j) == 0) == ((r & k2) == 0)) ? max(v, o) : min(v, o);
            }
        };
        if (tpr == 16) sort_lanes(std::integral_constant<int, 16>{});
        else if (tpr == 32) sort_lanes(std::integral_constant<int, 32>{});
        const uint32_t t9 = tpr >= kTopkBitonicFilterMinT ? __shfl_sync(kFull, v, 8, tpr) : 0u;
        // Candidates: H(key) ≥ H(t9), as x ≥ the float of the key t9 & ~m (below −inf's key:
        // −inf, every x).
        const uint32_t tl = t9 & ~m;
        const float tf = tl < 0x00800000u ? kNegInf
                                          : __uint_as_float(tl ^ (tl >= 0x80000000u ? 0x80000000u
                                                                                    : 0xffffffffu));
        {
          uint32_t cand[(V + 7) / 8];
#pragma unroll
          for (int h = 0; h < (V + 7) / 8; ++h) cand[h] = 0u;
#pragma unroll
          for (int u = 0; u < V; ++u)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              topk_or_if_ge(cand[u / 8], pk[u].elt[i], tf, 1u << (u % 8 * 4 + i));
            }
          if (any_nan) {  // NaN bits fail the compare: every element a candidate
#pragma unroll
            for (int h = 0; h < (V + 7) / 8; ++h) cand[h] = 0xffffffffu;
          }
#pragma unroll
          for (int i = 0; i < K; ++i) top[i] = 0u;
          const float* const xs = topk_opaque_ptr(xrow);
          // One loop over the 64 bits (cand[0]: vectors 0..7, cand[1]: 8..15); each candidate's
          // load is issued one iteration ahead (the insert hides its latency).
          static_assert(V == 16, "the filter instance: E = 64");
          uint32_t lo = cand[0], hi = cand[1];
          auto take = [&]() {  // the lowest set bit's column; the bit cleared (none: bit 31's)
            const bool in_lo = lo != 0u;
            const uint32_t w = in_lo ? lo : hi;
            const int j = __ffs(w) - 1 + (in_lo ? 0 : 32);
            if (in_lo) lo &= lo - 1u;
            else hi &= hi - 1u;
            return static_cast<uint32_t>(((j >> 2) * tpr + r) * 4 + (j & 3));
          };
          if ((lo | hi) != 0u) {
            uint32_t col = take();
            uint32_t w = __float_as_uint(__ldg(xs + col));
#pragma unroll 1
            while (true) {
              const bool more = (lo | hi) != 0u;
              // Unconditional (no branch for ptxas to sink it below the insert): with no bit
              // left, take() gives column (7·T + r)·4 + 3 of the row, loaded and unused.
              const uint32_t col2 = take();
              const uint32_t w2 = __float_as_uint(__ldg(xs + col2));
              // x's bits prepared as above (NaN → 0x7fffffff | sgn, else the sign flipped for
              // smallest), then the entry.
              const uint32_t wp = (w & 0x7fffffffu) > 0x7f800000u ? 0x7fffffffu | sgn : w ^ sgn;
              uint32_t e = (topk_key_f32_plain(wp, 31u) & ~m) | (m - col);
#pragma unroll
              for (int q = 0; q < K; ++q) {
                const uint32_t hq = max(top[q], e);
                e = min(top[q], e);
                top[q] = hq;
              }
              d = max(d, e);
              if (!more) break;
              col = col2;
              w = w2;
            }
          }
        }
      }
    } else if constexpr (kPairs) {
      // Two chunks at a time: their best 8, sorted (TopkBest8Of16, 100 min / max), merged into
      // the list: 132 per 16 entries against 2·(38 + 32) = 140 chunk by chunk.
      uint32_t e16[16];
      topk_make_pair<K>(make, 0, e16);
      TopkBest8Of16::select<false>(e16);
#pragma unroll
      for (int i = 0; i < K; ++i) top[i] = e16[i];
      if constexpr (kF32) d = e16[K - 1];  // the pair's 8th best ≥ its dropped entries
#pragma unroll
      for (int c = 2; c < kE / K; c += 2) {
        // Opaque (no instruction): the chunks' entries are made here, not hoisted next to the
        // loads (twice the registers of the packed values: 168 instead of 77 at E = 128, K = 8).
#pragma unroll
        for (int u = c * K / kV; u < (c + 2) * K / kV; ++u) pk[u] = topk_opaque(pk[u]);
        if constexpr (kF32) sh = top[K - 1] | 31u;
        topk_make_pair<K>(make, c, e16);
        TopkBest8Of16::select<true>(e16);
        uint32_t e[K];
#pragma unroll
        for (int i = 0; i < K; ++i) e[i] = e16[K + i];
        if constexpr (kF32) {
          d = max(d, e[0]);  // the pair's 8th best (ascending)
          topk_merge_lists_track<K>(top, e, d);
        } else {
          topk_merge_lists<K>(top, e);
        }
      }
    } else {
      make(0, top);
      TopkNetwork<K>::template sort<false>(top);
#pragma unroll
      for (int c = 1; c < kE / K; ++c) {
        // Opaque (no instruction): as above.
#pragma unroll
        for (int u = c * K / kV; u < (c + 1) * K / kV; ++u) pk[u] = topk_opaque(pk[u]);
        uint32_t e[K];
        if constexpr (kF32) sh = top[K - 1] | 31u;
        make(c, e);
        TopkNetwork<K>::template sort<true>(e);
        if constexpr (kF32) topk_merge_lists_track<K>(top, e, d);
        else topk_merge_lists<K>(top, e);
      }
    }

    // Butterfly over the row's T threads: the partner's list reversed is ascending.
    // kFilter: the merges do not track d; after them, every entry outside the row's list is in
    // some thread's own list below top[K − 1] or at most that thread's d, so d = the max over the
    // T threads of (d, the own entries below top[K − 1]): the same value, ~30 instructions in
    // all instead of ~13 per round.
    // kT (fp32): the same d as the filter's (own list kept through the rounds, ~30 instructions
    // after them): the butterfly's dropped entries are exactly the own entries outside the row's
    // list, so the value equals the one the rounds' tracking would give (~4 × 14 instructions at
    // T 16).
    constexpr bool kOwnD = kFilter || (kF32 && kT != 0);
    uint32_t own[K];
    if constexpr (kOwnD) {
#pragma unroll
      for (int i = 0; i < K; ++i) own[i] = top[i];
    }
    auto butterfly_round = [&](int off) {
      uint32_t o[K];
#pragma unroll
      for (int i = 0; i < K; ++i) o[i] = __shfl_xor_sync(kFull, top[K - 1 - i], off);
      if constexpr (kF32 && !kOwnD) {
        d = max(d, __shfl_xor_sync(kFull, d, off));
        topk_merge_lists_track<K>(top, o, d);
      } else {
        topk_merge_lists<K>(top, o);
      }
    };
    if constexpr (kT != 0) {
#pragma unroll
      for (int off = 1; off < kT; off *= 2) butterfly_round(off);
    } else {
      for (int off = 1; off < tpr; off *= 2) butterfly_round(off);
    }
    if constexpr (kOwnD) {
#pragma unroll
      for (int i = 0; i < K; ++i) d = max(d, own[i] < top[K - 1] ? own[i] : 0u);
      if constexpr (kT != 0) {
#pragma unroll
        for (int off = 1; off < kT; off *= 2) d = max(d, __shfl_xor_sync(kFull, d, off));
      } else {
        for (int off = 1; off < tpr; off *= 2) d = max(d, __shfl_xor_sync(kFull, d, off));
      }
    }

  }

  if constexpr (kF32 && kFit) {
    // The row, its pointer and the lane made again from %tid / %ctaid (ptxas may still keep
    // the entry's S2R values; under the register cap of topk_bitonic_min_ctas it remakes them
    // instead of holding the row, the row offset and the lane through the selection).
    const int tid2 = static_cast<int>(kT != 0 ? topk_fresh_tid_by_lane() : topk_fresh_tid());
    const int r2 = tid2 & (tpr - 1);
    // kT: rows per CTA 128 / T as a constant, an expression ptxas cannot merge with the
    // entry's (p.rows_per_cta): the entry's row and row pointer die after the loads.
    const int64_t row2 =
        static_cast<int64_t>(topk_fresh_ctaid()) *
            (kT != 0 ? kTopkBitonicThreads / (kT != 0 ? kT : 1) : p.rows_per_cta) +
        (tid2 >> (__ffs(tpr) - 1));
    if (row2 >= p.M) return;
    // (a generic pointer: the reloads are LD.E, not LDG; the cvta form hung cicc)
    const T* const xrow2 = kT != 0 ? xrow_sm[tid2]
                                   : static_cast<const T*>(p.x.ptr) + row2 * p.x.row_stride;
    OnlineMaxSum::Val st2 = OnlineMaxSum::identity();
    if (p.softmax == kTopkSoftmaxRow) {
      const float2 s2 = st_sm[tid2];
      st2 = {{s2.x, s2.y}};
    }
    topk_finish_f32<K, V, kFit, kT>(p, row2, xrow2, n, tpr, r2, bits, flip, top, d, st2, fdom);
    return;
  }
  if (!row_ok) return;
  if constexpr (kF32) {
    topk_finish_f32<K, V, kFit>(p, row, xrow, n, tpr, r, bits, flip, top, d, st);
    return;
  } else {
  using Key = TopkKey<T>;
  using Pk = TopkPack<uint32_t>;
  const int k = p.k;
  if (p.softmax == kTopkSoftmaxSelected) {
    float val[K];
#pragma unroll
    for (int i = 0; i < K; ++i) val[i] = topk_flip(Key::value(Pk::key(top[i])), sgn);
    st = topk_list_stats(val, [&](int i) { return i < k; });
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
}

/// The instances' largest E for lists of `list` entries: the fit ones may go further
/// (topk_bitonic_max_fit_elems: fp32, lists of 8, 128).
template <typename T, bool kFit>
constexpr int topk_bitonic_instance_max_elems(int list) {
  return kFit ? topk_bitonic_max_fit_elems(sizeof(T), list)
              : topk_bitonic_max_elems(sizeof(T), list);
}

/// Launches topk_bitonic_kernel<T, plan.list, plan.elems / kV, kFit> on `stream` (kV = 16 /
/// sizeof(T) elements per vector); kFit must equal plan.fit (then p.N = T·E). kLists: the list
/// sizes this TU instantiates (bit 0: 8, bit 1: 16, bit 2: 32; fp32 splits them over two TUs
/// for compile time); plan.list must be one of them.
template <typename T, bool kFit, int kLists = 7>
void launch_topk_bitonic(const TopkPlan& plan, const TopkParams& p, cudaStream_t stream,
                         const char* where) {
  constexpr int kV = 16 / sizeof(T);
  auto go = [&](auto k_tag, auto v_tag) {
    constexpr int kK = decltype(k_tag)::value, kVecs = decltype(v_tag)::value;
    constexpr int kBit = kK == 8 ? 1 : kK == 16 ? 2 : 4;
    if constexpr ((kLists & kBit) != 0 && kVecs * kV >= kK &&
                  kVecs * kV <= topk_bitonic_instance_max_elems<T, kFit>(kK)) {
      if constexpr (topk_bitonic_filter_instance(sizeof(T), kK, kVecs * kV, kFit)) {
        if (plan.filter)
          return launch(topk_bitonic_kernel<T, kK, kVecs, kFit, true>, plan.grid, plan.threads,
                        0, 1, stream, where, p);
      }
      if constexpr (topk_bitonic_const_t(sizeof(T), kK, kVecs * kV, kFit) != 0) {
        constexpr int kT = topk_bitonic_const_t(sizeof(T), kK, kVecs * kV, kFit);
        if (plan.threads_per_row == kT)
          return launch(topk_bitonic_kernel<T, kK, kVecs, kFit, false, kT>, plan.grid,
                        plan.threads, 0, 1, stream, where, p);
      }
      launch(topk_bitonic_kernel<T, kK, kVecs, kFit>, plan.grid, plan.threads, 0, 1, stream,
             where, p);
    }
  };
  auto by_elems = [&](auto k_tag) {
    switch (plan.elems) {
      case 16: return go(k_tag, std::integral_constant<int, 16 / kV>{});
      case 32: return go(k_tag, std::integral_constant<int, 32 / kV>{});
      case 64: return go(k_tag, std::integral_constant<int, 64 / kV>{});
      case 128: return go(k_tag, std::integral_constant<int, 128 / kV>{});
    }
  };
  const bool ok = ((plan.list == 8 && (kLists & 1)) || (plan.list == 16 && (kLists & 2)) ||
                   (plan.list == 32 && (kLists & 4))) &&
                  (plan.elems == 16 || plan.elems == 32 || plan.elems == 64 ||
                   plan.elems == 128) &&
                  plan.elems <= topk_bitonic_instance_max_elems<T, kFit>(plan.list) &&
                  plan.elems >= plan.list && plan.threads_per_row >= 1 &&
                  plan.threads_per_row <= 32 &&
                  (plan.threads_per_row & (plan.threads_per_row - 1)) == 0 &&
                  plan.fit == kFit &&
                  (!plan.filter || topk_bitonic_filter_instance(sizeof(T), plan.list,
                                                                plan.elems, plan.fit)) &&
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
