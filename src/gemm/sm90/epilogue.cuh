// Collective epilogue of the Hopper GEMM (device code; CuTe atoms for TMA): per output tile,
// the consumer threads of one epilogue group walk its (EpiM x EpiN) subtiles and, for each,
//   [C: TMA → smem → registers (LDSM)] → visitor on the fp32 accumulator values (epilogue_ops.cuh)
//   → one or two outputs: registers → smem (STSM) → one thread issues their TMA stores,
// with EpiStagesD buffers per output in flight per group. After CUTLASS's
// sm90_epilogue_tma_warpspecialized.hpp (subtile partitioning, ReuseSmemC) and QuACK's
// GemmSm90.epilogue / GemmActSm90 (a second output stored beside D).
//
// Shared memory, per epilogue group: D (EpiM,EpiN,EpiStagesD) subtiles, D1 (EpiM,EpiN1,EpiStagesD)
//   for a second output (EpiN1 = EpiN, or EpiN / 2 for a gated visitor's half-width postact:
//   epilogue_gated.cuh) and, unless C has D's width and is loaded into the D buffer it becomes
//   (kReuseSmemC), a C (EpiM,EpiN) subtile, each swizzled to its row width; one mbarrier per
//   group for C. (EpiInPlace, an A/B variant of the C ring: D's buffers are the ring's slots.)
// Registers <-> smem: epilogue_smem.cuh (written against WGMMA's fragment layout and TMA's
//   swizzle by hand: CuTe's tiled copies cost ~1 GB of compiler memory per TU).
// Tails: TMA clips stores along M; along N a TMA store clips exactly only when rows of the output
//   are 16-byte multiples, so otherwise the subtile crossing column N is stored with predicated
//   plain stores (store_subtile_plain), and subtiles wholly right of N are skipped.
// Outputs TMA cannot address (base, leading or batch stride not a multiple of 16 bytes: N = 50257,
//   a view at an odd column): every subtile goes through the same smem buffer and plain stores
//   (EpilogueParams::d_plain); such a C is staged into its smem buffer by the group's plain loads
//   instead of TMA, then read as in the TMA path (c_plain).
// Variants (tile-configuration wrappers: C ring sizes, in place, I/O warp, diagnostics, ...):
//   epilogue_variants.cuh.
#pragma once

#include <cute/tensor.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/array.h>
#include <cutlass/numeric_conversion.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "gemm/gemm_problem.h"
#include "gemm/sm90/epilogue_gated.cuh"
#include "gemm/sm90/epilogue_ops.cuh"
#include "gemm/sm90/epilogue_smem.cuh"
#include "gemm/sm90/epilogue_variants.cuh"
#include "gemm/sm90/tile_config.cuh"

namespace quack::detail::sm90 {

using namespace cute;

/// Stand-in for the TMA descriptor of an output an epilogue does not have.
struct NoTma {};

/// Kernel parameters of the epilogue (__grid_constant__).
template <class TmaC, class TmaD, class TmaD1, class Op>
struct EpilogueParams {
  TmaC tma_c;
  TmaD tma_d;
  TmaD1 tma_d1;  // NoTma with one output
  // Plain addresses of the outputs for the stores TMA cannot make exactly: a TMA store whose box
  // crosses column N writes the row padding up to the next 16-byte boundary on the H200
  // (test_gemm.cpp tails; every row but the last), so when a row of an output is not
  // a multiple of 16 bytes the subtile that crosses column N is stored by the consumer threads.
  void* d_ptr;
  int64_t ldd, batch_d;
  void* d1_ptr;
  int64_t ldd1, batch_d1;
  bool tail_manual;  // N·sizeof(D) % 16 != 0 (or D1's, with two outputs)
  bool d_plain;      // an output TMA cannot address: every subtile by plain stores (tma_d/d1 unused)
  bool store_d, store_d1;  // outputs written (two outputs: each may be absent)
  // C for plain loads when TMA cannot address it (c_plain; tma_c unused then).
  const void* c_ptr;
  int64_t ldc, batch_c;
  bool c_plain;
  Op op;
  bool load_c;  // C present and (op.reads_c() or a device beta)
  const float* alpha_dev;  // device scalars (null: op's host values)
  const float* beta_dev;
};

/// Whether visitor Op asks for C loaded ahead (Op::kCAhead; default false) and the output buffers
/// it then takes per output (Op::kCAheadStagesD; 0, the default: the epilogue's count without
/// the ring): CollectiveEpilogue's kCAhead, EpiStagesD.
template <class Op, class = void>
struct VisitorCAhead : std::false_type {};
template <class Op>
struct VisitorCAhead<Op, std::void_t<decltype(Op::kCAhead)>> : std::bool_constant<Op::kCAhead> {};
template <class Op, class = void>
struct VisitorCAheadStagesD : std::integral_constant<int, 0> {};
template <class Op>
struct VisitorCAheadStagesD<Op, std::void_t<decltype(Op::kCAheadStagesD)>>
    : std::integral_constant<int, Op::kCAheadStagesD> {};

/// Whether visitor Op specialises its run-time choice (Op::specialize, epilogue_ops.cuh): the
/// subtile loop then runs inside it, one copy per specialised choice (store_tile, where every C
/// load and store goes through TMA, op.specializable() and the choice has a copy).
template <class Op, class = void>
struct VisitorSpecialize : std::false_type {};
template <class Op>
struct VisitorSpecialize<Op, std::void_t<decltype(std::declval<Op const&>().specialize(std::declval<void (*)(Op&)>()))>>
    : std::true_type {};

/// Whether visitor Op splits its specialised copies and its generic path into two kernels on the
/// wide pingpong tile (Op::kSplitWide; default false: epilogue_ops.cuh).
template <class Op, class = void>
struct VisitorSplitWide : std::false_type {};
template <class Op>
struct VisitorSplitWide<Op, std::void_t<decltype(Op::kSplitWide)>> : std::bool_constant<Op::kSplitWide> {};

/// Whether visitor Op reads global memory per subtile and asks for it to be prefetched one subtile
/// ahead (Op::kPrefetch; default false): store_tile then calls op.prefetch(coord) for the tile's
/// first subtile when the tile's epilogue starts and, at each subtile, for the next one in its
/// order, before this subtile's visitor call and stores (epilogue_ops.cuh).
template <class Op, class = void>
struct VisitorPrefetch : std::false_type {};
template <class Op>
struct VisitorPrefetch<Op, std::void_t<decltype(Op::kPrefetch)>> : std::bool_constant<Op::kPrefetch> {};

/// Epilogue of tile configuration Tile with visitor Op, output dtype ElementD (output 0), C's
/// dtype ElementC (void: D's) and, for a visitor with two outputs, output 1's ElementD1 (void: D's).
template <class Tile_, class Op_, class ElementD_, class ElementC_ = void, class ElementD1_ = void>
struct CollectiveEpilogue {
  using Tile = Tile_;
  using Op = Op_;
  using ElementD = ElementD_;
  using ElementC = conditional_t<is_void_v<ElementC_>, ElementD_, ElementC_>;
  using ElementD1 = conditional_t<is_void_v<ElementD1_>, ElementD_, ElementD1_>;
  static constexpr int kOutputs = Op::kOutputs;
  static constexpr int kDiag = TileEpiDiag<Tile>::value;  // 0 in production (EpiDiag: test only)
  // What of C's path a diagnostic mode keeps (production: all): its TMA load into the buffer and
  // the c_full wait (modes 1, 3 and 5 drop them), the threads' reads of the buffer (1, 3, 4 drop them).
  static constexpr bool kLoadsCIntoSmem = kDiag != 1 && kDiag != 3 && kDiag != 5;
  static constexpr bool kReadsC = kDiag != 1 && kDiag != 3 && kDiag != 4;
  static constexpr bool kCf = TileEpiCf<Tile>::value;     // EpiCf: the conflict-free order (A/B)
  static constexpr bool kInPlace = TileEpiInPlace<Tile>::value;  // EpiInPlace: C's slot becomes D's (a3d2ip A/B, a3d2io)
  static constexpr bool kIo = TileEpiIoWarp<Tile>::value;  // EpiIoWarp: an I/O warp per group (a3d2io)
  static constexpr int kPaths = TileEpiPaths<Tile>::value;  // EpiPaths: 0 both paths, 1 the copies, 2 generic
  // run_gemm builds EpiPaths<Tile, 1> and <Tile, 2> instead of this kernel.
  static constexpr bool kSplitPaths =
      kPaths == 0 && VisitorSpecialize<Op>::value && VisitorSplitWide<Op>::value && Tile::kWidePingpong;
  static_assert(kPaths == 0 || (VisitorSpecialize<Op>::value && VisitorSplitWide<Op>::value && !kIo),
                "EpiPaths: a visitor with specialize and kSplitWide, no I/O warp");
  static_assert(kOutputs == 1 || kOutputs == 2, "one or two outputs");
  static constexpr int kEpiGroups = Tile::kEpiGroups, kEpiThreads = Tile::kEpiThreads;
  // Subtile: the tile's (EpiM, EpiN), but 32 columns wide where the tile's are 64 (pingpong, BM
  // = 64) for two outputs (with 64 x 64 subtiles a pingpong thread held its 128 accumulators,
  // the 32 values of C and 2 x 32 outputs at once and the activation gradient spilled: 568
  // bytes) and for an fp32 D or C (rows of 128 bytes, the widest swizzle of epilogue_smem.cuh).
  static constexpr bool kNarrow = kOutputs == 2 || sizeof(ElementD) == 4 || sizeof(ElementC) == 4;
  static constexpr int EpiM = Tile::EpiM, EpiN = kNarrow && Tile::EpiN == 64 ? 32 : Tile::EpiN;
  // Subtiles of 128 columns (EpiSubtile, tile suffix e128: rows of 256 bytes, two SW128 column
  // blocks) only for one 16-bit output with C of its width: there is no narrowing rule for them.
  static_assert(EpiN <= 64 || (!kNarrow && sizeof(ElementD) == 2),
                "128-column subtiles: one 16-bit output, C of D's width");
  static constexpr bool kUnswizzled = TileEpiUnswizzled<Tile>::value;  // EpiUnswizzled: e128u (A/B)
  static_assert(!kUnswizzled || (EpiN * int(sizeof(ElementD)) == 256 && kOutputs == 1 && !kNarrow),
                "EpiUnswizzled: one 16-bit output in subtiles of 128 columns");
  static constexpr int kFrg = EpiM * EpiN / kEpiThreads;  // values per thread per subtile
  using EpiTile = Shape<Int<EpiM>, Int<EpiN>>;
  // C is loaded into the D buffer it is about to become (CUTLASS's ReuseSmemC) when both have
  // the same width; the saved C buffer pays for more D buffers in flight. The stores' smem
  // reads complete about a microsecond after issue on the H200 under a full write load (ncu,
  // 8192x8192x128: 16 KB of stores in flight per SM gave 1.6 TB/s of D; cuBLAS's
  // same 128x256 tile 2.5 TB/s), so the bytes in flight per SM set the epilogue's speed.
  static constexpr bool kSameWidthC = sizeof(ElementC) == sizeof(ElementD);
  // Output 1's columns per output 0's (2 for a gated visitor: postact has N / 2 columns) and its
  // subtile width (epilogue_gated.cuh).
  static constexpr int kD1Div = D1ColsDiv<Op>::value;
  static_assert(kD1Div == 1 || (kD1Div == 2 && kOutputs == 2 && (sizeof(ElementD1) == 2 || sizeof(ElementD1) == 4)),
                "a half-width output 1 is 16-bit or fp32");
  static constexpr int EpiN1 = EpiN / kD1Div;
  static_assert(!kCf || (sizeof(ElementC) == 4 && sizeof(ElementD) == 4 && EpiN == 32 && kFrg == 16 &&
                         kOutputs == 2 && kD1Div == 1 && (sizeof(ElementD1) == 2 || sizeof(ElementD1) == 4) &&
                         Op::kNeedsC && !Op::kLinFirst),
                "EpiCf: gemm_dgated's 32-bit C and D in 64 x 32 subtiles, output 1 (postact) of D's columns");
  using EpiTile1 = Shape<Int<EpiM>, Int<EpiN1>>;
  static constexpr int kSubtile = EpiM * EpiN;  // elements per buffer stage
  static constexpr int kSubtile1 = EpiM * EpiN1;  // elements per output-1 buffer stage
  static constexpr uint32_t kCBytes = uint32_t(kSubtile * sizeof(ElementC));
  static constexpr int kSubtilesPerTile = (Tile::BM / EpiM) * (Tile::BN / EpiN);
  // Bytes of the output buffers (all groups) with d buffers per output.
  static constexpr int smem_out(int d) {
    return kEpiGroups * (d * kSubtile * int(sizeof(ElementD)) +
                         (kOutputs == 2 ? d * kSubtile1 * int(sizeof(ElementD1)) : 0));
  }
  // C's source, one of two:
  // - C loaded when its subtile's turn comes (the default), into the D buffer it is about to
  //   become (CUTLASS's ReuseSmemC) when both have the same width (the saved C buffer pays for
  //   more D buffers in flight), else into a C buffer of its own; one mbarrier per group.
  //   Output buffers in flight per output and group (kStagesD0): Tile::kEpiStages (4; 3 for the
  //   wide pingpong tile) for one output, 2 where C has its own buffer; two outputs share about
  //   the same bytes (2 each of the tile's subtile, 4 each of the narrower one; rounded up, at
  //   least 2: 2 each of 64 x 32 for the wide pingpong tile, which then keeps 4 mainloop stages
  //   instead of 5), so the mainloop keeps its stages where the division is exact.
  // - C loaded ahead (kCAhead; a visitor's kCAhead: gemm_dgated's preact): a ring of kStagesC C
  //   buffers per group of their own, one mbarrier each. The group's first kStagesC subtiles of
  //   C are loaded when its tile starts (before its mainloop: prefetch_c), and the load of
  //   subtile j + kStagesC into subtile j's buffer is issued as soon as every thread has read
  //   subtile j (store_tile), so C's DRAM round trip runs under the mainloop and under the
  //   subtiles before it instead of in series with each subtile (CUTLASS's epilogue with a
  //   source: StagesC, its load pipeline). Output buffers: the visitor's kCAheadStagesD (else
  //   kStagesD0); kStagesC: as many C buffers as fit beside them and the mainloop stages of the
  //   default layout (the ring costs no mainloop stage), at most 4 and the subtiles of a tile;
  //   none fits: the default source. A tile configuration may set both counts (EpiCAhead,
  //   device A/B variants; that may cost or give mainloop stages). With EpiInPlace (A/B) the
  //   ring's slots are output 0's buffers too (kStagesDBuffers) and loads run kStagesC − 1 ahead.
  // The stores' smem reads complete about a microsecond after issue on the H200 under a full
  // write load (ncu, 8192x8192x128: 16 KB of stores in flight per SM gave 1.6 TB/s of D;
  // cuBLAS's same 128x256 tile 2.5 TB/s), so the bytes in flight per SM set the epilogue's speed.
  static constexpr int kStagesOneOutput = kSameWidthC ? Tile::kEpiStages : 2;
  static constexpr int kStagesD0 = (kStagesOneOutput * Tile::EpiN + EpiN * kOutputs - 1) / (EpiN * kOutputs);
  static constexpr int kSmemDefault = smem_out(kStagesD0) + (kSameWidthC ? 0 : kEpiGroups * int(kCBytes));
  static constexpr int kStagesDAhead = TileEpiStagesD<Tile>::value > 0           ? TileEpiStagesD<Tile>::value
                                       : VisitorCAheadStagesD<Op>::value > 0 ? VisitorCAheadStagesD<Op>::value
                                                                             : kStagesD0;
  static constexpr int kAheadFit = (Tile::kMaxSmem - 2048 - smem_out(kStagesDAhead) -
                                    Tile::mainloop_stages(kSmemDefault) * Tile::kMainloopStageBytes) /
                                   (kEpiGroups * int(kCBytes));
  static constexpr int kAheadAuto = std::max(0, std::min(std::min(kAheadFit, 4), kSubtilesPerTile));
  static constexpr int kStagesCAhead =
      TileCAheadStages<Tile>::value >= 0 ? TileCAheadStages<Tile>::value : (VisitorCAhead<Op>::value ? kAheadAuto : 0);
  static constexpr bool kCAhead = kStagesCAhead > 0;
  static_assert(kStagesCAhead <= kSubtilesPerTile, "no more C buffers than subtiles per tile");
  // In place: 32-bit C and D (a thread's reads and writes of a subtile at the same addresses;
  // 16-bit LDSM / STSM move other lanes' rows), a ring of at least 2 (loads S − 1 ahead), no
  // diagnostic mode.
  static_assert(!kInPlace || (kCAhead && kStagesCAhead >= 2 && sizeof(ElementC) == 4 && sizeof(ElementD) == 4 &&
                              Op::kNeedsC && !Op::kLinFirst && kDiag == 0),
                "EpiInPlace: a visitor that needs 32-bit C (not kLinFirst) of D's width, a C ring of at least 2, no diag");
  static constexpr bool kReuseSmemC = kSameWidthC && !kCAhead;
  static constexpr int EpiStagesD =
      TileEpiStagesD<Tile>::value > 0 ? TileEpiStagesD<Tile>::value : kCAhead ? kStagesDAhead : kStagesD0;
  static_assert(EpiStagesD >= 2, "at least two buffers per output in flight");
  // C buffers per group (aliasing D's when reused or in place) and C mbarriers per group.
  static constexpr int kStagesC = kCAhead ? kStagesCAhead : kReuseSmemC ? EpiStagesD : 1;
  static constexpr int kCBarriers = kCAhead ? kStagesCAhead : 1;
  // Output 0's buffers per group: the ring's slots in place, else EpiStagesD (output 1 keeps
  // EpiStagesD either way).
  static constexpr int kStagesDBuffers = kInPlace ? kStagesC : EpiStagesD;
  static constexpr int kSmemOut =
      kInPlace ? kEpiGroups * (kStagesC * kSubtile * int(sizeof(ElementD)) + EpiStagesD * kSubtile1 * int(sizeof(ElementD1)))
               : smem_out(EpiStagesD);
  // Subtiles a C load runs ahead of its use: the ring's length, or one less in place (the slot
  // of the subtile just stored is busy until its stores have read it).
  static constexpr int kCAheadDist = kInPlace ? kStagesC - 1 : kStagesC;
  // C lives in output 0's buffers (no buffer of its own).
  static constexpr bool kCInD = kReuseSmemC || kInPlace;

  // Epilogue smem: a row of the subtile is EpiN elements (64 B for 16-bit, 128 B for fp32):
  // swizzle width to match (CUTLASS sm90_get_epilogue_smem_swizzle_layout_atom). Rows of 256
  // bytes (e128) take the SW128 atom twice along N: two column blocks of EpiM x 128 bytes
  // (epilogue_smem.cuh), which make_tma_copy writes as two boxes of 64 columns per subtile.
  // e128u: a row-major atom of 8 rows of 256 bytes without swizzle (Swizzle<0, 4, 3>, as CuTe
  // builds its GMMA INTER atoms), so the TMA box is the whole (EpiM, 128) subtile.
  template <class T>
  using SmemAtomRows = decltype(upcast<sizeof_bits<T>::value>(
      ComposedLayout<Swizzle<0, 4, 3>, smem_ptr_flag,
                     Layout<Shape<_8, Int<EpiN * int(sizeof_bits<T>::value)>>, Stride<Int<EpiN * int(sizeof_bits<T>::value)>, _1>>>{}));
  template <class T>
  using SmemAtomEpi = conditional_t<kUnswizzled, SmemAtomRows<T>,
                                    conditional_t<EpiN * sizeof(T) == 64, GMMA::Layout_K_SW64_Atom<T>, GMMA::Layout_K_SW128_Atom<T>>>;
  using SmemLayoutC = decltype(tile_to_shape(SmemAtomEpi<ElementC>{}, Shape<Int<EpiM>, Int<EpiN>, Int<kStagesC>>{}));     // (EpiM,EpiN,PIPE_C)
  using SmemLayoutD = decltype(tile_to_shape(SmemAtomEpi<ElementD>{}, Shape<Int<EpiM>, Int<EpiN>, Int<kStagesDBuffers>>{}));  // (EpiM,EpiN,PIPE_D)
  // Output 1: rows of EpiN1 elements (32, 64 or 128 bytes), TMA's swizzle of that width.
  template <class T, int RowBytes>
  using SmemAtomW = conditional_t<RowBytes == 32, GMMA::Layout_K_SW32_Atom<T>,
                                  conditional_t<RowBytes == 64, GMMA::Layout_K_SW64_Atom<T>, GMMA::Layout_K_SW128_Atom<T>>>;
  using SmemLayoutD1 = decltype(tile_to_shape(SmemAtomW<ElementD1, EpiN1 * int(sizeof(ElementD1))>{},
                                              Shape<Int<EpiM>, Int<EpiN1>, Int<EpiStagesD>>{}));  // (EpiM,EpiN1,PIPE_D)
  // Shared memory of the buffers (all groups): what the mainloop's stages must leave free.
  static constexpr int kSmemBytes = kSmemOut + (kCInD ? 0 : kEpiGroups * kStagesC * int(kCBytes));
  static_assert(!kInPlace || cosize_v<SmemLayoutC> == cosize_v<SmemLayoutD>, "in place: C's slots are D's buffers");
  static_assert(!kIo || (kInPlace && Tile::kPingpong && !kCf && !VisitorPrefetch<Op>::value && kOutputs == 2),
                "EpiIoWarp: in place, pingpong (one I/O warp per warpgroup), fragment order, two outputs");

  // Shared memory: D, then C and D1 where present (empty bases take no space), each 1024-byte
  // aligned with sizes multiples of 1024.
  struct StorageD {
    alignas(1024) ArrayEngine<ElementD, cosize_v<SmemLayoutD>> D[kEpiGroups];  // per epilogue group
  };
  struct StorageC {
    alignas(1024) ArrayEngine<ElementC, cosize_v<SmemLayoutC>> C[kEpiGroups];
  };
  struct StorageD1 {
    alignas(1024) ArrayEngine<ElementD1, cosize_v<SmemLayoutD1>> D1[kEpiGroups];
  };
  struct NoC {};
  struct NoD1 {};
  struct TensorStorage : StorageD, conditional_t<kCInD, NoC, StorageC>, conditional_t<kOutputs == 2, StorageD1, NoD1> {};
  struct IoBarriers {
    uint64_t d_full[kEpiGroups][kStagesC];   // the slot's outputs written (one arrival per consumer warp)
    uint64_t d1_free[kEpiGroups][EpiStagesD];  // output 1's buffer read by its store (1 arrival)
  };
  struct NoIoBarriers {};
  struct BarrierStorage : conditional_t<kIo, IoBarriers, NoIoBarriers> {
    alignas(8) uint64_t c_full[kEpiGroups][kCBarriers];  // per group: C's buffer (kCAhead: each of the ring)
  };

  // ---- host ----

  /// TMA descriptors and the visitor for problem p. Absent tensors get descriptors of present
  /// memory with valid strides (never used): C → D (or D1), D → D1; a tensor TMA cannot address
  /// (stored or read by plain accesses) gets one over A's memory (16-byte aligned, never used).
  static auto make_params(const GemmProblem& p) {
    using TD = ElementD;
    using TC = ElementC;
    using TD1 = ElementD1;
    const int M = p.m, N = p.n, L = p.l;
    const bool load_c = p.c != nullptr && (Op::kNeedsC || p.beta != 0.f || p.beta_dev != nullptr);
    const bool store_d = kOutputs == 1 || p.d != nullptr;
    const bool store_d1 = kOutputs == 2 && p.d1 != nullptr;
    auto tma_ok = [&](const void* ptr, int64_t es, int64_t ld, int64_t batch) {
      return tma_rows_addressable(ptr, es, ld, batch, L > 1);
    };
    // A row-major (M, cols, L) tensor of T over the memory at `ptr`, whose leading and batch
    // strides are given in elements of `es` bytes (another output's: converted to T's elements).
    // Memory TMA cannot address is replaced by the stand-in (A's memory, padded rows of cols).
    const int N1 = N / kD1Div;  // output 1's columns
    auto rows = [&](auto* ptr, int64_t es, int64_t ld, int64_t batch, int cols) {
      using T = std::remove_cv_t<std::remove_pointer_t<decltype(ptr)>>;
      const int64_t t = int64_t(sizeof(T));
      int64_t ldt = ld * es / t, bt = batch * es / t;
      if (!tma_ok(ptr, es, ld, batch)) {
        ptr = static_cast<decltype(ptr)>(const_cast<void*>(p.a));
        ldt = (int64_t(cols) + 16 / t - 1) / (16 / t) * (16 / t);
        bt = ldt * M;
      }
      return make_tensor(make_gmem_ptr(ptr), make_layout(make_shape(M, cols, L), make_stride(ldt, _1{}, bt)));
    };
    // Output 0's memory, or output 1's when output 0 is not stored.
    void* const d_mem = store_d ? p.d : p.d1;
    const int64_t d_ld = store_d ? p.ldd : p.ldd1, d_batch = store_d ? p.batch_d : p.batch_d1;
    const int64_t d_es = store_d ? int64_t(sizeof(TD)) : int64_t(sizeof(TD1));
    const int d_cols = store_d ? N : N1;  // the columns of the memory d_mem holds
    auto gD = rows(static_cast<TD*>(d_mem), d_es, d_ld, d_batch, d_cols);
    // Without C the C descriptor points at output 0's memory (never read: the kernel branches on load_c).
    auto gC = load_c ? rows(static_cast<TC const*>(p.c), int64_t(sizeof(TC)), p.ldc, p.batch_c, N)
                     : rows(static_cast<TC const*>(d_mem), d_es, d_ld, d_batch, d_cols);
    auto tma_c = make_tma_copy(SM90_TMA_LOAD{}, gC, SmemLayoutC{}(_, _, 0), EpiTile{}, _1{});
    auto tma_d = make_tma_copy(SM90_TMA_STORE{}, gD, SmemLayoutD{}(_, _, 0), EpiTile{}, _1{});
    auto tma_d1 = [&] {
      if constexpr (kOutputs == 2) {
        // Without output 1 its descriptor points at output 0's memory (never written through it).
        auto gD1 = store_d1 ? rows(static_cast<TD1*>(p.d1), int64_t(sizeof(TD1)), p.ldd1, p.batch_d1, N1)
                            : rows(static_cast<TD1*>(d_mem), d_es, d_ld, d_batch, std::min(N1, d_cols));
        return make_tma_copy(SM90_TMA_STORE{}, gD1, SmemLayoutD1{}(_, _, 0), EpiTile1{}, _1{});
      } else {
        return NoTma{};
      }
    }();
    const bool tail_manual = (store_d && (int64_t(N) * int64_t(sizeof(TD))) % 16 != 0) ||
                             (store_d1 && (int64_t(N1) * int64_t(sizeof(TD1))) % 16 != 0);
    const bool d_plain = (store_d && !tma_ok(p.d, sizeof(TD), p.ldd, p.batch_d)) ||
                         (store_d1 && !tma_ok(p.d1, sizeof(TD1), p.ldd1, p.batch_d1));
    const bool c_plain = load_c && !tma_ok(p.c, sizeof(TC), p.ldc, p.batch_c);
    using P = EpilogueParams<decltype(tma_c), decltype(tma_d), decltype(tma_d1), Op>;
    return P{tma_c,     tma_d,    tma_d1,   p.d,     p.ldd,    p.batch_d,           p.d1,    p.ldd1,
             p.batch_d1, tail_manual, d_plain, store_d, store_d1, p.c,                 p.ldc,   p.batch_c,
             c_plain,   Op::make(p, load_c), load_c, p.alpha_dev, p.beta_dev};
  }

  // ---- device ----

  template <class P>
  CUTE_DEVICE static void prefetch_descriptors(P const& p) {
    cute::prefetch_tma_descriptor(p.tma_c.get_tma_descriptor());
    cute::prefetch_tma_descriptor(p.tma_d.get_tma_descriptor());
    if constexpr (kOutputs == 2) cute::prefetch_tma_descriptor(p.tma_d1.get_tma_descriptor());
  }

  /// One thread initialises the C mbarriers (before fence_barrier_init and the cluster sync).
  CUTE_DEVICE static void init_barriers(BarrierStorage& bs, bool leader) {
    if (leader)
      for (int g = 0; g < kEpiGroups; ++g)
        for (int s = 0; s < kCBarriers; ++s) cutlass::arch::ClusterTransactionBarrier::init(&bs.c_full[g][s], 1);
    if constexpr (kIo) {
      if (leader)
        for (int g = 0; g < kEpiGroups; ++g) {
          for (int s = 0; s < kStagesC; ++s) cutlass::arch::ClusterBarrier::init(&bs.d_full[g][s], kEpiThreads / 32);
          for (int s = 0; s < EpiStagesD; ++s) cutlass::arch::ClusterBarrier::init(&bs.d1_free[g][s], 1);
        }
    }
  }

  /// Stores the (EpiM, EpiN) subtile staged in `buf` (one buffer stage) at out(m0.., n0..) of
  /// batch l with plain stores by the epilogue group's threads, clipped to (M, N): every subtile
  /// of an output TMA cannot address (EpilogueParams::d_plain), and the subtile that crosses
  /// column N when rows are not 16-byte multiples (see EpilogueParams::d_ptr). Thread etid takes
  /// the column pairs etid, etid + kEpiThreads, ... in row-major order (a warp covers 64
  /// consecutive elements: coalesced); a pair is one 2-element store where its address is
  /// aligned to it, else two. Not unrolled: the epilogue's registers sit beside up to 192
  /// accumulators. The caller's next barrier orders these smem reads before the buffer is
  /// rewritten.
  template <class T>
  CUTE_DEVICE static void store_subtile_plain(T const* buf, void* ptr, int64_t ld, int64_t batch, int M, int N,
                                              int l, int m0, int n0, int etid) {
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "16-bit or fp32 outputs");
    using Half = conditional_t<sizeof(T) == 2, uint16_t, uint32_t>;  // one element's bits
    using Pair = conditional_t<sizeof(T) == 2, uint32_t, uint64_t>;  // two elements' bits
    constexpr int kPairsPerRow = EpiN / 2;
    char* const base = static_cast<char*>(ptr) + int64_t(l) * batch * int64_t(sizeof(T));
#pragma unroll 1
    for (int q = etid; q < EpiM * kPairsPerRow; q += kEpiThreads) {
      int const r = q / kPairsPerRow, c = 2 * (q % kPairsPerRow);
      int const row = m0 + r, col = n0 + c;
      if (row >= M || col >= N) continue;
      Half* const dst = reinterpret_cast<Half*>(base + (int64_t(row) * ld + col) * int64_t(sizeof(T)));
      Pair const v = Pair(subtile_pair_bits<EpiN, EpiM, kUnswizzled>(buf, r, c));
      if (col + 1 < N && reinterpret_cast<uintptr_t>(dst) % sizeof(Pair) == 0) {
        *reinterpret_cast<Pair*>(dst) = v;
      } else {
        dst[0] = Half(v);
        if (col + 1 < N) dst[1] = Half(v >> (8 * sizeof(Half)));
      }
    }
  }

  /// Stages C's (EpiM, EpiN) subtile at C(m0.., n0..) of batch l into the swizzled buffer `buf`
  /// (one stage of C's smem layout, which load_subtile reads) with plain loads by the epilogue
  /// group's threads, 0 outside (M, N) as TMA's zero fill: C's memory TMA cannot address
  /// (EpilogueParams::c_plain). Thread etid takes the column pairs etid, etid + kEpiThreads, ...
  /// in row-major order (as store_subtile_plain); each element is read on its own (the pair need
  /// not be aligned), the pair written as one shared store. Not unrolled: the values of C then
  /// reach the visitor through the TMA path's LDSM, a few packed registers instead of kFrg
  /// loads in flight beside up to 192 accumulators.
  CUTE_DEVICE static void load_subtile_plain(ElementC* buf, void const* ptr, int64_t ld, int64_t batch, int M, int N,
                                             int l, int m0, int n0, int etid) {
    static_assert(sizeof(ElementC) == 2 || sizeof(ElementC) == 4, "16-bit or fp32 C");
    using Half = conditional_t<sizeof(ElementC) == 2, uint16_t, uint32_t>;  // one element's bits
    constexpr int kPairsPerRow = EpiN / 2;
    constexpr int kRowBytes = EpiN * int(sizeof(ElementC));
    char const* const base = static_cast<char const*>(ptr) + int64_t(l) * batch * int64_t(sizeof(ElementC));
    uint32_t const sbase = cute::cast_smem_ptr_to_uint(buf);
#pragma unroll 1
    for (int q = etid; q < EpiM * kPairsPerRow; q += kEpiThreads) {
      int const r = q / kPairsPerRow, c = 2 * (q % kPairsPerRow);
      int const row = m0 + r, col = n0 + c;
      Half lo = 0, hi = 0;
      if (row < M) {
        Half const* const src =
            reinterpret_cast<Half const*>(base + (int64_t(row) * ld + col) * int64_t(sizeof(ElementC)));
        if (col < N) lo = src[0];
        if (col + 1 < N) hi = src[1];
      }
      uint32_t const a = sbase + buffer_offset<kRowBytes, EpiM, kUnswizzled>(uint32_t(r), uint32_t(c) * uint32_t(sizeof(ElementC)));
      if constexpr (sizeof(ElementC) == 2)
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(uint32_t(lo) | (uint32_t(hi) << 16)));
      else
        asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n" ::"r"(a), "r"(lo), "r"(hi));
    }
  }

  // Per consumer thread: its group's buffers, the visitor (device scalars read once per CTA) and
  // the count of subtiles stored modulo kSubCountWrap, which gives the buffer stage (count modulo
  // EpiStagesD) and, where C comes through TMA (one C load per subtile stored, issued in the
  // order the subtiles are stored), C's buffer and barrier phase: with kCAhead the count's C load
  // is the (count / kStagesC)-th into buffer count % kStagesC, so the phase is that quotient's
  // parity; else the count's parity (one barrier). The wrap is a multiple of both periods. One
  // register for all: it is held across the mainloop, beside 192 accumulators on the 128x192
  // pingpong tile.
  TensorStorage& ts;
  BarrierStorage& bs;
  int grp, etid;
  Op op;
  bool load_c;
  int sub_count = 0;

  static constexpr int kSubCountWrap = 2 * EpiStagesD * kCBarriers;

  template <class P>
  CUTE_DEVICE CollectiveEpilogue(P const& p, TensorStorage& ts_, BarrierStorage& bs_, int grp_, int etid_)
      : ts(ts_), bs(bs_), grp(grp_), etid(etid_), op(p.op) {
    // Device scalars are read once per CTA; a device beta of 0 means C is not read.
    op.load_scalars(p.alpha_dev, p.beta_dev);
    load_c = p.load_c && op.reads_c();
  }

  /// This thread's part of a subtile's output 1 into the group's buffer `buf`, in the layout its
  /// TMA store reads (conflict-free order, half-width pairs, or the fragment order).
  CUTE_DEVICE void write_d1_smem(cutlass::Array<ElementD1, kFrg> const& d1, int buf) const {
    if constexpr (kCf)
      store_subtile_cf<EpiN>(d1, ts.D1[grp].begin() + buf * kSubtile, etid);
    else if constexpr (kD1Div == 2)
      store_half_subtile<EpiN1>(d1, ts.D1[grp].begin() + buf * kSubtile1, etid);
    else
      store_subtile<EpiN>(d1, ts.D1[grp].begin() + buf * kSubtile, etid);
  }

  /// The group's C buffers: output 0's where C is loaded into the buffer it becomes (reuse, in
  /// place; same layout, same width), else C's own.
  CUTE_DEVICE static ElementC* c_buffers(TensorStorage& ts, int grp) {
    if constexpr (kCInD)
      return reinterpret_cast<ElementC*>(ts.D[grp].begin());
    else
      return ts.C[grp].begin();
  }
  CUTE_DEVICE ElementC* c_buffers() const { return c_buffers(ts, grp); }

  /// Whether this launch reads C through TMA (store_tile's TMA branch): the visitor needs C, or
  /// it is read (load_c), and TMA can address it.
  template <class P>
  CUTE_DEVICE bool c_via_tma(P const& p) const {
    if constexpr (kDiag == 1) return false;  // diagnostic: C never loaded
    return (Op::kNeedsC || load_c) && !p.c_plain;
  }

  /// kCAhead: issues the C loads of the first kCAheadDist subtiles of tile (m_blk, n_blk) of
  /// batch l (those inside (M, N), in store_tile's order) into the group's C ring, counts
  /// sub_count, sub_count + 1, ...: call it when the tile starts, before its mainloop, with the C
  /// ring free (the previous tile's store_tile has read every buffer: every load issued for a
  /// tile is of one of its subtiles inside (M, N), which store_tile waits for and reads; in place,
  /// the slots these loads take are those whose stores the previous tile's last subtile waited
  /// for, and the slot of its last stores is left to the first subtile's issue). One thread
  /// (etid 0) issues; nothing otherwise.
  template <class P>
  CUTE_DEVICE void prefetch_c(P const& p, int M, int N, int L, int m_blk, int n_blk, int l) const {
    if constexpr (kIo)
      if (io_on(p)) return;  // the I/O warp loads C (io_loop)
    if constexpr (kCAhead) {
      if (etid == 0 && c_via_tma(p)) {
#pragma unroll 1
        for (int s = 0; s < kCAheadDist; ++s)
          issue_c_ahead(p, M, N, L, m_blk, n_blk, l, 0, 0, s, (sub_count + s) % kStagesC);
      }
    }
  }

  /// The epilogue of output tile (m_blk, n_blk) of batch l from the accumulator `acc`
  /// ((MMA,MMA_M,MMA_N) fp32: BN / EpiN subtiles' fragments along its first mode, one per EpiM rows).
  template <class P, class Acc>
  CUTE_DEVICE void store_tile(P const& p, Acc const& acc, int M, int N, int L, int m_blk, int n_blk, int l) {
    static_assert(decltype(size<0>(acc))::value == kFrg * (Tile::BN / EpiN) &&
                      decltype(size<1>(acc))::value == Tile::BM / EpiM && decltype(size<2>(acc))::value == 1,
                  "the accumulator holds BN / EpiN subtiles' fragments along its first mode, one per EpiM rows");
    if constexpr (kIo) {
      if (io_on(p)) {
        if constexpr (VisitorSpecialize<Op>::value)
          if (op.specialize([&](auto& v) CUTLASS_LAMBDA_FUNC_INLINE { store_tile_io(v, p, acc, M, N, m_blk, n_blk, l); }))
            return;
        store_tile_io(op, p, acc, M, N, m_blk, n_blk, l);
        return;
      }
    }
    if constexpr (kPaths == 1) {
      // Launched only where specialize takes a copy (specialized_launch).
      op.specialize([&](auto& v) CUTLASS_LAMBDA_FUNC_INLINE { store_subtiles_split<true>(v, p, acc, M, N, L, m_blk, n_blk, l); });
      return;
    } else if constexpr (kPaths == 2) {
      store_subtiles_split<false>(op, p, acc, M, N, L, m_blk, n_blk, l);
      return;
    } else if constexpr (VisitorSpecialize<Op>::value && kPaths == 0) {
      if (tma_only(p) && op.specializable() &&
          op.specialize([&](auto& v) CUTLASS_LAMBDA_FUNC_INLINE { store_subtiles<true>(v, p, acc, M, N, L, m_blk, n_blk, l); }))
        return;
    }
    store_subtiles<false>(op, p, acc, M, N, L, m_blk, n_blk, l);
  }

  /// kSplitPaths (host): whether launch parameters p take the kernel of the specialised copies
  /// (EpiPaths<Tile, 1>): every C load and store through TMA and a copy for the visitor's choice,
  /// the condition under which store_tile's one kernel runs a copy.
  template <class P>
  static bool specialized_launch(P const& p) {
    return tma_only(p) && p.op.specialized();
  }

  /// Whether every C load and output store of this launch goes through TMA (no plain loads or
  /// stores: the same for every thread of the launch).
  template <class P>
  CUTE_HOST_DEVICE static bool tma_only(P const& p) {
    return !p.c_plain && !p.d_plain && !p.tail_manual;
  }

  // The subtile loop of store_tile's paths (store_subtiles, store_subtiles_split,
  // store_tile_io), written before a statement: the statement runs for each subtile (epi_m,
  // epi_n) of tile (m_blk, n_blk) whose first row m0 and first column n0 lie inside (M, N), in
  // store_tile's order (row-major: the order valid_subtiles, issue_c_ahead and io_loop count
  // in); the statement's last step advances sub_count. A subtile wholly outside the output has
  // nothing to load or store and takes no count (the test is group-uniform). Both loops unroll: epi_m and
  // epi_n are constants in each copy of the statement, so the accumulator's fragments stay in
  // registers. A macro, not a function taking the statement as a lambda: nvcc 13.0 optimises a
  // lambda's body on its own before inlining it and compiles the kernels to other SASS
  // (store_subtiles' flag of the plain stores in a 16-bit register instead of a predicate); the
  // skip a `continue`, as the loop's own: `if (inside) statement` compiles gemm_dgated's a3d2io
  // kernel to other SASS. _Pragma, not CUTE_UNROLL (a `#pragma` line, which a macro cannot
  // produce). In the statement, `continue` would skip its sub_count step and `break` leave only
  // the epi_n loop: neither is used.
#define QUACK_FOR_EACH_SUBTILE(M, N, m_blk, n_blk)                                                \
  _Pragma("unroll")                                                                                \
  for (int epi_m = 0; epi_m < Tile::BM / EpiM; ++epi_m)                                            \
    _Pragma("unroll")                                                                              \
    for (int epi_n = 0; epi_n < Tile::BN / EpiN; ++epi_n)                                          \
      if (int const m0 = (m_blk) * Tile::BM + epi_m * EpiM, n0 = (n_blk) * Tile::BN + epi_n * EpiN; \
          n0 >= (N) || m0 >= (M))                                                                  \
        continue;                                                                                  \
      else

  /// store_tile's subtiles with visitor `op` (the member or its specialised copy: the parameter
  /// hides the member).
  template <bool kTma, class V, class P, class Acc>
  CUTE_DEVICE void store_subtiles(V& op, P const& p, Acc const& acc, int M, int N, int L, int m_blk, int n_blk,
                                  int l) {
    ElementC* const c_smem = c_buffers();
    ElementD* const d_smem = ts.D[grp].begin();
    Tensor sC = as_position_independent_swizzle_tensor(make_tensor(make_smem_ptr(c_smem), SmemLayoutC{}));  // (EpiM,EpiN,PIPE_C)
    Tensor sD = as_position_independent_swizzle_tensor(make_tensor(make_smem_ptr(d_smem), SmemLayoutD{}));  // (EpiM,EpiN,PIPE_D)
    auto tma_d_blk = p.tma_d.get_slice(Int<0>{});
    auto tma_c_blk = p.tma_c.get_slice(Int<0>{});
    Tensor bGS_sC = tma_c_blk.partition_D(sC);  // (TMA,TMA_M,TMA_N,PIPE_C)
    Tensor bSG_sD = tma_d_blk.partition_S(sD);  // (TMA,TMA_M,TMA_N,PIPE_D)
    Tensor gC = gmem_subtiles(p.tma_c, M, N, L, l, m_blk, n_blk);  // (EpiM,EpiN,EPI_M,EPI_N)
    Tensor gD = gmem_subtiles(p.tma_d, M, N, L, l, m_blk, n_blk);  // (EpiM,EpiN,EPI_M,EPI_N)
    Tensor bGS_gC = tma_c_blk.partition_S(gC);  // (TMA,TMA_M,TMA_N,EPI_M,EPI_N)
    Tensor bSG_gD = tma_d_blk.partition_D(gD);  // (TMA,TMA_M,TMA_N,EPI_M,EPI_N)
    auto epi_sync = [this] { cutlass::arch::NamedBarrier::sync(kEpiThreads, 1 + grp); };
    constexpr bool kPrefetch = VisitorPrefetch<Op>::value;
    if constexpr (kPrefetch) op.template prefetch<kFrg>(SubtileCoord{m_blk * Tile::BM, n_blk * Tile::BN, etid, l});
    QUACK_FOR_EACH_SUBTILE(M, N, m_blk, n_blk) {
      if constexpr (kPrefetch) {
        // The next subtile in this order (its global reads then overlap this subtile's stores).
        int const next_m = epi_n + 1 < Tile::BN / EpiN ? epi_m : epi_m + 1;
        int const next_n = epi_n + 1 < Tile::BN / EpiN ? epi_n + 1 : 0;
        if (next_m < Tile::BM / EpiM)
          op.template prefetch<kFrg>(
              SubtileCoord{m_blk * Tile::BM + next_m * EpiM, n_blk * Tile::BN + next_n * EpiN, etid, l});
      }
      int const d_stage = sub_count % EpiStagesD;
      int const c_stage = kCAhead ? sub_count % kStagesC : kReuseSmemC ? d_stage : 0;
      int const d_slot = kInPlace ? c_stage : d_stage;  // output 0's buffer (in place: C's slot)
      uint32_t const c_phase = uint32_t(kCAhead ? sub_count / kStagesC : sub_count) & 1u;
      cutlass::Array<float, kFrg> x;  // this subtile's accumulator values (fragment order)
      if constexpr (kCf) {
        // The cf order: slot i of a thread of odd lane / 4 holds fragment value i ^ 8.
        bool const flip = cf_flip(etid) != 0u;
        CUTE_UNROLL
        for (int i = 0; i < kFrg; ++i) {
          float const a = acc(epi_n * kFrg + i, epi_m, 0), b = acc(epi_n * kFrg + (i ^ 8), epi_m, 0);
          x[i] = flip ? b : a;
        }
      } else {
        CUTE_UNROLL
        for (int i = 0; i < kFrg; ++i) x[i] = acc(epi_n * kFrg + i, epi_m, 0);
      }
      cutlass::Array<float, kFrg> out[kOutputs];
      SubtileCoord const coord{m0, n0, etid, l};
      // C's values: from global memory (c_plain) or through TMA and smem. A kLinFirst visitor
      // (epilogue_ops.cuh) gets x = alpha·x + beta·C formed in place as C arrives, so C's
      // values die at once, then one finish call (its code appears once); a kNeedsC visitor
      // (an activation gradient: C is the preact) is called once after either source;
      // LinearCombination is called in each branch (c null when C is not read).
      constexpr bool kLin = Op::kLinFirst;
      constexpr bool kOneCall = kLin || Op::kNeedsC;
      cutlass::Array<float, kFrg> cf;
      // Either source's last step, once C's subtile is in buffer c_stage: this thread's C values
      // into cf in x's order (read false: a diagnostic's synthetic C, the buffer not read), then
      // the visitor's call that takes them here (kLinFirst's alpha·x + beta·C; LinearCombination).
      auto take_c = [&](auto read) CUTLASS_LAMBDA_FUNC_INLINE {
        if constexpr (decltype(read)::value) {
          cutlass::Array<ElementC, kFrg> c;
          if constexpr (kCf)
            load_subtile_cf<EpiN>(c, c_smem + c_stage * kSubtile, etid);
          else
            load_subtile<EpiN, EpiM, kUnswizzled>(c, c_smem + c_stage * kSubtile, etid);
          cf = cutlass::NumericArrayConverter<float, ElementC, kFrg>{}(c);
        } else {
          // Diagnostic: C not read; a run-time value (not foldable): packed (1, ~1) for a 16-bit pair.
          CUTE_UNROLL
          for (int i = 0; i < kFrg; ++i) cf[i] = __uint_as_float(0x3f803f80u + (uint32_t(etid + i) & 7u));
        }
        if constexpr (kLin)
          op.lin.apply(x, x, &cf);
        else if constexpr (!kOneCall)
          op(out, x, &cf, coord);
      };
      if (!kTma && (Op::kNeedsC || load_c) && p.c_plain) {
        // C staged into its buffer by the group's plain loads, then read as in the TMA path.
        // Every thread's reads of the buffer (the previous subtile's LDSM, or a clipped store's
        // reads of the D buffer it aliases) came before the last epi_sync; with reuse, the TMA
        // store that read the buffer must also be done before any thread writes it.
        if constexpr (kReuseSmemC) {
          if (etid == 0) tma_store_wait<EpiStagesD - 1>();
          epi_sync();
        }
        load_subtile_plain(c_smem + c_stage * kSubtile, p.c_ptr, p.ldc, p.batch_c, M, N, l, m0, n0, etid);
        epi_sync();  // the whole subtile is in the buffer
        take_c(std::true_type{});
      } else if (Op::kNeedsC || load_c) {
        if constexpr (!kCAhead) {
          // Every thread's reads of this C buffer (the previous subtile's LDSM, or a clipped
          // store's reads of the D buffer it aliases) came before the last epi_sync; with
          // reuse, the TMA store that read the buffer must also be done.
          if (etid == 0) {
            if constexpr (kReuseSmemC) tma_store_wait<EpiStagesD - 1>();
            cutlass::arch::fence_view_async_shared();  // generic reads before the async write
            cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&bs.c_full[grp][0], kCBytes);
            copy(p.tma_c.with(bs.c_full[grp][0]), bGS_gC(_, _, _, epi_m, epi_n), bGS_sC(_, _, _, c_stage));
          }
        }
        // kCAhead: issued by prefetch_c or kStagesC subtiles earlier (issue_c_ahead).
        if constexpr (kLoadsCIntoSmem)
          cutlass::arch::ClusterTransactionBarrier::wait(&bs.c_full[grp][kCAhead ? c_stage : 0], c_phase);
        take_c(std::bool_constant<kReadsC>{});
      } else if constexpr (kLin) {
        op.lin.apply(x, x, static_cast<cutlass::Array<float, kFrg> const*>(nullptr));
      } else if constexpr (!kOneCall) {
        op(out, x, static_cast<cutlass::Array<float, kFrg> const*>(nullptr), coord);
      }
      if constexpr (kLin)
        op.finish(out, x, coord);
      else if constexpr (kOneCall)
        op(out, x, &cf, coord);
      cutlass::Array<ElementD, kFrg> const d = cutlass::NumericArrayConverter<ElementD, float, kFrg>{}(out[0]);
      cutlass::Array<ElementD1, kFrg> d1;
      if constexpr (kOutputs == 2) d1 = cutlass::NumericArrayConverter<ElementD1, float, kFrg>{}(out[kOutputs - 1]);
      bool const manual = !kTma && (p.d_plain || (p.tail_manual && n0 + EpiN > N));
      bool const store_d = kOutputs == 1 || p.store_d;
      bool const store_d1 = kOutputs == 2 && p.store_d1;
      if constexpr (!kInPlace) {
        if (etid == 0) tma_store_wait<EpiStagesD - 1>();  // the stores that read d_stage are done
        epi_sync();  // ... and every thread's LDSM of C from it (reuse)
        if constexpr (kCAhead) {
          // Every thread's LDSM of C buffer c_stage came before that sync: it takes the subtile
          // kStagesC places further in this tile's order, if any (count sub_count + kStagesC:
          // same buffer, next phase).
          if (etid == 0 && c_via_tma(p))
            issue_c_ahead(p, M, N, L, m_blk, n_blk, l, epi_m, epi_n, kStagesC, c_stage);
        }
      }
      // In place, no wait here: slot c_stage's last stores (kStagesC subtiles back) were done
      // before its C load was issued, and output 1's buffer d_stage was released by the
      // previous subtile's wait and group barrier (below). This thread's writes of the slot
      // follow its own reads of the same addresses.
      if (store_d) {
        if constexpr (kCf)
          store_subtile_cf<EpiN>(d, d_smem + d_slot * kSubtile, etid);
        else
          store_subtile<EpiN, EpiM, kUnswizzled>(d, d_smem + d_slot * kSubtile, etid);
      }
      if constexpr (kOutputs == 2) {
        if (store_d1) write_d1_smem(d1, d_stage);
      }
      cutlass::arch::fence_view_async_shared();  // smem writes visible to the TMA unit
      if constexpr (kInPlace) {
        // Every store issued before this subtile's (the previous subtile's slot and output 1
        // buffer) has read shared memory: after the barrier the next subtile may write its
        // output 1 buffer and that slot may take a C load.
        if (etid == 0) tma_store_wait<0>();
      }
      epi_sync();
      if (manual) {
        if (store_d)
          store_subtile_plain(d_smem + d_slot * kSubtile, p.d_ptr, p.ldd, p.batch_d, M, N, l, m0, n0, etid);
        if constexpr (kOutputs == 2) {
          if (store_d1) {
            if constexpr (kD1Div == 2)
              store_half_subtile_clipped<EpiM, EpiN1, kEpiThreads>(ts.D1[grp].begin() + d_stage * kSubtile1, p.d1_ptr,
                                                                   p.ldd1, p.batch_d1, M, N / 2, l, m0, n0 / 2, etid);
            else
              store_subtile_plain(ts.D1[grp].begin() + d_stage * kSubtile, p.d1_ptr, p.ldd1, p.batch_d1, M, N, l,
                                  m0, n0, etid);
          }
        }
      }
      if (etid == 0) {
        if constexpr (kInPlace) {
          // The subtile kStagesC − 1 places further in this tile's order (count sub_count +
          // kStagesC − 1) into the slot the previous subtile's stores have just read (waited
          // above; every thread's plain reads of it came before the barrier), ahead of this
          // subtile's stores.
          if (c_via_tma(p))
            issue_c_ahead(p, M, N, L, m_blk, n_blk, l, epi_m, epi_n, kCAheadDist,
                          (sub_count + kCAheadDist) % kStagesC);
        }
        if (kDiag != 2 && !manual) {  // diagnostic mode 2: no stores (empty bulk groups)
          if (store_d) copy(p.tma_d, bSG_sD(_, _, _, d_slot), bSG_gD(_, _, _, epi_m, epi_n));
          if constexpr (kOutputs == 2)
            if (store_d1) store_d1_subtile(p, l, m_blk, n_blk, epi_m, epi_n, M, N, L, d_stage);
        }
        // One bulk group per buffer stage (both outputs' stores; empty for a clipped
        // subtile): tma_store_wait<S - 1> then always means "the stores that read this stage
        // are done".
        tma_store_arrive();
      }
      sub_count = (sub_count + 1) % kSubCountWrap;
    }
  }

  /// The subtile loop of the two kernels of kSplitPaths (EpiPaths). kTma: the copies' kernel, `op`
  /// a specialised copy, every C load and store through TMA. !kTma: the generic kernel, the
  /// visitor's choice made a constant per subtile (specialize_each: each choice's subtile one
  /// stretch of code; a switch inside each visitor call spilled 124 / 132 bytes where its cases
  /// merged), C's plain loads and the outputs' plain stores where TMA cannot make them, as
  /// store_subtiles'. store_subtiles' steps with two changes: the barrier that frees the output
  /// buffers comes before the visitor instead of after it, and each subtile runs in two halves
  /// (column blocks 0-1, then 2-3 of its 32 columns: 8 of its 16 values) of C read, visitor,
  /// outputs written into their buffers. store_subtiles holds a subtile's 16 C words, then its
  /// 16 dpreact words and 8 postact registers, up to that barrier; at a tile's first subtile,
  /// beside its 176 other accumulators and the held addresses, ptxas spilled (the copies: 20
  /// bytes, values reloaded once per tile). Here at most half a subtile's C and outputs are
  /// live. Both buffers are written whether or not their output is stored (an absent output's
  /// buffer is never read: neither its TMA store nor its plain stores are issued), so the writes
  /// need not wait for the visitor's last value. C's next load into the ring (issue_c_ahead)
  /// follows the second barrier, before which every thread has read the buffer. Values,
  /// conversions and addresses are store_subtiles': the results are bit-identical. The visitor
  /// is called on each half (N = kFrg / 2; a kSplitWide visitor's values do not depend on their
  /// place in the fragment: epilogue_ops.cuh).
  template <bool kTma, class V, class P, class Acc>
  CUTE_DEVICE void store_subtiles_split(V& op, P const& p, Acc const& acc, int M, int N, int L, int m_blk, int n_blk,
                                        int l) {
    static_assert(kCAhead && !kInPlace && !kCf && kDiag == 0 && !kUnswizzled && kOutputs == 2 && kD1Div == 1 &&
                      Op::kNeedsC && !Op::kLinFirst && !VisitorPrefetch<Op>::value && sizeof(ElementC) == 4 &&
                      sizeof(ElementD) == 4 && (sizeof(ElementD1) == 2 || sizeof(ElementD1) == 4) && EpiN == 32,
                  "kSplitPaths: a C ring of 32-bit C, 32-bit output 0 and output 1 of its columns, 32-column subtiles");
    constexpr int kHalf = kFrg / 2;
    ElementC* const c_smem = c_buffers();
    ElementD* const d_smem = ts.D[grp].begin();
    ElementD1* const d1_smem = ts.D1[grp].begin();
    Tensor sD = as_position_independent_swizzle_tensor(make_tensor(make_smem_ptr(d_smem), SmemLayoutD{}));  // (EpiM,EpiN,PIPE_D)
    auto tma_d_blk = p.tma_d.get_slice(Int<0>{});
    Tensor bSG_sD = tma_d_blk.partition_S(sD);  // (TMA,TMA_M,TMA_N,PIPE_D)
    Tensor gD = gmem_subtiles(p.tma_d, M, N, L, l, m_blk, n_blk);  // (EpiM,EpiN,EPI_M,EPI_N)
    Tensor bSG_gD = tma_d_blk.partition_D(gD);  // (TMA,TMA_M,TMA_N,EPI_M,EPI_N)
    auto epi_sync = [this] { cutlass::arch::NamedBarrier::sync(kEpiThreads, 1 + grp); };
    QUACK_FOR_EACH_SUBTILE(M, N, m_blk, n_blk) {
      int const d_stage = sub_count % EpiStagesD;
      int const c_stage = sub_count % kStagesC;
      uint32_t const c_phase = uint32_t(sub_count / kStagesC) & 1u;
      ElementC* const c_buf = c_smem + c_stage * kSubtile;
      ElementD* const d_buf = d_smem + d_stage * kSubtile;
      ElementD1* const d1_buf = d1_smem + d_stage * kSubtile;
      if (etid == 0) tma_store_wait<EpiStagesD - 1>();  // the stores that read d_stage are done
      epi_sync();  // ... and every thread's reads of the buffers of earlier subtiles
      if (!kTma && p.c_plain) {
        load_subtile_plain(c_buf, p.c_ptr, p.ldc, p.batch_c, M, N, l, m0, n0, etid);
        epi_sync();  // the whole subtile is in the buffer
      } else {
        cutlass::arch::ClusterTransactionBarrier::wait(&bs.c_full[grp][c_stage], c_phase);
      }
      SubtileCoord const coord{m0, n0, etid, l};
      auto half = [&](auto const& v, auto h) {
        constexpr int kH = decltype(h)::value;
        cutlass::Array<float, kHalf> x;
        CUTE_UNROLL
        for (int i = 0; i < kHalf; ++i) x[i] = acc(epi_n * kFrg + kH * kHalf + i, epi_m, 0);
        cutlass::Array<ElementC, kHalf> c;
        load_subtile<EpiN, 0, false, kH>(c, c_buf, etid);
        cutlass::Array<float, kHalf> const cf = cutlass::NumericArrayConverter<float, ElementC, kHalf>{}(c);
        cutlass::Array<float, kHalf> out[kOutputs];
        v(out, x, &cf, coord);
        store_subtile<EpiN, 0, false, kH>(cutlass::NumericArrayConverter<ElementD, float, kHalf>{}(out[0]), d_buf,
                                          etid);
        store_subtile<EpiN, 0, false, kH>(cutlass::NumericArrayConverter<ElementD1, float, kHalf>{}(out[1]), d1_buf,
                                          etid);
      };
      auto halves = [&](auto const& v) CUTLASS_LAMBDA_FUNC_INLINE {
        half(v, Int<0>{});
        half(v, Int<1>{});
      };
      if constexpr (kTma)
        halves(op);
      else
        op.specialize_each(halves);
      cutlass::arch::fence_view_async_shared();  // smem writes visible to the TMA unit
      epi_sync();  // every thread's outputs written and its reads of C's buffer done
      bool const manual = !kTma && (p.d_plain || (p.tail_manual && n0 + EpiN > N));
      if (manual) {
        if (p.store_d) store_subtile_plain(d_buf, p.d_ptr, p.ldd, p.batch_d, M, N, l, m0, n0, etid);
        if (p.store_d1) store_subtile_plain(d1_buf, p.d1_ptr, p.ldd1, p.batch_d1, M, N, l, m0, n0, etid);
      }
      if (etid == 0) {
        // The subtile kStagesC places further in this tile's order into the C buffer just read.
        if (kTma || !p.c_plain) issue_c_ahead(p, M, N, L, m_blk, n_blk, l, epi_m, epi_n, kStagesC, c_stage);
        if (!manual) {
          if (p.store_d) copy(p.tma_d, bSG_sD(_, _, _, d_stage), bSG_gD(_, _, _, epi_m, epi_n));
          if (p.store_d1) store_d1_subtile(p, l, m_blk, n_blk, epi_m, epi_n, M, N, L, d_stage);
        }
        tma_store_arrive();  // one bulk group per buffer stage (empty for plain stores), as store_subtiles'
      }
      sub_count = (sub_count + 1) % kSubCountWrap;
    }
  }

  // ---- EpiIoWarp: the I/O warp of each group and its consumers' side ----

  /// Whether this launch's I/O goes through the I/O warps: C and both outputs by TMA, no row
  /// tail stored by plain stores (the same for every thread of the launch). Otherwise the
  /// consumers run the in-place epilogue and the I/O warps stay idle.
  template <class P>
  CUTE_HOST_DEVICE static bool io_on(P const& p) {
    return kIo && tma_only(p);
  }

  /// The consumers' side of store_tile with an I/O warp (io_on): per valid subtile, in the I/O
  /// warp's order (running count n = sub_count), wait for C in slot n % S, run the visitor, wait
  /// for output 1's buffer n % D to be read by its last store, write output 0 over C in the
  /// slot (each thread at the addresses it read) and output 1 into its buffer, then signal the
  /// I/O warp: the proxy fence orders this thread's writes before the TMA store, and one lane
  /// per warp arrives once the whole warp has written (__syncwarp).
  template <class V, class P, class Acc>
  CUTE_DEVICE void store_tile_io(V& op, P const& p, Acc const& acc, int M, int N, int m_blk, int n_blk, int l) {
    ElementD* const slots = ts.D[grp].begin();
    bool const store_d = p.store_d, store_d1 = p.store_d1;
    // The valid subtiles are the I/O warp's (io_loop walks them in the same order).
    QUACK_FOR_EACH_SUBTILE(M, N, m_blk, n_blk) {
      int const slot = sub_count % kStagesC, d1_buf = sub_count % EpiStagesD;
      uint32_t const c_phase = uint32_t(sub_count / kStagesC) & 1u;
      // Use u = count / D of output 1's buffer waits for its u-th release (phase u − 1
      // complete); use 0 passes at once (parity 1 of a fresh barrier). Parity alone suffices:
      // the c_full wait comes first, and the I/O warp loads C of count n only after releasing
      // the buffer of count n − 3's store (so at least u − 1 releases are in), and it cannot
      // release this use before this subtile's d_full arrival.
      uint32_t const d1_phase = (uint32_t(sub_count / EpiStagesD) & 1u) ^ 1u;
      cutlass::Array<float, kFrg> x;
      CUTE_UNROLL
      for (int i = 0; i < kFrg; ++i) x[i] = acc(epi_n * kFrg + i, epi_m, 0);
      cutlass::arch::ClusterTransactionBarrier::wait(&bs.c_full[grp][slot], c_phase);
      cutlass::Array<ElementC, kFrg> c;
      load_subtile<EpiN, EpiM, kUnswizzled>(c, slots + slot * kSubtile, etid);
      cutlass::Array<float, kFrg> const cf = cutlass::NumericArrayConverter<float, ElementC, kFrg>{}(c);
      cutlass::Array<float, kFrg> out[kOutputs];
      op(out, x, &cf, SubtileCoord{m0, n0, etid, l});
      cutlass::Array<ElementD, kFrg> const d = cutlass::NumericArrayConverter<ElementD, float, kFrg>{}(out[0]);
      cutlass::Array<ElementD1, kFrg> const d1 = cutlass::NumericArrayConverter<ElementD1, float, kFrg>{}(out[1]);
      cutlass::arch::ClusterBarrier::wait(&bs.d1_free[grp][d1_buf], d1_phase);
      if (store_d) store_subtile<EpiN, EpiM, kUnswizzled>(d, slots + slot * kSubtile, etid);
      if (store_d1) write_d1_smem(d1, d1_buf);
      cutlass::arch::fence_view_async_shared();  // this thread's smem writes visible to the TMA unit
      __syncwarp();
      if (etid % 32 == 0) cutlass::arch::ClusterBarrier::arrive(&bs.d_full[grp][slot]);
      sub_count = (sub_count + 1) % kSubCountWrap;
    }
  }

#undef QUACK_FOR_EACH_SUBTILE

  /// The valid subtiles (vm along M, vn along N) of tile (m_blk, n_blk) inside (M, N), in
  /// store_tile's order (row-major): 0 for a tile wholly outside (a 2x1 cluster's second CTA past M).
  CUTE_DEVICE static void valid_subtiles(int M, int N, int m_blk, int n_blk, int& vm, int& vn) {
    constexpr int kEpiMs = Tile::BM / EpiM, kEpiNs = Tile::BN / EpiN;
    int const rows = M - m_blk * Tile::BM, cols = N - n_blk * Tile::BN;
    vm = rows <= 0 ? 0 : rows >= Tile::BM ? kEpiMs : (rows + EpiM - 1) / EpiM;
    vn = cols <= 0 ? 0 : cols >= Tile::BN ? kEpiNs : (cols + EpiN - 1) / EpiN;
  }

  /// Tile (m_blk, n_blk) of batch l of the (M, N, L) tensor that `tma` addresses, split into
  /// the epilogue's subtiles: (EpiM,EpiN,EPI_M,EPI_N); output 1 (kD1: N / kD1Div columns):
  /// (EpiM,EpiN1,EPI_M,EPI_N).
  template <bool kD1 = false, class Tma>
  CUTE_DEVICE static auto gmem_subtiles(Tma const& tma, int M, int N, int L, int l, int m_blk, int n_blk) {
    if constexpr (kD1) {
      Tensor m = tma.get_tma_tensor(make_shape(M, N / kD1Div, L));  // (M,N1,L)
      return flat_divide(local_tile(m(_, _, l), Shape<Int<Tile::BM>, Int<Tile::BN / kD1Div>>{}, make_coord(m_blk, n_blk)),
                         EpiTile1{});
    } else {
      Tensor m = tma.get_tma_tensor(make_shape(M, N, L));  // (M,N,L)
      return flat_divide(local_tile(m(_, _, l), select<0, 1>(typename Tile::TileShape{}), make_coord(m_blk, n_blk)),
                         EpiTile{});
    }
  }

  /// One thread (a consumer's, or the I/O warp's issuing lane): the TMA load of C's subtile
  /// (em, en) of tile (m_blk, n_blk) into group grp's C buffer `slot`, on its c_full barrier;
  /// kFence: a proxy fence first (the buffer's earlier generic reads before the async write).
  /// Diagnostic modes without C in shared memory: the box into L2 only, no wait (1 loads
  /// nothing: never called).
  template <bool kFence, class P>
  CUTE_DEVICE static void tma_load_c(P const& p, TensorStorage& ts, BarrierStorage& bs, int grp, int M, int N, int L,
                                     int l, int m_blk, int n_blk, int em, int en, int slot) {
    Tensor sC = as_position_independent_swizzle_tensor(
        make_tensor(make_smem_ptr(c_buffers(ts, grp)), SmemLayoutC{}));  // (EpiM,EpiN,PIPE_C)
    auto tma_c_blk = p.tma_c.get_slice(Int<0>{});
    Tensor bGS_sC = tma_c_blk.partition_D(sC);  // (TMA,TMA_M,TMA_N,PIPE_C)
    Tensor gC = gmem_subtiles(p.tma_c, M, N, L, l, m_blk, n_blk);  // (EpiM,EpiN,EPI_M,EPI_N)
    Tensor bGS_gC = tma_c_blk.partition_S(gC);  // (TMA,TMA_M,TMA_N,EPI_M,EPI_N)
    if constexpr (!kLoadsCIntoSmem) {
      cute::prefetch(p.tma_c, bGS_gC(_, _, _, em, en));
      return;
    }
    if constexpr (kFence) cutlass::arch::fence_view_async_shared();
    cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&bs.c_full[grp][slot], kCBytes);
    copy(p.tma_c.with(bs.c_full[grp][slot]), bGS_gC(_, _, _, em, en), bGS_sC(_, _, _, slot));
  }

  /// I/O warp, issuing lane: the TMA stores of subtile (em, en): output 0 from slot `slot`,
  /// output 1 from its buffer d1_buf (each if stored).
  template <class P>
  CUTE_DEVICE static void io_store(P const& p, TensorStorage& ts, int grp, int M, int N, int L, int m_blk, int n_blk,
                                   int l, int em, int en, int slot, int d1_buf) {
    if (p.store_d) {
      Tensor sD = as_position_independent_swizzle_tensor(make_tensor(make_smem_ptr(ts.D[grp].begin()), SmemLayoutD{}));
      auto tma_d_blk = p.tma_d.get_slice(Int<0>{});
      Tensor bSG_sD = tma_d_blk.partition_S(sD);  // (TMA,TMA_M,TMA_N,PIPE_D)
      Tensor gD = gmem_subtiles(p.tma_d, M, N, L, l, m_blk, n_blk);  // (EpiM,EpiN,EPI_M,EPI_N)
      Tensor bSG_gD = tma_d_blk.partition_D(gD);  // (TMA,TMA_M,TMA_N,EPI_M,EPI_N)
      copy(p.tma_d, bSG_sD(_, _, _, slot), bSG_gD(_, _, _, em, en));
    }
    if (p.store_d1) store_d1(p, ts, grp, M, N, L, l, m_blk, n_blk, em, en, d1_buf);
  }

  /// The I/O warp of group grp (the whole warp calls it; lane 0 issues every TMA operation, as
  /// bulk groups belong to the issuing thread). It walks the group's tiles (next_tile(seq, m_blk,
  /// n_blk, l): false past the last; seq = grp, grp + kEpiGroups, ..., as the consumers) and their
  /// valid subtiles in store_tile's order, with running counts of C loads issued, of subtiles
  /// stored, and of stores known to have read their smem (`freed`). The load of count n takes
  /// slot n % S once the store of count n − S has read it (n < freed + S), so loads run up to S
  /// ahead of the stores, into the group's next tile. Per subtile: wait d_full, issue the stores,
  /// commit one bulk group, then wait until at most one group is pending (the previous subtile's
  /// stores have read the slot and output 1's buffer) and release output 1's buffer. At a tile's
  /// end every store is drained, so the next tile's first S loads go out at once, under the
  /// group's next mainloop. No cycle: a load waits only on earlier stores, a store on the
  /// consumers' subtile, whose C load was issued before the I/O warp waited for it.
  template <class P, class NextTile>
  CUTE_DEVICE static void io_loop(P const& p, TensorStorage& ts, BarrierStorage& bs, int grp, int M, int N, int L,
                                  NextTile&& next_tile) {
    bool const issuer = (threadIdx.x % 32) == 0;
    uint32_t loads = 0, stores = 0, freed = 0;
    // Releases output 1's buffer of the store of count `freed` once its group has read smem.
    auto release = [&](bool all) {
      if (issuer) {
        if (all)
          tma_store_wait<0>();
        else
          tma_store_wait<1>();
        cutlass::arch::ClusterBarrier::arrive(&bs.d1_free[grp][freed % EpiStagesD]);
      }
      ++freed;
    };
#pragma unroll 1
    for (uint32_t seq = uint32_t(grp);; seq += kEpiGroups) {
      int m_blk, n_blk, l;
      if (!next_tile(seq, m_blk, n_blk, l)) break;
      int vm, vn;
      valid_subtiles(M, N, m_blk, n_blk, vm, vn);
      int const count = vm * vn;
      int next_load = 0;  // the tile's next subtile to load
#pragma unroll 1
      for (int j = 0; j < count; ++j) {
#pragma unroll 1
        for (; next_load < count && loads < freed + kStagesC; ++next_load, ++loads)
          if (issuer)
            tma_load_c<false>(p, ts, bs, grp, M, N, L, l, m_blk, n_blk, next_load / vn, next_load % vn,
                              int(loads % kStagesC));
        cutlass::arch::ClusterBarrier::wait(&bs.d_full[grp][stores % kStagesC], (stores / kStagesC) & 1u);
        if (issuer) {
          io_store(p, ts, grp, M, N, L, m_blk, n_blk, l, j / vn, j % vn, int(stores % kStagesC),
                   int(stores % EpiStagesD));
          tma_store_arrive();
        }
        ++stores;
        if (stores >= 2 && freed < stores - 1) release(false);
      }
      if (freed < stores) release(true);
    }
    if (issuer) tma_store_wait<0>();  // smem must outlive the last stores
  }

  /// Waits until the last TMA stores have read shared memory (before the CTA exits).
  CUTE_DEVICE void finish() const {
    if (etid == 0) tma_store_wait<0>();  // smem must outlive the last stores
  }

 private:
  /// kCAhead, one thread: the TMA load of C's subtile `ahead` places after subtile (epi_m, epi_n)
  /// in store_tile's order over the subtiles of tile (m_blk, n_blk) inside (M, N) (row-major over
  /// the vm x vn valid ones: epi_m < vm, epi_n < vn) into C buffer `stage`, on its mbarrier;
  /// nothing past the tile's last valid subtile (or for a tile wholly outside (M, N): a 2x1
  /// cluster's second CTA past M). Every thread's reads of the buffer came before the caller's
  /// last group barrier.
  template <class P>
  CUTE_DEVICE void issue_c_ahead(P const& p, int M, int N, int L, int m_blk, int n_blk, int l, int epi_m, int epi_n,
                                 int ahead, int stage) const {
    int vm, vn;  // of the tile inside (M, N)
    valid_subtiles(M, N, m_blk, n_blk, vm, vn);
    int const j = epi_m * vn + epi_n + ahead;  // the target's place among the valid subtiles
    if (j >= vm * vn) return;
    int const em = j / vn, en = j - em * vn;
    // The group's generic reads of the buffer before the async write.
    tma_load_c<true>(p, ts, bs, grp, M, N, L, l, m_blk, n_blk, em, en, stage);
  }

  /// Output 1's TMA store of group grp's subtile (em, en) of tile (m_blk, n_blk) from its buffer
  /// `buf` (one thread: a consumer's, or the I/O warp's issuing lane).
  template <class P>
  CUTE_DEVICE static void store_d1(P const& p, TensorStorage& ts, int grp, int M, int N, int L, int l, int m_blk,
                                   int n_blk, int em, int en, int buf) {
    Tensor sD1 = as_position_independent_swizzle_tensor(
        make_tensor(make_smem_ptr(ts.D1[grp].begin()), SmemLayoutD1{}));  // (EpiM,EpiN1,PIPE_D)
    auto tma_blk = p.tma_d1.get_slice(Int<0>{});
    Tensor bSG_sD1 = tma_blk.partition_S(sD1);  // (TMA,TMA_M,TMA_N,PIPE_D)
    Tensor gD1 = gmem_subtiles<true>(p.tma_d1, M, N, L, l, m_blk, n_blk);  // (EpiM,EpiN1,EPI_M,EPI_N)
    Tensor bSG_gD1 = tma_blk.partition_D(gD1);  // (TMA,TMA_M,TMA_N,EPI_M,EPI_N)
    copy(p.tma_d1, bSG_sD1(_, _, _, buf), bSG_gD1(_, _, _, em, en));
  }

  /// Output 1's TMA store of subtile (epi_m, epi_n) from buffer stage d_stage (one thread).
  template <class P>
  CUTE_DEVICE void store_d1_subtile(P const& p, int l, int m_blk, int n_blk, int epi_m, int epi_n, int M, int N,
                                    int L, int d_stage) const {
    store_d1(p, ts, grp, M, N, L, l, m_blk, n_blk, epi_m, epi_n, d_stage);
  }
};

}  // namespace quack::detail::sm90
