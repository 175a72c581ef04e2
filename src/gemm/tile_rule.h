// Default tile choice of the GEMM (host only, no CUDA call): which compiled tile configuration
// runs a problem when GemmArgs::tuned is off and the environment forces none (gemm.cpp,
// choose_tile). A pure function of the problem's extents, the SM count and the configurations
// compiled for the problem's dtypes and majors, so tests/cpp/host/test_gemm_tile_rule.cpp checks
// it without a GPU.
//
// The rule, in order:
// 1. Small M·N: when 128x256 tiles would keep fewer than 3/4 of the SMs busy (M = 128,
//    N = 8192: 32 busy CTAs with 128x256, 128 with 128x64): 64x128 (2x1 cluster) if it keeps as
//    many CTAs busy as 128x64 (its cluster pairs read each B tile once: at M = 128 it moves 2/3
//    of 128x64's bytes into the SMs), else 128x64 without a cluster (docs/performance.md g2, g5).
// 2. Pingpong when one of its tiles (128x128, 128x192) has ≥ 4 tiles per SM (each warpgroup
//    gets ≥ 2, so one's epilogue hides under the other's mainloop; g3). Between the pingpong
//    tiles that qualify, the least estimated time: waves × cluster-tile area / rate, with waves
//    = ceil(cluster tiles / clusters resident) (a persistent CTA's last tile counts whole, and
//    the tile area counts the padding past M and N), rate = the tile's measured throughput
//    relative to 128x128 pingpong (kRate*). 128x192 only for K ≥ 1024: below that the
//    epilogue dominates, and its 64 x 32 subtiles (3 per warpgroup) store slower than
//    128x128's 64 x 64 (4 per warpgroup). From K = kMidK the cooperative 128x256 joins that
//    comparison: pingpong's gain, one tile's epilogue hidden under another's mainloop, shrinks
//    as 1/K, and 128x256 runs the mainloop faster (each consumer warpgroup issues 64x256
//    WGMMAs, which read fewer shared-memory operand bytes per MAC than 64x192 or 64x128). For
//    kMidK ≤ K < kLongK at 128x192's rate (kRateCooperative256MidK: the waves x area decide,
//    e.g. N = 2048, where 128x192 pads 2048 columns to 2112), from kLongK at its own higher
//    rate (kRateCooperative256LongK); from kShortK to kMidK at kRateCooperative256ShortK, where
//    few waves make its tile count the cheaper (4096³).
// 3. Else the 128x256 cooperative default (options[0]).
// The cooperative tile's rates in step 2 are parameters (CooperativeRates below): plain gemm's
// here; the fused epilogues leave it out of step 2 (gemm.cpp, cooperative_rates).
#pragma once

#include <cstdint>

namespace quack::detail {

/// One compiled tile configuration of the problem's dtypes and majors.
struct TileOption {
  int bm, bn, cluster_m, cluster_n;
  bool pingpong;
};
constexpr bool operator==(const TileOption& a, const TileOption& b) {
  return a.bm == b.bm && a.bn == b.bn && a.cluster_m == b.cluster_m && a.cluster_n == b.cluster_n &&
         a.pingpong == b.pingpong;
}

/// The problem in the kernel's terms (after the column-major-D swap) and the device's SM count.
struct TileQuery {
  int64_t m, n, k, l;
  int64_t sms;
};

/// Throughput per clock of 128x192 pingpong relative to 128x128 pingpong on mainloop-bound
/// problems (K ≥ 1024): THE constant that decides between the two pingpong tiles. Provisional
/// (issue 16, not yet measured on our kernel): QuACK 0.2.0's 128x192 pingpong ran 1.06× our
/// 128x128 pingpong in burst and 1.10× at the power limit on 8192³ (perf/h200-anchors.md); set it
/// from scripts/gemm_ab.sh's table (ours:128x192pp / ours:128x128pp).
/// Where the choice flips on 132 SMs (the rate at which both estimates are equal; 128x192 is
/// picked above it, host test GemmTileRule.RateFlipsTheChoice):
///   8192³ 0.984, 8192x128256x4096 1.000 (equal waves · area), 16384x14336x4096 1.005,
///   16384x28672x4096 1.005, 16384x4096x14336 1.031.
/// So 1.06 picks 128x192 on all five LLM shapes, 1.0 only on 8192³, and any value below 0.98
/// (or ≤ 0: the tile is left out) keeps 128x128 on all of them. The bf16 act, dact, bias, gated
/// and dgated epilogues have 128x192 pingpong instances and follow this choice (the cooperative
/// 128x256's part differs: CooperativeRates below; gemm_dgated's at K ≤ kIoWarpMaxK: gemm.cpp,
/// choose_instance).
inline constexpr double kRatePingpong192 = 1.06;

/// K from which the cooperative 128x256 tile competes with the pingpong tiles (rule step 2):
/// the smallest K at which it measured ahead. H200, bf16, A and B row-major, burst, 5 rounds,
/// TFLOP/s at 16384x4096xK (docs/performance.md, run U): K = 14336 128x256 673.8 against
/// 128x192pp 645.8; K = 32768 670.4 / 651.6; K = 65536 672.2 / 644.7; K = 128256 672.8 / 624.2.
/// At K = 4096 pingpong is ahead (16384x128256x4096: 128x192pp 666.8, 128x256 626.4); between
/// 4096 and 14336 not measured.
inline constexpr int64_t kLongK = 14336;

/// K from which the cooperative 128x256 competes with the pingpong tiles below kLongK, at
/// kRateCooperative256MidK: the smallest K at which it measured ahead at N = 2048. H200, bf16,
/// burst, rotated, TFLOP/s at 16384x2048xK, layouts rc / rr (docs/performance.md, run W):
///   K = 2048   128x192pp 694.6 / 677.1   128x256 650.1 / 648.6
///   K = 5632   128x192pp 656.8 / 659.5   128x256 678.3 / 682.2
///   K = 11264  128x192pp 674.8 / 655.8   128x256 678.9 / 678.8
/// At K = 4096, 16384x128256x4096: 128x192pp 666.8, 128x256 626.4 (run U).
inline constexpr int64_t kMidK = 5632;

/// Throughput per clock of the cooperative 128x256 tile relative to 128x128 pingpong for
/// kMidK ≤ K < kLongK: 128x192 pingpong's (kRatePingpong192), i.e. equal throughput per tile
/// area, so the waves x cluster-tile area decide between the two. Run W (table at kMidK): at
/// 16384x2048xK, 128x256's waves x area (8 x 256·256) are 1/1.031 of 128x192's (11 x 256·192),
/// and it ran 1.033 / 1.034 (K = 5632) and 1.006 / 1.035 (K = 11264) x 128x192pp's TFLOP/s.
/// At 8192³ 128x192's waves x area are the smaller (21 x 256·192 against 16 x 256·256):
/// 128x192 pingpong stays (ties keep pingpong).
inline constexpr double kRateCooperative256MidK = kRatePingpong192;

/// Largest K at which the rule takes a tile's I/O-warp variant (GemmInstance::io_warps:
/// gemm_dgated's 128x128ppa3d2io) in place of its other variant (128x128ppa1d2). H200, bf16,
/// swiglu, burst, one process, ms (docs/performance.md, run AN2): 16384x5632x2048 a3d2io 0.764
/// against a1d2 0.834; 16384x14336x4096 3.490 / 3.408; 8192³ 1.825 / 1.825. The two shapes
/// differ in N too (tiles per SM may be what decides); between 2048 and 4096, below 2048 and at
/// other N not measured. Where C or an output falls back to plain loads or stores (rows TMA
/// cannot address) the I/O warps idle and the tile runs a3d2ip's path (0.813 ms at the shape
/// above, AN2): still not behind a1d2 there.
inline constexpr int64_t kIoWarpMaxK = 2048;

/// K from which the cooperative 128x256 competes with the pingpong tiles below kMidK, at
/// kRateCooperative256ShortK (where 128x192 pingpong qualifies, as from kMidK).
inline constexpr int64_t kShortK = 4096;

/// Throughput per clock of the cooperative 128x256 tile relative to 128x128 pingpong for
/// kShortK ≤ K < kMidK: between the two measured at K = 4096 (H200, bf16, rr, kernel-only
/// beside cuBLAS, two rounds; docs/performance.md, run AH): 1.044 at 4096³ (128x256 0.1834 ms
/// against 128x128pp 0.1915, at 4 waves of 256x256 clusters (3.88) against 8 of 256x128
/// (7.76): equal waves x area) and 0.996 at 16384x128256x4096 (run U: 128x256 626.4 TFLOP/s
/// against 128x192pp 666.8 at 486 waves x 256·256 against 648 x 256·192 / 1.06). 1.02 takes
/// 128x256 at 4096³ and keeps 128x192 pingpong on the LLM shapes of K = 4096 (16384x28672x4096
/// flips at 1.055, 16384x14336x4096 at 1.065).
inline constexpr double kRateCooperative256ShortK = 1.02;

/// Throughput per clock of the cooperative 128x256 tile relative to 128x128 pingpong at long K
/// (K ≥ kLongK): 647.7 / 571.5 = 1.133 at 16384x4096x128256, where both have equal waves x
/// cluster-tile area (16 x 256·256 against 32 x 256·128). Against 128x192 pingpong at
/// kRatePingpong192 it wins where its waves x area are below 1.13 / 1.06 = 1.066x 128x192's;
/// quantisation can keep a pingpong tile (2048x9216x65536: 5 waves of 256x256 clusters, 4.36
/// rounded up, against 6 of 256x192: 128x192 kept; host test
/// GemmTileRule.LongKTakesTheCooperativeTile).
inline constexpr double kRateCooperative256LongK = 1.13;

/// The cooperative 128x256's rates in rule step 2 at K ≥ kLongK, kMidK ≤ K < kLongK and
/// kShortK ≤ K < kMidK (choose_tile_index's rate256_*; ≤ 0: out of the comparison), per epilogue
/// (gemm.cpp, choose_instance). Plain gemm, bias, rotary and gatedcat (128x256 only):
/// kCooperativeRates.
struct CooperativeRates {
  double long_k, mid_k, short_k;
};
inline constexpr CooperativeRates kCooperativeRates{kRateCooperative256LongK, kRateCooperative256MidK,
                                                    kRateCooperative256ShortK};
/// The fused epilogues with a second output or a C read beside the accumulator (gemm_act,
/// gemm_dact, gemm_gated, gemm_dgated): at no K where a pingpong tile qualifies. The cooperative
/// tile runs its epilogue after its own mainloop, where 128x192 pingpong hides it under the other
/// warpgroup's; the longer that epilogue against the mainloop, the more it costs, so shorter K
/// favours pingpong further. H100, bf16, burst, ours / plain gemm in one process, 128x192pp
/// against 128x256 (docs/performance.md, runs AR1, AS; AS with 300 ms rests): gated swiglu
/// 16384x14336x4096 1.061 / 1.163, 8192³ 1.022 / 1.085 (AR1); dgated swiglu 16384x14336x4096
/// 1.037 / 1.180, 16384x4096x14336 1.004, 1.000, 1.019 / 1.079, 1.066, 1.060, 16384x4096x28672
/// 0.972 / 1.003; dact relu 16384x4096x14336 / 28672 1.003, 1.026 / 0.982 against 1.073, 1.063
/// / 1.042, gelu_tanh_approx 1.029 / 0.968 against 1.081 / 1.038; act relu 0.990, 1.015 /
/// 0.984, 0.961 against 1.022, 0.985 / 1.007, 0.998, gelu_tanh_approx 1.006 / 0.979 against 1.027
/// / 1.011; gated swiglu 1.034, 0.998 / 0.971, 0.958 against 1.018, 1.025 / 1.008, 1.015 (AS).
/// The one reading the other way, gated at 16384x4096x14336 in AR1 (1.074 / 1.034), AS read
/// twice at 1.034 / 1.018 and 0.998 / 1.025. Not measured between K = 4096 and 14336 but at 8192³.
inline constexpr CooperativeRates kCooperativeRatesFused{0.0, 0.0, 0.0};

/// Index into options[0, count) of the configuration to run; options[0] is the 128x256
/// cooperative default, which is returned when no rule applies. rate192: kRatePingpong192,
/// rate256_long_k: kRateCooperative256LongK, rate256_mid_k: kRateCooperative256MidK,
/// rate256_short_k: kRateCooperative256ShortK (parameters for the host tests; ≤ 0 leaves 128x192,
/// resp. 128x256 at long, mid or short K, out of the comparison; CooperativeRates).
int choose_tile_index(const TileQuery& q, const TileOption* options, int count,
                      double rate192 = kRatePingpong192, double rate256_long_k = kRateCooperative256LongK,
                      double rate256_mid_k = kRateCooperative256MidK,
                      double rate256_short_k = kRateCooperative256ShortK);

}  // namespace quack::detail
