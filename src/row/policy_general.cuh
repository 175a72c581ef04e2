// Row policy for every layout and dtype mix (RowPolicy::kGeneral): any strides (0 included for
// inputs), any N, each stream in its own runtime dtype. RMSNorm's general kernel
// (rmsnorm_fwd_kernel.cuh) with the op's math from its traits.
//
// Thread -> data: row_general_geometry (row_plan.cpp): a row spans tpr threads of a CTA and,
// for long rows, a cluster of cluster_n CTAs; CTA rank r covers columns [r·span, (r+1)·span)
// (span = ceil(N / cluster_n)) and thread lane_in_row takes columns lane, lane + tpr, ... of it.
// One row per row group, not persistent. The traits' fold reads the thread's elements from
// global memory (GlobalView: online folds sweep once), row_allreduce_red (runtime geometry,
// clusters through DSMEM), finish; the output sweep reads the inputs again and writes each
// element from the thread that read it, so an output may alias an input of the same layout.
#pragma once

#include "common/launch.h"
#include "common/reduce.cuh"
#include "common/row_general.cuh"
#include "row/op_traits.cuh"
#include "row/row_launch.h"
#include "row/row_params.h"
#include "row/row_reduce.cuh"
#include "row/row_views.cuh"

namespace quack::detail {

inline constexpr int kRowGeneralMaxThreads = 256;  // row_general_geometry's CTA size bound

template <class Op>
__global__ void __launch_bounds__(kRowGeneralMaxThreads)
    row_general_kernel(const __grid_constant__ RowParams p) {
  static_assert(Op::kCols == 0, "per-column vectors: not yet in the general policy");
  using R = typename Op::Red;
  extern __shared__ __align__(16) float row_slots[];
  const RowGeometry& g = p.g;
  const RowCtx c(g);
  row_allreduce_red_start<R>(g, c, row_slots);
  const int64_t row = c.row_block * g.rows_per_cta() + c.row_in_cta;
  const bool row_ok = row < g.rows;
  const ColumnRange cols(g, c);
  const int64_t end = row_ok ? cols.end : cols.begin;  // rows past M fold nothing
  const typename Op::RowIn rin = row_ok ? Op::load_row(p, row) : typename Op::RowIn{};
  const GlobalView<Op> view{p, row, cols.begin, end, cols.step};
  const auto part = Op::reduce(p, rin, view);
  if (g.cluster_n > 1) cluster_wait();
  const auto total = row_allreduce_red<R>(part, g, c, row_slots, 0);
  const typename Op::Row rr =
      Op::finish(p, rin, total, row, row_ok && c.rank == 0 && c.lane_in_row == 0);
  if constexpr (Op::kOut > 0) {
    if (!row_ok) return;  // no barrier follows
#pragma unroll 4
    for (int64_t col = cols.begin; col < cols.end; col += cols.step) {
      RowElem<Op::kIn, Op::kCols> e;
#pragma unroll
      for (int s = 0; s < Op::kIn; ++s) e.in[s] = load1(p.in[s], row, col);
      e.col = col;
      float o[Op::kOut];
      Op::apply(p, rr, e, o);
#pragma unroll
      for (int s = 0; s < Op::kOut; ++s) store1(p.out[s], row, col, o[s]);
    }
  }
}

template <class Op>
void launch_row_general(const RowPlan& plan, const RowParams& p, cudaStream_t stream,
                        const char* where) {
  launch(row_general_kernel<Op>, plan.grid, plan.threads, plan.smem, plan.cluster_n, stream,
         where, p);
}

}  // namespace quack::detail
