// The generated table of GEMM kernel instances (gemm/gemm_instances.h, from
// src/gemm/sm90/instances.txt by cmake/QuackGemmInstances.cmake): names follow the naming rule of
// the list, no group has two default tiles, nothing is listed twice, the documented dtypes are there.
#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>
#include <tuple>

#include "gemm/gemm_instances.h"

namespace {

using quack::DType;
using quack::detail::GemmEpilogue;
using quack::detail::GemmInstance;
using quack::detail::GemmMajor;
using quack::detail::kGemmInstances;

std::string short_name(DType t) {
  return t == DType::kBFloat16 ? "bf16" : t == DType::kFloat16 ? "f16" : t == DType::kFloat32 ? "f32" : "?";
}

// The list's naming rule (instances.txt):
// gemm[_bias|_act|_dact|_gated|_gatedcat|_dgated|_rotary]_sm90_<BMxBN>[pp][c1|c1x2]_<ab>_<d>[_c<c>][_p<postact>]_<majors>.
std::string expected_tile(const GemmInstance& i) {
  std::string t = std::to_string(i.bm) + "x" + std::to_string(i.bn) + (i.pingpong ? "pp" : "");
  if (i.cluster_m == 1 && i.cluster_n == 1) t += "c1";
  if (i.cluster_m == 1 && i.cluster_n == 2) t += "c1x2";
  return t;
}

// The kernel name's prefix: "gemm", or "gemm_" and the epilogue's name (kGemmEpilogues).
std::string prefix(GemmEpilogue e) {
  return e == GemmEpilogue::kLinComb ? "gemm" : std::string("gemm_") + quack::detail::gemm_epilogue_name(e);
}

bool one_output(GemmEpilogue e) { return quack::detail::gemm_epilogue_outputs(e) == 1; }

// The tile name's suffix of an epilogue variant (instances_ab.txt: "<epilogue>:[e<N>[u]][a<S>[d<D>]][cf][ip][diag<M>][vd]"
// gives "[e<N>[u]][a<S>[d<D>]][cf][ip][diag<M>][vd]"), empty if none; "?" if the tile part is not expected_tile(i) with
// such a suffix.
std::string split_suffix(const GemmInstance& i) {
  const std::string t = i.tile, base = expected_tile(i);
  if (t.compare(0, base.size(), base) != 0) return "?";
  std::string rest = t.substr(base.size());
  // vd (last): the k-loop's descriptors in vector registers, an A/B control (instances_ab.txt only)
  std::string vd;
  if (rest.size() >= 2 && rest.compare(rest.size() - 2, 2, "vd") == 0) {
    if (!i.candidate) return "?";
    vd = "vd";
    rest.resize(rest.size() - 2);
  }
  auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  size_t k = 0;
  if (k < rest.size() && rest[k] == 'e') {  // e<N>[u]: the epilogue subtile's width (u: unswizzled, A/B only)
    ++k;
    const size_t d0 = k;
    while (k < rest.size() && digit(rest[k])) ++k;
    if (k == d0) return "?";
    if (k < rest.size() && rest[k] == 'u') {
      if (!i.candidate || rest.substr(d0, k - d0) != "128") return "?";
      ++k;
    }
  }
  bool diag = false;  // the name says diag<M>: the flag must say it too, and only then
  bool ring = false;  // the name says a<S> with S ≥ 1: GemmInstance::c_ring must say it, and only then
  if (k < rest.size()) {  // a<S>[d<D>]: the buffer split
    std::string split = rest.substr(k);
    // diag<M>: a diagnostic A/B candidate after the split (wrong results; instances_ab.txt only)
    if (split.size() > 5 && split.compare(split.size() - 5, 4, "diag") == 0 && digit(split.back())) {
      if (!i.candidate) return "?";
      diag = true;
      split.resize(split.size() - 5);
    }
    // ip: C's ring slots are output 0's buffers (gemm_dgated A/B candidates, after cf; a ring of
    // at least 2; never with diag<M>); io: the same with an I/O warp per pingpong warpgroup
    // (gemm_dgated, production or A/B; never with cf or diag<M>; GemmInstance::io_warps says it)
    bool io = false;
    if (split.size() > 2 && split.compare(split.size() - 2, 2, "io") == 0) {
      if (i.epilogue != GemmEpilogue::kDGated || diag || !i.pingpong) return "?";
      io = true;
      split.resize(split.size() - 2);
      if (split.size() < 2 || !digit(split[1]) || split[1] < '2') return "?";
      if (split.size() > 2 && split.compare(split.size() - 2, 2, "cf") == 0) return "?";
    }
    if (split.size() > 2 && split.compare(split.size() - 2, 2, "ip") == 0) {
      if (!i.candidate || i.epilogue != GemmEpilogue::kDGated || diag) return "?";
      split.resize(split.size() - 2);
      if (split.size() < 2 || !digit(split[1]) || split[1] < '2') return "?";
    }
    // cf: the conflict-free order of 32-bit C and D (gemm_dgated A/B candidates, before ip, diag<M>)
    if (split.size() > 2 && split.compare(split.size() - 2, 2, "cf") == 0) {
      if (!i.candidate || i.epilogue != GemmEpilogue::kDGated) return "?";
      split.resize(split.size() - 2);
    }
    const bool ok = (split.size() == 2 || (split.size() == 4 && split[2] == 'd' && digit(split[3]))) &&
                    split[0] == 'a' && digit(split[1]);
    if (!ok) return "?";
    ring = split[1] != '0';
    if (i.io_warps != io) return "?";
  } else if (i.io_warps) {
    return "?";
  }
  if (i.diagnostic != diag || i.c_ring != ring) return "?";
  return rest + vd;
}

std::string expected_name(const GemmInstance& i) {
  // gemm_dgated's output 0 (and C) are packed 16-bit pairs: "x2" (kFloat32 in the table).
  const std::string d = i.epilogue == GemmEpilogue::kDGated ? "x2" : short_name(i.d);
  std::string n = prefix(i.epilogue) + "_sm90_" + expected_tile(i) + split_suffix(i) + "_" +
                  short_name(i.ab) + "_" + d;
  if (i.c != i.d) n += "_c" + short_name(i.c);
  if (!one_output(i.epilogue) && (i.d1 != i.d || i.epilogue == GemmEpilogue::kDGated)) n += "_p" + short_name(i.d1);
  n += std::string("_") + (i.a == GemmMajor::kK ? "k" : "m") + (i.b == GemmMajor::kK ? "k" : "m");
  return n;
}

// gemm.cpp's is_default: the production 128x256 cooperative 2x1 instance (with or without an
// epilogue variant, e.g. 128x256e64); an A/B candidate is no group's base.
bool is_default(const GemmInstance& i) {
  return i.bm == 128 && i.bn == 256 && !i.pingpong && i.cluster_m == 2 && i.cluster_n == 1 && !i.candidate;
}

TEST(GemmInstances, NamesFollowTheListsRule) {
  ASSERT_GT(std::size(kGemmInstances), 0u);
  std::set<std::string> names;
  for (const GemmInstance& i : kGemmInstances) {
    EXPECT_EQ(std::string(i.name), expected_name(i));
    EXPECT_EQ(std::string(i.tile), expected_tile(i) + split_suffix(i)) << i.name;
    EXPECT_NE(split_suffix(i), "?") << i.name;
    EXPECT_TRUE(names.insert(i.name).second) << i.name << " is listed twice";
    EXPECT_NE(i.run, nullptr) << i.name;
    if (one_output(i.epilogue)) {
      EXPECT_EQ(i.d1, i.d) << i.name << ": one output";
    }
    if (i.epilogue == GemmEpilogue::kGatedConcat) {
      EXPECT_EQ(i.b, GemmMajor::kK) << i.name << ": the concat view of B is for a K-major B";
    }
  }
}

TEST(GemmInstances, ShapesAreCompilable) {
  for (const GemmInstance& i : kGemmInstances) {
    EXPECT_TRUE(i.bm == 128 || (!i.pingpong && (i.bm == 64 || i.bm == 256))) << i.name;
    EXPECT_TRUE(i.bn == 64 || i.bn == 128 || i.bn == 192 || i.bn == 256) << i.name;
    // At most 192 fp32 accumulators per consumer thread (tile_config.cuh).
    const int rows_per_wg = i.pingpong ? i.bm : i.bm == 64 ? 64 : i.bm / 2;
    EXPECT_LE(rows_per_wg * i.bn / 128, 192) << i.name;
    EXPECT_LE(i.cluster_m * i.cluster_n, 2) << i.name;
  }
}

// The tiles issue 16 added for the LLM shapes: QuACK 0.2.0's default (pingpong 128x192, 2x1) for
// the forward (a row-major, b column-major) and dgrad (both row-major) layouts of bf16.
TEST(GemmInstances, WidePingpongTileForBf16) {
  int found = 0;
  for (const GemmInstance& i : kGemmInstances)
    if (i.epilogue == GemmEpilogue::kLinComb && i.ab == DType::kBFloat16 && i.d == DType::kBFloat16 &&
        i.c == DType::kBFloat16 && std::string(i.tile) == "128x192pp" && i.a == GemmMajor::kK)
      ++found;
  EXPECT_EQ(found, 2);
}

// gemm.cpp's base instance of a group (the instances of one epilogue, dtypes and majors) is its
// 128x256 cooperative instance, or its first line where the group has none: at most one each.
TEST(GemmInstances, EveryGroupHasOneBase) {
  using Key = std::tuple<int, int, int, int, int, int, int>;
  auto key = [](const GemmInstance& i) {
    return Key{int(i.epilogue), int(i.ab), int(i.d), int(i.c), int(i.d1), int(i.a), int(i.b)};
  };
  std::set<Key> with_default;
  for (const GemmInstance& i : kGemmInstances)
    if (is_default(i)) {
      EXPECT_TRUE(with_default.insert(key(i)).second) << i.name << ": two default instances";
    }
}

// The dtypes quack/gemm_act.h and quack/gemm.h document for the fused epilogues: every one for
// bf16 and for fp16 inputs (outputs of the input dtype), with A, B and outputs in the layouts
// of an MLP (kk forward, km dgrad); fp32 preact and postact for bf16 inputs (gemm_act,
// gemm_gated).
TEST(GemmInstances, FusedEpiloguesForEachDocumentedDtype) {
  auto has = [](GemmEpilogue e, DType ab, DType d, DType d1, GemmMajor b) {
    for (const GemmInstance& i : kGemmInstances)
      if (i.epilogue == e && i.ab == ab && i.d == d && i.c == d && i.d1 == d1 && i.a == GemmMajor::kK && i.b == b)
        return true;
    return false;
  };
  const GemmMajor kK = GemmMajor::kK, kMN = GemmMajor::kMN;
  for (DType t : {DType::kBFloat16, DType::kFloat16}) {
    const std::string n = short_name(t);
    EXPECT_TRUE(has(GemmEpilogue::kAct, t, t, t, kK)) << n;
    EXPECT_TRUE(has(GemmEpilogue::kDAct, t, t, t, kMN)) << n;
    EXPECT_TRUE(has(GemmEpilogue::kBias, t, t, t, kK)) << n;
    EXPECT_TRUE(has(GemmEpilogue::kGated, t, t, t, kK)) << n;
    EXPECT_TRUE(has(GemmEpilogue::kGatedConcat, t, t, t, kK)) << n;
    EXPECT_TRUE(has(GemmEpilogue::kDGated, t, DType::kFloat32, t, kMN)) << n;  // packed pairs: x2
  }
  EXPECT_TRUE(has(GemmEpilogue::kAct, DType::kBFloat16, DType::kFloat32, DType::kFloat32, kK));
  EXPECT_TRUE(has(GemmEpilogue::kGated, DType::kBFloat16, DType::kFloat32, DType::kFloat32, kK));
}

}  // namespace
