// Tier 1: the norm launch-geometry heuristics (src/norm/norm_config.h), swept over N and M
// for the knob settings rmsnorm.cpp's choose_geometry uses (no GPU).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "norm/norm_config.h"
#include "norm/rmsnorm_tuning.h"

namespace quack::detail {
namespace {

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// A sample of N in 1..600000 (past the longest vector-path row, 524288): every N ≤ 1100,
// powers of two and their neighbours, multiples of the vector widths near the limits, odd
// values and a stride through the whole range.
std::vector<int64_t> sample_n() {
  std::set<int64_t> s;
  for (int64_t n = 1; n <= 1100; ++n) s.insert(n);
  for (int64_t p = 1; p <= 524288; p *= 2)
    for (int64_t d : {-9, -8, -4, -1, 0, 1, 4, 8, 9}) s.insert(p + d);
  for (int64_t n = 1101; n <= 600000; n += 997) s.insert(n);   // odd stride
  for (int64_t n = 1104; n <= 600000; n += 1016) s.insert(n);  // multiples of 8
  for (int64_t n : {2520, 4095, 4097, 5120, 8191, 12288, 65535, 65537, 131071, 131072, 131073,
                    131080, 262136, 262143, 262144, 262145, 262152, 299999, 300000, 524280,
                    524287, 524288, 524289, 524296, 600000})
    s.insert(n);
  std::vector<int64_t> v;
  for (int64_t n : s)
    if (n >= 1 && n <= 600000) v.push_back(n);
  return v;
}

const std::vector<int64_t> kRows = {0, 1, 2, 7, 127, 128, 129, 257, 8192, 65537, int64_t{1} << 33};

struct KnobCase {
  const char* name;
  RowConfigKnobs knobs;
  int vec;
  int max_vecs;  // the kernel instance's kMaxVecs (registers per thread)
};

// The settings the API uses (rmsnorm_{fwd,bwd}_knobs per x dtype: vec = 4 for fp32, 8 for
// 16-bit), plus the same knobs with vec = 1 for the heuristic itself; the kernels are
// instantiated with kMaxVecs = k*VectorsPerThread.
std::vector<KnobCase> knob_cases() {
  std::vector<KnobCase> out;
  for (quack::DType dt : {quack::DType::kFloat32, quack::DType::kBFloat16}) {
    const int vec = 16 / quack::dtype_size(dt);
    for (int v : {1, vec}) {
      RowConfigKnobs fwd = quack::detail::rmsnorm_fwd_knobs(dt);
      fwd.values_per_thread = fwd.values_per_thread / vec * v;
      out.push_back({"fwd", fwd, v, kNormFwdVectorsPerThread});
      RowConfigKnobs bwd = quack::detail::rmsnorm_bwd_knobs(dt);
      bwd.values_per_thread = bwd.values_per_thread / vec * v;
      out.push_back({"bwd", bwd, v, kNormBwdVectorsPerThread});
    }
  }
  return out;
}

std::string where(const KnobCase& k, int64_t M, int64_t N) {
  return std::string(k.name) + " vec=" + std::to_string(k.vec) + " M=" + std::to_string(M) +
         " N=" + std::to_string(N);
}

// Checks the invariants of a vector-path geometry; returns false on the first failure.
::testing::AssertionResult row_geometry_ok(const RowGeometry& g, const KnobCase& k, int64_t M,
                                           int64_t N) {
  auto fail = [&](const std::string& what) {
    return ::testing::AssertionFailure()
           << where(k, M, N) << ": " << what << " (vpt " << g.vpt << ", tpr " << g.tpr
           << ", cluster_n " << g.cluster_n << ", cta_threads " << g.cta_threads
           << ", row_blocks " << g.row_blocks << ")";
  };
  if (g.rows != M || g.cols != N || g.vec != k.vec) return fail("rows/cols/vec not recorded");
  if (g.vpt < 1 || g.vpt > k.knobs.values_per_thread / k.vec) return fail("vpt out of range");
  if (g.vpt > k.max_vecs) return fail("vpt above the kernel's kMaxVecs");
  if (!is_pow2(g.tpr)) return fail("tpr not a power of two");
  if (!(g.cluster_n == 1 || g.cluster_n == 2 || g.cluster_n == 4 || g.cluster_n == 8 ||
        g.cluster_n == 16))
    return fail("cluster_n not in {1,2,4,8,16}");
  if (g.cta_threads % 32 != 0) return fail("cta_threads not a multiple of 32");
  if (g.cta_threads > k.knobs.max_cta_threads) return fail("cta_threads above max_cta_threads");
  if (g.cta_threads < g.tpr || g.cta_threads % g.tpr != 0)
    return fail("cta_threads not a multiple of tpr");
  const int64_t cover = static_cast<int64_t>(g.tpr) * g.vpt * g.vec * g.cluster_n;
  if (cover < N) return fail("tpr·vpt·vec·cluster_n < N");
  // vpt is the least that covers the row.
  if (static_cast<int64_t>(g.tpr) * (g.vpt - 1) * g.vec * g.cluster_n >= N)
    return fail("vpt larger than needed");
  // Not asserted: that every CTA of a cluster owns columns. CTA rank r starts at column
  // r·vpt·tpr·vec, and for e.g. N = 16392 (vec 8, forward) vpt = 3, tpr = 256, cluster_n = 4
  // leaves rank 3 idle (a wasted CTA slot, not a wrong result). See the test report.
  const int64_t rpc = g.rows_per_cta();
  if (rpc < 1) return fail("rows_per_cta < 1");
  if (rpc * g.row_blocks < M) return fail("rows_per_cta·row_blocks < M");
  if (M > 0 && (g.row_blocks - 1) * rpc >= M) return fail("an empty row block");
  if (M == 0 && g.row_blocks != 0) return fail("row_blocks ≠ 0 for M = 0");
  // Shared memory of the backward (reduction slots + staging tile) stays under the 48 KiB a
  // kernel gets without opting in (the launcher opts in above that, up to 227 KiB).
  const int64_t smem = (2 * static_cast<int64_t>(g.reduce_slots()) +
                        (rpc > 1 ? rpc * g.vpt * g.tpr * g.vec : 0)) * 4;
  if (smem > 227 * 1024) return fail("backward shared memory above 227 KiB");
  return ::testing::AssertionSuccess();
}

TEST(RowGeometry, SweepVectorPath) {
  const auto ns = sample_n();
  int64_t accepted = 0;
  for (const auto& k : knob_cases()) {
    const int64_t max_n = max_row_length(k.knobs);
    for (int64_t N : ns) {
      for (int64_t M : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{257}}) {
        RowGeometry g;
        const bool ok = make_row_geometry(M, N, k.vec, k.knobs, &g);
        // Accepted exactly up to the documented maximum.
        ASSERT_EQ(ok, N <= max_n) << where(k, M, N) << " max_row_length " << max_n;
        if (!ok) continue;
        ++accepted;
        ASSERT_TRUE(row_geometry_ok(g, k, M, N));
      }
    }
  }
  EXPECT_GT(accepted, 10000);
}

TEST(RowGeometry, SweepRows) {
  for (const auto& k : knob_cases())
    for (int64_t N : {int64_t{1}, int64_t{8}, int64_t{127}, int64_t{500}, int64_t{4096},
                      int64_t{65536}, int64_t{131072}})
      for (int64_t M : kRows) {
        RowGeometry g;
        if (!make_row_geometry(M, N, k.vec, k.knobs, &g)) continue;
        ASSERT_TRUE(row_geometry_ok(g, k, M, N));
      }
}

TEST(RowGeometry, DocumentedLimits) {
  // norm_config.h: longest vector-path rows: forward 524288 (16-bit, vec 8), 262144 (fp32,
  // vec 4); backward 262144 (16-bit), 131072 (fp32).
  for (const auto& k : knob_cases()) {
    if (k.vec == 1) continue;
    const bool fwd = std::string(k.name) == "fwd";
    const int64_t expect = k.vec == 8 ? (fwd ? 524288 : 262144) : (fwd ? 262144 : 131072);
    EXPECT_EQ(max_row_length(k.knobs), expect) << k.name << " vec " << k.vec;
    RowGeometry g;
    EXPECT_TRUE(make_row_geometry(3, expect, k.vec, k.knobs, &g)) << k.name << " vec " << k.vec;
    EXPECT_FALSE(make_row_geometry(3, expect + k.vec, k.vec, k.knobs, &g)) << k.name;
  }
}

TEST(RowGeometry, RejectsBadInput) {
  RowGeometry g;
  const RowConfigKnobs k;
  EXPECT_FALSE(make_row_geometry(1, 0, 8, k, &g));
  EXPECT_FALSE(make_row_geometry(1, -5, 8, k, &g));
  EXPECT_FALSE(make_row_geometry(1, 8, 0, k, &g));
}

TEST(RowGeometry, SmallRowsPackIntoOneCta) {
  // A short row (N = 8, vec 8: one vector) gets tpr 1 and 128 rows per CTA.
  RowGeometry g;
  ASSERT_TRUE(make_row_geometry(1000, 8, 8, RowConfigKnobs{}, &g));
  EXPECT_EQ(g.tpr, 1);
  EXPECT_EQ(g.cluster_n, 1);
  EXPECT_EQ(g.rows_per_cta(), 128);
  EXPECT_EQ(g.row_blocks, 8);  // ceil(1000 / 128)
}

TEST(RowGeometry, LongRowsUseClusters) {
  RowGeometry g;
  RowConfigKnobs k;  // forward, bf16
  k.values_per_thread = kNormFwdVectorsPerThread * 8;
  ASSERT_TRUE(make_row_geometry(4, 262144, 8, k, &g));
  EXPECT_GT(g.cluster_n, 1);
  EXPECT_EQ(static_cast<int64_t>(g.tpr) * g.vpt * g.vec * g.cluster_n, 262144);
}

// ---------------------------------------------------------------- general path

::testing::AssertionResult general_geometry_ok(const RowGeometry& g, int64_t M, int64_t N) {
  auto fail = [&](const std::string& what) {
    return ::testing::AssertionFailure()
           << "general M=" << M << " N=" << N << ": " << what << " (tpr " << g.tpr
           << ", cluster_n " << g.cluster_n << ", cta_threads " << g.cta_threads
           << ", row_blocks " << g.row_blocks << ")";
  };
  if (g.rows != M || g.cols != N || g.vec != 1) return fail("rows/cols/vec not recorded");
  if (!is_pow2(g.tpr) || g.tpr > 256) return fail("tpr not a power of two ≤ 256");
  if (!(g.cluster_n == 1 || g.cluster_n == 2 || g.cluster_n == 4 || g.cluster_n == 8 ||
        g.cluster_n == 16))
    return fail("cluster_n not in {1,2,4,8,16}");
  if (g.cta_threads % 32 != 0) return fail("cta_threads not a multiple of 32");
  // Both general kernels: forward __launch_bounds__(512), backward (256).
  if (g.cta_threads > kNormBwdMaxCtaThreads) return fail("cta_threads above 256");
  if (g.cta_threads < g.tpr || g.cta_threads % g.tpr != 0)
    return fail("cta_threads not a multiple of tpr");
  // Each CTA of a row covers span = ceil(N / cluster_n) columns; none is empty.
  const int64_t span = (N + g.cluster_n - 1) / g.cluster_n;
  if ((g.cluster_n - 1) * span >= N) return fail("a CTA of the cluster has no columns");
  // Up to 16 CTAs × 256 threads × 16 values: one pass per thread; beyond, the threads loop.
  const int64_t per_thread = (N + int64_t{g.tpr} * g.cluster_n - 1) / (int64_t{g.tpr} * g.cluster_n);
  if (N <= int64_t{16} * 256 * kNormGeneralValuesPerThread &&
      per_thread > kNormGeneralValuesPerThread)
    return fail("more than kNormGeneralValuesPerThread values per thread");
  if (N > int64_t{16} * 256 * kNormGeneralValuesPerThread && (g.tpr != 256 || g.cluster_n != 16))
    return fail("a long row does not use the largest cluster");
  const int64_t rpc = g.rows_per_cta();
  if (rpc * g.row_blocks < M) return fail("rows_per_cta·row_blocks < M");
  if (M > 0 && (g.row_blocks - 1) * rpc >= M) return fail("an empty row block");
  return ::testing::AssertionSuccess();
}

// row_allreduce's layout: 2 stages of slots, then (clusters) the exchange's two mbarriers with
// 128 bytes to themselves before the next area (sharing that line with the copy pipeline cost
// the cluster backward 10-20 % on the H200, session 7); no mbarriers without a cluster.
TEST(RowGeometry, ExchangeBarriersOwnTheirLine) {
  for (int warps : {1, 4, 8, 16, 32})
    for (int cluster : {1, 2, 4, 8, 16}) {
      quack::detail::RowGeometry g;
      g.cta_threads = 32 * warps;
      g.tpr = g.cta_threads;
      g.cluster_n = cluster;
      const int64_t slots = 2 * int64_t(g.reduce_slots()) * 4;  // bytes
      const int64_t bytes = g.reduce_slot_bytes();
      SCOPED_TRACE(std::to_string(warps) + " warps, cluster " + std::to_string(cluster));
      EXPECT_EQ(bytes % 16, 0);
      if (cluster == 1) {
        EXPECT_LT(bytes - slots, 16);  // padding only
      } else {
        EXPECT_EQ(slots % 8, 0);        // the mbarriers (at `slots`) are 8-byte aligned
        EXPECT_GE(bytes - slots, 128);  // and alone up to the next area
      }
    }
}

TEST(GeneralGeometry, SweepColumns) {
  auto ns = sample_n();
  for (int64_t p = 524288; p <= (int64_t{1} << 24); p *= 2)
    for (int64_t d : {-1, 0, 1}) ns.push_back(p + d);
  for (int64_t n : {int64_t{1000003}, int64_t{5000011}, int64_t{16777215}}) ns.push_back(n);
  for (int64_t N : ns)
    for (int64_t M : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{257}})
      ASSERT_TRUE(general_geometry_ok(make_general_geometry(M, N), M, N));
}

TEST(GeneralGeometry, SweepRows) {
  for (int64_t N : {int64_t{1}, int64_t{127}, int64_t{65537}, int64_t{1} << 24})
    for (int64_t M : kRows) ASSERT_TRUE(general_geometry_ok(make_general_geometry(M, N), M, N));
}

}  // namespace
}  // namespace quack::detail

namespace {

TEST(SimpleFwdConfig, InstancesAreLaunchable) {
  for (int i = 0; i < quack::detail::kSimpleFwdConfigCount; ++i) {
    const auto& c = quack::detail::kSimpleFwdConfigs[i];
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.tpr & (c.tpr - 1), 0) << "tpr a power of two";
    EXPECT_GE(c.rows, 1);
    EXPECT_EQ(c.threads() % 32, 0) << "whole warps";
    EXPECT_LE(c.threads(), 1024);
    EXPECT_TRUE(c.rows == 1 || c.tpr <= 32) << "several rows per CTA only with warp-wide rows";
  }
}

TEST(SimpleFwdConfig, TableFitsEveryRow) {
  // Rows of 16 bytes to 4 MB (16-byte steps up to 128 KB, then powers of two and odd sizes).
  std::vector<int64_t> sizes;
  for (int64_t b = 16; b <= 128 * 1024; b += 16) sizes.push_back(b);
  for (int64_t b = 256 * 1024; b <= 4 * 1024 * 1024; b *= 2) sizes.push_back(b), sizes.push_back(b + 16);
  for (int64_t b : sizes)
    for (int elt : {2, 4})
      for (bool residual : {false, true}) {
        const int cfg = quack::detail::simple_fwd_config(b, elt, residual);
        const auto& c = quack::detail::kSimpleFwdConfigs[cfg];
        ASSERT_TRUE(quack::detail::simple_fwd_config_fits(cfg, 16384, b, residual)) << b << " bytes";
        // Single pass in one CTA whenever ≤ 1024 threads x 4 vectors hold the row (fp32 without
        // a residual: x 8 vectors, 128 KB); longer rows without a residual: the prefetch kernel
        // up to its 8 x 64 KB (fp32: from 128 KB up); else looped.
        const bool v8 = !residual && elt == 4 && b > 64 * 1024 && b <= 128 * 1024;
        const bool prefetch = !residual && b > (elt == 4 ? 128 : 64) * 1024 && b <= 512 * 1024;
        EXPECT_EQ(!c.looped && !c.prefetch, b <= 64 * 1024 || v8) << b << " bytes";
        EXPECT_EQ(c.prefetch, prefetch) << b << " bytes, elt " << elt << ", residual " << residual;
        EXPECT_EQ(c.looped, b > 64 * 1024 && !prefetch && !v8) << b << " bytes";
        EXPECT_FALSE(c.no_residual && residual) << b << " bytes";
      }
  // The benchmark shapes (bf16; H200 A/B at c493320, session 7 at c36a54a): 4096 -> t256v2,
  // 8192 -> t256v4, 16384 -> t512v4, 32768 -> t1024v4, longer -> t1024v4-prefetch; fp32
  // 32768 -> t1024v8 (session 8).
  auto name = [](int64_t n, int elt) {
    return quack::detail::kSimpleFwdConfigs[quack::detail::simple_fwd_config(n * elt, elt, false)].name;
  };
  EXPECT_STREQ(name(4096, 2), "t256v2");
  EXPECT_STREQ(name(8192, 2), "t256v4");
  EXPECT_STREQ(name(16384, 2), "t512v4");
  EXPECT_STREQ(name(32768, 2), "t1024v4");
  EXPECT_STREQ(name(65536, 2), "t1024v4-prefetch");
  EXPECT_STREQ(name(131072, 2), "t1024v4-prefetch");
  EXPECT_STREQ(name(262144, 2), "t1024v4-prefetch");
  EXPECT_STREQ(name(32768, 4), "t1024v8");
  const int with_residual = quack::detail::simple_fwd_config(32768 * 4, 4, true);
  EXPECT_STREQ(quack::detail::kSimpleFwdConfigs[with_residual].name, "t1024v2-looped");
  EXPECT_STREQ(name(65536, 4), "t1024v4-prefetch");
  EXPECT_STREQ(name(131072, 4), "t1024v4-prefetch");
}

TEST(SimpleFwdConfig, GridLimit) {
  // One CTA per row: 2^31 - 1 rows is the most a 1-D grid takes.
  EXPECT_TRUE(quack::detail::simple_fwd_config_fits(2, (int64_t{1} << 31) - 1, 8192));
  EXPECT_FALSE(quack::detail::simple_fwd_config_fits(2, int64_t{1} << 31, 8192));
  EXPECT_TRUE(quack::detail::simple_fwd_config_fits(0, int64_t{1} << 31, 256));  // 4 rows per CTA
  EXPECT_FALSE(quack::detail::simple_fwd_config_fits(-1, 1, 256));
  EXPECT_FALSE(quack::detail::simple_fwd_config_fits(quack::detail::kSimpleFwdConfigCount, 1, 256));
  EXPECT_FALSE(quack::detail::simple_fwd_config_fits(2, 1, 8192 + 16));  // single pass: too long
  // Prefetch instances: any M (persistent grid), up to 8 slices per row, no residual.
  EXPECT_TRUE(quack::detail::simple_fwd_config_fits(10, int64_t{1} << 40, 512 * 1024));
  EXPECT_FALSE(quack::detail::simple_fwd_config_fits(10, 1, 512 * 1024 + 16));
  EXPECT_FALSE(quack::detail::simple_fwd_config_fits(10, 1, 65536, /*residual=*/true));
}

}  // namespace
