// Row reductions: thread -> warp (shuffles) -> block (shared memory) -> cluster (distributed
// shared memory). Written once; every row kernel reduces through row_allreduce.
//
// Scheme (QuACK's, with a plain cluster barrier in place of its mbarrier/st.async handshake):
//  1. each thread folds its own values (the caller does this);
//  2. butterfly shuffles over the min(tpr, 32) lanes of a row;
//  3. if a row spans several warps or CTAs: lane 0 of each warp writes its partial into slot
//     [rank·warps_per_row + warp_in_row] of the row's slot array in every CTA of the cluster
//     (a remote DSMEM store when cluster_n > 1), then one barrier (CTA or cluster);
//  4. every warp of the row re-reduces all slots in the same fixed order, so all threads of
//     all CTAs of the cluster get bit-identical results.
// Slots are double-buffered by `stage`: a kernel that reduces more than once alternates
// stages, and the barrier of reduction k+1 proves every reader of reduction k has finished,
// so one barrier per reduction suffices and no trailing barrier is needed before exit.
//
// StaticRowReduce is the same scheme (steps 2-4, no cluster) for kernels whose geometry is
// compile time (threads per row, rows per CTA): no divisions, no runtime branches.
#pragma once

#include <cooperative_groups.h>

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

/// Where this thread sits in the row geometry. Built once per kernel.
struct RowCtx {
  int tid, lane, warp;
  int row_in_cta;   // which row of the CTA's rows_per_cta
  int lane_in_row;  // 0..tpr-1
  int rank;         // CTA rank inside the cluster (0 when cluster_n == 1)
  int64_t row_block;

  __device__ explicit RowCtx(const RowGeometry& g) {
    tid = threadIdx.x;
    lane = tid & 31;
    warp = tid >> 5;
    row_in_cta = tid / g.tpr;
    lane_in_row = tid % g.tpr;
    rank = g.cluster_n > 1 ? static_cast<int>(blockIdx.x % g.cluster_n) : 0;
    row_block = blockIdx.x / g.cluster_n;
  }
  /// Index of this thread's v-th vector within the row (in vectors; 32-bit: vector-path rows
  /// are at most a few hundred thousand elements).
  __device__ int vec_index(const RowGeometry& g, int v) const {
    return (rank * g.vpt + v) * g.tpr + lane_in_row;
  }
};

/// All-reduce `v` over one row. `slots` points at the kernel's reduction buffer of
/// 2 · g.reduce_slots() floats; `stage` (0/1) picks the half. Every thread of the CTA (and of
/// the cluster) must call this the same number of times: it contains barriers.
template <typename Op>
__device__ __forceinline__ float row_allreduce(float v, const RowGeometry& g, const RowCtx& c,
                                               float* slots, int stage, Op op) {
  v = warp_allreduce(v, g.tpr, op);
  if (g.tpr <= 32 && g.cluster_n == 1) return v;

  const int warps_per_row = g.tpr / 32;
  const int nslots = warps_per_row * g.cluster_n;
  float* row_slots = slots + stage * g.reduce_slots() + c.row_in_cta * nslots;
  const int my_slot = c.rank * warps_per_row + c.lane_in_row / 32;
  if (g.cluster_n == 1) {
    if (c.lane == 0) row_slots[my_slot] = v;
    __syncthreads();
  } else {
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    if (c.lane < g.cluster_n) *cluster.map_shared_rank(row_slots + my_slot, c.lane) = v;
    cluster.sync();  // release/acquire: remote stores are visible after this
  }
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

}  // namespace quack::detail
