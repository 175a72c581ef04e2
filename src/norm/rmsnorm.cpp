// RMSNorm public API (quack/norm.h): validation at the boundary, then the row skeleton's plan
// and launch (host only). The math is norm/rmsnorm_traits.cuh; the instances are the rmsnorm_*
// lines of row/row_ops.cmake.
#include <cmath>
#include <string>

#include "common/check.h"
#include "norm/rmsnorm_internal.h"
#include "norm/norm_check.h"
#include "quack/norm.h"
#include "row/row_op.h"
#include "row_gen/row_ops.h"

namespace quack {

namespace detail {

RowCall rmsnorm_fwd_call(const RmsNormFwdArgs& a) {
  const char* fn = "rmsnorm_fwd";
  const ArgCheck chk(fn);
  const int64_t N = check_norm_fwd(chk, a, nullptr).N;
  // The residual stream's instances when either end of it is present (residual_out alone
  // stores h = x); the plain forward otherwise.
  const bool res = a.residual.present() || a.residual_out.present();
  RowCall c;
  if (a.bias.present()) {
    c = res ? make_row_call(row_op_rmsnorm_fwd_res_bias(), fn, {&a.x, &a.residual},
                            {&a.out, &a.residual_out}, {&a.weight, &a.bias})
            : make_row_call(row_op_rmsnorm_fwd_bias(), fn, {&a.x}, {&a.out}, {&a.weight, &a.bias});
  } else {
    c = res ? make_row_call(row_op_rmsnorm_fwd_res(), fn, {&a.x, &a.residual},
                            {&a.out, &a.residual_out}, {&a.weight})
            : make_row_call(row_op_rmsnorm_fwd(), fn, {&a.x}, {&a.out}, {&a.weight});
  }
  c.p.row_out[0] = row_vector_io(a.rstd);
  c.p.scalar[0] = a.eps;
  c.p.scalar[1] = weight_shift(a.weight, a.weight_offset);
  c.p.scalar[2] = N > 0 ? 1.f / static_cast<float>(N) : 0.f;
  return c;
}

RowCall rmsnorm_bwd_call(const RmsNormBwdArgs& a, const char* fn) {
  const ArgCheck chk(fn);
  const int64_t N = check_norm_bwd(chk, a, nullptr).N;
  // The plain backward (x, dy -> dx) when there are no residual gradients and no dbias and
  // it has an instance of the dtypes; the residual one otherwise (its instances include the
  // fp32 residual stream's), and with dbias the one that also sums dbias.
  RowCall c;
  const bool plain = !a.dresidual_out.present() && !a.dresidual.present() && !a.dbias.present();
  if (plain)
    c = make_row_call(row_op_rmsnorm_bwd(), fn, {&a.x, &a.dout}, {&a.dx}, {&a.weight},
                      {&a.dweight});
  if (!plain || !c.problem.pair)
    c = a.dbias.present()
            ? make_row_call(row_op_rmsnorm_bwd_dbias(), fn, {&a.x, &a.dout, &a.dresidual_out},
                            {&a.dx, &a.dresidual}, {&a.weight}, {&a.dweight, &a.dbias})
            : make_row_call(row_op_rmsnorm_bwd_res(), fn, {&a.x, &a.dout, &a.dresidual_out},
                            {&a.dx, &a.dresidual}, {&a.weight}, {&a.dweight});
  c.p.row_in[0] = row_vector_io(a.rstd);
  c.p.scalar[1] = weight_shift(a.weight, a.weight_offset);
  c.p.scalar[2] = N > 0 ? 1.f / static_cast<float>(N) : 0.f;
  return c;
}

}  // namespace detail

void rmsnorm_fwd(const RmsNormFwdArgs& args, cudaStream_t stream) {
  const detail::RowCall c = detail::rmsnorm_fwd_call(args);
  if (detail::empty_rows(args.x)) {
    detail::fill_empty_row_stats(args.rstd, 0xFF, args.x.device, "rmsnorm_fwd", stream);  // NaN
    return;
  }
  detail::run_row_call(c, stream);
}

size_t rmsnorm_bwd_workspace_size(const RmsNormBwdArgs& args) {
  const detail::RowCall c = detail::rmsnorm_bwd_call(args, "rmsnorm_bwd_workspace_size");
  if (detail::empty_rows(args.x)) return 0;
  detail::RowPlan plan = detail::plan_row_call(c);
  return detail::row_call_workspace(c, plan);
}

void rmsnorm_bwd(const RmsNormBwdArgs& args, void* workspace, size_t workspace_bytes,
                 cudaStream_t stream) {
  const detail::RowCall c = detail::rmsnorm_bwd_call(args);
  if (detail::empty_rows(args.x)) return;  // all empty
  detail::run_row_call(c, detail::plan_row_call(c), stream, workspace, workspace_bytes);
}

}  // namespace quack
