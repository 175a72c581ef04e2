// RMSNorm forward launcher: x dtype -> vector-path instance (3), or the general kernel (1).
#include "common/dispatch.h"
#include "common/launch.h"
#include "norm/rmsnorm_fwd_kernel.cuh"

namespace quack::detail {

void launch_rmsnorm_fwd(const RmsNormFwdParams& p, bool vec_path, cudaStream_t stream) {
  const size_t smem = 2 * p.g.reduce_slots() * sizeof(float);
  const int64_t grid = p.g.row_blocks * p.g.cluster_n;
  if (!vec_path) {
    launch(rmsnorm_fwd_general_kernel, grid, p.g.cta_threads, smem, p.g.cluster_n, stream,
           "rmsnorm_fwd", p);
    return;
  }
  dispatch_float(p.x.dtype, "rmsnorm_fwd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int kVec = 16 / sizeof(T);
    launch(rmsnorm_fwd_kernel<T, kVec, kNormFwdVectorsPerThread>, grid, p.g.cta_threads, smem, p.g.cluster_n,
           stream, "rmsnorm_fwd", p);
  });
}

}  // namespace quack::detail
