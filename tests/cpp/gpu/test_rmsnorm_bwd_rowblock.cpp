// Tier 2: the row-block RMSNorm backward ("bwd v2", rmsnorm_bwd_rowblock_kernel.cuh) on the
// device against the float64 reference. Skips without a GPU. Every instance is forced over
// its dtypes, weights, dbias and dresidual variants, row tails (N = one vector, N ending
// inside the last vector group, N = capacity), M not a multiple of R (and of R·C), M = 1, and
// several (R, C) grids (clusters add their column sums through DSMEM); every case runs twice
// and dx / dweight / dbias must have identical bits. The public path (QUACK_RMSNORM_BWD /
// set_rmsnorm_bwd_path) is exercised too: cases it takes must take it, the others (strided or
// stride-0 dout, other dtypes, long rows) must fall back to the staged kernel correctly.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "gpu/rmsnorm_runner.h"
#include "norm/norm_config.h"
#include "quack/errors.h"
#include "quack/norm.h"
#include "reference/random.h"

namespace quack::test {
namespace {

using Shape = std::pair<int64_t, int64_t>;  // (M, N)
const DType kXTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

// (R, C) grids the forced cases cycle through: the rule's, one row per CTA, R not a power of
// two, clusters of 2, 4 and 8 (M = 1 then leaves empty CTAs in the cluster).
const detail::RowBlockBwdChoice kGrids[] = {{-1, 0, 0}, {-1, 1, 1}, {-1, 3, 2}, {-1, 5, 4}, {-1, 8, 8}};

class RmsNormBwdRowBlockConfigs : public GpuTest, public ::testing::WithParamInterface<int> {};

TEST_P(RmsNormBwdRowBlockConfigs, MatchesReferenceAndIsDeterministic) {
  const int cfg = GetParam();
  const detail::RowBlockBwdConfig& k = detail::kRowBlockBwdConfigs[cfg];
  uint64_t seed = 20000 + 1000 * cfg;
  int grid_i = cfg;
  for (DType xt : kXTypes) {
    const int elt = dtype_size(xt);
    const int64_t vec = 16 / elt;
    const int64_t cap = k.capacity_bytes() / elt;  // elements per row
    // N: one vector; ending inside the last group of vectors (not a multiple of tpr·vec);
    // the capacity.
    const int64_t ns[3] = {vec, cap / 2 + vec, cap};
    for (int variant = 0; variant < 4; ++variant)
      for (int ni = 0; ni < 3; ++ni) {
        BwdCase c;
        c.N = ns[ni];
        c.x = xt;
        c.weight = variant == 1 ? std::optional<DType>(xt) : DType::kFloat32;
        c.dweight = DType::kFloat32;
        c.dbias = DType::kFloat32;
        if (variant == 1) c.dweight = xt;  // dweight in x's dtype (colsum converts)
        if (variant == 2) {                // no weight: dbias only
          c.weight.reset();
          c.dweight.reset();
        }
        if (variant == 3) {  // prenorm: dresidual_out in, dresidual out; no dbias
          c.dresidual_out = xt;
          c.dresidual = xt;
          c.dbias.reset();
        }
        // M: 1, 37 (not a multiple of R or R·C), or many rows (≤ ~1M elements).
        const int64_t many = std::max<int64_t>(64, std::min<int64_t>(4099, (int64_t{1} << 20) / c.N));
        const int64_t ms[3] = {1, 37, many};
        c.M = ms[(variant + ni) % 3];
        const int acc = (c.weight ? 1 : 0) + (c.dbias ? 1 : 0);
        if (!detail::rowblock_bwd_config_fits(cfg, c.N * elt, elt, acc))
          continue;  // not compiled for these accumulators: the host never picks it
        detail::RowBlockBwdChoice ch = kGrids[grid_i++ % 5];
        ch.config = cfg;
        c.rowblock = ch;
        c.seed = ++seed;
        run_bwd(c, /*runs=*/2);
      }
  }
}

INSTANTIATE_TEST_SUITE_P(All, RmsNormBwdRowBlockConfigs,
                         ::testing::Range(0, detail::kRowBlockBwdConfigCount),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(detail::kRowBlockBwdConfigs[info.param].name);
                         });

class RmsNormBwdRowBlock : public GpuTest {};

// The public entry points on the row-block path: the table's instance and the grid rule for
// the shapes the path takes (incl. the benchmark widths), fallbacks for the rest.
TEST_F(RmsNormBwdRowBlock, PublicPathTakesItOrFallsBack) {
  ScopedBwdPath guard(RmsNormBwdPath::kRowBlock);
  uint64_t seed = 30000;
  const Shape shapes[] = {{1, 8},      {33, 64},    {100, 4096}, {4099, 4096}, {257, 8192},
                          {64, 16384}, {9, 65536},  {7, 127},    {1000, 2048}};
  for (const auto& [M, N] : shapes)
    for (DType xt : kXTypes)
      for (int wv = 0; wv < 3; ++wv) {  // fp32 weight, x's dtype, none
        BwdCase c;
        c.M = M;
        c.N = N;
        c.x = xt;
        c.weight = wv == 1 ? std::optional<DType>(xt) : DType::kFloat32;
        if (wv == 2) {
          c.weight.reset();
          c.dweight.reset();
        }
        const int elt = dtype_size(xt);
        const int acc = (c.weight ? 1 : 0) + (c.dbias ? 1 : 0);
        c.require_rowblock =
            N % (16 / elt) == 0 && detail::rowblock_bwd_config(N * elt, elt, acc) >= 0;
        c.seed = ++seed;
        run_bwd(c);
      }
}

TEST_F(RmsNormBwdRowBlock, FallbacksStayCorrect) {
  // Arguments the row-block path does not take run staged under the row-block setting.
  ScopedBwdPath guard(RmsNormBwdPath::kRowBlock);
  uint64_t seed = 31000;
  for (DType xt : kXTypes) {
    const int64_t M = 257, N = 1024;
    BwdCase base;
    base.M = M;
    base.N = N;
    base.x = xt;
    std::vector<BwdCase> cases;
    auto add = [&](auto edit) {
      BwdCase c = base;
      edit(c);
      c.seed = ++seed;
      cases.push_back(c);
    };
    add([&](BwdCase& c) { c.dout_l.row_stride = 0; c.dout_l.col_stride = 0; c.dout_constant = 1.0; });
    add([&](BwdCase& c) { c.dout_l.row_stride = 0; c.dout_constant = 0.625; });
    add([&](BwdCase& c) { c.dout_l.row_stride = 2 * N; c.dout_l.col_stride = 2; });
    add([&](BwdCase& c) { c.dout_l.row_stride = N + 1; });
    add([&](BwdCase& c) { c.dout = xt == DType::kFloat32 ? DType::kBFloat16 : DType::kFloat32; });
    add([&](BwdCase& c) { c.dx = DType::kFloat32; if (xt == DType::kFloat32) c.dx = DType::kBFloat16; });
    add([&](BwdCase& c) { c.dresidual_out = DType::kFloat32; c.dresidual = DType::kFloat32; });
    if (xt != DType::kFloat32) add([&](BwdCase& c) {  // the other 16-bit weight dtype
      c.weight = xt == DType::kBFloat16 ? DType::kFloat16 : DType::kBFloat16;
    });
    // Aligned row strides (a slice of a wider buffer) stay on the row-block path.
    add([&](BwdCase& c) {
      c.x_l.row_stride = N + 8; c.dout_l.row_stride = N + 16; c.dx_l.row_stride = N + 8;
      c.dresidual_out = xt; c.dres_out_l.row_stride = N + 24;
      c.dresidual = xt; c.dres_l.row_stride = N + 8;
      c.require_rowblock = true;
    });
    add([&](BwdCase& c) { c.dx_aliases_dout = true; c.require_rowblock = true; });
    for (const auto& c : cases) run_bwd(c);
  }
}

TEST_F(RmsNormBwdRowBlock, DeterministicWithClusters) {
  // Many CTAs and clusters (the rule's grid: R = 8, C = 4 for bf16 dweight, 8 with dbias):
  // identical bits over three runs.
  ScopedBwdPath guard(RmsNormBwdPath::kRowBlock);
  uint64_t seed = 32000;
  for (const auto& [M, N] : {Shape{8192, 4096}, Shape{3001, 1024}, Shape{2049, 8192}})
    for (DType xt : {DType::kBFloat16, DType::kFloat32}) {
      BwdCase c;
      c.M = M;
      c.N = N;
      c.x = xt;
      c.weight = xt;
      c.require_rowblock = true;
      c.seed = ++seed;
      run_bwd(c, /*runs=*/3);
    }
}

TEST_F(RmsNormBwdRowBlock, WorkspaceIsPartialRows) {
  // The row-block workspace is P·N·4 with P = ceil(ceil(M / R) / C) (no device query); a
  // smaller one throws before any launch.
  ScopedBwdPath guard(RmsNormBwdPath::kRowBlock);
  const int64_t M = 64, N = 4096;
  Rng rng(78);
  const auto xv = random_values(rng, M * N, DType::kBFloat16);
  DeviceTensor x = upload(xv, DType::kBFloat16, M, N), dy = upload(xv, DType::kBFloat16, M, N);
  DeviceTensor w = upload_vector(std::vector<double>(N, 1.0), DType::kFloat32, N);
  DeviceTensor rstd = upload_vector(std::vector<double>(M, 1.0), DType::kFloat32, M);
  DeviceTensor dx = alloc_tensor(DType::kBFloat16, M, N);
  DeviceTensor dw = alloc_tensor(DType::kFloat32, 1, N, {}, true);
  RmsNormBwdArgs a;
  a.x = x.ref;
  a.dout = dy.ref;
  a.weight = w.ref;
  a.rstd = rstd.ref;
  a.dx = dx.ref;
  a.dweight = dw.ref;
  const auto plan = detail::rmsnorm_bwd_rowblock_plan(a);
  ASSERT_GE(plan.config, 0);
  size_t need = 0;
  ASSERT_NO_THROW(need = rmsnorm_bwd_workspace_size(a));
  EXPECT_EQ(need, static_cast<size_t>(plan.grid.partials) * N * 4);
  DeviceBuffer ws(need);
  EXPECT_THROW(rmsnorm_bwd(a, ws.get(), need - 4, nullptr), InvalidArgument);
  EXPECT_NO_THROW(rmsnorm_bwd(a, ws.get(), need, nullptr));
  QUACK_CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace quack::test
