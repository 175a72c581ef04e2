// K = 0 GEMM (plain CUDA, no CuTe): the accumulator is 0, then the epilogue elementwise:
//   kLinComb: D = beta · C, or zeros without C;
//   kAct:     preact = beta · C (or zeros), stored when p.d is non-null; D1 = postact = act(preact);
//   kDAct:    C = preact; D = dpreact = 0 · act'(preact); D1 = postact = act(preact), when non-null.
// One thread per element (grid-stride over L·M·N, 64-bit indices); dtypes are runtime values
// (load/store through fp32). For kLinComb and kAct, C is read only when p.c is non-null and beta
// (the device scalar when given) is not 0.
#include <cuda_runtime.h>

#include <algorithm>

#include "common/launch.h"
#include "common/vec.cuh"
#include "gemm/activation.cuh"
#include "gemm/gemm_problem.h"

namespace quack::detail {

namespace {

__global__ void gemm_fill_kernel(const GemmProblem p) {
  const int64_t total = int64_t(p.l) * p.m * p.n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t col = i % p.n, row = (i / p.n) % p.m, b = i / (int64_t(p.m) * p.n);
    const Activation act = static_cast<Activation>(p.activation);
    float v[1] = {0.f};
    if (p.epilogue == GemmEpilogue::kDAct) {
      float x[1];
      load_any<1>(p.c, p.c_dtype, b * p.batch_c + row * p.ldc + col, x);
      float post[1];
      act_bwd(act, x[0], 0.f, v[0], post[0]);
      if (p.d1 != nullptr) store_any<1>(p.d1, p.d1_dtype, b * p.batch_d1 + row * p.ldd1 + col, post);
    } else {
      const float beta = p.beta_dev ? *p.beta_dev : p.beta;
      if (p.c != nullptr && beta != 0.f) {
        load_any<1>(p.c, p.c_dtype, b * p.batch_c + row * p.ldc + col, v);
        v[0] *= beta;
      }
      if (p.epilogue == GemmEpilogue::kAct) {
        const float post[1] = {act_fwd(act, v[0])};
        store_any<1>(p.d1, p.d1_dtype, b * p.batch_d1 + row * p.ldd1 + col, post);
      }
    }
    if (p.d != nullptr) store_any<1>(p.d, p.d_dtype, b * p.batch_d + row * p.ldd + col, v);
  }
}

}  // namespace

void gemm_fill_k0(const GemmProblem& p, cudaStream_t stream) {
  const int64_t total = int64_t(p.l) * p.m * p.n;
  const int block = 256;
  const int64_t grid = std::min<int64_t>((total + block - 1) / block, int64_t(sm_count(p.device)) * 8);
  const char* where = p.epilogue == GemmEpilogue::kLinComb ? "gemm" : p.epilogue == GemmEpilogue::kAct ? "gemm_act" : "gemm_dact";
  launch(gemm_fill_kernel, grid, block, 0, 1, stream, where, p);
}

}  // namespace quack::detail
