// RMSNorm forward kernel.
//
// Thread -> data: RowGeometry (common/row_geometry.h). Each thread loads up to kMaxVecs
// vectors of kVec elements of x (and residual) into fp32 registers, h = x + residual, writes
// residual_out, folds sum(h^2), all-reduces it over the row (warp -> block -> cluster,
// common/reduce.cuh), then writes out = h·rstd·w + b. Nothing goes through shared memory but
// the reduction slots; weight and bias are read after the reduction (L2-resident, reused by
// every row) so they cost no registers during the loads.
// Alignment: on the vector path (kVec > 1) every (M, N) base and row stride is a multiple of
// kVec elements and weight/bias are contiguous; the scalar path (kVec == 1) takes any strides.
#pragma once

#include "common/cluster.cuh"
#include "common/reduce.cuh"
#include "common/row_general.cuh"
#include "common/vec.cuh"
#include "norm/norm_config.h"
#include "norm/rmsnorm_params.h"

namespace quack::detail {

template <typename T, int kVec, int kMaxVecs>
__global__ void __launch_bounds__(kNormMaxCtaThreads)
    rmsnorm_fwd_kernel(const __grid_constant__ RmsNormFwdParams p) {
  constexpr bool kVecPath = kVec > 1;
  extern __shared__ float slots[];  // 2 · reduce_slots floats
  const RowGeometry& g = p.g;
  const RowCtx c(g);
  if (g.cluster_n > 1) cluster_arrive_relaxed();

  const int64_t row = c.row_block * g.rows_per_cta() + c.row_in_cta;
  const bool row_ok = row < g.rows;
  float h[kMaxVecs][kVec];  // (vectors, elements) of this thread's slice of the row
  float sumsq = 0.f;
#pragma unroll
  for (int v = 0; v < kMaxVecs; ++v) {
    const int col = c.vec_index(g, v) * kVec;
    if (row_ok && v < g.vpt && col < g.cols) {
      load_vec<T, kVec>(static_cast<const T*>(p.x.ptr) + p.x.offset<kVecPath>(row, col), h[v]);
      if (p.residual.ptr) {
        float r[kVec];
        load_any<kVec>(p.residual.ptr, p.residual.dtype, p.residual.offset<kVecPath>(row, col), r);
#pragma unroll
        for (int i = 0; i < kVec; ++i) h[v][i] += r[i];
      }
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) h[v][i] = 0.f;
    }
  }
#pragma unroll
  for (int v = 0; v < kMaxVecs; ++v) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) sumsq += h[v][i] * h[v][i];
  }
  if (p.residual_out.ptr) {
#pragma unroll
    for (int v = 0; v < kMaxVecs; ++v) {
      const int col = c.vec_index(g, v) * kVec;
      if (row_ok && v < g.vpt && col < g.cols)
        store_any<kVec>(p.residual_out.ptr, p.residual_out.dtype,
                        p.residual_out.offset<kVecPath>(row, col), h[v]);
    }
  }

  if (g.cluster_n > 1) cluster_wait();
  const float total = row_allreduce(sumsq, g, c, slots, 0, SumOp{});
  const float rstd = rsqrtf(total * p.inv_n + p.eps);
  if (p.rstd && row_ok && c.rank == 0 && c.lane_in_row == 0) p.rstd[row * p.rstd_stride] = rstd;

#pragma unroll
  for (int v = 0; v < kMaxVecs; ++v) {
    const int col = c.vec_index(g, v) * kVec;
    if (!(row_ok && v < g.vpt && col < g.cols)) continue;
    float y[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) y[i] = h[v][i] * rstd;
    if (p.weight.ptr) {
      float w[kVec];
      load_any<kVec, Cache::kKeep>(p.weight.ptr, p.weight.dtype, col * p.weight.col_stride, w);
#pragma unroll
      for (int i = 0; i < kVec; ++i) y[i] *= w[i];
    }
    if (p.bias.ptr) {
      float b[kVec];
      load_any<kVec, Cache::kKeep>(p.bias.ptr, p.bias.dtype, col * p.bias.col_stride, b);
#pragma unroll
      for (int i = 0; i < kVec; ++i) y[i] += b[i];
    }
    store_any<kVec>(p.out.ptr, p.out.dtype, p.out.offset<kVecPath>(row, col), y);
  }
}

// General path (any strides, dtypes, N): two passes over global memory per row;
// outputs are written in pass 2 by the thread that read the same element (aliasing-safe).
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

}  // namespace quack::detail
