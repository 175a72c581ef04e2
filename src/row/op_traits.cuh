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
//     using Red = OnlineMaxSum;        // reduction kind (row_reduce.cuh): RedSum, RedSums<K>,
//                                      // RedMax, OnlineMaxSum, RedMeanM2, or the op's own
//                                      // (K ≤ 4 floats, identity, bitwise-commutative
//                                      // combine, fold)
//     struct Row { ... };              // what the finish hands to every element
//
//     // (optional, RowOpBase: none) per-row inputs, read once per row before the fold (the
//     // ring policy reads them one row ahead: they must not be what the kernel writes):
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
//     // With column accumulations (kAcc > 0) instead: also the element's terms of each
//     // accumulation, which the skeleton adds up over the rows per column:
//     // __device__ static void apply(const RowParams& p, const Row& r,
//     //                              const RowElem<kIn, kCols>& e, float (&out)[kOut],
//     //                              float (&acc)[kAcc]);
//   };
//
// Each stream of an instance has its own dtype (row_dtypes.cuh; the instance list,
// row_ops.cmake, names them per line: one per input stream, one per output stream, one for the
// per-column vectors); a call whose dtypes no instance has runs on the general policy, which
// converts per element at run time. All math is fp32.
//
// Options of a traits struct (RowOpBase's defaults in brackets):
//   kCols [0]           per-column vectors RowParams::vec[0..kCols) (weight, bias), handed to
//                       apply in e.vec[] (fp32). An absent vector (ptr == nullptr) reads as 0,
//                       so traits fold presence into scalars (w + offset, with offset 1 and w 0
//                       for an absent weight) rather than branching. Where they live: register
//                       and looped policies load them with 16-byte read-only loads next to the
//                       element's use; the ring policy keeps the CTA's slices in registers for
//                       the whole persistent kernel; the staged policy converts them once into
//                       fp32 shared memory; the general policy reads them per element.
//   kReduceCols [false] the fold also reads e.vec (a backward's dy·w); otherwise only apply
//                       does, and the policies load no vector before the reduction.
//   kLateCols [false]   the register policy may load the vectors one at a time after the
//                       reduction where they do not fit the registers beside the row (RMSNorm's
//                       weight: its t1024v4 instance then takes 32 registers, two CTAs per SM);
//                       otherwise the plan skips such register configurations.
//   kColsAtApply [false] the register and looped policies load the vectors one at a time where
//                       apply uses them even where they would fit beside the row (the plan's
//                       choice of configurations is unchanged: it still asks for the fit, or
//                       kLateCols): LayerNorm's forward, whose fp32 weight and bias held with
//                       the row took 64 of its 103 registers at 4 vectors per thread and halved
//                       its CTAs per SM against RMSNorm's (small rows: latency-bound). The
//                       register policy then computes and stores the output streams one at a
//                       time, the last first, each from the packed row again, with the vectors
//                       one 16-byte word at a time (apply_store_by_stream: apply must be a pure
//                       function of its arguments, called once per element and stream), is
//                       held to 1536-2048 threads per SM by the row's registers
//                       (row_register_at_apply_min_ctas), and has the at_apply entries
//                       (r16t16v2, row_config.h).
//   kAcc [0]            column accumulations (dweight, dbias): apply's acc[a] terms are summed
//                       per column over all rows of a persistent CTA in fp32 registers, folded
//                       per CTA in a fixed order into one (N) partial row per cluster
//                       (RowParams::part[a]; skipped when nullptr), which run_row_call adds in
//                       a fixed order (common/colsum.h): identical bits run to run on one
//                       device. Only the persistent policies take such ops (staged, general).
//   kAccInFold [false]  (ops with kAcc) the accumulations' terms come from the fold's sweep
//                       instead of apply: accumulate(p, in, e, acc) is called once per element
//                       the thread folds, right after the fold reads it (where the fold already
//                       computes what the terms need: RMSNorm's x̂ for dweight), and apply takes
//                       no acc. A fold that sweeps its view twice still accumulates once.
//   kColShift [false]   col_shift(p, c) is added to vector c's values where the policy converts
//                       them to fp32 (a weight's offset: the staged policy adds it once per CTA
//                       into its fp32 copy, the general policy per element), so the fold and
//                       apply read w + offset without an add per element. Only the staged and
//                       general policies take such ops (those of ops with column
//                       accumulations).
//   kOptIn [0]          the last kOptIn input streams may be absent at run time
//                       (RowParams::in[s].ptr == nullptr): they read as 0 and cost no memory
//                       traffic (the staged policy stages only present streams).
//   kOptOut [0]         the last kOptOut output streams may be absent: not stored.
//   kTrialConfigs [false] the plan's configurations under trial (RowConfig::trial,
//                       row_config.h) are compiled for the op, so `--config all` and the GPU
//                       tests reach them; unforced, the plan takes them on 16-bit rows beyond
//                       64 KB (row_plan.cpp's preferred entries: cl-t256v8 for softmax's and
//                       log_softmax's forwards and for LayerNorm's, kColsAtApply, with fp32
//                       weight and bias; with 16-bit ones it keeps the ring), or by
//                       kTrialPlanned's rules.
//                       Ops with per-column vectors (kColsAtApply) get of the persistent cluster
//                       register entries only the one-stage ones, with 16-bit vectors
//                       (row_config_usable: cl-t256v8-s1, not -s2). Ops with column
//                       accumulations (LayerNorm's plain backward) get of them only
//                       staged-v4-ra, which the plan takes in staged-v4's place on 16-bit
//                       rows.
//   kTrialPlanned [false] the plan's rules measured for cross-entropy's forwards apply instead
//                       (cl-t256v8 / cl-t256v8-s1 on 16-bit rows beyond 64 KB by output and
//                       gate, no warp-per-row entry).
//   kGate [kNone]       a switch read on the device, Op::gate_open(p) (from memory the kernel
//                       does not write, so every CTA sees the same value): RowGate::kOutputs:
//                       the per-element outputs are stored (and apply called) only while it is
//                       open; the fold, finish and per-row outputs run either way (a forward
//                       whose gradient output is decided by an earlier kernel). RowGate::kKernel:
//                       where it is closed every CTA returns at its first instruction, before
//                       any load, barrier or cluster arrive (a backward that runs only when an
//                       earlier kernel says so; two forwards launched together with gates of
//                       opposite polarity, one of which works). The polarity is gate_open's.
//                       Ops without column accumulations.
//   kFixVector [false]  the vector policies' output step (apply_store, row_views.cuh: the
//                       register, cluster register, ring and staged policies) computes a 16-byte
//                       vector's outputs as apply_bulk(p, r, e, out) per element (apply's
//                       signature) and then fix_vector(p, r, x, v, col0, out) once, where x and v
//                       are the vector's inputs and per-column values ([kIn][kVec],
//                       [row_dim(kCols)][kVec], fp32), col0 its first column and out[s][i] the
//                       outputs of stream s at column col0 + i. apply_bulk is apply for the
//                       ordinary elements; fix_vector overwrites, with apply's values, those of
//                       the few elements where apply differs (cross-entropy: the target column's
//                       one-hot, an ignored row's zeros), behind a branch the common vector does
//                       not take, so the per-element compare leaves the common path. Together
//                       they give apply's bits; the general policy and apply_store_by_stream
//                       (kColsAtApply) call apply. Ops without column accumulations.
//                       fix_mask<kVecs, kVec, kStride>(r, col_t) [every bit]: the vectors j of
//                       a thread whose vector j starts at column col_t + j·kStride that
//                       fix_vector may change (bit j); the cluster register policy computes it
//                       once per row and calls fix_vector for those alone, so the common vector
//                       tests one bit instead of the op's per-vector compare (cross-entropy:
//                       the target's offset from the vector's column, recomputed per vector).
//   kHeldFold [false]   the held cluster register entry (RowConfig::held: cl-t256v8-h,
//                       row_config.h) is compiled for the op; there it folds
//                       with reduce_held(p, in, view, h) instead of reduce: the same Red::Val, and one
//                       fp32 value per element kept in h[j][i] (the thread's vector j, element
//                       i); then finish_held(p, in, total, part, row, writer) gives the thread's
//                       Row (part: its own fold's value, before the all-reduce) and
//                       apply_held(p, r, h, out) each element's outputs from its held value alone
//                       (the packed row is not read again). Softmax's forward keeps e^(x − m_t)
//                       (m_t: the thread's max) and rescales it by e^(m_t − m) / s: one
//                       exponential per element instead of two, as QuACK's softmax. Other
//                       entries and policies call reduce / finish / apply, so those stay
//                       complete. Ops with per-element outputs, without per-column vectors,
//                       column accumulations, gate or kFixVector.
//   kNoReduce [false]   the op needs no reduction (cross-entropy's backward without weighted
//                       smoothing): reduce must return Red::identity(). The map entries
//                       (RowPolicy::kMap, row_config.h) are compiled for the op: its rows split
//                       into independent column chunks, one CTA per (row, chunk), which calls
//                       neither reduce nor an all-reduce and hands finish Red::identity(),
//                       once per chunk (per-row inputs only; `writer` true in the row's first
//                       chunk alone); the other policies still run them. The map entries
//                       take ops without per-column vectors or column accumulations.
#pragma once

#include <cstdint>

#include "row/row_params.h"

namespace quack::detail {

/// Array extents that stay ≥ 1 for counts that may be 0 (kCols, kAcc, kOut).
__host__ __device__ constexpr int row_dim(int n) { return n > 0 ? n : 1; }

/// One element as the traits see it: the inputs at (row, col) in fp32 (0 for an absent optional
/// stream), the per-column vectors' values at col (when kCols > 0; 0 when absent), and the
/// column.
template <int kIn, int kCols>
struct RowElem {
  float in[kIn];
  float vec[row_dim(kCols)];
  int64_t col;
};

/// A traits struct's device-side switch (kGate above).
enum class RowGate : int { kNone = 0, kOutputs = 1, kKernel = 2 };

/// Defaults of a traits struct: no per-column vectors, no column accumulations, no optional
/// streams, no per-row inputs, register kernels of ≤ 4 packed 16-byte words per thread held
/// to 32 registers (kFullSm: 2048 threads per SM; false where the op's math spills at 32).
struct RowOpBase {
  static constexpr int kCols = 0;
  static constexpr bool kReduceCols = false;
  static constexpr bool kLateCols = false;
  static constexpr bool kColsAtApply = false;
  static constexpr int kAcc = 0;
  static constexpr bool kAccInFold = false;
  static constexpr bool kColShift = false;
  static constexpr int kOptIn = 0;
  static constexpr int kOptOut = 0;
  static constexpr bool kFullSm = true;
  static constexpr bool kTrialConfigs = false;
  static constexpr bool kTrialPlanned = false;
  static constexpr RowGate kGate = RowGate::kNone;
  static constexpr bool kFixVector = false;
  static constexpr bool kNoReduce = false;
  static constexpr bool kHeldFold = false;
  struct RowIn {};
  __device__ __forceinline__ static bool gate_open(const RowParams&) { return true; }
  __device__ __forceinline__ static RowIn load_row(const RowParams&, int64_t) { return {}; }
  __device__ __forceinline__ static float col_shift(const RowParams&, int) { return 0.f; }
  template <int kVecs, int kVec, int kStride, class Row>
  __device__ __forceinline__ static uint32_t fix_mask(const Row&, int64_t) {
    return ~0u;  // kFixVector: fix_vector on every vector (it tests its own columns)
  }
};

/// Whether input stream s of Op may be absent (one of the last kOptIn).
template <class Op>
__host__ __device__ constexpr bool row_in_optional(int s) {
  return s >= Op::kIn - Op::kOptIn;
}
/// Whether output stream s of Op may be absent (one of the last kOptOut).
template <class Op>
__host__ __device__ constexpr bool row_out_optional(int s) {
  return s >= Op::kOut - Op::kOptOut;
}

/// Whether a kernel of Op returns at once (kGate == kKernel and the gate closed). Called first
/// in every policy's kernel; all CTAs of a launch (and of a cluster) agree.
template <class Op>
__device__ __forceinline__ bool row_gate_skips_kernel(const RowParams& p) {
  static_assert(Op::kGate == RowGate::kNone || Op::kAcc == 0,
                "gated ops have no column accumulations");
  if constexpr (Op::kGate == RowGate::kKernel) return !Op::gate_open(p);
  else return false;
}

/// Whether Op's per-element outputs are stored (false only for kGate == kOutputs with the gate
/// closed).
template <class Op>
__device__ __forceinline__ bool row_gate_outputs_on(const RowParams& p) {
  if constexpr (Op::kGate == RowGate::kOutputs) return Op::gate_open(p);
  else return true;
}

}  // namespace quack::detail
