// Tier 1 (no GPU): LayerNorm's validation (every path throws quack::InvalidArgument naming the
// function and the argument before any CUDA call; valid arguments reach CUDA, hidden here by
// CUDA_VISIBLE_DEVICES="", and report "no CUDA driver/GPU"), the float64 reference on hand
// values, and the row skeleton's plans for LayerNorm's op shapes (per-column vectors, column
// accumulations, the staged policy) within the kernels' limits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "host_test_util.h"
#include "norm/layernorm_internal.h"
#include "quack/errors.h"
#include "quack/norm.h"
#include "reference/layernorm_ref.h"
#include "row/row_config.h"
#include "row/row_plan.h"

namespace quack {
namespace {

using namespace test;

constexpr int64_t M = 8, N = 4096;

LayerNormFwdArgs fwd_args() {
  LayerNormFwdArgs a;
  a.x = TensorRef::matrix(fake(1), DType::kBFloat16, M, N);
  a.weight = TensorRef::vector(fake(2), DType::kFloat32, N);
  a.bias = TensorRef::vector(fake(3), DType::kFloat32, N);
  a.out = TensorRef::matrix(fake(4), DType::kBFloat16, M, N);
  a.mean = TensorRef::vector(fake(5), DType::kFloat32, M);
  a.rstd = TensorRef::vector(fake(6), DType::kFloat32, M);
  return a;
}

// A backward of x dtype t, shape (rows, cols), weight dtype wdtype; dweight and dbias asked.
LayerNormBwdArgs bwd_args_of(DType t, int64_t rows, int64_t cols, DType wdtype) {
  LayerNormBwdArgs a;
  a.x = TensorRef::matrix(fake(1), t, rows, cols);
  a.weight = TensorRef::vector(fake(2), wdtype, cols);
  a.dout = TensorRef::matrix(fake(3), t, rows, cols);
  a.mean = TensorRef::vector(fake(4), DType::kFloat32, rows);
  a.rstd = TensorRef::vector(fake(5), DType::kFloat32, rows);
  a.dx = TensorRef::matrix(fake(6), t, rows, cols);
  a.dweight = TensorRef::vector(fake(7), DType::kFloat32, cols);
  a.dbias = TensorRef::vector(fake(8), DType::kFloat32, cols);
  return a;
}

LayerNormBwdArgs bwd_args() { return bwd_args_of(DType::kBFloat16, M, N, DType::kFloat32); }

void expect_fwd_invalid(const LayerNormFwdArgs& a, const std::vector<std::string>& parts) {
  expect_invalid([&] { layernorm_fwd(a, nullptr); }, "layernorm_fwd", parts);
}
void expect_bwd_invalid(const LayerNormBwdArgs& a, const std::vector<std::string>& parts) {
  expect_invalid([&] { layernorm_bwd(a, nullptr, 0, nullptr); }, "layernorm_bwd", parts);
  expect_invalid([&] { (void)layernorm_bwd_workspace_size(a); }, "layernorm_bwd_workspace_size",
                 parts);
}

TEST(LayerNormValidation, Baseline) {
  ASSERT_TRUE(kCudaHidden);
  expect_reaches_cuda([] { layernorm_fwd(fwd_args(), nullptr); }, "layernorm_fwd");
  expect_reaches_cuda([] { (void)layernorm_bwd_workspace_size(bwd_args()); },
                      "layernorm_bwd_workspace_size");
  expect_reaches_cuda([] { layernorm_bwd(bwd_args(), fake(9), 1 << 20, nullptr); },
                      "layernorm_bwd");
  // Valid odd calls: no weight, no bias, no statistics, a residual with residual_out, fp16
  // weight beside bf16 x, strided statistics, out = x, the offset.
  LayerNormFwdArgs a = fwd_args();
  a.weight = TensorRef();
  a.bias.dtype = DType::kFloat16;
  a.mean = TensorRef();
  a.rstd.stride[0] = 4;
  a.residual = TensorRef::matrix(fake(7), DType::kFloat32, M, N);
  a.residual_out = TensorRef::matrix(fake(8), DType::kFloat32, M, N);
  a.out = a.x;
  a.weight_offset = 1.f;
  expect_reaches_cuda([&] { layernorm_fwd(a, nullptr); }, "odd fwd");
  LayerNormBwdArgs b = bwd_args();
  b.dweight = TensorRef();
  b.weight = TensorRef();
  b.dresidual_out = TensorRef::matrix(fake(9), DType::kFloat32, M, N);
  b.dresidual = TensorRef::matrix(fake(10), DType::kFloat32, M, N);
  b.dx = b.dout;
  b.dout.stride[0] = 0;  // an expanded gradient
  b.dx = TensorRef::matrix(fake(11), DType::kBFloat16, M, N);
  expect_reaches_cuda([&] { layernorm_bwd(b, fake(12), 1 << 20, nullptr); }, "odd bwd");
}

TEST(LayerNormValidation, EmptyInputsReturnWithoutCuda) {
  LayerNormFwdArgs a;
  a.x = TensorRef::matrix(nullptr, DType::kFloat32, 0, 4096);
  a.out = TensorRef::matrix(nullptr, DType::kFloat32, 0, 4096);
  EXPECT_NO_THROW(layernorm_fwd(a, nullptr));
  a.mean = TensorRef::vector(nullptr, DType::kFloat32, 0);
  EXPECT_NO_THROW(layernorm_fwd(a, nullptr));
  // The backward with M = 0 and no dweight/dbias asked: nothing to do, no CUDA call.
  LayerNormBwdArgs b;
  b.x = TensorRef::matrix(nullptr, DType::kBFloat16, 0, 7);
  b.dout = b.x;
  b.dx = TensorRef::matrix(nullptr, DType::kBFloat16, 0, 7);
  b.mean = TensorRef::vector(nullptr, DType::kFloat32, 0);
  b.rstd = b.mean;
  EXPECT_EQ(layernorm_bwd_workspace_size(b), 0u);
  EXPECT_NO_THROW(layernorm_bwd(b, nullptr, 0, nullptr));
  // With dweight asked for, M = 0 writes zeros: that needs the device.
  b.weight = TensorRef::vector(fake(1), DType::kFloat32, 7);
  b.dweight = TensorRef::vector(fake(2), DType::kFloat32, 7);
  EXPECT_EQ(layernorm_bwd_workspace_size(b), 0u);
  expect_reaches_cuda([&] { layernorm_bwd(b, nullptr, 0, nullptr); }, "M = 0 dweight");
}

TEST(LayerNormValidation, Forward) {
  LayerNormFwdArgs a = fwd_args();
  a.x = TensorRef();
  expect_fwd_invalid(a, {"x", "absent"});
  a = fwd_args();
  a.x.shape[0] = -2;
  expect_fwd_invalid(a, {"x", "negative size"});
  a = fwd_args();
  a.x.shape[1] = -1;
  expect_fwd_invalid(a, {"x", "negative size"});
  a = fwd_args();
  a.x.dtype = DType::kInt64;
  expect_fwd_invalid(a, {"x", "int64"});
  a = fwd_args();
  a.x.device = -1;
  expect_fwd_invalid(a, {"x", "host memory"});
  a = fwd_args();
  a.weight.shape[0] = N - 1;
  expect_fwd_invalid(a, {"weight", "4095", "expected (4096,)"});
  a = fwd_args();
  a.bias.dtype = DType::kInt32;
  expect_fwd_invalid(a, {"bias", "int32"});
  a = fwd_args();
  a.bias.device = 1;
  expect_fwd_invalid(a, {"bias", "cuda:1"});
  a = fwd_args();
  a.residual = TensorRef::matrix(fake(7), DType::kBFloat16, M, N + 8);
  expect_fwd_invalid(a, {"residual", "(8, 4104)"});
  a = fwd_args();
  a.out = TensorRef();
  expect_fwd_invalid(a, {"out", "absent"});
  a = fwd_args();
  a.out.stride[0] = 0;
  expect_fwd_invalid(a, {"out", "overlapping"});
  a = fwd_args();
  a.residual_out = TensorRef::matrix(fake(8), DType::kBFloat16, M, N, 0, N / 2);
  expect_fwd_invalid(a, {"residual_out", "overlapping"});
  a = fwd_args();
  a.mean.dtype = DType::kBFloat16;
  expect_fwd_invalid(a, {"mean", "bfloat16", "float32"});
  a = fwd_args();
  a.rstd.shape[0] = M + 1;
  expect_fwd_invalid(a, {"rstd", "(9,)"});
  a = fwd_args();
  a.rstd.stride[0] = 0;
  expect_fwd_invalid(a, {"rstd", "overlapping"});
  a = fwd_args();
  a.eps = -1e-5f;
  expect_fwd_invalid(a, {"eps"});
  a = fwd_args();
  a.eps = std::nanf("");
  expect_fwd_invalid(a, {"eps"});
  a = fwd_args();
  a.weight_offset = std::numeric_limits<float>::infinity();
  expect_fwd_invalid(a, {"weight_offset", "finite"});
  // N = 0 with rows: valid (norm.h); the statistics of empty rows are memsets (the hidden CUDA),
  // without them nothing at all happens.
  a = fwd_args();
  a.x.shape[1] = 0;
  a.out.shape[1] = 0;
  a.weight = a.bias = TensorRef();
  expect_reaches_cuda([&] { layernorm_fwd(a, nullptr); }, "N = 0, mean and rstd");
  a.mean = a.rstd = TensorRef();
  EXPECT_NO_THROW(layernorm_fwd(a, nullptr));
}

TEST(LayerNormValidation, Backward) {
  LayerNormBwdArgs a = bwd_args();
  a.x = TensorRef();
  expect_bwd_invalid(a, {"x", "absent"});
  a = bwd_args();
  a.dout = TensorRef();
  expect_bwd_invalid(a, {"dout", "absent"});
  a = bwd_args();
  a.dout.shape[0] = -1;
  expect_bwd_invalid(a, {"dout", "negative size"});
  a = bwd_args();
  a.mean = TensorRef();
  expect_bwd_invalid(a, {"mean", "absent"});
  a = bwd_args();
  a.rstd.dtype = DType::kFloat16;
  expect_bwd_invalid(a, {"rstd", "float16"});
  a = bwd_args();
  a.dx = TensorRef();
  expect_bwd_invalid(a, {"dx", "absent"});
  a = bwd_args();
  a.dx.stride[0] = 0;
  expect_bwd_invalid(a, {"dx", "overlapping"});
  a = bwd_args();
  a.dresidual_out = TensorRef::matrix(fake(9), DType::kBFloat16, M - 1, N);
  expect_bwd_invalid(a, {"dresidual_out", "(7, 4096)"});
  a = bwd_args();
  a.dresidual = TensorRef::matrix(fake(9), DType::kInt32, M, N);
  expect_bwd_invalid(a, {"dresidual", "int32"});
  a = bwd_args();
  a.weight = TensorRef();
  expect_bwd_invalid(a, {"dweight", "weight is absent"});
  a = bwd_args();
  a.dbias.shape[0] = 3;
  expect_bwd_invalid(a, {"dbias", "(3,)"});
  a = bwd_args();
  a.dweight.stride[0] = 0;
  expect_bwd_invalid(a, {"dweight", "overlapping"});
  a = bwd_args();
  a.weight_offset = std::nanf("");
  expect_bwd_invalid(a, {"weight_offset"});
  a = bwd_args();
  a.x.shape[1] = a.dout.shape[1] = a.dx.shape[1] = 0;
  a.weight = a.dweight = a.dbias = TensorRef();
  EXPECT_EQ(layernorm_bwd_workspace_size(a), 0u);  // N = 0: every output empty, no CUDA call
  EXPECT_NO_THROW(layernorm_bwd(a, nullptr, 0, nullptr));
}

// ---------------------------------------------------------------- float64 reference

TEST(LayerNormReference, HandValues) {
  // Row (1, 2, 3, 4): mean 2.5, biased variance 1.25, rstd = 1/sqrt(1.25) (eps 0).
  const double x[] = {1, 2, 3, 4};
  const auto r = ref::layernorm_fwd_ref(1, 4, x, nullptr, nullptr, nullptr, 0.0, 0.0);
  EXPECT_DOUBLE_EQ(r.mean[0], 2.5);
  EXPECT_NEAR(r.rstd[0], 0.8944271909999159, 1e-15);
  const double y[] = {-1.3416407864998738, -0.4472135954999579, 0.4472135954999579,
                      1.3416407864998738};
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(r.out[j], y[j], 1e-15) << j;
  // Weight (0, 1, 0, 1) with offset 1 (w' = 1, 2, 1, 2), bias 0.5, residual (1, 1, 1, 1):
  // h = (2, 3, 4, 5) has the same spread, so y = ŷ·w' + 0.5; eps 0.75 makes rstd = 1/sqrt(2).
  const double w[] = {0, 1, 0, 1}, b[] = {0.5, 0.5, 0.5, 0.5}, res[] = {1, 1, 1, 1};
  const auto r2 = ref::layernorm_fwd_ref(1, 4, x, w, b, res, 0.75, 1.0);
  EXPECT_DOUBLE_EQ(r2.mean[0], 3.5);
  EXPECT_NEAR(r2.rstd[0], 1.0 / std::sqrt(2.0), 1e-15);
  EXPECT_DOUBLE_EQ(r2.h[3], 5.0);
  const double y2[] = {-1.5 / std::sqrt(2.0) + 0.5, -0.5 / std::sqrt(2.0) * 2 + 0.5,
                       0.5 / std::sqrt(2.0) + 0.5, 1.5 / std::sqrt(2.0) * 2 + 0.5};
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(r2.out[j], y2[j], 1e-15) << j;
  // A large mean: (1e8 + 1, 1e8 + 3): mean 1e8 + 2, variance 1 (no cancellation in float64's
  // two passes).
  const double xl[] = {1e8 + 1, 1e8 + 3};
  const auto rl = ref::layernorm_fwd_ref(1, 2, xl, nullptr, nullptr, nullptr, 0.0, 0.0);
  EXPECT_DOUBLE_EQ(rl.rstd[0], 1.0);
  EXPECT_DOUBLE_EQ(rl.out[0], -1.0);
}

TEST(LayerNormReference, BackwardHandValues) {
  // h = (0, 1, 5): mean 2, variance 14/3, rstd = sqrt(3/14); x̂ = (−2, −1, 3)·rstd.
  // dy = (1, 0, 0), no weight: g = dy, mean(g) = 1/3, mean(g·x̂) = −2·rstd/3;
  // dx = rstd·(g − 1/3 − x̂·mean(g·x̂)) = rstd·(8, −10, 2)/21; Σ dx = 0.
  const double h[] = {0, 1, 5}, dy[] = {1, 0, 0};
  const double rstd = std::sqrt(3.0 / 14.0), mean = 2.0;
  const auto r = ref::layernorm_bwd_ref(1, 3, h, nullptr, dy, &mean, &rstd, nullptr, 0.0);
  EXPECT_NEAR(r.dx[0], 0.1763466856709622, 1e-15);
  EXPECT_NEAR(r.dx[1], -0.2204333570887027, 1e-15);
  EXPECT_NEAR(r.dx[2], 0.044086671417740544, 1e-15);
  EXPECT_NEAR(r.dx[0] + r.dx[1] + r.dx[2], 0.0, 1e-15);
  EXPECT_NEAR(r.dw[0], -2.0 * rstd, 1e-15);
  EXPECT_EQ(r.dw[1], 0.0);
  EXPECT_EQ(r.db[0], 1.0);
  // A weight with offset scales g: w' = 2 everywhere doubles dx; dresidual_out adds.
  const double w[] = {1, 1, 1}, dro[] = {0.5, 0.5, 0.5};
  const auto r2 = ref::layernorm_bwd_ref(1, 3, h, w, dy, &mean, &rstd, dro, 1.0);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(r2.dx[j], 2 * r.dx[j] + 0.5, 1e-15) << j;
  EXPECT_NEAR(r2.dw[0], r.dw[0], 1e-15);  // dweight does not see the offset
}

// ---------------------------------------------------------------- the skeleton's plans

using detail::kRowConfigCount;
using detail::kRowConfigs;
using detail::RowPolicy;

std::string plan_name(const detail::RowPlan& p) {
  char buf[96];
  return detail::row_plan_name(p, buf, sizeof(buf));
}

// Every LayerNorm backward plan over N: the staged policy within its kernel's limits (vectors
// per thread, threads, cluster, shared memory), else the general policy.
TEST(LayerNormPlan, BackwardPlansWithinLimits) {
  detail::RowOpInfo op;
  op.n_in = 3;
  op.n_opt_in = 1;
  op.n_out = 2;
  op.n_cols = 1;
  op.n_acc = 2;
  op.red_floats = 2;
  for (DType t : {DType::kBFloat16, DType::kFloat32})
    for (int present : {2, 3})
      for (int64_t n = 8; n <= 600000; n = n * 3 / 2 + 8) {
        detail::RowProblem pr;
        pr.M = 4097;
        pr.N = n;
        pr.in = pr.out = t;
        pr.vec = DType::kFloat32;
        pr.pair = true;
        pr.vec_ok = n % (16 / dtype_size(t)) == 0;
        pr.n_present = present;
        const detail::RowPlan p = detail::plan_row(op, pr);
        SCOPED_TRACE(std::string(dtype_name(t)) + " N=" + std::to_string(n) + " -> " + plan_name(p));
        ASSERT_NE(p.policy, RowPolicy::kNone);
        if (p.policy == RowPolicy::kGeneral) {
          EXPECT_TRUE(!pr.vec_ok || n * dtype_size(t) > 256 * 1024) << "a short aligned row";
          continue;
        }
        ASSERT_EQ(p.policy, RowPolicy::kStaged);
        const detail::RowGeometry& g = p.g;
        EXPECT_LE(g.vpt, kRowConfigs[p.config].vecs);
        EXPECT_GE(int64_t{g.vpt} * g.tpr * g.cluster_n * g.vec, n) << "the geometry holds the row";
        EXPECT_EQ(g.tpr & (g.tpr - 1), 0);
        EXPECT_LE(g.cta_threads, kRowConfigs[p.config].threads());
        EXPECT_EQ(g.cta_threads % 32, 0);
        EXPECT_EQ(g.cta_threads % g.tpr, 0);
        EXPECT_LE(g.cluster_n, detail::kRowMaxCluster);
        EXPECT_TRUE(g.cluster_n == 1 || g.rows_per_cta() == 1);
        EXPECT_TRUE(g.cluster_n == 1 || g.tpr >= 128) << "cluster_exchange's 16-byte chunks";
        EXPECT_LE(static_cast<int64_t>(p.smem), detail::kRowMaxSmem);
        EXPECT_EQ(static_cast<int64_t>(p.smem),
                  detail::row_staged_smem_bytes(int64_t{g.vpt} * g.tpr * g.vec, g.rows_per_cta(),
                                                g.reduce_slots(), g.cluster_n, op.red_floats,
                                                present * dtype_size(t), op.n_cols,
                                                kRowConfigs[p.config].stages));
        // The column-sum staging (rows x slice fp32) fits in the stages.
        EXPECT_LE(int64_t{g.rows_per_cta()} * g.vpt * g.tpr * g.vec * 4,
                  int64_t{kRowConfigs[p.config].stages} * g.rows_per_cta() * g.vpt * g.tpr * g.vec *
                      dtype_size(t) * present);
        EXPECT_GE(g.row_blocks * g.rows_per_cta(), pr.M);
      }
}

struct Expect {
  DType t;
  int64_t N;
  bool bwd;
  const char* plan;
};

// The anchor and small-row shapes take the configurations docs/architecture.md documents for
// LayerNorm (bf16 x with an fp32 weight and bias, no residual).
TEST(LayerNormPlan, TrainingShapes) {
  const DType bf = DType::kBFloat16, f32 = DType::kFloat32;
  const Expect cases[] = {
      {bf, 128, false, "r16t16v1"},           {bf, 256, false, "r16t16v2"},
      {bf, 1024, false, "r4t32v4"},           {bf, 1536, false, "r4t32v8"},
      {bf, 2048, false, "r4t32v8"},           {bf, 4096, false, "t128v4"},
      {bf, 32768, false, "ring-t1024v2-s6-x2"}, {bf, 65536, false, "cl-t256v8-x4"},
      {bf, 131072, false, "cl-t256v8-x8"},    {bf, 262144, false, "cl-t256v8-x16"},
      {bf, 16384, false, "t512v4"},          {f32, 16384, false, "ring-t1024v4-s3-x1"},
      {f32, 32768, false, "ring-t1024v4-s3-x2"}, {f32, 131072, false, "ring-t1024v4-s3-x8"},
      {f32, 262144, false, "ring-t1024v4-s3-x16"},
      {bf, 128, true, "staged-v4-ra-t4r64v4-x1"},
      {bf, 4096, true, "staged-v4-ra-t128r2v4-x1"},
      {bf, 32768, true, "staged-v4-ra-t512r1v4-x2"},
      {bf, 262144, true, "staged-v4-ra-t512r1v4-x16"},
      {f32, 131072, true, "staged-v4-t512r1v4-x16"},
      {f32, 262144, true, "staged-v16-s1-t256r1v16-x16"},
  };
  for (const Expect& e : cases) {
    const int64_t Mr = e.N >= 262144 ? 8192 : 16384;
    LayerNormFwdArgs f;
    f.x = TensorRef::matrix(fake(1), e.t, Mr, e.N);
    f.weight = TensorRef::vector(fake(2), DType::kFloat32, e.N);
    f.bias = TensorRef::vector(fake(3), DType::kFloat32, e.N);
    f.out = TensorRef::matrix(fake(4), e.t, Mr, e.N);
    LayerNormBwdArgs b;
    b.x = f.x;
    b.weight = f.weight;
    b.dout = TensorRef::matrix(fake(5), e.t, Mr, e.N);
    b.mean = TensorRef::vector(fake(6), DType::kFloat32, Mr);
    b.rstd = TensorRef::vector(fake(7), DType::kFloat32, Mr);
    b.dx = TensorRef::matrix(fake(8), e.t, Mr, e.N);
    b.dweight = TensorRef::vector(fake(9), DType::kFloat32, e.N);
    b.dbias = TensorRef::vector(fake(10), DType::kFloat32, e.N);
    const detail::RowPlan p = e.bwd ? detail::plan_row_call(detail::layernorm_bwd_call(b))
                                    : detail::plan_row_call(detail::layernorm_fwd_call(f));
    EXPECT_EQ(plan_name(p), e.plan) << dtype_name(e.t) << " N=" << e.N << (e.bwd ? " bwd" : " fwd");
  }
}

// The plain backward plans staged-v4-ra (mean and rstd one row block ahead: row_config.h) on
// 16-bit rows wherever staged-v4 takes them, with staged-v4's geometry; fp32 rows keep
// staged-v4; the residual gradients' instance does not compile staged-v4-ra (staged-v4 where
// its three streams fit).
TEST(LayerNormPlan, BackwardRowAhead) {
  const int ra = detail::row_config_index("staged-v4-ra");
  const int v4 = detail::row_config_index("staged-v4");
  ASSERT_GE(ra, 0);
  ASSERT_GE(v4, 0);
  EXPECT_TRUE(kRowConfigs[ra].row_ahead);
  EXPECT_EQ(kRowConfigs[ra].stages, kRowConfigs[v4].stages);
  struct Case {
    DType t;
    int64_t M, N;
    const char* plan;
  };
  const DType bf = DType::kBFloat16, f16 = DType::kFloat16, f32 = DType::kFloat32;
  const Case cases[] = {
      {bf, 16384, 4096, "staged-v4-ra-t128r2v4-x1"},
      {bf, 16384, 32768, "staged-v4-ra-t512r1v4-x2"},
      {bf, 16384, 131072, "staged-v4-ra-t512r1v4-x8"},
      {bf, 8192, 262144, "staged-v4-ra-t512r1v4-x16"},
      {bf, 1000, 1024, "staged-v4-ra-t32r8v4-x1"},
      {f16, 16384, 4096, "staged-v4-ra-t128r2v4-x1"},
      {f32, 16384, 4096, "staged-v4-t256r1v4-x1"},
      {f32, 16384, 131072, "staged-v4-t512r1v4-x16"},
  };
  for (const Case& e : cases) {
    SCOPED_TRACE(std::string(dtype_name(e.t)) + " N=" + std::to_string(e.N));
    const LayerNormBwdArgs b = bwd_args_of(e.t, e.M, e.N, e.t);  // weight in x's dtype (measured)
    const detail::RowCall call = detail::layernorm_bwd_call(b);
    const detail::RowPlan p = detail::plan_row_call(call);
    EXPECT_EQ(plan_name(p), e.plan);
    // staged-v4's geometry and shared memory, forced.
    const detail::RowPlan p4 = detail::plan_row_call(call, v4);
    EXPECT_EQ(p.g.tpr, p4.g.tpr);
    EXPECT_EQ(p.g.rows_per_cta(), p4.g.rows_per_cta());
    EXPECT_EQ(p.g.vpt, p4.g.vpt);
    EXPECT_EQ(p.cluster_n, p4.cluster_n);
    EXPECT_EQ(p.smem, p4.smem);
    LayerNormBwdArgs r = b;  // the residual gradients: their own instance, no staged-v4-ra
    r.dresidual_out = TensorRef::matrix(fake(9), e.t, e.M, e.N);
    const detail::RowCall rcall = detail::layernorm_bwd_call(r);
    const detail::RowPlan rp = detail::plan_row_call(rcall);
    EXPECT_NE(rp.config, ra);
    if (e.N * dtype_size(e.t) <= 256 * 1024) {  // beyond, three streams leave staged-v4
      EXPECT_EQ(plan_name(rp).rfind("staged-v4-t", 0), 0u) << plan_name(rp);
    }
    EXPECT_EQ(detail::plan_row_call(rcall, ra).policy, RowPolicy::kNone);
  }
}

// Aliasing (norm.h: out may be x itself, residual_out the residual itself, dx and dresidual
// dout itself; else memory of their own; the check is shared with RMSNorm: norm_check.h).
TEST(LayerNormValidation, OutputAliasing) {
  LayerNormFwdArgs a = fwd_args();
  a.out.data = static_cast<char*>(a.x.data) + 2 * N;  // one bf16 row into x
  expect_fwd_invalid(a, {"out overlaps x", "in place"});
  expect_invalid([&] {
    RmsNormFwdArgs r;
    r.x = a.x;
    r.out = a.out;
    rmsnorm_fwd(r, nullptr);
  }, "rmsnorm_fwd", {"out overlaps x"});
  a = fwd_args();
  a.residual = TensorRef::matrix(fake(7), DType::kBFloat16, M, N);
  a.residual_out = a.residual;  // in place
  expect_reaches_cuda([&] { layernorm_fwd(a, nullptr); }, "residual_out = residual");
  a.residual_out.data = static_cast<char*>(a.residual.data) + 64;
  expect_fwd_invalid(a, {"residual_out overlaps residual"});
  LayerNormBwdArgs b = bwd_args();
  b.dx = b.dout;  // in place
  expect_reaches_cuda([&] { (void)layernorm_bwd_workspace_size(b); }, "dx = dout");
  b.dx = TensorRef::matrix(b.dout.data, DType::kBFloat16, M, N, 0, 1, M);  // transposed
  expect_bwd_invalid(b, {"dx overlaps dout"});
}

// Outputs apart from each other and from every input they are not written in place of
// (ArgCheck::outputs_apart): two outputs at one address, a statistic inside an output, an
// output over a parameter.
TEST(LayerNormValidation, OutputsApart) {
  LayerNormFwdArgs a = fwd_args();
  a.residual = TensorRef::matrix(fake(7), DType::kBFloat16, M, N);
  a.residual_out = a.out;
  expect_fwd_invalid(a, {"out overlaps residual_out", "expected separate memory"});
  a = fwd_args();
  a.rstd = TensorRef::vector(a.out.data, DType::kFloat32, M);
  expect_fwd_invalid(a, {"out overlaps rstd"});
  a = fwd_args();
  a.mean = a.rstd;
  expect_fwd_invalid(a, {"mean overlaps rstd"});
  a = fwd_args();
  a.out.data = static_cast<char*>(a.weight.data) - 2;
  expect_fwd_invalid(a, {"out overlaps weight"});
  a = fwd_args();
  a.residual = TensorRef::matrix(fake(7), DType::kBFloat16, M, N);
  a.residual_out = TensorRef::matrix(a.x.data, DType::kBFloat16, M, N);
  expect_fwd_invalid(a, {"residual_out overlaps x"});
  LayerNormBwdArgs b = bwd_args();
  b.dresidual = b.dx;
  expect_bwd_invalid(b, {"dx overlaps dresidual"});
  b = bwd_args();
  b.dx = TensorRef::matrix(b.rstd.data, DType::kBFloat16, M, N);
  expect_bwd_invalid(b, {"dx overlaps rstd"});
  b = bwd_args();
  b.dresidual_out = TensorRef::matrix(fake(9), DType::kBFloat16, M, N);
  b.dx = b.dresidual_out;
  expect_bwd_invalid(b, {"dx overlaps dresidual_out"});
  expect_invalid([&] {
    RmsNormFwdArgs r;
    r.x = a.x;
    r.out = TensorRef::matrix(fake(8), DType::kBFloat16, M, N);
    r.rstd = TensorRef::vector(r.out.data, DType::kFloat32, M);
    rmsnorm_fwd(r, nullptr);
  }, "rmsnorm_fwd", {"out overlaps rstd"});
}

}  // namespace
}  // namespace quack
