// One GEMM kernel instance per TU (DESIGN §4: ≤ 60 s, ≤ 3 GB per GEMM TU; docs/gemm-spike.md).
// A, B: cutlass::half_t; C, D: float; tile 128x256x64, 2 consumer warpgroups, cluster 2x1.
// Majors (kernel terms, gemm_problem.h): A K-major (row-major), B K-major (column-major).
#include "gemm/sm90/gemm_launch.cuh"

namespace quack::detail {

void gemm_sm90_128x256_f16_f32_kk(const GemmProblem& p, cudaStream_t stream) {
  sm90::run_gemm<sm90::Config128x256<cutlass::half_t, float, cute::GMMA::Major::K, cute::GMMA::Major::K>>(
      p, stream, "gemm");
}

}  // namespace quack::detail
