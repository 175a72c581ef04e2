// Tier 1: every validation path of rmsnorm_fwd / rmsnorm_bwd / rmsnorm_bwd_workspace_size
// throws quack::InvalidArgument (a std::invalid_argument) naming the function and the
// argument, before any CUDA call (no GPU).
//
// Pointers are fake, 16-byte-aligned and never dereferenced: validation throws first. So that
// a validation regression can never launch a kernel on them when this binary runs on a GPU
// machine, CUDA is hidden from the process (CUDA_VISIBLE_DEVICES="" before the runtime
// initialises): a call that gets past validation meets "no device" and throws CudaError
// (std::runtime_error), which these tests report as a failure. The "Baseline" tests use that
// to show the unmodified arguments are valid, so each negative test breaks exactly one thing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "host_test_util.h"
#include "quack/errors.h"
#include "quack/norm.h"

namespace quack {
namespace {

using namespace test;

constexpr int64_t M = 8, N = 4096;

RmsNormFwdArgs fwd_args() {
  RmsNormFwdArgs a;
  a.x = TensorRef::matrix(fake(1), DType::kBFloat16, M, N);
  a.weight = TensorRef::vector(fake(2), DType::kFloat32, N);
  a.bias = TensorRef::vector(fake(3), DType::kBFloat16, N);
  a.residual = TensorRef::matrix(fake(4), DType::kFloat32, M, N);
  a.out = TensorRef::matrix(fake(5), DType::kBFloat16, M, N);
  a.residual_out = TensorRef::matrix(fake(6), DType::kFloat32, M, N);
  a.rstd = TensorRef::vector(fake(7), DType::kFloat32, M);
  a.eps = 1e-6f;
  return a;
}

RmsNormBwdArgs bwd_args() {
  RmsNormBwdArgs a;
  a.x = TensorRef::matrix(fake(1), DType::kBFloat16, M, N);
  a.weight = TensorRef::vector(fake(2), DType::kFloat32, N);
  a.dout = TensorRef::matrix(fake(3), DType::kBFloat16, M, N);
  a.rstd = TensorRef::vector(fake(4), DType::kFloat32, M);
  a.dresidual_out = TensorRef::matrix(fake(5), DType::kFloat32, M, N);
  a.dx = TensorRef::matrix(fake(6), DType::kBFloat16, M, N);
  a.dresidual = TensorRef::matrix(fake(7), DType::kFloat32, M, N);
  a.dweight = TensorRef::vector(fake(8), DType::kFloat32, N);
  a.dbias = TensorRef::vector(fake(9), DType::kFloat32, N);
  return a;
}

void expect_fwd_invalid(const RmsNormFwdArgs& a, const std::vector<std::string>& parts) {
  expect_invalid([&] { rmsnorm_fwd(a, nullptr); }, "rmsnorm_fwd", parts);
}

// The backward is checked through both entry points: rmsnorm_bwd_workspace_size and
// rmsnorm_bwd itself. The workspace query currently reports as "rmsnorm_bwd" (plan_bwd's
// ArgCheck); its own name is accepted too, for when the library names it.
void expect_bwd_invalid(const RmsNormBwdArgs& a, const std::vector<std::string>& parts) {
  expect_invalid([&] { (void)rmsnorm_bwd_workspace_size(a); },
                 "rmsnorm_bwd_workspace_size|rmsnorm_bwd", parts);
  expect_invalid([&] { rmsnorm_bwd(a, fake(10), size_t{1} << 30, nullptr); }, "rmsnorm_bwd",
                 parts);
}

TEST(ValidationSetup, CudaIsHidden) { EXPECT_TRUE(kCudaHidden); }

// ---------------------------------------------------------------- forward

TEST(RmsNormFwdValidation, Baseline) {
  expect_reaches_cuda([] { rmsnorm_fwd(fwd_args(), nullptr); }, "full fwd args");
  RmsNormFwdArgs a;  // minimal: x and out
  a.x = TensorRef::matrix(fake(1), DType::kFloat32, 3, 5);
  a.out = TensorRef::matrix(fake(2), DType::kFloat32, 3, 5);
  expect_reaches_cuda([&] { rmsnorm_fwd(a, nullptr); }, "minimal fwd args");
  // Strided and broadcast layouts that are valid (general path).
  RmsNormFwdArgs s = fwd_args();
  s.x.stride[0] = 0;       // one row broadcast to all rows: an input may overlap itself
  s.weight.stride[0] = 2;  // strided weight
  s.out.stride[0] = 1;     // transposed output: (M, N) with strides (1, M)
  s.out.stride[1] = M;
  s.rstd.stride[0] = 3;
  expect_reaches_cuda([&] { rmsnorm_fwd(s, nullptr); }, "strided fwd args");
}

TEST(RmsNormFwdValidation, EmptyBatchReturnsWithoutCuda) {
  // M = 0: nothing to do; returns before any CUDA call (CUDA is hidden: a call would throw).
  RmsNormFwdArgs a = fwd_args();
  for (TensorRef* t : {&a.x, &a.residual, &a.out, &a.residual_out}) t->shape[0] = 0;
  a.rstd.shape[0] = 0;
  EXPECT_NO_THROW(rmsnorm_fwd(a, nullptr));
  // Shape (0, 0) too (N = 0 only matters with rows), with null data pointers.
  RmsNormFwdArgs z;
  z.x = TensorRef::matrix(nullptr, DType::kFloat16, 0, 0);
  z.out = TensorRef::matrix(nullptr, DType::kFloat16, 0, 0);
  EXPECT_NO_THROW(rmsnorm_fwd(z, nullptr));
}

TEST(RmsNormFwdValidation, X) {
  RmsNormFwdArgs a = fwd_args();
  a.x = TensorRef();
  expect_fwd_invalid(a, {"x", "absent"});

  a = fwd_args();
  a.x.ndim = 3;  // (8, 4096, 1)
  a.x.shape[2] = 1;
  a.x.stride[2] = 1;
  expect_fwd_invalid(a, {"x", "3 dimensions", "expected 2"});

  a = fwd_args();
  a.x = TensorRef::vector(fake(1), DType::kBFloat16, N);
  expect_fwd_invalid(a, {"x", "1 dimensions", "expected 2"});

  a = fwd_args();
  a.x.dtype = DType::kInt32;
  expect_fwd_invalid(a, {"x", "int32", "float32"});

  a = fwd_args();
  a.x.dtype = DType::kInt64;
  expect_fwd_invalid(a, {"x", "int64"});

  a = fwd_args();
  a.x.device = -1;
  expect_fwd_invalid(a, {"x", "host memory"});

  a = fwd_args();
  a.x.data = nullptr;
  expect_fwd_invalid(a, {"x", "null"});

  a = fwd_args();
  a.x.stride[0] = -N;
  expect_fwd_invalid(a, {"x", "negative stride"});

  a = fwd_args();
  a.x.stride[1] = -1;
  expect_fwd_invalid(a, {"x", "negative stride"});
}

TEST(RmsNormFwdValidation, NegativeSizesNameTheArgument) {
  RmsNormFwdArgs a = fwd_args();
  a.x.shape[0] = -M;  // M < 0 reached the GPU as "any extent" before
  expect_fwd_invalid(a, {"x", "negative size", "(-8, 4096)"});
  a = fwd_args();
  a.x.shape[1] = -1;
  expect_fwd_invalid(a, {"x", "negative size"});
  a = fwd_args();
  a.residual.shape[0] = -M;
  expect_fwd_invalid(a, {"residual", "negative size"});
  a = fwd_args();
  a.rstd.shape[0] = -M;
  expect_fwd_invalid(a, {"rstd", "negative size"});
}

TEST(RmsNormFwdValidation, Weight) {
  RmsNormFwdArgs a = fwd_args();
  a.weight.shape[0] = 4095;
  expect_fwd_invalid(a, {"weight", "4095", "4096"});

  a = fwd_args();
  a.weight.shape[0] = 4097;
  expect_fwd_invalid(a, {"weight", "4097", "4096"});

  a = fwd_args();
  a.weight = TensorRef::matrix(fake(2), DType::kFloat32, 1, N);
  expect_fwd_invalid(a, {"weight", "4096"});

  a = fwd_args();
  a.weight.dtype = DType::kInt32;
  expect_fwd_invalid(a, {"weight", "int32"});

  a = fwd_args();
  a.weight.device = 1;
  expect_fwd_invalid(a, {"weight", "cuda:1", "cuda:0"});

  a = fwd_args();
  a.weight.device = -1;
  expect_fwd_invalid(a, {"weight", "host memory"});

  a = fwd_args();
  a.weight.stride[0] = -1;
  expect_fwd_invalid(a, {"weight", "negative stride"});
}

TEST(RmsNormFwdValidation, Bias) {
  RmsNormFwdArgs a = fwd_args();
  a.bias.shape[0] = 4095;
  expect_fwd_invalid(a, {"bias", "4095", "4096"});

  a = fwd_args();
  a.bias.dtype = DType::kInt64;
  expect_fwd_invalid(a, {"bias", "int64"});

  a = fwd_args();
  a.bias.device = 2;
  expect_fwd_invalid(a, {"bias", "cuda:2"});
}

TEST(RmsNormFwdValidation, Residual) {
  RmsNormFwdArgs a = fwd_args();
  a.residual.shape[0] = M + 1;
  expect_fwd_invalid(a, {"residual", "(9, 4096)", "(8, 4096)"});

  a = fwd_args();
  a.residual.shape[1] = N - 1;
  expect_fwd_invalid(a, {"residual", "4095", "4096"});

  a = fwd_args();
  a.residual.dtype = DType::kInt32;
  expect_fwd_invalid(a, {"residual", "int32"});

  a = fwd_args();
  a.residual.device = 1;
  expect_fwd_invalid(a, {"residual", "cuda:1"});
}

TEST(RmsNormFwdValidation, Out) {
  RmsNormFwdArgs a = fwd_args();
  a.out = TensorRef();
  expect_fwd_invalid(a, {"out", "absent"});

  a = fwd_args();
  a.out.shape[1] = N + 1;
  expect_fwd_invalid(a, {"out", "(8, 4097)", "(8, 4096)"});

  a = fwd_args();
  a.out.shape[0] = M - 1;
  expect_fwd_invalid(a, {"out", "(7, 4096)"});

  a = fwd_args();
  a.out.dtype = DType::kInt32;
  expect_fwd_invalid(a, {"out", "int32"});

  a = fwd_args();
  a.out.device = -1;
  expect_fwd_invalid(a, {"out", "host memory"});

  a = fwd_args();
  a.out.device = 3;
  expect_fwd_invalid(a, {"out", "cuda:3"});

  a = fwd_args();
  a.out.stride[0] = 0;  // every row at one address
  expect_fwd_invalid(a, {"out", "overlapping"});

  a = fwd_args();
  a.out.stride[0] = N / 2;  // rows overlap by half
  expect_fwd_invalid(a, {"out", "overlapping"});

  a = fwd_args();
  a.out.stride[1] = 0;
  expect_fwd_invalid(a, {"out", "overlapping"});

  a = fwd_args();
  a.out.stride[0] = -N;
  expect_fwd_invalid(a, {"out", "negative stride"});
}

TEST(RmsNormFwdValidation, ResidualOut) {
  RmsNormFwdArgs a = fwd_args();
  a.residual_out.shape[1] = 4095;
  expect_fwd_invalid(a, {"residual_out", "4095"});

  a = fwd_args();
  a.residual_out.stride[0] = 0;
  expect_fwd_invalid(a, {"residual_out", "overlapping"});

  a = fwd_args();
  a.residual_out.dtype = DType::kInt32;
  expect_fwd_invalid(a, {"residual_out", "int32"});

  a = fwd_args();
  a.residual_out.device = 1;
  expect_fwd_invalid(a, {"residual_out", "cuda:1"});
}

TEST(RmsNormFwdValidation, Rstd) {
  RmsNormFwdArgs a = fwd_args();
  a.rstd.dtype = DType::kBFloat16;
  expect_fwd_invalid(a, {"rstd", "bfloat16", "float32"});

  a = fwd_args();
  a.rstd.dtype = DType::kFloat16;
  expect_fwd_invalid(a, {"rstd", "float16", "float32"});

  a = fwd_args();
  a.rstd.shape[0] = M + 1;
  expect_fwd_invalid(a, {"rstd", "9", "8"});

  a = fwd_args();
  a.rstd = TensorRef::matrix(fake(7), DType::kFloat32, M, 1);
  expect_fwd_invalid(a, {"rstd"});

  a = fwd_args();
  a.rstd.device = 1;
  expect_fwd_invalid(a, {"rstd", "cuda:1"});

  a = fwd_args();
  a.rstd.stride[0] = -1;
  expect_fwd_invalid(a, {"rstd", "negative stride"});

  a = fwd_args();
  a.rstd.stride[0] = 0;  // every row's rstd at one address: an output race
  expect_fwd_invalid(a, {"rstd", "overlapping"});
}

// N = 0 with M > 0 (norm.h, as torch): valid; nothing to do without rstd (no CUDA call), rstd
// filled with NaN by a memset (reaches the hidden CUDA); bad arguments still refused.
TEST(RmsNormFwdValidation, ZeroColumnsWithRows) {
  RmsNormFwdArgs a;
  a.x = TensorRef::matrix(fake(1), DType::kFloat32, 4, 0);
  a.out = TensorRef::matrix(fake(2), DType::kFloat32, 4, 0);
  EXPECT_NO_THROW(rmsnorm_fwd(a, nullptr));
  a.rstd = TensorRef::vector(fake(3), DType::kFloat32, 4);
  expect_reaches_cuda([&] { rmsnorm_fwd(a, nullptr); }, "rstd of empty rows");
  a.rstd = TensorRef::vector(fake(3), DType::kFloat32, 5);
  expect_fwd_invalid(a, {"rstd has shape"});
}

TEST(RmsNormFwdValidation, Eps) {
  RmsNormFwdArgs a = fwd_args();
  a.eps = -1e-6f;
  expect_fwd_invalid(a, {"eps"});
  a.eps = std::nanf("");
  expect_fwd_invalid(a, {"eps"});
  a.eps = 0.f;  // eps = 0 is allowed
  expect_reaches_cuda([&] { rmsnorm_fwd(a, nullptr); }, "eps = 0");
}

TEST(RmsNormFwdValidation, WeightOffset) {
  RmsNormFwdArgs a = fwd_args();
  a.weight_offset = std::nanf("");
  expect_fwd_invalid(a, {"weight_offset", "finite"});
  a.weight_offset = INFINITY;
  expect_fwd_invalid(a, {"weight_offset", "finite"});
  a.weight_offset = 1.f;  // Gemma's
  expect_reaches_cuda([&] { rmsnorm_fwd(a, nullptr); }, "weight_offset = 1");
}

// ---------------------------------------------------------------- backward

TEST(RmsNormBwdValidation, Baseline) {
  expect_reaches_cuda([] { (void)rmsnorm_bwd_workspace_size(bwd_args()); }, "workspace size");
  expect_reaches_cuda([] { rmsnorm_bwd(bwd_args(), fake(10), size_t{1} << 30, nullptr); },
                      "full bwd args");
  RmsNormBwdArgs a;  // minimal: x, dout, rstd, dx
  a.x = TensorRef::matrix(fake(1), DType::kFloat16, 3, 5);
  a.dout = TensorRef::matrix(fake(2), DType::kFloat16, 3, 5);
  a.rstd = TensorRef::vector(fake(3), DType::kFloat32, 3);
  a.dx = TensorRef::matrix(fake(4), DType::kFloat16, 3, 5);
  expect_reaches_cuda([&] { (void)rmsnorm_bwd_workspace_size(a); }, "minimal bwd args");
  // dout expanded (both strides 0), column-strided and transposed are valid inputs.
  for (auto st : {std::pair<int64_t, int64_t>{0, 0}, {2 * N, 2}, {1, M}}) {
    RmsNormBwdArgs s = bwd_args();
    s.dout.stride[0] = st.first;
    s.dout.stride[1] = st.second;
    expect_reaches_cuda([&] { (void)rmsnorm_bwd_workspace_size(s); }, "strided dout");
  }
}

TEST(RmsNormBwdValidation, EmptyBatchWorkspaceWithoutCuda) {
  // M = 0: no row kernel, so no workspace, and the size is known without CUDA.
  RmsNormBwdArgs a = bwd_args();
  for (TensorRef* t : {&a.x, &a.dout, &a.dresidual_out, &a.dx, &a.dresidual}) t->shape[0] = 0;
  a.rstd.shape[0] = 0;
  size_t ws = 1;
  EXPECT_NO_THROW(ws = rmsnorm_bwd_workspace_size(a));
  EXPECT_EQ(ws, 0u);
  // (0, 0): nothing at all to do, not even the zero-fill of dweight / dbias (N = 0).
  RmsNormBwdArgs z;
  z.x = TensorRef::matrix(nullptr, DType::kBFloat16, 0, 0);
  z.weight = TensorRef::vector(nullptr, DType::kBFloat16, 0);
  z.dout = TensorRef::matrix(nullptr, DType::kBFloat16, 0, 0);
  z.rstd = TensorRef::vector(nullptr, DType::kFloat32, 0);
  z.dx = TensorRef::matrix(nullptr, DType::kBFloat16, 0, 0);
  z.dweight = TensorRef::vector(nullptr, DType::kFloat32, 0);
  EXPECT_EQ(rmsnorm_bwd_workspace_size(z), 0u);
  EXPECT_NO_THROW(rmsnorm_bwd(z, nullptr, 0, nullptr));
}

TEST(RmsNormBwdValidation, NegativeSizesNameTheArgument) {
  RmsNormBwdArgs a = bwd_args();
  a.x.shape[0] = -M;
  expect_bwd_invalid(a, {"x", "negative size"});
  a = bwd_args();
  a.dout.shape[1] = -N;
  expect_bwd_invalid(a, {"dout", "negative size"});
}

TEST(RmsNormBwdValidation, X) {
  RmsNormBwdArgs a = bwd_args();
  a.x = TensorRef();
  expect_bwd_invalid(a, {"x", "absent"});

  a = bwd_args();
  a.x.ndim = 3;
  a.x.shape[2] = 1;
  expect_bwd_invalid(a, {"x", "3 dimensions"});

  a = bwd_args();
  a.x.dtype = DType::kInt32;
  expect_bwd_invalid(a, {"x", "int32"});

  a = bwd_args();
  a.x.device = -1;
  expect_bwd_invalid(a, {"x", "host memory"});

  a = bwd_args();
  a.x.stride[1] = -1;
  expect_bwd_invalid(a, {"x", "negative stride"});
}

TEST(RmsNormBwdValidation, Weight) {
  RmsNormBwdArgs a = bwd_args();
  a.weight.shape[0] = 4095;
  expect_bwd_invalid(a, {"weight", "4095", "4096"});

  a = bwd_args();
  a.weight.dtype = DType::kInt32;
  expect_bwd_invalid(a, {"weight", "int32"});

  a = bwd_args();
  a.weight.device = 1;
  expect_bwd_invalid(a, {"weight", "cuda:1"});
}

TEST(RmsNormBwdValidation, Dout) {
  RmsNormBwdArgs a = bwd_args();
  a.dout = TensorRef();
  expect_bwd_invalid(a, {"dout", "absent"});

  a = bwd_args();
  a.dout.shape[1] = N / 2;
  expect_bwd_invalid(a, {"dout", "2048", "4096"});

  a = bwd_args();
  a.dout.dtype = DType::kInt32;
  expect_bwd_invalid(a, {"dout", "int32"});

  a = bwd_args();
  a.dout.device = 1;
  expect_bwd_invalid(a, {"dout", "cuda:1", "cuda:0"});

  a = bwd_args();
  a.dout.device = -1;
  expect_bwd_invalid(a, {"dout", "host memory"});

  a = bwd_args();
  a.dout.stride[0] = -N;
  expect_bwd_invalid(a, {"dout", "negative stride"});
}

TEST(RmsNormBwdValidation, Rstd) {
  RmsNormBwdArgs a = bwd_args();
  a.rstd = TensorRef();  // required in the backward
  expect_bwd_invalid(a, {"rstd", "absent"});

  a = bwd_args();
  a.rstd.dtype = DType::kBFloat16;
  expect_bwd_invalid(a, {"rstd", "bfloat16", "float32"});

  a = bwd_args();
  a.rstd.shape[0] = M - 1;
  expect_bwd_invalid(a, {"rstd", "7", "8"});

  a = bwd_args();
  a.rstd.device = 1;
  expect_bwd_invalid(a, {"rstd", "cuda:1"});
}

TEST(RmsNormBwdValidation, DresidualOut) {
  RmsNormBwdArgs a = bwd_args();
  a.dresidual_out.shape[0] = 1;
  expect_bwd_invalid(a, {"dresidual_out", "(1, 4096)", "(8, 4096)"});

  a = bwd_args();
  a.dresidual_out.dtype = DType::kInt64;
  expect_bwd_invalid(a, {"dresidual_out", "int64"});

  a = bwd_args();
  a.dresidual_out.device = 1;
  expect_bwd_invalid(a, {"dresidual_out", "cuda:1"});
}

TEST(RmsNormBwdValidation, Dx) {
  RmsNormBwdArgs a = bwd_args();
  a.dx = TensorRef();
  expect_bwd_invalid(a, {"dx", "absent"});

  a = bwd_args();
  a.dx.shape[1] = N + 8;
  expect_bwd_invalid(a, {"dx", "4104", "4096"});

  a = bwd_args();
  a.dx.dtype = DType::kInt32;
  expect_bwd_invalid(a, {"dx", "int32"});

  a = bwd_args();
  a.dx.stride[0] = 0;
  expect_bwd_invalid(a, {"dx", "overlapping"});

  a = bwd_args();
  a.dx.stride[0] = -N;
  expect_bwd_invalid(a, {"dx", "negative stride"});

  a = bwd_args();
  a.dx.device = -1;
  expect_bwd_invalid(a, {"dx", "host memory"});
}

TEST(RmsNormBwdValidation, Dresidual) {
  RmsNormBwdArgs a = bwd_args();
  a.dresidual.shape[0] = M + 1;
  expect_bwd_invalid(a, {"dresidual", "(9, 4096)"});

  a = bwd_args();
  a.dresidual.stride[0] = 0;
  expect_bwd_invalid(a, {"dresidual", "overlapping"});

  a = bwd_args();
  a.dresidual.device = 1;
  expect_bwd_invalid(a, {"dresidual", "cuda:1"});
}

TEST(RmsNormBwdValidation, Dweight) {
  RmsNormBwdArgs a = bwd_args();
  a.weight = TensorRef();
  expect_bwd_invalid(a, {"dweight", "weight", "absent"});

  a = bwd_args();
  a.dweight.shape[0] = 4095;
  expect_bwd_invalid(a, {"dweight", "4095", "4096"});

  a = bwd_args();
  a.dweight.dtype = DType::kInt32;
  expect_bwd_invalid(a, {"dweight", "int32"});

  a = bwd_args();
  a.dweight.stride[0] = 0;  // N elements at one address
  expect_bwd_invalid(a, {"dweight", "overlapping"});

  a = bwd_args();
  a.dweight.device = 1;
  expect_bwd_invalid(a, {"dweight", "cuda:1"});
}

TEST(RmsNormBwdValidation, Dbias) {
  RmsNormBwdArgs a = bwd_args();
  a.dbias.shape[0] = 1;
  expect_bwd_invalid(a, {"dbias", "(1,)", "(4096,)"});

  a = bwd_args();
  a.dbias.dtype = DType::kInt32;
  expect_bwd_invalid(a, {"dbias", "int32"});

  a = bwd_args();
  a.dbias.stride[0] = 0;
  expect_bwd_invalid(a, {"dbias", "overlapping"});

  a = bwd_args();
  a.dbias.device = -1;
  expect_bwd_invalid(a, {"dbias", "host memory"});
}

TEST(RmsNormBwdValidation, WeightOffset) {
  RmsNormBwdArgs a = bwd_args();
  a.weight_offset = -INFINITY;
  expect_bwd_invalid(a, {"weight_offset", "finite"});
  a.weight_offset = std::nanf("");
  expect_bwd_invalid(a, {"weight_offset", "finite"});
  a.weight_offset = 1.f;
  expect_reaches_cuda([&] { (void)rmsnorm_bwd_workspace_size(a); }, "weight_offset = 1");
}

TEST(RmsNormBwdValidation, ZeroColumnsWithRows) {
  RmsNormBwdArgs a;
  a.x = TensorRef::matrix(fake(1), DType::kFloat32, 4, 0);
  a.dout = TensorRef::matrix(fake(2), DType::kFloat32, 4, 0);
  a.rstd = TensorRef::vector(fake(3), DType::kFloat32, 4);
  a.dx = TensorRef::matrix(fake(4), DType::kFloat32, 4, 0);
  a.weight = TensorRef::vector(fake(5), DType::kFloat32, 0);
  a.dweight = TensorRef::vector(fake(6), DType::kFloat32, 0);
  // Every output empty: no workspace, no CUDA call.
  EXPECT_EQ(rmsnorm_bwd_workspace_size(a), 0u);
  EXPECT_NO_THROW(rmsnorm_bwd(a, nullptr, 0, nullptr));
  a.dx = TensorRef::matrix(fake(4), DType::kFloat32, 3, 0);
  expect_bwd_invalid(a, {"dx has shape"});
}

}  // namespace
}  // namespace quack
