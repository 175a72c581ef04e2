// One GEMM kernel instance per TU (DESIGN §4: ≤ 60 s, ≤ 3 GB per GEMM TU; docs/gemm-spike.md).
// A, B: cutlass::bfloat16_t; C, D: cutlass::bfloat16_t; tile 128x256x64, 2 consumer warpgroups, cluster 2x1.
// Majors (kernel terms, gemm_problem.h): A MN-major (column-major), B K-major (column-major).
#include "gemm/sm90/gemm_launch.cuh"

namespace quack::detail {

void gemm_sm90_128x256_bf16_bf16_mk(const GemmProblem& p, cudaStream_t stream) {
  sm90::run_gemm<sm90::Config128x256<cutlass::bfloat16_t, cutlass::bfloat16_t, cute::GMMA::Major::MN, cute::GMMA::Major::K>>(
      p, stream, "gemm");
}

}  // namespace quack::detail
