// Hopper GEMM kernel: TMA + WGMMA, warp-specialised, persistent (device code; CuTe atoms). It
// composes the mainloop (mainloop.cuh), the epilogue (epilogue.cuh, its visitor in
// epilogue_ops.cuh) and the tile scheduler (scheduler.cuh) for one tile configuration
// (tile_config.cuh), as CUTLASS's sm90_gemm_tma_warpspecialized_{cooperative,pingpong}.hpp do,
// without the CollectiveBuilder.
//
//   D = epilogue(A · B, C), fp32 accumulation; A (M,K,L) and B (N,K,L) each K-major (stride 1
//   along K) or MN-major (stride 1 along M, resp. N): Tile's MajorA / MajorB; C and the outputs
//   (M,N,L) N-major (row-major; the host maps a column-major D onto this by swapping A and B).
//   Design (b) of docs/gemm-spike.md.
//
// Threads → work: 384 threads = 3 warpgroups (256 = 2 with BM = 64). WG0 is the producer: one
//   elected thread of warp 0 runs the mainloop's loads, and the warpgroup keeps 40 registers
//   (setmaxnreg); with an I/O warp epilogue (EpiIoWarp: gemm_dgated's a3d2io) warps 1 and 2
//   issue the C loads and output stores of pingpong group 0 and 1. WG1 and WG2 are the
//   consumers (232 registers each), in one of two modes (Tile::kPingpong):
//   - cooperative: they split the BM x BN tile along M (BM / 2 rows each: one 64xBNx16 WGMMA atom
//     per warpgroup and k-step, twice along M for BM = 256) and run its epilogue together (256
//     threads); a BM = 64 tile has one consumer warpgroup (256 threads in all, no register
//     rebalancing);
//   - pingpong: each owns whole tiles (the atom twice along M), alternating; an ordered barrier
//     gives the tensor cores to one warpgroup's mainloop at a time, so one warpgroup's epilogue
//     runs under the other's MMAs; each has its own epilogue buffers (128 threads).
// Tile order: persistent; cluster c walks work indices c, c + clusters, ... of TileScheduler
//   (grouped rasterisation), or with a tile counter takes them from an atomic counter, published
//   by CTA 0's producer (scheduler.cuh). The producer walks the whole sequence; cooperative
//   consumers too, pingpong consumer i the indices of parity i (and skips the other's stages).
// Stream-K (cooperative tiles, p.sk.sched.active(); src/gemm/streamk.h): cluster c walks its
//   pieces (tile, k-blocks [k_begin, k_end)): its share of the split tiles, then its whole
//   data-parallel tiles. A piece without the tile's k-block 0 stores its accumulators to the
//   workspace and releases a flag (no epilogue, no C); the piece with k-block 0 (the finisher)
//   adds the other pieces' partials, in unit order, and runs the epilogue (streamk.cuh).
//   No deadlock: a partial piece is the first piece of its cluster and waits on no other cluster
//   (only on its own pipeline, fed by its own producer), so it completes once its cluster is
//   resident; a finisher waits only on units after its own; the grid is persistent (at most as
//   many clusters as fit at once: all resident), so every awaited partial is produced. Units
//   run on clusters in reverse order (unit_of_cluster), so a finisher only waits on clusters of
//   lower index: were fewer clusters resident than launched (a GPU shared with other work),
//   blocks dispatched in index order would still make progress.
// Shared memory: the mainloop's A and B rings, the epilogue's buffers, then the barriers (the
//   pipeline's, the work ring, the epilogue's C mbarriers). All
//   dynamic; ≤ 227 KB. The mainloop takes as many stages as fit beside the epilogue (GemmKernel).
#pragma once

#include <cute/tensor.hpp>
#include <cute/arch/cluster_sm90.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "gemm/sm90/epilogue.cuh"
#include "gemm/sm90/mainloop.cuh"
#include "gemm/sm90/scheduler.cuh"
#include "gemm/sm90/streamk.cuh"
#include "gemm/sm90/tile_config.cuh"

namespace quack::detail::sm90 {

using namespace cute;

/// Kernel parameters (__grid_constant__): the collectives' parameters, problem size, schedule.
template <class MainloopP, class EpilogueP>
struct KernelParams {
  MainloopP mainloop;
  EpilogueP epilogue;
  int M, N, K, L;
  TileScheduler sched;
  uint32_t* tile_counter;  // dynamic scheduler (scheduler.cuh) when non-null
  // sched.tiles(), formed on the host: a parameter the kernel reads where it is needed, not a
  // product held (or spilled) across the producer's and the consumers' loops.
  int64_t num_work;
  StreamKParams sk;  // stream-K (cooperative tiles) when sk.sched.active(); tile_counter null then
};

/// The kernel of tile configuration Tile with epilogue Epilogue (a CollectiveEpilogue of Tile).
template <class Tile_, class Epilogue_>
struct GemmKernel {
  using Tile = Tile_;
  using Epilogue = Epilogue_;
  // Mainloop stages: as many (BM + BN) x BK stages as fit beside the epilogue buffers, at most
  // Tile::kMaxMainloopStages (128x256 and 256x128: 4 for a 16-bit D, 3 for an fp32 D; pingpong
  // 128x128 and 128x192: 5; 256x192: 3; 64x128: 8).
  static constexpr int Stages = Tile::mainloop_stages(Epilogue::kSmemBytes);
  using Mainloop = CollectiveMainloop<Tile, Stages>;
  using Pipeline = typename Mainloop::Pipeline;

  struct SharedStorage {
    typename Mainloop::TensorStorage mainloop;  // A, B
    typename Epilogue::TensorStorage epilogue;  // D, C, D1
    typename Pipeline::SharedStorage pipe;
    typename Tile::WorkRingT work;
    typename Epilogue::BarrierStorage epi;
  };
  static_assert(sizeof(SharedStorage) <= Tile::kMaxSmem, "shared memory budget");
};

template <class Kernel, class P>
__global__ void __launch_bounds__(Kernel::Tile::kThreads, 1) gemm_kernel(__grid_constant__ P const p) {
  using Tile = typename Kernel::Tile;
  using Mainloop = typename Kernel::Mainloop;
  using Epilogue = typename Kernel::Epilogue;
  using Pipeline = typename Kernel::Pipeline;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& ss = *reinterpret_cast<typename Kernel::SharedStorage*>(smem_raw);
  int const warp_group = cutlass::canonical_warp_group_idx();
  int const warp_idx = cutlass::canonical_warp_idx_sync();
  int const lane_pred = cute::elect_one_sync();
  uint32_t const cta_rank = cute::block_rank_in_cluster();  // 0/1 along M (2x1) or N (1x2)
  // This CTA's offset inside its cluster tile, along M and along N.
  int const rank_m = Tile::kClusterM > 1 ? int(cta_rank) : 0, rank_n = Tile::kClusterN > 1 ? int(cta_rank) : 0;

  if (warp_idx == 0 && lane_pred) {
    Mainloop::prefetch_descriptors(p.mainloop);
    Epilogue::prefetch_descriptors(p.epilogue);
  }
  Pipeline pipeline = Mainloop::make_pipeline(ss.pipe, warp_group == 0);  // warp 0 initialises the barriers
  Epilogue::init_barriers(ss.epi, warp_idx == 1 && lane_pred);
  int64_t const num_work = p.num_work;
  int64_t const cluster_id = blockIdx.x / Tile::kClusterSize;
  int64_t const cluster_stride = gridDim.x / Tile::kClusterSize;
  WorkQueue<Tile::WorkRingT::kStages> const queue{&ss.work, p.tile_counter, num_work, cluster_id, cluster_stride,
                                                  cta_rank, Tile::kClusterSize};
  int work_readers = Tile::kWorkReaders;
  if constexpr (Epilogue::kIo)  // each group's I/O warp reads its tiles too (EpiIoWarp)
    if (Epilogue::io_on(p.epilogue)) work_readers += 1;
  queue.init(warp_idx == 2 && lane_pred, work_readers);
  cutlass::arch::fence_barrier_init();
  cute::cluster_arrive_relaxed();  // the peer's barriers exist before any multicast or remote arrive
  cute::cluster_wait();

  int const k_tiles = (p.K + Tile::BK - 1) / Tile::BK;

  if (warp_group == 0) {
    // ---------------- producer ----------------
    if constexpr (Tile::kRegRebalance) cutlass::arch::warpgroup_reg_dealloc<Tile::kProducerRegs>();
    if (warp_idx == 0 && lane_pred) {
      auto write = cutlass::make_producer_start_state<Pipeline>();
      auto const load_in = Mainloop::load_init(p.mainloop, ss.mainloop, p.M, p.N, p.K, p.L, rank_m, rank_n);
      for (uint32_t seq = 0;; ++seq) {
        int64_t w;
        int k_begin = 0, k_count = k_tiles;
        if (Tile::kStreamK && p.sk.sched.active()) {
          StreamKPiece x;
          if (!p.sk.sched.piece(cluster_id, seq, x)) break;
          w = x.tile;
          k_begin = x.k_begin;
          k_count = x.k_end - x.k_begin;
        } else {
          w = queue.producer_next(seq);
          if (w >= num_work) {
            if constexpr (Tile::kPingpong) queue.producer_stop_next(seq);
            break;
          }
        }
        TileCoord const t = p.sched.tile(w);
        int const l = int(t.batch);
        int const m_blk = int(t.m) * Tile::kClusterM + rank_m, n_blk = int(t.n) * Tile::kClusterN + rank_n;
        Mainloop::load(p.mainloop, load_in, pipeline, write, m_blk, n_blk, l, k_begin, k_count);
      }
      pipeline.producer_tail(write);  // stay until every stage this CTA filled (and multicast) is released
    }
    if constexpr (Epilogue::kIo) {
      // Warps 1 and 2, idle otherwise, are group 0's and group 1's I/O warps (EpiIoWarp): they
      // walk their group's tiles as its consumers do and issue its C loads and output stores.
      if ((warp_idx == 1 || warp_idx == 2) && Epilogue::io_on(p.epilogue)) {
        auto next_tile = [&](uint32_t seq, int& m_blk, int& n_blk, int& l) {
          int64_t const w = queue.consumer_get(seq);
          if (w >= num_work) return false;
          TileCoord const t = p.sched.tile(w);
          l = int(t.batch);
          m_blk = int(t.m) * Tile::kClusterM + rank_m;
          n_blk = int(t.n) * Tile::kClusterN + rank_n;
          return true;
        };
        Epilogue::io_loop(p.epilogue, ss.epilogue, ss.epi, warp_idx - 1, p.M, p.N, p.L, next_tile);
      }
    }
  } else {
    // ---------------- consumers (1 or 2 warpgroups: cooperative or pingpong) ----------------
    if constexpr (Tile::kRegRebalance) cutlass::arch::warpgroup_reg_alloc<Tile::kConsumerRegs>();
    int const mma_wg = warp_group - 1;                // 0 or 1
    int const grp = Tile::kPingpong ? mma_wg : 0;     // epilogue group: own smem, barriers, tiles
    int const etid = int(threadIdx.x) - 128 - grp * Tile::kEpiThreads;  // thread in the group
    typename Tile::TiledMma tiled_mma;
    auto const mma_in = Mainloop::mma_init(ss.mainloop, tiled_mma, etid);
    Tensor acc = partition_fragment_C(tiled_mma, select<0, 1>(typename Tile::TileShape{}));  // (MMA,MMA_M,MMA_N) fp32
    Epilogue epilogue(p.epilogue, ss.epilogue, ss.epi, grp, etid);

    // Pingpong: this warpgroup takes every other work index of the cluster's sequence. Every tile
    // of the sequence has k_tiles stages, so the tile at seq starts at stage seq · k_tiles of the
    // pipeline (pingpong: the other warpgroup's tiles included): the read state (index, phase)
    // is formed from seq at each tile, (seq · k_tiles) modulo 2·Stages, instead of being held
    // across the tile loop (the epilogue of the 128x192 pingpong tile has no register to spare).
    // Stream-K: a piece of k_count k-blocks starts at stage k_before (the k-blocks of the
    // cluster's pieces before it), a closed form of the schedule (StreamKPiece::k_before).
    constexpr uint32_t kS = Mainloop::Stages;
    uint32_t const k_mod = uint32_t(k_tiles) % (2 * kS);
    // Pingpong turns on named barriers (QuACK's scheme): warpgroup g waits on barrier
    // kMmaOrderBarrier + g, which completes when the other warpgroup (128 threads) has arrived
    // on it, after issuing its tile's mainloop. Warpgroup 0's first turn is its own arrival
    // here. A named barrier releases its waiters at once; an mbarrier's try_wait loop sleeps
    // (NANOSLEEP.SYNCS) between polls (run AA's ncu: the turn waits were 25 % of the stall
    // samples on that sleep, the tensor pipe 98.1 % active against QuACK's 99.6 %). The last
    // arrival (for a turn no tile takes) stays unmatched: the CTA exits with it, as QuACK's.
    constexpr uint32_t kOrder = Tile::kMmaOrderBarrier;
    if constexpr (Tile::kPingpong)
      if (mma_wg == 0) cutlass::arch::NamedBarrier::arrive(256, kOrder);
    bool const streamk = Tile::kStreamK && p.sk.sched.active();
    for (uint32_t seq = Tile::kPingpong ? uint32_t(mma_wg) : 0u;; seq += Tile::kEpiGroups) {
      int64_t w;
      StreamKPiece x;  // stream-K only
      if (streamk) {
        if (!p.sk.sched.piece(cluster_id, seq, x)) break;
        w = x.tile;
      } else {
        w = queue.consumer_get(seq);
        if (w >= num_work) break;
      }
      TileCoord const t = p.sched.tile(w);
      int const l = int(t.batch);
      int const m_blk = int(t.m) * Tile::kClusterM + rank_m, n_blk = int(t.n) * Tile::kClusterN + rank_n;
      // Whether this piece runs the tile's epilogue: it holds k-block 0 (always, data-parallel).
      bool const finishes = !streamk || x.k_begin == 0;

      // The epilogue's C ring (gemm_dgated's preact): the tile's first subtiles of C are loaded
      // now, under this tile's mainloop (and, pingpong, the other warpgroup's), not after it.
      if (finishes) epilogue.prefetch_c(p.epilogue, p.M, p.N, p.L, m_blk, n_blk, l);

      if constexpr (Tile::kPingpong)  // our turn on the tensor cores
        cutlass::arch::NamedBarrier::sync(256, kOrder + uint32_t(mma_wg));
      // seq · k_tiles modulo 2·Stages (stream-K: k_before modulo 2·Stages)
      uint32_t const first = streamk ? uint32_t(x.k_before % (2 * kS)) : (seq % (2 * kS)) * k_mod % (2 * kS);
      int const k_count = streamk ? x.k_end - x.k_begin : k_tiles;
      auto read = typename Mainloop::PipelineState(int(first % kS), first / kS, 0u);
      auto release = read;
      Mainloop::mma(tiled_mma, mma_in, pipeline, ss.pipe, read, release, acc, k_count);
      if constexpr (Tile::kPingpong)  // the other warpgroup may issue now
        cutlass::arch::NamedBarrier::arrive(256, kOrder + uint32_t(mma_wg ^ 1));
      Mainloop::mma_tail(pipeline, ss.pipe, release, acc, k_count);

      if constexpr (Tile::kStreamK) {
        if (streamk) {
          auto sync = [grp] { cutlass::arch::NamedBarrier::sync(Tile::kEpiThreads, 1 + grp); };  // the epilogue's
          using Reducer = StreamKReducer<Tile>;
          int64_t const unit = p.sk.sched.unit_of_cluster(cluster_id);
          if (!finishes) {  // a partial: to the workspace, no epilogue
            Reducer::store(p.sk, acc, unit, cta_rank, etid, sync);
            continue;
          }
          if (p.sk.sched.split(x)) Reducer::reduce(p.sk, acc, unit, p.sk.sched.last_unit(x), cta_rank, etid, sync);
        }
      }
      epilogue.store_tile(p.epilogue, acc, p.M, p.N, p.L, m_blk, n_blk, l);
    }
    epilogue.finish();
  }
  cute::cluster_arrive_relaxed();  // no CTA exits while its peer may still signal or multicast into it
  cute::cluster_wait();
}

}  // namespace quack::detail::sm90
