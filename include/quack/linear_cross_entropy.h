// QuACK-C++ linear + cross-entropy (an LM head and its loss) without materialising the (T, V)
// logits: the loss and, in the same pass, the gradients dx, dweight and dbias, computed chunk
// by chunk on one stream. Host-only header.
//
// The formula (T tokens, hidden size D, vocabulary V; cross_entropy.h's options and notation):
//
//   z      = x · weightᵀ + bias                     (T, V), the logits, rounded to x's dtype
//   loss_i = cross_entropy(z_i, target_i)           as quack/cross_entropy.h (label smoothing,
//                                                   z-loss, softcap, ignore_index; no class
//                                                   weights), 'none' / 'sum' / 'mean'
//   R      = ∂loss/∂z  (grad_output = 1)            (T, V), each chunk rounded to x's dtype
//   dx = R · weight,   dweight = Rᵀ · x,   dbias = Σ_i R_i
//
// Method: QuACK 0.2.0's chunked_linear_cross_entropy (quack/linear_cross_entropy.py; Liger-
// Kernel's fused linear cross-entropy is the same scheme): per chunk of C tokens, the logits
// chunk z_c = x_c·weightᵀ (our GEMM, fp32 accumulation, stored in x's dtype), the cross-entropy
// forward with the gradient written in place into that chunk (quack/cross_entropy.h, for
// grad_output 1; 'mean' divides by the count of counted targets of ALL chunks, counted once on
// the device before the first chunk), then dx_c = R_c·weight and dweight += R_cᵀ·x_c (GEMMs;
// dweight accumulated in fp32 across chunks, rounded once to dweight's dtype at the end). The
// backward of a training step then only rescales dx, dweight and dbias by grad_output on the
// device (linear_cross_entropy_scale_grad: nothing happens when it is exactly 1). No host sync
// anywhere: every function is CUDA-graph capturable.
//
// Memory (workspace; docs/architecture.md "Linear + cross-entropy" has the model): one logits
// chunk (C·round_up(V, 8) elements of x's dtype) plus the fp32 dweight accumulator. With more
// than one chunk and a 16-bit dweight that is written (not accumulated into) and contiguous,
// the first ⌊V/2⌋ rows (rounded down to 8) of the accumulator live in dweight's own memory
// (fp32 rows take twice the bytes of 16-bit rows) and only the other half is workspace; the
// last chunk compacts them in place into 16-bit rows, then stores the other half's rows into
// dweight from its dweight GEMM (fp32 accumulator as C, rounded once). kLowMemory instead accumulates only
// the first ⌊V/3⌋ rows (inside dweight's memory, no workspace) while the chunks are processed,
// and computes the other rows' dweight afterwards by vocabulary slices of all T tokens
// (recomputing those logits from the forward's lse: one GEMM of T·(V − V/3)·D more), so no
// fp32 accumulator spans the weight: ~1.2× the time, extra memory about one logits chunk.
//
// Later (not here): the cross-entropy reduction fused into the logits GEMM's epilogue (online
// max / sum-exp per row across N tiles, the gradient recomputed in a second GEMM pass), so no
// logits chunk is written at all.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "quack/cross_entropy.h"
#include "quack/tensor.h"

namespace quack {

/// How dweight is accumulated across token chunks (see the header comment).
enum class LinearCrossEntropyMode : int {
  /// fp32 dweight accumulator over the whole weight (half of it inside dweight's memory).
  kDefault = 0,
  /// No fp32 accumulator spans the weight: ⌊V/3⌋ rows accumulated inside dweight's memory,
  /// the rest by vocabulary slices over all tokens (one partial logits GEMM more).
  kLowMemory = 1,
};

/// Arguments of linear_cross_entropy_fwd.
///
/// | tensor  | shape         | dtype            | required | layout                          |
/// |---------|---------------|------------------|----------|---------------------------------|
/// | x       | (T, D)        | bf16, fp16       | yes      | row-major (1)                   |
/// | weight  | (V, D)        | x's              | yes      | row-major (1)                   |
/// | bias    | (V)           | x's              | no       | any stride                      |
/// | target  | (T)           | int32, int64     | yes      | any stride                      |
/// | loss    | (T) none, (1) | fp32, fp16, bf16 | yes      | any stride                      |
/// | lse     | (T)           | fp32, fp16, bf16 | no       | any stride                      |
/// | z_loss  | (T) none, (1) | fp32, fp16, bf16 | no       | any stride                      |
/// | dx      | (T, D)        | x's, fp32        | no       | row-major (1)                   |
/// | dweight | (V, D)        | x's, fp32        | no       | row-major (1)                   |
/// | dbias   | (V)           | x's, fp32        | no (2)   | any stride                      |
/// (1) column stride 1, row stride ≥ D and a multiple of 8 elements, 16-byte aligned base (the
///     GEMM's TMA); so D must be a multiple of 8 unless the rows are padded. V and T are free
///     (the logits chunks are padded internally to rows of round_up(V, 8)).
/// (2) only with bias. The logits chunks are in x's dtype; every accumulation across chunks or
///     slices (dweight, dbias, the backward's dx) is fp32, rounded once into its output.
///
/// - dx, dweight, dbias (each optional, e.g. dx absent for a frozen embedding below the head)
///   are the gradients of `loss` for grad_output 1 (for 'none': of Σ_i loss_i); with
///   `accumulate`, dweight and dbias get them added (fp32 sum of the old value and the new
///   gradient, rounded once: fused gradient accumulation), dx is always overwritten. A later
///   linear_cross_entropy_scale_grad scales the whole dweight and dbias, the accumulated old
///   value included: with `accumulate`, use grad_output 1 (or scale the loss before the
///   forward), since the API cannot tell the old part from the new one.
/// - lse (optional) is each row's logsumexp (softcapped logits), the input of
///   linear_cross_entropy_bwd.
/// - fp16: the gradients for grad_output 1 are rounded to fp16 in the logits chunk before any
///   later scale, and the 'mean' gradient of a large batch (1/count a token) lies mostly below
///   fp16's normal range. Under a loss scale, compute loss and lse here without gradients and
///   take them from linear_cross_entropy_bwd with dloss = grad_output (for 'mean' divided by
///   the count of targets in [0, V) other than ignore_index), as the Python API does.
/// - chunk_size: tokens per chunk, or 0 for linear_cross_entropy_chunk_size's rule (with
///   free_bytes = 0). vocab_chunk_size: vocabulary columns per slice of kLowMemory's second
///   pass (a multiple of 8 is used), or 0 for the rule.
///
/// Workspace: linear_cross_entropy_fwd_workspace_size(args) bytes of device memory on x's
/// device, 256-byte aligned, contents irrelevant; not to be used by anything else until the
/// call's kernels have run (stream order).
struct LinearCrossEntropyFwdArgs {
  TensorRef x;
  TensorRef weight;
  TensorRef bias;
  TensorRef target;
  TensorRef loss;
  TensorRef lse;
  TensorRef z_loss;
  TensorRef dx;
  TensorRef dweight;
  TensorRef dbias;
  bool accumulate = false;  // dweight += ..., dbias += ...
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::kMean;
  float label_smoothing = 0.f;  // ε in [0, 1]
  float z_loss_scale = 0.f;     // zs ≥ 0
  float logit_softcap = 0.f;    // c > 0, or 0: no softcap
  LinearCrossEntropyMode mode = LinearCrossEntropyMode::kDefault;
  int64_t chunk_size = 0;
  int64_t vocab_chunk_size = 0;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

/// The rule for chunk_size = 0: tokens per chunk of the forward, from the shapes, the mode and
/// optionally the free device memory (free_bytes; 0 = unknown). The logits chunk gets a budget
/// of 1 GiB (kLowMemory: 512 MiB), at most a quarter of free_bytes when that is known; the
/// whole of T when its logits fit, or when one chunk of all T tokens takes no more memory than
/// chunks with the fp32 dweight accumulator (need_dweight, dweight_bytes = its element size);
/// else the fewest chunks within the budget, balanced (multiples of 128 tokens). Never throws.
int64_t linear_cross_entropy_chunk_size(int64_t T, int64_t D, int64_t V, DType x_dtype,
                                        LinearCrossEntropyMode mode, bool need_dweight,
                                        size_t free_bytes = 0);

/// Bytes of workspace linear_cross_entropy_fwd needs for `args` (from the shapes, dtypes, the
/// outputs asked for, the options and the chunk sizes). Validates `args` as
/// linear_cross_entropy_fwd does (except the workspace) and throws InvalidArgument the same.
size_t linear_cross_entropy_fwd_workspace_size(const LinearCrossEntropyFwdArgs& args);

/// Runs the forward (and the gradients asked for) on `stream`. T = 0: loss 0 ('sum'), NaN
/// ('mean') or empty ('none'), dweight and dbias zero (unchanged with accumulate). Throws
/// InvalidArgument (naming the function, the argument, what was expected and what came) for a
/// required tensor absent, a wrong shape, dtype, device or layout (see the table), V = 0 with
/// T > 0, V ≥ 2^31, an option outside cross_entropy_fwd's ranges, a negative chunk size, a
/// workspace too small or misaligned; CudaError when a launch fails. Asynchronous.
void linear_cross_entropy_fwd(const LinearCrossEntropyFwdArgs& args, cudaStream_t stream);

/// Arguments of linear_cross_entropy_bwd: the gradients from the forward's lse for a per-row
/// upstream gradient dloss (reduction 'none' with any grad_output; or any reduction when the
/// forward did not compute gradients):
///
///   R_i = dloss_i · ∂loss_i/∂z_i,   dx = R·weight,   dweight (+)= Rᵀ·x,   dbias (+)= Σ_i R_i
///
/// recomputing the logits by vocabulary slices of all T tokens (one logits GEMM, one CE
/// backward, the dweight and dx GEMMs per slice; dx accumulated in fp32 across slices).
///
/// | tensor  | shape      | dtype            | required | layout                               |
/// |---------|------------|------------------|----------|--------------------------------------|
/// | x, weight, bias, dx, dweight, dbias: as LinearCrossEntropyFwdArgs                        |
/// | target  | (T)        | int32, int64     | yes      | any stride                           |
/// | lse     | (T)        | fp32, fp16, bf16 | yes      | any stride                           |
/// | dloss   | (T) or (1) | fp32, fp16, bf16 | yes      | any stride ((1): one value for all)  |
///
/// vocab_chunk_size: columns per slice (0: the rule: a budget of 1 GiB of logits, 512 MiB with
/// kLowMemory). Workspace: linear_cross_entropy_bwd_workspace_size(args) bytes.
struct LinearCrossEntropyBwdArgs {
  TensorRef x;
  TensorRef weight;
  TensorRef bias;
  TensorRef target;
  TensorRef lse;
  TensorRef dloss;
  TensorRef dx;
  TensorRef dweight;
  TensorRef dbias;
  bool accumulate = false;
  int64_t ignore_index = -100;
  float label_smoothing = 0.f;
  float z_loss_scale = 0.f;
  float logit_softcap = 0.f;
  LinearCrossEntropyMode mode = LinearCrossEntropyMode::kDefault;
  int64_t vocab_chunk_size = 0;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

/// Workspace bytes of linear_cross_entropy_bwd; validates as it does (except the workspace).
size_t linear_cross_entropy_bwd_workspace_size(const LinearCrossEntropyBwdArgs& args);

/// Runs the backward on `stream`. T = 0: dweight and dbias zero (unchanged with accumulate).
/// Throws as linear_cross_entropy_fwd.
void linear_cross_entropy_bwd(const LinearCrossEntropyBwdArgs& args, cudaStream_t stream);

/// Arguments of linear_cross_entropy_scale_grad: the forward's gradients (for grad_output 1)
/// scaled in place by grad_output[0], read on the device; each of dx (T, D), dweight (V, D),
/// dbias (V) may be absent. grad_output: (1) fp32, fp16 or bf16.
struct LinearCrossEntropyScaleGradArgs {
  TensorRef dx;
  TensorRef dweight;
  TensorRef dbias;
  TensorRef grad_output;
};

/// dx, dweight, dbias *= grad_output[0] unless it is exactly 1 (decided on the device; one tiny
/// launch per tensor then). Throws InvalidArgument for bad arguments, CudaError on a launch
/// failure. (cross_entropy_scale_grad per tensor.)
void linear_cross_entropy_scale_grad(const LinearCrossEntropyScaleGradArgs& args,
                                     cudaStream_t stream);

}  // namespace quack
