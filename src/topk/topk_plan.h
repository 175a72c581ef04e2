// Top-k's host plan (no CUDA call; the host tests sweep it) and the launch parameters every
// top-k kernel shares. Plain data, host and device.
//
// Paths:
//   kQueue  k ≤ kTopkQueueMaxK: the warp-queue kernel (topk_queue_kernel.cuh), W warps per
//           row, R rows per CTA; no workspace.
//   kSort   k > kTopkQueueMaxK: CUB's segmented radix sort of each row (topk_sort.cu) in a
//           workspace, then an epilogue kernel.
//   kBitonic 16-bit x, 16-byte loads, N ≤ kTopkBitonicMaxN, k ≤ kTopkBitonicMaxK: the register
//           kernel (topk_bitonic_kernel.cuh), T threads per row, E elements per thread. The plan
//           takes it by topk_bitonic_planned (k ≤ kTopkBitonicPlanMaxK or N ≤
//           kTopkBitonicPlanMaxN, or N a power of 2); plan_topk's forced_path takes it anywhere
//           in its range. Rows of a power-of-2 length N ≥ 16 run `fit` (N = T·E): the
//           kernel without tail loads and column masks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/row_io.h"
#include "quack/tensor.h"

#ifdef __CUDACC__
#define QUACK_TOPK_HD __host__ __device__
#else
#define QUACK_TOPK_HD
#endif

namespace quack::detail {

inline constexpr int kTopkQueueMaxK = 256;  // queue of ≤ 8 registers × 32 lanes
inline constexpr int kTopkUnroll = 4;       // 16-byte vectors per lane per iteration
inline constexpr int kTopkMaxWarpsPerRow = 16;
inline constexpr int kTopkBufEntries = 64;  // per-warp shared buffer of accepted entries
// The queue kernel's prefix bound (k > 16·kTopkUnroll, vector path): iterations of the warp's
// slice read first for a lower bound of its k-th best (topk_queue_kernel.cuh), at most this
// many. Model (random rows): the slice's acceptances go from ~k·(1 + ln(slice / k)) to ~1.2·k
// for the prefix + k·ln(slice / prefix) after it: k 128 at N 4096 ~570 → ~150 (18 → 5 merges
// of 32), k 256 at N 131072 ~1850 → ~1060. Not yet measured (issue 19; quack-bench topk
// --config all prints both).
inline constexpr int kTopkPrefixIters = 8;

inline constexpr int kTopkBitonicMaxN = 4096;
inline constexpr int kTopkBitonicMaxK = 32;
inline constexpr int kTopkBitonicThreads = 128;  // threads per CTA: 128 / T rows

// The plan's bitonic class: 16-bit x with 16-byte loads in the kernel's range, and k ≤ 16 or
// N ≤ 2048 (N in (2048, 4096) with k in (16, 32] keeps the queue kernel). Source: H200,
// bf16, M = 65536, kernel-only (quack-bench topk --config all, TB/s of x read), the plan's
// bitonic entry against the best queue entry:
//            k = 8          k = 16         k = 32
//   N 1024   1.383 / 0.820  0.940 / 0.668  0.585 / 0.496
//   N 2048   1.418 / 0.947  0.938 / 0.703  0.579 / 0.560
//   N 4096   1.212 / 0.955  0.854 / 0.806  0.604 / 0.639
inline constexpr int kTopkBitonicPlanMaxK = 16;
inline constexpr int kTopkBitonicPlanMaxN = 2048;

// Power-of-2 rows (topk_bitonic_fits) run the `fit` instance, and the bitonic kernel also
// where the class above leaves N = 4096 with k in (16, 32] to the queue. From N =
// kTopkBitonicFitMinN on, E = 128 (T = N / 128); below, the plan's own E and T (then T·E = N).
// Source: H200, bf16, M = 65536, kernel-only (quack-bench topk --config all, run T at 3a19ebc),
// TB/s of x read:
//                 fit e128   fit e64   generic (16 × 64, 32 × 64, 32 × 128)   best queue
//   N 1024 k 8    1.901      1.640     1.381                                  0.819
//   N 2048 k 8    1.977      1.657     1.424                                  0.945
//   N 4096 k 8    2.018      -         1.210                                  0.951
//   N 4096 k 32   0.771      -         0.604                                  0.638
inline constexpr int kTopkBitonicFitMinN = 1024;
inline constexpr int kTopkBitonicFitElems = 128;

enum class TopkPath : int { kNone = 0, kQueue = 1, kSort = 2, kBitonic = 3 };

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
  // kQueue: iterations of the prefix bound (0: none; the kernel clips it to the slice).
  int prefix_iters = 0;
};

/// Whether the bitonic kernel takes the problem (16-bit x, vector loads, N and k in range).
bool topk_bitonic_ok(const TopkProblem& pr);

/// Whether the bitonic kernel takes the problem with N = T·E: topk_bitonic_ok(pr) and N a
/// power of 2, N ≥ 16.
bool topk_bitonic_fits(const TopkProblem& pr);

/// Whether the plan picks the bitonic kernel unforced: topk_bitonic_ok(pr) and at least one
/// of k ≤ kTopkBitonicPlanMaxK, N ≤ kTopkBitonicPlanMaxN, topk_bitonic_fits(pr) (the
/// measured classes above).
bool topk_bitonic_planned(const TopkProblem& pr);

/// The plan for problem `pr` (M = 0 or k = 0: kNone): kBitonic where topk_bitonic_planned, else
/// kQueue for k ≤ kTopkQueueMaxK, else kSort. forced_warps > 0 (a power of 2 ≤
/// kTopkMaxWarpsPerRow) sets the queue kernel's warps per row instead of the heuristic and
/// implies the queue kernel (tests, benchmarks). forced_path kQueue / kBitonic picks that
/// kernel where it applies (topk_bitonic_ok; k ≤ kTopkQueueMaxK for kQueue), else the plan's
/// own; forced_elems > 0 (16, 32, 64 or 128) sets the bitonic kernel's elements per thread
/// where T·E ≥ N and E ≥ K. forced_fit with forced_path kBitonic sets plan.fit where the
/// bitonic plan has T·E = N exactly (else the plan is the one without forced_fit). Unforced
/// (forced_elems ≤ 0), power-of-2 rows plan fit (kTopkBitonicFitElems from
/// kTopkBitonicFitMinN). The queue plan's prefix bound: kTopkPrefixIters for k > 16·kTopkUnroll
/// on the vector path, else 0; forced_prefix ≥ 0 sets it instead (vector path only; tests and
/// benchmarks: 0 is the kernel without it, any k takes a forced one).
TopkPlan plan_topk(const TopkProblem& pr, int forced_warps = 0,
                   TopkPath forced_path = TopkPath::kNone, int forced_elems = 0,
                   bool forced_fit = false, int forced_prefix = -1);

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
  int threads_per_row = 0;  // kBitonic: T
  int prefix_iters = 0;     // kQueue: the prefix bound's iterations (TopkPlan::prefix_iters)
};

/// Readable plan name for benchmarks: "queue-q1-p32-vec-w1r4", "queue-q128-p32-vec-w1r4-pre8"
/// (a prefix bound of 8 iterations), "sort".
const char* topk_plan_name(const TopkPlan& plan, char* buf, size_t len);

}  // namespace quack::detail
