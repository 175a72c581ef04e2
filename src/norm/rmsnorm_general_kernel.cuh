// RMSNorm general-path kernels: any N, any strides (including 0), any mix of float dtypes.
// Used when the vector path's conditions fail (a column stride ≠ 1, misaligned rows, N not a
// multiple of the vector, dout in another dtype than x, N beyond the vector path's maximum).
//
// Thread -> data: CTA rank r of a row covers columns [r·span, (r+1)·span), span = ceil(N /
// cluster_n); thread `lane_in_row` takes columns lane, lane + tpr, ... of that range, one
// element at a time. Two passes over global memory per row (values are not kept in
// registers): pass 1 reduces, pass 2 re-reads and writes. Outputs are written only in pass 2
// by the thread that read the same element, so in-place aliasing (out = x, residual_out =
// residual, dx = dout) is safe. Backward dweight/dbias: each thread adds into its own columns
// of its cluster's partial row in global memory (no atomics; fixed order: deterministic).
#pragma once

#include "common/cluster.cuh"
#include "common/reduce.cuh"
#include "common/vec.cuh"
#include "norm/norm_config.h"
#include "norm/rmsnorm_params.h"

namespace quack::detail {

struct ColumnRange {
  int64_t begin, end;
  int step;
  __device__ ColumnRange(const RowGeometry& g, const RowCtx& c) {
    const int64_t span = (g.cols + g.cluster_n - 1) / g.cluster_n;
    begin = c.rank * span + c.lane_in_row;
    end = min(g.cols, (c.rank + 1) * span);
    step = g.tpr;
  }
};

__device__ __forceinline__ float load1(const RowIO& t, int64_t row, int64_t col) {
  float v[1];
  load_any<1>(t.ptr, t.dtype, t.offset<false>(row, col), v);
  return v[0];
}
__device__ __forceinline__ void store1(const RowIO& t, int64_t row, int64_t col, float x) {
  float v[1] = {x};
  store_any<1>(t.ptr, t.dtype, t.offset<false>(row, col), v);
}

__global__ void __launch_bounds__(kNormMaxCtaThreads)
    rmsnorm_fwd_general_kernel(const __grid_constant__ RmsNormFwdParams p) {
  extern __shared__ float slots[];
  const RowGeometry& g = p.g;
  const RowCtx c(g);
  if (g.cluster_n > 1) cluster_arrive_relaxed();
  const int64_t row = c.row_block * g.rows_per_cta() + c.row_in_cta;
  const bool row_ok = row < g.rows;
  const ColumnRange cols(g, c);
  float sumsq = 0.f;
  if (row_ok) {
#pragma unroll 4
    for (int64_t col = cols.begin; col < cols.end; col += cols.step) {
      float h = load1(p.x, row, col);
      if (p.residual.ptr) h += load1(p.residual, row, col);
      sumsq += h * h;
    }
  }
  if (g.cluster_n > 1) cluster_wait();
  const float total = row_allreduce(sumsq, g, c, slots, 0, SumOp{});
  const float rstd = rsqrtf(total * p.inv_n + p.eps);
  if (!row_ok) return;  // no barrier follows
  if (p.rstd && c.rank == 0 && c.lane_in_row == 0) p.rstd[row * p.rstd_stride] = rstd;
#pragma unroll 4
  for (int64_t col = cols.begin; col < cols.end; col += cols.step) {
    float h = load1(p.x, row, col);
    if (p.residual.ptr) h += load1(p.residual, row, col);
    float y = h * rstd;
    if (p.weight.ptr) y *= load1(p.weight, 0, col);
    if (p.bias.ptr) y += load1(p.bias, 0, col);
    if (p.residual_out.ptr) store1(p.residual_out, row, col, h);
    store1(p.out, row, col, y);
  }
}

__global__ void __launch_bounds__(kNormBwdMaxCtaThreads)
    rmsnorm_bwd_general_kernel(const __grid_constant__ RmsNormBwdParams p) {
  extern __shared__ float slots[];
  const RowGeometry& g = p.g;
  const RowCtx c(g);
  if (g.cluster_n > 1) cluster_arrive_relaxed();
  bool waited = false;
  const ColumnRange cols(g, c);
  const int64_t cluster = blockIdx.x / g.cluster_n;
  float* dw_part = p.dweight_part ? p.dweight_part + cluster * g.cols : nullptr;
  float* db_part = p.dbias_part ? p.dbias_part + cluster * g.cols : nullptr;
  const int64_t clusters = gridDim.x / g.cluster_n;
  int stage = 0;
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
    const float mean = row_allreduce(dot, g, c, slots, stage, SumOp{}) * p.inv_n;
    stage ^= 1;
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
