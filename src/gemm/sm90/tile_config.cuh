// Tile configuration of the Hopper GEMM (device and host; CuTe types): the CTA tile, the cluster,
// the consumer warpgroups and their roles, the tiled MMA and the epilogue subtile (EpiSubtile:
// another width of it). The mainloop (mainloop.cuh), the epilogue (epilogue.cuh) and
// the kernel (kernel.cuh) read their shapes and thread counts from here; what depends on the
// epilogue's outputs (the mainloop's stage count) is decided where the two meet (kernel.cuh,
// GemmKernel).
#pragma once

#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "gemm/sm90/scheduler.cuh"

namespace quack::detail::sm90 {

using namespace cute;

/// One tile configuration: BM x BN x 64, 1–2 consumer warpgroups, a ClusterM x ClusterN cluster.
/// Cooperative (Pingpong = false): both warpgroups split one BM x BN tile along M (BM = 128: 64
/// rows each, one 64xBNx16 WGMMA atom per warpgroup and k-step; BM = 256: 128 rows each, the atom
/// twice along M) and run its epilogue together; with BM = 64 one consumer warpgroup owns the
/// 64 x BN tile (small M: with a 2x1 cluster the two CTAs of M = 128 share B's tile by multicast,
/// as cuBLAS's nvjet 64x128 kernel does at M = 128). Pingpong (true): each warpgroup owns whole
/// 128 x BN tiles (tiles alternate between them); their mainloops take turns on the tensor cores
/// (an ordered barrier) so one warpgroup's epilogue runs under the other's MMAs (CUTLASS
/// KernelTmaWarpSpecializedPingpong; QuACK's pingpong=True). Each then has its own epilogue
/// buffers and barriers ("epilogue group").
/// ElementAB: cutlass::bfloat16_t or cutlass::half_t.
/// MajorA, MajorB: GMMA::Major::K (stride 1 along K) or GMMA::Major::MN (stride 1 along M for A,
/// along N for B); the WGMMA reads either from shared memory.
/// BN: 256 (the default, large problems), 192 (pingpong: QuACK 0.2.0's default tile, 128x192),
/// 128 / 64 (more tiles for small M·N). ClusterM: 2 (B multicast to both CTAs) or 1 (no
/// multicast: every CTA busy when there is one M tile).
/// BM: 128, 64 (cooperative only: one consumer warpgroup) or 256 (cooperative only).
/// Registers: a consumer thread holds BM·BN / 256 (cooperative, BM ≥ 128) or BM·BN / 128 fp32
/// accumulators; at most 192 of its 232 (setmaxnreg): pingpong 128x256 (256) cannot be built.
template <class ElementAB_, GMMA::Major MajorA_, GMMA::Major MajorB_, int BM_, int BN_, int ClusterM_,
          int ClusterN_, bool Pingpong_>
struct TileConfig {
  using ElementAB = ElementAB_;
  static constexpr GMMA::Major kMajorA = MajorA_, kMajorB = MajorB_;
  static constexpr int BM = BM_, BN = BN_, BK = 64;
  static constexpr bool kPingpong = Pingpong_;
  static_assert(BM == 128 || (!kPingpong && (BM == 64 || BM == 256)),
                "BM: 128, or 64 / 256 with cooperative consumers");
  static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256, "BN: one 64xBNx16 WGMMA atom per warpgroup");
  // Consumer warpgroups: 2 (cooperative BM = 128 / 256, or pingpong), 1 (cooperative 64 rows).
  static constexpr int kConsumerWGs = kPingpong ? 2 : BM == 64 ? 1 : 2;
  // Rows of the accumulator tile one consumer warpgroup holds (64 or 128) and its fp32
  // accumulators per thread.
  static constexpr int kWgRows = kPingpong ? BM : BM / kConsumerWGs;
  static constexpr int kAccRegs = kWgRows * BN / 128;
  static_assert(kAccRegs <= 192, "accumulators: at most 192 fp32 registers per consumer thread (of 232)");
  // Epilogue groups: the threads that run one tile's epilogue (all consumers, or each warpgroup).
  static constexpr int kEpiGroups = kPingpong ? 2 : 1;
  static constexpr int kEpiThreads = kPingpong ? 128 : 128 * kConsumerWGs;
  // Epilogue subtile (EpiM, EpiN): EpiM = the tiled MMA's M extent (rows one MMA step covers:
  // 64 per consumer warpgroup of the epilogue group). EpiN: 64 for a 64-row subtile (8 KB of
  // 16-bit D; half the barriers of 64 x 32 per tile), 32 for 128 rows and for the wide
  // pingpong tile (BN = 192), whose 40 KB mainloop stages leave 24 KB for the epilogue.
  static constexpr bool kWidePingpong = kPingpong && BN > 128;
  static constexpr int EpiM = kPingpong ? 64 : 64 * kConsumerWGs;
  static constexpr int EpiN = EpiM == 64 && !kWidePingpong ? 64 : 32;
  // Epilogue buffers in flight per group for one 16-bit output (epilogue.cuh, EpiStagesD): 4,
  // or 3 for the wide pingpong tile: 2 groups x 3 x 4 KB = 24 KB, so 5 mainloop stages of 40 KB
  // fit (QuACK's 128x192: 5 stages and six 64 x 32 buffers shared by the two warpgroups).
  static constexpr int kEpiStages = kWidePingpong ? 3 : 4;
  // Cluster of kClusterM x kClusterN tiles (launched as a 1-D cluster of kClusterSize CTAs):
  // 2x1 multicasts B to the two CTAs of a tile column pair (same n tile), 1x2 multicasts A to
  // the two CTAs of a tile row pair (same m tile: the small-M shapes, where A is re-read by
  // every CTA).
  static constexpr int kClusterM = ClusterM_, kClusterN = ClusterN_;
  static constexpr int kClusterSize = kClusterM * kClusterN;
  static_assert(kClusterSize == 1 || kClusterSize == 2, "clusters 1x1, 2x1 and 1x2");
  static constexpr int kThreads = 128 * (1 + kConsumerWGs);
  static constexpr int kConsumerThreads = 128 * kConsumerWGs;
  // setmaxnreg with 3 warpgroups (168 registers each at launch); with 2, each thread may hold 255.
  // 232 hold 192 accumulators without spilling because the mainloop zeroes them before each
  // tile (mainloop.cuh, mma), which frees the registers of the subtiles already stored.
  static constexpr bool kRegRebalance = kConsumerWGs == 2;
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static constexpr int kMaxSmem = 232448;  // 227 KB, sm_90 opt-in maximum per CTA
  // Mainloop stages: as many (BM + BN) x BK stages as fit beside `epi_bytes` of epilogue buffers
  // (and 2 KB of barriers), at most kMaxMainloopStages (GemmKernel; the epilogue sizes its C ring
  // from the same count: epilogue.cuh, kStagesCAhead).
  static constexpr int kMainloopStageBytes = (BM + BN) * BK * int(sizeof(ElementAB));
  static constexpr int kMaxMainloopStages = 8;  // 4 fit at BN = 256; narrower tiles take more
  static constexpr int mainloop_stages(int epi_bytes) {
    int const fit = (kMaxSmem - epi_bytes - 2048) / kMainloopStageBytes;
    return fit < kMaxMainloopStages ? fit : kMaxMainloopStages;
  }
  static constexpr int kGroup = 8;         // default raster band width of the tile scheduler (tiles)

  using TileShape = Shape<Int<BM>, Int<BN>, Int<BK>>;
  using ClusterShape = Shape<Int<kClusterM>, Int<kClusterN>, _1>;
  // The hardware cluster (kClusterSize, 1, 1). The pipeline takes this shape: with 2 CTAs either
  // operand's multicast makes each CTA write into both, so each releases every stage to both.
  using HwClusterShape = Shape<Int<kClusterSize>, _1, _1>;
  using EpiTile = Shape<Int<EpiM>, Int<EpiN>>;

  // Cooperative: 2 warpgroups stacked along M, each one 64 x BN x 16 WGMMA atom (BM = 256: the
  // pair repeated twice along M, MMA_M = 2). Pingpong: one warpgroup, the atom repeated twice
  // along M (MMA_M = 2).
  using MmaAtom = decltype(GMMA::ss_op_selector<ElementAB, ElementAB, float, Shape<_64, Int<BN>, Int<BK>>,
                                                kMajorA, kMajorB>());
  using TiledMma = decltype(make_tiled_mma(MmaAtom{}, Layout<Shape<Int<kPingpong ? 1 : kConsumerWGs>, _1, _1>>{}));
  // Accumulator values per thread per epilogue subtile of the tile's EpiN (16, or 32 for 64 x 64;
  // an epilogue with two outputs may narrow the subtile: CollectiveEpilogue::EpiN).
  static constexpr int kFrg = EpiM * EpiN / kEpiThreads;

  // Threads that consume (and release) each mainloop stage: both warpgroups, or the one owning the tile.
  static constexpr int kStageConsumers = kPingpong ? 128 : kConsumerThreads;
  // Pingpong: the two warpgroups' mainloops alternate on named barriers kMmaOrderBarrier + g
  // (warpgroup g waits on its own, the other arrives; the epilogue's are 1 + g).
  static constexpr uint32_t kMmaOrderBarrier = 3;
  // Stream-K (src/gemm/streamk.h, kernel.cuh): cooperative tiles only. A pingpong warpgroup
  // derives its pipeline position from seq · k_tiles (kernel.cuh) and its turn from seq; a
  // piece of variable length would need the other warpgroup's pieces counted too.
  static constexpr bool kStreamK = !kPingpong;
  // Dynamic scheduler ring (scheduler.cuh): slots, and readers per slot and CTA (the producer
  // thread and the consumer warps that take that work).
  using WorkRingT = WorkRing<4>;
  static constexpr int kWorkReaders = 1 + (kPingpong ? 4 : kConsumerThreads / 32);
};

/// Tile configuration Base with epilogue subtiles EpiN columns wide instead of Base's (EpiM
/// rows as Base's) and Stages buffers in flight per group for one 16-bit output (Base's
/// kEpiStages; default: as many as keep Base's buffer bytes, Base::kEpiStages · Base::EpiN /
/// EpiN, so the mainloop keeps its stages, but at least 2). A variant of the cooperative
/// 128-row subtile (instances.txt / instances_ab.txt, epilogue column "<epilogue>:e<EpiN>",
/// suffix e<EpiN>): 128 x 64 subtiles take half the subtiles of 128 x 32 per tile, so half the
/// epilogue's named barriers and TMA store issues, with 2 buffers of 16 KB (16-bit D) in place
/// of 4 of 8 KB. EpiN = 128 (A/B only, issue 16's K = 128 store rate): a subtile spans the
/// whole N = 128 tile, rows of 256 bytes of 16-bit D in two SW128 column blocks (epilogue_smem.cuh),
/// stored as two 64-column TMA boxes issued back to back: pingpong 128x128's 64 x 128 subtiles
/// keep its bytes (2 of 16 KB per warpgroup for 4 of 8 KB; 5 mainloop stages), cooperative
/// 256x128's 128 x 128 take 2 of 32 KB for 4 of 8 KB (64 KB: 3 mainloop stages of 48 KB
/// instead of 4). Only for epilogues that keep the tile's subtile (one 16-bit output, C of D's
/// width: CollectiveEpilogue narrows a 64-column subtile to 32 otherwise; the CMake list checks it).
template <class Base, int EpiN_, int Stages = cute::max(2, Base::kEpiStages * Base::EpiN / EpiN_)>
struct EpiSubtile : Base {
  static_assert(EpiN_ == 32 || EpiN_ == 64 || EpiN_ == 128,
                "subtiles of 32, 64 or 128 columns (rows of 64 / 128 / 256 bytes of 16-bit D)");
  static_assert(Base::BN % EpiN_ == 0, "whole subtiles per tile");
  static_assert(Stages >= 2, "at least two buffers per output in flight");
  static constexpr int EpiN = EpiN_;
  static constexpr int kEpiStages = Stages;
  using EpiTile = Shape<Int<Base::EpiM>, Int<EpiN>>;
  static constexpr int kFrg = Base::EpiM * EpiN / Base::kEpiThreads;
};

}  // namespace quack::detail::sm90
