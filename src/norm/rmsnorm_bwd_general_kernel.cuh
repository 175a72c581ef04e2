// RMSNorm backward, general path (any strides, dtypes, N): two passes over global memory per
// row. Its own header so that only rmsnorm_bwd.cu defines it (the per-dtype TUs of the vector
// path include rmsnorm_bwd_kernel.cuh).
#pragma once

#include "common/cluster.cuh"
#include "common/reduce.cuh"
#include "common/row_general.cuh"
#include "norm/norm_config.h"
#include "norm/rmsnorm_params.h"

namespace quack::detail {

// dweight/dbias: each thread adds into its own columns of its cluster's partial row in global
// memory (no atomics, fixed order: deterministic). The explicit 1 CTA per SM minimum keeps
// ptxas from capping the kernel at 40 registers and spilling (it did with the cluster exchange).
__global__ void __launch_bounds__(kNormBwdMaxCtaThreads, 1)
    rmsnorm_bwd_general_kernel(const __grid_constant__ RmsNormBwdParams p) {
  extern __shared__ float slots[];
  const RowGeometry& g = p.g;
  const RowCtx c(g);
  row_allreduce_start(g, c, slots);
  bool waited = false;
  const ColumnRange cols(g, c);
  const int64_t cluster = blockIdx.x / g.cluster_n;
  float* dw_part = p.dweight_part ? p.dweight_part + cluster * g.cols : nullptr;
  float* db_part = p.dbias_part ? p.dbias_part + cluster * g.cols : nullptr;
  const int64_t clusters = gridDim.x / g.cluster_n;
  int k = 0;  // reductions so far
  // Every row group of a CTA owns the same partial columns: group 0 zeroes them, then the
  // groups add in row_in_cta order (below), one barrier apart.
  if (c.row_in_cta == 0)
    for (int64_t col = cols.begin; col < cols.end; col += cols.step) {
      if (dw_part) dw_part[col] = 0.f;
      if (db_part) db_part[col] = 0.f;
    }
  if (g.rows_per_cta() > 1) __syncthreads();
  for (int64_t rb = c.row_block; rb < g.row_blocks; rb += clusters) {
    const int64_t row = rb * g.rows_per_cta() + c.row_in_cta;
    const bool row_ok = row < g.rows;
    const float rstd = row_ok ? p.rstd[row * p.rstd_stride] : 0.f;
    float dot = 0.f;
    if (row_ok) {
#pragma unroll 4
      for (int64_t col = cols.begin; col < cols.end; col += cols.step) {
        const float w = p.weight.ptr ? load1(p.weight, 0, col) : 1.f;
        dot += load1(p.dout, row, col) * w * load1(p.x, row, col) * rstd;
      }
    }
    if (g.cluster_n > 1 && !waited) {
      cluster_wait();
      waited = true;
    }
    const float mean = row_allreduce(dot, g, c, slots, k++, SumOp{}) * p.inv_n;
    // Rows of one CTA update the same partial columns: take turns in row_in_cta order.
    for (int r = 0; r < g.rows_per_cta(); ++r) {
      if (row_ok && c.row_in_cta == r) {
        for (int64_t col = cols.begin; col < cols.end; col += cols.step) {
          const float xh = load1(p.x, row, col) * rstd;
          const float dy = load1(p.dout, row, col);
          const float w = p.weight.ptr ? load1(p.weight, 0, col) : 1.f;
          float d = (dy * w - xh * mean) * rstd;
          if (p.dresidual_out.ptr) d += load1(p.dresidual_out, row, col);
          store1(p.dx, row, col, d);
          if (p.dresidual.ptr) store1(p.dresidual, row, col, d);
          if (dw_part) dw_part[col] += dy * xh;
          if (db_part) db_part[col] += dy;
        }
      }
      if (g.rows_per_cta() > 1) __syncthreads();
    }
  }
  if (g.cluster_n > 1 && !waited) cluster_wait();
}

}  // namespace quack::detail
