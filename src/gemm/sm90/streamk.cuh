// Stream-K reduction of the Hopper GEMM (device code): a piece of a split tile that does not hold
// the tile's k-block 0 stores its fp32 accumulators to its slot of the workspace and releases its
// flag; the tile's finisher waits for the flags of the units after it, adds their partials in
// unit order and runs the epilogue. The schedule (which cluster runs which piece, who finishes,
// why nothing deadlocks): src/gemm/streamk.h and kernel.cuh.
//
// Workspace (GemmArgs::streamk_workspace): flags (one uint32 per CTA of a unit: unit ·
//   kClusterSize + CTA rank; 0 = empty, 1 = partial stored), then the partial slots, BM·BN fp32
//   per CTA of a unit, each thread's accumulators in fragment order as float4 (slot, j, thread):
//   one 16-byte store per thread and 4 values, consecutive threads at consecutive addresses.
//   Flags are self-cleaning: each one set in a launch (by the one partial of its unit) is reset by
//   the finisher that consumed it, so a workspace zeroed once stays valid across launches on
//   one stream (launches that may overlap need their own).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include <cstdint>

#include "gemm/streamk.h"

namespace quack::detail::sm90 {

/// Kernel parameters of stream-K (KernelParams::sk); sched.active() false: data-parallel.
struct StreamKParams {
  StreamKSchedule sched;
  uint32_t* flags = nullptr;
  float4* partials = nullptr;
};

CUTE_DEVICE uint32_t ld_acquire_gpu(uint32_t const* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

CUTE_DEVICE void st_release_gpu(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/// Stream-K of tile configuration Tile, for the threads of one epilogue group (cooperative: all
/// consumer threads); `sync` is the group's named barrier.
template <class Tile>
struct StreamKReducer {
  static constexpr int kThreads = Tile::kEpiThreads;

  /// A partial piece of unit `unit`: stores acc ((MMA,MMA_M,MMA_N) fp32) to the slot of (unit,
  /// cta_rank), then one thread releases the slot's flag once every thread's stores are done.
  template <class Acc, class Sync>
  CUTE_DEVICE static void store(StreamKParams const& sk, Acc const& acc, int64_t unit, uint32_t cta_rank, int etid,
                                Sync const& sync) {
    constexpr int kN = decltype(size(acc))::value;  // fp32 accumulators per thread
    static_assert(kN % 4 == 0, "accumulators in float4s");
    int64_t const slot = unit * Tile::kClusterSize + cta_rank;
    float4* const dst = sk.partials + slot * (kN / 4) * kThreads + etid;
    CUTE_UNROLL
    for (int j = 0; j < kN / 4; ++j)
      __stcg(dst + j * kThreads, make_float4(acc(4 * j), acc(4 * j + 1), acc(4 * j + 2), acc(4 * j + 3)));
    __threadfence();  // this thread's stores before the flag (gpu scope) ...
    sync();           // ... and every thread's before the release below
    if (etid == 0) st_release_gpu(sk.flags + slot, 1u);
  }

  /// The finisher of a split tile (unit `unit`): waits for the partials of units unit + 1 ..
  /// last (the tile's other pieces), adds them to acc in that order and resets their flags.
  template <class Acc, class Sync>
  CUTE_DEVICE static void reduce(StreamKParams const& sk, Acc& acc, int64_t unit, int64_t last, uint32_t cta_rank,
                                 int etid, Sync const& sync) {
    constexpr int kN = decltype(size(acc))::value;
    if (etid == 0) {
      for (int64_t u = unit + 1; u <= last; ++u) {
        uint32_t* const flag = sk.flags + u * Tile::kClusterSize + cta_rank;
        // Bounded: unit u's partial is the first piece of its range and waits on no other
        // cluster (kernel.cuh), and every cluster of the persistent grid is resident.
        while (ld_acquire_gpu(flag) == 0u) __nanosleep(64);
        *flag = 0u;  // consumed: empty for the next launch (kernel boundary orders it)
      }
    }
    sync();  // thread 0's acquires before every thread's loads
#pragma unroll 1
    for (int64_t u = unit + 1; u <= last; ++u) {
      float4 const* const src = sk.partials + (u * Tile::kClusterSize + cta_rank) * (kN / 4) * kThreads + etid;
      CUTE_UNROLL
      for (int j = 0; j < kN / 4; ++j) {
        float4 const v = __ldcg(src + j * kThreads);
        acc(4 * j) += v.x;
        acc(4 * j + 1) += v.y;
        acc(4 * j + 2) += v.z;
        acc(4 * j + 3) += v.w;
      }
    }
  }
};

}  // namespace quack::detail::sm90
