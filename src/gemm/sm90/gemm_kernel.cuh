// Hopper GEMM kernel: TMA + WGMMA, warp-specialised, persistent (device code; CuTe atoms).
//
//   D = epilogue(A · B, C), fp32 accumulation; A (M,K,L) and B (N,K,L) each K-major (stride 1
//   along K) or MN-major (stride 1 along M, resp. N): Config's MajorA / MajorB; C/D (M,N,L)
//   N-major (row-major; the host maps a column-major D onto this by swapping A and B).
//   Design (b) of docs/gemm-spike.md, after CUTLASS's sm90_mma_tma_gmma_ss_warpspecialized.hpp
//   (mainloop) and sm90_epilogue_tma_warpspecialized.hpp (epilogue partitioning), without the
//   CollectiveBuilder.
//
// Threads → work: 384 threads = 3 warpgroups (256 = 2 with BM = 64). WG0 is the producer: one elected thread of warp 0
//   issues the TMA loads of A (BM x BK) and B (BN x BK) — in a 2x1 cluster only its half of B,
//   multicast to both CTAs, in a 1x2 cluster its half of A — into a Stages-deep ring
//   (PipelineTmaAsync, full/empty mbarriers), and keeps
//   40 registers (setmaxnreg). WG1 and WG2 are the consumers (232 registers each), in one of two
//   modes (Config::kPingpong):
//   - cooperative: they split the BM x BN tile along M (64 rows each, one 64xBNx16 WGMMA atom per
//     warpgroup) and run its epilogue together (256 threads); a BM = 64 tile has one consumer
//     warpgroup (256 threads in all, no register rebalancing);
//   - pingpong: each owns whole tiles (the atom twice along M), alternating; an ordered barrier
//     gives the tensor cores to one warpgroup's mainloop at a time, so one warpgroup's epilogue
//     runs under the other's MMAs; each has its own epilogue buffers (128 threads).
// Tile order: persistent; cluster c walks work indices c, c + clusters, ... of TileScheduler
//   (src/gemm/tile_scheduler.h, grouped rasterisation), or with a tile counter takes them from
//   an atomic counter, published by CTA 0's producer (work_queue.cuh); CTA rank r of the cluster
//   takes m tile 2·m + r (2x1) or n tile 2·n + r (1x2). The producer walks the whole sequence; cooperative consumers
//   too, pingpong consumer i the indices of parity i (and skips the other's stages).
// Shared memory: A (BM,BK,Stages) and B (BN,BK,Stages) with 128-byte swizzle: GMMA K-major
//   atoms (8 x 64) for a K-major operand, MN-major atoms (64 x 8, repeated along K first, so one
//   TMA box is 64 (M or N) x 64 (K)) for an MN-major one, as CUTLASS's sm90 builder (OperandSmem);
//   per epilogue group, D (EpiM,EpiN,EpiStagesD) subtiles and, unless C has D's width and is
//   loaded into the D buffer it becomes (kReuseSmemC), a C (EpiM,EpiN) subtile, swizzled to their
//   row width; the pipeline barriers, the pingpong order barrier and one mbarrier per group for
//   C. All dynamic; ≤ 227 KB. Same bytes for every major.
// Epilogue, per (EpiM x EpiN) subtile: [C: TMA → smem → registers (LDSM)] → functor on fp32 →
//   registers → smem (STSM) → one thread issues the TMA store (EpiStagesD buffers in flight).
// Tails: TMA zero-fills out-of-bounds loads (zeros add nothing to the sum) and clips stores
//   along M; along N a TMA store clips exactly only when rows of D are 16-byte multiples, so
//   otherwise the subtile crossing column N is stored with predicated plain stores
//   (store_subtile_clipped), and subtiles wholly right of N are skipped. Alignment (host-checked): bases and strides 16-byte
//   multiples.
#pragma once

#include <cute/tensor.hpp>
#include <cute/arch/cluster_sm90.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/array.h>
#include <cutlass/numeric_conversion.h>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "gemm/sm90/epilogue.cuh"
#include "gemm/sm90/epilogue_smem.cuh"
#include "gemm/sm90/work_queue.cuh"
#include "gemm/tile_scheduler.h"

namespace quack::detail::sm90 {

using namespace cute;

/// Shared-memory atom and tile order of a 16-bit GEMM operand of major `Mj`, after CUTLASS
/// (ss_smem_selector in cutlass/gemm/collective/builders/sm90_common.inl: the 128-byte swizzle,
/// since BK = 64 and BM, BN are multiples of 64; the tile order of
/// sm90_mma_tma_gmma_ss_warpspecialized.hpp: MN-major atoms are repeated along K first).
template <class T, GMMA::Major Mj>
struct OperandSmem {
  static constexpr bool kK = Mj == GMMA::Major::K;
  using Atom = conditional_t<kK, GMMA::Layout_K_SW128_Atom<T>, GMMA::Layout_MN_SW128_Atom<T>>;  // (8,64) or (64,8)
  using Order = conditional_t<kK, Step<_1, _2, _3>, Step<_2, _1, _3>>;
  template <int MN, int K, int Stages>
  using Layout = decltype(tile_to_shape(Atom{}, Shape<Int<MN>, Int<K>, Int<Stages>>{}, Order{}));  // (MN,K,PIPE)
};

/// One tile configuration: BM x BN x 64, 1–2 consumer warpgroups, a ClusterM x ClusterN cluster.
/// Cooperative (Pingpong = false): both warpgroups split one 128 x BN tile along M (64 rows each)
/// and run its epilogue together; with BM = 64 one consumer warpgroup owns the 64 x BN tile
/// (small M: with a 2x1 cluster the two CTAs of M = 128 share B's tile by multicast, as
/// cuBLAS's nvjet 64x128 kernel does at M = 128). Pingpong (true): each warpgroup owns whole 128 x BN tiles
/// (tiles alternate between them); their mainloops take turns on the tensor cores (an ordered
/// barrier) so one warpgroup's epilogue runs under the other's MMAs (CUTLASS
/// KernelTmaWarpSpecializedPingpong; QuACK's pingpong=True). Each then has its own epilogue
/// buffers and barriers ("epilogue group").
/// ElementAB: cutlass::bfloat16_t or cutlass::half_t; ElementD (= C's type): either, or float.
/// MajorA, MajorB: GMMA::Major::K (stride 1 along K) or GMMA::Major::MN (stride 1 along M for A,
/// along N for B); the WGMMA reads either from shared memory.
/// BN: 256 (the default, large problems) or 128 / 64 (more tiles for small M·N); ClusterM: 2
/// (B multicast to both CTAs) or 1 (no multicast: every CTA busy when there is one M tile).
/// ElementC_: C's type when it differs from D's (e.g. an fp32 C added into a bf16 D); void: D's.
/// BM_: 128, or 64 (cooperative only: one consumer warpgroup).
template <class ElementAB_, class ElementD_, GMMA::Major MajorA_ = GMMA::Major::K,
          GMMA::Major MajorB_ = GMMA::Major::K, int BN_ = 256, int ClusterM_ = 2, bool Pingpong_ = false,
          int ClusterN_ = 1, class ElementC_ = void, int BM_ = 128>
struct GemmConfig {
  using ElementAB = ElementAB_;
  using ElementD = ElementD_;
  using ElementC = conditional_t<is_void_v<ElementC_>, ElementD_, ElementC_>;
  static constexpr GMMA::Major kMajorA = MajorA_, kMajorB = MajorB_;
  static constexpr int BM = BM_, BN = BN_, BK = 64;
  static constexpr bool kPingpong = Pingpong_;
  static_assert(!kPingpong || BN <= 128, "pingpong: a 128 x BN fp32 accumulator per warpgroup (BN ≤ 128)");
  static_assert(BM == 128 || (BM == 64 && !kPingpong), "BM: 128, or 64 with one cooperative warpgroup");
  // Consumer warpgroups: 2 (cooperative 128 rows, or pingpong), 1 (cooperative 64 rows).
  static constexpr int kConsumerWGs = kPingpong ? 2 : BM / 64;
  // Epilogue groups: the threads that run one tile's epilogue (all consumers, or each warpgroup).
  static constexpr int kEpiGroups = kPingpong ? 2 : 1;
  static constexpr int kEpiThreads = kPingpong ? 128 : 128 * kConsumerWGs;
  // Epilogue subtile (EpiM, EpiN): EpiM = the tiled MMA's M extent (rows one MMA step covers).
  // Pingpong: 64 x 64 (8 KB of 16-bit D; half the barriers of 64 x 32 per tile).
  static constexpr int EpiM = kPingpong ? 64 : BM, EpiN = EpiM == 64 ? 64 : 32;
  // C is loaded into the D buffer it is about to become (CUTLASS's ReuseSmemC) when both have
  // the same width; the saved C buffer pays for more D buffers in flight. The stores' smem
  // reads complete about a microsecond after issue on the H200 under a full write load (ncu,
  // 8192x8192x128 at 4c9df5f: 16 KB of stores in flight per SM gave 1.6 TB/s of D; cuBLAS's
  // same 128x256 tile 2.5 TB/s), so the bytes in flight per SM set the epilogue's speed.
  static constexpr bool kReuseSmemC = sizeof(ElementC) == sizeof(ElementD);
  static constexpr int EpiStagesD = kReuseSmemC ? 4 : 2;  // D buffers in flight per group
  static constexpr int kStagesC = kReuseSmemC ? EpiStagesD : 1;  // C buffers (aliasing D's when reused)
  // Cluster of kClusterM x kClusterN tiles (launched as a 1-D cluster of kClusterSize CTAs):
  // 2x1 multicasts B to the two CTAs of a tile column pair (same n tile), 1x2 multicasts A to
  // the two CTAs of a tile row pair (same m tile: the small-M shapes, where A is re-read by
  // every CTA).
  static constexpr int kClusterM = ClusterM_, kClusterN = ClusterN_;
  static constexpr int kClusterSize = kClusterM * kClusterN;
  static_assert(BN == 64 || BN == 128 || BN == 256, "BN: one 64xBNx16 WGMMA atom per warpgroup");
  static_assert(kClusterSize == 1 || kClusterSize == 2, "clusters 1x1, 2x1 and 1x2");
  static constexpr int kThreads = 128 * (1 + kConsumerWGs);
  static constexpr int kConsumerThreads = 128 * kConsumerWGs;
  // setmaxnreg with 3 warpgroups (168 registers each at launch); with 2, each thread may hold 255.
  static constexpr bool kRegRebalance = kConsumerWGs == 2;
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static constexpr int kMaxSmem = 232448;  // 227 KB, sm_90 opt-in maximum per CTA
  static constexpr int kGroup = 8;         // raster band width of the tile scheduler (tiles)

  using TileShape = Shape<Int<BM>, Int<BN>, Int<BK>>;
  using ClusterShape = Shape<Int<kClusterM>, Int<kClusterN>, _1>;
  // The hardware cluster (kClusterSize, 1, 1). The pipeline takes this shape: with 2 CTAs either
  // operand's multicast makes each CTA write into both, so each releases every stage to both.
  using HwClusterShape = Shape<Int<kClusterSize>, _1, _1>;
  using EpiTile = Shape<Int<EpiM>, Int<EpiN>>;

  // Cooperative: 2 warpgroups stacked along M, each one 64 x BN x 16 WGMMA atom. Pingpong: one
  // warpgroup, the atom repeated twice along M (MMA_M = 2).
  using MmaAtom = decltype(GMMA::ss_op_selector<ElementAB, ElementAB, float, Shape<_64, Int<BN>, Int<BK>>,
                                                kMajorA, kMajorB>());
  using TiledMma = decltype(make_tiled_mma(MmaAtom{}, Layout<Shape<Int<kPingpong ? 1 : kConsumerWGs>, _1, _1>>{}));

  // Epilogue smem: a D row of the subtile is EpiN elements (64 B for 16-bit, 128 B for fp32):
  // swizzle width to match (CUTLASS sm90_get_epilogue_smem_swizzle_layout_atom).
  template <class T>
  using SmemAtomEpi = conditional_t<EpiN * sizeof(T) == 64, GMMA::Layout_K_SW64_Atom<T>, GMMA::Layout_K_SW128_Atom<T>>;
  using SmemLayoutC = decltype(tile_to_shape(SmemAtomEpi<ElementC>{}, Shape<Int<EpiM>, Int<EpiN>, Int<kStagesC>>{}));   // (EpiM,EpiN,PIPE_C)
  using SmemLayoutD = decltype(tile_to_shape(SmemAtomEpi<ElementD>{}, Shape<Int<EpiM>, Int<EpiN>, Int<EpiStagesD>>{}));  // (EpiM,EpiN,PIPE_D)
  // Register <-> smem: epilogue_smem.cuh (STSM / LDSM x4 for 16-bit data, 8-byte accesses for fp32).
  static constexpr int kFrg = EpiM * EpiN / kEpiThreads;  // values per thread per subtile (16)

  // Mainloop stages: as many (BM + BN) x BK stages as fit beside the epilogue buffers, at most
  // kMaxStages (128x256: 4 for 16-bit D, 3 for fp32 D; pingpong 128x128: 5; 64x128: 8).
  static constexpr int kStageBytes = (BM + BN) * BK * int(sizeof(ElementAB));
  static constexpr int kEpiBytes =
      kEpiGroups * EpiM * EpiN * ((kReuseSmemC ? 0 : int(sizeof(ElementC))) + EpiStagesD * int(sizeof(ElementD)));
  static constexpr int kStagesFit = (kMaxSmem - kEpiBytes - 2048) / kStageBytes;
  static constexpr int kMaxStages = 8;  // 4 fit at BN = 256; narrower tiles take more
  static constexpr int Stages = kStagesFit < kMaxStages ? kStagesFit : kMaxStages;
  static_assert(Stages >= 2, "mainloop needs at least 2 stages");

  using SmemLayoutA = typename OperandSmem<ElementAB, kMajorA>::template Layout<BM, BK, Stages>;  // (BM,BK,PIPE)
  using SmemLayoutB = typename OperandSmem<ElementAB, kMajorB>::template Layout<BN, BK, Stages>;  // (BN,BK,PIPE)
  using Pipeline = cutlass::PipelineTmaAsync<Stages>;
  // Threads that consume (and release) each stage: both warpgroups, or the one owning the tile.
  static constexpr int kStageConsumers = kPingpong ? 128 : kConsumerThreads;
  // Pingpong: the two warpgroups' mainloops alternate (one sequence, depth 1).
  using MmaOrder = cutlass::OrderedSequenceBarrier<1, 2>;
  // Dynamic scheduler ring (work_queue.cuh): slots, and readers per slot and CTA (the producer
  // thread and the consumer warps that take that work).
  using WorkRingT = WorkRing<4>;
  static constexpr int kWorkReaders = 1 + (kPingpong ? 4 : kConsumerThreads / 32);

  struct SmemC {  // a C buffer per epilogue group (absent when C reuses D's buffers)
    alignas(1024) ArrayEngine<ElementC, cosize_v<SmemLayoutC>> buf[kEpiGroups];
  };
  struct NoSmemC {};
  struct SharedStorage {
    alignas(1024) ArrayEngine<ElementAB, cosize_v<SmemLayoutA>> A;
    alignas(1024) ArrayEngine<ElementAB, cosize_v<SmemLayoutB>> B;
    alignas(1024) ArrayEngine<ElementD, cosize_v<SmemLayoutD>> D[kEpiGroups];  // per epilogue group
    conditional_t<kReuseSmemC, NoSmemC, SmemC> C;
    typename Pipeline::SharedStorage pipe;
    typename MmaOrder::SharedStorage mma_order;
    WorkRingT work;
    alignas(8) uint64_t c_full[kEpiGroups];
  };
  static_assert(sizeof(SharedStorage) <= kMaxSmem, "shared memory budget");
  // Bytes each CTA receives per stage: its A tile and the whole B tile (with a 2x1 cluster both
  // halves, one from each CTA).
  static constexpr uint32_t kTxBytes = uint32_t(kStageBytes);
  static constexpr uint32_t kCBytes = uint32_t(EpiM * EpiN * sizeof(ElementC));
};

/// The default tile: 128 x 256 x 64, 2x1 cluster.
template <class ElementAB, class ElementD, GMMA::Major MajorA = GMMA::Major::K, GMMA::Major MajorB = GMMA::Major::K>
using Config128x256 = GemmConfig<ElementAB, ElementD, MajorA, MajorB, 256, 2>;

/// Kernel parameters (__grid_constant__): TMA descriptors, problem size, epilogue functor.
template <class TmaA, class TmaB, class TmaC, class TmaD, class Epilogue>
struct Params {
  TmaA tma_a;
  TmaB tma_b;
  TmaC tma_c;
  TmaD tma_d;
  int M, N, K, L;
  // D's plain address for the stores TMA cannot make exactly: a TMA store whose box crosses
  // column N wrote the row padding up to the next 16-byte boundary on the H200 (2026-11-30,
  // test_gemm.cpp tails; every row but the last), so when N·sizeof(D) is not a multiple of 16
  // the subtile that crosses column N is stored by the consumer threads instead.
  void* d_ptr;
  int64_t ldd, batch_d;
  bool d_tail_manual;  // N·sizeof(D) % 16 != 0
  Epilogue epi;
  bool load_c;  // C present and (epi.reads_c() or a device beta)
  const float* alpha_dev;  // device scalars (null: epi's host values)
  const float* beta_dev;
  TileScheduler sched;
  uint32_t* tile_counter;  // dynamic scheduler (work_queue.cuh) when non-null
};

/// Stores the (EpiM, EpiN) subtile staged in buffer stage `buf` at D(m0.., n0..) of batch l with plain
/// predicated stores by the epilogue group's threads (consecutive threads, consecutive columns):
/// the exact-clipping path for the subtile that crosses column N (see Params::d_tail_manual).
/// The caller's next barrier orders these smem reads before the buffer is rewritten.
template <class Cfg, class P>
CUTE_DEVICE void store_subtile_clipped(typename Cfg::ElementD const* buf, P const& p, int l, int m0, int n0, int etid) {
  using ElementD = typename Cfg::ElementD;
  ElementD* d = static_cast<ElementD*>(p.d_ptr) + int64_t(l) * p.batch_d;
  for (int i = etid; i < Cfg::EpiM * Cfg::EpiN; i += Cfg::kEpiThreads) {
    int const r = i / Cfg::EpiN, c = i % Cfg::EpiN;
    if (m0 + r < p.M && n0 + c < p.N) d[int64_t(m0 + r) * p.ldd + n0 + c] = subtile_at<Cfg::EpiN>(buf, r, c);
  }
}

template <class Cfg, class P>
__global__ void __launch_bounds__(Cfg::kThreads, 1) gemm_kernel(__grid_constant__ P const p) {
  using Pipeline = typename Cfg::Pipeline;
  using ElementD = typename Cfg::ElementD;
  constexpr int kFrg = Cfg::kFrg;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& ss = *reinterpret_cast<typename Cfg::SharedStorage*>(smem_raw);
  int const warp_group = cutlass::canonical_warp_group_idx();
  int const warp_idx = cutlass::canonical_warp_idx_sync();
  int const lane_pred = cute::elect_one_sync();
  uint32_t const cta_rank = cute::block_rank_in_cluster();  // 0/1 along M (2x1) or N (1x2)
  // This CTA's offset inside its cluster tile, along M and along N.
  int const rank_m = Cfg::kClusterM > 1 ? int(cta_rank) : 0, rank_n = Cfg::kClusterN > 1 ? int(cta_rank) : 0;

  if (warp_idx == 0 && lane_pred) {
    cute::prefetch_tma_descriptor(p.tma_a.get_tma_descriptor());
    cute::prefetch_tma_descriptor(p.tma_b.get_tma_descriptor());
    cute::prefetch_tma_descriptor(p.tma_c.get_tma_descriptor());
    cute::prefetch_tma_descriptor(p.tma_d.get_tma_descriptor());
  }
  typename Pipeline::Params pp;
  pp.transaction_bytes = Cfg::kTxBytes;
  pp.role = warp_group == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  pp.is_leader = threadIdx.x == 0;
  pp.num_consumers = Cfg::kStageConsumers;
  Pipeline pipeline(ss.pipe, pp, typename Cfg::HwClusterShape{});  // warp 0 initialises the barriers
  // Pingpong turn-taking of the consumer warpgroups (group 0 = WG1 goes first); unused otherwise.
  typename Cfg::MmaOrder::Params op;
  op.group_id = warp_group == 0 ? 0u : uint32_t(warp_group - 1);
  op.group_size = 128;
  typename Cfg::MmaOrder mma_order(ss.mma_order, op);
  if (warp_idx == 1 && lane_pred)
    for (int g = 0; g < Cfg::kEpiGroups; ++g) cutlass::arch::ClusterTransactionBarrier::init(&ss.c_full[g], 1);
  int64_t const num_work = p.sched.tiles();
  int64_t const cluster_id = blockIdx.x / Cfg::kClusterSize;
  int64_t const cluster_stride = gridDim.x / Cfg::kClusterSize;
  WorkQueue<Cfg::WorkRingT::kStages> const queue{&ss.work, p.tile_counter, num_work, cluster_id, cluster_stride,
                                                 cta_rank, Cfg::kClusterSize};
  queue.init(warp_idx == 2 && lane_pred, Cfg::kWorkReaders);
  cutlass::arch::fence_barrier_init();
  cute::cluster_arrive_relaxed();  // the peer's barriers exist before any multicast or remote arrive
  cute::cluster_wait();

  // TMA coordinate tensors.
  Tensor mA = p.tma_a.get_tma_tensor(make_shape(p.M, p.K, p.L));  // (M,K,L)
  Tensor mB = p.tma_b.get_tma_tensor(make_shape(p.N, p.K, p.L));  // (N,K,L)
  Tensor mC = p.tma_c.get_tma_tensor(make_shape(p.M, p.N, p.L));  // (M,N,L)
  Tensor mD = p.tma_d.get_tma_tensor(make_shape(p.M, p.N, p.L));  // (M,N,L)
  int const k_tiles = (p.K + Cfg::BK - 1) / Cfg::BK;

  Tensor sA = make_tensor(make_smem_ptr(ss.A.begin()), typename Cfg::SmemLayoutA{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(ss.B.begin()), typename Cfg::SmemLayoutB{});  // (BN,BK,PIPE)

  if (warp_group == 0) {
    // ---------------- producer ----------------
    if constexpr (Cfg::kRegRebalance) cutlass::arch::warpgroup_reg_dealloc<Cfg::kProducerRegs>();
    if (warp_idx == 0 && lane_pred) {
      auto write = cutlass::make_producer_start_state<Pipeline>();
      // The multicast operand (B with 2x1, A with 1x2): this CTA loads its half of the box into
      // both CTAs; the other operand: the whole box, this CTA only.
      auto cta_tma_a = p.tma_a.get_slice(rank_n);
      auto cta_tma_b = p.tma_b.get_slice(rank_m);
      uint16_t const mcast_a = uint16_t((1u << Cfg::kClusterN) - 1);
      uint16_t const mcast_b = uint16_t((1u << Cfg::kClusterM) - 1);
      Tensor tAsA = cta_tma_a.partition_D(sA);  // (TMA,TMA_M,TMA_K,PIPE)
      Tensor tBsB = cta_tma_b.partition_D(sB);  // (TMA,TMA_N,TMA_K,PIPE)
      for (uint32_t seq = 0;; ++seq) {
        int64_t const w = queue.producer_next(seq);
        if (w >= num_work) {
          if constexpr (Cfg::kPingpong) queue.producer_stop_next(seq);
          break;
        }
        TileCoord const t = p.sched.tile(w);
        int const l = int(t.batch);
        int const m_blk = int(t.m) * Cfg::kClusterM + rank_m, n_blk = int(t.n) * Cfg::kClusterN + rank_n;
        Tensor gA = local_tile(mA(_, _, l), select<0, 2>(typename Cfg::TileShape{}), make_coord(m_blk, _));  // (BM,BK,k)
        Tensor gB = local_tile(mB(_, _, l), select<1, 2>(typename Cfg::TileShape{}), make_coord(n_blk, _));  // (BN,BK,k)
        Tensor tAgA = cta_tma_a.partition_S(gA);  // (TMA,TMA_M,TMA_K,k)
        Tensor tBgB = cta_tma_b.partition_S(gB);  // (TMA,TMA_N,TMA_K,k)
        for (int k = 0; k < k_tiles; ++k) {
          pipeline.producer_acquire(write);
          auto* bar = pipeline.producer_get_barrier(write);
          copy(p.tma_a.with(*bar, mcast_a), tAgA(_, _, _, k), tAsA(_, _, _, write.index()));
          copy(p.tma_b.with(*bar, mcast_b), tBgB(_, _, _, k), tBsB(_, _, _, write.index()));
          ++write;
        }
      }
      pipeline.producer_tail(write);  // stay until every stage this CTA filled (and multicast) is released
    }
  } else {
    // ---------------- consumers (1 or 2 warpgroups: cooperative or pingpong) ----------------
    if constexpr (Cfg::kRegRebalance) cutlass::arch::warpgroup_reg_alloc<Cfg::kConsumerRegs>();
    int const mma_wg = warp_group - 1;                // 0 or 1
    int const grp = Cfg::kPingpong ? mma_wg : 0;       // epilogue group: own smem, barriers, tiles
    int const etid = int(threadIdx.x) - 128 - grp * Cfg::kEpiThreads;  // thread in the group
    typename Cfg::TiledMma mma;
    auto thr_mma = mma.get_thread_slice(etid);
    Tensor tCsA = thr_mma.partition_A(sA);        // (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCsB = thr_mma.partition_B(sB);        // (MMA,MMA_N,MMA_K,PIPE)
    Tensor tCrA = thr_mma.make_fragment_A(tCsA);  // smem descriptors
    Tensor tCrB = thr_mma.make_fragment_B(tCsB);
    Tensor acc = partition_fragment_C(mma, select<0, 1>(typename Cfg::TileShape{}));  // (MMA,MMA_M,MMA_N) fp32

    // Epilogue buffers: registers <-> smem by epilogue_smem.cuh (fragment layout and swizzle
    // by hand), smem <-> global by TMA (CuTe's partitions of the swizzled buffers).
    using ElementC = typename Cfg::ElementC;
    ElementC* c_smem;
    if constexpr (Cfg::kReuseSmemC)
      c_smem = reinterpret_cast<ElementC*>(ss.D[grp].begin());  // same layout, same width
    else
      c_smem = ss.C.buf[grp].begin();
    constexpr int kSubtile = Cfg::EpiM * Cfg::EpiN;  // elements per buffer stage
    Tensor sC = as_position_independent_swizzle_tensor(
        make_tensor(make_smem_ptr(c_smem), typename Cfg::SmemLayoutC{}));  // (EpiM,EpiN,PIPE_C)
    Tensor sD = as_position_independent_swizzle_tensor(
        make_tensor(make_smem_ptr(ss.D[grp].begin()), typename Cfg::SmemLayoutD{}));  // (EpiM,EpiN,PIPE_D)
    static_assert(decltype(size<0>(acc))::value == kFrg * (Cfg::BN / Cfg::EpiN) &&
                      decltype(size<1>(acc))::value == Cfg::BM / Cfg::EpiM && decltype(size<2>(acc))::value == 1,
                  "the accumulator holds BN / EpiN subtiles' fragments along its first mode, one per EpiM rows");
    auto tma_d_blk = p.tma_d.get_slice(Int<0>{});
    auto tma_c_blk = p.tma_c.get_slice(Int<0>{});
    Tensor bGS_sC = tma_c_blk.partition_D(sC);  // (TMA,TMA_M,TMA_N,PIPE_C)
    Tensor bSG_sD = tma_d_blk.partition_S(sD);  // (TMA,TMA_M,TMA_N,PIPE_D)
    // Device scalars are read once per CTA; a device beta of 0 means C is not read.
    auto epi = p.epi;
    epi.load_scalars(p.alpha_dev, p.beta_dev);
    bool const load_c = p.load_c && epi.reads_c();
    uint32_t c_phase = 0;
    int d_stage = 0;
    auto epi_sync = [grp] { cutlass::arch::NamedBarrier::sync(Cfg::kEpiThreads, 1 + grp); };

    // Pingpong: this warpgroup takes every other work index of the cluster's sequence, and its
    // pipeline state skips the stages of the other warpgroup's tiles (all tiles have k_tiles).
    auto read = cutlass::PipelineState<Cfg::Stages>{};
    if (Cfg::kPingpong && mma_wg == 1) read.advance(k_tiles);
    for (uint32_t seq = Cfg::kPingpong ? uint32_t(mma_wg) : 0u;; seq += Cfg::kEpiGroups) {
      int64_t const w = queue.consumer_get(seq);
      if (w >= num_work) break;
      TileCoord const t = p.sched.tile(w);
      int const l = int(t.batch);
      int const m_blk = int(t.m) * Cfg::kClusterM + rank_m, n_blk = int(t.n) * Cfg::kClusterN + rank_n;

      // ---- mainloop: one WGMMA batch in flight; release a stage once the batch reading it is done ----
      if constexpr (Cfg::kPingpong) mma_order.wait();  // our turn on the tensor cores
      auto release = read;
      mma.accumulate_ = GMMA::ScaleOut::Zero;
      warpgroup_fence_operand(acc);
      for (int k = 0; k < k_tiles; ++k) {
        pipeline.consumer_wait(read, pipeline.consumer_try_wait(read));
        int const s = read.index();
        warpgroup_fence_operand(acc);
        warpgroup_arrive();
        CUTE_UNROLL
        for (int kb = 0; kb < size<2>(tCrA); ++kb) {
          cute::gemm(mma, tCrA(_, _, kb, s), tCrB(_, _, kb, s), acc);
          mma.accumulate_ = GMMA::ScaleOut::One;
        }
        warpgroup_commit_batch();
        warpgroup_wait<1>();  // the batch of k-1 is done: its stage may be refilled
        warpgroup_fence_operand(acc);
        if (k > 0) {
          pipeline.consumer_release(release);
          ++release;
        }
        ++read;
      }
      if constexpr (Cfg::kPingpong) mma_order.arrive();  // the other warpgroup may issue now
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc);
      if (k_tiles > 0) pipeline.consumer_release(release);  // k_tiles ≥ 1 always (host: K = 0 never launches)
      if (Cfg::kPingpong) read.advance(k_tiles);  // the other warpgroup's next tile

      // ---- epilogue: (EpiM, EpiN) subtiles ----
      Tensor gC = flat_divide(local_tile(mC(_, _, l), select<0, 1>(typename Cfg::TileShape{}), make_coord(m_blk, n_blk)),
                              typename Cfg::EpiTile{});  // (EpiM,EpiN,EPI_M,EPI_N)
      Tensor gD = flat_divide(local_tile(mD(_, _, l), select<0, 1>(typename Cfg::TileShape{}), make_coord(m_blk, n_blk)),
                              typename Cfg::EpiTile{});  // (EpiM,EpiN,EPI_M,EPI_N)
      Tensor bGS_gC = tma_c_blk.partition_S(gC);  // (TMA,TMA_M,TMA_N,EPI_M,EPI_N)
      Tensor bSG_gD = tma_d_blk.partition_D(gD);  // (TMA,TMA_M,TMA_N,EPI_M,EPI_N)
      CUTE_UNROLL
      for (int epi_m = 0; epi_m < Cfg::BM / Cfg::EpiM; ++epi_m) {
        int const m0 = m_blk * Cfg::BM + epi_m * Cfg::EpiM;  // first row of the subtile
        CUTE_UNROLL
        for (int epi_n = 0; epi_n < Cfg::BN / Cfg::EpiN; ++epi_n) {
          int const n0 = n_blk * Cfg::BN + epi_n * Cfg::EpiN;  // first column of the subtile
          if (n0 >= p.N || m0 >= p.M) continue;  // wholly outside D: nothing to load or store (group-uniform)
          int const c_stage = Cfg::kReuseSmemC ? d_stage : 0;
          cutlass::Array<float, kFrg> x;  // this subtile's accumulator values (fragment order)
          CUTE_UNROLL
          for (int i = 0; i < kFrg; ++i) x[i] = acc(epi_n * kFrg + i, epi_m, 0);
          if (load_c) {
            // Every thread's reads of this C buffer (the previous subtile's LDSM, or a clipped
            // store's reads of the D buffer it aliases) came before the last epi_sync; with
            // reuse, the TMA store that read the buffer must also be done.
            if (etid == 0) {
              if constexpr (Cfg::kReuseSmemC) tma_store_wait<Cfg::EpiStagesD - 1>();
              cutlass::arch::fence_view_async_shared();  // generic reads before the async write
              cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&ss.c_full[grp], Cfg::kCBytes);
              copy(p.tma_c.with(ss.c_full[grp]), bGS_gC(_, _, _, epi_m, epi_n), bGS_sC(_, _, _, c_stage));
            }
            cutlass::arch::ClusterTransactionBarrier::wait(&ss.c_full[grp], c_phase);
            c_phase ^= 1;
            cutlass::Array<ElementC, kFrg> c;
            load_subtile<Cfg::EpiN>(c, c_smem + c_stage * kSubtile, etid);
            epi(x, cutlass::NumericArrayConverter<float, ElementC, kFrg>{}(c));
          } else {
            epi(x);
          }
          cutlass::Array<ElementD, kFrg> const d = cutlass::NumericArrayConverter<ElementD, float, kFrg>{}(x);
          bool const manual = p.d_tail_manual && n0 + Cfg::EpiN > p.N;
          if (etid == 0) tma_store_wait<Cfg::EpiStagesD - 1>();  // the store that read d_stage is done
          epi_sync();  // ... and every thread's LDSM of C from it (reuse)
          store_subtile<Cfg::EpiN>(d, ss.D[grp].begin() + d_stage * kSubtile, etid);
          cutlass::arch::fence_view_async_shared();  // smem writes visible to the TMA unit
          epi_sync();
          if (manual) store_subtile_clipped<Cfg>(ss.D[grp].begin() + d_stage * kSubtile, p, l, m0, n0, etid);
          if (etid == 0) {
            if (!manual) copy(p.tma_d, bSG_sD(_, _, _, d_stage), bSG_gD(_, _, _, epi_m, epi_n));
            // One bulk group per D buffer, empty for a clipped subtile: tma_store_wait<S - 1>
            // then always means "the store that read this buffer is done".
            tma_store_arrive();
          }
          d_stage = (d_stage + 1) % Cfg::EpiStagesD;
        }
      }
    }
    if (etid == 0) tma_store_wait<0>();  // smem must outlive the last stores
  }
  cute::cluster_arrive_relaxed();  // no CTA exits while its peer may still signal or multicast into it
  cute::cluster_wait();
}

}  // namespace quack::detail::sm90
