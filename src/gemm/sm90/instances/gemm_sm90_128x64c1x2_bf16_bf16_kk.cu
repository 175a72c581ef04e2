// One GEMM kernel instance per TU (DESIGN §4: ≤ 60 s, ≤ 3 GB per GEMM TU; docs/gemm-spike.md).
// A, B: cutlass::bfloat16_t; C, D: cutlass::bfloat16_t; tile 128x64x64, 2 consumer warpgroups
// (cooperative), 1x2 cluster: the two CTAs of a cluster take neighbouring n tiles of the same m
// tile and share A by multicast (small M, e.g. M = 128: every CTA would re-read all of A).
// Majors (kernel terms, gemm_problem.h): A K-major (row-major), B K-major (column-major).
#include "gemm/sm90/gemm_launch.cuh"

namespace quack::detail {

void gemm_sm90_128x64c1x2_bf16_bf16_kk(const GemmProblem& p, cudaStream_t stream) {
  sm90::run_gemm<sm90::GemmConfig<cutlass::bfloat16_t, cutlass::bfloat16_t, cute::GMMA::Major::K,
                                  cute::GMMA::Major::K, 64, 1, false, 2>>(p, stream, "gemm");
}

}  // namespace quack::detail
