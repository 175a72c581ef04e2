// RMSNorm forward launchers: x dtype -> vector-path instance (3, persistent), or the general
// kernel (1); the simple path's instances live in rmsnorm_fwd_simple_<dtype>.cu.
#include "common/dispatch.h"
#include "common/launch.h"
#include "norm/rmsnorm_fwd_kernel.cuh"

namespace quack::detail {

size_t rmsnorm_fwd_smem(const RmsNormFwdParams& p) {
  const int elt[2] = {dtype_size(p.x.dtype), p.residual.ptr ? dtype_size(p.residual.dtype) : 0};
  const int vec[2] = {p.weight.ptr ? dtype_size(p.weight.dtype) : 0,
                      p.bias.ptr ? dtype_size(p.bias.dtype) : 0};
  return p.g.reduce_slot_bytes() +
         RowPipeline<2>::bytes(p.g, elt, vec);
}

void launch_rmsnorm_fwd(const RmsNormFwdParams& p, bool vec_path, int device,
                        cudaStream_t stream) {
  const size_t slots = p.g.reduce_slot_bytes();
  if (!vec_path) {
    launch(rmsnorm_fwd_general_kernel, p.g.row_blocks * p.g.cluster_n, p.g.cta_threads, slots,
           p.g.cluster_n, stream, "rmsnorm_fwd", p);
    return;
  }
  const size_t smem = rmsnorm_fwd_smem(p);
  dispatch_float(p.x.dtype, "rmsnorm_fwd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto kernel = rmsnorm_fwd_kernel<T, 16 / sizeof(T)>;
    // Persistent: as many CTAs (clusters) as are resident, at most one per row block.
    const int64_t resident = max_resident(reinterpret_cast<const void*>(kernel), p.g.cta_threads,
                                          smem, p.g.cluster_n, device, "rmsnorm_fwd");
    const int64_t clusters = std::min<int64_t>(resident, p.g.row_blocks);
    launch(kernel, clusters * p.g.cluster_n, p.g.cta_threads, smem, p.g.cluster_n, stream,
           "rmsnorm_fwd", p);
  });
}

void launch_rmsnorm_fwd_simple(const RmsNormFwdParams& p, int config, int device,
                               cudaStream_t stream) {
  dispatch_float(p.x.dtype, "rmsnorm_fwd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (p.residual.ptr) launch_rmsnorm_fwd_simple_t<T, true>(p, config, device, stream);
    else launch_rmsnorm_fwd_simple_t<T, false>(p, config, device, stream);
  });
}

}  // namespace quack::detail
