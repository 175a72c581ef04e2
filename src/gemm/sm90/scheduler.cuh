// Persistent tile scheduling of the GEMM kernel (device code): the tile order (TileScheduler,
// src/gemm/tile_scheduler.h: work index -> cluster tile, grouped rasterisation) and the work
// queue, which work index each role of each CTA takes next. CTA rank r of a cluster takes m tile
// 2·m + r (2x1 cluster) or n tile 2·n + r (1x2); the producer walks the whole sequence,
// cooperative consumers too, pingpong consumer i the sequence numbers of parity i.
//
// Static (counter == nullptr): sequence number seq of cluster c is work c + seq · clusters, the
//   same in every thread; nothing is shared.
// Dynamic (counter != nullptr, GemmArgs::tile_counter): QuACK 0.2.0's tile_count_semaphore /
//   CUTLASS's dynamic persistent scheduler. The first work of cluster c is c; every further one
//   is clusters + atomicInc(counter, num_work − 1). atomicInc wraps at num_work, and a launch
//   makes exactly num_work fetches (one per work index beyond the first wave, plus one failing
//   fetch per cluster), so the counter ends where it started — 0 — with no host round trip
//   and no reset kernel (it must not be shared by launches that may overlap: one per stream).
//   The producer thread of CTA rank 0 fetches and publishes each index to every CTA of its
//   cluster through a ring of kStages shared-memory slots: st.async of the 4-byte index with
//   complete_tx on the slot's "full" mbarrier of each CTA (each CTA's producer thread arms its
//   own with arrive_and_expect_tx(4)); readers — the producer thread and the consumer warps of
//   every CTA (one arrival per warp) — release the slot on CTA 0's "empty" mbarrier. An index
//   ≥ num_work means stop. Pingpong consumers read every other sequence number, so after the
//   first stop the producers also publish a stop for the next one (the other warpgroup's).
#pragma once

#include <cute/arch/cluster_sm90.hpp>
#include <cutlass/arch/barrier.h>

#include <cstdint>

#include "gemm/tile_scheduler.h"

namespace quack::detail::sm90 {

template <int S>
struct WorkRing {  // shared memory, per CTA
  static constexpr int kStages = S;
  uint32_t idx[S];
  alignas(8) uint64_t full[S];   // arrival count 1 (the CTA's producer) + 4 tx bytes (the index)
  alignas(8) uint64_t empty[S];  // on CTA 0: one arrival per reader of the cluster
};

template <int S>
struct WorkQueue {
  WorkRing<S>* ring;
  uint32_t* counter;  // null: static schedule
  int64_t num_work, cluster_id, clusters;
  uint32_t cta_rank;
  int cluster_size;

  static constexpr uint32_t kStop = 0xffffffffu;

  /// One thread of the CTA initialises the barriers (before fence_barrier_init and the cluster
  /// sync). readers_per_cta: arrivals per sequence number and CTA (producer + consumer warps).
  CUTE_DEVICE void init(bool leader, int readers_per_cta) const {
    if (!leader) return;
    for (int s = 0; s < S; ++s) {
      cutlass::arch::ClusterBarrier::init(&ring->full[s], 1);
      cutlass::arch::ClusterBarrier::init(&ring->empty[s], uint32_t(readers_per_cta * cluster_size));
    }
  }

  /// The producer thread of each CTA (one per CTA): the work index of sequence number seq.
  CUTE_DEVICE int64_t producer_next(uint32_t seq) const {
    if (counter == nullptr) return cluster_id + int64_t(seq) * clusters;
    publish(seq, /*fetch=*/true);
    uint32_t const w = read(seq);
    cutlass::arch::ClusterBarrier::arrive(&ring->empty[seq % S], 0u, 1u);
    return w;
  }

  /// Pingpong: after the producer read a stop at stop_seq, the other consumer warpgroup still
  /// waits for stop_seq + 1: publish a stop there too (no reader releases it).
  CUTE_DEVICE void producer_stop_next(uint32_t stop_seq) const {
    if (counter != nullptr) publish(stop_seq + 1, /*fetch=*/false);
  }

  /// A consumer warp (every lane calls it; lane 0 releases the slot for the warp).
  CUTE_DEVICE int64_t consumer_get(uint32_t seq) const {
    if (counter == nullptr) return cluster_id + int64_t(seq) * clusters;
    uint32_t const w = read(seq);
    __syncwarp();  // every lane has read the slot before it is released
    cutlass::arch::ClusterBarrier::arrive(&ring->empty[seq % S], 0u, uint32_t(cute::elect_one_sync()));
    return w;
  }

 private:
  CUTE_DEVICE void publish(uint32_t seq, bool fetch) const {
    int const s = int(seq % S);
    uint32_t const parity = (seq / S) & 1u;
    cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&ring->full[s], 4u);
    if (cta_rank != 0) return;
    cutlass::arch::ClusterBarrier::wait(&ring->empty[s], parity ^ 1u);  // seq − S released
    uint32_t w = kStop;
    if (fetch) w = seq == 0 ? uint32_t(cluster_id) : uint32_t(clusters) + atomicInc(counter, uint32_t(num_work - 1));
    uint32_t const slot = cute::cast_smem_ptr_to_uint(&ring->idx[s]);
    uint32_t const bar = cute::cast_smem_ptr_to_uint(&ring->full[s]);
    for (int r = 0; r < cluster_size; ++r) cute::store_shared_remote(w, slot, bar, uint32_t(r));
  }

  CUTE_DEVICE uint32_t read(uint32_t seq) const {
    int const s = int(seq % S);
    cutlass::arch::ClusterBarrier::wait(&ring->full[s], (seq / S) & 1u);
    return *reinterpret_cast<volatile uint32_t const*>(&ring->idx[s]);
  }
};

}  // namespace quack::detail::sm90
