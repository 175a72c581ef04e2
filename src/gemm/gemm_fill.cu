// K = 0 GEMM (plain CUDA, no CuTe): the accumulator is 0, then the epilogue elementwise:
//   kLinComb, kBias: D = beta · C (+ bias), or zeros without C and bias;
//   kAct:     preact = beta · C + bias (or zeros), stored when p.d is non-null; D1 = postact = act(preact);
//   kDAct:    C = preact; D = dpreact = 0 · act'(preact); D1 = postact = act(preact), when non-null;
//   kGated, kGatedConcat: preact as kAct (N columns, stored when p.d is non-null); D1 = postact =
//             glu(preact[2j], preact[2j + 1]) (N / 2 columns): one thread per column pair;
//   kDGated:  C = preact, D = dpreact as 32-bit words of 16-bit (gate, up) pairs (p.n pairs per row,
//             strides in words); dpreact = 0 (both halves), D1 = postact = glu(gate, up) when non-null.
// One thread per element or pair (grid-stride over L·M·N, 64-bit indices); dtypes are runtime
// values (load/store through fp32). For kLinComb, kBias, kAct and the gated forward, C is read
// only when p.c is non-null and beta (the device scalar when given) is not 0. A bias is read as
// the kernel's visitors read it (epilogue_ops.cuh, BiasVec: row_bias[n], col_bias[m], in the
// kernel's terms; the concat reading of a gated row bias).
#include <cuda_runtime.h>

#include <algorithm>

#include "common/launch.h"
#include "common/vec.cuh"
#include "gemm/activation.cuh"
#include "gemm/gemm_problem.h"

namespace quack::detail {

namespace {

// row_bias[n] + col_bias[m] of batch b (0 without a bias).
__device__ float bias_value(const GemmProblem& p, int64_t b, int64_t row, int64_t col) {
  float v = 0.f;
  if (p.row_bias != nullptr) {
    const int64_t half = p.n / 2;
    const int64_t idx = p.concat ? (col % 2) * half + col / 2 : col;
    float x[1];
    load_any<1>(p.row_bias, p.row_bias_dtype, b * p.batch_row_bias + idx, x);
    v += x[0];
  }
  if (p.col_bias != nullptr) {
    float x[1];
    load_any<1>(p.col_bias, p.col_bias_dtype, b * p.batch_col_bias + row, x);
    v += x[0];
  }
  return v;
}

// beta · C[b, row, col] (0 when C is not read) + bias.
__device__ float preact_value(const GemmProblem& p, float beta, int64_t b, int64_t row, int64_t col) {
  float v[1] = {0.f};
  if (p.c != nullptr && beta != 0.f) {
    load_any<1>(p.c, p.c_dtype, b * p.batch_c + row * p.ldc + col, v);
    v[0] *= beta;
  }
  return v[0] + bias_value(p, b, row, col);
}

__device__ float unpack16(uint32_t bits, DType t) {
  if (t == DType::kFloat16) return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
  return __uint_as_float(bits << 16);
}

__global__ void gemm_fill_kernel(const GemmProblem p) {
  const bool pairs = p.epilogue == GemmEpilogue::kGated || p.epilogue == GemmEpilogue::kGatedConcat;
  const int64_t cols = pairs ? p.n / 2 : p.n;  // work items per row
  const int64_t total = int64_t(p.l) * p.m * cols;
  const Activation act = static_cast<Activation>(p.activation);
  const float beta = p.beta_dev ? *p.beta_dev : p.beta;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t col = i % cols, row = (i / cols) % p.m, b = i / (int64_t(p.m) * cols);
    if (pairs) {
      const float g[1] = {preact_value(p, beta, b, row, 2 * col)};
      const float u[1] = {preact_value(p, beta, b, row, 2 * col + 1)};
      const float post[1] = {gated_fwd(act, g[0], u[0])};
      store_any<1>(p.d1, p.d1_dtype, b * p.batch_d1 + row * p.ldd1 + col, post);
      if (p.d != nullptr) {
        store_any<1>(p.d, p.d_dtype, b * p.batch_d + row * p.ldd + 2 * col, g);
        store_any<1>(p.d, p.d_dtype, b * p.batch_d + row * p.ldd + 2 * col + 1, u);
      }
      continue;
    }
    if (p.epilogue == GemmEpilogue::kDGated) {
      const uint32_t w = static_cast<const uint32_t*>(p.c)[b * p.batch_c + row * p.ldc + col];
      const float post[1] = {gated_fwd(act, unpack16(w & 0xFFFFu, p.packed_dtype), unpack16(w >> 16, p.packed_dtype))};
      static_cast<uint32_t*>(p.d)[b * p.batch_d + row * p.ldd + col] = 0u;  // (dgate, dup) = (0, 0)
      if (p.d1 != nullptr) store_any<1>(p.d1, p.d1_dtype, b * p.batch_d1 + row * p.ldd1 + col, post);
      continue;
    }
    float v[1] = {0.f};
    if (p.epilogue == GemmEpilogue::kDAct) {
      float x[1];
      load_any<1>(p.c, p.c_dtype, b * p.batch_c + row * p.ldc + col, x);
      float post[1];
      act_bwd(act, x[0], 0.f, v[0], post[0]);
      if (p.d1 != nullptr) store_any<1>(p.d1, p.d1_dtype, b * p.batch_d1 + row * p.ldd1 + col, post);
    } else {
      v[0] = preact_value(p, beta, b, row, col);
      if (p.epilogue == GemmEpilogue::kAct) {
        const float post[1] = {act_fwd(act, v[0])};
        store_any<1>(p.d1, p.d1_dtype, b * p.batch_d1 + row * p.ldd1 + col, post);
      }
    }
    if (p.d != nullptr) store_any<1>(p.d, p.d_dtype, b * p.batch_d + row * p.ldd + col, v);
  }
}

}  // namespace

void gemm_fill_k0(const GemmProblem& p, const char* fn, cudaStream_t stream) {
  const bool pairs = p.epilogue == GemmEpilogue::kGated || p.epilogue == GemmEpilogue::kGatedConcat;
  const int64_t total = int64_t(p.l) * p.m * (pairs ? p.n / 2 : p.n);
  if (total == 0) return;
  const int block = 256;
  const int64_t grid = std::min<int64_t>((total + block - 1) / block, int64_t(sm_count(p.device)) * 8);
  launch(gemm_fill_kernel, grid, block, 0, 1, stream, fn, p);
}

}  // namespace quack::detail
