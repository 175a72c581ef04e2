// Internal description of one validated GEMM problem (host only; no CUTLASS): what the public
// API (src/gemm/gemm.cpp) hands to the kernel launchers of src/gemm/sm90/ and to the K = 0 fill.
//
//   D[l] = alpha · A[l] · B[l] + beta · C[l]      l < L, fp32 accumulation
//
// Layouts (elements): A[l](m, k) at a + l·batch_a + m·lda + k   (row-major, K contiguous)
//                     B[l](k, n) at b + l·batch_b + n·ldb + k   (column-major, K contiguous)
//                     C[l](m, n) at c + l·batch_c + m·ldc + n   (row-major); D likewise.
// All leading and batch strides are multiples of 16 bytes and the bases 16-byte aligned (TMA).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "quack/tensor.h"

namespace quack::detail {

struct GemmProblem {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;  // null when C is not read (absent, or beta = 0)
  void* d = nullptr;
  int m = 0, n = 0, k = 0, l = 1;
  int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  int64_t batch_a = 0, batch_b = 0, batch_c = 0, batch_d = 0;
  DType ab_dtype = DType::kBFloat16;  // A and B
  DType d_dtype = DType::kBFloat16;   // D and C
  float alpha = 1.f, beta = 0.f;      // beta is ignored when c is null
  int device = 0;
};

// Kernel launchers: src/gemm/sm90/instances/*.cu (one kernel per TU, DESIGN §4 budgets).
// Require m, n, k ≥ 1. Name: gemm_sm90_<tile>_<A/B dtype>_<D dtype>.
void gemm_sm90_128x256_bf16_bf16(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_bf16_f32(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_f16_f16(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_f16_f32(const GemmProblem& p, cudaStream_t stream);

// K = 0: D = beta · C (c non-null) or zeros. src/gemm/gemm_fill.cu. Requires m, n ≥ 1.
void gemm_fill_k0(const GemmProblem& p, cudaStream_t stream);

}  // namespace quack::detail
