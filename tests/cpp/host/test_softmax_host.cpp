// Tier 1 (no GPU): every validation path of softmax_fwd / log_softmax_fwd / softmax_bwd /
// log_softmax_bwd throws quack::InvalidArgument naming the function and the argument before any
// CUDA call; valid arguments reach CUDA, which is hidden here (CUDA_VISIBLE_DEVICES="", as in
// test_validation.cpp), and report "no CUDA driver/GPU"; the float64 reference on hand values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "host_test_util.h"
#include "quack/errors.h"
#include "quack/softmax.h"
#include "reference/softmax_ref.h"

namespace quack {
namespace {

using namespace test;

constexpr int64_t M = 8, N = 4096;

SoftmaxFwdArgs fwd_args() {
  SoftmaxFwdArgs a;
  a.x = TensorRef::matrix(fake(1), DType::kBFloat16, M, N);
  a.out = TensorRef::matrix(fake(2), DType::kBFloat16, M, N);
  return a;
}

SoftmaxBwdArgs bwd_args() {
  SoftmaxBwdArgs a;
  a.y = TensorRef::matrix(fake(1), DType::kFloat32, M, N);
  a.dy = TensorRef::matrix(fake(2), DType::kFloat32, M, N);
  a.dx = TensorRef::matrix(fake(3), DType::kBFloat16, M, N);
  return a;
}

void expect_fwd_invalid(const SoftmaxFwdArgs& a, const std::vector<std::string>& parts) {
  expect_invalid([&] { softmax_fwd(a, nullptr); }, "softmax_fwd", parts);
  expect_invalid([&] { log_softmax_fwd(a, nullptr); }, "log_softmax_fwd", parts);
}
void expect_bwd_invalid(const SoftmaxBwdArgs& a, const std::vector<std::string>& parts) {
  expect_invalid([&] { softmax_bwd(a, nullptr); }, "softmax_bwd", parts);
  expect_invalid([&] { log_softmax_bwd(a, nullptr); }, "log_softmax_bwd", parts);
}

TEST(SoftmaxValidation, Baseline) {
  ASSERT_TRUE(kCudaHidden);
  expect_reaches_cuda([] { softmax_fwd(fwd_args(), nullptr); }, "softmax_fwd");
  expect_reaches_cuda([] { log_softmax_fwd(fwd_args(), nullptr); }, "log_softmax_fwd");
  expect_reaches_cuda([] { softmax_bwd(bwd_args(), nullptr); }, "softmax_bwd");
  expect_reaches_cuda([] { log_softmax_bwd(bwd_args(), nullptr); }, "log_softmax_bwd");
  // Valid odd layouts: broadcast x rows (stride 0), a transposed out, column-strided dy,
  // dx = dy (in place), dtype mixes without a vector-path instance.
  SoftmaxFwdArgs a = fwd_args();
  a.x.stride[0] = 0;
  a.out.stride[0] = 1;
  a.out.stride[1] = M;
  a.out.dtype = DType::kFloat16;
  expect_reaches_cuda([&] { softmax_fwd(a, nullptr); }, "strided fwd");
  SoftmaxBwdArgs b = bwd_args();
  b.dy.stride[1] = 2;
  b.dy.stride[0] = 2 * N;
  b.y.dtype = DType::kBFloat16;
  expect_reaches_cuda([&] { softmax_bwd(b, nullptr); }, "strided bwd");
  b = bwd_args();
  b.dx = b.dy;
  expect_reaches_cuda([&] { softmax_bwd(b, nullptr); }, "in place bwd");
}

TEST(SoftmaxValidation, EmptyInputsReturnWithoutCuda) {
  SoftmaxFwdArgs a;
  a.x = TensorRef::matrix(nullptr, DType::kFloat32, 0, 4096);
  a.out = TensorRef::matrix(nullptr, DType::kFloat32, 0, 4096);
  EXPECT_NO_THROW(softmax_fwd(a, nullptr));
  a.x = TensorRef::matrix(nullptr, DType::kFloat32, 5, 0);
  a.out = TensorRef::matrix(nullptr, DType::kFloat32, 5, 0);
  EXPECT_NO_THROW(log_softmax_fwd(a, nullptr));
  SoftmaxBwdArgs b;
  b.y = TensorRef::matrix(nullptr, DType::kBFloat16, 0, 7);
  b.dy = TensorRef::matrix(nullptr, DType::kBFloat16, 0, 7);
  b.dx = TensorRef::matrix(nullptr, DType::kBFloat16, 0, 7);
  EXPECT_NO_THROW(softmax_bwd(b, nullptr));
  EXPECT_NO_THROW(log_softmax_bwd(b, nullptr));
}

TEST(SoftmaxValidation, X) {
  SoftmaxFwdArgs a = fwd_args();
  a.x = TensorRef();
  expect_fwd_invalid(a, {"x", "absent"});
  a = fwd_args();
  a.x = TensorRef::vector(fake(1), DType::kBFloat16, N);
  expect_fwd_invalid(a, {"x", "1 dimensions", "expected 2"});
  a = fwd_args();
  a.x.dtype = DType::kInt64;
  expect_fwd_invalid(a, {"x", "int64", "float32"});
  a = fwd_args();
  a.x.device = -1;
  expect_fwd_invalid(a, {"x", "host memory"});
  a = fwd_args();
  a.x.data = nullptr;
  expect_fwd_invalid(a, {"x", "null"});
  a = fwd_args();
  a.x.stride[1] = -1;
  expect_fwd_invalid(a, {"x", "negative stride"});
}

TEST(SoftmaxValidation, NegativeSizesNameTheArgument) {
  SoftmaxFwdArgs a = fwd_args();
  a.x.shape[0] = -3;  // negative M
  expect_fwd_invalid(a, {"x", "negative size", "(-3, 4096)"});
  a = fwd_args();
  a.x.shape[1] = -1;  // negative N
  a.out.shape[1] = -1;
  expect_fwd_invalid(a, {"x", "negative size"});
  a = fwd_args();
  a.out.shape[0] = -8;
  expect_fwd_invalid(a, {"out", "negative size"});
  SoftmaxBwdArgs b = bwd_args();
  b.y.shape[0] = -1;
  expect_bwd_invalid(b, {"y", "negative size"});
  b = bwd_args();
  b.dy.shape[1] = -4096;
  expect_bwd_invalid(b, {"dy", "negative size"});
}

TEST(SoftmaxValidation, Out) {
  SoftmaxFwdArgs a = fwd_args();
  a.out = TensorRef();
  expect_fwd_invalid(a, {"out", "absent"});
  a = fwd_args();
  a.out.shape[1] = N - 1;
  expect_fwd_invalid(a, {"out", "4095", "expected (8, 4096)"});
  a = fwd_args();
  a.out.shape[0] = M + 1;
  expect_fwd_invalid(a, {"out", "(9, 4096)"});
  a = fwd_args();
  a.out.dtype = DType::kInt32;
  expect_fwd_invalid(a, {"out", "int32"});
  a = fwd_args();
  a.out.device = 1;
  expect_fwd_invalid(a, {"out", "cuda:1", "expected cuda:0"});
  a = fwd_args();
  a.out.stride[0] = 0;  // every row on one address
  expect_fwd_invalid(a, {"out", "overlapping"});
  a = fwd_args();
  a.out.stride[0] = N / 2;  // rows overlap by half
  expect_fwd_invalid(a, {"out", "overlapping"});
  a = fwd_args();
  a.out.stride[0] = -N;
  expect_fwd_invalid(a, {"out", "negative stride"});
}

TEST(SoftmaxValidation, Backward) {
  SoftmaxBwdArgs a = bwd_args();
  a.y = TensorRef();
  expect_bwd_invalid(a, {"y", "absent"});
  a = bwd_args();
  a.dy = TensorRef();
  expect_bwd_invalid(a, {"dy", "absent"});
  a = bwd_args();
  a.dx = TensorRef();
  expect_bwd_invalid(a, {"dx", "absent"});
  a = bwd_args();
  a.dy.shape[1] = 4095;
  expect_bwd_invalid(a, {"dy", "4095"});
  a = bwd_args();
  a.dx.shape[0] = 7;
  expect_bwd_invalid(a, {"dx", "(7, 4096)"});
  a = bwd_args();
  a.dy.dtype = DType::kInt32;
  expect_bwd_invalid(a, {"dy", "int32"});
  a = bwd_args();
  a.dy.device = 2;
  expect_bwd_invalid(a, {"dy", "cuda:2"});
  a = bwd_args();
  a.dx.stride[0] = 0;
  expect_bwd_invalid(a, {"dx", "overlapping"});
  a = bwd_args();
  a.y.ndim = 3;
  a.y.shape[2] = 1;
  a.y.stride[2] = 1;
  expect_bwd_invalid(a, {"y", "3 dimensions"});
}

// ---------------------------------------------------------------- float64 reference

TEST(SoftmaxReference, HandValues) {
  const double inf = std::numeric_limits<double>::infinity();
  // Row 0: (0, ln 2, ln 3): e^x = 1, 2, 3 -> 1/6, 2/6, 3/6; log: x − ln 6.
  // Row 1: (−inf, 5, −inf): one finite entry -> (0, 1, 0); log: (−inf, 0, −inf).
  // Row 2: all −inf -> NaN. Row 3: a NaN -> NaN.
  const double x[] = {0.0, std::log(2.0), std::log(3.0), -inf, 5.0, -inf,
                      -inf, -inf, -inf, 1.0, std::nan(""), 2.0};
  const auto y = ref::softmax_fwd_ref(4, 3, x, false);
  EXPECT_NEAR(y[0], 1.0 / 6, 1e-15);
  EXPECT_NEAR(y[1], 2.0 / 6, 1e-15);
  EXPECT_NEAR(y[2], 3.0 / 6, 1e-15);
  EXPECT_EQ(y[3], 0.0);
  EXPECT_EQ(y[4], 1.0);
  EXPECT_EQ(y[5], 0.0);
  for (int j = 6; j < 12; ++j) EXPECT_TRUE(std::isnan(y[j])) << j;
  const auto ly = ref::softmax_fwd_ref(4, 3, x, true);
  EXPECT_NEAR(ly[0], -std::log(6.0), 1e-15);
  EXPECT_NEAR(ly[2], std::log(3.0) - std::log(6.0), 1e-15);
  EXPECT_EQ(ly[3], -inf);
  EXPECT_EQ(ly[4], 0.0);
  for (int j = 6; j < 12; ++j) EXPECT_TRUE(std::isnan(ly[j])) << j;
  // Shift invariance.
  const double xs[] = {100.0, 100.0 + std::log(2.0), 100.0 + std::log(3.0)};
  const auto ys = ref::softmax_fwd_ref(1, 3, xs, false);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(ys[j], y[j], 1e-13);
}

TEST(SoftmaxReference, BackwardHandValues) {
  // y = (0.25, 0.75), dy = (1, 3): Σ y·dy = 2.5; dx = (0.25·(1 − 2.5), 0.75·(3 − 2.5)).
  const double y[] = {0.25, 0.75}, dy[] = {1.0, 3.0};
  const auto r = ref::softmax_bwd_ref(1, 2, y, dy, false);
  EXPECT_DOUBLE_EQ(r.dx[0], -0.375);
  EXPECT_DOUBLE_EQ(r.dx[1], 0.375);
  EXPECT_DOUBLE_EQ(r.terms, 0.75 * 3.0 + 0.75 * 2.5);
  // The gradient of softmax sums to 0 over a row.
  EXPECT_NEAR(r.dx[0] + r.dx[1], 0.0, 1e-15);
  // log_softmax: y = ln(0.25, 0.75), dy = (1, 3): Σ dy = 4; dx = dy − e^y·4 = (0, 0).
  const double ly[] = {std::log(0.25), std::log(0.75)};
  const auto lr = ref::softmax_bwd_ref(1, 2, ly, dy, true);
  EXPECT_NEAR(lr.dx[0], 0.0, 1e-15);
  EXPECT_NEAR(lr.dx[1], 0.0, 1e-15);
  EXPECT_DOUBLE_EQ(lr.terms, 3.0 + 3.0);
}

// Aliasing (the header: out may be x itself, dx may be dy or y itself; else memory of their
// own): exact in place is accepted, a partial overlap or x's memory in another layout refused.
TEST(SoftmaxValidation, OutputAliasing) {
  SoftmaxFwdArgs a = fwd_args();
  a.out = a.x;
  expect_reaches_cuda([&] { softmax_fwd(a, nullptr); }, "fwd in place");
  a = fwd_args();
  a.out.data = static_cast<char*>(a.x.data) + 2 * N;  // one bf16 row into x
  expect_fwd_invalid(a, {"out overlaps x", "in place", "separate memory"});
  a = fwd_args();
  a.out = TensorRef::matrix(a.x.data, DType::kBFloat16, M, N, 0, 1, M);  // x's bytes, transposed
  expect_fwd_invalid(a, {"out overlaps x"});
  SoftmaxBwdArgs b = bwd_args();
  b.dx = b.y;
  expect_reaches_cuda([&] { softmax_bwd(b, nullptr); }, "bwd in place of y");
  b = bwd_args();
  b.dx.data = static_cast<char*>(b.dy.data) + 4 * N;  // one fp32 row into dy
  expect_bwd_invalid(b, {"dx overlaps dy"});
  b = bwd_args();
  b.dx.data = b.y.data;  // y's address, another dtype (bf16 over fp32 y)
  expect_bwd_invalid(b, {"dx overlaps y"});
}

// A device mismatch names the backward's reference argument, y.
TEST(SoftmaxValidation, DeviceReferenceIsY) {
  SoftmaxBwdArgs b = bwd_args();
  b.dy.device = 1;
  expect_bwd_invalid(b, {"dy is on cuda:1", "(the device of y)"});
}

}  // namespace
}  // namespace quack
