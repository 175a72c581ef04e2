// One GEMM kernel instance per TU (DESIGN §4: ≤ 60 s, ≤ 3 GB per GEMM TU; docs/gemm-spike.md).
// A, B: cutlass::bfloat16_t; C, D: cutlass::bfloat16_t; tile 64x128x64, one consumer warpgroup,
// 2x1 cluster (B multicast): the small-M tile (M = 128: both CTAs of a cluster read the same B
// tile once, as cuBLAS's nvjet 64x128 kernel).
// Majors (kernel terms, gemm_problem.h): A K-major (row-major), B K-major (column-major).
#include "gemm/sm90/gemm_launch.cuh"

namespace quack::detail {

void gemm_sm90_64x128_bf16_bf16_kk(const GemmProblem& p, cudaStream_t stream) {
  sm90::run_gemm<sm90::GemmConfig<cutlass::bfloat16_t, cutlass::bfloat16_t, cute::GMMA::Major::K,
                                  cute::GMMA::Major::K, 128, 2, false, 1, void, 64>>(p, stream, "gemm");
}

}  // namespace quack::detail
