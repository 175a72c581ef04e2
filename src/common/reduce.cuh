// Row reductions: thread -> warp (shuffles) -> block (shared memory) -> cluster (distributed
// shared memory). Written once; every row kernel reduces through row_allreduce.
//
// Scheme (QuACK's):
//  1. each thread folds its own values (the caller does this);
//  2. butterfly shuffles over the min(tpr, 32) lanes of a row;
//  3. if a row spans several warps or CTAs: each warp writes its partial into slot
//     [rank·warps_per_row + warp_in_row] of the row's slot array, one CTA barrier; in a
//     cluster, warp 0 then copies the CTA's partials into every other CTA by st.async, which
//     completes on each CTA's mbarrier (cluster_exchange, cluster.cuh: no cluster barrier);
//  4. every warp of the row re-reduces all slots in the same fixed order, so all threads of
//     all CTAs of the cluster get bit-identical results.
// Slots are double-buffered by the call index k (stage k & 1): a CTA sends its partials of
// reduction k+1 only after the __syncthreads that all its warps reach after reading the slots
// of reduction k, and reduction k+1 completes only when every CTA's partials have arrived, so
// the writes of reduction k+2 into stage k & 1 never overtake a reader; one barrier (or exchange) per reduction suffices, and no trailing
// barrier is needed before exit (a CTA's slots receive nothing after its last wait).
//
// StaticRowReduce is the same scheme (steps 2-4, no cluster) for kernels whose geometry is
// compile time (threads per row, rows per CTA): no divisions, no runtime branches.
#pragma once

#include <cstdint>

#include "common/cluster.cuh"
#include "common/row_geometry.h"

namespace quack::detail {

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
  static constexpr float kIdentity = 0.f;
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
  static constexpr float kIdentity = -__builtin_huge_valf();
};

template <typename Op>
__device__ __forceinline__ float warp_allreduce(float v, int width, Op op) {
#pragma unroll
  for (int off = 16; off >= 1; off >>= 1)
    if (off < width) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

/// row_allreduce's two mbarriers (clusters only), after the two stages of slots: they take the
/// last 16 bytes of RowGeometry::reduce_slot_bytes().
__device__ __forceinline__ uint64_t* row_reduce_bars(const RowGeometry& g, float* slots) {
  return reinterpret_cast<uint64_t*>(slots + 2 * g.reduce_slots());
}

/// Every thread, once at kernel start: thread 0 sets up row_allreduce's mbarriers when the row
/// spans a cluster, then every thread arrives (relaxed) on the cluster barrier; the kernel waits
/// on it (cluster_wait) before its first row_allreduce, so peers' mbarriers exist by then.
__device__ __forceinline__ void row_allreduce_start(const RowGeometry& g, const RowCtx& c,
                                                    float* slots) {
  if (g.cluster_n == 1) return;
  if (c.tid == 0) init_exchange_barriers(row_reduce_bars(g, slots), 2);
  cluster_arrive_relaxed();
}

/// All-reduce `v` over one row. `slots` points at the kernel's reduction buffer of
/// g.reduce_slot_bytes(); k is the call's index in this kernel (0, 1, ...: stage k & 1 of the
/// slots). Every thread of the CTA (and of the cluster) must make the same calls: they contain
/// barriers. Clusters: row_allreduce_start first, and its cluster barrier waited on before the
/// first call.
template <typename Op>
__device__ __forceinline__ float row_allreduce(float v, const RowGeometry& g, const RowCtx& c,
                                               float* slots, int k, Op op) {
  v = warp_allreduce(v, g.tpr, op);
  if (g.tpr <= 32 && g.cluster_n == 1) return v;

  const int stage = k & 1;
  const int warps_per_row = g.tpr / 32;
  const int nslots = warps_per_row * g.cluster_n;
  float* row_slots = slots + stage * g.reduce_slots() + c.row_in_cta * nslots;
  const int my_slot = c.rank * warps_per_row + c.lane_in_row / 32;
  if (c.lane == 0) row_slots[my_slot] = v;
  __syncthreads();
  if (g.cluster_n > 1)
    cluster_exchange(slots + stage * g.reduce_slots() + c.rank * warps_per_row, nslots,
                     warps_per_row, g.rows_per_cta(), g.cluster_n, c.rank,
                     row_reduce_bars(g, slots) + stage, k);
  float r = Op::kIdentity;
  for (int i = c.lane; i < nslots; i += 32) r = op(r, row_slots[i]);
  return warp_allreduce(r, 32, op);
}

/// All-reduce over rows of kTpr consecutive threads (a power of two), kRows rows per CTA,
/// geometry fixed at compile time. Threads kTpr·r .. kTpr·(r+1)-1 of the CTA form row r.
/// Rows of ≤ 32 threads reduce by shuffles alone; wider rows also exchange one partial per warp
/// through `slots` (kSlots floats of shared memory) behind one __syncthreads, and every warp
/// then re-reduces the row's partials in the same order, so all threads of a row get
/// bit-identical results. The slots serve one call: a kernel that reduces again must barrier
/// before reusing them (or pass other slots).
template <int kTpr, int kRows>
struct StaticRowReduce {
  static_assert(kTpr >= 1 && (kTpr & (kTpr - 1)) == 0 && kTpr <= 1024, "kTpr: power of two ≤ 1024");
  static_assert(kTpr * kRows % 32 == 0, "whole warps: the shuffles use the full mask");
  static constexpr int kWarpsPerRow = kTpr > 32 ? kTpr / 32 : 1;
  static constexpr int kSlots = kTpr > 32 ? kRows * kWarpsPerRow : 1;

  template <typename Op>
  __device__ __forceinline__ static float allreduce(float v, float* slots, Op op) {
    v = warp_allreduce(v, kTpr < 32 ? kTpr : 32, op);
    if constexpr (kTpr <= 32) {
      return v;
    } else {
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
      if (lane == 0) slots[warp] = v;
      __syncthreads();
      // Lane i < kWarpsPerRow of every warp of the row reads partial i; the butterfly over
      // those lanes runs the same operations in every warp; lane 0's result is broadcast.
      const float* row_slots = slots + (warp / kWarpsPerRow) * kWarpsPerRow;
      const float r = warp_allreduce(lane < kWarpsPerRow ? row_slots[lane] : Op::kIdentity,
                                     kWarpsPerRow, op);
      return __shfl_sync(0xffffffffu, r, 0);
    }
  }
};

/// Row sum of a one-row-per-CTA kernel with compile-time warps (kWarps) whose rows span a
/// cluster of cluster_n ≤ kMaxCluster CTAs (runtime; 1: no cluster): the scheme above with
/// every warp's partial in slot [rank·kWarps + warp]. Shared memory: kBytes at `smem` (16-byte
/// aligned): 2 stages of slots, then the 2 mbarriers of cluster_exchange.
template <int kWarps, int kMaxCluster>
struct ClusterRowSum {
  static constexpr int kStageSlots = kWarps * kMaxCluster;
  static constexpr size_t kBytes = 2 * kStageSlots * 4 + 16;
  float* slots;
  uint64_t* bars;

  __device__ explicit ClusterRowSum(unsigned char* smem)
      : slots(reinterpret_cast<float*>(smem)),
        bars(reinterpret_cast<uint64_t*>(smem + 2 * kStageSlots * 4)) {}

  /// Thread 0, before the kernel's cluster arrive.
  __device__ void init() const { init_exchange_barriers(bars, 2); }

  /// Call k (0, 1, ...) of the kernel: every thread of every CTA of the cluster calls.
  __device__ float sum(float v, int k, int cluster_n, int rank) const {
    v = warp_allreduce(v, 32, SumOp{});
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float* s = slots + (k & 1) * kStageSlots;
    if (lane == 0) s[rank * kWarps + warp] = v;
    __syncthreads();
    if (cluster_n > 1)
      cluster_exchange(s + rank * kWarps, kWarps, kWarps, 1, cluster_n, rank, bars + (k & 1), k);
    float r = 0.f;
    for (int i = lane; i < kWarps * cluster_n; i += 32) r += s[i];
    return warp_allreduce(r, 32, SumOp{});
  }
};

}  // namespace quack::detail
