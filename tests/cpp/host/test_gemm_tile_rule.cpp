// The default tile rule of the GEMM (src/gemm/tile_rule.h) on the H200's 132 SMs, without a GPU:
// the small-M·N branch, the pingpong branch and its estimate between 128x128 and 128x192, the
// cooperative fallback, and how the choice follows the compiled set (an instance missing
// for a dtype or layout is never picked).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gemm/tile_rule.h"

namespace {

using quack::detail::choose_tile_index;
using quack::detail::TileOption;
using quack::detail::TileQuery;

// The bf16 -> bf16, row-major a set of instances.txt (options[0]: the 128x256 default).
const std::vector<TileOption> kBf16 = {{128, 256, 2, 1, false}, {128, 128, 2, 1, true}, {128, 192, 2, 1, true},
                                       {128, 64, 1, 1, false},  {64, 128, 2, 1, false}, {128, 64, 1, 2, false}};

std::string name(const TileOption& o) {
  return std::to_string(o.bm) + "x" + std::to_string(o.bn) + (o.pingpong ? "pp" : "") +
         (o.cluster_m == 1 && o.cluster_n == 1 ? "c1" : o.cluster_n == 2 ? "c1x2" : "");
}

std::string pick(const std::vector<TileOption>& set, int64_t m, int64_t n, int64_t k, int64_t l = 1,
                 double rate192 = quack::detail::kRatePingpong192,
                 double rate256 = quack::detail::kRateCooperative256LongK,
                 double rate256_mid = quack::detail::kRateCooperative256MidK,
                 double rate256_short = quack::detail::kRateCooperative256ShortK) {
  const TileQuery q{m, n, k, l, 132};
  const int i = choose_tile_index(q, set.data(), int(set.size()), rate192, rate256, rate256_mid, rate256_short);
  EXPECT_GE(i, 0);
  EXPECT_LT(i, int(set.size()));
  return name(set[size_t(i)]);
}

TEST(GemmTileRule, LlmShapesTakeTheWidePingpongTile) {
  // 8192³: 128x128 runs 2048 cluster tiles on 66 clusters (31.03 waves -> 32), 128x192 1376
  // (20.85 -> 21): 128x192 wins even at equal rates.
  EXPECT_EQ(pick(kBf16, 8192, 8192, 8192), "128x192pp");
  EXPECT_EQ(pick(kBf16, 16384, 14336, 4096), "128x192pp");
  EXPECT_EQ(pick(kBf16, 16384, 28672, 4096), "128x192pp");
  EXPECT_EQ(pick(kBf16, 8192, 128256, 4096), "128x192pp");
}

// kRatePingpong192 alone decides between the pingpong tiles (the break-even rates of tile_rule.h;
// 128x256 left out of the comparison, as below kMidK).
TEST(GemmTileRule, RateFlipsTheChoice) {
  struct Flip {
    int64_t m, n, k;
    double break_even;
  };
  const Flip flips[] = {{8192, 8192, 8192, 0.984}, {8192, 128256, 4096, 1.0}, {16384, 14336, 4096, 1.005},
                        {16384, 28672, 4096, 1.005}, {16384, 4096, 14336, 1.031}};
  for (const Flip& f : flips) {
    SCOPED_TRACE(std::to_string(f.m) + "x" + std::to_string(f.n) + "x" + std::to_string(f.k));
    EXPECT_EQ(pick(kBf16, f.m, f.n, f.k, 1, f.break_even + 0.001, 0.0, 0.0, 0.0), "128x192pp");
    EXPECT_EQ(pick(kBf16, f.m, f.n, f.k, 1, f.break_even - 0.001, 0.0, 0.0, 0.0), "128x128pp");
    EXPECT_EQ(pick(kBf16, f.m, f.n, f.k, 1, 0.0, 0.0, 0.0, 0.0), "128x128pp");   // left out
    EXPECT_EQ(pick(kBf16, f.m, f.n, f.k, 1, -1.0, 0.0, 0.0, 0.0), "128x128pp");
  }
}

// The LM head's GEMMs (vocabulary 128256, hidden 4096; bf16, H200): the logits (K = 4096, whole
// batch and a 2048-token chunk) stay on 128x192 pingpong; the dgrad (K = 128256) takes 128x256.
TEST(GemmTileRule, LmHeadShapes) {
  EXPECT_EQ(pick(kBf16, 16384, 128256, 4096), "128x192pp");
  EXPECT_EQ(pick(kBf16, 2048, 128256, 4096), "128x192pp");
  // 16 waves of 256x256 clusters (15.52 rounded up) against 22 of 256x192 (21.33) and 32 of
  // 256x128 (31.03): 16 · 65536 / 1.13 < 22 · 49152 / 1.06 < 32 · 32768.
  EXPECT_EQ(pick(kBf16, 16384, 4096, 128256), "128x256");
}

// From K = kLongK the cooperative 128x256 competes with the pingpong tiles at
// kRateCooperative256LongK; below it the pingpong choice is unchanged (16384x4096x14336, the
// MLP's down projection at d 4096, has the same waves as 16384x4096x128256).
TEST(GemmTileRule, LongKTakesTheCooperativeTile) {
  const int64_t long_k = quack::detail::kLongK;
  EXPECT_EQ(pick(kBf16, 16384, 4096, 14336), "128x256");
  EXPECT_EQ(pick(kBf16, 16384, 4096, long_k), "128x256");
  // Below kLongK with 128x256 out of the mid-K comparison: 128x192 pingpong.
  EXPECT_EQ(pick(kBf16, 16384, 4096, long_k - 1, 1, quack::detail::kRatePingpong192,
                 quack::detail::kRateCooperative256LongK, 0.0), "128x192pp");
  EXPECT_EQ(pick(kBf16, 8192, 8192, long_k), "128x256");
  EXPECT_EQ(pick(kBf16, 8192, 4096, 65536), "128x256");
  // Quantisation can keep a pingpong tile: 5 waves of 256x256 clusters (4.36) against 6 of
  // 256x192 (5.82): 5 · 65536 / 1.13 > 6 · 49152 / 1.06; 3 (2.18) against 5 of 256x128 (4.36)
  // where 128x192 has < 4 tiles per SM: 3 · 65536 / 1.13 > 5 · 32768.
  EXPECT_EQ(pick(kBf16, 2048, 9216, 65536), "128x192pp");
  EXPECT_EQ(pick(kBf16, 3072, 3072, 65536), "128x128pp");
  // The rate decides: 16384x4096x128256 flips at 1.13's break-even 1.028 (16 · 65536 against
  // 22 · 49152 / 1.06); ≤ 0 leaves 128x256 out of the comparison.
  EXPECT_EQ(pick(kBf16, 16384, 4096, 128256, 1, quack::detail::kRatePingpong192, 1.029), "128x256");
  EXPECT_EQ(pick(kBf16, 16384, 4096, 128256, 1, quack::detail::kRatePingpong192, 1.027), "128x192pp");
  EXPECT_EQ(pick(kBf16, 16384, 4096, 128256, 1, quack::detail::kRatePingpong192, 0.0), "128x192pp");
  // The small-M·N branch still comes first, and without a pingpong tile that qualifies the
  // default stays.
  EXPECT_EQ(pick(kBf16, 128, 8192, 65536), "64x128");
  EXPECT_EQ(pick(kBf16, 2048, 2048, 65536), "128x256");
  // A set without 128x256 (the fp16 fused epilogues: 128x128 pingpong alone) keeps its tile.
  const std::vector<TileOption> only128pp = {{128, 128, 2, 1, true}};
  EXPECT_EQ(pick(only128pp, 16384, 4096, 128256), "128x128pp");
}

// From K = kMidK to kLongK 128x256 competes with 128x192 pingpong at its rate: the waves x area
// decide. N = 2048 (the demo's fc2 forward, qkv and fc1 dgrad): 8 waves of 256x256 clusters
// (7.76) against 11 of 256x192 (10.67; 2048 columns padded to 2112): 128x256. Below kMidK and at
// 8192³ (16 x 256·256 against 21 x 256·192) 128x192 pingpong stays; a set without 128x192
// keeps its pingpong tile below kLongK.
TEST(GemmTileRule, MidKTakesTheCooperativeTileWhereItsWavesAreFewer) {
  const int64_t mid_k = quack::detail::kMidK;
  for (int64_t k : {mid_k, int64_t(6144), int64_t(11264)}) EXPECT_EQ(pick(kBf16, 16384, 2048, k), "128x256") << k;
  EXPECT_EQ(pick(kBf16, 16384, 2048, mid_k - 1), "128x192pp");
  EXPECT_EQ(pick(kBf16, 16384, 2048, 2048), "128x192pp");
  EXPECT_EQ(pick(kBf16, 16384, 4096, 8192), "128x256");  // 16 x 256·256 against 22 x 256·192
  EXPECT_EQ(pick(kBf16, 8192, 8192, 8192), "128x192pp");
  EXPECT_EQ(pick(kBf16, 16384, 2048, 5632, 1, quack::detail::kRatePingpong192,
                 quack::detail::kRateCooperative256LongK, 0.0), "128x192pp");  // left out
  std::vector<TileOption> no192 = kBf16;
  no192.erase(no192.begin() + 2);
  EXPECT_EQ(pick(no192, 16384, 2048, 5632), "128x128pp");
}

// The fused epilogues' cooperative rates (tile_rule.h, kCooperativeRatesFused): the pingpong
// tiles wherever one qualifies, at any K; the cooperative default where none does.
TEST(GemmTileRule, FusedEpiloguesKeepPingpong) {
  auto with = [](const quack::detail::CooperativeRates& r, int64_t m, int64_t n, int64_t k) {
    return pick(kBf16, m, n, k, 1, quack::detail::kRatePingpong192, r.long_k, r.mid_k, r.short_k);
  };
  const auto& plain = quack::detail::kCooperativeRates;
  const auto& fused = quack::detail::kCooperativeRatesFused;
  // Long K: plain gemm's 128x256 (kRateCooperative256LongK), the fused epilogues' 128x192.
  EXPECT_EQ(with(plain, 16384, 4096, 14336), "128x256");
  EXPECT_EQ(with(fused, 16384, 4096, 14336), "128x192pp");
  EXPECT_EQ(with(fused, 16384, 4096, 28672), "128x192pp");
  // Mid K: 16384 x 4096 x 8192 (16 waves x 256·256 against 22 x 256·192 for plain gemm), 16384
  // x 2048 x 5632 (8 x 256·256 against 11 x 256·192: 128x192 pads 2048 columns to 2112).
  EXPECT_EQ(with(plain, 16384, 4096, 8192), "128x256");
  EXPECT_EQ(with(fused, 16384, 4096, 8192), "128x192pp");
  EXPECT_EQ(with(plain, 16384, 2048, 5632), "128x256");
  EXPECT_EQ(with(fused, 16384, 2048, 5632), "128x192pp");
  // Short K: 4096³ (4 waves x 256·256 / 1.02 for plain gemm): 8 x 256·128 < 6 x 256·192 / 1.06.
  EXPECT_EQ(with(plain, 4096, 4096, 4096), "128x256");
  EXPECT_EQ(with(fused, 4096, 4096, 4096), "128x128pp");
  // No pingpong tile qualifies (2048 x 2048: 16 x 16 tiles of 128x128 < 4 · 132): the default.
  EXPECT_EQ(with(fused, 2048, 2048, 14336), "128x256");
}

TEST(GemmTileRule, QuantisationDecidesAtShortK) {
  // 4096³: 512 cluster tiles of 128x128 (7.8 waves -> 8) against 352 of 128x192 (5.3 -> 6) and
  // 256 of 128x256 (3.9 -> 4): 4 · 65536 / 1.02 < 8 · 32768 < 6 · 49152 / 1.06.
  EXPECT_EQ(pick(kBf16, 4096, 4096, 4096), "128x256");
  // Below kShortK, or with 128x256 left out, the narrow pingpong tile.
  EXPECT_EQ(pick(kBf16, 4096, 4096, quack::detail::kShortK - 1), "128x128pp");
  EXPECT_EQ(pick(kBf16, 4096, 4096, 4096, 1, quack::detail::kRatePingpong192,
                 quack::detail::kRateCooperative256LongK, quack::detail::kRateCooperative256MidK, 0.0),
            "128x128pp");
  // The LLM shapes of K = 4096 keep 128x192 pingpong; 16384x28672x4096 flips at 1.055 (109 x
  // 256·256 against 146 x 256·192 / 1.06).
  EXPECT_EQ(pick(kBf16, 16384, 28672, 4096, 1, quack::detail::kRatePingpong192,
                 quack::detail::kRateCooperative256LongK, quack::detail::kRateCooperative256MidK, 1.054),
            "128x192pp");
  EXPECT_EQ(pick(kBf16, 16384, 28672, 4096, 1, quack::detail::kRatePingpong192,
                 quack::detail::kRateCooperative256LongK, quack::detail::kRateCooperative256MidK, 1.056),
            "128x256");
  EXPECT_EQ(pick(kBf16, 16384, 128256, 4096), "128x192pp");
}

TEST(GemmTileRule, ShortKKeepsTheNarrowPingpongTile) {
  // K < 1024: the epilogue dominates; 128x128's 64 x 64 subtiles store faster.
  EXPECT_EQ(pick(kBf16, 8192, 8192, 128), "128x128pp");
  EXPECT_EQ(pick(kBf16, 8192, 8192, 1023), "128x128pp");
  EXPECT_EQ(pick(kBf16, 8192, 8192, 1024), "128x192pp");
}

TEST(GemmTileRule, SmallProblemsTakeSmallTiles) {
  EXPECT_EQ(pick(kBf16, 128, 8192, 8192), "64x128");   // 128 busy CTAs of 64x128 = 128x64's
  EXPECT_EQ(pick(kBf16, 256, 8192, 8192), "64x128");
  EXPECT_EQ(pick(kBf16, 2048, 2048, 2048), "128x256");  // 128 tiles of 128x256, < 4 per SM of 128x128
  std::vector<TileOption> no64x128 = kBf16;
  no64x128.erase(no64x128.begin() + 4);
  EXPECT_EQ(pick(no64x128, 128, 8192, 8192), "128x64c1");
}

TEST(GemmTileRule, OnlyCompiledTilesArePicked) {
  const std::vector<TileOption> only_default = {{128, 256, 2, 1, false}};
  for (int64_t m : {1, 128, 2048, 8192})
    for (int64_t n : {1, 8192, 50257})
      for (int64_t k : {1, 128, 4096}) EXPECT_EQ(pick(only_default, m, n, k), "128x256");
  std::vector<TileOption> no192 = kBf16;
  no192.erase(no192.begin() + 2);
  EXPECT_EQ(pick(no192, 8192, 8192, 8192), "128x128pp");
  EXPECT_EQ(pick(no192, 16384, 4096, 8192), "128x128pp");
  EXPECT_EQ(pick(no192, 16384, 4096, 14336), "128x256");
}

TEST(GemmTileRule, BatchesCountAsTiles) {
  // 16 batches of 1024 x 1024 x 2048: 1024 tiles of 128x128 (≥ 4 per SM): pingpong.
  EXPECT_EQ(pick(kBf16, 1024, 1024, 2048, 16), "128x128pp");
  // At K = 4096 the tile counts of 4096³, and its choice.
  EXPECT_EQ(pick(kBf16, 1024, 1024, 4096, 16), pick(kBf16, 4096, 4096, 4096));
  EXPECT_EQ(pick(kBf16, 1024, 1024, 4096, 1), "64x128");  // 32 busy CTAs of 128x256: small M·N
}

}  // namespace
