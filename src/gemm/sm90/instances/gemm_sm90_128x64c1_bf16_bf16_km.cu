// One GEMM kernel instance per TU (DESIGN §4: ≤ 60 s, ≤ 3 GB per GEMM TU; docs/gemm-spike.md).
// A, B: cutlass::bfloat16_t; C, D: cutlass::bfloat16_t; tile 128x64x64, 2 consumer warpgroups, no cluster
// (1x1): the tile for small M·N (e.g. M = 128), where 128x256 tiles leave most SMs idle.
// Majors (kernel terms, gemm_problem.h): A K-major (row-major), B MN-major (row-major).
#include "gemm/sm90/gemm_launch.cuh"

namespace quack::detail {

void gemm_sm90_128x64c1_bf16_bf16_km(const GemmProblem& p, cudaStream_t stream) {
  sm90::run_gemm<sm90::GemmConfig<cutlass::bfloat16_t, cutlass::bfloat16_t, cute::GMMA::Major::K,
                                  cute::GMMA::Major::MN, 64, 1>>(p, stream, "gemm");
}

}  // namespace quack::detail
