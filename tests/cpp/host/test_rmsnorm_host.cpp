// Tier 1: RMSNorm's plans on the row skeleton (no GPU). The training layouts and dtype mixes
// must take a vector policy (so a change that silently sends them to the general policy
// fails here), the README table's shapes the configurations their figures were measured on,
// and every plan stays within its kernel's limits. The pointers are fake, 16-byte aligned,
// never dereferenced (planning makes no CUDA call).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "host_test_util.h"
#include "norm/rmsnorm_internal.h"
#include "quack/quack.h"
#include "row/row_config.h"
#include "row/row_plan.h"

namespace quack::detail {
namespace {

using quack::test::fake;

std::string plan_name(const RowPlan& p) {
  char buf[96];
  return row_plan_name(p, buf, sizeof(buf));
}

RmsNormFwdArgs fwd(DType x, int64_t M, int64_t N, DType w = DType::kFloat32) {
  RmsNormFwdArgs a;
  a.x = TensorRef::matrix(fake(1), x, M, N);
  a.weight = TensorRef::vector(fake(2), w, N);
  a.out = TensorRef::matrix(fake(3), x, M, N);
  a.rstd = TensorRef::vector(fake(4), DType::kFloat32, M);
  return a;
}

RmsNormBwdArgs bwd(DType x, int64_t M, int64_t N, DType dy, DType w = DType::kFloat32) {
  RmsNormBwdArgs a;
  a.x = TensorRef::matrix(fake(1), x, M, N);
  a.weight = TensorRef::vector(fake(2), w, N);
  a.dout = TensorRef::matrix(fake(3), dy, M, N);
  a.rstd = TensorRef::vector(fake(4), DType::kFloat32, M);
  a.dx = TensorRef::matrix(fake(5), dy, M, N);
  a.dweight = TensorRef::vector(fake(6), DType::kFloat32, N);
  return a;
}

RowPolicy fwd_policy(const RmsNormFwdArgs& a) {
  return plan_row_call(rmsnorm_fwd_call(a)).policy;
}
RowPolicy bwd_policy(const RmsNormBwdArgs& a) {
  return plan_row_call(rmsnorm_bwd_call(a)).policy;
}

struct Case {
  DType x;
  int64_t N;
};
const Case kCases[] = {
    {DType::kBFloat16, 1024},  {DType::kBFloat16, 4096},   {DType::kBFloat16, 8192},
    {DType::kBFloat16, 32768}, {DType::kBFloat16, 65536},  {DType::kBFloat16, 131072},
    {DType::kBFloat16, 262144}, {DType::kFloat16, 4096},   {DType::kFloat32, 1024},
    {DType::kFloat32, 4096},   {DType::kFloat32, 32768},   {DType::kFloat32, 131072},
    {DType::kFloat32, 262144},
};

std::string name(const Case& c) {
  return std::string(dtype_name(c.x)) + " N=" + std::to_string(c.N);
}

TEST(RmsNormPlan, ForwardTrainingLayoutsTakeVectorPolicies) {
  const int64_t M = 8192;
  for (const Case& c : kCases)
    for (DType w : {DType::kFloat32, c.x})
      for (int variant = 0; variant < 5; ++variant) {
        // plain; residual in x's dtype; fp32 residual stream; residual_out alone (fp32: the
        // first layer of an fp32 residual stream); a bias
        RmsNormFwdArgs a = fwd(c.x, M, c.N, w);
        const DType r = variant == 1 ? c.x : DType::kFloat32;
        if (variant == 1 || variant == 2) a.residual = TensorRef::matrix(fake(5), r, M, c.N);
        if (variant >= 1 && variant <= 3) a.residual_out = TensorRef::matrix(fake(6), r, M, c.N);
        if (variant == 4) a.bias = TensorRef::vector(fake(7), w, c.N);
        EXPECT_NE(fwd_policy(a), RowPolicy::kGeneral)
            << name(c) << " w " << dtype_name(w) << " variant " << variant;
      }
}

TEST(RmsNormPlan, BackwardTrainingLayoutsTakeVectorPolicies) {
  const int64_t M = 8192;
  for (const Case& c : kCases)
    for (DType w : {DType::kFloat32, c.x})
      for (int variant = 0; variant < 4; ++variant) {
        // plain; dbias; residual gradients; the prenorm backward of an fp32 residual stream
        // (x, dresidual_out, dresidual fp32; dy, dx in x's dtype)
        const bool stream_f32 = variant == 3;
        if (stream_f32 && c.x == DType::kFloat32) continue;
        // fp32 h beside 16-bit dy: two row blocks of (4 + 2) bytes per element and the fp32
        // weight fit 227 KB up to N = 131072.
        if (stream_f32 && c.N > 131072) continue;
        const DType xt = stream_f32 ? DType::kFloat32 : c.x;
        RmsNormBwdArgs a = bwd(xt, M, c.N, c.x, w);
        if (variant == 1) a.dbias = TensorRef::vector(fake(7), DType::kFloat32, c.N);
        if (variant >= 2) {
          a.dresidual_out = TensorRef::matrix(fake(8), xt, M, c.N);
          a.dresidual = TensorRef::matrix(fake(9), xt, M, c.N);
        }
        // The third stream of 16-bit rows of 262144 (x, dy, dresidual_out) leaves the two
        // staged row blocks beyond 227 KB.
        if (variant >= 2 && c.N * dtype_size(c.x) > 256 * 1024) continue;
        EXPECT_EQ(bwd_policy(a), RowPolicy::kStaged)
            << name(c) << " w " << dtype_name(w) << " variant " << variant;
      }
}

TEST(RmsNormPlan, OtherLayoutsAndMixesTakeTheGeneralPolicy) {
  const DType bf = DType::kBFloat16, f16 = DType::kFloat16, f32 = DType::kFloat32;
  const int64_t M = 64, N = 4096;
  EXPECT_NE(fwd_policy(fwd(bf, M, N)), RowPolicy::kGeneral);
  auto general = [&](RmsNormFwdArgs a, const char* why) {
    EXPECT_EQ(fwd_policy(a), RowPolicy::kGeneral) << why;
  };
  {
    auto a = fwd(bf, M, N);
    a.x = TensorRef::matrix(fake(1), bf, M, N, 0, /*row_stride=*/N + 4);
    general(a, "rows 8-byte aligned");
  }
  {
    auto a = fwd(bf, M, N);
    a.x = TensorRef::matrix(static_cast<char*>(fake(1)) + 2, bf, M, N);
    general(a, "misaligned base");
  }
  general(fwd(bf, M, N + 4), "N not a multiple of 8");
  general(fwd(bf, M, N, f16), "fp16 weight with bf16 x");
  {
    auto a = fwd(bf, M, N);
    a.weight = TensorRef::vector(fake(2), f32, N, 0, /*stride=*/2);
    general(a, "strided weight");
  }
  {
    auto a = fwd(bf, M, N);
    a.out = TensorRef::matrix(fake(3), f32, M, N);
    general(a, "fp32 out of bf16 x");
  }
  {
    auto a = fwd(bf, M, N);
    a.residual = TensorRef::matrix(fake(5), bf, M, N);
    a.residual_out = TensorRef::matrix(fake(6), f32, M, N);
    general(a, "residual and residual_out in different dtypes");
  }
  {
    auto a = fwd(bf, M, N);
    a.residual = TensorRef::matrix(fake(5), f32, M, N);
    a.bias = TensorRef::vector(fake(7), f32, N);
    general(a, "fp32 residual stream with a bias");
  }
  {
    auto b = bwd(bf, M, N, f32);  // fp32 dy and dx of bf16 x
    EXPECT_EQ(bwd_policy(b), RowPolicy::kGeneral);
  }
}

// The README table's shapes (bf16 and fp32 x, fp32 weight, no residual; bwd with dweight)
// take the configurations RMSNorm's own kernels were measured on: the simple forward's table
// by row bytes, its prefetch kernel for long rows (clusters of 64 KB slices), its backward's
// geometry; fp32 262144 backward one row block at a time.
TEST(RmsNormPlan, TableShapes) {
  const DType bf = DType::kBFloat16, f32 = DType::kFloat32;
  struct Expect {
    DType t;
    int64_t N;
    bool bwd;
    const char* plan;
  };
  const Expect cases[] = {
      {bf, 1024, false, "r4t32v4"},
      {bf, 4096, false, "t128v4"},
      {bf, 8192, false, "t256v4"},
      {bf, 16384, false, "t512v4"},
      {bf, 32768, false, "t1024v4"},
      {bf, 65536, false, "ring-t1024v4-s3-x2"},
      {bf, 131072, false, "ring-t1024v4-s3-x4"},
      {bf, 262144, false, "ring-t1024v4-s3-x8"},
      {f32, 1024, false, "t256v2"},
      {f32, 8192, false, "t512v4"},
      {f32, 32768, false, "t1024v8"},
      {f32, 65536, false, "ring-t1024v4-s3-x4"},
      {f32, 131072, false, "ring-t1024v4-s3-x8"},
      {bf, 1024, true, "staged-v4-t32r8v4-x1"},
      {bf, 4096, true, "staged-v4-t128r2v4-x1"},
      {bf, 8192, true, "staged-v4-t256r1v4-x1"},
      {bf, 32768, true, "staged-v4-t512r1v4-x2"},
      {bf, 65536, true, "staged-v4-t512r1v4-x4"},
      {bf, 131072, true, "staged-v4-t512r1v4-x8"},
      {bf, 262144, true, "staged-v4-t512r1v4-x16"},
      {f32, 1024, true, "staged-v4-t64r4v4-x1"},
      {f32, 8192, true, "staged-v4-t512r1v4-x1"},
      {f32, 32768, true, "staged-v4-t512r1v4-x4"},
      {f32, 65536, true, "staged-v4-t512r1v4-x8"},
      {f32, 131072, true, "staged-v4-t512r1v4-x16"},
      {f32, 262144, true, "staged-v16-s1-t256r1v16-x16"},
  };
  for (const Expect& e : cases) {
    const int64_t M = e.N >= 262144 ? 8192 : 16384;
    const RowPlan p = e.bwd ? plan_row_call(rmsnorm_bwd_call(bwd(e.t, M, e.N, e.t)))
                            : plan_row_call(rmsnorm_fwd_call(fwd(e.t, M, e.N)));
    EXPECT_EQ(plan_name(p), e.plan) << dtype_name(e.t) << " N=" << e.N << (e.bwd ? " bwd" : " fwd");
  }
}

// Every RMSNorm plan over N, M and the dtype mixes stays within its kernel's limits: a vector
// plan only with an instance of the dtypes, the register policy's rows within one pass, the
// ring's cluster ≤ 16 holding the row, the staged geometry within its shared memory.
TEST(RmsNormPlan, EveryPlanWithinLimits) {
  const DType bf = DType::kBFloat16, f32 = DType::kFloat32;
  std::vector<int64_t> ns;
  for (int64_t n = 8; n <= 600000; n = n * 3 / 2 + 8) ns.push_back(n);
  for (int64_t p = 1024; p <= (int64_t{1} << 20); p *= 2) ns.push_back(p);
  for (DType t : {bf, f32})
    for (int variant = 0; variant < 3; ++variant)  // plain, residual (x), residual (fp32)
      for (int64_t N : ns)
        for (bool backward : {false, true}) {
          if (variant == 2 && t == f32) continue;
          const DType r = variant == 2 ? f32 : t;
          const int64_t M = 4097;
          RowCall c;
          if (!backward) {
            RmsNormFwdArgs a = fwd(t, M, N);
            if (variant > 0) {
              a.residual = TensorRef::matrix(fake(5), r, M, N);
              a.residual_out = TensorRef::matrix(fake(6), r, M, N);
            }
            c = rmsnorm_fwd_call(a);
          } else {
            RmsNormBwdArgs a = bwd(r, M, N, t);
            if (variant > 0) {
              a.dresidual_out = TensorRef::matrix(fake(8), r, M, N);
              a.dresidual = TensorRef::matrix(fake(9), r, M, N);
            }
            c = rmsnorm_bwd_call(a);
          }
          const RowPlan p = plan_row_call(c);
          SCOPED_TRACE(std::string(dtype_name(t)) + " variant " + std::to_string(variant) +
                       " N=" + std::to_string(N) + (backward ? " bwd" : " fwd") + " -> " +
                       plan_name(p));
          ASSERT_NE(p.policy, RowPolicy::kNone);
          if (p.policy == RowPolicy::kGeneral) {
            EXPECT_TRUE(!c.problem.vec_ok || N * dtype_size(t) > 256 * 1024 ||
                        (backward && variant == 2 && N > 131072))
                << "a short aligned row";
            continue;
          }
          ASSERT_TRUE(c.problem.pair && c.problem.vec_ok);
          const RowConfig& k = kRowConfigs[p.config];
          EXPECT_LE(p.threads, 1024);
          EXPECT_LE(p.cluster_n, kRowMaxCluster);
          EXPECT_LE(static_cast<int64_t>(p.smem), kRowMaxSmem);
          const int64_t row_vecs = N * dtype_size(c.problem.in) / 16;
          if (backward) {
            ASSERT_EQ(p.policy, RowPolicy::kStaged);
            EXPECT_LE(p.g.vpt, k.vecs);
            EXPECT_LE(p.g.cta_threads, k.threads());
            EXPECT_GE(int64_t{p.g.vpt} * p.g.tpr * p.g.cluster_n * p.g.vec, N);
          } else if (p.policy == RowPolicy::kRegister) {
            EXPECT_LE(row_vecs, int64_t{k.tpr} * k.vecs);
          } else if (p.policy == RowPolicy::kRing) {
            EXPECT_GE(int64_t{p.cluster_n} * k.tpr * k.vecs, row_vecs);
            EXPECT_EQ(static_cast<int64_t>(p.smem),
                      row_ring_smem_bytes(k, c.problem.in_words, 1));
          }
        }
}

TEST(RmsNormPlan, LargeTestShapesTakeTheirPolicies) {
  // test_rmsnorm_large.cpp: (8193, 262144) bf16 with a bf16 weight: the ring forward, the
  // staged backward; a weight of stride 2: the general policy both ways.
  const int64_t M = 8193, N = 262144;
  const DType bf = DType::kBFloat16;
  RmsNormFwdArgs a = fwd(bf, M, N, bf);
  EXPECT_EQ(fwd_policy(a), RowPolicy::kRing);
  RmsNormBwdArgs b = bwd(bf, M, N, bf, bf);
  b.dbias = TensorRef::vector(fake(7), DType::kFloat32, N);
  EXPECT_EQ(bwd_policy(b), RowPolicy::kStaged);
  a.weight = TensorRef::vector(fake(2), bf, N, 0, 2);
  b.weight = a.weight;
  EXPECT_EQ(fwd_policy(a), RowPolicy::kGeneral);
  EXPECT_EQ(bwd_policy(b), RowPolicy::kGeneral);
}

}  // namespace
}  // namespace quack::detail
