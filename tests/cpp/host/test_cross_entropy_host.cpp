// Tier 1 (no GPU): every validation path of cross_entropy_fwd / cross_entropy_bwd /
// cross_entropy_scale_grad throws quack::InvalidArgument naming the function and the argument
// before any CUDA call; valid arguments reach CUDA, which is hidden here
// (CUDA_VISIBLE_DEVICES="", as in test_validation.cpp), and report "no CUDA driver/GPU"; the
// workspace size; the plan the training shapes take; the float64 reference on hand values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cross_entropy/cross_entropy_internal.h"
#include "cross_entropy/cross_entropy_params.h"
#include "host_test_util.h"
#include "quack/cross_entropy.h"
#include "quack/errors.h"
#include "reference/cross_entropy_ref.h"
#include "row/row_plan.h"

namespace quack {
namespace {

using namespace test;

constexpr int64_t M = 8, V = 4096;

CrossEntropyFwdArgs fwd_args(Reduction red = Reduction::kMean) {
  CrossEntropyFwdArgs a;
  a.x = TensorRef::matrix(fake(1), DType::kBFloat16, M, V);
  a.target = TensorRef::vector(fake(2), DType::kInt64, M);
  a.loss = TensorRef::vector(fake(3), DType::kFloat32, red == Reduction::kNone ? M : 1);
  a.reduction = red;
  a.workspace = fake(9);
  a.workspace_bytes = cross_entropy_fwd_workspace_size(a);
  return a;
}

CrossEntropyBwdArgs bwd_args() {
  CrossEntropyBwdArgs a;
  a.x = TensorRef::matrix(fake(1), DType::kBFloat16, M, V);
  a.target = TensorRef::vector(fake(2), DType::kInt32, M);
  a.lse = TensorRef::vector(fake(3), DType::kFloat32, M);
  a.dloss = TensorRef::vector(fake(4), DType::kFloat32, M);
  a.dx = TensorRef::matrix(fake(5), DType::kBFloat16, M, V);
  return a;
}

void expect_fwd_invalid(const CrossEntropyFwdArgs& a, const std::vector<std::string>& parts) {
  expect_invalid([&] { cross_entropy_fwd(a, nullptr); }, "cross_entropy_fwd", parts);
}
void expect_bwd_invalid(const CrossEntropyBwdArgs& a, const std::vector<std::string>& parts) {
  expect_invalid([&] { cross_entropy_bwd(a, nullptr); }, "cross_entropy_bwd", parts);
}

TEST(CrossEntropyValidation, Baseline) {
  ASSERT_TRUE(kCudaHidden);
  for (Reduction red : {Reduction::kNone, Reduction::kSum, Reduction::kMean})
    expect_reaches_cuda([&] { cross_entropy_fwd(fwd_args(red), nullptr); }, "fwd");
  CrossEntropyFwdArgs a = fwd_args();
  a.dx = a.x;  // in place
  a.lse = TensorRef::vector(fake(4), DType::kFloat32, M);
  a.z_loss = TensorRef::vector(fake(5), DType::kFloat32, 1);
  a.weight = TensorRef::vector(fake(6), DType::kFloat32, V);
  a.label_smoothing = 0.1f;
  a.z_loss_scale = 1e-4f;
  a.logit_softcap = 30.f;
  a.workspace_bytes = cross_entropy_fwd_workspace_size(a);
  expect_reaches_cuda([&] { cross_entropy_fwd(a, nullptr); }, "fwd, every option");
  a = fwd_args();
  a.lse_partial = TensorRef::matrix(fake(7), DType::kFloat32, M, 32);
  expect_reaches_cuda([&] { cross_entropy_fwd(a, nullptr); }, "fwd, lse_partial");
  a.target_logit = TensorRef::vector(fake(8), DType::kFloat32, M);
  a.x = TensorRef();
  a.num_classes = V;
  expect_reaches_cuda([&] { cross_entropy_fwd(a, nullptr); }, "fwd, no x");
  expect_reaches_cuda([] { cross_entropy_bwd(bwd_args(), nullptr); }, "bwd");
  CrossEntropyBwdArgs b = bwd_args();
  b.dloss = TensorRef::vector(fake(4), DType::kFloat32, 1);  // one value for every row
  expect_reaches_cuda([&] { cross_entropy_bwd(b, nullptr); }, "bwd, scalar dloss");
  b.dloss = TensorRef::vector(fake(4), DType::kFloat32, M, 0, 0);  // stride 0
  expect_reaches_cuda([&] { cross_entropy_bwd(b, nullptr); }, "bwd, stride-0 dloss");
  CrossEntropyScaleGradArgs s;
  s.dx = TensorRef::matrix(fake(1), DType::kBFloat16, M, V);
  s.grad_output = TensorRef::vector(fake(2), DType::kFloat32, 1);
  expect_reaches_cuda([&] { cross_entropy_scale_grad(s, nullptr); }, "scale_grad");
}

TEST(CrossEntropyValidation, EmptyInputsReturnWithoutCuda) {
  CrossEntropyFwdArgs a;
  a.x = TensorRef::matrix(nullptr, DType::kFloat32, 0, 4096);
  a.target = TensorRef::vector(nullptr, DType::kInt64, 0);
  a.loss = TensorRef::vector(nullptr, DType::kFloat32, 0);
  a.reduction = Reduction::kNone;
  EXPECT_NO_THROW(cross_entropy_fwd(a, nullptr));  // 'none', M = 0: nothing to launch
  CrossEntropyBwdArgs b;
  b.x = TensorRef::matrix(nullptr, DType::kBFloat16, 0, 7);
  b.target = TensorRef::vector(nullptr, DType::kInt32, 0);
  b.lse = TensorRef::vector(nullptr, DType::kFloat32, 0);
  b.dloss = TensorRef::vector(nullptr, DType::kFloat32, 0);
  b.dx = TensorRef::matrix(nullptr, DType::kBFloat16, 0, 7);
  EXPECT_NO_THROW(cross_entropy_bwd(b, nullptr));
  CrossEntropyScaleGradArgs s;
  s.dx = TensorRef::matrix(nullptr, DType::kBFloat16, 0, 7);
  s.grad_output = TensorRef::vector(fake(2), DType::kFloat32, 1);
  EXPECT_NO_THROW(cross_entropy_scale_grad(s, nullptr));
  // 'sum' / 'mean' with M = 0 write their scalar: they reach CUDA.
  a.reduction = Reduction::kSum;
  a.loss = TensorRef::vector(fake(3), DType::kFloat32, 1);
  a.workspace = fake(9);
  a.workspace_bytes = cross_entropy_fwd_workspace_size(a);
  expect_reaches_cuda([&] { cross_entropy_fwd(a, nullptr); }, "sum, M = 0");
}

TEST(CrossEntropyValidation, XAndTarget) {
  CrossEntropyFwdArgs a = fwd_args();
  a.x = TensorRef();
  expect_fwd_invalid(a, {"x", "absent"});
  a = fwd_args();
  a.x.dtype = DType::kInt32;
  expect_fwd_invalid(a, {"x", "int32"});
  a = fwd_args();
  a.x.shape[0] = M + 1;
  expect_fwd_invalid(a, {"x", "(9, 4096)", "expected (8, N)"});
  a = fwd_args();
  a.x.device = -1;
  expect_fwd_invalid(a, {"x", "host memory"});
  a = fwd_args();
  a.x.stride[1] = -1;
  expect_fwd_invalid(a, {"x", "negative stride"});
  a = fwd_args();
  a.x.shape[1] = 0;
  expect_fwd_invalid(a, {"V = 0", "expected V ≥ 1"});
  a = fwd_args();
  a.x.shape[1] = int64_t{1} << 31;
  expect_fwd_invalid(a, {"V = 2147483648", "< 2^31"});
  a = fwd_args();
  a.target = TensorRef();
  expect_fwd_invalid(a, {"target", "absent"});
  a = fwd_args();
  a.target.dtype = DType::kFloat32;
  expect_fwd_invalid(a, {"target", "float32", "int32 or int64"});
  a = fwd_args();
  a.target = TensorRef::matrix(fake(2), DType::kInt64, M, 1);
  expect_fwd_invalid(a, {"target", "2 dimensions", "expected 1"});
  a = fwd_args();
  a.target.device = 3;
  expect_fwd_invalid(a, {"target", "cuda:3", "expected cuda:0"});
  a = fwd_args();
  a.num_classes = V + 1;
  expect_fwd_invalid(a, {"num_classes", "4097", "x's V = 4096"});
}

TEST(CrossEntropyValidation, OutputsAndWorkspace) {
  CrossEntropyFwdArgs a = fwd_args(Reduction::kNone);
  a.loss = TensorRef();
  expect_fwd_invalid(a, {"loss", "absent"});
  a = fwd_args(Reduction::kNone);
  a.loss = TensorRef::vector(fake(3), DType::kFloat32, 1);
  expect_fwd_invalid(a, {"loss", "(1,)", "expected (8,)"});
  a = fwd_args(Reduction::kMean);
  a.loss = TensorRef::vector(fake(3), DType::kFloat32, M);
  expect_fwd_invalid(a, {"loss", "(8,)", "expected (1,)"});
  a = fwd_args(Reduction::kNone);
  a.loss.stride[0] = 0;
  expect_fwd_invalid(a, {"loss", "overlapping"});
  a = fwd_args(Reduction::kNone);
  a.loss.dtype = DType::kInt64;
  expect_fwd_invalid(a, {"loss", "int64"});
  a = fwd_args();
  a.lse = TensorRef::vector(fake(4), DType::kFloat32, M - 1);
  expect_fwd_invalid(a, {"lse", "(7,)"});
  a = fwd_args();
  a.z_loss = TensorRef::vector(fake(4), DType::kFloat32, M);
  expect_fwd_invalid(a, {"z_loss", "expected (1,)"});
  a = fwd_args();
  a.dx = TensorRef::matrix(fake(5), DType::kBFloat16, M, V - 1);
  expect_fwd_invalid(a, {"dx", "4095"});
  a = fwd_args();
  a.dx = a.x;
  a.dx.dtype = DType::kFloat32;  // x's address, another dtype
  expect_fwd_invalid(a, {"dx overlaps x", "in place"});
  a = fwd_args();
  a.dx = TensorRef::matrix(fake(5), DType::kBFloat16, M, V, 0, 0);
  expect_fwd_invalid(a, {"dx", "overlapping"});
  a = fwd_args();
  a.workspace_bytes -= 4;
  expect_fwd_invalid(a, {"workspace", "expected ≥"});
  a = fwd_args();
  a.workspace = nullptr;
  expect_fwd_invalid(a, {"workspace", "0 bytes"});
  a = fwd_args();
  a.workspace = static_cast<char*>(fake(9)) + 4;
  expect_fwd_invalid(a, {"workspace", "16-byte aligned"});
  a = fwd_args();
  a.reduction = static_cast<Reduction>(5);
  expect_fwd_invalid(a, {"reduction", "5"});
}

TEST(CrossEntropyValidation, Options) {
  CrossEntropyFwdArgs a = fwd_args();
  a.label_smoothing = 1.5f;
  expect_fwd_invalid(a, {"label_smoothing", "[0, 1]"});
  a = fwd_args();
  a.label_smoothing = std::nanf("");
  expect_fwd_invalid(a, {"label_smoothing"});
  a = fwd_args();
  a.z_loss_scale = -1.f;
  expect_fwd_invalid(a, {"z_loss_scale", "≥ 0"});
  a = fwd_args();
  a.logit_softcap = std::numeric_limits<float>::infinity();
  expect_fwd_invalid(a, {"logit_softcap", "finite"});
  a = fwd_args();
  a.weight = TensorRef::vector(fake(6), DType::kFloat32, V - 1);
  expect_fwd_invalid(a, {"weight", "(4095,)", "expected (4096,)"});
  a = fwd_args();
  a.weight = TensorRef::vector(fake(6), DType::kBFloat16, V);
  expect_fwd_invalid(a, {"weight", "bfloat16", "float32"});
  // lse_partial / target_logit exclusions.
  a = fwd_args();
  a.lse_partial = TensorRef::matrix(fake(7), DType::kFloat32, M, 16);
  a.label_smoothing = 0.1f;
  expect_fwd_invalid(a, {"label_smoothing", "lse_partial"});
  a = fwd_args();
  a.target_logit = TensorRef::vector(fake(8), DType::kFloat32, M);
  a.logit_softcap = 30.f;
  expect_fwd_invalid(a, {"logit_softcap", "target_logit"});
  a = fwd_args();
  a.lse_partial = TensorRef::matrix(fake(7), DType::kFloat32, M, 16);
  a.dx = TensorRef::matrix(fake(5), DType::kBFloat16, M, V);
  expect_fwd_invalid(a, {"dx", "lse_partial", "cross_entropy_bwd"});
  a = fwd_args();
  a.lse_partial = TensorRef::matrix(fake(7), DType::kFloat32, M + 1, 16);
  expect_fwd_invalid(a, {"lse_partial", "(9, 16)"});
  a = fwd_args();
  a.lse_partial = TensorRef::matrix(fake(7), DType::kFloat32, M, 0);
  expect_fwd_invalid(a, {"lse_partial", "K ≥ 1"});
  a = fwd_args();
  a.target_logit = TensorRef::vector(fake(8), DType::kInt32, M);
  expect_fwd_invalid(a, {"target_logit", "int32"});
  a = fwd_args();
  a.x = TensorRef();
  a.lse_partial = TensorRef::matrix(fake(7), DType::kFloat32, M, 16);
  a.target_logit = TensorRef::vector(fake(8), DType::kFloat32, M);
  expect_fwd_invalid(a, {"num_classes", "expected V ≥ 1"});
  a.x = TensorRef();
  a.target_logit = TensorRef();
  a.num_classes = V;
  expect_fwd_invalid(a, {"x", "absent"});
}

TEST(CrossEntropyValidation, BackwardAndScale) {
  CrossEntropyBwdArgs b = bwd_args();
  b.lse = TensorRef();
  expect_bwd_invalid(b, {"lse", "absent"});
  b = bwd_args();
  b.dloss = TensorRef::vector(fake(4), DType::kFloat32, M + 2);
  expect_bwd_invalid(b, {"dloss", "(10,)", "expected (8,)"});
  b = bwd_args();
  b.dx = TensorRef();
  expect_bwd_invalid(b, {"dx", "absent"});
  b = bwd_args();
  b.target = TensorRef::vector(fake(2), DType::kInt32, M - 1);
  expect_bwd_invalid(b, {"target", "(7,)"});
  b = bwd_args();
  b.label_smoothing = -0.5f;
  expect_bwd_invalid(b, {"label_smoothing"});
  b = bwd_args();
  b.dx.device = 1;
  expect_bwd_invalid(b, {"dx", "cuda:1"});
  CrossEntropyScaleGradArgs s;
  s.dx = TensorRef::matrix(fake(1), DType::kBFloat16, M, V);
  s.grad_output = TensorRef::vector(fake(2), DType::kFloat32, 2);
  expect_invalid([&] { cross_entropy_scale_grad(s, nullptr); }, "cross_entropy_scale_grad",
                 {"grad_output", "(2,)", "expected (1,)"});
  s.grad_output = TensorRef::vector(fake(2), DType::kFloat32, 1);
  s.dx.stride[0] = 0;
  expect_invalid([&] { cross_entropy_scale_grad(s, nullptr); }, "cross_entropy_scale_grad",
                 {"dx", "overlapping"});
}

// The training pair: dx_state / dx_predict in the forward, cross_entropy_train_bwd.
TEST(CrossEntropyValidation, TrainingPair) {
  const TensorRef state = TensorRef::vector(fake(10), DType::kFloat32, kCrossEntropyDxStateFloats);
  const TensorRef word = TensorRef::vector(fake(11), DType::kInt32, 1);
  CrossEntropyFwdArgs a = fwd_args();
  a.dx = TensorRef::matrix(fake(5), DType::kBFloat16, M, V);
  a.lse = TensorRef::vector(fake(4), DType::kFloat32, M);
  a.dx_state = state;
  a.dx_predict = word;
  for (Reduction red : {Reduction::kSum, Reduction::kMean}) {
    a.reduction = red;
    a.loss = TensorRef::vector(fake(3), DType::kFloat32, 1);
    a.workspace_bytes = cross_entropy_fwd_workspace_size(a);
    expect_reaches_cuda([&] { cross_entropy_fwd(a, nullptr); }, "fwd with dx_state, dx_predict");
  }
  CrossEntropyFwdArgs f = a;
  f.dx = TensorRef();
  expect_fwd_invalid(f, {"dx_state", "without dx"});
  f = a;
  f.reduction = Reduction::kNone;
  f.loss = TensorRef::vector(fake(3), DType::kFloat32, M);
  f.workspace_bytes = cross_entropy_fwd_workspace_size(f);
  expect_fwd_invalid(f, {"dx_state", "kNone"});
  f = a;
  f.dx_state = TensorRef();
  expect_fwd_invalid(f, {"dx_predict", "without dx_state"});
  f = a;
  f.dx_state = TensorRef::vector(fake(10), DType::kFloat32, 8);
  expect_fwd_invalid(f, {"dx_state", "(8,)", "expected (16,)"});
  f = a;
  f.dx_state = TensorRef::vector(fake(10), DType::kFloat32, kCrossEntropyDxStateFloats, 0, 2);
  expect_fwd_invalid(f, {"dx_state", "stride 2", "expected 1"});
  f = a;
  f.dx_predict = TensorRef::vector(fake(11), DType::kInt64, 1);
  expect_fwd_invalid(f, {"dx_predict", "int64"});
  f = a;
  f.dx_state.dtype = DType::kBFloat16;
  expect_fwd_invalid(f, {"dx_state", "bfloat16"});

  CrossEntropyTrainBwdArgs b;
  b.x = TensorRef::matrix(fake(1), DType::kBFloat16, M, V);
  b.target = TensorRef::vector(fake(2), DType::kInt64, M);
  b.lse = TensorRef::vector(fake(3), DType::kFloat32, M);
  b.grad_output = TensorRef::vector(fake(4), DType::kFloat32, 1);
  b.dx = TensorRef::matrix(fake(5), DType::kBFloat16, M, V);
  b.dx_state = state;
  b.dx_predict = word;
  const auto train = [](const CrossEntropyTrainBwdArgs& t) {
    return [t] { cross_entropy_train_bwd(t, nullptr); };
  };
  const char* fn = "cross_entropy_train_bwd";
  expect_reaches_cuda(train(b), "train_bwd");
  CrossEntropyTrainBwdArgs c = b;
  c.dx_out = TensorRef::matrix(fake(6), DType::kBFloat16, M, V);
  expect_reaches_cuda(train(c), "train_bwd, dx_out");
  c.dx = c.x;  // the forward wrote into the logits; dx_out its own
  expect_reaches_cuda(train(c), "train_bwd, dx = x, dx_out");
  c = b;
  c.dx_state = TensorRef();
  expect_invalid(train(c), fn, {"dx_state", "absent"});
  c = b;
  c.lse = TensorRef();
  expect_invalid(train(c), fn, {"lse", "absent"});
  c = b;
  c.grad_output = TensorRef::vector(fake(4), DType::kFloat32, M);
  expect_invalid(train(c), fn, {"grad_output", "expected (1,)"});
  c = b;
  c.dx_out = TensorRef::matrix(fake(6), DType::kFloat32, M, V);
  expect_invalid(train(c), fn, {"dx_out", "expected dx's"});
  c = b;
  c.dx_out = TensorRef::matrix(fake(5), DType::kBFloat16, M, V, 0, 2 * V, 1);
  expect_invalid(train(c), fn, {"dx_out overlaps dx", "in place"});
  c = b;
  c.dx_predict = TensorRef::vector(fake(11), DType::kInt32, 2);
  expect_invalid(train(c), fn, {"dx_predict", "(2,)"});
  c = b;
  c.x = TensorRef::matrix(nullptr, DType::kBFloat16, 0, V);
  c.target = TensorRef::vector(nullptr, DType::kInt64, 0);
  c.lse = TensorRef::vector(nullptr, DType::kFloat32, 0);
  c.dx = c.x;
  EXPECT_NO_THROW(cross_entropy_train_bwd(c, nullptr)) << "M = 0: nothing to launch";
}

TEST(CrossEntropyWorkspace, Size) {
  CrossEntropyFwdArgs a = fwd_args(Reduction::kNone);
  EXPECT_EQ(cross_entropy_fwd_workspace_size(a), 0u);  // 'none': nothing on the device
  a.weight = TensorRef::vector(fake(6), DType::kFloat32, V);
  a.label_smoothing = 0.1f;
  EXPECT_EQ(cross_entropy_fwd_workspace_size(a), detail::ce::kScalarBytes);  // Σ_j w_j
  a = fwd_args(Reduction::kSum);
  EXPECT_EQ(cross_entropy_fwd_workspace_size(a), 64u + 32u);  // scalars + 8 fp32 rows
  a.z_loss_scale = 1e-4f;
  EXPECT_EQ(cross_entropy_fwd_workspace_size(a), 64u + 32u + 32u);
  a.target = TensorRef::vector(fake(2), DType::kInt64, 1001);
  EXPECT_EQ(cross_entropy_fwd_workspace_size(a), 64u + 2u * 4016u);  // 16-byte rounded
}

// The training shapes' plans (bf16 logits, as the benchmarks run them).
TEST(CrossEntropyPlan, TrainingShapes) {
  auto plan_name = [](int64_t Mr, int64_t Vr, DType t, bool grad) {
    CrossEntropyFwdArgs a;
    a.x = TensorRef::matrix(fake(1), t, Mr, Vr);
    a.target = TensorRef::vector(fake(2), DType::kInt64, Mr);
    a.loss = TensorRef::vector(fake(3), DType::kFloat32, Mr);
    a.reduction = Reduction::kNone;
    if (grad) a.dx = TensorRef::matrix(fake(4), t, Mr, Vr);
    char buf[64];
    return std::string(detail::row_plan_name(
        detail::plan_row_call(detail::cross_entropy_fwd_call(a).row), buf, sizeof(buf)));
  };
  const DType bf = DType::kBFloat16, f32 = DType::kFloat32;
  EXPECT_EQ(plan_name(16384, 4096, bf, false), "t128v4");  // 8 KB 16-bit rows (row_plan.cpp)
  // 16-bit rows of (32, 64] KB: cl-t512v8, the loss alone and with dx (row_plan.cpp).
  EXPECT_EQ(plan_name(16384, 32768, bf, false), "cl-t512v8-x1");
  EXPECT_EQ(plan_name(16384, 32768, bf, true), "cl-t512v8-x1");
  EXPECT_EQ(plan_name(16384, 32000, bf, true), "cl-t512v8-x1");
  EXPECT_EQ(plan_name(16384, 16384, bf, true), "t512v4");  // 32 KB: the table's order
  EXPECT_EQ(plan_name(16384, 16384, bf, false), "t512v4");
  // The loss alone: cl-t256v8 on rows of (64, 256] KB, then the looped entry (row_plan.cpp).
  EXPECT_EQ(plan_name(16384, 65536, bf, false), "cl-t256v8-x4");  // (64, 256] KB rows
  EXPECT_EQ(plan_name(16384, 65544, bf, false), "cl-t256v8-x5");
  EXPECT_EQ(plan_name(16384, 131072, bf, false), "cl-t256v8-x8");
  EXPECT_EQ(plan_name(16384, 131080, bf, false), "t1024v2-looped");
  EXPECT_EQ(plan_name(8192, 262144, bf, false), "t1024v2-looped");
  EXPECT_EQ(plan_name(16384, 32768, f32, false), "t1024v8");
  EXPECT_EQ(plan_name(16384, 131072, f32, true), "ring-t1024v4-s3-x8");
  EXPECT_EQ(plan_name(16384, 128256, bf, true), "cl-t256v8-s1-x8");
  EXPECT_EQ(plan_name(16384, 4100, bf, true), "general-t256-x2");
  // The backward (a kernel gate): the ring for 16-bit rows of (32, 64] KB and beyond, the map
  // beyond 16 x 64 KB (row_plan.cpp).
  auto bwd_plan = [](int64_t Mr, int64_t Vr, DType t) {
    CrossEntropyBwdArgs b;
    b.x = TensorRef::matrix(fake(1), t, Mr, Vr);
    b.target = TensorRef::vector(fake(2), DType::kInt32, Mr);
    b.lse = TensorRef::vector(fake(3), DType::kFloat32, Mr);
    b.dloss = TensorRef::vector(fake(4), DType::kFloat32, Mr);
    b.dx = TensorRef::matrix(fake(5), t, Mr, Vr);
    char buf[64];
    return std::string(detail::row_plan_name(
        detail::plan_row_call(detail::cross_entropy_bwd_call(b)), buf, sizeof(buf)));
  };
  // Beyond 64 KB (16-bit): the ring; the training backward's recompute (its finish reads the
  // dx state per row) the looped entry.
  EXPECT_EQ(bwd_plan(16384, 131072, bf), "ring-t1024v4-s3-x4");
  auto train_plan = [](int64_t Mr, int64_t Vr, DType t) {
    CrossEntropyTrainBwdArgs a;
    a.x = TensorRef::matrix(fake(1), t, Mr, Vr);
    a.target = TensorRef::vector(fake(2), DType::kInt32, Mr);
    a.lse = TensorRef::vector(fake(3), DType::kFloat32, Mr);
    a.grad_output = TensorRef::vector(fake(4), DType::kFloat32, 1);
    a.dx = TensorRef::matrix(fake(5), t, Mr, Vr);
    a.dx_state = TensorRef::vector(fake(6), DType::kFloat32, kCrossEntropyDxStateFloats);
    char buf[64];
    return std::string(detail::row_plan_name(
        detail::plan_row_call(detail::cross_entropy_train_bwd_call(a)), buf, sizeof(buf)));
  };
  EXPECT_EQ(train_plan(16384, 65536, bf), "t1024v2-looped");
  EXPECT_EQ(train_plan(16384, 131072, bf), "t1024v2-looped");
  EXPECT_EQ(train_plan(8192, 262144, bf), "t1024v2-looped");
  EXPECT_EQ(train_plan(16384, 32768, bf), "ring-t1024v4-s3-x1");
  EXPECT_EQ(train_plan(16384, 16384, bf), "t512v4");  // CeTrain.ManyRowBlocks' register loops
  EXPECT_EQ(train_plan(16384, 65536, f32), "ring-t1024v4-s3-x4");
  EXPECT_EQ(bwd_plan(16384, 65536, f32), "ring-t1024v4-s3-x4");
  EXPECT_EQ(bwd_plan(16384, 32768, bf), "ring-t1024v4-s3-x1");
  EXPECT_EQ(bwd_plan(16384, 24576, bf), "ring-t1024v4-s3-x1");
  EXPECT_EQ(bwd_plan(16384, 16384, bf), "t512v4");  // 32 KB: the table's order
  EXPECT_EQ(bwd_plan(16384, 4096, bf), "t256v2");   // a kernel gate: not the short-row entry
  EXPECT_EQ(bwd_plan(16384, 16384, f32), "t1024v4");
}

// The predicted training forward is split into two gated kernels, each on the plan of the
// forward it stands for: the loss-only kernel on the loss-only forward's (but cl-t256v8-s1
// where that is cl-t256v8), the loss + dx kernel on the forward with dx's (same entry,
// cluster, grid, instance); class weights with label smoothing and the single form
// (quack-bench's A/B) keep one kernel.
TEST(CrossEntropyPlan, SplitForwardPlans) {
  // Fake buffers 64 GiB apart: x and dx (16384 x 262144 fp32: 16 GiB each) must not overlap,
  // or the aliasing check refuses the call.
  auto fake = [](uintptr_t k) { return test::fake(k, uintptr_t{1} << 36); };
  char b1[64], b2[64];
  auto same = [&](const detail::RowPlan& p, const detail::RowPlan& q) {
    return std::string(detail::row_plan_name(p, b1, sizeof(b1))) ==
               detail::row_plan_name(q, b2, sizeof(b2)) &&
           p.config == q.config && p.inst == q.inst && p.grid == q.grid &&
           p.cluster_n == q.cluster_n && p.threads == q.threads && p.smem == q.smem;
  };
  int checked = 0;
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    for (int64_t V : {1000, 4096, 4100, 8192, 16384, 32768, 65536, 65544, 131072, 262144}) {
      for (float cap : {0.f, 20.f}) {
        const int64_t M = 16384;
        SCOPED_TRACE(std::string(dtype_name(t)) + " V=" + std::to_string(V) +
                     " cap=" + std::to_string(cap));
        CrossEntropyFwdArgs a;
        a.x = TensorRef::matrix(fake(1), t, M, V);
        a.target = TensorRef::vector(fake(2), DType::kInt64, M);
        a.loss = TensorRef::vector(fake(3), DType::kFloat32, 1);
        a.lse = TensorRef::vector(fake(4), DType::kFloat32, M);
        a.reduction = Reduction::kMean;
        a.logit_softcap = cap;
        a.workspace = fake(9);
        a.workspace_bytes = size_t{1} << 30;
        const detail::RowPlan loss_plan = detail::plan_row_call(detail::cross_entropy_fwd_call(a).row);
        a.dx = TensorRef::matrix(fake(5), t, M, V);
        const detail::RowPlan dx_plan = detail::plan_row_call(detail::cross_entropy_fwd_call(a).row);
        a.dx_state = TensorRef::vector(fake(6), DType::kFloat32, kCrossEntropyDxStateFloats);
        a.dx_predict = TensorRef::vector(fake(7), DType::kInt32, 1);
        const detail::CeFwdCall call = detail::cross_entropy_fwd_call(a);
        ASSERT_TRUE(call.split);
        EXPECT_EQ(call.row.p.out[0].ptr, nullptr) << "the loss-only kernel writes no dx";
        EXPECT_EQ(call.row_dx.p.out[0].ptr, a.dx.data);
        for (int k = 0; k < 4; ++k) {
          EXPECT_EQ(call.row.p.row_out[k].ptr, call.row_dx.p.row_out[k].ptr) << "row_out " << k;
          EXPECT_EQ(call.row.p.row_in[k].ptr, call.row_dx.p.row_in[k].ptr) << "row_in " << k;
          EXPECT_EQ(call.row.p.iscalar[k], call.row_dx.p.iscalar[k]) << "iscalar " << k;
        }
        EXPECT_TRUE(call.row.p.iscalar[detail::ce::kFlags] & detail::ce::kDxGated);
        const detail::CeFwdPlan plan = detail::plan_cross_entropy_fwd(call);
        // The gated loss-only kernel: the loss-only forward's plan, but cl-t256v8-s1 (its
        // closed launch: the resident clusters) where that plan is cl-t256v8.
        const bool staged = loss_plan.config >= 0 &&
                            std::string(detail::kRowConfigs[loss_plan.config].name) == "cl-t256v8";
        if (staged) {
          EXPECT_EQ(std::string(detail::kRowConfigs[plan.row.config].name), "cl-t256v8-s1");
          EXPECT_EQ(plan.row.cluster_n, loss_plan.cluster_n);
          EXPECT_EQ(plan.row.grid, 0) << "persistent";
        } else {
          EXPECT_TRUE(same(plan.row, loss_plan))
              << detail::row_plan_name(plan.row, b1, sizeof(b1)) << " vs the loss-only forward's "
              << detail::row_plan_name(loss_plan, b2, sizeof(b2));
        }
        EXPECT_TRUE(same(plan.dx, dx_plan))
            << detail::row_plan_name(plan.dx, b1, sizeof(b1)) << " vs the forward with dx's "
            << detail::row_plan_name(dx_plan, b2, sizeof(b2));
        EXPECT_FALSE(detail::cross_entropy_fwd_call(a, detail::CePredictedForm::kSingle).split);
        a.weight = TensorRef::vector(fake(8), DType::kFloat32, V);
        a.label_smoothing = 0.1f;
        EXPECT_FALSE(detail::cross_entropy_fwd_call(a).split) << "weighted smoothing: one kernel";
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 60);
  // The plans named (bf16, 16384 rows; docs/architecture.md's training-pair section).
  auto names = [&](int64_t V) {
    CrossEntropyFwdArgs a;
    a.x = TensorRef::matrix(fake(1), DType::kBFloat16, 16384, V);
    a.target = TensorRef::vector(fake(2), DType::kInt64, 16384);
    a.loss = TensorRef::vector(fake(3), DType::kFloat32, 1);
    a.reduction = Reduction::kMean;
    a.workspace = fake(9);
    a.workspace_bytes = size_t{1} << 30;
    a.dx = TensorRef::matrix(fake(5), DType::kBFloat16, 16384, V);
    a.dx_state = TensorRef::vector(fake(6), DType::kFloat32, kCrossEntropyDxStateFloats);
    a.dx_predict = TensorRef::vector(fake(7), DType::kInt32, 1);
    const detail::CeFwdPlan plan = detail::plan_cross_entropy_fwd(detail::cross_entropy_fwd_call(a));
    return std::string(detail::row_plan_name(plan.row, b1, sizeof(b1))) + " " +
           detail::row_plan_name(plan.dx, b2, sizeof(b2));
  };
  EXPECT_EQ(names(4096), "t128v4 t128v4");
  EXPECT_EQ(names(65536), "cl-t256v8-s1-x4 cl-t256v8-s1-x4");
  EXPECT_EQ(names(131072), "cl-t256v8-s1-x8 cl-t256v8-s1-x8");
  EXPECT_EQ(names(262144), "t1024v2-looped cl-t256v8-s1-x16");
}

// ---------------------------------------------------------------- float64 reference

TEST(CrossEntropyReference, HandValues) {
  const double inf = std::numeric_limits<double>::infinity();
  // Row 0: (0, ln 2, ln 3), target 1: lse = ln 6, loss = ln 6 − ln 2 = ln 3.
  // Row 1: (−inf, 5, −inf), target 1: loss 0 (its only finite logit).
  // Row 2: ignored. Row 3: target 3 ≥ V: NaN.
  const double x[] = {0.0, std::log(2.0), std::log(3.0), -inf, 5.0, -inf,
                      1.0, 2.0, 3.0, 1.0, 1.0, 1.0};
  const int64_t t[] = {1, 1, -100, 3};
  ref::CeOptions o;
  o.reduction = 2;
  const ref::CeRef r = ref::cross_entropy_ref(4, 3, x, t, o, true);
  EXPECT_NEAR(r.loss_rows[0], std::log(3.0), 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(6.0), 1e-15);
  EXPECT_EQ(r.loss_rows[1], 0.0);
  EXPECT_EQ(r.loss_rows[2], 0.0);
  EXPECT_TRUE(std::isnan(r.loss_rows[3]));
  EXPECT_EQ(r.denom_loss, 2.0);
  EXPECT_TRUE(std::isnan(r.loss));  // a NaN row makes the mean NaN
  // dx for mean: (softmax − onehot) / 2; row 1: all 0; row 2 (ignored): 0; row 3: NaN.
  EXPECT_NEAR(r.dx[0], (1.0 / 6) / 2, 1e-15);
  EXPECT_NEAR(r.dx[1], (2.0 / 6 - 1) / 2, 1e-15);
  EXPECT_NEAR(r.dx[2], (3.0 / 6) / 2, 1e-15);
  for (int j = 3; j < 9; ++j) EXPECT_EQ(r.dx[j], 0.0) << j;
  for (int j = 9; j < 12; ++j) EXPECT_TRUE(std::isnan(r.dx[j])) << j;
}

TEST(CrossEntropyReference, Options) {
  // x = (0, ln 2, ln 3), target 2, V = 3: p = (1/6, 2/6, 3/6), lse = ln 6.
  const double x[] = {0.0, std::log(2.0), std::log(3.0)};
  const int64_t t[] = {2};
  const double lse = std::log(6.0);
  ref::CeOptions o;
  o.reduction = 0;
  o.eps = 0.3;
  // CE = 0.7·(lse − ln 3) + 0.1·Σ_j (lse − x_j)
  const double sm = 3 * lse - (std::log(2.0) + std::log(3.0));
  auto r = ref::cross_entropy_ref(1, 3, x, t, o, true);
  EXPECT_NEAR(r.loss_rows[0], 0.7 * (lse - std::log(3.0)) + 0.1 * sm, 1e-14);
  // dx = p − 0.7·e_t − 0.1 (sums to 0).
  EXPECT_NEAR(r.dx[0], 1.0 / 6 - 0.1, 1e-15);
  EXPECT_NEAR(r.dx[2], 0.5 - 0.7 - 0.1, 1e-15);
  EXPECT_NEAR(r.dx[0] + r.dx[1] + r.dx[2], 0.0, 1e-15);
  // Weights (1, 2, 3), smoothing 0.3: CE = 0.7·3·(lse − ln 3) + 0.1·Σ_j w_j·(lse − x_j).
  const std::vector<double> w = {1.0, 2.0, 3.0};
  o.weight = &w;
  r = ref::cross_entropy_ref(1, 3, x, t, o, false);
  EXPECT_NEAR(r.loss_rows[0],
              2.1 * (lse - std::log(3.0)) +
                  0.1 * (6 * lse - 2 * std::log(2.0) - 3 * std::log(3.0)),
              1e-14);
  // 'mean' with weights: divided by w[t] = 3.
  o.reduction = 2;
  r = ref::cross_entropy_ref(1, 3, x, t, o, false);
  EXPECT_NEAR(r.loss, r.ce_rows[0] / 3.0, 1e-15);
  // z-loss: zs·lse², its gradient 2·zs·lse·p.
  ref::CeOptions z;
  z.reduction = 1;
  z.zs = 0.01;
  r = ref::cross_entropy_ref(1, 3, x, t, z, true);
  EXPECT_NEAR(r.z_rows[0], 0.01 * lse * lse, 1e-15);
  EXPECT_NEAR(r.dx[1], 2.0 / 6 + 0.02 * lse * 2.0 / 6, 1e-15);
  // Softcap 1: y = tanh(x).
  ref::CeOptions c;
  c.reduction = 0;
  c.cap = 1.0;
  r = ref::cross_entropy_ref(1, 3, x, t, c, true);
  const double y[] = {0.0, std::tanh(std::log(2.0)), std::tanh(std::log(3.0))};
  const double ly = std::log(std::exp(y[0]) + std::exp(y[1]) + std::exp(y[2]));
  EXPECT_NEAR(r.loss_rows[0], ly - y[2], 1e-15);
  EXPECT_NEAR(r.dx[1], std::exp(y[1] - ly) * (1 - y[1] * y[1]), 1e-15);
}

// Aliasing (the header: dx may be x itself, else its own memory; ArgCheck::same_or_disjoint):
// a dx that starts inside x, or covers x with another layout, is refused; dx overlapping the
// loss or lse is refused; dx = x exactly is accepted (Baseline).
TEST(CrossEntropyValidation, DxAliasing) {
  CrossEntropyFwdArgs a = fwd_args();
  a.dx = a.x;
  a.dx.data = static_cast<char*>(a.x.data) + 2 * V;  // one bf16 row into x
  expect_fwd_invalid(a, {"dx overlaps x", "separate memory"});
  a = fwd_args();
  a.dx = TensorRef::matrix(a.x.data, DType::kBFloat16, M, V, 0, 1, M);  // x's bytes, transposed
  expect_fwd_invalid(a, {"dx overlaps x"});
  a = fwd_args();
  a.lse = TensorRef::vector(fake(4), DType::kFloat32, M);
  a.dx = TensorRef::matrix(fake(4), DType::kBFloat16, M, V);  // over lse
  expect_fwd_invalid(a, {"dx overlaps lse"});
  CrossEntropyBwdArgs b = bwd_args();
  b.dx.data = static_cast<char*>(b.x.data) + 64;  // 32 elements into x
  expect_bwd_invalid(b, {"dx overlaps x", "in place"});
  b = bwd_args();
  b.dx = TensorRef::matrix(b.lse.data, DType::kBFloat16, M, V);
  expect_bwd_invalid(b, {"dx overlaps lse"});
  b = bwd_args();
  b.dx = b.x;  // in place
  expect_reaches_cuda([&] { cross_entropy_bwd(b, nullptr); }, "bwd in place");
  b = bwd_args();
  b.dx = TensorRef::matrix(b.target.data, DType::kBFloat16, M, V);
  expect_bwd_invalid(b, {"dx overlaps target"});
}

// The forward's outputs apart from each other and from its inputs (ArgCheck::outputs_apart).
TEST(CrossEntropyValidation, OutputsApart) {
  CrossEntropyFwdArgs a = fwd_args();
  a.lse = TensorRef::vector(a.loss.data, DType::kFloat32, M);
  expect_fwd_invalid(a, {"loss overlaps lse", "expected separate memory"});
  a = fwd_args();
  a.lse = TensorRef::vector(a.target.data, DType::kFloat32, M);
  expect_fwd_invalid(a, {"lse overlaps target"});
  a = fwd_args();
  a.loss = TensorRef::vector(a.x.data, DType::kFloat32, a.loss.shape[0]);
  expect_fwd_invalid(a, {"loss overlaps x"});
}

// Float options print as the float they are (%g, the shortest form that reads back), not
// std::to_string's six decimals; z_loss_scale names its Python spelling too.
TEST(CrossEntropyValidation, OptionMessages) {
  CrossEntropyFwdArgs a = fwd_args();
  a.label_smoothing = 1.0000001f;
  expect_fwd_invalid(a, {"label_smoothing is 1.0000001,", "[0, 1]"});
  a = fwd_args();
  a.z_loss_scale = -0.5f;
  expect_fwd_invalid(a, {"z_loss_scale (Python: z_loss) is -0.5"});
}

// The device reference named in a device mismatch: target where x is absent.
TEST(CrossEntropyValidation, DeviceReferenceName) {
  CrossEntropyFwdArgs a = fwd_args();
  a.x = TensorRef();
  a.lse_partial = TensorRef::matrix(fake(6), DType::kFloat32, M, 4);
  a.target_logit = TensorRef::vector(fake(7), DType::kFloat32, M);
  a.num_classes = V;
  a.lse_partial.device = 1;
  a.workspace_bytes = cross_entropy_fwd_workspace_size(fwd_args());
  expect_fwd_invalid(a, {"lse_partial", "cuda:1", "the device of target"});
}

}  // namespace
}  // namespace quack
