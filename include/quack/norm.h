// QuACK-C++ RMSNorm (forward and backward). Host-only header.
//
// Method: QuACK 0.2.0 (Dao-AILab/quack, quack/rmsnorm.py) and its blog "Getting memory-bound
// kernels to speed of light" (media/2025-07-10-membound-sol.md in that repository): read each
// element from HBM once, keep the row on chip, reduce thread -> warp -> block -> cluster
// (distributed shared memory, up to 16 CTAs per row) in fp32. Three kernels share that plan
// (docs/architecture.md): "simple" (one row per CTA in registers, compile-time geometry, as
// Liger-Kernel's and Inductor's row kernels), "prefetch" (long rows: persistent clusters, the
// bulk-copy engine fetching rows ahead into shared memory, QuACK's pipeline) and "staged"
// (QuACK's general-geometry kernel: persistent CTAs stage row blocks in shared memory with
// cp.async.bulk). The prenorm residual gradient follows QuACK ≥ 0.2.3 (0.2.0 was wrong).
#pragma once

#include <cstddef>
#include <cuda_runtime_api.h>

#include "quack/tensor.h"

namespace quack {

/// Arguments of rmsnorm_fwd. M rows of N ≥ 1 elements. All tensors live on one CUDA device; the
/// launch goes to that device on `stream`.
///
/// Paths, picked on the host from the arguments (same results within the tolerance of one
/// fp32 sum; docs/architecture.md):
/// - simple (default): a weight in x's dtype or fp32, no bias, out and residual/residual_out
///   in x's dtype, every (M, N) tensor with column stride 1 and 16-byte-aligned rows, N a
///   multiple of 16 bytes of x's dtype. Rows ≤ 64 KB: one row per CTA in registers, one pass.
///   Longer rows without a residual: fp32 rows ≤ 128 KB in one pass (1024 threads × 8
///   vectors), other rows ≤ 512 KB (bf16/fp16 N ≤ 262144, fp32 N ≤ 131072) on the prefetch
///   kernel (clusters of ≤ 8 CTAs, one HBM read); longer rows, and long rows with a residual,
///   loop over the row twice (the second pass from L2).
/// - staged (aligned layouts the simple path does not take, or QUACK_RMSNORM_FWD=staged, read
///   once): rows staged in shared memory, split over ≤ 16 CTAs of 512 threads, while two row
///   blocks of x and residual plus the weight and bias slices fit 227 KB per CTA: N ≤ 524288
///   for bf16/fp16 x with a weight of its dtype, 458752 with an fp32 weight, 262144 for fp32 x,
///   229376 for bf16 x with an fp32 residual, 163840 for fp32 x with an fp32 residual.
/// - general: anything else (any strides, including 0; any N): two passes over global memory.
/// Outputs may alias inputs of the same layout (out = x, residual_out = residual).
/// Dtypes: every operand may be any of fp32, fp16, bf16 (each converted to fp32 on load); rstd
/// is fp32.
///
///   h    = x + residual                      (x when no residual; fp32 sum)
///   rstd = 1 / sqrt(mean_j(h_j^2) + eps)     (fp32)
///   out  = h * rstd * weight + bias          (weight = 1 and bias = 0 when absent)
///
/// Layout: any non-negative strides (the fast paths need the layouts listed above).
///
/// | tensor       | shape  | dtype            | required          |
/// |--------------|--------|------------------|-------------------|
/// | x            | (M, N) | fp32, fp16, bf16 | yes               |
/// | weight       | (N)    | fp32, fp16, bf16 | no                |
/// | bias         | (N)    | fp32, fp16, bf16 | no                |
/// | residual     | (M, N) | fp32, fp16, bf16 | no                |
/// | out          | (M, N) | fp32, fp16, bf16 | yes               |
/// | residual_out | (M, N) | fp32, fp16, bf16 | no (h is stored)  |
/// | rstd         | (M)    | fp32             | no                |
struct RmsNormFwdArgs {
  TensorRef x;
  TensorRef weight;
  TensorRef bias;
  TensorRef residual;
  TensorRef out;
  TensorRef residual_out;
  TensorRef rstd;
  float eps = 1e-6f;
};

/// Runs the RMSNorm forward on `stream`. M = 0 launches nothing. Throws InvalidArgument (naming
/// the argument, expected and actual value) for a wrong shape, dtype or device, a negative
/// stride (any operand), an output whose elements overlap (out, residual_out, rstd: e.g. a
/// stride of 0 with more than one element), N = 0 with M > 0, eps < 0 or NaN, or a
/// QUACK_RMSNORM_FWD other than simple or staged; CudaError when the launch fails.
void rmsnorm_fwd(const RmsNormFwdArgs& args, cudaStream_t stream);

/// Arguments of rmsnorm_bwd. `x` is the norm's input h (residual_out when the forward had a
/// residual), `rstd` the forward's rstd. Paths: the staged kernel (as the forward's, with
/// dweight/dbias partials per persistent cluster) for aligned layouts with N ≤ 262144 (16-bit
/// x) or N ≤ 131072 (fp32 x); the general kernel (two passes) for anything else. No simple path. dx (and dresidual) may alias dout of the same
/// layout. Dtypes: any of fp32, fp16, bf16 per operand, as in the forward.
///
///   xhat = x * rstd;  g = dout * weight
///   dh   = rstd * (g - xhat * mean_j(g_j * xhat_j)) + dresidual_out
///   dx   = dh;  dresidual = dh                (d(residual) equals d(x) for h = x + residual)
///   dweight = sum_rows dout * xhat;  dbias = sum_rows dout   (fp32 accumulation, fixed order:
///                                                             identical bits run to run)
///
/// Layout: any non-negative strides; inputs may have stride 0 (dout from y.sum().backward()),
/// outputs may not overlap.
///
/// | tensor        | shape  | dtype            | required                 |
/// |---------------|--------|------------------|--------------------------|
/// | x             | (M, N) | fp32, fp16, bf16 | yes                      |
/// | weight        | (N)    | fp32, fp16, bf16 | no                       |
/// | dout          | (M, N) | fp32, fp16, bf16 | yes                      |
/// | rstd          | (M)    | fp32             | yes                      |
/// | dresidual_out | (M, N) | fp32, fp16, bf16 | no                       |
/// | dx            | (M, N) | fp32, fp16, bf16 | yes                      |
/// | dresidual     | (M, N) | fp32, fp16, bf16 | no (a second copy of dh) |
/// | dweight       | (N)    | fp32, fp16, bf16 | no (needs weight)        |
/// | dbias         | (N)    | fp32, fp16, bf16 | no                       |
struct RmsNormBwdArgs {
  TensorRef x;
  TensorRef weight;
  TensorRef dout;
  TensorRef rstd;
  TensorRef dresidual_out;
  TensorRef dx;
  TensorRef dresidual;
  TensorRef dweight;
  TensorRef dbias;
};

/// Bytes of device workspace rmsnorm_bwd needs for these arguments on their device: fp32
/// partial sums of dweight and dbias, one row of N per persistent cluster (or CTA), so
/// (number asked for) × P × N × 4 with P the resident clusters of the chosen kernel on that
/// device (it queries the device: occupancy); 0 when neither is asked for or M = 0. Throws
/// InvalidArgument like rmsnorm_bwd for bad arguments and CudaError when the device query fails.
size_t rmsnorm_bwd_workspace_size(const RmsNormBwdArgs& args);

/// Runs the RMSNorm backward on `stream`. `workspace` must hold rmsnorm_bwd_workspace_size(args)
/// bytes, 16-byte aligned, on the tensors' device; it is overwritten. M = 0 writes dweight =
/// dbias = 0 (no row kernel). Throws InvalidArgument for bad arguments (including a too-small
/// workspace), CudaError when a launch fails.
void rmsnorm_bwd(const RmsNormBwdArgs& args, void* workspace, size_t workspace_bytes,
                 cudaStream_t stream);

}  // namespace quack
