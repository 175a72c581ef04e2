// The stream-K schedule of the GEMM (src/gemm/streamk.h), on the host: every (tile, k-block)
// exactly once, ranges balanced within one k-block, one finisher per tile whose waits name
// exactly the units holding the tile's other pieces (on clusters of lower index), at most one
// partial per unit, the pipeline positions (k_before) contiguous, and the rule's choices at the
// shapes it is for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "gemm/streamk.h"

namespace {

using quack::detail::StreamKPiece;
using quack::detail::StreamKSchedule;

// Walks every cluster's pieces of s and checks the invariants of the schedule.
void check_schedule(const StreamKSchedule& s) {
  SCOPED_TRACE("tiles=" + std::to_string(s.tiles) + " k_tiles=" + std::to_string(s.k_tiles) +
               " clusters=" + std::to_string(s.clusters) + " sk_tiles=" + std::to_string(s.sk_tiles) +
               " units=" + std::to_string(s.units));
  ASSERT_GE(s.clusters, 1);
  ASSERT_LE(s.units, s.clusters);
  ASSERT_LE(s.sk_tiles, s.tiles);
  ASSERT_EQ((s.tiles - s.sk_tiles) % s.clusters == 0 || !s.active(), true) << "data-parallel tiles fill whole waves";
  std::vector<int> covered(size_t(s.tiles * s.k_tiles), 0);
  std::map<int64_t, std::vector<int64_t>> units_of_tile;  // stream-K tile -> units with a piece of it
  std::map<int64_t, int64_t> finisher;                    // tile -> cluster of its k-block 0
  std::vector<int> partials(size_t(std::max<int64_t>(s.units, 1)), 0);
  int64_t min_sk = INT64_MAX, max_sk = 0;
  for (int64_t c = 0; c < s.clusters; ++c) {
    int64_t k_run = 0, sk_blocks = 0;
    StreamKPiece x;
    for (int64_t seq = 0; s.piece(c, seq, x); ++seq) {
      ASSERT_GE(x.tile, 0);
      ASSERT_LT(x.tile, s.tiles);
      ASSERT_GE(x.k_begin, 0);
      ASSERT_LT(x.k_begin, x.k_end);
      ASSERT_LE(x.k_end, s.k_tiles);
      ASSERT_EQ(x.k_before, k_run) << "pipeline position = k-blocks run before the piece";
      k_run += x.k_end - x.k_begin;
      for (int k = x.k_begin; k < x.k_end; ++k) ++covered[size_t(x.tile * s.k_tiles + k)];
      const bool sk = x.tile < s.sk_tiles;
      if (!sk) {
        ASSERT_EQ(x.k_begin, 0);
        ASSERT_EQ(x.k_end, s.k_tiles) << "data-parallel tiles are whole";
        continue;
      }
      ASSERT_LT(c, s.units) << "stream-K pieces only on the stream-K units";
      const int64_t u = s.unit_of_cluster(c);
      ASSERT_GE(u, 0);
      ASSERT_LT(u, s.units);
      sk_blocks += x.k_end - x.k_begin;
      units_of_tile[x.tile].push_back(u);
      if (x.k_begin == 0) {
        ASSERT_EQ(finisher.count(x.tile), 0u);
        finisher[x.tile] = u;
      } else {
        ASSERT_EQ(seq, 0) << "a partial piece is the first of its cluster";
        ++partials[size_t(u)];
      }
    }
    if (c < s.units) {
      min_sk = std::min(min_sk, sk_blocks);
      max_sk = std::max(max_sk, sk_blocks);
    }
  }
  for (size_t i = 0; i < covered.size(); ++i) ASSERT_EQ(covered[i], 1) << "iteration " << i;
  for (int p : partials) ASSERT_LE(p, 1);
  if (s.active()) {
    ASSERT_LE(max_sk - min_sk, 1) << "ranges balanced within one k-block";
  }
  for (auto& [tile, units] : units_of_tile) {
    ASSERT_EQ(finisher.count(tile), 1u);
    const int64_t f = finisher[tile];
    std::sort(units.begin(), units.end());
    ASSERT_EQ(units.front(), f) << "the finisher is the lowest unit of the tile";
    StreamKPiece x;
    const int64_t fc = s.unit_of_cluster(f);  // the finisher's cluster (the map is its own inverse)
    int64_t seq = 0, last_seq = -1;
    for (; s.piece(fc, seq, x) && x.tile < s.sk_tiles; ++seq)
      if (x.tile == tile) last_seq = seq;
    ASSERT_TRUE(s.piece(fc, last_seq, x));
    if (units.size() == 1) {
      ASSERT_FALSE(s.split(x));
      continue;
    }
    // A split tile's finisher piece is the last of its cluster's stream-K range (it runs last).
    ASSERT_EQ(last_seq, seq - 1) << "the finisher's piece ends its stream-K range";
    ASSERT_TRUE(s.split(x));
    ASSERT_EQ(s.last_unit(x), units.back());
    for (size_t i = 1; i < units.size(); ++i) {
      ASSERT_EQ(units[i], f + int64_t(i)) << "contiguous units";
      ASSERT_LT(s.unit_of_cluster(units[i]), fc) << "a finisher waits only on clusters of lower index";
    }
  }
}

TEST(GemmStreamK, ForcedSchedulesCoverEveryIterationOnce) {
  for (int64_t tiles : {1, 2, 3, 7, 63, 64, 65, 66, 67, 100, 131, 132, 133, 512, 1000})
    for (int64_t k_tiles : {1, 2, 3, 5, 64, 88, 256})
      for (int64_t fit : {1, 2, 33, 66, 132}) {
        const auto s = StreamKSchedule::make(tiles, k_tiles, fit, /*force=*/true);
        ASSERT_TRUE(s.active());
        check_schedule(s);
        if (HasFatalFailure()) return;
      }
}

TEST(GemmStreamK, RuleSchedulesAreValid) {
  for (int64_t tiles : {1, 5, 64, 65, 66, 67, 131, 512, 1000, 4096})
    for (int64_t k_tiles : {1, 2, 32, 88, 176, 256})
      for (int64_t fit : {66, 132}) {
        const auto s = StreamKSchedule::make(tiles, k_tiles, fit, /*force=*/false);
        check_schedule(s);
        if (HasFatalFailure()) return;
        if (!s.active()) {
          ASSERT_EQ(s.clusters, std::min(tiles, fit));
        }
      }
}

TEST(GemmStreamK, DataParallelIsTheStaticSchedule) {
  const auto s = StreamKSchedule::data_parallel(100, 8, 66);
  EXPECT_FALSE(s.active());
  EXPECT_EQ(s.clusters, 66);
  StreamKPiece x;
  ASSERT_TRUE(s.piece(5, 1, x));
  EXPECT_EQ(x.tile, 5 + 66);
  EXPECT_EQ(x.k_before, 8);
  EXPECT_FALSE(s.piece(34, 1, x));
  check_schedule(s);
}

TEST(GemmStreamK, EdgeCases) {
  // Fewer tiles than clusters: the units split each tile; one k-block tiles: no split possible,
  // whole tiles spread over fewer units; K < 2·BK.
  for (int64_t k_tiles : {1, 2}) {
    const auto s = StreamKSchedule::make(3, k_tiles, 66, true);
    EXPECT_EQ(s.sk_tiles, 3);
    EXPECT_EQ(s.units, 1);  // 3·KB < kMinUnitKBlocks·2: one unit
    EXPECT_EQ(s.clusters, 1);
    check_schedule(s);
  }
  // One tile of 256 k-blocks over 66 clusters: 64 units of 4 k-blocks (kMinUnitKBlocks).
  const auto one = StreamKSchedule::make(1, 256, 66, true);
  EXPECT_EQ(one.units, 64);
  check_schedule(one);
  // Batches are work indices like any other (L folded into T).
  const auto batched = StreamKSchedule::make(3 * 40, 10, 66, true);
  EXPECT_EQ(batched.sk_tiles, 54 + 66);
  check_schedule(batched);
}

TEST(GemmStreamK, RuleAtTheN2048Shapes) {
  // 132 SMs, 2x1 clusters of 128x256: 66 clusters. 16384x2048xK: 512 cluster tiles (7.76
  // waves): forced stream-K lost 3 % at K = 5632 (run AA3), even at 11264: off.
  for (int64_t K : {5632, 11264}) EXPECT_FALSE(StreamKSchedule::make(512, K / 64, 66, false).active()) << K;
  const auto forced = StreamKSchedule::make(512, 5632 / 64, 66, true);
  EXPECT_EQ(forced.sk_tiles, 50 + 66);
  EXPECT_EQ(forced.units, 66);
  // 2048x2048x16384: 64 cluster tiles on 66 clusters, 256 k-blocks (one wave; forced: -8 %).
  EXPECT_FALSE(StreamKSchedule::make(64, 256, 66, false).active());
  // 11264x2048x16384: 352 cluster tiles = 5.33 waves (forced: +9 %); 2048x5632x16384: 176
  // cluster tiles = 2.67 waves (forced: +5 %); 11264x2048x8192 (Gemm.StreamK's rule case: the
  // estimate gains 6.9 %).
  const auto w = StreamKSchedule::make(352, 256, 66, false);
  EXPECT_TRUE(w.active());
  EXPECT_EQ(w.sk_tiles, 22 + 66);
  EXPECT_TRUE(StreamKSchedule::make(176, 256, 66, false).active());
  EXPECT_TRUE(StreamKSchedule::make(352, 128, 66, false).active());
  // Whole waves, or a short K where the reduction costs more than the tail: data-parallel.
  EXPECT_FALSE(StreamKSchedule::make(528, 88, 66, false).active());
  EXPECT_FALSE(StreamKSchedule::make(130, 2, 66, false).active());
  // 8192³ with 128x256 (16 x 32 cluster tiles = 7.76 waves, 128 k-blocks): off.
  EXPECT_FALSE(StreamKSchedule::make(512, 128, 66, false).active());
  // 16384x4096x14336 (1024 cluster tiles = 15.5 waves, 224 k-blocks): the estimate gains 2.1 %,
  // under kMinGain; stream-K ran 0.975 x data-parallel at the power limit (BP1): off.
  EXPECT_FALSE(StreamKSchedule::make(1024, 224, 66, false).active());
  EXPECT_TRUE(StreamKSchedule::make(1024, 224, 66, true).active());
}

TEST(GemmStreamK, RuleOffAtLongK) {
  // 4096 x 4096 x 128256 with 128x256 (256 cluster tiles = 3.88 waves, 2004 k-blocks): run BD
  // read forced stream-K 0.67 x the data-parallel schedule; off (its estimate, 2.6 %, is also
  // under kMinGain). The same for K = 32768 and 1024 x 1024 x 131072 (the rule's 64x128 in 2x1
  // clusters: 64 cluster tiles on 66 clusters), estimates 1.5 %.
  EXPECT_FALSE(StreamKSchedule::make(256, 2004, 66, false).active());
  EXPECT_FALSE(StreamKSchedule::make(256, 512, 66, false).active());
  EXPECT_FALSE(StreamKSchedule::make(64, 2048, 66, false).active());
  // Beyond kMaxRuleKBlocks the rule keeps data-parallel where the estimate alone would split
  // (estimates 9-46 %); forced still builds.
  EXPECT_FALSE(StreamKSchedule::make(352, StreamKSchedule::kMaxRuleKBlocks + 1, 66, false).active());
  EXPECT_FALSE(StreamKSchedule::make(352, 2004, 66, false).active());
  EXPECT_FALSE(StreamKSchedule::make(88, 2004, 66, false).active());
  EXPECT_FALSE(StreamKSchedule::make(70, 2048, 66, false).active());
  EXPECT_TRUE(StreamKSchedule::make(256, 2004, 66, true).active());
  EXPECT_TRUE(StreamKSchedule::make(352, StreamKSchedule::kMaxRuleKBlocks, 66, false).active());
  // 4096 x 4096 x 16384 (256 k-blocks): the estimate keeps data-parallel (1025 against 1024).
  EXPECT_FALSE(StreamKSchedule::make(256, 256, 66, false).active());
}

TEST(GemmStreamK, UnitOfInvertsBegin) {
  for (int64_t iters : {1, 7, 64, 1000, 16384})
    for (int64_t units : {1, 3, 64, 66}) {
      if (units > iters) continue;
      StreamKSchedule s;
      s.sk_tiles = iters;
      s.k_tiles = 1;
      s.units = units;
      for (int64_t u = 0; u < units; ++u) {
        ASSERT_LT(s.begin(u), s.begin(u + 1));
        ASSERT_EQ(s.unit_of(s.begin(u)), u);
        ASSERT_EQ(s.unit_of(s.begin(u + 1) - 1), u);
      }
    }
}

TEST(GemmStreamK, WorkspaceBytes) {
  EXPECT_EQ(StreamKSchedule::flag_bytes(1), 256);
  EXPECT_EQ(StreamKSchedule::flag_bytes(132), 768);
  EXPECT_EQ(StreamKSchedule::workspace_bytes(132, 128 * 256 * 4), 768 + 132 * 131072);
}

}  // namespace
