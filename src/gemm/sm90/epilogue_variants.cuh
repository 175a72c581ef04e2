// Variants of the Hopper GEMM's epilogue (CollectiveEpilogue, epilogue.cuh) as wrappers of a
// tile configuration (tile_config.cuh): each derives from its Base and sets a constant, which
// the trait below it reads (without the wrapper, the trait gives the epilogue's default). The
// instance lists name them by tile suffix (cmake/QuackGemmInstances.cmake): EpiCAhead
// a<S>[d<D>], EpiDiag diag<M>, EpiCf cf, EpiInPlace ip, EpiIoWarp io, EpiUnswizzled e128u;
// EpiPaths is built by run_gemm (launch.cuh) and names no instance.
#pragma once

#include <type_traits>

namespace quack::detail::sm90 {

/// The trait of a variant's constant: Of<T> (an integral_constant alias of the member the wrapper
/// sets) where tile configuration T has that member, else Default (the epilogue's default, the
/// production value). Each variant below declares its Of alias and its trait Tile...<T>, whose
/// ::value the epilogue reads.
template <template <class> class Of, class T, auto Default, class = void>
struct TileVariantConstant : std::integral_constant<decltype(Default), Default> {};
template <template <class> class Of, class T, auto Default>
struct TileVariantConstant<Of, T, Default, std::void_t<Of<T>>> : Of<T> {};

/// Tile configuration Base whose epilogue takes StagesC C buffers loaded ahead per group (0: C
/// loaded when its subtile's turn comes, into the D buffer where the widths match) and, when
/// StagesD > 0, StagesD buffers per output (CollectiveEpilogue's kStagesC, EpiStagesD): the
/// device A/B variants of a fused epilogue's buffer split (instances_ab.txt, epilogue column
/// "<epilogue>:a<StagesC>[d<StagesD>]"), which may cost mainloop stages. Without it the
/// epilogue sizes both itself.
template <class Base, int StagesC, int StagesD = 0>
struct EpiCAhead : Base {
  static_assert(StagesC >= 0 && StagesD >= 0, "buffer counts");
  static constexpr int kEpiCAheadStages = StagesC;
  static constexpr int kEpiStagesD = StagesD;
};
template <class T> using CAheadStagesOf = std::integral_constant<int, T::kEpiCAheadStages>;
template <class T> using TileCAheadStages = TileVariantConstant<CAheadStagesOf, T, -1>;  // -1: the epilogue's choice
template <class T> using EpiStagesDOf = std::integral_constant<int, T::kEpiStagesD>;
template <class T> using TileEpiStagesD = TileVariantConstant<EpiStagesDOf, T, 0>;  // 0: the epilogue's choice

/// DIAGNOSTIC ONLY (wrong results; never in instances.txt, never in correctness tests): tile
/// configuration Base whose epilogue drops one of its global streams, to split gemm_dgated's cost
/// on the device (instances_ab.txt, epilogue column "<epilogue>:a<S>[d<D>]diag<Mode>", tile suffix
/// diag<Mode>). Same shared-memory layout, buffers and mainloop stages as Base; same per-subtile
/// barriers and TMA store groups.
/// - Mode 1 (no C): C is never loaded (no prefetch_c, no ring loads, no c_full waits); the
///   visitor gets a synthetic C made at run time (not foldable), so its arithmetic is kept.
/// - Mode 2 (no stores): the outputs are written to shared memory as usual but no TMA store is
///   issued (each subtile's bulk group is empty); C is loaded as usual.
/// - Mode 3 (C's traffic without its wait): each C load of the ring (kCAhead) becomes a TMA L2
///   prefetch of the same box at the same moment (cp.async.bulk.prefetch.tensor: DRAM reads and
///   L2 footprint as production, no smem write, no mbarrier), and the visitor gets mode 1's
///   synthetic C: nothing in the epilogue waits on C.
/// - Mode 4 (C loaded and waited on, not read): C's TMA loads into the ring and the c_full waits
///   as production; no thread reads the buffer (mode 1's synthetic C). Production less its
///   shared-memory reads of C (8 ld.shared.v2 per thread and subtile) and their conversion.
/// - Mode 5 (C read, neither loaded into smem nor waited on): mode 3's L2 prefetches, and the
///   threads read the C buffer as production (the same ld.shared.v2, the same bank conflicts)
///   though TMA never writes it (stale values: the visitor's arithmetic on garbage). Mode 3 plus
///   the smem reads of C; production less the TMA write of C into smem and the wait.
template <class Base, int Mode>
struct EpiDiag : Base {
  static_assert(Mode >= 1 && Mode <= 5,
                "diagnostic modes: 1 no C, 2 no stores, 3 C prefetched to L2, not waited, 4 C waited, not read, "
                "5 C read, not loaded (L2 prefetch)");
  static constexpr int kEpiDiag = Mode;
};
template <class T> using EpiDiagOf = std::integral_constant<int, T::kEpiDiag>;
template <class T> using TileEpiDiag = TileVariantConstant<EpiDiagOf, T, 0>;  // 0: production

/// Tile configuration Base whose epilogue moves its 32-bit C and D subtiles (64 x 32 words: gemm_dgated's
/// packed pairs) in the bank-conflict-free order of epilogue_smem.cuh (load_subtile_cf /
/// store_subtile_cf, whose 16-bit path stores postact by STSM): lanes of odd lane / 4 take the column block
/// j ^ 2 at slot j, and the accumulator values are permuted to match (16 selects per thread and
/// subtile), so every value meets its own C and lands at its own address: bit-identical results
/// (instances_ab.txt, epilogue column "<epilogue>:a<S>[d<D>]cf", tile suffix cf). Same
/// buffers, layouts and mainloop stages as Base. The fragment order's ld / st.shared.v2 take 4
/// wavefronts each (2-way conflicts per half-warp), 32 per warp and subtile for C and as many for
/// D; the cf order 2 (scripts/dgated_smem_banks.py).
template <class Base>
struct EpiCf : Base {
  static constexpr bool kEpiCf = true;
};
template <class T> using EpiCfOf = std::bool_constant<T::kEpiCf>;
template <class T> using TileEpiCf = TileVariantConstant<EpiCfOf, T, false>;  // production: the fragment order

/// Tile configuration Base whose epilogue (a C ring of S ≥ 2 buffers, EpiCAhead<..., S, D>) lands
/// each C subtile in a ring slot that then holds that subtile's output 0 and is TMA-stored from
/// there: C's buffers are D's (S slots per group; D stays output 1's buffer count), and the load
/// of the subtile S − 1 places ahead is issued after this subtile's stores once the stores of the
/// subtile before have read their slot. The slot is written in place without a cross-thread
/// hazard because a thread's 32-bit C reads and D writes of a subtile touch the same addresses
/// (load_subtile / store_subtile, epilogue_smem.cuh). With gemm_dgated's a3d2 (3 slots of 8 KB
/// and 2 postact buffers of 4 KB per warpgroup: a1d2's 32 KB) preact's loads run two subtiles
/// ahead instead of one at the same mainloop stages, and one group barrier per subtile is left
/// (instances_ab.txt, suffix ip; timing only: bit-identical results).
template <class Base>
struct EpiInPlace : Base {
  static constexpr bool kEpiInPlace = true;
};
template <class T> using EpiInPlaceOf = std::bool_constant<T::kEpiInPlace>;
template <class T> using TileEpiInPlace = TileVariantConstant<EpiInPlaceOf, T, false>;  // production: no in-place slots
/// Tile configuration Base (in place: EpiInPlace<EpiCAhead<..., S, D>>, pingpong) whose epilogue
/// I/O goes through one warp per group of the producer warpgroup (warps 1 and 2, idle otherwise):
/// the I/O warp issues the group's C loads into the ring's slots and the TMA stores of its
/// outputs, and drains the stores; the consumers only wait for a slot's C, compute, write the
/// outputs into smem and signal (no named barrier, no store drain, no TMA issue in their chain).
/// The I/O warp walks the group's tiles as its consumers do, so C loads of a tile's subtiles run
/// up to S ahead of its stores, across the mainloop of the group's next tile. mbarriers per
/// group: c_full[S] (the slot's C landed: 1 arrival + TMA bytes), d_full[S] (the slot's output 0
/// and the subtile's output 1 written and fenced for the async proxy: one arrival per consumer
/// warp), d1_free[D] (output 1's buffer read by its store: 1 arrival). Launches the I/O warp
/// cannot serve (C or an output TMA cannot address, a row tail stored by plain stores) run the
/// in-place epilogue of EpiInPlace with the I/O warp idle. Bit-identical results (same values,
/// same conversion, same addresses). Tile suffix io: gemm_dgated's 128x128ppa3d2io (instances.txt;
/// the rule's at K ≤ kIoWarpMaxK, tile_rule.h; design: docs/data/dgated_a3io_design.md).
template <class Base>
struct EpiIoWarp : Base {
  static constexpr bool kEpiIoWarp = true;
};
template <class T> using EpiIoWarpOf = std::bool_constant<T::kEpiIoWarp>;
template <class T> using TileEpiIoWarp = TileVariantConstant<EpiIoWarpOf, T, false>;  // production: consumers issue I/O
/// Tile configuration Base (with 16-bit subtiles of 128 columns: EpiSubtile<..., 128>) whose
/// subtile buffers are row-major without swizzle, so each subtile is one TMA box of 256-byte rows
/// (instances_ab.txt, epilogue column "<epilogue>:e128u", tile suffix e128u; issue 16's A/B of
/// the store box's row width). e128's SW128 blocks need two boxes of 128-byte rows: a swizzled
/// box row spans at most 128 bytes. The STSM / LDSM rows rotate (epilogue_smem.cuh,
/// rotated_chunk / rotate_blocks: 96 selects per thread and subtile) to stay free of bank
/// conflicts. Same buffers and mainloop stages as Base; bit-identical results.
template <class Base>
struct EpiUnswizzled : Base {
  static constexpr bool kEpiUnswizzled = true;
};
template <class T> using EpiUnswizzledOf = std::bool_constant<T::kEpiUnswizzled>;
template <class T> using TileEpiUnswizzled = TileVariantConstant<EpiUnswizzledOf, T, false>;  // production: swizzled
/// Tile configuration Base whose kernel holds one of store_tile's two paths: Paths = 1, the
/// visitor's specialised copies with every C load and store through TMA (and nothing else);
/// Paths = 2, the generic path (the run-time choice a constant per subtile; plain loads and
/// stores where TMA cannot make them). run_gemm (launch.cuh) builds both kernels for a visitor
/// with kSplitWide on the wide pingpong tile (CollectiveEpilogue::kSplitPaths) and launches the
/// first where specialize takes a copy (CollectiveEpilogue::specialized_launch), else the
/// second: the launch takes the path the one kernel with both would, and ptxas allocates each
/// kernel's registers for its own path (gemm_dgated's one kernel spilled 1048 / 756 bytes,
/// mostly where the generic path's per-subtile switch sat beside 192 accumulators). Both run
/// store_subtiles_split. Same buffers, layouts and mainloop stages as Base; the instance's name
/// does not change.
template <class Base, int Paths>
struct EpiPaths : Base {
  static_assert(Paths == 1 || Paths == 2, "1: the specialised copies (TMA only), 2: the generic path");
  static constexpr int kEpiPaths = Paths;
};
template <class T> using EpiPathsOf = std::integral_constant<int, T::kEpiPaths>;
template <class T> using TileEpiPaths = TileVariantConstant<EpiPathsOf, T, 0>;  // 0: both paths in one kernel

}  // namespace quack::detail::sm90
