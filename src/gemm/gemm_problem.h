// Internal description of one validated GEMM problem (host only; no CUTLASS): what the public
// API (src/gemm/gemm.cpp) hands to the kernel launchers of src/gemm/sm90/ and to the K = 0 fill.
//
//   D[l] = alpha · A[l] · B[l] + beta · C[l]      l < L, fp32 accumulation
//
// Layouts (elements), in the kernel's terms:
//   A[l](m, k) at a + l·batch_a + m·lda + k   a_major = kK  (row-major, K contiguous)
//                              + m + k·lda   a_major = kMN (column-major, M contiguous)
//   B[l](k, n) at b + l·batch_b + n·ldb + k   b_major = kK  (column-major, K contiguous)
//                              + n + k·ldb   b_major = kMN (row-major, N contiguous)
//   C[l](m, n) at c + l·batch_c + m·ldc + n   (row-major, always); D likewise.
// The public API maps a column-major D (and C) onto this by computing Dᵀ = Bᵀ·Aᵀ: the kernel's A
// is the user's Bᵀ and its B the user's Aᵀ, M and N trade places, and each operand keeps its
// memory (a K-major B is a K-major Bᵀ-as-A; an N-major B is an MN-major Bᵀ-as-A).
// All leading and batch strides are multiples of 16 bytes and the bases 16-byte aligned (TMA).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "quack/tensor.h"

namespace quack::detail {

/// Which dimension of a GEMM operand is contiguous in memory (CuTe's GMMA::Major): K, or the
/// other one (M for A, N for B).
enum class GemmMajor { kK, kMN };

struct GemmProblem {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;  // null when C is not read (absent, or beta = 0)
  void* d = nullptr;
  int m = 0, n = 0, k = 0, l = 1;
  int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  int64_t batch_a = 0, batch_b = 0, batch_c = 0, batch_d = 0;
  GemmMajor a_major = GemmMajor::kK, b_major = GemmMajor::kK;
  DType ab_dtype = DType::kBFloat16;  // A and B
  DType d_dtype = DType::kBFloat16;   // D
  DType c_dtype = DType::kBFloat16;   // C (d_dtype, or float32 with a 16-bit D where an instance has it)
  float alpha = 1.f, beta = 0.f;      // beta is ignored when c is null
  // Device fp32 scalars read by the kernel instead of alpha / beta when non-null; with
  // beta_dev, c is non-null and the kernel reads C only when *beta_dev != 0.
  const float* alpha_dev = nullptr;
  const float* beta_dev = nullptr;
  uint32_t* tile_counter = nullptr;  // dynamic tile scheduler (GemmArgs::tile_counter) when non-null
  int device = 0;
};

// Kernel launchers: src/gemm/sm90/instances/*.cu (one kernel per TU, DESIGN §4 budgets).
// Require m, n, k ≥ 1 and the problem's a_major / b_major to be the instance's.
// Name: gemm_sm90_<tile>_<A/B dtype>_<D dtype>[_c<C dtype>]_<A major><B major> (C's dtype only
// when it differs from D's), one letter per operand in the
// kernel's terms: k = K-major (GemmMajor::kK), m = MN-major (GemmMajor::kMN: stride 1 along M for
// A, along N for B). So _kk: A row-major, B column-major (y = x·Wᵀ, a row-major weight W (N,K));
// _km: A row-major, B row-major (dgrad dx = dy·W); _mm: A column-major, B row-major (wgrad
// dW = dyᵀ·x); _mk: A column-major, B column-major (bf16 -> bf16 only). <tile> is the CTA tile,
// M x N, with a 2x1 cluster unless it ends in c1 (no cluster) or c1x2 (a 1x2 cluster: A
// multicast); pp: pingpong consumers (each
// warpgroup owns whole tiles), else cooperative. gemm.cpp's table lists them.
void gemm_sm90_128x256_bf16_bf16_kk(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_bf16_bf16_km(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_bf16_bf16_mm(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_bf16_bf16_mk(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_bf16_bf16_cf32_kk(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_bf16_bf16_cf32_km(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x64c1_bf16_bf16_kk(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x64c1_bf16_bf16_km(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_64x128_bf16_bf16_kk(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_64x128_bf16_bf16_km(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x64c1x2_bf16_bf16_kk(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x64c1x2_bf16_bf16_km(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x128pp_bf16_bf16_kk(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x128pp_bf16_bf16_km(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_bf16_f32_kk(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_bf16_f32_km(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_bf16_f32_mm(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_f16_f16_kk(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_f16_f16_km(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_f16_f16_mm(const GemmProblem& p, cudaStream_t stream);
void gemm_sm90_128x256_f16_f32_kk(const GemmProblem& p, cudaStream_t stream);

// K = 0: D = beta · C (c non-null) or zeros. src/gemm/gemm_fill.cu. Requires m, n ≥ 1.
void gemm_fill_k0(const GemmProblem& p, cudaStream_t stream);

}  // namespace quack::detail
