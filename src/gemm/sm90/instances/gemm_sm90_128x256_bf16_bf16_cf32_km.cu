// One GEMM kernel instance per TU (DESIGN §4: ≤ 60 s, ≤ 3 GB per GEMM TU; docs/gemm-spike.md).
// A, B: cutlass::bfloat16_t; D: cutlass::bfloat16_t; C: float (an fp32 C, e.g. a residual
// stream kept in fp32, added into a bf16 D); tile 128x256x64 cooperative, 2x1 cluster.
// Majors (kernel terms, gemm_problem.h): A K-major (row-major), B MN-major (row-major).
#include "gemm/sm90/gemm_launch.cuh"

namespace quack::detail {

void gemm_sm90_128x256_bf16_bf16_cf32_km(const GemmProblem& p, cudaStream_t stream) {
  sm90::run_gemm<sm90::GemmConfig<cutlass::bfloat16_t, cutlass::bfloat16_t, cute::GMMA::Major::K,
                                  cute::GMMA::Major::MN, 256, 2, false, 1, float>>(p, stream, "gemm");
}

}  // namespace quack::detail
