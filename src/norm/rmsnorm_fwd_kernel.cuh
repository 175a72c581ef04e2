// RMSNorm forward kernels.
//
// Vector path (persistent): thread -> data as RowGeometry (common/row_geometry.h); a cluster
// (or a lone CTA) loops over row blocks rb, rb + clusters, ... The CTA's slices of x and the
// residual are staged in shared memory by the bulk-copy engine two row blocks ahead
// (common/row_pipeline.cuh). Per row each thread reads its vpt 16-byte vectors from shared
// memory, folds sum(h^2) (h = x + residual in fp32), all-reduces it over the row (warp -> block
// -> cluster, common/reduce.cuh), then re-reads them and writes residual_out and out =
// h·rstd·w + b with 16-byte stores. The CTA's weight and bias slices are staged in shared
// memory once (global loads of them stalled the row loops on L1TEX, ncu 2026-11-30).
// Alignment: every (M, N) base and row stride keeps rows 16-byte aligned, N·elt and the
// residual's vec·elt are multiples of 16 bytes, weight/bias contiguous (host-checked).
#pragma once

#include "common/cluster.cuh"
#include "common/reduce.cuh"
#include "common/row_general.cuh"
#include "common/row_pipeline.cuh"
#include "common/vec.cuh"
#include "norm/norm_config.h"
#include "norm/rmsnorm_params.h"

namespace quack::detail {

// h = x + residual of one staged vector (element `local` of the CTA's slice).
template <typename T, int kVec>
__device__ __forceinline__ void load_h(const T* xs, const void* rs, DType rdt, bool residual,
                                       int local, float (&h)[kVec]) {
  load_vec<T, kVec, Cache::kShared>(xs + local, h);
  if (residual) {
    float r[kVec];
    if constexpr (sizeof(T) == 4)  // the host stages only residuals at least as wide as x
      load_vec<float, kVec, Cache::kShared>(static_cast<const float*>(rs) + local, r);
    else
      load_any<kVec, Cache::kShared>(rs, rdt, local, r);
#pragma unroll
    for (int i = 0; i < kVec; ++i) h[i] += r[i];
  }
}

template <typename T, int kVec>
__global__ void __launch_bounds__(kNormMaxCtaThreads, 1)
    rmsnorm_fwd_kernel(const __grid_constant__ RmsNormFwdParams p) {
  static_assert(kVec > 1, "vector path only; the general kernel takes every other layout");
  extern __shared__ __align__(16) unsigned char smem[];
  const RowGeometry& g = p.g;
  const RowCtx c(g);
  bool waited = false;

  // Shared memory: [reduction slots (2 stages)] [pipeline: 2 stages x (x, residual) slices].
  float* slots = reinterpret_cast<float*>(smem);
  const int64_t slot_bytes = g.reduce_slot_bytes();
  const DType rdt = p.residual.dtype;
  const int elt[2] = {sizeof(T), p.residual.ptr ? elt_bytes(rdt) : 0};
  const RowIO src[2] = {p.x, p.residual};
  const RowIO vsrc[2] = {p.weight, p.bias};
  const int vbytes[2] = {p.weight.ptr ? elt_bytes(p.weight.dtype) : 0,
                         p.bias.ptr ? elt_bytes(p.bias.dtype) : 0};
  RowPipeline<2> pipe;
  pipe.init(smem + slot_bytes, g, elt);
  row_allreduce_start(g, c, slots);  // waited on before the first reduction
  __syncthreads();

  const int64_t clusters = gridDim.x / g.cluster_n;
  pipe.start(c.row_block, clusters, g, c, src, elt, vsrc, vbytes);  // + weight, bias slices
  const void* ws = pipe.vector_ptr(0, vbytes);
  const void* bs = pipe.vector_ptr(1, vbytes);
  int k = 0;
  for (int64_t rb = c.row_block; rb < g.row_blocks; rb += clusters, ++k) {
    const int stage = k & 1;
    const int64_t row = rb * g.rows_per_cta() + c.row_in_cta;
    const bool row_ok = row < g.rows;
    const T* xs = reinterpret_cast<const T*>(pipe.row_ptr(stage, 0, c.row_in_cta, elt[0]));
    const void* rs = pipe.row_ptr(stage, 1, c.row_in_cta, elt[1]);
    pipe.wait(stage, (k >> 1) & 1);

    // Values are staged in shared memory, so the vector loops need no register arrays:
    // partial unrolling gives the loads enough independence.
    float sumsq = 0.f;
#pragma unroll 2
    for (int v = 0; v < g.vpt; ++v) {
      const int col = c.vec_index(g, v) * kVec;
      if (!(row_ok && col < g.cols)) continue;
      float h[kVec];
      load_h<T, kVec>(xs, rs, rdt, p.residual.ptr != nullptr, (v * g.tpr + c.lane_in_row) * kVec, h);
#pragma unroll
      for (int i = 0; i < kVec; ++i) sumsq += h[i] * h[i];
    }
    if (g.cluster_n > 1 && !waited) {
      cluster_wait();
      waited = true;
    }
    const float total = row_allreduce(sumsq, g, c, slots, k, SumOp{});
    const float rstd = rsqrtf(total * p.inv_n + p.eps);
    if (p.rstd && row_ok && c.rank == 0 && c.lane_in_row == 0) p.rstd[row * p.rstd_stride] = rstd;
#pragma unroll 2
    for (int v = 0; v < g.vpt; ++v) {
      const int col = c.vec_index(g, v) * kVec;
      if (!(row_ok && col < g.cols)) continue;
      float h[kVec], y[kVec];
      load_h<T, kVec>(xs, rs, rdt, p.residual.ptr != nullptr, (v * g.tpr + c.lane_in_row) * kVec, h);
      if (p.residual_out.ptr)
        store_any<kVec>(p.residual_out.ptr, p.residual_out.dtype,
                        p.residual_out.offset<true>(row, col), h);
#pragma unroll
      for (int i = 0; i < kVec; ++i) y[i] = h[i] * rstd;
      const int local = (v * g.tpr + c.lane_in_row) * kVec;
      if (p.weight.ptr) {
        float w[kVec];
        load_any<kVec, Cache::kShared>(ws, p.weight.dtype, local, w);
#pragma unroll
        for (int i = 0; i < kVec; ++i) y[i] *= w[i];
      }
      if (p.bias.ptr) {
        float b[kVec];
        load_any<kVec, Cache::kShared>(bs, p.bias.dtype, local, b);
#pragma unroll
        for (int i = 0; i < kVec; ++i) y[i] += b[i];
      }
      store_any<kVec>(p.out.ptr, p.out.dtype, p.out.offset<true>(row, col), y);
    }
    __syncthreads();  // every read of this stage is done before the copy engine refills it
    if (rb + 2 * clusters < g.row_blocks) pipe.issue(stage, rb + 2 * clusters, g, c, src, elt);
  }
  if (g.cluster_n > 1 && !waited) cluster_wait();
}

// General path (any strides, dtypes, N): two passes over global memory per row;
// outputs are written in pass 2 by the thread that read the same element (aliasing-safe).
__global__ void __launch_bounds__(kNormMaxCtaThreads)
    rmsnorm_fwd_general_kernel(const __grid_constant__ RmsNormFwdParams p) {
  extern __shared__ float slots[];
  const RowGeometry& g = p.g;
  const RowCtx c(g);
  row_allreduce_start(g, c, slots);
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
