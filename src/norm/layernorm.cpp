// LayerNorm public API (quack/norm.h): validation at the boundary, then the row skeleton's
// plan and launch (host only). The math is norm/layernorm_traits.cuh.
#include <cmath>
#include <string>

#include "common/check.h"
#include "norm/layernorm_internal.h"
#include "quack/norm.h"
#include "row/row_op.h"
#include "row_gen/row_ops.h"

namespace quack {

namespace detail {

namespace {

// The weight's offset as the kernels take it: w + offset, where an absent weight reads as 0
// and its factor must be 1.
float weight_shift(const TensorRef& weight, float offset) {
  return weight.present() ? offset : 1.f;
}

void check_offset(const ArgCheck& chk, float offset) {
  if (!std::isfinite(offset))
    chk.fail("weight_offset is " + std::to_string(offset) + ", expected a finite value");
}

}  // namespace

RowCall layernorm_fwd_call(const LayerNormFwdArgs& a) {
  const char* fn = "layernorm_fwd";
  const ArgCheck chk(fn);
  chk.matrix(a.x, "x", -1, -1);
  chk.float_dtype(a.x, "x");
  const int64_t M = a.x.shape[0], N = a.x.shape[1];
  const int dev = a.x.device;
  if (a.weight.present()) row_check_n(chk, a.weight, "weight", N, dev, false);
  if (a.bias.present()) row_check_n(chk, a.bias, "bias", N, dev, false);
  if (a.residual.present()) row_check_mn(chk, a.residual, "residual", M, N, dev, false);
  row_check_mn(chk, a.out, "out", M, N, dev, true);
  if (a.residual_out.present()) row_check_mn(chk, a.residual_out, "residual_out", M, N, dev, true);
  if (a.mean.present()) row_check_m_f32(chk, a.mean, "mean", M, dev, true);
  if (a.rstd.present()) row_check_m_f32(chk, a.rstd, "rstd", M, dev, true);
  if (!(a.eps >= 0.f)) chk.fail("eps is " + std::to_string(a.eps) + ", expected eps ≥ 0");
  check_offset(chk, a.weight_offset);
  if (N == 0 && M > 0) chk.fail("x has N = 0 columns, expected N ≥ 1");
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
  chk.matrix(a.x, "x", -1, -1);
  chk.float_dtype(a.x, "x");
  const int64_t M = a.x.shape[0], N = a.x.shape[1];
  const int dev = a.x.device;
  if (a.weight.present()) row_check_n(chk, a.weight, "weight", N, dev, false);
  row_check_mn(chk, a.dout, "dout", M, N, dev, false);
  row_check_m_f32(chk, a.mean, "mean", M, dev, false);
  row_check_m_f32(chk, a.rstd, "rstd", M, dev, false);
  if (a.dresidual_out.present())
    row_check_mn(chk, a.dresidual_out, "dresidual_out", M, N, dev, false);
  row_check_mn(chk, a.dx, "dx", M, N, dev, true);
  if (a.dresidual.present()) row_check_mn(chk, a.dresidual, "dresidual", M, N, dev, true);
  if (a.dweight.present()) {
    if (!a.weight.present()) chk.fail("dweight is given but weight is absent, expected both");
    row_check_n(chk, a.dweight, "dweight", N, dev, true);
  }
  if (a.dbias.present()) row_check_n(chk, a.dbias, "dbias", N, dev, true);
  check_offset(chk, a.weight_offset);
  if (N == 0 && M > 0) chk.fail("x has N = 0 columns, expected N ≥ 1");
  RowCall c = make_row_call(row_op_layernorm_bwd(), fn, {&a.x, &a.dout, &a.dresidual_out},
                            {&a.dx, &a.dresidual}, {&a.weight}, {&a.dweight, &a.dbias});
  c.p.row_in[0] = row_vector_io(a.mean);
  c.p.row_in[1] = row_vector_io(a.rstd);
  c.p.scalar[1] = weight_shift(a.weight, a.weight_offset);
  c.p.scalar[2] = N > 0 ? 1.f / static_cast<float>(N) : 0.f;
  return c;
}

}  // namespace detail

void layernorm_fwd(const LayerNormFwdArgs& args, cudaStream_t stream) {
  detail::run_row_call(detail::layernorm_fwd_call(args), stream);
}

size_t layernorm_bwd_workspace_size(const LayerNormBwdArgs& args) {
  const detail::RowCall c = detail::layernorm_bwd_call(args, "layernorm_bwd_workspace_size");
  detail::RowPlan plan = detail::plan_row_call(c);
  return detail::row_call_workspace(c, plan);
}

void layernorm_bwd(const LayerNormBwdArgs& args, void* workspace, size_t workspace_bytes,
                   cudaStream_t stream) {
  const detail::RowCall c = detail::layernorm_bwd_call(args);
  detail::run_row_call(c, detail::plan_row_call(c), stream, workspace, workspace_bytes);
}

}  // namespace quack
