// Tier 1 (no GPU): top-k's validation (every path throws quack::InvalidArgument naming the
// function and the argument, before any CUDA call), the plan swept over (M, N, k, dtype), the
// shared-memory layout, and the float64 reference on hand values (the tie rule, NaN, ±0).
// CUDA is hidden (CUDA_VISIBLE_DEVICES=""): valid calls report "no CUDA driver/GPU".
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "host_test_util.h"
#include "quack/errors.h"
#include "quack/topk.h"
#include "reference/topk_ref.h"
#include "topk/topk_internal.h"
#include "topk/topk_networks.h"
#include "topk/topk_plan.h"

namespace quack {
namespace {

using test::expect_invalid;
using test::expect_reaches_cuda;
using test::kCudaHidden;

// Top-k's fake pointers stand 16 MiB apart.
void* fake(uintptr_t k) { return test::fake(k, uintptr_t{0x1000000}); }

constexpr int64_t M = 8, N = 4096, K = 16;

TopkFwdArgs fwd_args() {
  TopkFwdArgs a;
  a.x = TensorRef::matrix(fake(1), DType::kBFloat16, M, N);
  a.values = TensorRef::matrix(fake(2), DType::kBFloat16, M, K);
  a.indices = TensorRef::matrix(fake(3), DType::kInt64, M, K);
  return a;
}

TopkBwdArgs bwd_args(TopkSoftmax sm) {
  TopkBwdArgs a;
  a.dvalues = TensorRef::matrix(fake(1), DType::kFloat32, M, K);
  a.indices = TensorRef::matrix(fake(2), DType::kInt64, M, K);
  a.dx = TensorRef::matrix(fake(3), DType::kBFloat16, M, N);
  a.softmax = sm;
  if (sm == TopkSoftmax::kSelected) a.values = TensorRef::matrix(fake(4), DType::kBFloat16, M, K);
  if (sm == TopkSoftmax::kRow) {
    a.x = TensorRef::matrix(fake(5), DType::kBFloat16, M, N);
    a.lse = TensorRef::vector(fake(6), DType::kFloat32, M);
  }
  return a;
}

void expect_fwd_invalid(const TopkFwdArgs& a, const std::vector<std::string>& parts) {
  expect_invalid([&] { topk_fwd(a, nullptr); }, "topk_fwd", parts);
}
void expect_bwd_invalid(const TopkBwdArgs& a, const std::vector<std::string>& parts) {
  expect_invalid([&] { topk_bwd(a, nullptr); }, "topk_bwd", parts);
}

// ------------------------------------------------------------------ validation

TEST(TopkValidation, ValidCallsReachCuda) {
  ASSERT_TRUE(kCudaHidden);
  expect_reaches_cuda([] { topk_fwd(fwd_args(), nullptr); }, "topk_fwd");
  TopkFwdArgs a = fwd_args();
  a.x.stride[0] = 0;  // broadcast rows
  a.indices.dtype = DType::kInt32;
  a.values.dtype = DType::kFloat32;
  a.largest = false;
  a.softmax = TopkSoftmax::kRow;
  a.lse = TensorRef::vector(fake(7), DType::kFloat32, M);
  expect_reaches_cuda([&] { topk_fwd(a, nullptr); }, "topk_fwd kRow");
  for (TopkSoftmax sm : {TopkSoftmax::kNone, TopkSoftmax::kSelected, TopkSoftmax::kRow})
    expect_reaches_cuda([&] { topk_bwd(bwd_args(sm), nullptr); }, "topk_bwd");
}

TEST(TopkValidation, EmptyAndZeroKLaunchNothing) {
  TopkFwdArgs a = fwd_args();
  a.x = TensorRef::matrix(nullptr, DType::kFloat32, 0, N);
  a.values = TensorRef::matrix(nullptr, DType::kFloat32, 0, K);
  a.indices = TensorRef::matrix(nullptr, DType::kInt64, 0, K);
  EXPECT_NO_THROW(topk_fwd(a, nullptr));
  EXPECT_EQ(topk_fwd_workspace_size(a), 0u);
  a = fwd_args();
  a.values = TensorRef::matrix(nullptr, DType::kBFloat16, M, 0);
  a.indices = TensorRef::matrix(nullptr, DType::kInt64, M, 0);
  EXPECT_NO_THROW(topk_fwd(a, nullptr));  // k = 0: empty outputs
  a.x = TensorRef::matrix(nullptr, DType::kBFloat16, M, 0);
  EXPECT_NO_THROW(topk_fwd(a, nullptr));  // N = 0, k = 0
  TopkBwdArgs b = bwd_args(TopkSoftmax::kNone);
  b.dx = TensorRef::matrix(nullptr, DType::kFloat32, 0, N);
  b.dvalues = TensorRef::matrix(nullptr, DType::kFloat32, 0, K);
  b.indices = TensorRef::matrix(nullptr, DType::kInt64, 0, K);
  EXPECT_NO_THROW(topk_bwd(b, nullptr));
}

TEST(TopkValidation, ForwardArguments) {
  TopkFwdArgs a = fwd_args();
  a.x = TensorRef();
  expect_fwd_invalid(a, {"x is absent"});
  a = fwd_args();
  a.x.dtype = DType::kInt32;
  expect_fwd_invalid(a, {"x has dtype int32"});
  a = fwd_args();
  a.x.device = -1;
  expect_fwd_invalid(a, {"x is in host memory"});
  a = fwd_args();
  a.values = TensorRef::matrix(fake(2), DType::kBFloat16, M + 1, K);
  expect_fwd_invalid(a, {"values has shape (9, 16)", "expected (M, k) = (8, k)"});
  a = fwd_args();
  a.values = TensorRef::vector(fake(2), DType::kBFloat16, K);
  expect_fwd_invalid(a, {"values has shape (16,)"});
  a = fwd_args();
  a.values.dtype = DType::kInt64;
  expect_fwd_invalid(a, {"values has dtype int64"});
  a = fwd_args();
  a.values.device = 1;
  expect_fwd_invalid(a, {"values is on cuda:1", "expected cuda:0"});
  a = fwd_args();
  a.values.stride[0] = 0;
  expect_fwd_invalid(a, {"output values has overlapping elements"});
  a = fwd_args();
  a.indices = TensorRef::matrix(fake(3), DType::kInt64, M, K + 1);
  expect_fwd_invalid(a, {"indices has shape (8, 17)", "expected (8, 16)"});
  a = fwd_args();
  a.indices.dtype = DType::kFloat32;
  expect_fwd_invalid(a, {"indices has dtype float32", "expected int64 or int32"});
  a = fwd_args();
  a.indices.device = 2;
  expect_fwd_invalid(a, {"indices is on cuda:2"});
  a = fwd_args();
  a.indices.stride[1] = -1;
  expect_fwd_invalid(a, {"indices has a negative stride"});
  a = fwd_args();
  a.x = TensorRef::matrix(fake(1), DType::kBFloat16, M, 10);
  expect_fwd_invalid(a, {"values has k = 16 columns", "expected k ≤ N = 10"});
  a = fwd_args();
  a.softmax = static_cast<TopkSoftmax>(7);
  expect_fwd_invalid(a, {"softmax is 7"});
  a = fwd_args();
  a.lse = TensorRef::vector(fake(7), DType::kFloat32, M);
  expect_fwd_invalid(a, {"lse is given with softmax = kNone", "only with TopkSoftmax::kRow"});
  a.softmax = TopkSoftmax::kRow;
  a.lse = TensorRef::vector(fake(7), DType::kFloat32, M + 1);
  expect_fwd_invalid(a, {"lse has shape (9,)", "expected (8,)"});
  a.lse = TensorRef::vector(fake(7), DType::kBFloat16, M);
  expect_fwd_invalid(a, {"lse has dtype bfloat16", "expected float32"});
  a.lse = TensorRef::vector(fake(7), DType::kFloat32, M, 0, /*st=*/0);  // M rows on one float
  expect_fwd_invalid(a, {"output lse has overlapping elements"});
  // Outputs overlapping x or each other.
  a = fwd_args();
  a.values.data = static_cast<char*>(a.x.data) + 64;
  expect_fwd_invalid(a, {"values overlaps x"});
  a = fwd_args();
  a.indices.data = static_cast<char*>(a.values.data) + 8;
  expect_fwd_invalid(a, {"values overlaps indices"});
  a = fwd_args();
  a.softmax = TopkSoftmax::kRow;
  a.lse = TensorRef::vector(a.indices.data, DType::kFloat32, M);
  expect_fwd_invalid(a, {"lse overlaps indices"});
  // N beyond int32 (the plan's columns are 32-bit).
  a = fwd_args();
  a.x = TensorRef::matrix(fake(1), DType::kBFloat16, 1, int64_t{1} << 31);
  a.values = TensorRef::matrix(fake(2), DType::kBFloat16, 1, K);
  a.indices = TensorRef::matrix(fake(3), DType::kInt64, 1, K);
  a.values.data = static_cast<char*>(a.x.data) + (int64_t{1} << 33);
  a.indices.data = static_cast<char*>(a.x.data) + (int64_t{1} << 34);
  expect_fwd_invalid(a, {"x has N = 2147483648 columns", "expected N ≤ 2147483647"});
}

TEST(TopkValidation, WorkspaceForTheSortPath) {
  // k > 256 sorts: without a workspace the call is refused before any launch. Without CUDA
  // the size query itself meets the hidden device (CUB asks it).
  TopkFwdArgs a = fwd_args();
  a.values = TensorRef::matrix(fake(2), DType::kBFloat16, M, 300);
  a.indices = TensorRef::matrix(fake(3), DType::kInt64, M, 300);
  expect_reaches_cuda([&] { topk_fwd(a, nullptr); }, "topk_fwd k = 300");
  EXPECT_EQ(topk_fwd_workspace_size(fwd_args()), 0u) << "k ≤ 256 needs no workspace";
}

TEST(TopkValidation, BackwardArguments) {
  TopkBwdArgs a = bwd_args(TopkSoftmax::kNone);
  a.dx = TensorRef();
  expect_bwd_invalid(a, {"dx is absent"});
  a = bwd_args(TopkSoftmax::kNone);
  a.dx.stride[1] = 0;
  expect_bwd_invalid(a, {"output dx has overlapping elements"});
  a = bwd_args(TopkSoftmax::kNone);
  a.dvalues = TensorRef::matrix(fake(1), DType::kFloat32, M - 1, K);
  expect_bwd_invalid(a, {"dvalues has shape (7, 16)"});
  a = bwd_args(TopkSoftmax::kNone);
  a.indices = TensorRef::matrix(fake(2), DType::kInt64, M, K - 1);
  expect_bwd_invalid(a, {"indices has shape (8, 15)", "expected (8, 16)"});
  a = bwd_args(TopkSoftmax::kNone);
  a.indices.dtype = DType::kBFloat16;
  expect_bwd_invalid(a, {"indices has dtype bfloat16"});
  a = bwd_args(TopkSoftmax::kNone);
  a.dx = TensorRef::matrix(fake(3), DType::kBFloat16, M, 8);
  expect_bwd_invalid(a, {"dvalues has k = 16 columns", "expected k ≤ N = 8"});
  a = bwd_args(TopkSoftmax::kSelected);
  a.values = TensorRef();
  expect_bwd_invalid(a, {"values is absent", "softmax = kSelected"});
  a = bwd_args(TopkSoftmax::kSelected);
  a.values.dtype = DType::kInt32;
  expect_bwd_invalid(a, {"values has dtype int32"});
  a = bwd_args(TopkSoftmax::kRow);
  a.x = TensorRef();
  expect_bwd_invalid(a, {"x is absent", "softmax = kRow"});
  a = bwd_args(TopkSoftmax::kRow);
  a.lse = TensorRef();
  expect_bwd_invalid(a, {"lse is absent", "softmax = kRow"});
  a = bwd_args(TopkSoftmax::kRow);
  a.x = TensorRef::matrix(fake(5), DType::kBFloat16, M, N - 1);
  expect_bwd_invalid(a, {"x has shape (8, 4095)", "expected (8, 4096)"});
  a = bwd_args(TopkSoftmax::kRow);
  a.lse.dtype = DType::kFloat16;
  expect_bwd_invalid(a, {"lse has dtype float16"});
  a = bwd_args(TopkSoftmax::kNone);
  a.dvalues.data = static_cast<char*>(a.dx.data) + 4;
  expect_bwd_invalid(a, {"dx overlaps dvalues"});
  a = bwd_args(TopkSoftmax::kRow);
  a.x.data = a.dx.data;
  expect_bwd_invalid(a, {"dx overlaps x"});
}

// ------------------------------------------------------------------ plan

using detail::plan_topk;
using detail::TopkPath;
using detail::TopkPlan;
using detail::TopkProblem;

// A plan's problem: M rows of N columns, top k, x's dtype, 16-byte rows or not; 132 SMs.
TopkProblem topk_problem(int64_t M, int64_t N, int64_t k, DType x = DType::kBFloat16,
                         bool vec_ok = true) {
  TopkProblem pr;
  pr.M = M;
  pr.N = N;
  pr.k = k;
  pr.x = x;
  pr.vec_ok = vec_ok;
  pr.sm_count = 132;
  return pr;
}

// Plan names expected at shapes (plan_topk unforced, or with forced_path).
struct NamedPlan {
  int64_t M, N, k;
  DType x;
  const char* name;
};

void expect_plan_names(std::initializer_list<NamedPlan> shapes,
                       detail::TopkPath forced_path = detail::TopkPath::kNone) {
  char buf[96];
  for (const NamedPlan& s : shapes)
    EXPECT_STREQ(detail::topk_plan_name(
                     plan_topk(topk_problem(s.M, s.N, s.k, s.x), 0, forced_path), buf, sizeof(buf)),
                 s.name)
        << s.M << "x" << s.N << "x" << s.k << " " << dtype_name(s.x);
}

TEST(TopkPlan, SweepInvariants) {
  const int64_t Ns[] = {1,    7,     64,    100,   1000,   1024,   4096,
                        4099, 32768, 65535, 65536, 131072, 262144, 1000000};
  const int64_t Ms[] = {1, 3, 64, 4096, 65536};
  const int64_t ks[] = {1, 2, 8, 31, 32, 33, 64, 100, 128, 200, 256, 257, 5000};
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
    for (int64_t n : Ns)
      for (int64_t m : Ms)
        for (int64_t k : ks) {
          if (k > n) continue;
          const TopkProblem pr = topk_problem(m, n, k, t, (n % 3) != 0);
          const TopkPlan p = plan_topk(pr);
          SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(n) +
                       " k=" + std::to_string(k) + " " + dtype_name(t));
          if (k > detail::kTopkQueueMaxK) {
            EXPECT_EQ(p.path, TopkPath::kSort);
            continue;
          }
          if (detail::topk_bitonic_planned(pr)) {
            EXPECT_EQ(p.path, TopkPath::kBitonic);
            continue;
          }
          if (detail::topk_radix_planned(pr)) {
            EXPECT_EQ(p.path, TopkPath::kRadix);
            continue;
          }
          ASSERT_EQ(p.path, TopkPath::kQueue);
          EXPECT_GE(32 * p.queue_regs, k);
          EXPECT_LT(16 * p.queue_regs, std::max<int64_t>(k, 17))
              << "the smallest queue that holds k";
          EXPECT_EQ(p.packed_bits, dtype_size(t) == 2 && n < 65536 ? 32 : 64);
          EXPECT_EQ(p.vec_io, pr.vec_ok);
          const int64_t iter = detail::topk_iter_cols(dtype_size(t));
          EXPECT_EQ(p.slice % iter, 0);
          EXPECT_GE(p.slice * p.warps_per_row, n) << "the warps cover the row";
          EXPECT_LT(p.slice, (n + p.warps_per_row - 1) / p.warps_per_row + iter) << "balanced";
          EXPECT_TRUE(p.warps_per_row == 1 || p.warps_per_row == 2 || p.warps_per_row == 4 ||
                      p.warps_per_row == 8 || p.warps_per_row == 16);
          EXPECT_EQ(p.threads, 32 * p.warps_per_row * p.rows_per_cta);
          EXPECT_LE(p.threads, 512);
          EXPECT_EQ(p.grid, (m + p.rows_per_cta - 1) / p.rows_per_cta);
          EXPECT_LE(p.smem, 48u * 1024) << "no opt-in shared memory";
          if (m >= 2112) {
            EXPECT_EQ(p.warps_per_row, 1) << "enough rows: one warp each";
          }
          if (p.warps_per_row > 1) {
            EXPECT_GE(n / p.warps_per_row, std::max<int64_t>(iter, 16 * k));
          }
          EXPECT_EQ(p.prefix_iters, pr.vec_ok && k >= detail::kTopkPrefixMinK
                                        ? detail::kTopkPrefixIters
                                        : 0);
        }
}

TEST(TopkPlan, EmptyAndForced) {
  TopkProblem pr;
  pr.M = 0;
  pr.N = 100;
  pr.k = 5;
  EXPECT_EQ(plan_topk(pr).path, TopkPath::kNone);
  pr.M = 5;
  pr.k = 0;
  EXPECT_EQ(plan_topk(pr).path, TopkPath::kNone);
  pr.k = 5;
  pr.N = 5000;
  pr.vec_ok = true;
  for (int w : {1, 2, 4, 8, 16}) {
    const TopkPlan p = plan_topk(pr, w);
    EXPECT_EQ(p.warps_per_row, w);
    EXPECT_EQ(p.rows_per_cta, w >= 4 ? 1 : 4 / w);
    EXPECT_GE(p.slice * w, pr.N);
  }
}

TEST(TopkPlan, BenchmarkShapes) {
  // issue 19's shapes on 132 SMs, the queue kernel's plan (forced where the bitonic rule takes
  // the shape): one warp per row (≥ 16 warps per SM already).
  struct S {
    int64_t M, N, k;
    int w, q, bits;
  };
  const S shapes[] = {{65536, 1024, 8, 1, 1, 32},
                      {65536, 4096, 32, 1, 1, 32},
                      {16384, 4096, 128, 1, 4, 32},
                      {16384, 32768, 64, 1, 2, 32},
                      {4096, 131072, 256, 1, 8, 64}};
  for (const S& s : shapes) {
    TopkProblem pr = topk_problem(s.M, s.N, s.k);
    const TopkPlan p = plan_topk(pr, 0, TopkPath::kQueue);
    ASSERT_EQ(p.path, TopkPath::kQueue) << s.N;
    EXPECT_EQ(p.warps_per_row, s.w) << s.N;
    EXPECT_EQ(p.queue_regs, s.q) << s.N;
    EXPECT_EQ(p.packed_bits, s.bits) << s.N;
    pr.x = DType::kFloat32;  // the queue kernel's fp32 entries (the bitonic rule takes N ≤ 2048, k ≤ 16)
    EXPECT_EQ(plan_topk(pr, 0, TopkPath::kQueue).packed_bits, 64);
  }
}

TEST(TopkPlan, SparseOffer) {
  // The queue kernel's sparse offer: planned with the prefix bound (k ≥ 32) or forced
  // (forced_sparse 1), on the vector path, for CTAs of ≤ kTopkSparseMaxThreads = 128 threads
  // (warps per row 1..4); forced_sparse 0 leaves it out; the name ends in "-sp".
  EXPECT_EQ(detail::kTopkSparseMaxThreads, 128);
  char buf[96];
  for (DType t : {DType::kBFloat16, DType::kFloat32}) {
    for (bool vec : {true, false}) {
      TopkProblem pr = topk_problem(65536, 4096, 32, t, vec);
      EXPECT_EQ(plan_topk(pr).sparse, vec);
      EXPECT_EQ(plan_topk(pr, 0, TopkPath::kQueue).sparse, vec);
      EXPECT_FALSE(plan_topk(pr, 0, TopkPath::kQueue, 0, false, -1, -1, 0).sparse);
      EXPECT_FALSE(plan_topk(pr, 0, TopkPath::kQueue, 0, false, 0, -1, -1).sparse);  // no prefix
      EXPECT_FALSE(plan_topk(topk_problem(65536, 4096, 31, t, vec), 0, TopkPath::kQueue).sparse);
      for (int w : {1, 2, 4, 8, 16}) {
        const TopkPlan p = plan_topk(pr, w, TopkPath::kQueue, 0, false, -1, -1, 1);
        ASSERT_EQ(p.path, TopkPath::kQueue);
        EXPECT_EQ(p.sparse, vec && p.threads <= 128) << w;
        EXPECT_EQ(p.sparse, vec && w <= 4) << w;
      }
    }
  }
  EXPECT_STREQ(detail::topk_plan_name(plan_topk(topk_problem(65536, 4096, 32, DType::kFloat32), 0,
                                                TopkPath::kQueue, 0, false, -1, -1, 1),
                                      buf, sizeof(buf)),
               "queue-q32-p64-vec-w1r4-pre32-sp");
  // The radix and bitonic plans never carry it.
  EXPECT_FALSE(plan_topk(topk_problem(65536, 4096, 32), 0, TopkPath::kRadix, 0, false, -1, -1, 1)
                   .sparse);
}

TEST(TopkPlan, NarrowedPrefixSearch) {
  // forced_narrow 1: the queue plan's narrowed prefix search, only where it has a prefix bound.
  char buf[96];
  for (int64_t k : {8, 32, 128}) {
    for (bool vec : {true, false}) {
      const TopkProblem pr = topk_problem(16384, 4096, k, DType::kFloat32, vec);
      EXPECT_FALSE(plan_topk(pr, 0, TopkPath::kQueue).prefix_narrow);
      const TopkPlan p = plan_topk(pr, 0, TopkPath::kQueue, 0, false, -1, -1, -1, 1);
      EXPECT_EQ(p.prefix_narrow, vec && k >= 32) << k;
      EXPECT_FALSE(plan_topk(pr, 0, TopkPath::kQueue, 0, false, 0, -1, -1, 1).prefix_narrow);
      EXPECT_EQ(plan_topk(pr, 0, TopkPath::kQueue, 0, false, 4, -1, -1, 1).prefix_narrow, vec);
    }
  }
  EXPECT_STREQ(detail::topk_plan_name(plan_topk(topk_problem(65536, 4096, 32, DType::kFloat32), 0,
                                                TopkPath::kQueue, 0, false, -1, -1, 1, 1),
                                      buf, sizeof(buf)),
               "queue-q32-p64-vec-w1r4-pre32-nw-sp");
}

TEST(TopkPlan, PrefixBound) {
  // The queue kernel's prefix bound: planned for k ≥ kTopkPrefixMinK = 32 on the vector path
  // (run V: 32 iterations never slower than fewer at k 32, 64, 128, 256; below k = 32 the
  // first-block bound); forced_prefix sets it (0: none), vector path only.
  EXPECT_EQ(detail::kTopkPrefixMinK, 32);
  EXPECT_EQ(detail::kTopkPrefixIters, 32);
  for (int64_t k : {1, 8, 16, 31, 32, 33, 64, 65, 128, 256}) {
    for (bool vec : {true, false}) {
      TopkProblem pr = topk_problem(16384, 4096, k);
      pr.vec_ok = vec;
      const TopkPlan p = plan_topk(pr, 0, TopkPath::kQueue);
      ASSERT_EQ(p.path, TopkPath::kQueue);
      EXPECT_EQ(p.prefix_iters, vec && k >= 32 ? 32 : 0) << k;
      EXPECT_EQ(plan_topk(pr, 0, TopkPath::kQueue, 0, false, 0).prefix_iters, 0) << k;
      EXPECT_EQ(plan_topk(pr, 0, TopkPath::kQueue, 0, false, 3).prefix_iters, vec ? 3 : 0) << k;
      EXPECT_EQ(plan_topk(pr, 2).prefix_iters, p.prefix_iters) << k;
    }
  }
  // The other paths never carry one (bitonic at N ≤ 2048 with k = 32 too).
  EXPECT_EQ(plan_topk(topk_problem(65536, 1024, 8)).prefix_iters, 0);
  EXPECT_EQ(plan_topk(topk_problem(65536, 2048, 32)).path, TopkPath::kBitonic);
  EXPECT_EQ(plan_topk(topk_problem(65536, 2048, 32)).prefix_iters, 0);
  EXPECT_EQ(plan_topk(topk_problem(16, 4096, 300)).prefix_iters, 0);
  // run V's shapes on the queue kernel: 32 prefix iterations (fp32 and fp16 too), with the
  // sparse offer; k < 32 neither.
  expect_plan_names({{16384, 4096, 128, DType::kBFloat16, "queue-q128-p32-vec-w1r4-pre32-sp"},
                     {4096, 131072, 256, DType::kBFloat16, "queue-q256-p64-vec-w1r4-pre32-sp"},
                     {16384, 32768, 64, DType::kBFloat16, "queue-q64-p32-vec-w1r4-pre32-sp"},
                     {65536, 4096, 32, DType::kBFloat16, "queue-q32-p32-vec-w1r4-pre32-sp"},
                     {65536, 4096, 32, DType::kFloat16, "queue-q32-p32-vec-w1r4-pre32-sp"},
                     {65536, 4096, 32, DType::kFloat32, "queue-q32-p64-vec-w1r4-pre32-sp"},
                     {65536, 4096, 31, DType::kFloat32, "queue-q32-p64-vec-w1r4"}},
                    TopkPath::kQueue);
  // Several warps per row: each warp's slice clips the prefix (the kernel); the plan's count
  // is the same.
  const TopkPlan w = plan_topk(topk_problem(16, 32768, 64));
  EXPECT_GT(w.warps_per_row, 1);
  EXPECT_EQ(w.prefix_iters, 32);
}

TEST(TopkPlan, BitonicRule) {
  // The rule's constants and its edges: bf16 / fp16 with 16-byte rows, k ≤ 16 or N ≤ 2048;
  // past both, N in (2048, 4096) keeps the queue kernel and N ≥ 4096 takes the radix kernel
  // (a power of 2 too: run V's queue against the fit instance, run X's radix against both).
  EXPECT_EQ(detail::kTopkBitonicPlanMaxK, 16);
  EXPECT_EQ(detail::kTopkBitonicPlanMaxN, 2048);
  EXPECT_EQ(detail::kTopkBitonicPlanMaxNF32, 2048);
  EXPECT_EQ(detail::kTopkBitonicPlanMaxKF32, 16);
  EXPECT_EQ(detail::kTopkBitonicPlanMaxNF32Short, 512);
  EXPECT_EQ(detail::kTopkBitonicPlanMaxKF32Short, 32);
  struct S {
    int64_t M, N, k;
    DType x;
    bool vec;
    TopkPath path;
  };
  const S cases[] = {
      {65536, 1024, 8, DType::kBFloat16, true, TopkPath::kBitonic},
      {65536, 1024, 16, DType::kBFloat16, true, TopkPath::kBitonic},
      {65536, 2048, 16, DType::kFloat16, true, TopkPath::kBitonic},
      {65536, 2048, 8, DType::kBFloat16, true, TopkPath::kBitonic},
      {3, 7, 1, DType::kBFloat16, true, TopkPath::kBitonic},
      {65536, 1024, 17, DType::kBFloat16, true, TopkPath::kBitonic},  // k > 16, N ≤ 2048
      {65536, 2048, 32, DType::kBFloat16, true, TopkPath::kBitonic},
      {65536, 2056, 8, DType::kBFloat16, true, TopkPath::kBitonic},   // N > 2048, k ≤ 16
      {65536, 4096, 16, DType::kBFloat16, true, TopkPath::kBitonic},
      {65536, 2056, 17, DType::kBFloat16, true, TopkPath::kQueue},    // both past
      {65536, 4096, 32, DType::kBFloat16, true, TopkPath::kQueue},    // k ≥ 32: the sparse offer
      {65536, 4096, 31, DType::kBFloat16, true, TopkPath::kRadix},    // power of 2 too
      {65536, 4096, 17, DType::kFloat16, true, TopkPath::kRadix},
      {65536, 4096, 8, DType::kFloat16, true, TopkPath::kBitonic},   // k ≤ 16: fit
      {65536, 4088, 32, DType::kBFloat16, true, TopkPath::kQueue},
      {65536, 4104, 8, DType::kBFloat16, true, TopkPath::kRadix},     // the kernel's N range
      {65536, 4104, 8, DType::kFloat32, true, TopkPath::kQueue},
      {65536, 1024, 33, DType::kBFloat16, true, TopkPath::kQueue},    // the kernel's k range
      // fp32 x: N ≤ 2048, k ≤ 16 by its own constants (runs Z, AA), power-of-2 N or not;
      // fp32 never takes radix.
      {65536, 1024, 8, DType::kFloat32, true, TopkPath::kBitonic},
      {65536, 1024, 32, DType::kFloat32, true, TopkPath::kBitonic},  // k ≤ 32: fit (run AD)
      {65536, 1000, 32, DType::kFloat32, true, TopkPath::kQueue},    // not fit past 512
      {65536, 512, 32, DType::kFloat32, true, TopkPath::kBitonic},   // k ≤ 32 to 512 (AD)
      {65536, 500, 32, DType::kFloat32, true, TopkPath::kBitonic},   // generic to 512
      {65536, 256, 17, DType::kFloat32, true, TopkPath::kBitonic},
      {65536, 2048, 16, DType::kFloat32, true, TopkPath::kBitonic},  // fp32: N ≤ 2048 (run Z)
      {65536, 1000, 8, DType::kFloat32, true, TopkPath::kBitonic},   // generic rows (run AA)
      {65536, 1000, 16, DType::kFloat32, true, TopkPath::kBitonic},
      {65536, 1000, 17, DType::kFloat32, true, TopkPath::kQueue},    // fp32: k ≤ 16 past 512
      {65536, 2044, 8, DType::kFloat32, true, TopkPath::kBitonic},
      {65536, 2052, 8, DType::kFloat32, true, TopkPath::kQueue},     // fp32: N ≤ 2048
      {3, 7, 1, DType::kFloat32, true, TopkPath::kBitonic},
      {65536, 1000, 8, DType::kFloat32, false, TopkPath::kQueue},    // no 16-byte rows
      {65536, 512, 8, DType::kFloat32, true, TopkPath::kBitonic},
      {65536, 1024, 16, DType::kFloat32, true, TopkPath::kBitonic},
      {65536, 2048, 17, DType::kFloat32, true, TopkPath::kQueue},
      {65536, 4096, 8, DType::kFloat32, true, TopkPath::kQueue},     // fp32: N ≤ 2048
      {65536, 2048, 32, DType::kFloat32, true, TopkPath::kQueue},   // fp32: k ≤ 16
      {65536, 2056, 8, DType::kFloat32, true, TopkPath::kQueue},    // fp32: N ≤ 2048
      {65536, 4096, 16, DType::kFloat32, true, TopkPath::kQueue},
      {65536, 4096, 32, DType::kFloat32, true, TopkPath::kQueue},
      {65536, 4096, 17, DType::kFloat32, true, TopkPath::kQueue},
      {65536, 2056, 17, DType::kFloat32, true, TopkPath::kQueue},
      {65536, 1024, 33, DType::kFloat32, true, TopkPath::kQueue},
      {65536, 1024, 8, DType::kFloat32, false, TopkPath::kQueue},    // no 16-byte rows
      {16384, 4096, 128, DType::kFloat32, true, TopkPath::kQueue},
      {65536, 1024, 8, DType::kBFloat16, false, TopkPath::kQueue},   // no 16-byte rows
      {65536, 1000, 8, DType::kFloat16, false, TopkPath::kQueue},
  };
  for (const S& c : cases) {
    const TopkProblem pr = topk_problem(c.M, c.N, c.k, c.x, c.vec);
    const TopkPlan p = plan_topk(pr);
    EXPECT_EQ(p.path, c.path) << c.N << " " << c.k << " " << dtype_name(c.x) << " " << c.vec;
    if (p.path == TopkPath::kBitonic) {
      EXPECT_LE(p.elems, 128);  // 128 at N = 4096 (32 threads per row)
      EXPECT_EQ(p.threads, detail::kTopkBitonicThreads);
    }
  }
  // The measured shapes: the fit instance with 128 elements per thread from N = 1024 (8
  // threads per row at 1024), the plan's own geometry below; lists of 8 for k = 8.
  EXPECT_EQ(detail::kTopkBitonicFitMinN, 1024);
  EXPECT_EQ(detail::kTopkBitonicFitElems, 128);
  TopkProblem pr = topk_problem(65536, 1024, 8);
  char buf[96];
  EXPECT_STREQ(detail::topk_plan_name(plan_topk(pr), buf, sizeof(buf)), "bitonic-k8-e128-t8-fit");
  pr.N = 4096;
  EXPECT_STREQ(detail::topk_plan_name(plan_topk(pr), buf, sizeof(buf)),
               "bitonic-k8-e128-t32-fit");
  pr.k = 32;
  EXPECT_STREQ(detail::topk_plan_name(plan_topk(pr), buf, sizeof(buf)),
               "queue-q32-p32-vec-w1r4-pre32-sp");
  pr.N = 2048;
  EXPECT_STREQ(detail::topk_plan_name(plan_topk(pr), buf, sizeof(buf)),
               "bitonic-k32-e128-t16-fit");
  pr.N = 512;
  EXPECT_STREQ(detail::topk_plan_name(plan_topk(pr), buf, sizeof(buf)), "bitonic-k32-e64-t8-fit");
  pr.N = 1000;
  pr.k = 8;
  EXPECT_STREQ(detail::topk_plan_name(plan_topk(pr), buf, sizeof(buf)), "bitonic-k8-e64-t16");
  // fp32: the kernel's range N ≤ 2048 (E ≤ 64; lists of 32: E ≤ 32, N ≤ 1024); the plan
  // takes it at N ≤ 2048 with k ≤ 16 (runs Z3, AA): the fit instance at power-of-2 N, with the
  // kernel's largest E from N = 1024 (64), the generic one elsewhere (16 × 64 at N = 1000);
  // forcing it takes the rest of its range.
  EXPECT_EQ(detail::kTopkBitonicMaxNF32, 2048);
  EXPECT_EQ(detail::topk_bitonic_max_elems(4, 8), 64);
  EXPECT_EQ(detail::topk_bitonic_max_elems(4, 16), 64);
  EXPECT_EQ(detail::topk_bitonic_max_elems(4, 32), 32);
  EXPECT_EQ(detail::topk_bitonic_max_elems(2, 32), 128);
  // The fit instances: fp32 lists of 8 up to E = 128 (forced only), the rest as above.
  EXPECT_EQ(detail::topk_bitonic_max_fit_elems(4, 8), 128);
  EXPECT_EQ(detail::topk_bitonic_max_fit_elems(4, 16), 64);
  EXPECT_EQ(detail::topk_bitonic_max_fit_elems(4, 32), 32);
  EXPECT_EQ(detail::topk_bitonic_max_fit_elems(2, 8), 128);
  EXPECT_EQ(detail::topk_bitonic_max_fit_elems(2, 32), 128);
  // fp32 plans: (N, k, forced path, forced E, forced fit) → name. E = 128 is the fit instance
  // forced (T·E = N); forced without fit, or where T·E ≠ N, or with lists of 16, the plan's own
  // E; a forced E above the fp32 bound of lists of 32 also gives the plan's own.
  struct F {
    int64_t N, k;
    TopkPath path;
    int elems;
    bool fit;
    const char* name;
  };
  const TopkPath kAuto = TopkPath::kNone, kBit = TopkPath::kBitonic, kQ = TopkPath::kQueue;
  const F f32_plans[] = {
      {1024, 8, kAuto, 0, false, "bitonic-k8-e64-t16-fit"},
      {1024, 8, kBit, 128, true, "bitonic-k8-e128-t8-fit"},
      {1024, 8, kBit, 128, false, "bitonic-k8-e64-t16"},
      {1000, 8, kBit, 128, true, "bitonic-k8-e64-t16"},
      {2048, 8, kBit, 128, true, "bitonic-k8-e128-t16-fit"},
      {2048, 16, kBit, 128, true, "bitonic-k16-e64-t32-fit"},
      {2048, 8, kAuto, 0, false, "bitonic-k8-e64-t32-fit-flt"},
      {2048, 8, kBit, 0, false, "bitonic-k8-e64-t32"},  // forced without fit: the generic one
      {4096, 8, kAuto, 0, false, "queue-q32-p64-vec-w1r4"},
      {4096, 32, kAuto, 0, false, "queue-q32-p64-vec-w1r4-pre32-sp"},
      {1024, 32, kAuto, 0, false, "bitonic-k32-e32-t32-fit"},  // run AD
      {1000, 32, kAuto, 0, false, "queue-q32-p64-vec-w1r4-pre32-sp"},
      {512, 32, kAuto, 0, false, "bitonic-k32-e32-t16-fit"},
      {256, 32, kAuto, 0, false, "bitonic-k32-e32-t8-fit"},
      {1024, 32, kBit, 64, false, "bitonic-k32-e32-t32"},
      {512, 8, kAuto, 0, false, "bitonic-k8-e64-t8-fit"},
      {512, 16, kAuto, 0, false, "bitonic-k16-e64-t8-fit"},
      {1024, 16, kAuto, 0, false, "bitonic-k16-e64-t16-fit"},
      {1000, 8, kAuto, 0, false, "bitonic-k8-e64-t16"},  // generic rows (run AA)
      {1000, 16, kAuto, 0, false, "bitonic-k16-e64-t16"},
      {2040, 16, kAuto, 0, false, "bitonic-k16-e64-t32"},
      {100, 8, kAuto, 0, false, "bitonic-k8-e64-t2"},
      {1000, 17, kAuto, 0, false, "queue-q32-p64-vec-w1r4"},
      {1000, 8, kQ, 0, false, "queue-q32-p64-vec-w1r4"},
      {1024, 8, kQ, 0, false, "queue-q32-p64-vec-w1r4"},
  };
  for (const F& f : f32_plans) {
    const TopkProblem pf = topk_problem(65536, f.N, f.k, DType::kFloat32);
    EXPECT_STREQ(detail::topk_plan_name(plan_topk(pf, 0, f.path, f.elems, f.fit), buf, sizeof(buf)),
                 f.name)
        << f.N << " " << f.k;
  }
  // The candidate filter (fp32, lists of 8, E = 64, fit): planned at T = 32 (N = 2048) for
  // k ≤ 8, forced on (forced_filter 1) from T = 16 (N = 1024); forced_filter 0 gives the same
  // plan without it; nowhere else.
  EXPECT_TRUE(detail::topk_bitonic_filter_instance(4, 8, 64, true));
  EXPECT_FALSE(detail::topk_bitonic_filter_instance(2, 8, 64, true));
  EXPECT_FALSE(detail::topk_bitonic_filter_instance(4, 8, 64, false));
  EXPECT_FALSE(detail::topk_bitonic_filter_instance(4, 16, 64, true));
  EXPECT_FALSE(detail::topk_bitonic_filter_instance(4, 8, 128, true));
  {
    const TopkProblem pf = topk_problem(65536, 1024, 8, DType::kFloat32);
    const TopkPlan on = plan_topk(pf, 0, kAuto, 0, false, -1, 1), off = plan_topk(pf, 0, kAuto, 0, false, -1, 0);
    EXPECT_TRUE(on.filter);
    EXPECT_FALSE(plan_topk(pf).filter);  // the rule: T = 16 keeps the networks
    EXPECT_TRUE(plan_topk(topk_problem(65536, 2048, 8, DType::kFloat32)).filter);
    EXPECT_FALSE(off.filter);
    EXPECT_STREQ(detail::topk_plan_name(off, buf, sizeof(buf)), "bitonic-k8-e64-t16-fit");
    EXPECT_EQ(off.elems, on.elems);
    EXPECT_EQ(off.threads_per_row, on.threads_per_row);
    EXPECT_FALSE(plan_topk(pf, 0, kBit, 64, true).filter);
    EXPECT_TRUE(plan_topk(pf, 0, kBit, 64, true, -1, 1).filter);
    EXPECT_FALSE(plan_topk(pf, 0, kBit, 64, false).filter);  // the generic instance
    EXPECT_FALSE(plan_topk(topk_problem(65536, 1024, 8, DType::kBFloat16)).filter);
    EXPECT_FALSE(plan_topk(topk_problem(65536, 512, 8, DType::kFloat32)).filter);  // T = 8
    EXPECT_FALSE(plan_topk(topk_problem(65536, 1024, 16, DType::kFloat32)).filter);
    EXPECT_FALSE(plan_topk(topk_problem(65536, 1000, 8, DType::kFloat32)).filter);
    EXPECT_TRUE(plan_topk(topk_problem(65536, 2048, 1, DType::kFloat32)).filter);
  }
  pr.N = 1024;
  // Forcing the queue kernel (tests, quack-bench --path queue / --config all) still works.
  EXPECT_STREQ(detail::topk_plan_name(plan_topk(pr, 0, TopkPath::kQueue), buf, sizeof(buf)),
               "queue-q32-p32-vec-w1r4");
  EXPECT_STREQ(detail::topk_plan_name(plan_topk(pr, 1), buf, sizeof(buf)),
               "queue-q32-p32-vec-w1r4");
}

TEST(TopkPlan, BitonicForced) {
  using detail::TopkPath;
  int checked = 0;
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
    for (int64_t n : {1, 7, 8, 64, 100, 1000, 1024, 2048, 4088, 4096, 4104})
      for (int64_t k : {1, 5, 8, 9, 16, 32, 33})
        for (bool vec : {true, false})
          for (int e : {0, 16, 32, 64, 128}) {
            if (k > n) continue;
            const TopkProblem pr = topk_problem(1000, n, k, t, vec);
            // 16-bit x: N ≤ 4096; fp32: N ≤ 2048, ≤ 1024 for lists of 32 (k > 16).
            const int64_t max_n = dtype_size(t) == 2 ? 4096 : k > 16 ? 1024 : 2048;
            const bool ok = vec && n <= max_n && k <= 32;
            EXPECT_EQ(detail::topk_bitonic_ok(pr), ok);
            const detail::TopkPlan p = detail::plan_topk(pr, 0, TopkPath::kBitonic, e);
            // Unforced: the rule (16-bit x, 16-byte rows, k ≤ 16 or N ≤ 2048; fp32: N ≤ 2048,
            // k ≤ 16, or k ≤ 32 at N ≤ 512, or N = 1024 fit; a power of 2 alone does not plan
            // 16-bit x), else the queue kernel; forcing the queue kernel or its warps per row
            // never gives bitonic.
            const bool pow2 = n >= 16 && (n & (n - 1)) == 0;
            EXPECT_EQ(detail::topk_bitonic_fits(pr), ok && pow2);
            const bool planned =
                ok && (dtype_size(t) == 2
                           ? k <= 16 || n <= 2048
                           : (n <= 2048 && k <= 16) || (k <= 32 && (n <= 512 || (n == 1024 && pow2))));
            EXPECT_EQ(detail::topk_bitonic_planned(pr), planned);
            EXPECT_EQ(detail::plan_topk(pr).path,
                      planned                            ? TopkPath::kBitonic
                      : detail::topk_radix_planned(pr) ? TopkPath::kRadix
                                                         : TopkPath::kQueue);
            EXPECT_EQ(detail::plan_topk(pr, 0, TopkPath::kQueue).path, TopkPath::kQueue);
            EXPECT_EQ(detail::plan_topk(pr, 1).path, TopkPath::kQueue);
            if (planned) {
              const detail::TopkPlan d = detail::plan_topk(pr);
              const detail::TopkPlan f = detail::plan_topk(pr, 0, TopkPath::kBitonic);
              EXPECT_EQ(d.list, f.list);
              EXPECT_EQ(d.fit, pow2);
              if (pow2) {  // planned power-of-2 rows run the fit instance: E = 128 from N =
                           // 1024 (fp32: 64, 128 at N = 4096), else the forced plan's E
                EXPECT_EQ(static_cast<int64_t>(d.threads_per_row) * d.elems, n);
                const int fit_e = dtype_size(t) == 2 ? 128 : k > 16 ? 32 : 64;
                EXPECT_EQ(d.elems, n >= 1024 ? fit_e : f.elems);
              } else {
                EXPECT_EQ(d.elems, f.elems);
                EXPECT_EQ(d.threads_per_row, f.threads_per_row);
              }
              EXPECT_LE(d.elems, 128) << "the measured class: ≤ 128 elements per thread";
              EXPECT_LE(d.list, 32);  // lists of 32 for k in (16, 32] at N ≤ 2048
            }
            if (!ok) {
              EXPECT_NE(p.path, TopkPath::kBitonic);
              continue;
            }
            ++checked;
            ASSERT_EQ(p.path, TopkPath::kBitonic);
            EXPECT_TRUE(p.list == 8 || p.list == 16 || p.list == 32);
            EXPECT_GE(p.list, k);
            EXPECT_TRUE(p.elems == 16 || p.elems == 32 || p.elems == 64 || p.elems == 128)
                << p.elems;
            EXPECT_GE(p.elems, p.list);
            EXPECT_GE(p.threads_per_row, 1);
            EXPECT_LE(p.threads_per_row, 32);
            EXPECT_EQ(p.threads_per_row & (p.threads_per_row - 1), 0);
            EXPECT_GE(static_cast<int64_t>(p.threads_per_row) * p.elems, n);
            EXPECT_EQ(p.threads, detail::kTopkBitonicThreads);
            EXPECT_EQ(p.rows_per_cta * p.threads_per_row, detail::kTopkBitonicThreads);
            EXPECT_EQ(p.grid, (pr.M + p.rows_per_cta - 1) / p.rows_per_cta);
            EXPECT_EQ(p.packed_bits, 32);
            EXPECT_LE(p.elems, detail::topk_bitonic_max_elems(dtype_size(t), p.list));
            if (e >= p.list && e >= 16 && 32 * e >= n &&
                e <= detail::topk_bitonic_max_elems(dtype_size(t), p.list)) {
              EXPECT_EQ(p.elems, e);
            }
          }
  EXPECT_GT(checked, 100);
  // The issue's shapes: QuACK's geometry (16 threads × 64 at 1024, 32 × 128 at 4096).
  TopkProblem pr = topk_problem(65536, 1024, 8);
  detail::TopkPlan p = detail::plan_topk(pr, 0, TopkPath::kBitonic);
  EXPECT_EQ(p.threads_per_row, 16);
  EXPECT_EQ(p.elems, 64);
  pr.N = 4096;
  pr.k = 32;
  p = detail::plan_topk(pr, 0, TopkPath::kBitonic);
  EXPECT_EQ(p.threads_per_row, 32);
  EXPECT_EQ(p.elems, 128);
  char buf[96];
  EXPECT_STREQ(detail::topk_plan_name(p, buf, sizeof(buf)), "bitonic-k32-e128-t32");
}

TEST(TopkPlan, BitonicFitForced) {
  // forced_fit sets `fit` exactly where the bitonic plan has T·E = N (the kernel then loads no
  // partial vector and masks no column); otherwise the plan is unchanged. Unforced, fit is the
  // planned power-of-2 rows' (BitonicForced, BitonicRule).
  using detail::TopkPath;
  int fits = 0, fits_only = 0;
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
    for (int64_t n : {8, 16, 64, 100, 512, 1000, 1024, 2048, 4088, 4096})
      for (int64_t k : {1, 8, 9, 16, 32})
        for (int e : {0, 16, 32, 64, 128}) {
          if (k > n) continue;
          const TopkProblem pr = topk_problem(1000, n, k, t);
          const detail::TopkPlan base = detail::plan_topk(pr, 0, TopkPath::kBitonic, e);
          const detail::TopkPlan fit = detail::plan_topk(pr, 0, TopkPath::kBitonic, e, true);
          EXPECT_FALSE(base.fit);
          EXPECT_EQ(detail::plan_topk(pr).fit,
                    detail::topk_bitonic_planned(pr) && detail::topk_bitonic_fits(pr));
          EXPECT_FALSE(detail::plan_topk(pr, 0, TopkPath::kQueue, e, true).fit);
          EXPECT_EQ(fit.path, base.path);
          EXPECT_EQ(fit.list, base.list);
          // An E above topk_bitonic_max_elems (fp32, lists of 8: 128) only forced with fit,
          // where T·E = N: then the fit-only instance, else the plan without it.
          const int elt = dtype_size(t);
          int64_t te = 1;
          while (te < 32 && te * e < n) te *= 2;
          const bool fit_only = base.path == TopkPath::kBitonic && e >= base.list && e >= 16 &&
                                32 * static_cast<int64_t>(e) >= n &&
                                e > detail::topk_bitonic_max_elems(elt, base.list) &&
                                e <= detail::topk_bitonic_max_fit_elems(elt, base.list) &&
                                te * e == n;
          if (fit_only) {
            EXPECT_EQ(fit.elems, e);
            EXPECT_EQ(fit.threads_per_row, te);
            EXPECT_EQ(fit.rows_per_cta * fit.threads_per_row, detail::kTopkBitonicThreads);
            EXPECT_EQ(fit.grid, (pr.M + fit.rows_per_cta - 1) / fit.rows_per_cta);
            EXPECT_TRUE(fit.fit) << "N " << n << " k " << k << " E " << e;
            ++fits_only;
            ++fits;
            continue;
          }
          EXPECT_EQ(fit.elems, base.elems);
          EXPECT_EQ(fit.threads_per_row, base.threads_per_row);
          EXPECT_EQ(fit.grid, base.grid);
          EXPECT_LE(fit.elems, detail::topk_bitonic_max_elems(elt, fit.list));
          const bool expect = base.path == TopkPath::kBitonic &&
                              static_cast<int64_t>(base.threads_per_row) * base.elems == n;
          EXPECT_EQ(fit.fit, expect) << "N " << n << " k " << k << " E " << e;
          fits += fit.fit;
        }
  EXPECT_GT(fits, 40);
  // fp32, k ≤ 8 (lists of 8), E = 128 at N = 512, 1024, 2048 (T = 4, 8, 16).
  EXPECT_EQ(fits_only, 3 * 2);
  // The issue's shapes all fit: 16 × 64 at N = 1024, 32 × 64 at 2048, 32 × 128 at 4096.
  TopkProblem pr = topk_problem(65536, 0, 0);
  char buf[96];
  const struct { int64_t n, k; const char* name; } issue[] = {
      {1024, 8, "bitonic-k8-e64-t16-fit"},
      {2048, 8, "bitonic-k8-e64-t32-fit"},
      {4096, 8, "bitonic-k8-e128-t32-fit"},
      {4096, 32, "bitonic-k32-e128-t32-fit"}};
  for (const auto& s : issue) {
    pr.N = s.n;
    pr.k = s.k;
    EXPECT_STREQ(detail::topk_plan_name(detail::plan_topk(pr, 0, TopkPath::kBitonic, 0, true),
                                        buf, sizeof(buf)),
                 s.name);
  }
}

TEST(TopkPlan, RadixPlanned) {
  // Unforced, 16-bit rows from N = 4096 outside the bitonic class take the radix kernel, but at
  // N ≤ 4096 with k ≥ 32 (the queue's sparse offer); fp32, shorter rows, the bitonic class and
  // any forced queue setting keep their kernels.
  using detail::TopkPath;
  EXPECT_EQ(detail::kTopkRadixPlanMinN, 4096);
  EXPECT_EQ(detail::kTopkSparseOverRadixMaxN, 4096);
  expect_plan_names({{16384, 4096, 128, DType::kBFloat16, "queue-q128-p32-vec-w1r4-pre32-sp"},
                     {65536, 4096, 32, DType::kBFloat16, "queue-q32-p32-vec-w1r4-pre32-sp"},
                     {65536, 4096, 31, DType::kBFloat16, "radix-e16-t256"},
                     {16384, 4096, 17, DType::kFloat16, "radix-e16-t256"},
                     {16384, 8192, 64, DType::kBFloat16, "radix-e16-t512"},
                     {16384, 8192, 256, DType::kBFloat16, "radix-e16-t512"},
                     {16384, 6000, 8, DType::kBFloat16, "radix-e16-t384"},
                     {16384, 4096, 16, DType::kBFloat16, "bitonic-k16-e128-t32-fit"},
                     {65536, 2048, 16, DType::kBFloat16, "bitonic-k16-e128-t16-fit"},
                     {65536, 4096, 32, DType::kFloat32, "queue-q32-p64-vec-w1r4-pre32-sp"},
                     {16384, 8193, 64, DType::kBFloat16, "queue-q64-p32-vec-w1r4-pre32-sp"}});
  const TopkProblem pr = topk_problem(16384, 4096, 128, DType::kBFloat16);
  EXPECT_EQ(plan_topk(pr, 0, TopkPath::kQueue).path, TopkPath::kQueue);
  EXPECT_EQ(plan_topk(pr, 2).path, TopkPath::kQueue) << "forced warps: the queue kernel";
  EXPECT_EQ(plan_topk(pr, 0, TopkPath::kNone, 0, false, 0).path, TopkPath::kQueue)
      << "a forced prefix: the queue kernel";
  EXPECT_EQ(plan_topk(topk_problem(16384, 4096, 17), 0, TopkPath::kNone, 8).elems, 8) << "forced E";
  TopkProblem rows = pr;
  rows.vec_ok = false;
  EXPECT_EQ(plan_topk(rows).path, TopkPath::kQueue) << "no 16-byte rows: the element path";
}

TEST(TopkPlan, RadixForced) {
  // The radix kernel forced (plan_topk's forced_path kRadix), where topk_radix_ok (16-byte
  // rows, N ≤ 8192 for 16-bit x and ≤ 4096 for fp32, k ≤ 256); elsewhere the plan's own. E =
  // 16 unless forced to 8, 16 or 32 with 512·E ≥ N; T = 32·⌈N / (32·E)⌉ ≥ 32; one row per CTA.
  using detail::TopkPath;
  EXPECT_EQ(detail::kTopkRadixMaxN16, 8192);
  EXPECT_EQ(detail::kTopkRadixMaxN32, 4096);
  EXPECT_EQ(detail::kTopkRadixMaxK, 256);
  EXPECT_EQ(detail::kTopkRadixMaxThreads, 512);
  EXPECT_EQ(detail::kTopkRadixElems, 16);
  int checked = 0;
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
    for (int64_t n : {1, 7, 8, 100, 1000, 1024, 4095, 4096, 4097, 4104, 8191, 8192, 8193, 65536})
      for (int64_t k : {1, 8, 32, 100, 128, 255, 256, 257})
        for (bool vec : {true, false})
          for (int e : {0, 4, 8, 16, 24, 32, 64}) {
            if (k > n) continue;
            const TopkProblem pr = topk_problem(3000, n, k, t, vec);
            SCOPED_TRACE("N=" + std::to_string(n) + " k=" + std::to_string(k) + " " +
                         dtype_name(t) + (vec ? " vec" : "") + " E=" + std::to_string(e));
            const bool ok = vec && k <= 256 && n <= (dtype_size(t) == 2 ? 8192 : 4096);
            EXPECT_EQ(detail::topk_radix_ok(pr), ok);
            const bool planned = ok && dtype_size(t) == 2 && n >= 4096 &&
                                 !detail::topk_bitonic_planned(pr) && !(n <= 4096 && k >= 32);
            EXPECT_EQ(detail::topk_radix_planned(pr), planned);
            EXPECT_EQ(plan_topk(pr).path == TopkPath::kRadix, planned);
            const TopkPlan p = plan_topk(pr, 0, TopkPath::kRadix, e);
            if (!ok) {
              const TopkPlan own = plan_topk(pr, 0, TopkPath::kNone, e);
              EXPECT_EQ(p.path, own.path);
              EXPECT_NE(p.path, TopkPath::kRadix);
              continue;
            }
            ++checked;
            ASSERT_EQ(p.path, TopkPath::kRadix);
            const bool e_ok = (e == 8 || e == 16 || e == 32) && 512 * e >= n;
            EXPECT_EQ(p.elems, e_ok ? e : 16);
            EXPECT_EQ(p.threads, p.threads_per_row);
            EXPECT_EQ(p.threads % 32, 0);
            EXPECT_GE(p.threads, 32);
            EXPECT_LE(p.threads, detail::kTopkRadixMaxThreads);
            EXPECT_GE(static_cast<int64_t>(p.threads) * p.elems, n) << "the threads cover the row";
            EXPECT_TRUE(p.threads == 32 || static_cast<int64_t>(p.threads - 32) * p.elems < n)
                << "the fewest warps that cover it";
            EXPECT_EQ(p.rows_per_cta, 1);
            EXPECT_EQ(p.grid, pr.M);
            EXPECT_TRUE(p.vec_io);
            EXPECT_EQ(p.packed_bits, dtype_size(t) == 2 ? 32 : 64);
            EXPECT_FALSE(p.fit);
            EXPECT_EQ(p.prefix_iters, 0);
            EXPECT_EQ(p.smem, detail::topk_radix_smem_layout(n, p.packed_bits / 8, p.threads / 32)
                                  .total);
            EXPECT_LE(p.smem, 48u * 1024) << "no opt-in shared memory";
          }
  EXPECT_GT(checked, 300);
  // M = 0 or k = 0: nothing to launch, forced or not.
  EXPECT_EQ(plan_topk(topk_problem(0, 4096, 8), 0, TopkPath::kRadix).path, TopkPath::kNone);
  TopkProblem z = topk_problem(8, 4096, 8);
  z.k = 0;
  EXPECT_EQ(plan_topk(z, 0, TopkPath::kRadix).path, TopkPath::kNone);
  // The issue's shapes (the lead's quack-bench --path radix) and their names.
  char buf[96];
  const struct { int64_t M, N, k; DType x; int e; const char* name; } shapes[] = {
      {16384, 4096, 128, DType::kBFloat16, 0, "radix-e16-t256"},
      {65536, 4096, 32, DType::kBFloat16, 0, "radix-e16-t256"},
      {65536, 4096, 32, DType::kFloat32, 0, "radix-e16-t256"},
      {65536, 1024, 8, DType::kBFloat16, 0, "radix-e16-t64"},
      {65536, 1024, 8, DType::kFloat32, 0, "radix-e16-t64"},
      {65536, 1024, 8, DType::kBFloat16, 8, "radix-e8-t128"},
      {65536, 4096, 32, DType::kBFloat16, 32, "radix-e32-t128"},
      {100, 8192, 256, DType::kFloat16, 8, "radix-e16-t512"},  // 512·8 < N: the plan's E
      {100, 4104, 64, DType::kBFloat16, 0, "radix-e16-t288"},
      {100, 7, 1, DType::kFloat32, 0, "radix-e16-t32"}};
  for (const auto& s : shapes)
    EXPECT_STREQ(detail::topk_plan_name(plan_topk(topk_problem(s.M, s.N, s.k, s.x), 0,
                                                  TopkPath::kRadix, s.e),
                                        buf, sizeof(buf)),
                 s.name)
        << s.N << " " << s.k << " " << dtype_name(s.x);
}

TEST(TopkPlan, RadixSharedMemoryLayout) {
  // Histograms (2 × 256 counts: also the fallback's ≤ 256 selected 8-byte entries), 16 counter
  // words, per-warp (max, sum), the list of N entries; 16-byte aligned pieces.
  const auto a = detail::topk_radix_smem_layout(4096, 4, 8);
  EXPECT_EQ(a.hist, 0u);
  EXPECT_EQ(a.misc, 2048u);
  EXPECT_GE(a.misc - a.hist, 256u * 8);
  EXPECT_EQ(a.stats, a.misc + 64);
  EXPECT_EQ(a.list, a.stats + 64);
  EXPECT_EQ(a.total, a.list + 4096u * 4);
  const auto b = detail::topk_radix_smem_layout(4095, 8, 16);
  EXPECT_EQ(b.list, b.stats + 128);
  EXPECT_EQ(b.total, b.list + 4096u * 8);
  const auto c = detail::topk_radix_smem_layout(7, 4, 1);
  EXPECT_EQ(c.list % 16, 0u);
  EXPECT_EQ(c.total, c.list + 32);
  EXPECT_EQ(detail::topk_radix_smem_layout(8192, 4, 16).total, 2048u + 64 + 128 + 8192 * 4);
}

/// Every 0/1 input of n ≤ 16 keys (and random inputs of 32) comes out sorted (0-1 principle).
template <int N>
void check_network() {
  uint64_t state = 12345;
  const int64_t trials = N <= 16 ? (int64_t{1} << N) : 200000;
  for (int64_t m = 0; m < trials; ++m) {
    for (bool asc : {true, false}) {
      uint32_t v[N];
      for (int i = 0; i < N; ++i) {
        if (N <= 16) {
          v[i] = static_cast<uint32_t>((m >> i) & 1);
        } else {
          state = state * 6364136223846793005ull + 1442695040888963407ull;
          v[i] = static_cast<uint32_t>(state >> 59);  // few distinct keys: ties
        }
      }
      if (asc) detail::TopkNetwork<N>::template sort<true>(v);
      else detail::TopkNetwork<N>::template sort<false>(v);
      for (int i = 0; i + 1 < N; ++i)
        ASSERT_TRUE(asc ? v[i] <= v[i + 1] : v[i] >= v[i + 1]) << "n " << N << " input " << m;
    }
  }
}

TEST(TopkNetworks, SortEveryInput) {
  check_network<8>();
  check_network<16>();
  check_network<32>();
}

// TopkBest8Of16: for every 0/1 input of 16 keys, the best 8 come out sorted where the kernel
// reads them (v[8..15] ascending; v[0..7] descending), as many ones as the input's best 8 hold
// (0-1 principle: a network that selects and sorts every 0/1 input does so for every input).
TEST(TopkNetworks, Best8Of16EveryInput) {
  for (int m = 0; m < (1 << 16); ++m) {
    const int ones = __builtin_popcount(static_cast<unsigned>(m));
    const int best_ones = ones < 8 ? ones : 8;
    for (bool asc : {true, false}) {
      uint32_t v[16];
      for (int i = 0; i < 16; ++i) v[i] = static_cast<uint32_t>((m >> i) & 1);
      if (asc) detail::TopkBest8Of16::select<true>(v);
      else detail::TopkBest8Of16::select<false>(v);
      // The 8 outputs, best first: a run of best_ones ones, then zeros.
      for (int i = 0; i < 8; ++i) {
        const uint32_t got = asc ? v[15 - i] : v[i];
        ASSERT_EQ(got, i < best_ones ? 1u : 0u) << "input " << m << (asc ? " asc" : " desc");
      }
    }
  }
}

TEST(TopkPlan, SharedMemoryLayout) {
  // One warp per row: only the buffers; W > 1 adds the queues and (max, sum) pairs.
  const auto a = detail::topk_smem_layout(1, 4, 8, 8);
  EXPECT_EQ(a.total, 4u * 64 * 8);
  const auto b = detail::topk_smem_layout(16, 1, 8, 8);
  EXPECT_EQ(b.exchange, 16u * 64 * 8);
  EXPECT_EQ(b.stats, b.exchange + 16u * 256 * 8);
  EXPECT_EQ(b.total, b.stats + 16u * 8);
  EXPECT_EQ(b.exchange % 8, 0u);
}

// ------------------------------------------------------------------ the reference on hand values

using test::topk_reference;
using test::TopkRefSoftmax;

TEST(TopkReference, OrderTiesNanAndZeros) {
  const double nan = NAN, inf = INFINITY;
  // Row: 3 at columns 1 and 4 (tie), NaN at 2 and 6, +0 at 3, −0 at 5, −inf at 0.
  const std::vector<double> x = {-inf, 3.0, nan, 0.0, 3.0, -0.0, nan, -1.0};
  const auto big = topk_reference(x, 1, 8, 8, true);
  EXPECT_EQ(big.indices, (std::vector<int64_t>{2, 6, 1, 4, 3, 5, 7, 0}));
  EXPECT_FALSE(std::signbit(big.values[4]));
  EXPECT_TRUE(std::signbit(big.values[5]));
  const auto small = topk_reference(x, 1, 8, 8, false);
  EXPECT_EQ(small.indices, (std::vector<int64_t>{0, 7, 5, 3, 1, 4, 2, 6}));
  const auto top3 = topk_reference(x, 1, 8, 3, true);
  EXPECT_EQ(top3.indices, (std::vector<int64_t>{2, 6, 1}));
}

TEST(TopkReference, Softmax) {
  const std::vector<double> x = {1.0, 3.0, 2.0, 0.0};
  const auto sel = topk_reference(x, 1, 4, 2, true, TopkRefSoftmax::kSelected);
  const double z = std::exp(0.0) + std::exp(-1.0);
  EXPECT_NEAR(sel.values[0], 1.0 / z, 1e-15);
  EXPECT_NEAR(sel.values[1], std::exp(-1.0) / z, 1e-15);
  const auto row = topk_reference(x, 1, 4, 2, true, TopkRefSoftmax::kRow);
  const double lse = std::log(std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + 1.0);
  EXPECT_NEAR(row.lse[0], lse, 1e-14);
  EXPECT_NEAR(row.values[0], std::exp(3.0 - lse), 1e-15);
  // A NaN among the selected makes them NaN; all −inf gives NaN (as torch.softmax).
  const auto nan_row = topk_reference({NAN, 1.0}, 1, 2, 2, true, TopkRefSoftmax::kSelected);
  EXPECT_TRUE(std::isnan(nan_row.values[0]) && std::isnan(nan_row.values[1]));
  const auto ninf = topk_reference({-INFINITY, -INFINITY}, 1, 2, 1, true, TopkRefSoftmax::kRow);
  EXPECT_TRUE(std::isnan(ninf.values[0]));
  EXPECT_EQ(ninf.lse[0], -INFINITY);
}

TEST(TopkReference, Backward) {
  // kSelected: dx = p (dv − Σ p dv) at the selected columns.
  const std::vector<double> dv = {1.0, 2.0};
  const std::vector<int64_t> idx = {2, 0};
  const std::vector<double> p = {0.25, 0.75};
  const auto dx = test::topk_bwd_reference(dv, idx, p, {}, {}, 1, 3, 2, TopkRefSoftmax::kSelected);
  const double s = 0.25 * 1.0 + 0.75 * 2.0;
  EXPECT_DOUBLE_EQ(dx[2], 0.25 * (1.0 - s));
  EXPECT_DOUBLE_EQ(dx[0], 0.75 * (2.0 - s));
  EXPECT_DOUBLE_EQ(dx[1], 0.0);
  // kRow: every column gets y (g − s).
  const std::vector<double> x = {0.0, 1.0, 2.0};
  const double lse = std::log(1.0 + std::exp(1.0) + std::exp(2.0));
  const auto dr = test::topk_bwd_reference({3.0}, {2}, {}, x, {lse}, 1, 3, 1, TopkRefSoftmax::kRow);
  const double y2 = std::exp(2.0 - lse), sr = y2 * 3.0;
  EXPECT_NEAR(dr[2], y2 * (3.0 - sr), 1e-15);
  EXPECT_NEAR(dr[0], -std::exp(0.0 - lse) * sr, 1e-15);
}

}  // namespace
}  // namespace quack
