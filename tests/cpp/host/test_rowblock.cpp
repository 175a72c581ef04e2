// Row-block RMSNorm backward ("bwd v2") planning without a GPU: the instance table and its
// register budget, the (R, C) grid rule and its partial-traffic bound, which arguments take
// the path and which fall back to the staged kernel, choice validation, the workspace size.
// Pointers are fake, 16-byte aligned, never dereferenced (row-block planning makes no CUDA
// call).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "norm/norm_config.h"
#include "norm/rmsnorm_tuning.h"
#include "quack/quack.h"

namespace {

using quack::DType;
using quack::TensorRef;
using quack::detail::kRowBlockBwdConfigCount;
using quack::detail::kRowBlockBwdConfigs;
using quack::detail::rowblock_bwd_config;
using quack::detail::rowblock_bwd_config_fits;
using quack::detail::rowblock_bwd_grid;

void* fake(int i) { return reinterpret_cast<void*>(uintptr_t{0x100000} * (i + 1)); }

const char* name_of(int cfg) { return cfg >= 0 ? kRowBlockBwdConfigs[cfg].name : "staged"; }

TEST(RowBlockBwdConfig, InstancesFitTheirRegisterBudget) {
  for (int i = 0; i < kRowBlockBwdConfigCount; ++i) {
    const auto& c = kRowBlockBwdConfigs[i];
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.tpr & (c.tpr - 1), 0) << "tpr a power of two";
    EXPECT_GE(c.tpr, 32);
    EXPECT_LE(c.tpr, 1024);
    EXPECT_GE(c.vecs, 1);
    for (int elt : {2, 4})
      for (int acc = 0; acc <= 2; ++acc) {
        if (!quack::detail::rowblock_bwd_compiles(c, elt, acc)) continue;
        const int ctas = quack::detail::rowblock_bwd_min_ctas(c, elt, acc);
        const int regs = (quack::detail::rowblock_bwd_regs(c, elt, acc) + 7) / 8 * 8;
        EXPECT_GE(ctas, 1);
        EXPECT_LE(ctas * c.tpr, 2048) << elt << " " << acc;
        EXPECT_LE(int64_t{ctas} * c.tpr * regs, 65536) << elt << " " << acc;
      }
  }
  // The benchmark instances: 4 CTAs of 256 threads per SM at bf16 4096 with dweight.
  EXPECT_EQ(quack::detail::rowblock_bwd_min_ctas(kRowBlockBwdConfigs[1], 2, 1), 4);  // t256v2
  // 16 bf16 columns with dweight and dbias at 1024 threads are over 64 registers.
  EXPECT_FALSE(quack::detail::rowblock_bwd_compiles(kRowBlockBwdConfigs[8], 2, 2));  // t1024v2
  EXPECT_TRUE(quack::detail::rowblock_bwd_compiles(kRowBlockBwdConfigs[8], 2, 1));
  EXPECT_TRUE(quack::detail::rowblock_bwd_compiles(kRowBlockBwdConfigs[8], 4, 2));
  EXPECT_FALSE(rowblock_bwd_config_fits(-1, 16, 2, 1));
  EXPECT_FALSE(rowblock_bwd_config_fits(kRowBlockBwdConfigCount, 16, 2, 1));
  EXPECT_FALSE(rowblock_bwd_config_fits(1, 16, 8, 1));  // no 8-byte x
}

TEST(RowBlockBwdConfig, TableFitsEveryRow) {
  for (int elt : {2, 4})
    for (int acc = 0; acc <= 2; ++acc)
      for (int64_t b = 16; b <= 96 * 1024; b += 16) {
        const int cfg = rowblock_bwd_config(b, elt, acc);
        if (cfg >= 0) {
          ASSERT_TRUE(rowblock_bwd_config_fits(cfg, b, elt, acc)) << b << " " << elt << " " << acc;
        }
        // ≤ 16 KB rows always have an instance, ≤ 32 KB unless 16-bit with two column sums,
        // longer rows none.
        const bool want = b <= 16 * 1024 || (b <= 32 * 1024 && (elt == 4 || acc < 2));
        EXPECT_EQ(cfg >= 0, want) << b << " bytes, elt " << elt << ", acc " << acc;
      }
  // The benchmark shapes with dweight (prepared, not measured: docs/performance.md bwd v2).
  EXPECT_STREQ(name_of(rowblock_bwd_config(4096 * 2, 2, 1)), "t256v2");
  EXPECT_STREQ(name_of(rowblock_bwd_config(8192 * 2, 2, 1)), "t512v2");
  EXPECT_STREQ(name_of(rowblock_bwd_config(16384 * 2, 2, 1)), "t1024v2");
  EXPECT_STREQ(name_of(rowblock_bwd_config(32768 * 2, 2, 1)), "staged");
  EXPECT_STREQ(name_of(rowblock_bwd_config(4096 * 4, 4, 1)), "t512v2");
  EXPECT_STREQ(name_of(rowblock_bwd_config(8192 * 4, 4, 1)), "t1024v2");
  EXPECT_STREQ(name_of(rowblock_bwd_config(16384 * 4, 4, 1)), "staged");
  // dweight + dbias at 32 KB of bf16: t1024v2 and t512v4 are over their register budgets.
  EXPECT_STREQ(name_of(rowblock_bwd_config(16384 * 2, 2, 2)), "staged");
  EXPECT_STREQ(name_of(rowblock_bwd_config(8192 * 4, 4, 2)), "t1024v2");
}

TEST(RowBlockBwdGrid, RuleAtTheBenchmarkShapes) {
  auto g = rowblock_bwd_grid(16384, 2, 1);  // bf16, dweight
  EXPECT_EQ(g.rows_per_cta, 8);
  EXPECT_EQ(g.cluster, 4);
  EXPECT_EQ(g.ctas, 2048);
  EXPECT_EQ(g.partials, 512);
  g = rowblock_bwd_grid(16384, 2, 2);  // bf16, dweight + dbias
  EXPECT_EQ(g.cluster, 8);
  EXPECT_EQ(g.partials, 256);
  g = rowblock_bwd_grid(16384, 4, 1);  // fp32, dweight
  EXPECT_EQ(g.rows_per_cta, 8);
  EXPECT_EQ(g.cluster, 2);
  EXPECT_EQ(g.partials, 1024);
  g = rowblock_bwd_grid(16384, 2, 0);  // no column sums: no clusters
  EXPECT_EQ(g.cluster, 1);
  EXPECT_EQ(g.ctas, 2048);
  g = rowblock_bwd_grid(1, 2, 1);
  EXPECT_EQ(g.rows_per_cta, 1);
  EXPECT_EQ(g.cluster, 1);
  EXPECT_EQ(g.ctas, 1);
  EXPECT_EQ(g.partials, 1);
  g = rowblock_bwd_grid(37, 2, 1, /*rows_per_cta=*/3, /*cluster=*/2);  // overrides
  EXPECT_EQ(g.rows_per_cta, 3);
  EXPECT_EQ(g.cluster, 2);
  EXPECT_EQ(g.ctas, 14);
  EXPECT_EQ(g.partials, 7);
}

TEST(RowBlockBwdGrid, Invariants) {
  for (int64_t M : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{37}, int64_t{1000}, int64_t{4099},
                    int64_t{16384}, int64_t{65537}, int64_t{1} << 20})
    for (int elt : {2, 4})
      for (int acc = 0; acc <= 2; ++acc)
        for (int r : {0, 1, 3, 8, 64})
          for (int c : {0, 1, 2, 4, 8}) {
            const auto g = rowblock_bwd_grid(M, elt, acc, r, c);
            SCOPED_TRACE("M " + std::to_string(M) + " elt " + std::to_string(elt) + " acc " +
                         std::to_string(acc) + " R " + std::to_string(r) + " C " + std::to_string(c));
            ASSERT_GE(g.rows_per_cta, 1);
            ASSERT_TRUE(g.cluster == 1 || g.cluster == 2 || g.cluster == 4 || g.cluster == 8);
            EXPECT_EQ(g.ctas % g.cluster, 0);
            EXPECT_EQ(g.partials * g.cluster, g.ctas);
            EXPECT_GE(g.ctas * g.rows_per_cta, M);                 // every row has a CTA
            EXPECT_LT((g.ctas - g.cluster) * g.rows_per_cta, M);  // no cluster without rows
            if (r == 0 && c == 0 && acc > 0 && M >= 32768) {
              // The rule's bound: partial rows written and re-read ≤ 5 % of the row traffic.
              EXPECT_LE(8.0 * acc * g.partials, 0.05 * 3.0 * M * elt + 1e-9);
            }
            if (r == 0 && M >= 8192) EXPECT_GE(g.ctas / g.cluster * g.cluster, 1024);
          }
}

quack::RmsNormBwdArgs bwd_args(DType x, int64_t M, int64_t N, DType w, bool dbias = false) {
  quack::RmsNormBwdArgs a;
  a.x = TensorRef::matrix(fake(0), x, M, N);
  a.weight = TensorRef::vector(fake(1), w, N);
  a.dout = TensorRef::matrix(fake(2), x, M, N);
  a.rstd = TensorRef::vector(fake(3), DType::kFloat32, M);
  a.dx = TensorRef::matrix(fake(4), x, M, N);
  a.dweight = TensorRef::vector(fake(5), DType::kFloat32, N);
  if (dbias) a.dbias = TensorRef::vector(fake(6), DType::kFloat32, N);
  return a;
}

int plan_config(const quack::RmsNormBwdArgs& a, int forced = -1) {
  quack::detail::RowBlockBwdChoice ch;
  ch.config = forced;
  return quack::detail::rmsnorm_bwd_rowblock_plan(a, ch).config;
}

TEST(RowBlockBwdPath, TakesTrainingLayouts) {
  const int64_t M = 8192;
  const DType kX[] = {DType::kBFloat16, DType::kFloat16, DType::kFloat32};
  for (DType xt : kX)
    for (int64_t N : {int64_t{1024}, int64_t{4096}, int64_t{8192}, int64_t{16384}})
      for (int wv = 0; wv < 3; ++wv)  // fp32 weight, x's dtype, none
        for (bool prenorm : {false, true})
          for (bool dbias : {false, true}) {
            auto a = bwd_args(xt, M, N, wv == 1 ? xt : DType::kFloat32, dbias);
            if (wv == 2) {
              a.weight = TensorRef();
              a.dweight = TensorRef();
            }
            if (prenorm) {
              a.dresidual_out = TensorRef::matrix(fake(7), xt, M, N);
              a.dresidual = TensorRef::matrix(fake(8), xt, M, N);
            }
            const int elt = quack::dtype_size(xt);
            const int acc = (wv != 2 ? 1 : 0) + (dbias ? 1 : 0);
            const int want = rowblock_bwd_config(N * elt, elt, acc);
            SCOPED_TRACE(std::string(quack::dtype_name(xt)) + " N " + std::to_string(N) +
                         " weight " + std::to_string(wv) + " prenorm " + std::to_string(prenorm) +
                         " dbias " + std::to_string(dbias));
            EXPECT_EQ(plan_config(a), want);
            EXPECT_EQ(want >= 0, N * elt <= 16 * 1024 ||
                                     (N * elt <= 32 * 1024 && (elt == 4 || acc < 2)));
          }
}

TEST(RowBlockBwdPath, FallsBackToStaged) {
  const int64_t M = 64, N = 4096;
  const DType bf = DType::kBFloat16, f32 = DType::kFloat32, f16 = DType::kFloat16;
  const auto a = bwd_args(bf, M, N, f32, /*dbias=*/true);
  ASSERT_GE(plan_config(a), 0);
  auto expect_staged = [](const quack::RmsNormBwdArgs& b, const char* why) {
    EXPECT_EQ(plan_config(b), -1) << why;
  };
  {
    auto b = a;
    b.dout = TensorRef::matrix(fake(2), f32, M, N);
    expect_staged(b, "dout fp32 with bf16 x");
  }
  {
    auto b = a;
    b.dout = TensorRef::matrix(fake(2), bf, M, N, 0, /*row_stride=*/0, /*col_stride=*/0);
    expect_staged(b, "expanded dout (strides 0, 0)");
  }
  {
    // Expanded along rows only (row stride 0, contiguous columns): every row reads row 0's
    // vectors, which the row-block kernel does correctly, so it stays.
    auto b = a;
    b.dout = TensorRef::matrix(fake(2), bf, M, N, 0, /*row_stride=*/0);
    EXPECT_GE(plan_config(b), 0) << "dout expanded along rows";
  }
  {
    auto b = a;
    b.dout = TensorRef::matrix(fake(2), bf, M, N, 0, /*row_stride=*/1, /*col_stride=*/M);
    expect_staged(b, "transposed dout");
  }
  {
    auto b = a;
    b.dx = TensorRef::matrix(fake(4), f32, M, N);
    expect_staged(b, "dx fp32 with bf16 x");
  }
  {
    auto b = a;
    b.dresidual_out = TensorRef::matrix(fake(7), f32, M, N);
    expect_staged(b, "dresidual_out fp32 with bf16 x");
  }
  {
    auto b = a;
    b.dresidual = TensorRef::matrix(fake(8), f32, M, N);
    expect_staged(b, "dresidual fp32 with bf16 x");
  }
  expect_staged(bwd_args(bf, M, N, f16), "fp16 weight with bf16 x");
  expect_staged(bwd_args(f32, M, N, bf), "bf16 weight with fp32 x");
  expect_staged(bwd_args(bf, M, N + 4, f32), "N not a multiple of 8");
  {
    auto b = a;
    b.x = TensorRef::matrix(fake(0), bf, M, N, 0, /*row_stride=*/N + 4);
    expect_staged(b, "rows 8-byte aligned");
  }
  {
    auto b = a;
    b.dout = TensorRef::matrix(static_cast<char*>(fake(2)) + 2, bf, M, N);
    expect_staged(b, "misaligned dout");
  }
  {
    auto b = a;
    b.weight = TensorRef::vector(fake(1), f32, N, 0, /*stride=*/2);
    expect_staged(b, "strided weight");
  }
  expect_staged(bwd_args(bf, M, 32768, f32), "16-bit rows over 32 KB with dweight");
  expect_staged(bwd_args(f32, M, 16384, f32), "fp32 rows over 32 KB with dweight");
  // Aligned row strides (slices of wider buffers) stay.
  auto b = a;
  b.x = TensorRef::matrix(fake(0), bf, M, N, 0, /*row_stride=*/N + 8);
  EXPECT_GE(plan_config(b), 0);
}

TEST(RowBlockBwdPath, ForcedConfigs) {
  for (DType xt : {DType::kBFloat16, DType::kFloat32})
    for (int cfg = 0; cfg < kRowBlockBwdConfigCount; ++cfg) {
      const auto& k = kRowBlockBwdConfigs[cfg];
      const int elt = quack::dtype_size(xt);
      const int64_t vec = 16 / elt;
      const int64_t cap = k.capacity_bytes() / elt;
      auto a = bwd_args(xt, 100, cap, DType::kFloat32);
      const bool compiles = quack::detail::rowblock_bwd_compiles(k, elt, 1);
      EXPECT_EQ(plan_config(a, cfg), compiles ? cfg : -1) << k.name;
      a = bwd_args(xt, 100, cap + vec, DType::kFloat32);
      EXPECT_EQ(plan_config(a, cfg), -1) << k.name << ": row over capacity";
    }
}

TEST(RowBlockBwdPath, ChoiceValidation) {
  const auto a = bwd_args(DType::kBFloat16, 64, 4096, DType::kFloat32);
  using Choice = quack::detail::RowBlockBwdChoice;
  EXPECT_THROW(quack::detail::rmsnorm_bwd_rowblock_plan(a, Choice{-1, 0, 3}), quack::InvalidArgument);
  EXPECT_THROW(quack::detail::rmsnorm_bwd_rowblock_plan(a, Choice{-1, 0, 16}), quack::InvalidArgument);
  EXPECT_THROW(quack::detail::rmsnorm_bwd_rowblock_plan(a, Choice{-1, -2, 0}), quack::InvalidArgument);
  EXPECT_THROW(quack::detail::rmsnorm_bwd_rowblock_plan(a, Choice{kRowBlockBwdConfigCount, 0, 0}),
               quack::InvalidArgument);
  try {
    quack::detail::rmsnorm_bwd_workspace_size_with_path(
        a, quack::detail::RmsNormBwdPath::kRowBlock, Choice{-1, 0, 3});
    ADD_FAILURE() << "cluster 3 was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("rmsnorm_bwd_workspace_size: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("cluster is 3"), std::string::npos) << msg;
  }
}

TEST(RowBlockBwdPath, WorkspaceIsPartialRowsWithoutADevice) {
  using quack::detail::RmsNormBwdPath;
  const int64_t M = 16384, N = 4096;
  auto a = bwd_args(DType::kBFloat16, M, N, DType::kFloat32);
  // P = 512 (R 8, C 4): 512 x 4096 x 4 bytes; with dbias P = 256 and two partial matrices.
  EXPECT_EQ(quack::detail::rmsnorm_bwd_workspace_size_with_path(a, RmsNormBwdPath::kRowBlock),
            size_t{512} * N * 4);
  a = bwd_args(DType::kBFloat16, M, N, DType::kFloat32, /*dbias=*/true);
  EXPECT_EQ(quack::detail::rmsnorm_bwd_workspace_size_with_path(a, RmsNormBwdPath::kRowBlock),
            size_t{2} * 256 * N * 4);
  quack::detail::RowBlockBwdChoice ch;
  ch.rows_per_cta = 16;
  ch.cluster = 1;
  EXPECT_EQ(quack::detail::rmsnorm_bwd_workspace_size_with_path(a, RmsNormBwdPath::kRowBlock, ch),
            size_t{2} * 1024 * N * 4);
  a.dweight = TensorRef();
  a.dbias = TensorRef();
  EXPECT_EQ(quack::detail::rmsnorm_bwd_workspace_size_with_path(a, RmsNormBwdPath::kRowBlock), 0u);
}

TEST(RowBlockBwdPath, PathSetting) {
  using quack::detail::RmsNormBwdPath;
  const RmsNormBwdPath before = quack::detail::rmsnorm_bwd_path();
  quack::detail::set_rmsnorm_bwd_path(RmsNormBwdPath::kRowBlock);
  EXPECT_EQ(quack::detail::rmsnorm_bwd_path(), RmsNormBwdPath::kRowBlock);
  // The public workspace query follows the path (row-block: no device query needed).
  const auto a = bwd_args(DType::kBFloat16, 16384, 4096, DType::kFloat32);
  EXPECT_EQ(quack::rmsnorm_bwd_workspace_size(a), size_t{512} * 4096 * 4);
  quack::detail::set_rmsnorm_bwd_path(RmsNormBwdPath::kStaged);
  EXPECT_EQ(quack::detail::rmsnorm_bwd_path(), RmsNormBwdPath::kStaged);
  quack::detail::set_rmsnorm_bwd_path(before);
}

}  // namespace
