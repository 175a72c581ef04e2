// RMSNorm backward launchers: (x dtype, dweight?, dbias?, plain?) -> vector-path instance (18,
// compiled per dtype and dbias flag in rmsnorm_bwd_{bf16,f16,f32}{,_dbias}.cu), or the general
// kernel (1, here).
#include <cstdlib>
#include <string>

#include "common/dispatch.h"
#include "common/launch.h"
#include "common/row_pipeline.cuh"
#include "norm/rmsnorm_bwd_general_kernel.cuh"

namespace quack::detail {

size_t rmsnorm_bwd_smem(const RmsNormBwdParams& p) {
  const int elt_bytes[2] = {dtype_size(p.x.dtype), dtype_size(p.dout.dtype)};
  const int vec_bytes[2] = {4, 0};  // the weight slice in fp32 (ones when absent)
  return p.g.reduce_slot_bytes() +
         RowPipeline<2>::bytes(p.g, elt_bytes, vec_bytes);
}

bool rmsnorm_bwd_plain(const RmsNormBwdParams& p, bool has_db) {
  // QUACK_RMSNORM_BWD_PLAIN=0 turns the plain instances off (A/B timing), read once.
  static const bool plain_on = [] {
    const char* v = std::getenv("QUACK_RMSNORM_BWD_PLAIN");
    return !(v && std::string(v) == "0");
  }();
  return plain_on && !has_db && p.dout.dtype == p.x.dtype && p.dx.dtype == p.x.dtype &&
         !p.dresidual_out.ptr && !p.dresidual.ptr;
}

namespace {

size_t bwd_smem(const RmsNormBwdParams& p, bool vec_path) {
  return vec_path ? rmsnorm_bwd_smem(p) : p.g.reduce_slot_bytes();
}

// The instance for (x dtype, path, dweight?, dbias?, plain?).
RmsNormBwdKernel bwd_kernel(const RmsNormBwdParams& p, bool vec_path, bool has_dw, bool has_db) {
  if (!vec_path) return rmsnorm_bwd_general_kernel;
  const bool plain = rmsnorm_bwd_plain(p, has_db);
  return dispatch_float(p.x.dtype, "rmsnorm_bwd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return has_db ? rmsnorm_bwd_vec_dbias_kernel_t<T>(has_dw)
                  : rmsnorm_bwd_vec_kernel_t<T>(has_dw, plain);
  });
}

}  // namespace

int64_t rmsnorm_bwd_grid(const RmsNormBwdParams& p, bool vec_path, bool has_dw, bool has_db,
                         int device) {
  const int64_t resident =
      max_resident(reinterpret_cast<const void*>(bwd_kernel(p, vec_path, has_dw, has_db)),
                   p.g.cta_threads, bwd_smem(p, vec_path), p.g.cluster_n, device, "rmsnorm_bwd");
  return std::min<int64_t>(resident, p.g.row_blocks);
}

void launch_rmsnorm_bwd(const RmsNormBwdParams& p, bool vec_path, int64_t grid,
                        cudaStream_t stream) {
  launch(bwd_kernel(p, vec_path, p.dweight_part != nullptr, p.dbias_part != nullptr),
         grid * p.g.cluster_n, p.g.cta_threads, bwd_smem(p, vec_path), p.g.cluster_n, stream,
         "rmsnorm_bwd", p);
}

}  // namespace quack::detail
