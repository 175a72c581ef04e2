// LayerNorm public API (quack/norm.h): validation at the boundary, then the row skeleton's
// plan and launch (host only). The math is norm/layernorm_traits.cuh.
#include <cmath>
#include <string>

#include "common/check.h"
#include "norm/layernorm_internal.h"
#include "norm/norm_check.h"
#include "quack/norm.h"
#include "row/row_op.h"
#include "row_gen/row_ops.h"

namespace quack {

namespace detail {

RowCall layernorm_fwd_call(const LayerNormFwdArgs& a) {
  const char* fn = "layernorm_fwd";
  const ArgCheck chk(fn);
  (void)check_norm_fwd(chk, a, &a.mean);
  RowCall c = a.residual.present()
                  ? make_row_call(row_op_layernorm_fwd_res(), fn, {&a.x, &a.residual},
                                  {&a.out, &a.residual_out}, {&a.weight, &a.bias})
                  : make_row_call(row_op_layernorm_fwd(), fn, {&a.x}, {&a.out, &a.residual_out},
                                  {&a.weight, &a.bias});
  c.p.row_out[0] = row_vector_io(a.mean);
  c.p.row_out[1] = row_vector_io(a.rstd);
  c.p.scalar[0] = a.eps;
  c.p.scalar[1] = weight_shift(a.weight, a.weight_offset);
  return c;
}

RowCall layernorm_bwd_call(const LayerNormBwdArgs& a, const char* fn) {
  const ArgCheck chk(fn);
  const int64_t N = check_norm_bwd(chk, a, &a.mean).N;
  // The plain backward (h, dy -> dx) without residual gradients when it has an instance of the
  // dtypes; the residual one otherwise (its instances include the fp32 residual stream's).
  RowCall c;
  const bool plain = !a.dresidual_out.present() && !a.dresidual.present();
  if (plain)
    c = make_row_call(row_op_layernorm_bwd(), fn, {&a.x, &a.dout}, {&a.dx}, {&a.weight},
                      {&a.dweight, &a.dbias});
  if (!plain || !c.problem.pair)
    c = make_row_call(row_op_layernorm_bwd_res(), fn, {&a.x, &a.dout, &a.dresidual_out},
                      {&a.dx, &a.dresidual}, {&a.weight}, {&a.dweight, &a.dbias});
  c.p.row_in[0] = row_vector_io(a.mean);
  c.p.row_in[1] = row_vector_io(a.rstd);
  c.p.scalar[1] = weight_shift(a.weight, a.weight_offset);
  c.p.scalar[2] = N > 0 ? 1.f / static_cast<float>(N) : 0.f;
  return c;
}

}  // namespace detail

void layernorm_fwd(const LayerNormFwdArgs& args, cudaStream_t stream) {
  const detail::RowCall c = detail::layernorm_fwd_call(args);
  if (detail::empty_rows(args.x)) {
    detail::fill_empty_row_stats(args.mean, 0, args.x.device, "layernorm_fwd", stream);     // 0
    detail::fill_empty_row_stats(args.rstd, 0xFF, args.x.device, "layernorm_fwd", stream);  // NaN
    return;
  }
  detail::run_row_call(c, stream);
}

size_t layernorm_bwd_workspace_size(const LayerNormBwdArgs& args) {
  const detail::RowCall c = detail::layernorm_bwd_call(args, "layernorm_bwd_workspace_size");
  if (detail::empty_rows(args.x)) return 0;
  detail::RowPlan plan = detail::plan_row_call(c);
  return detail::row_call_workspace(c, plan);
}

void layernorm_bwd(const LayerNormBwdArgs& args, void* workspace, size_t workspace_bytes,
                   cudaStream_t stream) {
  const detail::RowCall c = detail::layernorm_bwd_call(args);
  if (detail::empty_rows(args.x)) return;  // all empty
  detail::run_row_call(c, detail::plan_row_call(c), stream, workspace, workspace_bytes);
}

}  // namespace quack
