// Row reductions of the row skeleton: the reduction kinds an op's traits pick (sum, max,
// online max + sum; several floats reduced together in one exchange), each thread's fold over
// its elements, and the all-reduce over a row: warp shuffles, then one slot per warp in shared
// memory, then (clusters) the CTAs' slots exchanged through distributed shared memory.
//
// The all-reduces are common/reduce.cuh's scheme (row_allreduce, StaticRowReduce,
// ClusterRowSum), generalised from one float summed to a value of K ≤ 4 floats combined by
// the kind's combine:
//  1. each thread folds its own elements (Kind::fold, called by the op's traits);
//  2. butterfly shuffles over the min(tpr, 32) lanes of a row;
//  3. rows wider than a warp: lane 0 of each warp writes its value into its slot
//     (row_slot_floats(K) floats), one __syncthreads; in a cluster, warp 0 copies the CTA's
//     slots into every other CTA by st.async completing on that CTA's mbarrier
//     (cluster_exchange, common/cluster.cuh), with no cluster barrier per row;
//  4. every warp of the row re-combines all slots in the same order.
// A kind's combine must be commutative bit for bit (the butterfly combines (a, b) in one lane
// and (b, a) in its partner): written with __fadd_rn / __fmul_rn where a compiler contraction
// into an FMA would break the symmetry. Then every thread of every CTA of the row holds the
// same bits, run to run (deterministic).
#pragma once

#include <cstdint>

#include "common/cluster.cuh"
#include "common/reduce.cuh"
#include "common/row_geometry.h"
#include "row/row_config.h"
#include "row/row_math.cuh"

namespace quack::detail {

/// K floats reduced together.
template <int K>
struct RedVal {
  float v[K];
};

// ---------------------------------------------------------------------- reduction kinds
//
// A kind: kFloats, Val, identity(), combine(a, b) (bitwise commutative) and a thread fold
// fold(view, value) over the elements of a view (the policy's; see op_traits.cuh), where
// value(e) picks the float to reduce from an element.

/// Σ value.
struct RedSum {
  static constexpr int kFloats = 1;
  using Val = RedVal<1>;
  __device__ __forceinline__ static Val identity() { return {{0.f}}; }
  __device__ __forceinline__ static Val combine(const Val& a, const Val& b) {
    return {{a.v[0] + b.v[0]}};
  }
  template <class View, class F>
  __device__ __forceinline__ static Val fold(const View& view, F value) {
    float s = 0.f;
    view.for_each([&](const auto& e) { s += value(e); });
    return {{s}};
  }
};

/// max value (NaN is ignored by fmaxf; ops that must propagate NaN sum it elsewhere).
struct RedMax {
  static constexpr int kFloats = 1;
  using Val = RedVal<1>;
  __device__ __forceinline__ static Val identity() { return {{kNegInf}}; }
  __device__ __forceinline__ static Val combine(const Val& a, const Val& b) {
    return {{fmaxf(a.v[0], b.v[0])}};
  }
  template <class View, class F>
  __device__ __forceinline__ static Val fold(const View& view, F value) {
    float m = kNegInf;
    view.for_each([&](const auto& e) { m = fmaxf(m, value(e)); });
    return {{m}};
  }
};

/// Online softmax statistics (m, s) = (max x, Σ e^(x − m)) in one pass and one exchange
/// (Milakov & Gimelshein 2018; QuACK's online softmax):
///   (m1, s1) ⊕ (m2, s2) = (m, s1·e^(m1 − m) + s2·e^(m2 − m)),  m = max(m1, m2).
/// −inf: where m = −inf (both sides all −inf, or empty) the exponents are taken against 0, so
/// −inf − (−inf) never appears and s stays 0; a row of all −inf ends with (−inf, 0), which the
/// ops turn into NaN as PyTorch does (e^(x − m) = e^NaN). A NaN element makes s NaN.
struct OnlineMaxSum {
  static constexpr int kFloats = 2;
  using Val = RedVal<2>;  // v[0] = m, v[1] = s
  __device__ __forceinline__ static Val identity() { return {{kNegInf, 0.f}}; }
  __device__ __forceinline__ static Val combine(const Val& a, const Val& b) {
    const float m = fmaxf(a.v[0], b.v[0]);
    const float mr = m == kNegInf ? 0.f : m;
    return {{m, __fadd_rn(__fmul_rn(a.v[1], exp_diff(a.v[0], mr)),
                          __fmul_rn(b.v[1], exp_diff(b.v[0], mr)))}};
  }
  /// On-chip views (registers, shared memory) are swept twice: the thread's max, then the sum
  /// of e^(x − max) (one exponential per element). Views over global memory are swept once,
  /// online per element (a rescale only when the max grows).
  template <class View, class F>
  __device__ __forceinline__ static Val fold(const View& view, F value) {
    if constexpr (View::kOnChip) {
      float m = kNegInf;
      view.for_each([&](const auto& e) { m = fmaxf(m, value(e)); });
      const float mr = m == kNegInf ? 0.f : m;
      float s = 0.f;
      view.for_each([&](const auto& e) { s += exp_diff(value(e), mr); });
      return {{m, s}};
    } else {
      float m = kNegInf, s = 0.f;
      view.for_each([&](const auto& e) {
        const float x = value(e);
        if (x > m) {
          s = s * exp_diff(m, x) + exp_diff(x, x);  // e^0 = 1; NaN for x = +inf, as on chip
          m = x;
        } else if (x != kNegInf) {
          s += exp_diff(x, m);
        }
      });
      return {{m, s}};
    }
  }
};

// ---------------------------------------------------------------------- all-reduces

template <class R>
__device__ __forceinline__ typename R::Val warp_allreduce_red(typename R::Val v, int width) {
#pragma unroll
  for (int off = 16; off >= 1; off >>= 1) {
    if (off < width) {
      typename R::Val o;
#pragma unroll
      for (int i = 0; i < R::kFloats; ++i) o.v[i] = __shfl_xor_sync(0xffffffffu, v.v[i], off);
      v = R::combine(v, o);
    }
  }
  return v;
}

template <class R>
__device__ __forceinline__ void store_slot(float* slot, const typename R::Val& v) {
#pragma unroll
  for (int i = 0; i < R::kFloats; ++i) slot[i] = v.v[i];
}
template <class R>
__device__ __forceinline__ typename R::Val load_slot(const float* slot) {
  typename R::Val v;
#pragma unroll
  for (int i = 0; i < R::kFloats; ++i) v.v[i] = slot[i];
  return v;
}

/// All-reduce over rows of kTpr consecutive threads, kRows rows per CTA, geometry fixed at
/// compile time (StaticRowReduce's scheme; no clusters). The slots (kSlotFloats floats of
/// static shared memory) serve one call.
template <int kTpr, int kRows, class R>
struct StaticRowReducer {
  static_assert(kTpr >= 1 && (kTpr & (kTpr - 1)) == 0 && kTpr <= 1024,
                "kTpr: power of two ≤ 1024");
  static_assert(kTpr * kRows % 32 == 0, "whole warps: the shuffles use the full mask");
  static constexpr int kWarpsPerRow = kTpr > 32 ? kTpr / 32 : 1;
  static constexpr int kSlot = row_slot_floats(R::kFloats);
  static constexpr int kSlotFloats = kTpr > 32 ? kRows * kWarpsPerRow * kSlot : 1;
  using Val = typename R::Val;

  __device__ __forceinline__ static Val allreduce(Val v, float* slots) {
    v = warp_allreduce_red<R>(v, kTpr < 32 ? kTpr : 32);
    if constexpr (kTpr <= 32) {
      return v;
    } else {
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
      if (lane == 0) store_slot<R>(slots + warp * kSlot, v);
      __syncthreads();
      // Lane i < kWarpsPerRow of every warp of the row reads partial i; the butterfly over
      // those lanes runs the same operations in every warp; lane 0's result is broadcast.
      const float* row_slots = slots + (warp / kWarpsPerRow) * kWarpsPerRow * kSlot;
      Val r = lane < kWarpsPerRow ? load_slot<R>(row_slots + lane * kSlot) : R::identity();
      r = warp_allreduce_red<R>(r, kWarpsPerRow);
#pragma unroll
      for (int i = 0; i < R::kFloats; ++i) r.v[i] = __shfl_sync(0xffffffffu, r.v[i], 0);
      return r;
    }
  }
};

/// All-reduce of a one-row-per-CTA kernel with compile-time warps (kWarps) whose rows span a
/// cluster of cluster_n ≤ kMaxCluster CTAs (runtime; 1: no cluster): ClusterRowSum's scheme,
/// warp w of CTA `rank` in slot rank·kWarps + w. Shared memory: kBytes at `smem` (16-byte
/// aligned): two stages of slots (call k uses stage k & 1), then cluster_exchange's two
/// mbarriers. Between two calls the kernel must pass a __syncthreads (the ring kernel's end of
/// row) so a stage is rewritten only after every warp read it.
template <int kWarps, int kMaxCluster, class R>
struct ClusterRowReducer {
  static constexpr int kSlot = row_slot_floats(R::kFloats);
  static_assert(kWarps * kSlot >= 4 && (kWarps & (kWarps - 1)) == 0 && kWarps * kSlot <= 128,
                "cluster_exchange moves whole 16-byte chunks, at most 32 per CTA");
  static constexpr int kStageFloats = kWarps * kMaxCluster * kSlot;
  static constexpr size_t kBytes = 2 * kStageFloats * 4 + 16;
  static_assert(static_cast<int64_t>(kBytes) == row_ring_reduce_bytes(kWarps * 32, R::kFloats),
                "row_config.h's size");
  using Val = typename R::Val;
  float* slots;
  uint64_t* bars;

  __device__ explicit ClusterRowReducer(unsigned char* smem)
      : slots(reinterpret_cast<float*>(smem)),
        bars(reinterpret_cast<uint64_t*>(smem + 2 * kStageFloats * 4)) {}

  /// Thread 0, before the kernel's cluster arrive.
  __device__ void init() const { init_exchange_barriers(bars, 2); }

  /// Call k (0, 1, ...): every thread of every CTA of the cluster calls.
  __device__ Val allreduce(Val v, int k, int cluster_n, int rank) const {
    v = warp_allreduce_red<R>(v, 32);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float* s = slots + (k & 1) * kStageFloats;
    if (lane == 0) store_slot<R>(s + (rank * kWarps + warp) * kSlot, v);
    __syncthreads();
    if (cluster_n > 1)
      cluster_exchange(s + rank * kWarps * kSlot, kWarps * kSlot, kWarps * kSlot, 1, cluster_n,
                       rank, bars + (k & 1), k);
    Val r = R::identity();
    for (int i = lane; i < kWarps * cluster_n; i += 32)
      r = R::combine(r, load_slot<R>(s + i * kSlot));
    return warp_allreduce_red<R>(r, 32);
  }
};

/// The runtime-geometry all-reduce (row_allreduce's scheme; the general policy). `slots`:
/// row_general_smem_bytes(g, R::kFloats) of shared memory; k: the call's index (stage k & 1).
/// Clusters: row_allreduce_red_start at kernel start, and its cluster barrier waited on
/// (cluster_wait) before the first call.
template <class R>
__device__ __forceinline__ uint64_t* row_reduce_red_bars(const RowGeometry& g, float* slots) {
  return reinterpret_cast<uint64_t*>(slots + 2 * g.reduce_slots() * row_slot_floats(R::kFloats));
}

template <class R>
__device__ __forceinline__ void row_allreduce_red_start(const RowGeometry& g, const RowCtx& c,
                                                        float* slots) {
  if (g.cluster_n == 1) return;
  if (c.tid == 0) init_exchange_barriers(row_reduce_red_bars<R>(g, slots), 2);
  cluster_arrive_relaxed();
}

template <class R>
__device__ __forceinline__ typename R::Val row_allreduce_red(typename R::Val v,
                                                             const RowGeometry& g,
                                                             const RowCtx& c, float* slots,
                                                             int k) {
  constexpr int kSlot = row_slot_floats(R::kFloats);
  v = warp_allreduce_red<R>(v, g.tpr);
  if (g.tpr <= 32 && g.cluster_n == 1) return v;
  // Here tpr ≥ 32: rows narrower than a warp never span a cluster (row_general_geometry).
  const int stage = k & 1;
  const int warps_per_row = g.tpr / 32;
  const int nslots = warps_per_row * g.cluster_n;
  float* stage_slots = slots + stage * g.reduce_slots() * kSlot;
  float* row_slots = stage_slots + c.row_in_cta * nslots * kSlot;
  const int my_slot = c.rank * warps_per_row + c.lane_in_row / 32;
  if (c.lane == 0) store_slot<R>(row_slots + my_slot * kSlot, v);
  __syncthreads();
  if (g.cluster_n > 1)
    cluster_exchange(stage_slots + c.rank * warps_per_row * kSlot, nslots * kSlot,
                     warps_per_row * kSlot, g.rows_per_cta(), g.cluster_n, c.rank,
                     row_reduce_red_bars<R>(g, slots) + stage, k);
  typename R::Val r = R::identity();
  for (int i = c.lane; i < nslots; i += 32) r = R::combine(r, load_slot<R>(row_slots + i * kSlot));
  return warp_allreduce_red<R>(r, 32);
}

}  // namespace quack::detail
