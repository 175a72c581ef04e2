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

}  // namespace
