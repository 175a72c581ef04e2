// The interface between a row op and the row skeleton: the op's traits (device code).
//
// A row op reads M rows of N elements, reduces each row to a few floats, and writes per
// element (and per row). Its traits, one struct per direction in the op's folder
// (src/softmax/softmax_traits.cuh), say only the math; the skeleton (the policies in
// policy_*.cuh, row_reduce.cuh, the plan) owns loads, stores, row loops, pipelines and the
// reduction across threads, warps, CTAs and clusters.
//
//   struct MyOp : RowOpBase {
//     static constexpr int kIn = 1;    // per-element input streams, RowParams::in[0..kIn)
//     static constexpr int kOut = 1;   // per-element output streams, RowParams::out[0..kOut)
//     using Red = OnlineMaxSum;        // reduction kind (row_reduce.cuh): RedSum, RedMax,
//                                      // OnlineMaxSum, or the op's own (K ≤ 4 floats,
//                                      // identity, bitwise-commutative combine, fold)
//     struct Row { ... };              // what the finish hands to every element
//
//     // (optional, RowOpBase: none) per-row inputs, read once per row before the fold:
//     // struct RowIn { float rstd; };  static RowIn load_row(const RowParams&, int64_t row);
//
//     // This thread's part of the row's reduction: a fold over the elements the thread holds.
//     // `view.for_each(f)` calls f(const RowElem<kIn, kCols>& e) for each of them; a view
//     // over registers or shared memory (View::kOnChip) may be swept several times cheaply.
//     template <class View>
//     __device__ static typename Red::Val reduce(const RowParams& p, const RowIn& in,
//                                                const View& view);
//
//     // The row's reduced value -> Row. `writer` is true in exactly one thread of each valid
//     // row: it writes per-row outputs (RowParams::row_out, e.g. rstd, lse, loss).
//     __device__ static Row finish(const RowParams& p, const RowIn& in,
//                                  const typename Red::Val& total, int64_t row, bool writer);
//
//     // One element's outputs (fp32; the skeleton converts and stores them).
//     __device__ static void apply(const RowParams& p, const Row& r,
//                                  const RowElem<kIn, kCols>& e, float (&out)[kOut]);
//   };
//
// Every input stream of an instance has one dtype and every output stream another (the
// instance's pair, row_ops.cmake); other dtype mixes run on the general policy, which converts
// per element at run time. All math is fp32.
//
// Extension points, not used by the ops of this milestone (the kernels static_assert them):
//   kCols > 0   per-column vectors (weight, bias: RowParams::vec) handed in e.vec[]: the ring
//               policy is to keep the CTA's slice in registers (RMSNorm's measured win);
//   column accumulations (dweight, dbias): per-thread fp32 sums of a per-element term over a
//               persistent CTA's rows, folded per CTA into (P, N) partials that colsum adds in a
//               fixed order (RMSNorm's backward: common/colsum.h).
#pragma once

#include <cstdint>

#include "row/row_params.h"

namespace quack::detail {

/// One element as the traits see it: the inputs at (row, col) in fp32, the per-column vectors'
/// values at col (when kCols > 0), and the column.
template <int kIn, int kCols>
struct RowElem {
  float in[kIn];
  float vec[kCols > 0 ? kCols : 1];
  int64_t col;
};

/// Defaults of a traits struct: no per-column vectors, no per-row inputs.
struct RowOpBase {
  static constexpr int kCols = 0;
  struct RowIn {};
  __device__ __forceinline__ static RowIn load_row(const RowParams&, int64_t) { return {}; }
};

}  // namespace quack::detail
