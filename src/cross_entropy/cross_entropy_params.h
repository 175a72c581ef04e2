// How the cross-entropy ops use the row skeleton's parameter slots (RowParams, row_params.h) and
// the layout of their workspace. Plain constants, host and device: the API file
// (cross_entropy.cpp) fills the slots, the traits (cross_entropy_traits.cuh) and the auxiliary
// kernels (cross_entropy_aux.cu) read them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace quack::detail::ce {

// ---- RowParams::row_in
inline constexpr int kTarget = 0;       // (M) int32/int64 class index per row
inline constexpr int kTargetLogit = 1;  // fwd: (M) target_logit (flag kTargetGiven), or the
                                        // (M, V) logits gathered at (row, target) (kTargetGather)
inline constexpr int kBwdState = 1;     // bwd (flag kTrainBwd): the forward's dx state, the
                                        // device scalars below (fp32, row stride 0)
inline constexpr int kDevScalars = 2;   // fwd: the prep kernel's scalars (fp32, row stride 0)
inline constexpr int kDloss = 2;        // bwd: (M) dloss, any stride (0: one value for all rows)
inline constexpr int kLseIn = 3;        // bwd: (M) lse

// ---- RowParams::row_out (fwd; absent: not written)
inline constexpr int kLoss = 0;    // (M) per-row loss (kSplitLoss: the CE part only)
inline constexpr int kLseOut = 1;  // (M) lse
inline constexpr int kZ = 2;       // (M) per-row z-loss part

// ---- RowParams::vec
inline constexpr int kWeight = 0;  // (V) class weights

// ---- RowParams::scalar
inline constexpr int kEps = 0;     // label smoothing ε
inline constexpr int kZScale = 1;  // z-loss scale
inline constexpr int kCap = 2;     // logit softcap c (> 0 in the softcap instances)
inline constexpr int kInvCap = 3;  // 1 / c
inline constexpr int kEpsV = 4;    // ε / V in fp32 (set with iscalar[kClasses]: set_classes)

// ---- RowParams::iscalar
inline constexpr int kIgnore = 0;   // ignore_index
inline constexpr int kClasses = 1;  // V (the class count; with lse_partial not the row length)
inline constexpr int kFlags = 2;    // Flag bits

enum Flag : int64_t {
  kHasWeight = 1,           // vec[kWeight] present: a counted row's CE part is scaled by w[t]
  kWeightedSmoothing = 2,   // class weights and ε > 0: the smoothing term needs Σ_j w_j·y_j
  kTargetGiven = 4,         // the target logit is row_in[kTargetLogit] at (row, 0)
  kTargetGather = 8,        // the target logit is row_in[kTargetLogit] at (row, target)
  kDeviceScale = 16,        // fwd with dx: the gradient scales are the prep kernel's (mean)
  kSplitLoss = 32,          // row_out[kLoss] gets the CE part alone (sum/mean: the finish
                            // kernel adds the parts with their own denominators)
  kDxGated = 64,            // fwd with dx: dx is stored only where the device scalar kDxOn is
                            // not 0 (the prep kernel copied the caller's prediction there)
  kTrainBwd = 128,          // bwd: runs only where the state's kDxOn is 0 (the forward did not
                            // write dx); σ_ce = dloss·kScaleCe, σ_z = dloss·kScaleZ of the state
};

/// Sets V (iscalar[kClasses]) and ε/V (scalar[kEpsV], from scalar[kEps]: set ε first), which
/// the kernels read instead of dividing: the fp32 quotient, so the bits of the division they
/// did. Every V the row kernels see goes through here.
template <class Params>
inline void set_classes(Params& p, int64_t V) {
  p.iscalar[kClasses] = V;
  p.scalar[kEpsV] = p.scalar[kEps] / static_cast<float>(V);
}

// ---- device scalars written by the prep kernel (fp32, at the workspace's start)
inline constexpr int kDenomLoss = 0;  // Σ over counted rows of w[t] (the count without weights)
inline constexpr int kDenomZ = 1;     // the count of counted rows
inline constexpr int kScaleCe = 2;    // 1 / kDenomLoss (mean; inf when 0)
inline constexpr int kScaleZ = 3;     // 1 / kDenomZ
inline constexpr int kWeightSum = 4;  // Σ_j w_j over all V classes (V without weights)
inline constexpr int kDxOn = 5;       // 1: the row kernel writes dx; 0: it does not (kDxGated)
// With a dx state (cross_entropy_fwd's dx_state) these scalars live there instead of in the
// workspace, and kScaleCe / kScaleZ are 1 for 'sum' (the backward reads them either way).
inline constexpr int kDevScalarCount = 16;  // slots reserved (64 bytes)

/// Workspace bytes: the device scalars (64 bytes), then for sum/mean the per-row CE parts (M
/// fp32) and, with a z-loss, the per-row z parts (M fp32); 16-byte multiples.
inline constexpr size_t kScalarBytes = kDevScalarCount * 4;
inline size_t workspace_bytes(int64_t M, bool reduced, bool z) {
  const size_t rows = (static_cast<size_t>(M) * 4 + 15) / 16 * 16;
  return kScalarBytes + (reduced ? rows : 0) + (reduced && z ? rows : 0);
}

}  // namespace quack::detail::ce
