// K = 0 GEMM: D = beta · C, or zeros without C (plain CUDA, no CuTe).
// One thread per element of D (grid-stride over L·M·N, 64-bit indices); C and D dtypes are
// runtime values (load/store through fp32). C is read only when p.c is non-null and beta (the
// device scalar when given) is not 0.
#include <cuda_runtime.h>

#include <algorithm>

#include "common/launch.h"
#include "common/vec.cuh"
#include "gemm/gemm_problem.h"

namespace quack::detail {

namespace {

__global__ void gemm_fill_kernel(const GemmProblem p) {
  const int64_t total = int64_t(p.l) * p.m * p.n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t col = i % p.n, row = (i / p.n) % p.m, b = i / (int64_t(p.m) * p.n);
    float v[1] = {0.f};
    const float beta = p.beta_dev ? *p.beta_dev : p.beta;
    if (p.c != nullptr && beta != 0.f) {
      load_any<1>(p.c, p.c_dtype, b * p.batch_c + row * p.ldc + col, v);
      v[0] *= beta;
    }
    store_any<1>(p.d, p.d_dtype, b * p.batch_d + row * p.ldd + col, v);
  }
}

}  // namespace

void gemm_fill_k0(const GemmProblem& p, cudaStream_t stream) {
  const int64_t total = int64_t(p.l) * p.m * p.n;
  const int block = 256;
  const int64_t grid = std::min<int64_t>((total + block - 1) / block, int64_t(sm_count(p.device)) * 8);
  launch(gemm_fill_kernel, grid, block, 0, 1, stream, "gemm", p);
}

}  // namespace quack::detail
