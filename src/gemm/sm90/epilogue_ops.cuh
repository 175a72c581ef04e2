// Epilogue visitors of the Hopper GEMM (device code): what the collective epilogue (epilogue.cuh)
// computes from the fp32 accumulator, per thread and per (EpiM, EpiN) subtile, before the values
// are rounded and stored through shared memory by TMA.
//
// A visitor is a small trivially copyable struct (it travels in the kernel's __grid_constant__
// parameters) with:
//   static constexpr int kOutputs;   1 or 2 tiles written per subtile (outputs 0 and 1, each its
//                                    own shared-memory buffers and TMA store)
//   static constexpr bool kNeedsC;   the input tile ("C": C of alpha·acc + beta·C, or the preact
//                                    of an activation gradient) is always read
//   static constexpr bool kOnePath;  c is never null: zeros when C is not read (one copy of the
//                                    visitor's code instead of one with C and one without; a
//                                    kNeedsC visitor is likewise called once, whichever way C
//                                    arrives: TMA and smem, or plain loads)
//   static Visitor make(const GemmProblem& p, bool load_c);     host: from the problem
//   bool reads_c() const;            C is read (uniform over the grid)
//   void load_scalars(const float* alpha_dev, const float* beta_dev);   once per CTA
//   void operator()(Array<float, N> (&out)[kOutputs], Array<float, N> const& acc,
//                   Array<float, N> const* c, SubtileCoord const& coord) const;
// where acc holds a thread's N = kFrg accumulator values of the subtile, c (null when C is not
// read) C's values at the same positions converted to fp32, and coord gives each value's (m, n)
// in the kernel's output (row(i), col(i)). A visitor writes out[0] (and out[1]); the epilogue
// rounds them to their outputs' dtypes.
//
// Where later epilogues fit without a new kernel:
// - a row or column bias: a visitor member (pointer, stride) read at coord.row(i) / coord.col(i)
//   (the 8 columns a thread touches per 32-column subtile are 2 adjacent pairs: 8-byte loads);
// - gated activations (gate/up in adjacent column pairs): values i and i + 1 (i even) of a
//   thread are columns 2j and 2j + 1 of the same row, so gate and up sit in one thread; output 1
//   then has EpiN / 2 columns per subtile (a narrower buffer and TMA box in the epilogue, selected
//   by a visitor constant), concatenated halves read the up half as an extra input tile;
// - a column sum of an output (the bias gradient): a visitor that accumulates per column across
//   the subtiles of a tile and a hook at the end of the tile that reduces over the rows of the
//   epilogue group (warp shuffles, then shared memory) and adds to global memory.
#pragma once

#include <cutlass/array.h>
#include <cute/config.hpp>

#include "gemm/gemm_problem.h"
#include "gemm/sm90/epilogue_smem.cuh"
#include "gemm/activation.cuh"

namespace quack::detail::sm90 {

/// Where a thread's fragment values of one subtile sit in the kernel's (row-major) output: value
/// i at (row(i), col(i)); the subtile starts at (m0, n0); etid is the thread in its epilogue group
/// (the fragment layout of epilogue_smem.cuh).
struct SubtileCoord {
  int m0, n0, etid;
  CUTE_DEVICE int row(int i) const { return m0 + frag_row(etid, (i / 2) % 2); }
  CUTE_DEVICE int col(int i) const { return n0 + frag_col(etid, i); }
};

/// D = alpha · acc + beta · C (CUTLASS's LinearCombination). C is read only when beta ≠ 0.
struct LinearCombination {
  static constexpr int kOutputs = 1;
  static constexpr bool kNeedsC = false;
  static constexpr bool kOnePath = false;
  float alpha = 1.f;
  float beta = 0.f;

  static LinearCombination make(const GemmProblem& p, bool load_c) { return {p.alpha, load_c ? p.beta : 0.f}; }

  CUTE_HOST_DEVICE bool reads_c() const { return beta != 0.f; }

  /// Device scalars (GemmArgs::alpha_device / beta_device) replace the host values when given.
  CUTE_DEVICE void load_scalars(const float* alpha_dev, const float* beta_dev) {
    if (alpha_dev) alpha = *alpha_dev;
    if (beta_dev) beta = *beta_dev;
  }

  /// y = alpha · acc (+ beta · c when c is given).
  template <int N>
  CUTE_DEVICE void apply(cutlass::Array<float, N>& y, cutlass::Array<float, N> const& acc,
                         cutlass::Array<float, N> const* c) const {
    if (c != nullptr) {
      CUTE_UNROLL
      for (int i = 0; i < N; ++i) y[i] = alpha * acc[i] + beta * (*c)[i];
    } else {
      CUTE_UNROLL
      for (int i = 0; i < N; ++i) y[i] = alpha * acc[i];
    }
  }

  template <int N>
  CUTE_DEVICE void operator()(cutlass::Array<float, N> (&out)[kOutputs], cutlass::Array<float, N> const& acc,
                              cutlass::Array<float, N> const* c, SubtileCoord const&) const {
    apply(out[0], acc, c);
  }
};

/// gemm_act: out[0] = preact = alpha · acc + beta · C, out[1] = postact = act(preact) (QuACK's
/// GemmActSm90). The activation is a runtime value (one branch per subtile, uniform). One path:
/// c holds zeros when C is not read, and then beta is 0 (LinearCombination::make).
struct ActEpilogue {
  static constexpr int kOutputs = 2;
  static constexpr bool kNeedsC = false;
  static constexpr bool kOnePath = true;
  LinearCombination lin;
  Activation act = Activation::kIdentity;

  static ActEpilogue make(const GemmProblem& p, bool load_c) {
    return {LinearCombination::make(p, load_c), static_cast<Activation>(p.activation)};
  }
  CUTE_HOST_DEVICE bool reads_c() const { return lin.reads_c(); }
  CUTE_DEVICE void load_scalars(const float* alpha_dev, const float* beta_dev) { lin.load_scalars(alpha_dev, beta_dev); }

  template <int N>
  CUTE_DEVICE void operator()(cutlass::Array<float, N> (&out)[kOutputs], cutlass::Array<float, N> const& acc,
                              cutlass::Array<float, N> const* c, SubtileCoord const&) const {
    lin.apply(out[0], acc, c);
    switch (act) {  // one loop per activation: the branch is taken once per subtile
#define QUACK_ACT_CASE(A)                                                       \
  case A: {                                                                     \
    CUTE_UNROLL                                                                 \
    for (int i = 0; i < N; ++i) out[1][i] = act_fwd(A, out[0][i]);              \
    break;                                                                      \
  }
      QUACK_ACT_CASE(Activation::kRelu)
      QUACK_ACT_CASE(Activation::kReluSq)
      QUACK_ACT_CASE(Activation::kGeluTanhApprox)
      QUACK_ACT_CASE(Activation::kSilu)
      QUACK_ACT_CASE(Activation::kTanh)
#undef QUACK_ACT_CASE
      default:
        out[1] = out[0];
        break;
    }
  }
};

/// gemm_dact: acc = dpostact (e.g. dout · W), c = preact; out[0] = dpreact = acc ⊙ act'(preact),
/// out[1] = postact = act(preact), recomputed (QuACK's GemmDActSm90). alpha and beta do not apply.
struct DActEpilogue {
  static constexpr int kOutputs = 2;
  static constexpr bool kNeedsC = true;
  static constexpr bool kOnePath = false;
  Activation act = Activation::kIdentity;

  static DActEpilogue make(const GemmProblem& p, bool) { return {static_cast<Activation>(p.activation)}; }
  CUTE_HOST_DEVICE bool reads_c() const { return true; }
  CUTE_DEVICE void load_scalars(const float*, const float*) {}

  template <int N>
  CUTE_DEVICE void operator()(cutlass::Array<float, N> (&out)[kOutputs], cutlass::Array<float, N> const& acc,
                              cutlass::Array<float, N> const* c, SubtileCoord const&) const {
    switch (act) {
#define QUACK_DACT_CASE(A)                                                      \
  case A: {                                                                     \
    CUTE_UNROLL                                                                 \
    for (int i = 0; i < N; ++i) act_bwd(A, (*c)[i], acc[i], out[0][i], out[1][i]); \
    break;                                                                      \
  }
      QUACK_DACT_CASE(Activation::kRelu)
      QUACK_DACT_CASE(Activation::kReluSq)
      QUACK_DACT_CASE(Activation::kGeluTanhApprox)
      QUACK_DACT_CASE(Activation::kSilu)
      QUACK_DACT_CASE(Activation::kTanh)
#undef QUACK_DACT_CASE
      default:
        out[0] = acc;
        out[1] = *c;
        break;
    }
  }
};

}  // namespace quack::detail::sm90
