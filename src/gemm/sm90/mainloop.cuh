// Mainloop of the Hopper GEMM (device code; CuTe atoms): the TMA producer that fills a ring of
// shared-memory stages with A and B tiles, and the WGMMA consumer that accumulates one output
// tile in fp32 registers from them. After CUTLASS's sm90_mma_tma_gmma_ss_warpspecialized.hpp
// (load_init / load / mma / mma_tail), without the CollectiveBuilder.
//
// Producer: one elected thread of warp 0 issues, per k tile, the TMA loads of A (BM x BK) and B
//   (BN x BK) into the next stage of a Stages-deep ring (PipelineTmaAsync: full / empty
//   mbarriers); in a 2x1 cluster it loads only its half of B, multicast to both CTAs, in a 1x2
//   cluster its half of A.
// Consumer: per k tile, one batch of WGMMAs (BK / 16 of them) reads the stage; one batch stays in
//   flight, and a stage is released once the batch reading it is done.
// Shared memory: A (BM,BK,Stages) and B (BN,BK,Stages) with 128-byte swizzle: GMMA K-major
//   atoms (8 x 64) for a K-major operand, MN-major atoms (64 x 8, repeated along K first, so one
//   TMA box is 64 (M or N) x 64 (K)) for an MN-major one, as CUTLASS's sm90 builder (OperandSmem).
//   Same bytes for every major.
// Tails: TMA zero-fills out-of-bounds loads (zeros add nothing to the sum).
// Concat B (ConcatB<Tile>, gemm_gated's concat_layout): B's N columns are two halves [gate | up]
//   in memory; the kernel reads logical column n = c + 2·j (c = 0 gate, 1 up) from memory column
//   c·N/2 + j through a hierarchical N mode ((2, N/2) : (N/2·ldb, ldb)), so the TMA box of a tile
//   is 4-dimensional (K, 2, BN/2, L) and lands in shared memory in the interleaved order the
//   gated epilogue pairs (QuACK's concat_to_interleave on B). K-major B only (the halves are
//   rows of W; an N-major B would need the innermost TMA dimension permuted).
#pragma once

#include <cute/tensor.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include <type_traits>

#include "gemm/gemm_problem.h"
#include "gemm/sm90/tile_config.cuh"

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

/// Whether tile configuration T reads B through the concat -> interleave view (T::kConcatB).
template <class T, class = void>
struct TileConcatB : std::false_type {};
template <class T>
struct TileConcatB<T, std::void_t<decltype(T::kConcatB)>> : std::bool_constant<T::kConcatB> {};

/// Tile configuration Base with B read through the concat -> interleave view (see the head
/// comment): the instances of gemm_gated's concat_layout.
template <class Base>
struct ConcatB : Base {
  static constexpr bool kConcatB = true;
  static_assert(Base::kMajorB == GMMA::Major::K, "concat B: K-major B only");
};

/// Whether tile configuration T builds the k-loop's WGMMA descriptors in vector registers
/// (T::kVectorDesc; instances_ab.txt's control "vd": ptxas then moves each descriptor to the
/// uniform registers HGMMA reads, four R2UR per WGMMA) instead of uniform_stage's.
template <class T, class = void>
struct TileVectorDesc : std::false_type {};
template <class T>
struct TileVectorDesc<T, std::void_t<decltype(T::kVectorDesc)>> : std::bool_constant<T::kVectorDesc> {};

/// Tile configuration Base with the k-loop's descriptors in vector registers (A/B control of
/// uniform_stage: the same WGMMAs and values, more issued instructions per k-tile).
template <class Base>
struct VectorDesc : Base {
  static constexpr bool kVectorDesc = true;
};

/// B's (N,K,L) shape as the TMA tensor takes it: ((2, N/2), K, L) for a concat B, else (N, K, L).
template <class Tile>
CUTE_HOST_DEVICE auto b_shape(int N, int K, int L) {
  if constexpr (TileConcatB<Tile>::value)
    return make_shape(make_shape(_2{}, N / 2), K, L);
  else
    return make_shape(N, K, L);
}

/// Kernel parameters of the mainloop (__grid_constant__): the TMA descriptors of A and B.
template <class TmaA, class TmaB>
struct MainloopParams {
  TmaA tma_a;
  TmaB tma_b;
};

/// The mainloop of tile configuration Tile with `Stages_` shared-memory stages (kernel.cuh picks
/// them from what the epilogue leaves: GemmKernel).
template <class Tile_, int Stages_>
struct CollectiveMainloop {
  using Tile = Tile_;
  using ElementAB = typename Tile::ElementAB;
  static constexpr int Stages = Stages_;
  static_assert(Stages >= 2, "mainloop needs at least 2 stages");
  static constexpr int BM = Tile::BM, BN = Tile::BN, BK = Tile::BK;
  // Bytes of one (BM + BN) x BK stage; each CTA receives all of them per stage: its A tile and
  // the whole B tile (with a 2x1 cluster both halves, one from each CTA).
  static constexpr int kStageBytes = (BM + BN) * BK * int(sizeof(ElementAB));
  static constexpr uint32_t kTxBytes = uint32_t(kStageBytes);

  using SmemLayoutA = typename OperandSmem<ElementAB, Tile::kMajorA>::template Layout<BM, BK, Stages>;  // (BM,BK,PIPE)
  using SmemLayoutB = typename OperandSmem<ElementAB, Tile::kMajorB>::template Layout<BN, BK, Stages>;  // (BN,BK,PIPE)
  using Pipeline = cutlass::PipelineTmaAsync<Stages>;
  using PipelineState = cutlass::PipelineState<Stages>;

  // Shared memory: the operand ring (1024-byte aligned, sizes multiples of 1024).
  struct TensorStorage {
    alignas(1024) ArrayEngine<ElementAB, cosize_v<SmemLayoutA>> A;
    alignas(1024) ArrayEngine<ElementAB, cosize_v<SmemLayoutB>> B;
  };

  // ---- host ----

  /// TMA descriptors of A (M,K,L) and B (N,K,L) for problem p, whose majors are the instance's.
  static auto make_params(const GemmProblem& p) {
    using TA = ElementAB;
    const int M = p.m, N = p.n, K = p.k, L = p.l;
    // Global tensors; strides in elements (64-bit), unit strides static.
    // A and B: stride 1 along K (K-major) or along M / N (MN-major), as the instance was built.
    auto operand_stride = [](auto major, int64_t ld, int64_t batch) {
      if constexpr (decltype(major)::value == GMMA::Major::K)
        return make_stride(ld, _1{}, batch);
      else
        return make_stride(_1{}, ld, batch);
    };
    auto gA = make_tensor(make_gmem_ptr(static_cast<TA const*>(p.a)),
                          make_layout(make_shape(M, K, L), operand_stride(std::integral_constant<GMMA::Major, Tile::kMajorA>{},
                                                                          p.lda, p.batch_a)));  // (M,K,L)
    auto gB = [&] {
      if constexpr (TileConcatB<Tile>::value) {
        // Logical column n = c + 2·j at memory column c·(N/2) + j (head comment). N is even.
        const int64_t half = int64_t(N / 2) * p.ldb;
        return make_tensor(make_gmem_ptr(static_cast<TA const*>(p.b)),
                           make_layout(b_shape<Tile>(N, K, L), make_stride(make_stride(half, p.ldb), _1{}, p.batch_b)));  // ((2,N/2),K,L)
      } else {
        return make_tensor(make_gmem_ptr(static_cast<TA const*>(p.b)),
                           make_layout(make_shape(N, K, L), operand_stride(std::integral_constant<GMMA::Major, Tile::kMajorB>{},
                                                                           p.ldb, p.batch_b)));  // (N,K,L)
      }
    }();
    // A: multicast to both CTAs of a 1x2 cluster, B to both of a 2x1 cluster (each CTA loads half
    // of the box); a plain load otherwise.
    using TmaLoadA = conditional_t<Tile::kClusterN == 1, SM90_TMA_LOAD, SM90_TMA_LOAD_MULTICAST>;
    auto tma_a = make_tma_copy(TmaLoadA{}, gA, SmemLayoutA{}(_, _, 0), make_shape(Int<BM>{}, Int<BK>{}),
                               Int<Tile::kClusterN>{});
    using TmaLoadB = conditional_t<Tile::kClusterM == 1, SM90_TMA_LOAD, SM90_TMA_LOAD_MULTICAST>;
    auto tma_b = make_tma_copy(TmaLoadB{}, gB, SmemLayoutB{}(_, _, 0), make_shape(Int<BN>{}, Int<BK>{}),
                               Int<Tile::kClusterM>{});
    return MainloopParams<decltype(tma_a), decltype(tma_b)>{tma_a, tma_b};
  }

  // ---- device ----

  template <class P>
  CUTE_DEVICE static void prefetch_descriptors(P const& p) {
    cute::prefetch_tma_descriptor(p.tma_a.get_tma_descriptor());
    cute::prefetch_tma_descriptor(p.tma_b.get_tma_descriptor());
  }

  /// The pipeline over `storage`; the leader thread (warp 0) initialises its barriers.
  CUTE_DEVICE static Pipeline make_pipeline(typename Pipeline::SharedStorage& storage, bool producer) {
    typename Pipeline::Params pp;
    pp.transaction_bytes = kTxBytes;
    pp.role = producer ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
    pp.is_leader = threadIdx.x == 0;
    pp.num_consumers = Tile::kStageConsumers;
    return Pipeline(storage, pp, typename Tile::HwClusterShape{});
  }

  /// Producer, once per thread: the TMA coordinate tensors of A and B and this CTA's shared-memory
  /// partitions. rank_m / rank_n: this CTA's offset inside its cluster tile.
  template <class P>
  CUTE_DEVICE static auto load_init(P const& p, TensorStorage& ts, int M, int N, int K, int L, int rank_m, int rank_n) {
    Tensor sA = make_tensor(make_smem_ptr(ts.A.begin()), SmemLayoutA{});  // (BM,BK,PIPE)
    Tensor sB = make_tensor(make_smem_ptr(ts.B.begin()), SmemLayoutB{});  // (BN,BK,PIPE)
    Tensor mA = p.tma_a.get_tma_tensor(make_shape(M, K, L));  // (M,K,L)
    Tensor mB = p.tma_b.get_tma_tensor(b_shape<Tile>(N, K, L));  // (N,K,L), N hierarchical (2,N/2) for a concat B
    // The multicast operand (B with 2x1, A with 1x2): this CTA loads its half of the box into
    // both CTAs; the other operand: the whole box, this CTA only.
    auto cta_tma_a = p.tma_a.get_slice(rank_n);
    auto cta_tma_b = p.tma_b.get_slice(rank_m);
    Tensor tAsA = cta_tma_a.partition_D(sA);  // (TMA,TMA_M,TMA_K,PIPE)
    Tensor tBsB = cta_tma_b.partition_D(sB);  // (TMA,TMA_N,TMA_K,PIPE)
    return cute::make_tuple(mA, mB, cta_tma_a, cta_tma_b, tAsA, tBsB);
  }

  /// Producer: the k_tiles stages of k-blocks [k_begin, k_begin + k_tiles) of tile (m_blk, n_blk)
  /// of batch l, from `write` on (k_begin > 0: a stream-K piece).
  template <class P, class LoadInit>
  CUTE_DEVICE static void load(P const& p, LoadInit const& in, Pipeline& pipeline, PipelineState& write, int m_blk,
                               int n_blk, int l, int k_begin, int k_tiles) {
    auto const& mA = get<0>(in);
    auto const& mB = get<1>(in);
    auto const& cta_tma_a = get<2>(in);
    auto const& cta_tma_b = get<3>(in);
    auto const& tAsA = get<4>(in);
    auto const& tBsB = get<5>(in);
    uint16_t const mcast_a = uint16_t((1u << Tile::kClusterN) - 1);
    uint16_t const mcast_b = uint16_t((1u << Tile::kClusterM) - 1);
    Tensor gA = local_tile(mA(_, _, l), select<0, 2>(typename Tile::TileShape{}), make_coord(m_blk, _));  // (BM,BK,k)
    Tensor gB = local_tile(mB(_, _, l), select<1, 2>(typename Tile::TileShape{}), make_coord(n_blk, _));  // (BN,BK,k)
    Tensor tAgA = cta_tma_a.partition_S(gA);  // (TMA,TMA_M,TMA_K,k)
    Tensor tBgB = cta_tma_b.partition_S(gB);  // (TMA,TMA_N,TMA_K,k)
    for (int k = 0; k < k_tiles; ++k) {
      pipeline.producer_acquire(write);
      auto* bar = pipeline.producer_get_barrier(write);
      copy(p.tma_a.with(*bar, mcast_a), tAgA(_, _, _, k_begin + k), tAsA(_, _, _, write.index()));
      copy(p.tma_b.with(*bar, mcast_b), tBgB(_, _, _, k_begin + k), tBsB(_, _, _, write.index()));
      ++write;
    }
  }

  /// Consumer: releases stage `stage` to the producers of the cluster. With one CTA every consumer
  /// thread arrives (CUTLASS's consumer_release; the empty barrier counts them all). With two,
  /// each empty barrier counts one arrival per consumer warpgroup of each CTA (init_barriers):
  /// one elected lane of warp w < kClusterSize of each warpgroup arrives on CTA w's barrier.
  /// CUTLASS's consumer_release spreads the same arrivals over the warpgroup through a block id
  /// and a flag computed once per thread and held across the tile loop, which 128x192 pingpong's
  /// 192 accumulators pushed to local memory (one load per k-tile); here the warp index is
  /// warp-uniform (a broadcast register) and the lane a fresh elect.sync.
  CUTE_DEVICE static void release(Pipeline& pipeline, typename Pipeline::SharedStorage& storage,
                                  PipelineState const& state) {
    if constexpr (Tile::kClusterSize == 1) {
      pipeline.consumer_release(state);
    } else {
      uint32_t const warp_in_wg = uint32_t(cutlass::canonical_warp_idx_sync()) % 4u;
      if (warp_in_wg < uint32_t(Tile::kClusterSize) && cute::elect_one_sync())
        storage.empty_barrier_[state.index()].arrive(warp_in_wg, 1u);
    }
  }

  /// Consumer, once per thread: the WGMMA descriptors of every stage of A and B for thread
  /// `etid` of its epilogue group (the tiled MMA's thread index).
  CUTE_DEVICE static auto mma_init(TensorStorage& ts, typename Tile::TiledMma const& mma, int etid) {
    Tensor sA = make_tensor(make_smem_ptr(ts.A.begin()), SmemLayoutA{});  // (BM,BK,PIPE)
    Tensor sB = make_tensor(make_smem_ptr(ts.B.begin()), SmemLayoutB{});  // (BN,BK,PIPE)
    auto thr_mma = mma.get_thread_slice(etid);
    Tensor tCsA = thr_mma.partition_A(sA);        // (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCsB = thr_mma.partition_B(sB);        // (MMA,MMA_N,MMA_K,PIPE)
    Tensor tCrA = thr_mma.make_fragment_A(tCsA);  // smem descriptors
    Tensor tCrB = thr_mma.make_fragment_B(tCsB);
    return cute::make_tuple(tCrA, tCrB);
  }

  /// Consumer: the WGMMA descriptors of stage s of tCr (mma_init's (MMA,MMA_MN,MMA_K,PIPE)):
  /// tCr(_, _, _, s) with the stage's start address passed through a warp reduction (REDUX), whose
  /// result is in a uniform register. The descriptor is warp-uniform (one per warpgroup), but
  /// ptxas holds the stage index and the per-thread base in vector registers; without the REDUX
  /// it builds every WGMMA's descriptors there and moves them with four R2UR per WGMMA. With it,
  /// the k-blocks' descriptors (DescriptorIterator::operator+: compile-time offsets added to the
  /// low word) are uniform adds. Values: those of tCr(_, _, kb, s), the same 32-bit sums. Called
  /// after warpgroup_arrive: the warp is converged there (redux.sync: all 32 lanes), and a REDUX
  /// before the full-barrier wait has ptxas copy its result through a vector register and back.
  template <class Frg>
  CUTE_DEVICE static auto uniform_stage(Frg const& tCr, int s) {
    Tensor t = tCr(_, _, _, s);  // (MMA,MMA_MN,MMA_K)
    GmmaDescriptor d = t.data().desc_;
    d.reg32_[0] = __reduce_or_sync(0xffffffffu, d.reg32_[0]);  // equal in all lanes: the OR is the value
    return make_tensor(GMMA::DescriptorIterator{d}, t.layout());
  }

  /// Consumer: acc = A·B over k_tiles stages from `read` on (one WGMMA batch in flight; a stage is
  /// released once the batch reading it is done). Leaves the last batch in flight and its stage
  /// held: mma_tail finishes them. `release` (equal to `read` on entry) tracks the oldest stage
  /// not yet released.
  template <class MmaInit, class Acc>
  CUTE_DEVICE static void mma(typename Tile::TiledMma& tiled_mma, MmaInit const& in, Pipeline& pipeline,
                              typename Pipeline::SharedStorage& storage, PipelineState& read, PipelineState& release,
                              Acc& acc, int k_tiles) {
    auto const& tCrA = get<0>(in);
    auto const& tCrB = get<1>(in);
    tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
    // The first WGMMA scales acc by 0, but its operands still read acc: zeroing it here ends the
    // previous tile's values at their last read in the epilogue, so the epilogue's temporaries
    // may take the registers of the subtiles already stored (pingpong 128x192 holds 192
    // accumulators per thread of 240 registers).
    clear(acc);
    warpgroup_fence_operand(acc);
    for (int k = 0; k < k_tiles; ++k) {
      pipeline.consumer_wait(read, pipeline.consumer_try_wait(read));
      warpgroup_fence_operand(acc);
      warpgroup_arrive();
      int const s = read.index();
      if constexpr (TileVectorDesc<Tile>::value) {
        CUTE_UNROLL
        for (int kb = 0; kb < size<2>(tCrA); ++kb) {
          cute::gemm(tiled_mma, tCrA(_, _, kb, s), tCrB(_, _, kb, s), acc);
          tiled_mma.accumulate_ = GMMA::ScaleOut::One;
        }
      } else {
        Tensor tCrA_s = uniform_stage(tCrA, s);  // (MMA,MMA_M,MMA_K)
        Tensor tCrB_s = uniform_stage(tCrB, s);  // (MMA,MMA_N,MMA_K)
        CUTE_UNROLL
        for (int kb = 0; kb < size<2>(tCrA); ++kb) {
          cute::gemm(tiled_mma, tCrA_s(_, _, kb), tCrB_s(_, _, kb), acc);
          tiled_mma.accumulate_ = GMMA::ScaleOut::One;
        }
      }
      warpgroup_commit_batch();
      warpgroup_wait<1>();  // the batch of k-1 is done: its stage may be refilled
      warpgroup_fence_operand(acc);
      if (k > 0) {
        CollectiveMainloop::release(pipeline, storage, release);
        ++release;
      }
      ++read;
    }
  }

  /// Consumer: waits for the last WGMMA batch and releases its stage.
  template <class Acc>
  CUTE_DEVICE static void mma_tail(Pipeline& pipeline, typename Pipeline::SharedStorage& storage,
                                   PipelineState& release, Acc& acc, int k_tiles) {
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc);
    if (k_tiles > 0) CollectiveMainloop::release(pipeline, storage, release);  // k_tiles ≥ 1 always (host: K = 0 never launches)
  }
};

}  // namespace quack::detail::sm90
