// Row policy for every layout and dtype mix (RowPolicy::kGeneral): any strides (0 included for
// inputs), any N, each stream and vector in its own runtime dtype, the op's math from its
// traits.
//
// Thread -> data: row_general_geometry (row_plan.cpp): a row spans tpr threads of a CTA and,
// for long rows, a cluster of cluster_n CTAs; CTA rank r covers columns [r·span, (r+1)·span)
// (span = ceil(N / cluster_n)) and thread lane_in_row takes columns lane, lane + tpr, ... of it.
// Row blocks rb, rb + clusters, ... per cluster: one each (grid = every row block) for ops
// without column accumulations; persistent (grid = resident clusters) for ops with them. The
// traits' fold reads the thread's elements from global memory (GlobalView: online folds sweep
// once), row_allreduce_red (runtime geometry, clusters through DSMEM), finish; the output sweep
// reads the inputs again and writes each element from the thread that read it, so an output
// may alias an input of the same layout.
// Column accumulations: each thread adds its columns' terms straight into its cluster's
// partial row in global memory (RowParams::part, zeroed by the CTA first); the rows of a CTA
// share those columns and take turns in row_in_cta order, one barrier apart (a fixed order:
// deterministic).
#pragma once

#include "common/launch.h"
#include "common/pdl.cuh"
#include "common/row_general.cuh"
#include "row/op_traits.cuh"
#include "row/row_launch.h"
#include "row/row_params.h"
#include "row/row_reduce.cuh"
#include "row/row_views.cuh"

namespace quack::detail {

inline constexpr int kRowGeneralMaxThreads = 256;  // row_general_geometry's CTA size bound

// The explicit one CTA per SM keeps ptxas from capping the kernel's registers low and spilling
// (as RMSNorm's general backward kernel).
template <class Op>
__global__ void __launch_bounds__(kRowGeneralMaxThreads, 1)
    row_general_kernel(const __grid_constant__ RowParams p) {
  // The column sums of the partial rows may launch now (launch_dependent: they wait for this
  // kernel's end before reading); they start only once every CTA of this grid has, so none of
  // it waits behind them.
  if constexpr (Op::kAcc > 0) pdl_launch_dependents();
  if (row_gate_skips_kernel<Op>(p)) return;
  using R = typename Op::Red;
  constexpr int kA = row_dim(Op::kAcc);
  extern __shared__ __align__(16) float row_slots[];
  const RowGeometry& g = p.g;
  const RowCtx c(g);
  row_allreduce_red_start<R>(g, c, row_slots);
  const ColumnRange cols(g, c);
  const int64_t clusters = gridDim.x / g.cluster_n;
  float* part[kA];
#pragma unroll
  for (int a = 0; a < kA; ++a)
    part[a] = Op::kAcc > 0 && p.part[a] ? p.part[a] + (blockIdx.x / g.cluster_n) * g.cols : nullptr;
  if constexpr (Op::kAcc > 0) {
    // Every row of a CTA owns the same partial columns: row 0 zeroes them, then the rows add
    // in row_in_cta order (below), one barrier apart.
    if (c.row_in_cta == 0)
      for (int64_t col = cols.begin; col < cols.end; col += cols.step)
#pragma unroll
        for (int a = 0; a < Op::kAcc; ++a)
          if (part[a]) part[a][col] = 0.f;
    if (g.rows_per_cta() > 1) __syncthreads();
  }
  bool waited = false;
  int k = 0;
  for (int64_t rb = c.row_block; rb < g.row_blocks; rb += clusters, ++k) {
    const int64_t row = rb * g.rows_per_cta() + c.row_in_cta;
    const bool row_ok = row < g.rows;
    const int64_t end = row_ok ? cols.end : cols.begin;  // rows past M fold nothing
    const typename Op::RowIn rin = row_ok ? Op::load_row(p, row) : typename Op::RowIn{};
    const GlobalView<Op> view{p, row, cols.begin, end, cols.step};
    const auto part_val = Op::reduce(p, rin, view);
    if (g.cluster_n > 1 && !waited) {
      cluster_wait();
      waited = true;
    }
    const auto total = row_allreduce_red<R>(part_val, g, c, row_slots, k);
    const typename Op::Row rr =
        Op::finish(p, rin, total, row, row_ok && c.rank == 0 && c.lane_in_row == 0);
    // The output sweep (rows of a CTA in turns when they accumulate into shared columns).
    const bool out_on = row_gate_outputs_on<Op>(p);
    auto sweep = [&] {
#pragma unroll 4
      for (int64_t col = cols.begin; col < cols.end; col += cols.step) {
        RowElem<Op::kIn, Op::kCols> e;
#pragma unroll
        for (int s = 0; s < Op::kIn; ++s) e.in[s] = load_in1<Op>(p, s, row, col);
        load_vec1<Op>(p, col, e);
        e.col = col;
        float o[row_dim(Op::kOut)];
        if constexpr (Op::kAcc > 0) {
          float a[Op::kAcc];
          if constexpr (Op::kAccInFold) {
            Op::apply(p, rr, e, o);
            Op::accumulate(p, rin, e, a);
          } else {
            Op::apply(p, rr, e, o, a);
          }
#pragma unroll
          for (int q = 0; q < Op::kAcc; ++q)
            if (part[q]) part[q][col] += a[q];
        } else {
          Op::apply(p, rr, e, o);
        }
#pragma unroll
        for (int s = 0; s < Op::kOut; ++s)
          if (!row_out_optional<Op>(s) || p.out[s].ptr != nullptr) store1(p.out[s], row, col, o[s]);
      }
    };
    if constexpr (Op::kAcc > 0) {
      for (int r = 0; r < g.rows_per_cta(); ++r) {
        if (row_ok && c.row_in_cta == r) sweep();
        if (g.rows_per_cta() > 1) __syncthreads();
      }
    } else if (Op::kOut > 0) {
      if (row_ok && out_on) sweep();
    }
  }
  if (g.cluster_n > 1 && !waited) cluster_wait();
}

template <class Op>
void launch_row_general(const RowPlan& plan, const RowParams& p, cudaStream_t stream,
                        const char* where) {
  launch(row_general_kernel<Op>, plan.grid, plan.threads, plan.smem, plan.cluster_n, stream,
         where, p);
}

/// Resident clusters of Op's general kernel for the plan (its persistent grid, with column
/// accumulations).
template <class Op>
int64_t row_general_resident(const RowPlan& plan, int device, const char* where) {
  return max_resident(reinterpret_cast<const void*>(row_general_kernel<Op>), plan.threads,
                      plan.smem, plan.cluster_n, device, where);
}

}  // namespace quack::detail
