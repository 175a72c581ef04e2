// QuACK-C++ cross-entropy over the rows of an (M, V) logits matrix: the forward (loss, lse,
// z-loss part, and optionally the gradient in the same pass), the backward from lse, and the
// device-side rescale of a gradient computed in the forward. Host-only header.
//
// Method: QuACK 0.2.0 (Dao-AILab/quack, quack/cross_entropy.py): each row is read from HBM once
// while its max and sum of exponentials are reduced together ("online softmax", Milakov &
// Gimelshein 2018), thread -> warp -> CTA -> cluster (up to 16 CTAs per row through
// distributed shared memory), in fp32; the gradient for dloss = 1 is written in the same pass
// (QuACK's and Liger-Kernel's training path). The options follow PyTorch's
// torch.nn.functional.cross_entropy (ignore_index, reduction, label_smoothing, weight) and
// Liger-Kernel's (z-loss "lse_square_scale", logit softcap). The kernels are the row
// skeleton's (docs/architecture.md, "The row skeleton" and "Cross-entropy").
//
// The formula (row i, target t_i, V classes, ε = label_smoothing, w = weight or all ones, c =
// logit_softcap, zs = z_loss_scale):
//
//   y_ij   = c·tanh(x_ij / c)                    (y = x without a softcap)
//   lse_i  = log Σ_j e^(y_ij)                    (max-shifted; fp32)
//   CE_i   = (1 − ε)·w[t_i]·(lse_i − y_i,t_i) + (ε/V)·Σ_j w_j·(lse_i − y_ij)
//   z_i    = zs·lse_i²
//   loss_i = CE_i + z_i
//
// A row is *counted* when t_i ≠ ignore_index and 0 ≤ t_i < V. Ignored rows have loss_i = z_i =
// 0 and a zero gradient row (exactly 0, also where the row holds NaN or inf). A target outside
// [0, V) that is not ignore_index is bad input the host cannot see without a sync: that row's
// loss_i, z_i and gradient row are NaN (so 'sum' and 'mean' are NaN), every other row is
// computed as usual, and nothing is read or written out of bounds; such a row counts in no
// denominator.
//
//   'none'  loss = (loss_i)                                            shape (M)
//   'sum'   loss = Σ_i CE_i + Σ_i z_i                                  shape (1)
//   'mean'  loss = Σ_i CE_i / Σ_counted w[t_i] + Σ_i z_i / #counted    shape (1)
//
// 'mean' divides the CE part by the summed class weights of the counted rows (PyTorch's rule;
// the count without weights) and the z part by the count (Liger-Kernel's rule); both are
// computed on the device (no host sync). When no row is counted, 'mean' is NaN (0/0, as
// PyTorch) and 'sum' is 0. The z-loss part is returned the same way (return_z_loss).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "quack/tensor.h"

namespace quack {

/// How the per-row losses are combined (PyTorch's `reduction`).
enum class Reduction : int { kNone = 0, kSum = 1, kMean = 2 };

/// Arguments of cross_entropy_fwd.
///
/// | tensor       | shape          | dtype            | required | layout                        |
/// |--------------|----------------|------------------|----------|-------------------------------|
/// | x            | (M, V)         | fp32, fp16, bf16 | yes (1)  | any non-negative strides      |
/// | target       | (M)            | int32, int64     | yes      | any stride                    |
/// | weight       | (V)            | fp32             | no       | any stride                    |
/// | lse_partial  | (M, K)         | fp32, fp16, bf16 | no       | any non-negative strides      |
/// | target_logit | (M)            | fp32, fp16, bf16 | no       | any stride                    |
/// | loss         | (M) none, (1)  | fp32, fp16, bf16 | yes      | any stride                    |
/// | lse          | (M)            | fp32, fp16, bf16 | no       | any stride                    |
/// | z_loss       | (M) none, (1)  | fp32, fp16, bf16 | no       | any stride                    |
/// | dx           | (M, V)         | fp32, fp16, bf16 | no       | no overlapping elements; may  |
/// |              |                |                  |          | be x itself (same dtype and   |
/// |              |                |                  |          | strides: in place)            |
/// | dx_state     | (16)           | fp32             | no       | unit stride (output)          |
/// | dx_predict   | (1)            | int32            | no       | (input, read on the device)   |
/// (1) x may be absent when lse_partial and target_logit are both given (then num_classes
///     gives V).
///
/// - dx (optional) is the gradient of `loss` for a grad_output of 1: dloss_i = 1 ('none',
///   'sum') or the mean's 1 / denominator of each part ('mean', read on the device). A backward
///   with another grad_output rescales it with cross_entropy_scale_grad (or, with dx_state,
///   cross_entropy_train_bwd). dx = x overwrites the logits (QuACK's and Liger's
///   inplace_backward).
/// - lse_partial: the row's lse is combined from K partial logsumexps of column chunks
///   (lse = log Σ_k e^(lse_partial[i, k]); QuACK's semantics, e.g. from a GEMM epilogue or the
///   shards of a vocabulary-parallel layer); the target logit is then read from target_logit,
///   or from x at (i, t_i) when x is given.
/// - target_logit: the target's logit y_i,t_i supplied instead of read from x (the building
///   block of vocabulary-parallel cross-entropy).
/// - With lse_partial or target_logit: label_smoothing, logit_softcap (they need every logit)
///   and dx with lse_partial are rejected; ignore_index, weight, every reduction, z_loss and
///   lse work.
/// - lse is the true logsumexp of every row, ignored or not.
///
/// The vector kernels take x (or lse_partial) with unit column stride, 16-byte aligned rows,
/// V a multiple of 16 bytes of x (8 elements for bf16/fp16, 4 for fp32), and dx (when given)
/// in x's dtype and layout class; fp16 x with a softcap, class weights with label smoothing,
/// and any other call run the general kernel (correct, slower). Rows up to 64 KB (fp32: 128 KB
/// without dx) are held in registers; up to 1 MB split over clusters of ≤ 16 CTAs with the
/// bulk-copy engine fetching rows ahead (one HBM read); longer rows read twice (from L2).
///
/// - dx_state (optional, with dx and 'sum' / 'mean'): kCrossEntropyDxStateFloats fp32, unit
///   stride, written by the forward for cross_entropy_train_bwd: whether dx was written and
///   the gradient's scales (1 for 'sum', the mean's 1 / denominators); keep it (and x, target,
///   lse, weight, dx) until the backward has run (which needs lse: ask for it).
/// - dx_predict (optional, needs dx_state): one int32 in device memory, read on the device by
///   the forward's first kernel: 0: dx is NOT written (the forward reads x once and writes the
///   loss, lse, z_loss; cross_entropy_train_bwd then computes dx from x); otherwise dx is
///   written as without it. The forward launches two row kernels, the loss-only one (run
///   where the word is 0) and the loss + dx one (run where it is not); the other returns at
///   once, so the forward that writes no dx runs as the forward without dx does (not at the
///   dx kernel's occupancy). Class weights with label smoothing: one kernel whose dx stores
///   the word gates. What the forward did is recorded in dx_state, so the prediction may be
///   any value and may change at any time (another stream, a CUDA graph replay): it decides
///   the cost and the kernel whose reduction order the loss and lse take (each deterministic,
///   so equal to the calls without dx_predict: with dx where it is not 0, without where it
///   is 0; the two may differ in the last bits), never the values beyond rounding.
///   cross_entropy_train_bwd sets it to (grad_output ==
///   1), so a training loop gets, on the device and without a host sync: grad_output 1 every
///   step: forward read x + write dx, backward nothing (2 passes over M·V); a scaled loss
///   every step: forward read x, backward read x + write dx (3 passes, the backward from lse);
///   a step whose grad_output differs from the previous step's: one extra pass (a rescale of
///   dx, or the dx written in vain).
///
/// Workspace: cross_entropy_fwd_workspace_size(args) bytes of device memory on x's device,
/// 16-byte aligned, contents irrelevant (the kernels write before they read); 0 bytes for
/// 'none' unless class weights and label smoothing are both used (then 64 bytes); 64 bytes
/// plus 4·M (and 4·M more with a z-loss) for 'sum' and 'mean'. It must not be used by
/// anything else until the call's kernels have run (stream order).
struct CrossEntropyFwdArgs {
  TensorRef x;
  TensorRef target;
  TensorRef weight;
  TensorRef lse_partial;
  TensorRef target_logit;
  TensorRef loss;
  TensorRef lse;
  TensorRef z_loss;
  TensorRef dx;
  TensorRef dx_state;    // (kCrossEntropyDxStateFloats) fp32, unit stride; output
  TensorRef dx_predict;  // (1) int32; input (read on the device)
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::kMean;
  float label_smoothing = 0.f;  // ε in [0, 1]
  float z_loss_scale = 0.f;     // zs ≥ 0
  float logit_softcap = 0.f;    // c > 0, or 0: no softcap
  int64_t num_classes = -1;     // V when x is absent; else −1 or x's V
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

/// fp32 elements of cross_entropy_fwd's dx_state (16: 64 bytes).
inline constexpr int64_t kCrossEntropyDxStateFloats = 16;

/// Bytes of workspace cross_entropy_fwd needs for `args` (from M = target's length, the
/// reduction and z_loss_scale; validates nothing else). Never throws.
size_t cross_entropy_fwd_workspace_size(const CrossEntropyFwdArgs& args);

/// Runs the cross-entropy forward on `stream`: up to three kernels (four with dx_predict), all
/// on the device's own values (no host sync; CUDA-graph capturable): for 'mean', class weights
/// with label smoothing or a dx_state a one-CTA prep kernel (the denominators from the
/// targets, Σ_j w_j, the prediction copied into dx_state), the row kernel (per-row loss
/// parts, lse, dx; with dx_predict the loss-only and the loss + dx row kernels, one of which
/// returns at once), and for 'sum'/'mean' a one-CTA kernel summing the
/// per-row parts in a fixed order (deterministic) into loss (and z_loss). M = 0 writes 0
/// ('sum') or NaN ('mean') into the scalar outputs and launches no row kernel.
/// Throws InvalidArgument (naming the function, the argument, what was expected and what came)
/// for: a required tensor absent, a wrong shape, dtype or device, a negative stride, an output
/// with overlapping elements, dx aliasing x with another dtype or layout, dx_state without dx
/// or with 'none', dx_predict without dx_state, V = 0 with M > 0 or
/// V ≥ 2^31, label_smoothing outside [0, 1], z_loss_scale < 0 or not finite, logit_softcap < 0
/// or not finite, an option that lse_partial / target_logit exclude, num_classes inconsistent
/// with x, a workspace too small or misaligned; CudaError when a launch fails.
void cross_entropy_fwd(const CrossEntropyFwdArgs& args, cudaStream_t stream);

/// Arguments of cross_entropy_bwd: dx from the logits, the forward's lse and the gradient of
/// the loss with respect to each row's loss_i:
///
///   dx_ij = dloss_i·(A_i·p_ij − B_i·w_j − C_i·[j = t_i])·(1 − (y_ij/c)²)      counted rows
///   p_ij = e^(y_ij − lse_i), A_i = (1 − ε)·w[t_i] + (ε/V)·Σ_j w_j + 2·zs·lse_i,
///   B_i = ε/V, C_i = (1 − ε)·w[t_i]
///
/// ignored rows 0, out-of-range rows NaN (as the forward). For 'sum' pass grad_output as dloss
/// (stride 0); for 'mean' grad_output / denominator — with class weights and a z-loss the two
/// parts have different denominators, so use the forward's dx (cross_entropy_fwd) there.
///
/// | tensor | shape  | dtype            | required | layout                                 |
/// |--------|--------|------------------|----------|----------------------------------------|
/// | x      | (M, V) | fp32, fp16, bf16 | yes      | any non-negative strides               |
/// | target | (M)    | int32, int64     | yes      | any stride                             |
/// | lse    | (M)    | fp32, fp16, bf16 | yes      | any stride                             |
/// | dloss  | (M)    | fp32, fp16, bf16 | yes      | any stride, 0 included (one value)     |
/// | weight | (V)    | fp32             | no       | any stride                             |
/// | dx     | (M, V) | fp32, fp16, bf16 | yes      | no overlapping elements; may be x      |
///
/// Vector kernels as cross_entropy_fwd's (dx in x's dtype); no reduction across the row
/// except Σ_j w_j with class weights and label smoothing (general kernel).
struct CrossEntropyBwdArgs {
  TensorRef x;
  TensorRef target;
  TensorRef lse;
  TensorRef dloss;
  TensorRef weight;
  TensorRef dx;
  int64_t ignore_index = -100;
  float label_smoothing = 0.f;
  float z_loss_scale = 0.f;
  float logit_softcap = 0.f;
};

/// Runs the backward on `stream`. M = 0 launches nothing. Throws like cross_entropy_fwd.
void cross_entropy_bwd(const CrossEntropyBwdArgs& args, cudaStream_t stream);

/// Arguments of cross_entropy_scale_grad: dx (the forward's gradient for grad_output = 1) is
/// scaled in place by grad_output[0], read on the device; when it is exactly 1 the kernel
/// returns before touching dx (one tiny launch: the training case costs no pass over dx, and a
/// CUDA graph stays valid for any grad_output).
///
/// | tensor      | shape  | dtype            | layout                                   |
/// |-------------|--------|------------------|------------------------------------------|
/// | dx          | (M, V) | fp32, fp16, bf16 | any non-negative strides, no overlap     |
/// | grad_output | (1)    | fp32, fp16, bf16 | (a 0-d tensor viewed as (1))             |
struct CrossEntropyScaleGradArgs {
  TensorRef dx;
  TensorRef grad_output;
};

/// dx *= grad_output[0] unless grad_output[0] == 1 (decided on the device). M·V = 0 launches
/// nothing. Throws InvalidArgument for bad arguments, CudaError when the launch fails.
void cross_entropy_scale_grad(const CrossEntropyScaleGradArgs& args, cudaStream_t stream);

/// Arguments of cross_entropy_train_bwd, the backward of a forward that was given dx and
/// dx_state (cross_entropy_fwd): the gradient for grad_output g = grad_output[0] (read on the
/// device), from what the forward did (dx_state, read on the device):
///
///   forward wrote dx:      dx_out = g·dx          (in place with g == 1: nothing is touched)
///   forward did not:       dx_out = cross_entropy_bwd's dx with σ_ce = g·s_ce, σ_z = g·s_z
///                          (s_*: the forward's scales, 1 for 'sum', 1 / denominators for
///                          'mean'), from x, target, lse and weight
///
/// with the forward's options (ignore_index, label_smoothing, z_loss_scale, logit_softcap,
/// weight: pass the same). Then dx_predict (when given) is set to (g == 1): the forward's next
/// prediction (see CrossEntropyFwdArgs::dx_predict).
///
/// | tensor      | shape  | dtype            | required | layout                               |
/// |-------------|--------|------------------|----------|--------------------------------------|
/// | x           | (M, V) | fp32, fp16, bf16 | yes      | the forward's x (unchanged since,    |
/// |             |        |                  |          | unless it is dx: in place)           |
/// | target      | (M)    | int32, int64     | yes      | any stride                           |
/// | lse         | (M)    | fp32, fp16, bf16 | yes      | the forward's lse output             |
/// | grad_output | (1)    | fp32, fp16, bf16 | yes      | (a 0-d tensor viewed as (1))         |
/// | weight      | (V)    | fp32             | no       | any stride                           |
/// | dx          | (M, V) | fp32, fp16, bf16 | yes      | the forward's dx; no overlap         |
/// | dx_state    | (16)   | fp32             | yes      | the forward's dx_state, unit stride  |
/// | dx_out      | (M, V) | dx's dtype       | no       | absent: dx (in place); else its own  |
/// |             |        |                  |          | memory, or x itself (same layout)    |
/// | dx_predict  | (1)    | int32            | no       | the word the forward read            |
///
/// Two kernels, each deciding on the device: the rescale (returns at once unless the forward
/// wrote dx and g ≠ 1, or dx_out is not dx) and the row kernel of cross_entropy_bwd (every CTA
/// returns at once unless the forward did not write dx). No host sync; a CUDA graph of forward
/// and backward replays correctly for any grad_output and any prediction.
struct CrossEntropyTrainBwdArgs {
  TensorRef x;
  TensorRef target;
  TensorRef lse;
  TensorRef grad_output;
  TensorRef weight;
  TensorRef dx;
  TensorRef dx_state;
  TensorRef dx_out;
  TensorRef dx_predict;
  int64_t ignore_index = -100;
  float label_smoothing = 0.f;
  float z_loss_scale = 0.f;
  float logit_softcap = 0.f;
};

/// Runs the training backward on `stream`. M·V = 0 launches nothing. Throws InvalidArgument
/// (as cross_entropy_bwd, and for dx_state, dx_out or dx_predict of the wrong shape, dtype,
/// device or layout), CudaError when a launch fails.
void cross_entropy_train_bwd(const CrossEntropyTrainBwdArgs& args, cudaStream_t stream);

}  // namespace quack
