// Validation and scalars shared by the norms' row calls (RMSNorm, LayerNorm): the same checks in
// the same order, so both name their arguments alike; LayerNorm adds its mean beside rstd.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "common/check.h"
#include "row/row_op.h"

namespace quack::detail {

struct NormDims {
  int64_t M, N;
  int dev;
};

// The weight's offset as the kernels take it: w + offset, where an absent weight reads as 0
// and its factor must be 1.
inline float weight_shift(const TensorRef& weight, float offset) {
  return weight.present() ? offset : 1.f;
}

inline void check_weight_offset(const ArgCheck& chk, float offset) {
  if (!std::isfinite(offset))
    chk.fail("weight_offset is " + format_float(offset) + ", expected a finite value");
}

inline NormDims check_norm_x(const ArgCheck& chk, const TensorRef& x) {
  chk.matrix(x, "x", -1, -1);
  chk.float_dtype(x, "x");
  return {x.shape[0], x.shape[1], x.device};
}

// Rows of no columns (N = 0, M > 0), as torch's norms take them: the outputs (M, 0) and the
// column vectors (0) are empty; a row's statistics are those of an empty row, written by
// fill_empty_row_stats (no kernel); the backward has nothing to write.
inline bool empty_rows(const TensorRef& x) { return x.shape[1] == 0 && x.shape[0] > 0; }

// An fp32 (M) statistic of empty rows: every byte `byte` (0xFF: NaN, rstd = 1/sqrt(0/0 + eps);
// 0: 0.0, LayerNorm's mean as torch's CPU layer_norm gives it), by cudaMemset2DAsync on the
// tensor's stride. Nothing for an absent one.
void fill_empty_row_stats(const TensorRef& t, int byte, int device, const char* fn,
                          cudaStream_t stream);

// x, weight, bias, residual, out, residual_out, [mean], rstd, eps, weight_offset, N.
template <class Args>
NormDims check_norm_fwd(const ArgCheck& chk, const Args& a, const TensorRef* mean) {
  const NormDims d = check_norm_x(chk, a.x);
  if (a.weight.present()) row_check_n(chk, a.weight, "weight", d.N, d.dev, false);
  if (a.bias.present()) row_check_n(chk, a.bias, "bias", d.N, d.dev, false);
  if (a.residual.present()) row_check_mn(chk, a.residual, "residual", d.M, d.N, d.dev, false);
  row_check_mn(chk, a.out, "out", d.M, d.N, d.dev, true);
  if (a.residual_out.present())
    row_check_mn(chk, a.residual_out, "residual_out", d.M, d.N, d.dev, true);
  if (mean != nullptr && mean->present()) row_check_m_f32(chk, *mean, "mean", d.M, d.dev, true);
  if (a.rstd.present()) row_check_m_f32(chk, a.rstd, "rstd", d.M, d.dev, true);
  // The header's aliasing rule: out in place of x, residual_out in place of the residual, each
  // only as that tensor itself (same address, dtype, shape, strides); else separate memory.
  chk.outputs_apart({{&a.out, "out"}, {&a.residual_out, "residual_out"}, {mean, "mean"},
                            {&a.rstd, "rstd"}},
                      {{&a.x, "x"}, {&a.residual, "residual"}, {&a.weight, "weight"},
                       {&a.bias, "bias"}},
                      {{&a.out, &a.x}, {&a.residual_out, &a.residual}});
  if (!(a.eps >= 0.f)) chk.fail("eps is " + format_float(a.eps) + ", expected eps ≥ 0");
  check_weight_offset(chk, a.weight_offset);
  return d;
}

// x, weight, dout, [mean], rstd, dresidual_out, dx, dresidual, dweight, dbias, weight_offset, N.
template <class Args>
NormDims check_norm_bwd(const ArgCheck& chk, const Args& a, const TensorRef* mean) {
  const NormDims d = check_norm_x(chk, a.x);
  if (a.weight.present()) row_check_n(chk, a.weight, "weight", d.N, d.dev, false);
  row_check_mn(chk, a.dout, "dout", d.M, d.N, d.dev, false);
  if (mean != nullptr) row_check_m_f32(chk, *mean, "mean", d.M, d.dev, false);
  row_check_m_f32(chk, a.rstd, "rstd", d.M, d.dev, false);
  if (a.dresidual_out.present())
    row_check_mn(chk, a.dresidual_out, "dresidual_out", d.M, d.N, d.dev, false);
  row_check_mn(chk, a.dx, "dx", d.M, d.N, d.dev, true);
  if (a.dresidual.present()) row_check_mn(chk, a.dresidual, "dresidual", d.M, d.N, d.dev, true);
  // The header's aliasing rule: dx (and dresidual) in place of dout only as dout itself.
  if (a.dweight.present()) {
    if (!a.weight.present()) chk.fail("dweight is given but weight is absent, expected both");
    row_check_n(chk, a.dweight, "dweight", d.N, d.dev, true);
  }
  if (a.dbias.present()) row_check_n(chk, a.dbias, "dbias", d.N, d.dev, true);
  chk.outputs_apart({{&a.dx, "dx"}, {&a.dresidual, "dresidual"}, {&a.dweight, "dweight"},
                            {&a.dbias, "dbias"}},
                      {{&a.x, "x"}, {&a.weight, "weight"}, {&a.dout, "dout"}, {mean, "mean"},
                       {&a.rstd, "rstd"}, {&a.dresidual_out, "dresidual_out"}},
                      {{&a.dx, &a.dout}, {&a.dresidual, &a.dout}});
  check_weight_offset(chk, a.weight_offset);
  return d;
}

}  // namespace quack::detail
