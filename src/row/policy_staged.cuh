// Row policy with runtime geometry, persistent (RowPolicy::kStaged): the design of RMSNorm's
// backward (docs/performance.md), the op's math from its traits. The policy of ops with
// column accumulations (dweight, dbias).
//
// Thread -> data: RowGeometry (common/row_geometry.h, planned by row_staged_geometry): a row
// spans tpr threads of a CTA (rows_per_cta rows per CTA) and, for long rows, a cluster of
// cluster_n CTAs; thread lane_in_row of CTA rank owns the row's 16-byte vectors
// (rank·vpt + v)·tpr + lane_in_row, v < vpt ≤ kMaxVecs. Persistent: a cluster (or a lone CTA)
// loops over row blocks rb, rb + clusters, ...; its slices of every present input stream are
// staged in shared memory by the bulk-copy engine kStages row blocks ahead
// (common/row_pipeline.cuh; with one stage, the row block after the next is also fetched into
// L2 while the current one is worked on, so the next copy reads L2). Per row block: wait for
// the stage; the traits' fold over the
// thread's vectors in shared memory (LDS.128, conflict-free; the row's per-row inputs,
// Op::load_row, read at the row block's start, or during the row block before with
// RowConfig::row_ahead); row_allreduce_red (warps, CTA
// slots, clusters through distributed shared memory); finish; outputs from shared memory
// (16-byte streaming stores); __syncthreads; the stage refilled with the row block kStages
// ahead.
// Per-column vectors: each thread converts its own columns once into fp32 shared memory (after
// the stages; plus the op's col_shift), so the row loops read them without conversion.
// Column accumulations: each thread keeps fp32 sums of its own columns' terms (from apply, or
// from the fold's sweep: kAccInFold) over all its rows in registers (kAcc x kMaxVecs x
// vector); at the end a CTA folds its rows_per_cta rows through shared memory in a fixed
// order and writes one (N) slice of its cluster's partial row (RowParams::part); colsum
// (run_row_call) adds the partial rows in a fixed order.
// Shared memory: [reduction slots (two stages) and exchange mbarriers]
// [RowPipeline: its barriers, kStages stages x present streams x rows_per_cta row slices, then
// the fp32 vector slices] — row_staged_smem_bytes (row_config.h) on the host.
// Host-checked (plan_row): every stream in its instance dtype (D), input streams with unit
// column stride, 16-byte aligned base and row stride, N a multiple of the vector, slice
// offsets multiples of 16 bytes; vectors contiguous, 16-byte aligned; the geometry's
// vpt ≤ kMaxVecs, its CTA ≤ kThreads.
#pragma once

#include "common/cluster.cuh"
#include "common/pdl.cuh"
#include "common/row_pipeline.cuh"
#include "common/vec.cuh"
#include "row/op_traits.cuh"
#include "row/row_config.h"
#include "row/row_params.h"
#include "row/row_reduce.cuh"
#include "row/row_views.cuh"

namespace quack::detail {

/// Writes this CTA's column sums acc into part[cluster, this CTA's columns]. All threads call
/// it (it holds barriers when a CTA has several rows). `staging`: rows_per_cta x slice floats of
/// shared memory no longer in use.
template <int kVec, int kMaxVecs>
__device__ __forceinline__ void row_store_partial(const float (&acc)[kMaxVecs][kVec], float* part,
                                                  const RowGeometry& g, const RowCtx& c,
                                                  float* staging) {
  const int64_t cluster = blockIdx.x / g.cluster_n;
  float* dst = part + cluster * g.cols;
  const int rows = g.rows_per_cta();
  if (rows == 1) {
#pragma unroll
    for (int v = 0; v < kMaxVecs; ++v) {
      const int64_t col = int64_t(c.vec_index(g, v)) * kVec;
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

/// The per-row inputs of row block rb's row of this thread ({} past the last row).
template <class Op>
__device__ __forceinline__ typename Op::RowIn row_staged_row_in(const RowParams& p,
                                                                const RowGeometry& g,
                                                                const RowCtx& c, int64_t rb) {
  const int64_t row = rb * g.rows_per_cta() + c.row_in_cta;
  return row < g.rows ? Op::load_row(p, row) : typename Op::RowIn{};
}

/// kRowAhead (RowConfig::row_ahead): each row block's per-row inputs are loaded during the row
/// block before (the same values, so the same results), their latency off the fold's path.
template <class Op, class D, int kMaxVecs, int kStages, int kThreads, bool kRowAhead = false>
__global__ void __launch_bounds__(kThreads, 1)
    row_staged_kernel(const __grid_constant__ RowParams p) {
  // The column sums of the partial rows may launch now (launch_dependent: they wait for this
  // kernel's end before reading); they start only once every CTA of this grid has, so none of
  // it waits behind them.
  if constexpr (Op::kAcc > 0) pdl_launch_dependents();
  if (row_gate_skips_kernel<Op>(p)) return;  // kGate == kKernel, closed (op_traits.cuh)
  constexpr int kIn = Op::kIn, kOut = Op::kOut, kC = row_dim(Op::kCols), kA = row_dim(Op::kAcc);
  constexpr int kVec = row_vec_elems<D, kIn>();  // elements per vector
  static_assert(kVec % 4 == 0, "16-byte vectors of the narrowest stream");
  using R = typename Op::Red;
  using Pipe = RowPipeline<kIn, kC, kStages>;
  extern __shared__ __align__(16) unsigned char smem[];
  const RowGeometry& g = p.g;
  const RowCtx c(g);
  bool waited = false;

  float* slots = reinterpret_cast<float*>(smem);
  bool present[kIn];
  int elt[kIn];
  RowIO src[kIn];
  row_for<kIn>([&](auto S) {
    constexpr int s = decltype(S)::value;
    present[s] = !row_in_optional<Op>(s) || p.in[s].ptr != nullptr;
    elt[s] = present[s] ? int{sizeof(row_in_t<D, s>)} : 0;
    src[s] = p.in[s];
  });
  RowIO vsrc[kC];  // no bulk copies of the vectors: each thread converts its own columns
  int vbytes[kC];
#pragma unroll
  for (int v = 0; v < kC; ++v) vbytes[v] = Op::kCols > 0 ? 4 : 0;
  Pipe pipe;
  pipe.init(smem + row_reduce_smem_bytes(g.reduce_slots(), g.cluster_n, R::kFloats), g, elt);
  row_allreduce_red_start<R>(g, c, slots);  // waited on before the first reduction
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

  SharedCols<Op::kCols, kVec> cols{nullptr, 0, local0, step};
  if constexpr (Op::kCols > 0) {
    float* vec32 = reinterpret_cast<float*>(pipe.vector_ptr(0, vbytes));
    const int stride = static_cast<int>(Pipe::align16(int64_t(pipe.slice) * 4) / 4);
    cols.base = vec32;
    cols.stride = stride;
#pragma unroll
    for (int cc = 0; cc < Op::kCols; ++cc) {
#pragma unroll
      for (int v = 0; v < kMaxVecs; ++v) {
        if (v >= nv) continue;
        Packed<typename D::Vec, kVec> w;
        load_col_packed<typename D::Vec, kVec>(p.vec[cc], col0 + v * step, w);
        float f[kVec];
        unpack(w, f);
        if constexpr (Op::kColShift) {
          const float shift = Op::col_shift(p, cc);
#pragma unroll
          for (int q = 0; q < kVec; ++q) f[q] += shift;
        }
        // Written and later read by this thread's columns only (threads of other rows of the
        // CTA write the same values at the same places).
        auto* dst = reinterpret_cast<float4*>(vec32 + cc * stride + local0 + v * step);
#pragma unroll
        for (int q = 0; q < kVec / 4; ++q)
          dst[q] = make_float4(f[4 * q], f[4 * q + 1], f[4 * q + 2], f[4 * q + 3]);
      }
    }
  }

  float acc[kA][kMaxVecs][kVec];
#pragma unroll
  for (int a = 0; a < kA; ++a)
#pragma unroll
    for (int v = 0; v < kMaxVecs; ++v)
#pragma unroll
      for (int i = 0; i < kVec; ++i) acc[a][v][i] = 0.f;

  const int64_t clusters = gridDim.x / g.cluster_n;
  typename Op::RowIn rin_ahead{};  // the first row block's: in flight while the vectors load
  if constexpr (kRowAhead) rin_ahead = row_staged_row_in<Op>(p, g, c, c.row_block);
  pipe.start(c.row_block, clusters, g, c, src, elt, vsrc, vbytes);
  int k = 0;
  for (int64_t rb = c.row_block; rb < g.row_blocks; rb += clusters, ++k) {
    const int stage = k % kStages;
    const int64_t row = rb * g.rows_per_cta() + c.row_in_cta;
    const bool row_ok = row < g.rows;
    const typename Op::RowIn rin =
        kRowAhead ? rin_ahead : row_ok ? Op::load_row(p, row) : typename Op::RowIn{};
    if constexpr (kRowAhead) rin_ahead = row_staged_row_in<Op>(p, g, c, rb + clusters);
    const void* buf[kIn];
    row_for<kIn>([&](auto S) {
      constexpr int s = decltype(S)::value;
      buf[s] = pipe.row_ptr(stage, s, c.row_in_cta, elt[s]) + local0 * sizeof(row_in_t<D, s>);
    });
    pipe.wait(stage, (k / kStages) & 1);

    using Cols = std::conditional_t<Op::kReduceCols, SharedCols<Op::kCols, kVec>, NoCols>;
    const Cols fold_cols = [&] {
      if constexpr (Op::kReduceCols) return cols;
      else return NoCols{};
    }();
    const SharedView<Op, D, kMaxVecs, 1, Cols> view{buf, present, row_ok ? nv : 0, step, col0,
                                                    fold_cols};
    typename R::Val part = R::identity();
    if (row_ok) {
      if constexpr (Op::kAccInFold) {
        auto sums = [&](int a, int v, int i) -> float& { return acc[a][v][i]; };
        const AccFoldView<Op, decltype(view), decltype(sums)> fold_view{view, p, rin, sums};
        part = Op::reduce(p, rin, fold_view);
      } else {
        part = Op::reduce(p, rin, view);
      }
    }
    if (g.cluster_n > 1 && !waited) {
      cluster_wait();
      waited = true;
    }
    const auto total = row_allreduce_red<R>(part, g, c, slots, k);
    const typename Op::Row rr =
        Op::finish(p, rin, total, row, row_ok && c.rank == 0 && c.lane_in_row == 0);
    if (row_ok) {
      void* dst[row_dim(kOut)];
      out_ptrs<Op, D>(p, row, col0, dst);
#pragma unroll
      for (int v = 0; v < kMaxVecs; ++v) {
        if (v >= nv) continue;
        float x[kIn][kVec], w[kC][kVec];
        view.load(v, x);
        cols.load(v, w);
        apply_store<Op, D, kVec>(p, rr, x, w, col0 + v * step, dst, int64_t{v} * step,
                                 [&](int a, int i) -> float& { return acc[a][v][i]; });
      }
    }
    __syncthreads();  // every read of this stage is done before the copy engine refills it
    if (rb + kStages * clusters < g.row_blocks)
      pipe.issue(stage, rb + kStages * clusters, g, c, src, elt);
    if (kStages == 1 && rb + 2 * clusters < g.row_blocks)
      pipe.prefetch(rb + 2 * clusters, g, c, src, elt);
  }
  if (g.cluster_n > 1 && !waited) cluster_wait();

  if constexpr (Op::kAcc > 0) {
    // The stages are idle now: fold the rows of the CTA through them.
    float* staging = reinterpret_cast<float*>(pipe.base);
#pragma unroll
    for (int a = 0; a < Op::kAcc; ++a)
      if (p.part[a]) row_store_partial<kVec, kMaxVecs>(acc[a], p.part[a], g, c, staging);
  }
}

}  // namespace quack::detail
