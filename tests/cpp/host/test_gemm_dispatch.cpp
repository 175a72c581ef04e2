// Which kernel instance quack::gemm launches (src/gemm/gemm_dispatch.h), without a GPU, on the
// H200's 132 SMs: the layouts' instance group (kernel majors after the column-major-d swap), the
// tile rule's pick, and QUACK_GEMM_TILE's forced tiles (bench/bench_gemm.py --tiles): a forced
// tile runs the same instance as the rule's pick of that tile, and a tile not compiled for the
// layouts runs the group's base instance.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gemm/gemm_dispatch.h"
#include "gemm/gemm_instances.h"
#include "host_test_util.h"
#include "quack/gemm.h"

namespace quack {
namespace {

using namespace test;

constexpr int64_t kSms = 132;

// bf16 a (M, K), b (K, N), d (M, N); layout: a's then b's orientation ('r' row-major, 'c'
// column-major), d row-major (bench_gemm's d for these layouts: python/quack_cpp/gemm_ops.py
// _new_out). Fake pointers 1 TiB apart (the LM head's operands are GBs).
GemmArgs args(int64_t M, int64_t N, int64_t K, const char* layout, char d_or = 'r') {
  auto mk = [](char o, void* p, int64_t r, int64_t c) {
    return o == 'r' ? row_major(p, DType::kBFloat16, r, c) : col_major(p, DType::kBFloat16, r, c);
  };
  const uintptr_t unit = uintptr_t{1} << 40;
  GemmArgs g;
  g.a = mk(layout[0], fake(1, unit), M, K);
  g.b = mk(layout[1], fake(2, unit), K, N);
  g.d = mk(d_or, fake(3, unit), M, N);
  return g;
}

// The instance gemm(g) (or gemm_dgated(g)) launches with QUACK_GEMM_TILE = tile (nullptr: unset).
template <class Args>
std::string launched(const Args& g, const char* tile) {
  const char* saved_n = std::getenv("QUACK_GEMM_TILE_N");
  EXPECT_EQ(saved_n, nullptr) << "QUACK_GEMM_TILE_N is set in the test's environment";
  if (tile)
    setenv("QUACK_GEMM_TILE", tile, 1);
  else
    unsetenv("QUACK_GEMM_TILE");
  const char* name = detail::gemm_instance_name(g, kSms);
  unsetenv("QUACK_GEMM_TILE");
  return name ? name : "(none)";
}

struct Case {
  int64_t m, n, k;
  const char* layout;
  const char* rule;  // the instance the rule picks (unset or "auto")
};

// The LM head's GEMMs (vocabulary 128256, hidden 4096) as bench_gemm runs them: logits y = x·Wᵀ
// (rc: kernel majors kk) for a 2048-token chunk and a 16384-token batch, the dgrad dx = dy·W (rr:
// km) and the weight gradient dW = dyᵀ·x over a 2048-token chunk (cr: mm).
const Case kLmHead[] = {
    {2048, 128256, 4096, "rc", "gemm_sm90_128x192pp_bf16_bf16_kk"},
    {16384, 128256, 4096, "rc", "gemm_sm90_128x192pp_bf16_bf16_kk"},
    {16384, 4096, 128256, "rr", "gemm_sm90_128x256e64_bf16_bf16_km"},
    {128256, 4096, 2048, "cr", "gemm_sm90_128x256e64_bf16_bf16_mm"},
};

TEST(GemmDispatch, RulePicksPerLayoutGroup) {
  for (const Case& c : kLmHead) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) + " " + c.layout);
    const GemmArgs g = args(c.m, c.n, c.k, c.layout);
    EXPECT_EQ(launched(g, nullptr), c.rule);
    EXPECT_EQ(launched(g, "auto"), c.rule);
    EXPECT_EQ(launched(g, ""), c.rule);
  }
}

// Whether the build holds an instance of this name (A/B builds add instances_ab.txt's).
bool compiled(const std::string& name) {
  for (const detail::GemmInstance& i : detail::kGemmInstances)
    if (name == i.name) return true;
  return false;
}

// A forced tile runs its instance of the layouts' group: the instance the rule would run when
// it picks that tile (nothing else differs between "auto" and a forced tile: the raster and
// the schedule come from the instance and QUACK_GEMM_RASTER alone).
TEST(GemmDispatch, ForcedTilesRunTheirInstanceOfTheGroup) {
  for (const Case& c : kLmHead) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) + " " + c.layout);
    const GemmArgs g = args(c.m, c.n, c.k, c.layout);
    const std::string majors = std::string(c.rule).substr(std::string(c.rule).size() - 2);
    // mm: compiled with 128x256 alone in instances.txt (the group's base instance), more tiles
    // in an A/B build.
    const bool mm = majors == "mm";
    for (const char* tile : {"128x128pp", "128x192pp", "128x256"}) {
      // instances.txt's bf16 128x256 (kk, km, mm) is the 128 x 64-subtile variant, 128x256e64;
      // its 128x128 pingpong (kk, km) the 64 x 128-subtile one, 128x128ppe128 (mm: none).
      const std::string variant = std::string(tile) == "128x256"                 ? "e64"
                                  : std::string(tile) == "128x128pp" && !mm ? "e128"
                                                                            : "";
      const std::string own = std::string("gemm_sm90_") + tile + variant + "_bf16_bf16_" + majors;
      EXPECT_EQ(launched(g, tile), !mm || compiled(own) ? own : "gemm_sm90_128x256e64_bf16_bf16_mm")
          << tile;
    }
    // The rule's instance, forced by its own tile name.
    const std::string rule = c.rule;
    const std::string tile = rule.substr(10, rule.find("_bf16") - 10);
    EXPECT_EQ(launched(g, tile.c_str()), rule);
  }
}

// A column-major d: the kernel computes Dᵀ = Bᵀ·Aᵀ, so (M, N) swap and a's and b's majors swap
// places (rc with a column-major d: kernel A = b K-major, B = a K-major: kk, M = N).
TEST(GemmDispatch, ColumnMajorDSwapsTheProblem) {
  // 128256 x 16384 x 4096 with a column-major d is 16384 x 128256 x 4096 with a row-major one.
  EXPECT_EQ(launched(args(128256, 16384, 4096, "rc", 'c'), nullptr), "gemm_sm90_128x192pp_bf16_bf16_kk");
  // dx with a column-major d: kernel A = b (row-major (K, N): MN-major), B = a (K-major): mk,
  // compiled with 128x256 alone.
  EXPECT_EQ(launched(args(16384, 4096, 14336, "rr", 'c'), nullptr), "gemm_sm90_128x256_bf16_bf16_mk");
}

// The five LLM shapes of bench_gemm --quick (A and B row-major: km): 128x192 pingpong, but the
// down projection's long K (16384x4096x14336, K ≥ kLongK) takes the cooperative 128x256.
TEST(GemmDispatch, LlmShapesRunTheWidePingpongTile) {
  const int64_t shapes[][3] = {{8192, 8192, 8192}, {16384, 14336, 4096}, {16384, 28672, 4096}, {8192, 128256, 4096}};
  for (const auto& s : shapes)
    EXPECT_EQ(launched(args(s[0], s[1], s[2], "rr"), nullptr), "gemm_sm90_128x192pp_bf16_bf16_km")
        << s[0] << "x" << s[1] << "x" << s[2];
  EXPECT_EQ(launched(args(16384, 4096, 14336, "rr"), nullptr), "gemm_sm90_128x256e64_bf16_bf16_km");
}

// Linear + cross-entropy's three GEMMs per 4096-token chunk (V = 128256, D = 4096): logits (rc:
// kk), dx (rr: km) and the fp32-accumulating dweight half (cr: mm, fp32 d, C = d, beta 1; the
// rule's pick: 128x192 pingpong with the C ring, 128x192ppa1d2, see LceDweightTiles).
// "<name part>:<tile>" forces the tile only on the groups whose base instance's name contains
// the part (here the dweight's "..._bf16_f32_mm"); the others keep the rule. An A/B candidate
// (instances_ab.txt: GemmInstance::candidate) runs only when forced by its tile name: the rule
// picks the same instance in A/B builds.
TEST(GemmDispatch, NamePartLimitsTheForcedTile) {
  const GemmArgs logits = args(4096, 128256, 4096, "rc");
  const GemmArgs dx = args(4096, 4096, 128256, "rr");
  GemmArgs dw = args(64128, 4096, 4096, "cr");
  dw.d = row_major(fake(3, uintptr_t{1} << 40), DType::kFloat32, 64128, 4096);
  dw.c = dw.d;
  dw.beta = 1.f;
  const std::string rule_logits = launched(logits, nullptr), rule_dx = launched(dx, nullptr);
  const std::string rule_dw = "gemm_sm90_128x192ppa1d2_bf16_f32_mm";
  EXPECT_EQ(launched(dw, nullptr), rule_dw);
  // A tile of the dweight's group: its base, its production 128x192ppa1d2 and, in A/B builds, the
  // A/B variants.
  std::vector<std::string> tiles = {"128x256"};
  for (const detail::GemmInstance& i : detail::kGemmInstances)
    if (std::string(i.name).find("_bf16_f32_mm") != std::string::npos && std::string(i.name).rfind("gemm_sm90_", 0) == 0)
      tiles.push_back(i.tile);
  for (const std::string& tile : tiles) {
    SCOPED_TRACE(tile);
    const std::string spec = "f32_mm:" + tile;
    EXPECT_EQ(launched(dw, spec.c_str()), "gemm_sm90_" + tile + "_bf16_f32_mm");
    EXPECT_EQ(launched(logits, spec.c_str()), rule_logits);
    EXPECT_EQ(launched(dx, spec.c_str()), rule_dx);
  }
  // A name part that matches: its group forced (a tile it lacks: its base); the others' rule.
  EXPECT_EQ(launched(logits, "bf16_bf16_kk:128x128pp"), "gemm_sm90_128x128ppe128_bf16_bf16_kk");
  EXPECT_EQ(launched(dx, "bf16_bf16_kk:128x128pp"), rule_dx);
  EXPECT_EQ(launched(dw, "bf16_bf16_kk:128x128pp"), rule_dw);
  EXPECT_EQ(launched(dw, "f32_mm:128x192pp"), rule_dw);  // the tile without its variant
  EXPECT_EQ(launched(dw, "f32_mm:128x64"), "gemm_sm90_128x256_bf16_f32_mm");  // not compiled: base
  EXPECT_EQ(launched(dw, "f32_mm:auto"), rule_dw);
  EXPECT_EQ(launched(dw, "f32_mm:128x256"), "gemm_sm90_128x256_bf16_f32_mm");
  // QUACK_GEMM_TILE_N's keys never select an A/B candidate: "256" runs the base, "192" the
  // production 128x192 pingpong of the group (the C ring), "128" (no production 128x128 in the
  // group; an A/B one in A/B builds) the base.
  setenv("QUACK_GEMM_TILE_N", "192", 1);
  const char* n192 = detail::gemm_instance_name(dw, kSms);
  setenv("QUACK_GEMM_TILE_N", "128", 1);
  const char* n128 = detail::gemm_instance_name(dw, kSms);
  setenv("QUACK_GEMM_TILE_N", "256", 1);
  const char* n256 = detail::gemm_instance_name(dw, kSms);
  unsetenv("QUACK_GEMM_TILE_N");
  EXPECT_EQ(std::string(n192), rule_dw);
  EXPECT_EQ(std::string(n128), "gemm_sm90_128x256_bf16_f32_mm");
  EXPECT_EQ(std::string(n256), "gemm_sm90_128x256_bf16_f32_mm");
  // Without a name part every group is forced.
  EXPECT_EQ(launched(dx, "128x128pp"), "gemm_sm90_128x128ppe128_bf16_bf16_km");
}

// Linear + cross-entropy's dweight GEMMs (cr: mm, 64128 rows of a 128256-row vocabulary, D =
// 4096, 4096-token chunks): the first chunk writes fp32 rows (no C) on the cooperative 128x256;
// the later chunks add into them (C = D, beta 1) on 128x192 pingpong with the C ring (an
// instance with a C ring joins the rule's options only where C is read: GemmInstance::c_ring);
// the last chunk's workspace rows go into the bf16 dweight with their fp32 accumulator as C
// (the _cf32 mm group's only instance); at K ≥ kLongK (the vocabulary pass over all T = 16384
// tokens, accumulating) the cooperative 128x256 wins the rule's comparison again.
TEST(GemmDispatch, LceDweightTiles) {
  const uintptr_t unit = uintptr_t{1} << 40;
  GemmArgs first = args(64128, 4096, 4096, "cr");
  first.d = row_major(fake(3, unit), DType::kFloat32, 64128, 4096);
  EXPECT_EQ(launched(first, nullptr), "gemm_sm90_128x256_bf16_f32_mm");
  GemmArgs acc = first;
  acc.c = acc.d;
  acc.beta = 1.f;
  EXPECT_EQ(launched(acc, nullptr), "gemm_sm90_128x192ppa1d2_bf16_f32_mm");
  GemmArgs beta0 = acc;  // beta = 0: C is not read
  beta0.beta = 0.f;
  EXPECT_EQ(launched(beta0, nullptr), "gemm_sm90_128x256_bf16_f32_mm");
  GemmArgs last = args(64128, 4096, 4096, "cr");
  last.c = row_major(fake(4, unit), DType::kFloat32, 64128, 4096);
  last.beta = 1.f;
  EXPECT_EQ(launched(last, nullptr), "gemm_sm90_128x192ppa1d2_bf16_bf16_cf32_mm");
  GemmArgs vocab = args(64128, 4096, 16384, "cr");
  vocab.d = row_major(fake(3, unit), DType::kFloat32, 64128, 4096);
  vocab.c = vocab.d;
  vocab.beta = 1.f;
  EXPECT_EQ(launched(vocab, nullptr), "gemm_sm90_128x256_bf16_f32_mm");
}

// gemm_dgated (an MLP's fc2 dgrad: a (M, K) row-major, b (K, H) row-major, kernel majors km):
// 128x192 pingpong wherever it qualifies above kIoWarpMaxK (the cooperative 128x256 at no K:
// kCooperativeRatesFused); at K ≤ kIoWarpMaxK (2048) the I/O-warp 128x128ppa3d2io where 128x128
// pingpong qualifies (128x192 out: gemm.cpp, choose_instance); else a1d2; no pingpong tile
// qualifying: 128x256. QUACK_GEMM_TILE=128x128pp forces the tile's first variant, a1d2, at any K.
TEST(GemmDispatch, DGatedTakesThePingpongTiles) {
  const uintptr_t unit = uintptr_t{1} << 40;
  auto dgated = [&](int64_t M, int64_t H, int64_t K) {
    GemmDGatedArgs g;
    g.a = row_major(fake(1, unit), DType::kBFloat16, M, K);
    g.b = row_major(fake(2, unit), DType::kBFloat16, K, H);
    g.preact = row_major(fake(3, unit), DType::kBFloat16, M, 2 * H);
    g.dpreact = row_major(fake(4, unit), DType::kBFloat16, M, 2 * H);
    g.postact = row_major(fake(5, unit), DType::kBFloat16, M, H);
    return g;
  };
  const std::string io = "gemm_dgated_sm90_128x128ppa3d2io_bf16_x2_pbf16_km";
  const std::string a1d2 = "gemm_dgated_sm90_128x128ppa1d2_bf16_x2_pbf16_km";
  const std::string pp192 = "gemm_dgated_sm90_128x192pp_bf16_x2_pbf16_km";
  const std::string coop = "gemm_dgated_sm90_128x256_bf16_x2_pbf16_km";
  EXPECT_EQ(launched(dgated(16384, 5632, 2048), nullptr), io);  // the demo's fc2 dgrad
  EXPECT_EQ(launched(dgated(16384, 5632, 1024), nullptr), io);
  EXPECT_EQ(launched(dgated(16384, 14336, 2048), nullptr), io);
  EXPECT_EQ(launched(dgated(16384, 5632, 512), nullptr), io);
  // Above kIoWarpMaxK: 30 waves x 256·192 / 1.06 against 43 x 256·128 at N = 5632.
  EXPECT_EQ(launched(dgated(16384, 5632, 2049), nullptr), pp192);
  EXPECT_EQ(launched(dgated(16384, 14336, 4096), nullptr), pp192);
  EXPECT_EQ(launched(dgated(16384, 7168, 4096), nullptr), pp192);
  EXPECT_EQ(launched(dgated(8192, 8192, 8192), nullptr), pp192);
  EXPECT_EQ(launched(dgated(16384, 4096, 14336), nullptr), pp192);  // plain gemm: 128x256 here
  // 128x128 pingpong qualifies (16 x 40 tiles ≥ 4 · 132), 128x192 does not (16 x 27).
  EXPECT_EQ(launched(dgated(2048, 5120, 2048), nullptr), io);
  EXPECT_EQ(launched(dgated(2048, 5120, 2049), nullptr), a1d2);
  EXPECT_EQ(launched(dgated(2048, 5120, 8192), nullptr), a1d2);
  EXPECT_EQ(launched(dgated(2048, 2048, 8192), nullptr), coop);  // no pingpong tile qualifies
  EXPECT_EQ(launched(dgated(8192, 8192, 8192), "128x128pp"), a1d2);
  EXPECT_EQ(launched(dgated(16384, 5632, 2048), "128x128pp"), a1d2);
  EXPECT_EQ(launched(dgated(16384, 5632, 2048), "128x192pp"), pp192);
  EXPECT_EQ(launched(dgated(16384, 5632, 8192), "128x128ppa3d2io"), io);
  EXPECT_EQ(launched(dgated(16384, 5632, 8192), "128x256"), coop);
}

// gemm_act (x·W1ᵀ: kk), gemm_dact (dgrad: km) and gemm_gated (kk) follow gemm's pingpong choice
// but never take the cooperative 128x256 where a pingpong tile qualifies
// (kCooperativeRatesFused): 128x192 pingpong at the LLM shapes and at long K, where plain gemm
// takes 128x256; QUACK_GEMM_TILE forces the others.
TEST(GemmDispatch, FusedEpiloguesFollowTheRule) {
  const uintptr_t unit = uintptr_t{1} << 40;
  auto gated = [&](int64_t M, int64_t N, int64_t K) {
    GemmGatedArgs g;
    g.a = row_major(fake(1, unit), DType::kBFloat16, M, K);
    g.b = col_major(fake(2, unit), DType::kBFloat16, K, N);
    g.preact = row_major(fake(3, unit), DType::kBFloat16, M, N);
    g.postact = row_major(fake(4, unit), DType::kBFloat16, M, N / 2);
    g.activation = Activation::kSwiglu;
    return g;
  };
  auto act = [&](int64_t M, int64_t N, int64_t K) {
    GemmActArgs g;
    g.a = row_major(fake(1, unit), DType::kBFloat16, M, K);
    g.b = col_major(fake(2, unit), DType::kBFloat16, K, N);
    g.preact = row_major(fake(3, unit), DType::kBFloat16, M, N);
    g.postact = row_major(fake(4, unit), DType::kBFloat16, M, N);
    g.activation = Activation::kRelu;
    return g;
  };
  auto dact = [&](int64_t M, int64_t N, int64_t K) {
    GemmDActArgs g;
    g.a = row_major(fake(1, unit), DType::kBFloat16, M, K);
    g.b = row_major(fake(2, unit), DType::kBFloat16, K, N);
    g.preact = row_major(fake(3, unit), DType::kBFloat16, M, N);
    g.dpreact = row_major(fake(4, unit), DType::kBFloat16, M, N);
    g.activation = Activation::kRelu;
    return g;
  };
  const std::string pp192 = "gemm_gated_sm90_128x192pp_bf16_bf16_kk";
  EXPECT_EQ(launched(gated(16384, 14336, 4096), nullptr), pp192);
  EXPECT_EQ(launched(gated(8192, 8192, 8192), nullptr), pp192);
  EXPECT_EQ(launched(gated(16384, 14336, 2048), nullptr), pp192);
  EXPECT_EQ(launched(gated(16384, 4096, 14336), nullptr), pp192);
  EXPECT_EQ(launched(gated(16384, 4096, 14336), "128x256"), "gemm_gated_sm90_128x256_bf16_bf16_kk");
  EXPECT_EQ(launched(gated(16384, 14336, 4096), "128x128pp"), "gemm_gated_sm90_128x128pp_bf16_bf16_kk");
  for (int64_t k : {int64_t{8192}, int64_t{14336}, int64_t{28672}}) {
    EXPECT_EQ(launched(act(16384, 4096, k), nullptr), "gemm_act_sm90_128x192pp_bf16_bf16_kk") << k;
    EXPECT_EQ(launched(dact(16384, 4096, k), nullptr), "gemm_dact_sm90_128x192pp_bf16_bf16_km") << k;
  }
  EXPECT_EQ(launched(args(16384, 4096, 14336, "rc"), nullptr), "gemm_sm90_128x256e64_bf16_bf16_kk");
}

TEST(GemmDispatch, NothingLaunchedForEmptyOrKZero) {
  EXPECT_EQ(launched(args(0, 4096, 4096, "rc"), nullptr), "(none)");
  EXPECT_EQ(launched(args(4096, 4096, 0, "rc"), nullptr), "(none)");
}

}  // namespace
}  // namespace quack
