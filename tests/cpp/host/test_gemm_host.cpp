// Host logic of the GEMM (issue 3), ahead of its kernel: the persistent tile order and the
// autotuning disk cache.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gemm/autotune_cache.h"
#include "gemm/gemm_tune.h"
#include "gemm/tile_scheduler.h"

namespace {

using quack::detail::AutotuneCache;
using quack::detail::TileScheduler;

TEST(TileScheduler, IsABijectionOntoTheTileGrid) {
  for (int64_t M : {1, 127, 128, 129, 1000, 8192})
    for (int64_t N : {1, 255, 256, 3000, 8192})
      for (int group : {1, 3, 8, 16})
        for (int order : {0, 1, 2, 3})  // raster along M / N, each plain or serpentine
          for (int64_t L : {1, 3}) {
            const bool raster_n = order % 2 == 1;
            const auto s = TileScheduler::make(M, N, L, 128, 256, 2, 1, group, raster_n, /*serpentine=*/order >= 2);
            std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
            for (int64_t i = 0; i < s.tiles(); ++i) {
              const auto t = s.tile(i);
              ASSERT_GE(t.m, 0);
              ASSERT_LT(t.m, s.tiles_m);
              ASSERT_GE(t.n, 0);
              ASSERT_LT(t.n, s.tiles_n);
              ASSERT_LT(t.batch, L);
              ASSERT_TRUE(seen.insert({t.m, t.n, t.batch}).second)
                  << "tile visited twice: M=" << M << " N=" << N << " group=" << group;
            }
            EXPECT_EQ(static_cast<int64_t>(seen.size()), s.tiles_m * s.tiles_n * L);
          }
}

TEST(TileScheduler, CountsClusterTilesRoundedUp) {
  const auto s = TileScheduler::make(1000, 3000, 2, 128, 256, 2, 1, 8, false);
  EXPECT_EQ(s.tiles_m, 4);   // ceil(1000 / 256)
  EXPECT_EQ(s.tiles_n, 12);  // ceil(3000 / 256)
  EXPECT_EQ(s.tiles(), 96);
}

TEST(TileScheduler, GroupsWalkABandBeforeMovingOn) {
  // Raster along M with bands of 4 rows: the first 4 indices are column 0, rows 0..3.
  const auto s = TileScheduler::make(64 * 128, 64 * 256, 1, 128, 256, 1, 1, 4, false);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(s.tile(i).m, i);
    EXPECT_EQ(s.tile(i).n, 0);
  }
  EXPECT_EQ(s.tile(4).m, 0);
  EXPECT_EQ(s.tile(4).n, 1);
}

TEST(TileScheduler, SerpentineWalksOddBandsBackwards) {
  // Bands of 2 tile rows over 5 columns: band 0 walks columns 0..4, band 1 columns 4..0.
  const auto s = TileScheduler::make(4 * 128, 5 * 256, 1, 128, 256, 1, 1, 2, false, true);
  EXPECT_EQ(s.tile(0).n, 0);
  EXPECT_EQ(s.tile(9).n, 4);   // last index of band 0: column 4, row 1
  EXPECT_EQ(s.tile(9).m, 1);
  EXPECT_EQ(s.tile(10).n, 4);  // band 1 starts where band 0 ended
  EXPECT_EQ(s.tile(10).m, 2);
  EXPECT_EQ(s.tile(19).n, 0);
}

TEST(TileScheduler, QuackRasterHeuristic) {
  // 128x192 tiles, 2x1 clusters, bands of 8: bands along M (raster_n = false) when the cluster
  // columns, rounded up to 8, outnumber the cluster rows (QuACK 0.2.0, get_raster_order_from_option).
  EXPECT_FALSE(TileScheduler::heuristic_raster_n(8192, 8192, 128, 192, 2, 1, 8));    // 32 rows, 43 columns
  EXPECT_FALSE(TileScheduler::heuristic_raster_n(8192, 128256, 128, 192, 2, 1, 8));  // 32, 668
  EXPECT_TRUE(TileScheduler::heuristic_raster_n(16384, 4096, 128, 192, 2, 1, 8));    // 64, 22
  EXPECT_TRUE(TileScheduler::heuristic_raster_n(2048, 2048, 128, 256, 2, 1, 8));     // 8, 8: equal
}

std::string temp_path(const char* name) {
  char dir[] = "/tmp/quack_cache_XXXXXX";
  const char* d = mkdtemp(dir);
  return std::string(d ? d : "/tmp") + "/sub/" + name;
}

TEST(AutotuneCache, StoresPersistsAndReloads) {
  const std::string path = temp_path("gemm_autotune.tsv");
  {
    AutotuneCache c(path);
    EXPECT_FALSE(c.lookup("k1").has_value());
    c.store("k1", "tile128x256_c2x1");
    c.store("k2", "tile128x128_c1x1");
    EXPECT_EQ(c.lookup("k1").value(), "tile128x256_c2x1");
    EXPECT_EQ(c.last_error(), "");
  }
  AutotuneCache again(path);
  EXPECT_EQ(again.lookup("k1").value(), "tile128x256_c2x1");
  EXPECT_EQ(again.lookup("k2").value(), "tile128x128_c1x1");
}

// A store writes its one entry: a line deleted from the file by hand (while a process that had
// read it still runs) does not come back with that process's next store.
TEST(AutotuneCache, StoreDoesNotRewriteLinesDeletedByHand) {
  const std::string path = temp_path("gemm_autotune.tsv");
  AutotuneCache c(path);
  c.store("old", "tile_old");
  c.store("kept", "tile_kept");
  {
    std::ofstream f(path, std::ios::trunc);  // "old" deleted by hand
    f << "kept\ttile_kept\n";
  }
  c.store("new", "tile_new");
  AutotuneCache reread(path);
  EXPECT_FALSE(reread.lookup("old").has_value());
  EXPECT_EQ(reread.lookup("kept").value_or("missing"), "tile_kept");
  EXPECT_EQ(reread.lookup("new").value_or("missing"), "tile_new");
  EXPECT_EQ(c.last_error(), "");
}

TEST(AutotuneCache, ConcurrentProcessesLoseNoEntry) {
  const std::string path = temp_path("gemm_autotune.tsv");
  constexpr int kProcs = 4, kKeys = 50;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      AutotuneCache c(path);
      for (int k = 0; k < kKeys; ++k)
        c.store("p" + std::to_string(p) + "k" + std::to_string(k), "cfg" + std::to_string(k));
      _exit(c.last_error().empty() ? 0 : 1);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  AutotuneCache c(path);
  for (int p = 0; p < kProcs; ++p)
    for (int k = 0; k < kKeys; ++k)
      EXPECT_EQ(c.lookup("p" + std::to_string(p) + "k" + std::to_string(k)).value_or("missing"),
                "cfg" + std::to_string(k));
}

TEST(AutotuneCache, UnwritableFolderKeepsTheChoiceInMemory) {
  AutotuneCache c("/proc/quack_cannot_write_here/gemm_autotune.tsv");
  c.store("k", "v");
  EXPECT_EQ(c.lookup("k").value(), "v");
  EXPECT_NE(c.last_error(), "");
}

TEST(AutotuneCache, KeyRoundsShapesUpToPowersOfTwo) {
  EXPECT_EQ(quack::detail::autotune_key(90, 132, 5000, 8192, 4097, 1, "bf16.bf16>bf16", "A:k B:k C:-",
                                        "lincomb"),
            "sm90 sms132 m8192 n8192 k8192 l1 bf16.bf16>bf16 A:k B:k C:- epi:lincomb");
}

constexpr int kH200Sms = 132, kSm90 = 90;

TEST(AutotuneCache, GemmKeyNamesDtypesMajorsAndCsDtype) {
  quack::detail::GemmProblem p;
  p.m = 128;
  p.n = 8000;
  p.k = 8192;
  p.l = 1;
  p.ab_dtype = quack::DType::kBFloat16;
  p.d_dtype = quack::DType::kBFloat16;
  p.a_major = quack::detail::GemmMajor::kK;
  p.b_major = quack::detail::GemmMajor::kMN;
  EXPECT_EQ(quack::detail::gemm_tune_key(p, kH200Sms, kSm90),
            "sm90 sms132 m128 n8192 k8192 l1 bf16.bf16>bf16 A:k B:m C:- epi:lincomb");
  alignas(16) int c = 0;
  p.c = &c;  // C read (beta != 0): another key, naming C's dtype
  p.c_dtype = quack::DType::kBFloat16;
  EXPECT_EQ(quack::detail::gemm_tune_key(p, kH200Sms, kSm90),
            "sm90 sms132 m128 n8192 k8192 l1 bf16.bf16>bf16 A:k B:m C:bf16 epi:lincomb");
  p.c_dtype = quack::DType::kFloat32;  // an fp32 C into a bf16 D: another kernel
  EXPECT_EQ(quack::detail::gemm_tune_key(p, kH200Sms, kSm90),
            "sm90 sms132 m128 n8192 k8192 l1 bf16.bf16>bf16 A:k B:m C:f32 epi:lincomb");
  p.d_dtype = quack::DType::kFloat32;
  EXPECT_EQ(quack::detail::gemm_tune_key(p, kH200Sms, kSm90),
            "sm90 sms132 m128 n8192 k8192 l1 bf16.bf16>f32 A:k B:m C:f32 epi:lincomb");
  // Another device: another key (an H100 PCIe's 114 SMs; a future architecture).
  EXPECT_EQ(quack::detail::gemm_tune_key(p, 114, kSm90),
            "sm90 sms114 m128 n8192 k8192 l1 bf16.bf16>f32 A:k B:m C:f32 epi:lincomb");
  EXPECT_EQ(quack::detail::gemm_tune_key(p, kH200Sms, 100),
            "sm100 sms132 m128 n8192 k8192 l1 bf16.bf16>f32 A:k B:m C:f32 epi:lincomb");
  // The fused epilogues: their name and output 1's dtype (gemm_dact always reads its preact as C).
  p.epilogue = quack::detail::GemmEpilogue::kAct;
  p.d_dtype = quack::DType::kBFloat16;
  p.c_dtype = quack::DType::kBFloat16;
  p.d1_dtype = quack::DType::kBFloat16;
  EXPECT_EQ(quack::detail::gemm_tune_key(p, kH200Sms, kSm90),
            "sm90 sms132 m128 n8192 k8192 l1 bf16.bf16>bf16 A:k B:m C:bf16 epi:act,bf16");
  p.c = nullptr;
  EXPECT_EQ(quack::detail::gemm_tune_key(p, kH200Sms, kSm90),
            "sm90 sms132 m128 n8192 k8192 l1 bf16.bf16>bf16 A:k B:m C:- epi:act,bf16");
  p.epilogue = quack::detail::GemmEpilogue::kDAct;
  p.c = &c;
  EXPECT_EQ(quack::detail::gemm_tune_key(p, kH200Sms, kSm90),
            "sm90 sms132 m128 n8192 k8192 l1 bf16.bf16>bf16 A:k B:m C:bf16 epi:dact,bf16");
}

// gemm_rotary writes one output (D): its key names the epilogue and C, and no output-1 dtype.
TEST(AutotuneCache, GemmKeyOfRotaryHasOneOutput) {
  quack::detail::GemmProblem p;
  p.m = 16384;
  p.n = 6144;
  p.k = 2048;
  p.epilogue = quack::detail::GemmEpilogue::kRotary;
  p.d1_dtype = quack::DType::kFloat32;  // not an output of kRotary: must not show
  EXPECT_EQ(quack::detail::gemm_tune_key(p, kH200Sms, kSm90),
            "sm90 sms132 m16384 n8192 k2048 l1 bf16.bf16>bf16 A:k B:k C:- epi:rotary");
  alignas(16) int c = 0;
  p.c = &c;
  EXPECT_EQ(quack::detail::gemm_tune_key(p, kH200Sms, kSm90),
            "sm90 sms132 m16384 n8192 k2048 l1 bf16.bf16>bf16 A:k B:k C:bf16 epi:rotary");
}

// A C, D or D1 that TMA cannot address (base not 16-byte aligned, a leading or batch stride not a
// multiple of 16 bytes) takes the epilogue's plain loads and stores: its own key.
TEST(AutotuneCache, GemmKeyNamesOperandsOutOfTmasReach) {
  quack::detail::GemmProblem p;
  p.m = p.n = p.k = 4096;
  p.ldd = p.ldc = 4096;
  alignas(16) static char buf[64];
  p.d = buf;
  const std::string aligned = "sm90 sms132 m4096 n4096 k4096 l1 bf16.bf16>bf16 A:k B:k C:- epi:lincomb";
  EXPECT_EQ(quack::detail::gemm_tune_key(p, kH200Sms, kSm90), aligned);
  p.d = buf + 2;  // a 2-byte aligned bf16 D
  EXPECT_EQ(quack::detail::gemm_tune_key(p, kH200Sms, kSm90),
            "sm90 sms132 m4096 n4096 k4096 l1 bf16.bf16>bf16 A:k B:k C:- io:plain epi:lincomb");
  p.d = buf;
  p.ldd = 4100;  // 8200 bytes a row
  EXPECT_NE(quack::detail::gemm_tune_key(p, kH200Sms, kSm90), aligned);
  p.ldd = 4096;
  p.l = 2;
  p.batch_d = 4096 * 4096 + 4;  // batches 8 bytes off 16
  EXPECT_NE(quack::detail::gemm_tune_key(p, kH200Sms, kSm90).find("io:plain"), std::string::npos);
  p.batch_d = 4096 * 4096;
  p.c = buf + 4;  // C read from a 4-byte aligned address
  p.c_dtype = quack::DType::kBFloat16;
  EXPECT_EQ(quack::detail::gemm_tune_key(p, kH200Sms, kSm90),
            "sm90 sms132 m4096 n4096 k4096 l2 bf16.bf16>bf16 A:k B:k C:bf16 io:plain epi:lincomb");
}

// Every GemmEpilogue has a distinct non-empty name and one or two outputs (kGemmEpilogues).
TEST(AutotuneCache, EveryGemmEpilogueHasANameAndAnOutputCount) {
  using quack::detail::GemmEpilogue;
  std::set<std::string> names;
  for (int i = 0; i < quack::detail::kGemmEpilogueCount; ++i) {
    const auto e = static_cast<GemmEpilogue>(i);
    const std::string name = quack::detail::gemm_epilogue_name(e);
    EXPECT_FALSE(name.empty()) << i;
    EXPECT_TRUE(names.insert(name).second) << name;
    const int outputs = quack::detail::gemm_epilogue_outputs(e);
    EXPECT_TRUE(outputs == 1 || outputs == 2) << name;
  }
  EXPECT_EQ(std::string(quack::detail::gemm_epilogue_name(GemmEpilogue::kGatedConcat)), "gatedcat");
  EXPECT_EQ(quack::detail::gemm_epilogue_outputs(GemmEpilogue::kRotary), 1);
  EXPECT_EQ(quack::detail::gemm_epilogue_outputs(GemmEpilogue::kDGated), 2);
}

// One candidate: no tuning, no CUDA call (this runs without a GPU).
TEST(AutotuneCache, SingleCandidateIsTakenWithoutTiming) {
  quack::detail::GemmProblem p;
  auto run = [](const quack::detail::GemmProblem&, cudaStream_t) {};
  // The untuned pick, with another body than run's so that no identical-code folding merges them.
  auto other = [](const quack::detail::GemmProblem& q, cudaStream_t) {
    if (q.m < 0) std::abort();
  };
  EXPECT_EQ(quack::detail::gemm_tuned_launcher(p, {{"128x256", run}}, +other, nullptr), +run);
}

// The tuned pick: the fastest candidate, but the untuned choice (the tile rule's) stays unless
// the fastest times more than the margin under it.
TEST(AutotuneCache, PickKeepsTheRuleWithinTheMargin) {
  using quack::detail::gemm_tune_pick;
  const std::vector<float> ms = {1.000f, 0.995f, 1.020f};
  EXPECT_EQ(gemm_tune_pick(ms, 0, 0.01f), 0u) << "0.5 % faster: the rule's stays";
  EXPECT_EQ(gemm_tune_pick(ms, 2, 0.01f), 1u) << "2.5 % faster than the rule's";
  EXPECT_EQ(gemm_tune_pick(ms, -1, 0.01f), 1u) << "no untuned candidate: the fastest";
  EXPECT_EQ(gemm_tune_pick(ms, 0, 0.f), 1u) << "no margin: the fastest";
  EXPECT_EQ(gemm_tune_pick({2.0f, 1.5f, 1.9f}, 0, 0.01f), 1u);
  EXPECT_EQ(gemm_tune_pick({1.0f}, 0, 0.01f), 0u);
  EXPECT_EQ(gemm_tune_pick(ms, 7, 0.01f), 1u) << "an index out of range counts as none";
}

TEST(AutotuneCache, DefaultPathHonoursQuackCacheDir) {
  setenv("QUACK_CACHE_DIR", "/tmp/qc", 1);
  EXPECT_EQ(AutotuneCache::default_path(), "/tmp/qc/gemm_autotune.tsv");
  unsetenv("QUACK_CACHE_DIR");
}

}  // namespace
