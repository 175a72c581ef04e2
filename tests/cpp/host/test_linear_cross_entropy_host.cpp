// Tier 1 (no GPU): linear + cross-entropy's chunk rule and plans (lce_plan.h) at the benchmark
// shapes (the memory model of docs/architecture.md), and every validation path of
// linear_cross_entropy_fwd / _bwd / _scale_grad: InvalidArgument naming the function and the
// argument before any CUDA call; valid arguments reach CUDA, hidden here
// (CUDA_VISIBLE_DEVICES="", as in test_validation.cpp), and report "no CUDA driver/GPU".
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "host_test_util.h"
#include "linear_cross_entropy/lce_plan.h"
#include "quack/errors.h"
#include "quack/linear_cross_entropy.h"

namespace quack {
namespace {

using namespace test;

using detail::LceDw;
using detail::LcePlan;
using Mode = LinearCrossEntropyMode;

constexpr DType kBF = DType::kBFloat16, kF32 = DType::kFloat32;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

LinearCrossEntropyFwdArgs fwd_args(int64_t T, int64_t D, int64_t V, bool grads = true,
                                   Reduction red = Reduction::kMean) {
  LinearCrossEntropyFwdArgs a;
  a.x = TensorRef::matrix(fake(1), kBF, T, D);
  a.weight = TensorRef::matrix(fake(2), kBF, V, D);
  a.target = TensorRef::vector(fake(3), DType::kInt64, T);
  a.loss = TensorRef::vector(fake(4), kF32, red == Reduction::kNone ? T : 1);
  a.lse = TensorRef::vector(fake(5), kF32, T);
  a.reduction = red;
  if (grads) {
    a.dx = TensorRef::matrix(fake(6), kBF, T, D);
    a.dweight = TensorRef::matrix(fake(7), kBF, V, D);
  }
  a.workspace = fake(9);
  a.workspace_bytes = size_t{1} << 40;
  return a;
}

LinearCrossEntropyBwdArgs bwd_args(int64_t T, int64_t D, int64_t V) {
  LinearCrossEntropyBwdArgs a;
  a.x = TensorRef::matrix(fake(1), kBF, T, D);
  a.weight = TensorRef::matrix(fake(2), kBF, V, D);
  a.target = TensorRef::vector(fake(3), DType::kInt64, T);
  a.lse = TensorRef::vector(fake(4), kF32, T);
  a.dloss = TensorRef::vector(fake(5), kF32, T);
  a.dx = TensorRef::matrix(fake(6), kBF, T, D);
  a.dweight = TensorRef::matrix(fake(7), kBF, V, D);
  a.workspace = fake(9);
  a.workspace_bytes = size_t{1} << 40;
  return a;
}

void expect_fwd_invalid(const LinearCrossEntropyFwdArgs& a, const std::vector<std::string>& parts) {
  expect_invalid([&] { linear_cross_entropy_fwd(a, nullptr); }, "linear_cross_entropy_fwd", parts);
}
void expect_bwd_invalid(const LinearCrossEntropyBwdArgs& a, const std::vector<std::string>& parts) {
  expect_invalid([&] { linear_cross_entropy_bwd(a, nullptr); }, "linear_cross_entropy_bwd", parts);
}

// ------------------------------------------------------------------ the chunk rule and plans

TEST(LceChunkRule, BenchmarkShapes) {
  // (16384, 4096, 128256): 1 GiB of logits → 4096 tokens, 4 chunks.
  EXPECT_EQ(linear_cross_entropy_chunk_size(16384, 4096, 128256, kBF, Mode::kDefault, true), 4096);
  // (8192, 4096, 32000): all logits fit 1 GiB → one chunk.
  EXPECT_EQ(linear_cross_entropy_chunk_size(8192, 4096, 32000, kBF, Mode::kDefault, true), 8192);
  // (32768, 1024, 151936): 10 balanced chunks of 3328 (the last 2816).
  EXPECT_EQ(linear_cross_entropy_chunk_size(32768, 1024, 151936, kBF, Mode::kDefault, true), 3328);
  // (8192, 8192, 262144): chunks would add a 4 GiB accumulator half to 1 GiB chunks, more than
  // the 4 GiB of one chunk → one chunk.
  EXPECT_EQ(linear_cross_entropy_chunk_size(8192, 8192, 262144, kBF, Mode::kDefault, true), 8192);
  // ... unless the free memory cannot hold it (one chunk of 4 GiB > half of 6 GiB free).
  EXPECT_EQ(linear_cross_entropy_chunk_size(8192, 8192, 262144, kBF, Mode::kDefault, true,
                                            size_t{6} << 30),
            2048);
}

TEST(LceChunkRule, LowMemoryAndFreeMemory) {
  EXPECT_EQ(linear_cross_entropy_chunk_size(16384, 4096, 128256, kBF, Mode::kLowMemory, true),
            2048);
  // A quarter of 2 GiB free: 512 MiB → 2048 tokens.
  EXPECT_EQ(linear_cross_entropy_chunk_size(16384, 4096, 128256, kBF, Mode::kDefault, true,
                                            size_t{2} << 30),
            2048);
  // Never below 64 MiB of logits per chunk (256 tokens here), whatever free says.
  EXPECT_EQ(linear_cross_entropy_chunk_size(16384, 4096, 128256, kBF, Mode::kDefault, true, 1),
            256);
  EXPECT_EQ(linear_cross_entropy_chunk_size(0, 4096, 128256, kBF, Mode::kDefault, true), 0);
  EXPECT_EQ(linear_cross_entropy_chunk_size(5, 64, 15, kBF, Mode::kDefault, true), 5);
}

TEST(LcePlan, DefaultModelAtTheMainShape) {
  const int64_t T = 16384, D = 4096, V = 128256;
  const LcePlan p = detail::lce_plan_fwd(fwd_args(T, D, V));
  EXPECT_EQ(p.chunk, 4096);
  EXPECT_EQ(p.n_chunks, 4);
  EXPECT_EQ(p.dw, LceDw::kAcc);
  EXPECT_EQ(p.acc_in_dw, 64128);
  // The last chunk stores rows [64128, V) into dweight from their GEMM (no cast at the end).
  EXPECT_TRUE(p.dw_ws_last_direct);
  // Accumulated into dweight (weight.grad += ...): the workspace rows are added at the end.
  LinearCrossEntropyFwdArgs acc = fwd_args(T, D, V);
  acc.accumulate = true;
  EXPECT_FALSE(detail::lce_plan_fwd(acc).dw_ws_last_direct);
  EXPECT_EQ(p.v_begin, V);
  EXPECT_EQ(p.logits_bytes, size_t{4096} * 128256 * 2);
  EXPECT_EQ(p.acc_bytes, size_t{64128} * 4096 * 4);
  // Extra memory beside the 1.10 GiB of dx and dweight: a logits chunk and half the fp32
  // accumulator, 1.96 GiB (QuACK 0.2.0 at chunk 4096: 2.94 GiB more, the full fp32
  // accumulator and its chunk).
  EXPECT_NEAR(static_cast<double>(p.total) / kGiB, 1.957, 0.01);
}

TEST(LcePlan, LowMemoryModelAtTheMainShape) {
  const int64_t T = 16384, D = 4096, V = 128256;
  LinearCrossEntropyFwdArgs a = fwd_args(T, D, V);
  a.mode = Mode::kLowMemory;
  const LcePlan p = detail::lce_plan_fwd(a);
  EXPECT_EQ(p.chunk, 2048);
  EXPECT_EQ(p.dw, LceDw::kAcc);
  EXPECT_EQ(p.dw_rows, 42752);
  EXPECT_EQ(p.acc_in_dw, 42752);
  EXPECT_FALSE(p.dw_ws_last_direct);  // no workspace rows
  EXPECT_EQ(p.acc_bytes, 0u);
  EXPECT_EQ(p.v_begin, 42752);
  EXPECT_EQ(p.vslice, 14336);
  EXPECT_EQ(p.n_slices, 6);
  // One logits chunk (0.49 GiB) is all: with the grads 1.59 GiB, under the 2.0 GiB bar.
  EXPECT_LT(static_cast<double>(p.total) / kGiB, 0.50);
}

TEST(LcePlan, OtherBenchmarkShapes) {
  LcePlan p = detail::lce_plan_fwd(fwd_args(8192, 4096, 32000));
  EXPECT_EQ(p.n_chunks, 1);
  EXPECT_EQ(p.dw, LceDw::kDirect);
  EXPECT_EQ(p.acc_bytes, 0u);
  p = detail::lce_plan_fwd(fwd_args(32768, 1024, 151936));
  EXPECT_EQ(p.n_chunks, 10);
  EXPECT_EQ(p.acc_in_dw, 75968);
  p = detail::lce_plan_fwd(fwd_args(8192, 8192, 262144));
  EXPECT_EQ(p.n_chunks, 1);
  EXPECT_EQ(p.dw, LceDw::kDirect);
}

TEST(LcePlan, AccumulatorPlacement) {
  LinearCrossEntropyFwdArgs a = fwd_args(1000, 64, 1001);
  a.chunk_size = 100;
  LcePlan p = detail::lce_plan_fwd(a);
  EXPECT_EQ(p.dw, LceDw::kAcc);
  EXPECT_EQ(p.acc_in_dw, 496);  // ⌊1001/2⌋ rounded down to 8
  EXPECT_EQ(p.acc_bytes, size_t{1001 - 496} * 64 * 4);
  EXPECT_TRUE(p.dw_ws_last_direct);
  a.accumulate = true;  // the old dweight is read: all of the accumulator in the workspace
  p = detail::lce_plan_fwd(a);
  EXPECT_EQ(p.acc_in_dw, 0);
  EXPECT_EQ(p.acc_bytes, size_t{1001} * 64 * 4);
  EXPECT_FALSE(p.dw_ws_last_direct);  // added into dweight by the cast at the end
  a.accumulate = false;
  a.dweight = TensorRef::matrix(fake(7), kF32, 1001, 64);  // fp32: accumulated in place
  p = detail::lce_plan_fwd(a);
  EXPECT_EQ(p.dw, LceDw::kDirect);
  EXPECT_EQ(p.acc_bytes, 0u);
  a.dweight = TensorRef::matrix(fake(7), kBF, 1001, 64, 0, 72);  // padded rows
  p = detail::lce_plan_fwd(a);
  EXPECT_EQ(p.acc_in_dw, 0);
  EXPECT_TRUE(p.dw_ws_last_direct);  // all rows stored by the last chunk's GEMM
  a = fwd_args(1000, 64, 1001, false);  // no gradient: no accumulator, no slices
  a.chunk_size = 100;
  p = detail::lce_plan_fwd(a);
  EXPECT_FALSE(p.grads);
  EXPECT_EQ(p.dw, LceDw::kNone);
  EXPECT_EQ(p.acc_bytes, 0u);
  EXPECT_EQ(linear_cross_entropy_fwd_workspace_size(a), p.total);
}

TEST(LcePlan, Backward) {
  LinearCrossEntropyBwdArgs a = bwd_args(16384, 4096, 128256);
  LcePlan p = detail::lce_plan_bwd(a);
  EXPECT_EQ(p.v_begin, 0);
  // 1 GiB / (16384 tokens × 2 bytes) = 32768 columns at most: 4 balanced slices of 32128.
  EXPECT_EQ(p.vslice, 32128);
  EXPECT_EQ(p.n_slices, 4);
  EXPECT_TRUE(p.dx_acc);
  EXPECT_EQ(p.acc_bytes, size_t{16384} * 4096 * 4);
  a.vocab_chunk_size = 1001;  // rounded up to 8
  p = detail::lce_plan_bwd(a);
  EXPECT_EQ(p.vslice, 1008);
  a = bwd_args(100, 64, 500);
  p = detail::lce_plan_bwd(a);
  EXPECT_EQ(p.n_slices, 1);
  EXPECT_FALSE(p.dx_acc);
}

// ------------------------------------------------------------------ validation

TEST(LceValidation, Forward) {
  const int64_t T = 16, D = 64, V = 100;
  auto a = fwd_args(T, D, V);
  a.x.dtype = kF32;
  expect_fwd_invalid(a, {"x has dtype float32", "expected bfloat16 or float16"});
  a = fwd_args(T, D, V);
  a.x.dtype = DType::kFloat16;  // weight stays bfloat16: one compute dtype
  expect_fwd_invalid(a, {"weight has dtype bfloat16", "expected float16"});
  a = fwd_args(T, D, V);
  a.x = TensorRef::matrix(fake(1), kBF, T, D, 0, 68);
  expect_fwd_invalid(a, {"x", "row stride 68", "multiple of 8"});
  a = fwd_args(T, D, V);
  a.x = TensorRef::matrix(fake(1), kBF, T, D, 0, D, 2);
  expect_fwd_invalid(a, {"x", "column stride 2"});
  a = fwd_args(T, D, V);
  a.x.data = static_cast<char*>(a.x.data) + 2;
  expect_fwd_invalid(a, {"x", "16-byte aligned"});
  a = fwd_args(T, D, V);
  a.weight = TensorRef::matrix(fake(2), kBF, V, D + 8);
  expect_fwd_invalid(a, {"weight has shape", "(100, 72)"});
  a = fwd_args(T, D, V);
  a.weight.dtype = kF32;
  expect_fwd_invalid(a, {"weight has dtype float32"});
  a = fwd_args(T, D, V);
  a.target = TensorRef::vector(fake(3), DType::kInt64, T + 1);
  expect_fwd_invalid(a, {"target has shape"});
  a = fwd_args(T, D, V);
  a.target.dtype = kF32;
  expect_fwd_invalid(a, {"target has dtype float32"});
  a = fwd_args(T, D, V);
  a.bias = TensorRef::vector(fake(8), kBF, V - 1);
  expect_fwd_invalid(a, {"bias has shape"});
  a = fwd_args(T, D, V);
  a.dbias = TensorRef::vector(fake(8), kBF, V);
  expect_fwd_invalid(a, {"dbias is given without bias"});
  a = fwd_args(T, D, V);
  a.dweight.dtype = DType::kFloat16;
  expect_fwd_invalid(a, {"dweight has dtype float16"});
  a = fwd_args(T, D, V);
  a.dx = TensorRef::matrix(fake(6), kBF, T, D, 0, 0);
  expect_fwd_invalid(a, {"dx", "overlapping"});
  a = fwd_args(T, D, V);
  a.loss = TensorRef::vector(fake(4), kF32, T);
  expect_fwd_invalid(a, {"loss has shape", "(1,)"});
  a = fwd_args(T, D, V, true, Reduction::kNone);
  a.loss = TensorRef::vector(fake(4), kF32, 1);
  expect_fwd_invalid(a, {"loss has shape", "(16,)"});
  a = fwd_args(T, D, V);
  a.reduction = static_cast<Reduction>(5);
  expect_fwd_invalid(a, {"reduction has value 5"});
  a = fwd_args(T, D, V);
  a.label_smoothing = 1.5f;
  expect_fwd_invalid(a, {"label_smoothing"});
  a = fwd_args(T, D, V);
  a.z_loss_scale = -1.f;
  expect_fwd_invalid(a, {"z_loss_scale"});
  a = fwd_args(T, D, V);
  a.logit_softcap = -2.f;
  expect_fwd_invalid(a, {"logit_softcap"});
  a = fwd_args(T, D, V);
  a.chunk_size = -1;
  expect_fwd_invalid(a, {"chunk_size is -1"});
  a = fwd_args(T, D, V);
  a.vocab_chunk_size = -8;
  expect_fwd_invalid(a, {"vocab_chunk_size is -8"});
  a = fwd_args(T, D, V);
  a.mode = static_cast<Mode>(3);
  expect_fwd_invalid(a, {"mode has value 3"});
  a = fwd_args(T, D, 0);
  expect_fwd_invalid(a, {"weight has shape", "V ≥ 1"});
  a = fwd_args(T, D, V);
  a.weight.device = 1;
  expect_fwd_invalid(a, {"weight is on cuda:1"});
  a = fwd_args(T, D, V);
  a.workspace_bytes = 16;
  expect_fwd_invalid(a, {"workspace has 16 bytes", "linear_cross_entropy_fwd_workspace_size"});
  a = fwd_args(T, D, V);
  a.workspace = static_cast<char*>(a.workspace) + 16;
  expect_fwd_invalid(a, {"256-byte aligned"});
  // Valid arguments reach CUDA (hidden: no device).
  expect_reaches_cuda([&] { linear_cross_entropy_fwd(fwd_args(T, D, V), nullptr); }, "fwd");
  auto e = fwd_args(0, D, V, true, Reduction::kNone);  // T = 0 is valid
  expect_reaches_cuda([&] { linear_cross_entropy_fwd(e, nullptr); }, "fwd T = 0");
}

TEST(LceValidation, BackwardAndScale) {
  const int64_t T = 16, D = 64, V = 100;
  auto b = bwd_args(T, D, V);
  b.lse = TensorRef();
  expect_bwd_invalid(b, {"lse is absent"});
  b = bwd_args(T, D, V);
  b.dloss = TensorRef::vector(fake(5), kF32, T - 1);
  expect_bwd_invalid(b, {"dloss has shape"});
  b = bwd_args(T, D, V);
  b.dloss = TensorRef::vector(fake(5), kF32, 1);  // one value for every row is fine
  expect_reaches_cuda([&] { linear_cross_entropy_bwd(b, nullptr); }, "bwd dloss (1)");
  b = bwd_args(T, D, V);
  b.workspace = nullptr;
  expect_bwd_invalid(b, {"workspace has 0 bytes"});
  expect_reaches_cuda([&] { linear_cross_entropy_bwd(bwd_args(T, D, V), nullptr); }, "bwd");

  LinearCrossEntropyScaleGradArgs s;
  expect_invalid([&] { linear_cross_entropy_scale_grad(s, nullptr); },
                 "linear_cross_entropy_scale_grad", {"grad_output is absent"});
  s.grad_output = TensorRef::vector(fake(1), kF32, 1);
  s.dbias = TensorRef::matrix(fake(2), kBF, 2, 3);
  expect_invalid([&] { linear_cross_entropy_scale_grad(s, nullptr); },
                 "linear_cross_entropy_scale_grad", {"dbias has 2 dimensions"});
  s.dbias = TensorRef();
  s.dweight = TensorRef::matrix(fake(2), kBF, 4, 8, 1);
  expect_invalid([&] { linear_cross_entropy_scale_grad(s, nullptr); },
                 "linear_cross_entropy_scale_grad", {"dweight is on cuda:1"});
}

}  // namespace
}  // namespace quack
