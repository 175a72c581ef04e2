// RMSNorm backward kernel (persistent).
//
// Thread -> data: RowGeometry (common/row_geometry.h); a cluster (or a lone CTA) loops over
// row blocks rb, rb + clusters, ... The CTA's slices of x (dtype T) and dout (columns
// contiguous; dout in any float dtype) are staged in shared memory by the bulk-copy engine,
// two row blocks ahead (common/row_pipeline.cuh). Per row, each thread reads its kMaxVecs
// 16-byte vectors twice from shared memory (the weight from an fp32 copy each thread wrote
// once), all-reduces sum(g·xhat) over the row (g = dout·w), and writes
// dx = rstd·(g − xhat·mean(g·xhat)) (+ dresidual_out) to dx and dresidual.
// dweight/dbias: each thread keeps fp32 sums for its own columns across all its rows
// (registers); at the end a CTA folds its rows_per_cta rows through shared memory in a fixed
// order and writes one (N)-slice of the cluster's partial row; colsum adds the partial rows.
// Shared memory: 2 halves of reduction slots, the 2 pipeline stages (reused at the end as the
// (rows_per_cta, slice) fp32 staging tile of the column sums), the fp32 weight slice.
#pragma once

#include "common/cluster.cuh"
#include "common/reduce.cuh"
#include "common/row_pipeline.cuh"
#include "common/vec.cuh"
#include "norm/norm_config.h"
#include "norm/rmsnorm_params.h"

namespace quack::detail {

// Writes this CTA's column sums acc into part[cluster, rank's slice]. All threads call it.
template <int kVec, int kMaxVecs>
__device__ __forceinline__ void store_column_partial(const float (&acc)[kMaxVecs][kVec],
                                                     float* part, const RowGeometry& g,
                                                     const RowCtx& c, float* staging) {
  const int64_t cluster = blockIdx.x / g.cluster_n;
  float* dst = part + cluster * g.cols;
  const int rows = g.rows_per_cta();
  if (rows == 1) {
#pragma unroll
    for (int v = 0; v < kMaxVecs; ++v) {
      const int col = c.vec_index(g, v) * kVec;
      if (v < g.vpt && col < g.cols) {
#pragma unroll
        for (int i = 0; i < kVec; ++i)
          if (col + i < g.cols) dst[col + i] = acc[v][i];
      }
    }
    return;
  }
  const int slice = g.vpt * g.tpr * kVec;  // columns of this CTA's slice
  __syncthreads();                         // staging may still be read by a previous call
#pragma unroll
  for (int v = 0; v < kMaxVecs; ++v) {
    if (v >= g.vpt) continue;
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      staging[c.row_in_cta * slice + (v * g.tpr + c.lane_in_row) * kVec + i] = acc[v][i];
  }
  __syncthreads();
  const int64_t col0 = static_cast<int64_t>(c.rank) * slice;
  for (int lc = c.tid; lc < slice; lc += g.cta_threads) {
    if (col0 + lc >= g.cols) break;
    float s = 0.f;
    for (int r = 0; r < rows; ++r) s += staging[r * slice + lc];
    dst[col0 + lc] = s;
  }
}

// w = weight[col : col + K] (ones when absent).
template <int K, Cache kCache>
__device__ __forceinline__ void load_weight(const RowIO& w, int64_t col, float (&out)[K]) {
  if (w.ptr) {
    load_any<K, kCache>(w.ptr, w.dtype, col * w.col_stride, out);
  } else {
#pragma unroll
    for (int i = 0; i < K; ++i) out[i] = 1.f;
  }
}

// x, dy and w of the staged vector at slice element `local` (xs, ds: this row's x and dout
// slices; w32: the fp32 weight slice). kPlain: dout is in T, else in the runtime dtype ddt.
template <typename T, int kVec, bool kPlain>
__device__ __forceinline__ void load_staged(const T* xs, const void* ds, DType ddt,
                                            const float* w32, int local, float (&x)[kVec],
                                            float (&dy)[kVec], float (&w)[kVec]) {
  load_vec<T, kVec, Cache::kShared>(xs + local, x);
  if constexpr (kPlain)
    load_vec<T, kVec, Cache::kShared>(static_cast<const T*>(ds) + local, dy);
  else
    load_any<kVec, Cache::kShared>(ds, ddt, local, dy);
  load_vec<float, kVec, Cache::kShared>(w32 + local, w);
}

// kPlain: dout and dx in x's dtype T, no dresidual_out, no dresidual (training's usual call):
// typed loads and stores instead of the runtime-dtype ones, and one row pointer for dx (the bf16
// kernel issued ~2x the instructions its arithmetic needs, and ran issue-bound: ncu 2026-11-30).
// Per-thread constants are hoisted out of the row loop (a thread's columns never change): its
// count of valid vectors, their slice offsets, and the weight, converted once to fp32 in shared
// memory (ones when absent), so the loops have no dtype switch and no conversion for it.
template <typename T, int kVec, int kMaxVecs, bool kDw, bool kDb, bool kPlain = false>
__global__ void __launch_bounds__(kNormBwdMaxCtaThreads)
    rmsnorm_bwd_kernel(const __grid_constant__ RmsNormBwdParams p) {
  static_assert(kVec > 1 && kVec % 4 == 0, "vector path only (16-byte vectors); the general kernel takes the rest");
  extern __shared__ __align__(16) unsigned char smem[];
  const RowGeometry& g = p.g;
  const RowCtx c(g);
  bool waited = false;

  // Shared memory: [reduction slots (2 halves)] [pipeline: 2 stages x (x, dout) row slices]
  // [weight slice in fp32 (a pipeline vector no copy fills: each thread writes its own columns)].
  float* slots = reinterpret_cast<float*>(smem);
  const int64_t slot_bytes = g.reduce_slot_bytes();
  const DType ddt = p.dout.dtype;  // may differ from T (e.g. fp32 residual stream, bf16 dy)
  const int kElt[2] = {sizeof(T), elt_bytes(ddt)};
  const RowIO src[2] = {p.x, p.dout};
  const RowIO vsrc[2] = {RowIO{}, RowIO{}};
  const int vbytes[2] = {sizeof(float), 0};
  RowPipeline<2> pipe;
  pipe.init(smem + slot_bytes, g, kElt);
  row_allreduce_start(g, c, slots);  // waited on before the first reduction
  __syncthreads();

  // This thread's vectors: v < nv are inside the row; vector v sits at slice element
  // local0 + v·step and at row column col0 + v·step.
  const int step = g.tpr * kVec;
  const int local0 = c.lane_in_row * kVec;
  const int64_t col0 = int64_t(c.vec_index(g, 0)) * kVec;
  int nv = 0;
#pragma unroll
  for (int v = 0; v < kMaxVecs; ++v)
    if (v < g.vpt && col0 + v * step < g.cols) nv = v + 1;

  float* w32 = reinterpret_cast<float*>(pipe.vector_ptr(0, vbytes));
#pragma unroll
  for (int v = 0; v < kMaxVecs; ++v) {
    if (v >= nv) continue;
    float w[kVec];
    load_weight<kVec, Cache::kReadOnly>(p.weight, col0 + v * step, w);
    auto* dst = reinterpret_cast<float4*>(w32 + local0 + v * step);  // read by this thread only
#pragma unroll
    for (int j = 0; j < kVec / 4; ++j)
      dst[j] = make_float4(w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]);
  }

  float dw[kMaxVecs][kVec], db[kMaxVecs][kVec];  // (vectors, elements) column sums
#pragma unroll
  for (int v = 0; v < kMaxVecs; ++v)
#pragma unroll
    for (int i = 0; i < kVec; ++i) dw[v][i] = db[v][i] = 0.f;

  const int64_t clusters = gridDim.x / g.cluster_n;
  pipe.start(c.row_block, clusters, g, c, src, kElt, vsrc, vbytes);
  int k = 0;
  for (int64_t rb = c.row_block; rb < g.row_blocks; rb += clusters, ++k) {
    const int stage = k & 1;
    const int64_t row = rb * g.rows_per_cta() + c.row_in_cta;
    const bool row_ok = row < g.rows;
    const float rstd = row_ok ? p.rstd[row * p.rstd_stride] : 0.f;
    const T* xs = reinterpret_cast<const T*>(pipe.row_ptr(stage, 0, c.row_in_cta, sizeof(T)));
    const void* ds = pipe.row_ptr(stage, 1, c.row_in_cta, kElt[1]);
    pipe.wait(stage, (k >> 1) & 1);

    // Pass 1: dot = sum(dy·w·xhat) over this thread's columns; column sums.
    float dot = 0.f;
#pragma unroll
    for (int v = 0; v < kMaxVecs; ++v) {
      if (!row_ok || v >= nv) continue;
      const int local = local0 + v * step;
      float xh[kVec], dy[kVec], w[kVec];
      load_staged<T, kVec, kPlain>(xs, ds, ddt, w32, local, xh, dy, w);
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        xh[i] *= rstd;
        if constexpr (kDw) dw[v][i] += dy[i] * xh[i];
        if constexpr (kDb) db[v][i] += dy[i];
        dot += dy[i] * w[i] * xh[i];
      }
    }
    if (g.cluster_n > 1 && !waited) {
      cluster_wait();
      waited = true;
    }
    const float mean = row_allreduce(dot, g, c, slots, k, SumOp{}) * p.inv_n;
    // Pass 2: dx = (dy·w − xhat·mean)·rstd = rstd·(dy·w) − x·(rstd²·mean).
    const float x_scale = rstd * rstd * mean;
#pragma unroll
    for (int v = 0; v < kMaxVecs; ++v) {
      if (!row_ok || v >= nv) continue;
      const int local = local0 + v * step;
      const int64_t col = col0 + v * step;
      float x[kVec], dy[kVec], w[kVec], d[kVec];
      load_staged<T, kVec, kPlain>(xs, ds, ddt, w32, local, x, dy, w);
#pragma unroll
      for (int i = 0; i < kVec; ++i) d[i] = fmaf(dy[i] * w[i], rstd, -x[i] * x_scale);
      if constexpr (kPlain) {
        store_vec<T, kVec>(static_cast<T*>(p.dx.ptr) + p.dx.offset<true>(row, col), d);
        continue;
      }
      if (p.dresidual_out.ptr) {
        float r[kVec];
        load_any<kVec>(p.dresidual_out.ptr, p.dresidual_out.dtype,
                       p.dresidual_out.offset<true>(row, col), r);
#pragma unroll
        for (int i = 0; i < kVec; ++i) d[i] += r[i];
      }
      store_any<kVec>(p.dx.ptr, p.dx.dtype, p.dx.offset<true>(row, col), d);
      if (p.dresidual.ptr)
        store_any<kVec>(p.dresidual.ptr, p.dresidual.dtype, p.dresidual.offset<true>(row, col), d);
    }
    __syncthreads();  // every read of this stage is done before the copy engine refills it
    if (rb + 2 * clusters < g.row_blocks) pipe.issue(stage, rb + 2 * clusters, g, c, src, kElt);
  }
  if (g.cluster_n > 1 && !waited) cluster_wait();

  // The stages are idle now: fold the rows of the CTA through them.
  float* staging = reinterpret_cast<float*>(pipe.base);
  if constexpr (kDw) store_column_partial<kVec, kMaxVecs>(dw, p.dweight_part, g, c, staging);
  if constexpr (kDb) store_column_partial<kVec, kMaxVecs>(db, p.dbias_part, g, c, staging);
}

}  // namespace quack::detail
