// Path choice of the RMSNorm API (no GPU): the training layouts must take the vector (staged)
// path, so a heuristic change that silently sends them to the two-pass general path fails
// here. The pointers are fake, 16-byte aligned, never dereferenced (planning makes no CUDA call).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "norm/rmsnorm_tuning.h"
#include "quack/quack.h"

namespace {

using quack::DType;
using quack::TensorRef;

void* fake(int i) { return reinterpret_cast<void*>(uintptr_t{0x100000} * (i + 1)); }

struct Case {
  DType x;
  int64_t N;
};

std::string name(const Case& c) {
  return std::string(quack::dtype_name(c.x)) + " N=" + std::to_string(c.N);
}

const Case kCases[] = {
    {DType::kBFloat16, 1024},  {DType::kBFloat16, 4096},   {DType::kBFloat16, 8192},
    {DType::kBFloat16, 32768}, {DType::kBFloat16, 65536},  {DType::kBFloat16, 131072},
    {DType::kBFloat16, 262144}, {DType::kFloat16, 4096},   {DType::kFloat32, 1024},
    {DType::kFloat32, 4096},   {DType::kFloat32, 32768},   {DType::kFloat32, 131072},
};

TEST(RmsNormPath, ForwardTrainingLayoutsTakeTheVectorPath) {
  const int64_t M = 8192;
  for (const Case& c : kCases) {
    for (int variant = 0; variant < 3; ++variant) {  // plain; bf16/x residual; fp32 residual
      quack::RmsNormFwdArgs a;
      a.x = TensorRef::matrix(fake(0), c.x, M, c.N);
      a.weight = TensorRef::vector(fake(1), DType::kFloat32, c.N);
      a.out = TensorRef::matrix(fake(2), c.x, M, c.N);
      a.rstd = TensorRef::vector(fake(3), DType::kFloat32, M);
      if (variant > 0) {
        const DType r = variant == 1 ? c.x : DType::kFloat32;
        a.residual = TensorRef::matrix(fake(4), r, M, c.N);
        a.residual_out = TensorRef::matrix(fake(5), r, M, c.N);
      }
      // An fp32 residual at N > 131072 needs > 227 KB of staged slices even in 16-CTA clusters:
      // documented general path.
      if (c.N > 131072 && variant == 2) continue;
      EXPECT_TRUE(quack::detail::rmsnorm_fwd_vector_path(a)) << name(c) << " variant " << variant;
    }
  }
}

TEST(RmsNormPath, BackwardTrainingLayoutsTakeTheVectorPath) {
  const int64_t M = 8192;
  for (const Case& c : kCases) {
    if (c.x == DType::kFloat32 && c.N > 131072) continue;  // documented vector-path limit
    for (DType dout : {c.x, DType::kBFloat16}) {  // fp32 residual stream with bf16 dy too
      quack::RmsNormBwdArgs a;
      a.x = TensorRef::matrix(fake(0), c.x, M, c.N);
      a.weight = TensorRef::vector(fake(1), DType::kFloat32, c.N);
      a.dout = TensorRef::matrix(fake(2), dout, M, c.N);
      a.rstd = TensorRef::vector(fake(3), DType::kFloat32, M);
      a.dx = TensorRef::matrix(fake(4), dout, M, c.N);
      a.dweight = TensorRef::vector(fake(5), DType::kFloat32, c.N);
      EXPECT_TRUE(quack::detail::rmsnorm_bwd_vector_path(a))
          << name(c) << " dout " << quack::dtype_name(dout);
    }
  }
}

TEST(RmsNormPath, UnalignedRowsTakeTheGeneralPath) {
  quack::RmsNormFwdArgs a;
  a.x = TensorRef::matrix(fake(0), DType::kBFloat16, 64, 4096, 0, /*row_stride=*/4097);
  a.out = TensorRef::matrix(fake(2), DType::kBFloat16, 64, 4096);
  EXPECT_FALSE(quack::detail::rmsnorm_fwd_vector_path(a));
}

// ------------------------------------------------------------------ simple forward path

quack::RmsNormFwdArgs simple_args(DType x, int64_t M, int64_t N, DType w) {
  quack::RmsNormFwdArgs a;
  a.x = TensorRef::matrix(fake(0), x, M, N);
  a.weight = TensorRef::vector(fake(1), w, N);
  a.out = TensorRef::matrix(fake(2), x, M, N);
  a.rstd = TensorRef::vector(fake(3), DType::kFloat32, M);
  return a;
}

TEST(RmsNormPath, SimpleForwardTakesTrainingLayouts) {
  const int64_t M = 8192;
  for (const Case& c : kCases)
    for (DType w : {DType::kFloat32, c.x})
      for (bool residual : {false, true}) {
        auto a = simple_args(c.x, M, c.N, w);
        if (residual) {
          a.residual = TensorRef::matrix(fake(4), c.x, M, c.N);
          a.residual_out = TensorRef::matrix(fake(5), c.x, M, c.N);
        }
        const int cfg = quack::detail::rmsnorm_fwd_simple_config(a);
        const int elt = quack::dtype_size(c.x);
        EXPECT_EQ(cfg, quack::detail::simple_fwd_config(c.N * elt, elt, residual))
            << name(c) << " w " << quack::dtype_name(w) << " residual " << residual;
      }
}

TEST(RmsNormPath, SimpleForwardFallsBackToStaged) {
  const int64_t M = 64, N = 4096;
  const DType bf = DType::kBFloat16, f32 = DType::kFloat32, f16 = DType::kFloat16;
  auto expect_staged = [](const quack::RmsNormFwdArgs& a, const char* why) {
    EXPECT_EQ(quack::detail::rmsnorm_fwd_simple_config(a), -1) << why;
  };
  auto a = simple_args(bf, M, N, f32);
  ASSERT_GE(quack::detail::rmsnorm_fwd_simple_config(a), 0);
  {
    auto b = a;
    b.weight = TensorRef();
    expect_staged(b, "no weight");
  }
  {
    auto b = a;
    b.bias = TensorRef::vector(fake(6), f32, N);
    expect_staged(b, "bias");
  }
  {
    auto b = simple_args(bf, M, N, f16);
    expect_staged(b, "weight fp16 with bf16 x");
  }
  {
    auto b = a;
    b.out = TensorRef::matrix(fake(2), f32, M, N);
    expect_staged(b, "out fp32 with bf16 x");
  }
  {
    auto b = a;
    b.residual = TensorRef::matrix(fake(4), f32, M, N);
    expect_staged(b, "fp32 residual with bf16 x");
  }
  {
    auto b = a;
    b.residual_out = TensorRef::matrix(fake(5), bf, M, N);
    expect_staged(b, "residual_out without residual");
  }
  {
    auto b = simple_args(bf, M, N + 4, f32);
    expect_staged(b, "N not a multiple of 8");
  }
  {
    auto b = a;
    b.x = TensorRef::matrix(fake(0), bf, M, N, 0, /*row_stride=*/N + 4);
    expect_staged(b, "rows 8-byte aligned");
  }
  {
    auto b = a;
    b.x = TensorRef::matrix(static_cast<char*>(fake(0)) + 2, bf, M, N);
    expect_staged(b, "misaligned base");
  }
  {
    auto b = a;
    b.weight = TensorRef::vector(fake(1), f32, N, 0, /*stride=*/2);
    expect_staged(b, "strided weight");
  }
}

TEST(RmsNormPath, SimpleForwardForcedConfigs) {
  const DType bf = DType::kBFloat16;
  for (int cfg = 0; cfg < quack::detail::kSimpleFwdConfigCount; ++cfg) {
    const auto& k = quack::detail::kSimpleFwdConfigs[cfg];
    const int64_t cap = k.capacity_bytes() / 2;  // bf16 elements per pass
    auto a = simple_args(bf, 100, cap, DType::kFloat32);
    EXPECT_EQ(quack::detail::rmsnorm_fwd_simple_config(a, cfg), cfg) << k.name;
    a = simple_args(bf, 100, cap + 8, DType::kFloat32);
    EXPECT_EQ(quack::detail::rmsnorm_fwd_simple_config(a, cfg), k.looped ? cfg : -1) << k.name;
  }
}

TEST(RmsNormPath, ForwardPathSetting) {
  using quack::detail::RmsNormFwdPath;
  const RmsNormFwdPath before = quack::detail::rmsnorm_fwd_path();
  quack::detail::set_rmsnorm_fwd_path(RmsNormFwdPath::kSimple);
  EXPECT_EQ(quack::detail::rmsnorm_fwd_path(), RmsNormFwdPath::kSimple);
  quack::detail::set_rmsnorm_fwd_path(RmsNormFwdPath::kStaged);
  EXPECT_EQ(quack::detail::rmsnorm_fwd_path(), RmsNormFwdPath::kStaged);
  quack::detail::set_rmsnorm_fwd_path(before);
}

TEST(RmsNormPath, LargeTestShapesTakeTheirPaths) {
  // test_rmsnorm_large.cpp's forward passes: (8193, 262144) bf16 with a bf16 weight.
  const int64_t M = 8193, N = 262144;
  auto a = simple_args(DType::kBFloat16, M, N, DType::kBFloat16);
  EXPECT_TRUE(quack::detail::rmsnorm_fwd_vector_path(a));
  EXPECT_GE(quack::detail::rmsnorm_fwd_simple_config(a), 0);
  a.weight = TensorRef::vector(fake(1), DType::kBFloat16, N, 0, 2);
  EXPECT_FALSE(quack::detail::rmsnorm_fwd_vector_path(a));
}

}  // namespace
