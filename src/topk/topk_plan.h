// Top-k's host plan (no CUDA call; the host tests sweep it) and the launch parameters every
// top-k kernel shares. Plain data, host and device.
//
// Paths:
//   kQueue  k ≤ kTopkQueueMaxK where neither kBitonic nor kRadix below is planned: the
//           warp-queue kernel (topk_queue_kernel.cuh), W warps per
//           row, R rows per CTA; no workspace. With the prefix bound (k ≥ kTopkPrefixMinK) it
//           plans the sparse offer (TopkPlan::sparse, kTopkSparseMaxThreads).
//   kSort   k > kTopkQueueMaxK: CUB's segmented radix sort of each row (topk_sort.cu) in a
//           workspace, then an epilogue kernel.
//   kBitonic 16-bit or fp32 x, 16-byte loads, N ≤ kTopkBitonicMaxN (fp32: ≤ 32 ·
//           topk_bitonic_max_elems, 2048 or 1024 for k > 16), k ≤ kTopkBitonicMaxK: the
//           register kernel (topk_bitonic_kernel.cuh; fp32: truncated entries + an exactness
//           fix-up), T threads per row, E elements per thread. The plan takes it by
//           topk_bitonic_planned (16-bit x: k ≤ kTopkBitonicPlanMaxK or N ≤
//           kTopkBitonicPlanMaxN; fp32: N ≤ 2048 with k ≤ 16, or k ≤ 32 on short rows, N ≤
//           kTopkBitonicPlanMaxNF32Short or a fit N ≤ 2 · that); plan_topk's forced_path
//           takes it anywhere in its range.
//           Rows of a power-of-2 length N ≥ 16 that it takes run `fit` (N = T·E): the kernel
//           without tail loads and column masks; fp32 fit plans of lists of 8 at E = 64 with T
//           = 32 (N = 2048) run the candidate filter (`filter`; topk_bitonic_filter_instance;
//           from T = 16 when forced).
//   kRadix  16-byte loads, N ≤ kTopkRadixMaxN16 (16-bit x) / kTopkRadixMaxN32 (fp32), k ≤
//           kTopkRadixMaxK: the radix-select kernel (topk_radix_kernel.cuh), one CTA of T threads
//           per row, E elements per thread. The plan takes it by topk_radix_planned (16-bit x,
//           N ≥ kTopkRadixPlanMinN, outside the bitonic class, and not N ≤
//           kTopkSparseOverRadixMaxN with k ≥ kTopkPrefixMinK); forced_path anywhere in range.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/row_io.h"
#include "quack/tensor.h"
#include "quack/topk.h"

#ifdef __CUDACC__
#define QUACK_TOPK_HD __host__ __device__
#else
#define QUACK_TOPK_HD
#endif

namespace quack::detail {

// The queue of ≤ 8 registers × 32 lanes; the public header's constant, so the no-workspace
// bound it documents (and Python reads) is this one.
inline constexpr int kTopkQueueMaxK = kTopkMaxKWithoutWorkspace;
inline constexpr int kTopkUnroll = 4;       // 16-byte vectors per lane per iteration
inline constexpr int kTopkMaxWarpsPerRow = 16;
inline constexpr int kTopkBufEntries = 64;  // per-warp shared buffer of accepted entries
// The queue kernel's sparse offer (TopkPlan::sparse): its instances take CTAs of at most this
// many threads (warps per row × rows per CTA ≤ 4), for their register bound. The plan takes it
// wherever the prefix bound runs (k ≥ kTopkPrefixMinK, vector path); k < 32 (the first-block
// bound, more rounds per iteration) is not measured. Source: H200, kernel-only (quack-bench
// topk --path queue / queue-sparse, run AH3), ms, one warp per row, prefix 32:
//   (M, N, k)              fp32 dense  fp32 sparse   bf16 dense  bf16 sparse
//   65536 x 4096 x 32      0.5829      0.3754        0.6144      0.3039
//   16384 x 4096 x 128     0.2575      0.1775        0.2891      0.1260
//   16384 x 32768 x 64     0.8976      0.7672        0.8819      0.5403
//   4096 x 131072 x 256    1.0675      0.7316        1.1731      0.5204
// (QuACK 0.2.0 at fp32 65536 x 4096 x 32: ~0.545.) The narrowed search (-nw) moved none of
// them by more than 1 %: forced only.
inline constexpr int kTopkSparseMaxThreads = 128;
// The queue kernel's prefix bound (k ≥ kTopkPrefixMinK, vector path): iterations of the warp's
// slice read first for a lower bound of its k-th best (topk_queue_kernel.cuh), at most
// kTopkPrefixIters (the kernel clips them to the slice's full iterations). Its 512 delegate
// groups per warp do not depend on the count: any count ≥ 1 is valid for k ≤ 256. Model
// (random rows, scripts/topk_scan_model.py): the slice's acceptances go from ~k·(1 + ln(slice /
// k)) to ~1.2·k for the prefix + k·ln(slice / prefix) after it. Source: H200, bf16,
// kernel-only, quack-bench topk --config all (run V of docs/performance.md;
// docs/data/run-V_quack_bench_topk_configs.jsonl), ms per call, one warp per row (w1r4), prefix
// iterations 0 / 2 / 4 / 8 / 16 / 32:
//                          none    pre2    pre4    pre8    pre16   pre32
//   16384 × 4096   k 128   0.4603  0.3455  0.2921  0.2925  0.2923  0.2922
//   4096 × 131072  k 256   1.4869  1.3797  1.3320  1.3008  1.2322  1.1756
//   16384 × 32768  k 64    1.0587  1.0201  0.9856  0.9391  0.8935  0.8936
//   65536 × 4096   k 32    0.850   0.742   0.6157  0.6152  0.6154  0.6157
// 65536 × 4096 k 32: the bitonic kernel 0.6951 (fit), 0.889 (not fit); 65536 × 1024 k 8: the
// bitonic fit 0.0705 against the queue's 0.168 (the bitonic rule keeps k ≤ 16). 32 iterations:
// never measurably slower than fewer, and the long rows keep gaining up to 32. k < 32 keeps
// the first-block bound (not measured against the prefix).
inline constexpr int kTopkPrefixMinK = 32;
inline constexpr int kTopkPrefixIters = 32;

inline constexpr int kTopkBitonicMaxN = 4096;
inline constexpr int kTopkBitonicMaxK = 32;
// fp32 x: at most 64 elements per thread for lists of 8 and 16, 32 for lists of 32 (NVVM put
// the row's vectors in local memory beyond: stack frames of 512 bytes at (K, E) = (32, 128)
// and (16, 128), 256 at (32, 64)), so N ≤ 2048, and N ≤ 1024 for k > 16.
inline constexpr int kTopkBitonicMaxNF32 = 2048;
inline constexpr int kTopkBitonicMaxElemsF32 = 64;
inline constexpr int kTopkBitonicMaxElemsF32K32 = 32;
// fp32 x, lists of 8, the fit instance only (N = T·E: no tail loads, no column masks): up to
// 128 elements per thread (the instance bitonic-k8-e128-t*-fit; forced only, the plan keeps
// E = 64). It holds the row's 128 values in registers without local memory (see
// topk_bitonic_kernel.cuh, "fp32").
inline constexpr int kTopkBitonicMaxFitElemsF32K8 = 128;

/// The bitonic kernel's largest E for x of `elt_bytes` bytes and lists of `list` entries (its
/// instances and plans); T ≤ 32, so it bounds N at 32 times it.
QUACK_TOPK_HD inline constexpr int topk_bitonic_max_elems(int elt_bytes, int list) {
  return elt_bytes != 4 ? 128 : list > 16 ? kTopkBitonicMaxElemsF32K32 : kTopkBitonicMaxElemsF32;
}

/// The fit instances' largest E (≥ topk_bitonic_max_elems): fp32 lists of 8 up to
/// kTopkBitonicMaxFitElemsF32K8, else topk_bitonic_max_elems. A plan takes an E above
/// topk_bitonic_max_elems only forced, with forced_fit, where T·E = N; the kernel's range
/// (topk_bitonic_ok, N ≤ 32 · topk_bitonic_max_elems) is not widened by it.
QUACK_TOPK_HD inline constexpr int topk_bitonic_max_fit_elems(int elt_bytes, int list) {
  return elt_bytes == 4 && list <= 8 ? kTopkBitonicMaxFitElemsF32K8
                                     : topk_bitonic_max_elems(elt_bytes, list);
}
inline constexpr int kTopkBitonicThreads = 128;  // threads per CTA: 128 / T rows

/// Whether the bitonic kernel has the candidate-filter instance (topk_bitonic_kernel.cuh,
/// "fp32 filter") for x of `elt_bytes` bytes, lists of `list`, E = `elems`, fit: fp32, lists
/// of 8, E = 64, fit. The plan sets TopkPlan::filter there for T ≥ kTopkFilterPlanMinT, forced
/// (plan_topk's forced_filter 1) for T ≥ kTopkBitonicFilterMinT (the kernel needs 9 thread
/// maxima per row). Run AB (H200, kernel-only, fp32, 65536 rows, ms, filter / networks):
/// (2048, 8) 0.158 / 0.167, (1024, 8) 0.0895 / 0.0888, (1024, 4) 0.0902 / 0.0871: the filter
/// pays at T = 32 (N = 2048), not at T = 16.
QUACK_TOPK_HD inline constexpr bool topk_bitonic_filter_instance(int elt_bytes, int list, int elems,
                                                                bool fit) {
  return elt_bytes == 4 && list == 8 && elems == 64 && fit;
}
inline constexpr int kTopkBitonicFilterMinT = 16;
inline constexpr int kTopkFilterPlanMinT = 32;

// The plan's bitonic class: 16-bit x with 16-byte loads in the kernel's range, and k ≤ 16 or
// N ≤ 2048 (N in (2048, 4096] with k in (16, 32] keeps the queue kernel, power-of-2 N
// included). Source: H200, bf16, M = 65536, kernel-only (quack-bench topk --config all, TB/s
// of x read), the plan's bitonic entry against the best queue entry (the queue's without the
// prefix bound; run R):
//            k = 8          k = 16         k = 32
//   N 1024   1.383 / 0.820  0.940 / 0.668  0.585 / 0.496
//   N 2048   1.418 / 0.947  0.938 / 0.703  0.579 / 0.560
//   N 4096   1.212 / 0.955  0.854 / 0.806  0.604 / 0.639
// At N = 4096, k = 32 the queue kernel with the prefix bound (32 iterations) takes 0.6157 ms
// against the bitonic fit instance's 0.6951 (run V, ms per call; table at kTopkPrefixIters):
// the rule does not plan the bitonic kernel there (k in (16, 32] at N 1024 and 2048 was not
// re-measured with the prefix bound).
inline constexpr int kTopkBitonicPlanMaxK = 16;
inline constexpr int kTopkBitonicPlanMaxN = 2048;

// Power-of-2 rows (topk_bitonic_fits) that the rule above plans run the `fit` instance. From N
// = kTopkBitonicFitMinN on, E = 128 (T = N / 128); below, the plan's own E and T (then T·E =
// N). Source: H200, bf16, M = 65536, kernel-only (quack-bench topk --config all, run T),
// TB/s of x read:
//                 fit e128   fit e64   generic (16 × 64, 32 × 64, 32 × 128)   best queue
//   N 1024 k 8    1.901      1.640     1.381                                  0.819
//   N 2048 k 8    1.977      1.657     1.424                                  0.945
//   N 4096 k 8    2.018      -         1.210                                  0.951
//   N 4096 k 32   0.771      -         0.604                                  0.638
// (the last row's best queue is without the prefix bound; with it, run V: 0.6157 ms per call,
// 0.872 TB/s, against the fit instance's 0.6951 ms, 0.772 TB/s.)
inline constexpr int kTopkBitonicFitMinN = 1024;
inline constexpr int kTopkBitonicFitElems = 128;

// fp32 x in the bitonic kernel (truncated entries + the exactness fix-up of
// topk_bitonic_kernel.cuh): the plan takes it for rows in the kernel's range (16-byte rows,
// topk_bitonic_ok) of N ≤ kTopkBitonicPlanMaxNF32 with k ≤ kTopkBitonicPlanMaxKF32, and with
// k ≤ kTopkBitonicPlanMaxKF32Short (lists of 32) for N ≤ kTopkBitonicPlanMaxNF32Short at any N or
// N = 2 · kTopkBitonicPlanMaxNF32Short if it fits: power-of-2 rows (topk_bitonic_fits) run the
// fit instance, the others the generic one (tail loads and column masks; at N = 1000 the plan's
// 16 × 64); every other fp32 row keeps the queue kernel.
// Source: H200, fp32, M = 65536, kernel-only (quack-bench topk --dtype fp32 --config all), ms
// per call, T × E:
//   run AA:
//   (N 1000, k 8)   generic 16 × 64  0.1285 (32 × 32: 0.133)   queue 0.191
//   (N 2048, k 8)   fit 32 × 64      0.1665                    queue 0.3166
//   (N 1024, k 16)  fit 16 × 64      0.123  (generic: 0.174)   queue 0.266
//   (N 512, k 16)   fit 8 × 64       0.0676
//   run Z3 (the kernel at ~21 SASS instructions per element):
//   (N 1024, k 8)   fit 16 × 64      0.089                     queue 0.180 (E 128 × 8: 0.107)
//   (N 2048, k 16)  fit 32 × 64      0.247                     queue 0.334 (prefix bound)
//   (N 1024, k 32)  fit 32 × 32      0.275                     queue 0.286
//   run AD1, k 32:
//   (N 1024)        fit 32 × 32      0.2743 (generic 0.3144)   queue 0.2851
//   (N 512)         fit 16 × 32      0.1392 (generic 0.1672)   queue 0.2065
//   (N 256)         fit 8 × 32       0.0794 (generic 0.0965)   queue 0.1858
// Generic rows were measured at (1000, 8) only (and, forced, at power-of-2 N: (1024, 16) above,
// (1024, 8) 16 × 64 0.130 in run Z): short rows (N < 512) and k in (8, 16] at generic N follow
// the rule unmeasured.
inline constexpr int kTopkBitonicPlanMaxNF32 = 2048;
inline constexpr int kTopkBitonicPlanMaxKF32 = 16;
inline constexpr int64_t kTopkBitonicPlanMaxNF32Short = 512;
inline constexpr int kTopkBitonicPlanMaxKF32Short = 32;

// The radix-select kernel (topk_radix_kernel.cuh): the row stays on chip, so N is bounded by
// the candidate list in shared memory (N entries of 4 bytes for 16-bit x, 8 for fp32: 32 KB at
// the limits, no opt-in shared memory) and by kTopkRadixMaxThreads threads of E elements; k by
// the final sort of ≤ kTopkRadixMaxK entries in one warp's registers (8 per lane). E =
// kTopkRadixElems unless forced (8, 16 or 32); T = 32·⌈N / (32·E)⌉ ≥ 32.
inline constexpr int64_t kTopkRadixMaxN16 = 8192;
inline constexpr int64_t kTopkRadixMaxN32 = 4096;
inline constexpr int kTopkRadixMaxK = 256;
inline constexpr int kTopkRadixMaxThreads = 512;
inline constexpr int kTopkRadixElems = 16;

// The plan's radix class: 16-bit x from N = 4096 (to kTopkRadixMaxN16) where the bitonic class
// does not hold (k > 16 at N = 4096), but for N ≤ kTopkSparseOverRadixMaxN with k ≥
// kTopkPrefixMinK, where the queue kernel's sparse offer is ahead (kTopkSparseOverRadixMaxN).
// Source: H200, bf16, kernel-only (quack-bench topk, run X), ms per call, the radix kernel
// (E = 16) against the entries the plan takes without it:
//   (M, N, k)              radix e16   queue (prefix 32)   bitonic (fit)
//   16384 x 4096 x 128     0.1635      0.2920              -
//   16384 x 4096 x 32      0.1193      0.1645              -
//   65536 x 4096 x 32      0.4582      0.6142              0.6978
//   65536 x 2048 x 16      0.2320      -                   0.2030
//   65536 x 1024 x 8       0.1593      -                   0.0706
// fp32 keeps the queue kernel (32-bit keys, twice the passes: 0.41 / 0.90 ms against the
// queue's 0.27 / 0.57 at the first and third rows). Past N = 4096 (run X2, bf16, the plan's radix
// against the queue kernel forced): 16384 x 8192 x 64 0.293 / 0.319, 16384 x 8192 x 256 0.493 /
// 0.615, 16384 x 6000 x 100 0.212 / 0.377.
inline constexpr int64_t kTopkRadixPlanMinN = 4096;
// 16-bit rows up to this N with k ≥ kTopkPrefixMinK plan the queue kernel (its sparse offer)
// instead of the radix kernel: 0.304 / 0.126 ms against radix's 0.447 / 0.160 at 65536 x 4096 x
// 32 / 16384 x 4096 x 128 (H200, bf16, kernel-only, run AH3). Beyond N = 4096, and for k < 32
// (no prefix bound, so no sparse offer), not measured against it: radix stays.
inline constexpr int64_t kTopkSparseOverRadixMaxN = 4096;

enum class TopkPath : int { kNone = 0, kQueue = 1, kSort = 2, kBitonic = 3, kRadix = 4 };

/// One call as the plan sees it.
struct TopkProblem {
  int64_t M = 0, N = 0, k = 0;
  DType x = DType::kFloat32;
  bool vec_ok = false;  // x: column stride 1 (or N = 1), 16-byte aligned base and row stride
  int sm_count = 132;
};

struct TopkPlan {
  TopkPath path = TopkPath::kNone;
  int queue_regs = 0;     // R_q: queue capacity 32·R_q ≥ k, R_q ∈ {1, 2, 4, 8}
  int packed_bits = 64;   // 32: (16-bit key, 16-bit index) entries (16-bit x, N < 65536); 64
  bool vec_io = false;    // 16-byte loads (else element loads with any strides)
  int warps_per_row = 1;  // W
  int rows_per_cta = 1;   // R
  int threads = 0;        // 32·W·R
  int64_t slice = 0;      // columns per warp, a multiple of the iteration's columns
  int64_t grid = 0;       // CTAs
  size_t smem = 0;        // dynamic shared memory per CTA
  // kBitonic: list size K (power of 2 ≥ k, 8..32), threads per row T (power of 2 ≤ 32), elements
  // per thread E = 8·(vectors per thread) (16..128, E ≥ K, T·E ≥ N); rows_per_cta = 128 / T.
  int list = 0;
  int threads_per_row = 0;
  int elems = 0;
  // kBitonic: N = T·E, so every thread's vectors lie inside the row; the kernel instance
  // without tail loads and column masks (unforced: power-of-2 N; forced: forced_fit).
  bool fit = false;
  // kBitonic: the candidate-filter instance (topk_bitonic_filter_instance; planned at T ≥
  // kTopkFilterPlanMinT; plan_topk's forced_filter 0 keeps the networks alone, 1 takes the
  // filter from T ≥ kTopkBitonicFilterMinT).
  bool filter = false;
  // kQueue: iterations of the prefix bound (0: none; the kernel clips it to the slice).
  int prefix_iters = 0;
  // kQueue, vector path: the sparse offer (topk_queue_kernel.cuh: each lane offers its own
  // candidates, one per ballot round, instead of a pass over the warp's candidate slots).
  // Planned with the prefix bound (kTopkSparseMaxThreads' measurements); plan_topk's
  // forced_sparse 0 / 1 turns it off / on.
  bool sparse = false;
  // kQueue with a prefix bound: the bound's search starts below the leading bits that the
  // warp's delegate extremes fix (topk_queue_kernel.cuh; ~7 of 16 steps on random rows at
  // k ≤ 32). Forced only (plan_topk's forced_narrow 1): within 1 % of the plan (run AH3).
  bool prefix_narrow = false;
  // kRadix: threads_per_row = threads = T (one row per CTA: rows_per_cta 1, grid M), elems = E
  // (8, 16 or 32 elements per thread, T·E ≥ N), packed_bits 32 (16-bit x) or 64 (fp32), smem =
  // topk_radix_smem_layout(N, packed_bits / 8, T / 32).total.
};

/// Whether the bitonic kernel takes the problem (16-bit or fp32 x, vector loads, k ≤
/// kTopkBitonicMaxK, N ≤ 32 · topk_bitonic_max_elems(x's bytes, list): 4096 for 16-bit x, 2048
/// for fp32 and 1024 for fp32 with k > 16).
bool topk_bitonic_ok(const TopkProblem& pr);

/// Whether the bitonic kernel takes the problem with N = T·E: topk_bitonic_ok(pr) and N a
/// power of 2, N ≥ 16.
bool topk_bitonic_fits(const TopkProblem& pr);

/// Whether the plan picks the bitonic kernel unforced: topk_bitonic_ok(pr) and k ≤
/// kTopkBitonicPlanMaxK or N ≤ kTopkBitonicPlanMaxN for 16-bit x (the measured classes above;
/// a power-of-2 N outside them keeps the queue kernel); for fp32 x, N ≤
/// kTopkBitonicPlanMaxNF32 and k ≤ kTopkBitonicPlanMaxKF32 (power-of-2 N or not), or k ≤
/// kTopkBitonicPlanMaxKF32Short and N ≤ kTopkBitonicPlanMaxNF32Short (any N) or twice that
/// where the row fits (topk_bitonic_fits).
bool topk_bitonic_planned(const TopkProblem& pr);

/// Whether the radix kernel takes the problem: 16-byte loads, x of 2 bytes with N ≤
/// kTopkRadixMaxN16 or of 4 bytes with N ≤ kTopkRadixMaxN32, k ≤ kTopkRadixMaxK.
bool topk_radix_ok(const TopkProblem& pr);

/// Whether the plan picks the radix kernel unforced: topk_radix_ok(pr), x of 2 bytes, N ≥
/// kTopkRadixPlanMinN, not topk_bitonic_planned(pr), and not N ≤ kTopkSparseOverRadixMaxN with
/// k ≥ kTopkPrefixMinK.
bool topk_radix_planned(const TopkProblem& pr);

/// The plan for problem `pr` (M = 0 or k = 0: kNone): kBitonic where topk_bitonic_planned,
/// kRadix where topk_radix_planned, else kQueue for k ≤ kTopkQueueMaxK, else kSort. forced_warps > 0 (a power of 2 ≤
/// kTopkMaxWarpsPerRow) sets the queue kernel's warps per row instead of the heuristic and
/// implies the queue kernel (tests, benchmarks). forced_path kQueue / kBitonic picks that
/// kernel where it applies (topk_bitonic_ok; k ≤ kTopkQueueMaxK for kQueue), else the plan's
/// own; forced_elems > 0 (16, 32, 64 or 128) sets the bitonic kernel's elements per thread
/// where T·E ≥ N and E ≥ K (and E ≤ topk_bitonic_max_elems). forced_fit with forced_path
/// kBitonic sets plan.fit where the bitonic plan has T·E = N exactly (else the plan is the one
/// without forced_fit); with forced_fit, a forced E in (topk_bitonic_max_elems,
/// topk_bitonic_max_fit_elems] (fp32, k ≤ 8: 128) is taken where T·E = N (a fit plan), else
/// ignored as any E out of range. Unforced
/// (forced_elems ≤ 0), power-of-2 rows plan fit (kTopkBitonicFitElems from
/// kTopkBitonicFitMinN, capped by topk_bitonic_max_elems: 64 for fp32, 32 for its lists of 32). The queue plan's prefix bound: kTopkPrefixIters for k ≥
/// kTopkPrefixMinK on the vector path, else 0; forced_prefix ≥ 0 sets it instead (vector path
/// only; tests and benchmarks: 0 is the kernel without it, any k takes a forced one).
/// forced_path kRadix picks the radix kernel where topk_radix_ok (else the plan's own); the
/// plan's radix entry (forced_path kNone, no forced warps or prefix) and the forced one take
/// forced_elems 8, 16 or 32 as E where kTopkRadixMaxThreads·E ≥ N (else kTopkRadixElems).
/// forced_sparse 1 sets the queue plan's sparse offer where it has the vector path and ≤
/// kTopkSparseMaxThreads threads per CTA, 0 leaves it out, −1 the plan's (there with a prefix
/// bound); forced_narrow 1 sets
/// its narrowed prefix search where it has a prefix bound (0 or −1: none).
TopkPlan plan_topk(const TopkProblem& pr, int forced_warps = 0,
                   TopkPath forced_path = TopkPath::kNone, int forced_elems = 0,
                   bool forced_fit = false, int forced_prefix = -1, int forced_filter = -1,
                   int forced_sparse = -1, int forced_narrow = -1);

/// Columns one warp covers per iteration: kTopkUnroll 16-byte vectors per lane.
inline constexpr int64_t topk_iter_cols(int elt_bytes) {
  return kTopkUnroll * 32 * (16 / elt_bytes);
}

/// Shared-memory layout of the queue kernel (bytes from the dynamic base), one function for the
/// host plan and the kernel: per warp a buffer of kTopkBufEntries packed entries; with W > 1,
/// per row W queues of 32·R_q entries (exchange) and W (max, sum) pairs.
struct TopkSmem {
  size_t buf, exchange, stats, total;
};
QUACK_TOPK_HD inline constexpr TopkSmem topk_smem_layout(int warps_per_row, int rows_per_cta,
                                                         int queue_regs, int packed_bytes) {
  const size_t warps = static_cast<size_t>(warps_per_row) * rows_per_cta;
  TopkSmem s{};
  s.buf = 0;
  s.exchange = warps * kTopkBufEntries * packed_bytes;
  const size_t ex = warps_per_row > 1 ? warps * 32 * queue_regs * packed_bytes : 0;
  s.stats = s.exchange + ex;
  const size_t st = warps_per_row > 1 ? warps * 2 * sizeof(float) : 0;
  s.total = (s.stats + st + 15) / 16 * 16;
  return s;
}

/// Shared-memory layout of the radix kernel (bytes from the dynamic base), one function for the
/// host plan and the kernel: two 256-bin histograms of 32-bit counts (the ≤ kTopkRadixMaxK
/// selected entries of the fallback reuse them: 256 · 8 bytes), 16 words of pass results and
/// counters, the row's softmax (max, sum) per warp, the candidate list of up to N entries.
struct TopkRadixSmem {
  size_t hist, misc, stats, list, total;
};
QUACK_TOPK_HD inline constexpr TopkRadixSmem topk_radix_smem_layout(int64_t n, int entry_bytes,
                                                                    int warps) {
  TopkRadixSmem s{};
  s.hist = 0;
  s.misc = 2 * 256 * sizeof(uint32_t);
  s.stats = s.misc + 16 * sizeof(uint32_t);
  s.list = s.stats + (static_cast<size_t>(warps) * 2 * sizeof(float) + 15) / 16 * 16;
  s.total = s.list + (static_cast<size_t>(n) * entry_bytes + 15) / 16 * 16;
  return s;
}

/// The kernels' parameters (plain data).
struct TopkParams {
  RowIO x;        // (M, N)
  RowIO values;   // (M, k)
  RowIO indices;  // (M, k), int32 or int64
  RowIO lse;      // (M) fp32 or absent (ptr null)
  int64_t M = 0, N = 0;
  int k = 0;
  int softmax = 0;  // TopkSoftmax
  bool largest = true;
  int warps_per_row = 1;
  int rows_per_cta = 1;
  int64_t slice = 0;
  bool vec_io = false;  // 16-byte loads (x: vector-aligned rows, unit column stride)
  int threads_per_row = 0;  // kBitonic, kRadix: T
  int prefix_iters = 0;     // kQueue: the prefix bound's iterations (TopkPlan::prefix_iters)
  bool prefix_narrow = false;  // kQueue: TopkPlan::prefix_narrow
};

/// Readable plan name for benchmarks: "queue-q32-p32-vec-w1r4", "queue-q128-p32-vec-w1r4-pre32"
/// (a prefix bound of 32 iterations; "-nw": its narrowed search; "-sp": the sparse offer),
/// "sort", "radix-e16-t256".
const char* topk_plan_name(const TopkPlan& plan, char* buf, size_t len);

}  // namespace quack::detail
