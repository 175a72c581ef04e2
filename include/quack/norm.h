// QuACK-C++ RMSNorm (forward and backward). Host-only header.
//
// Method: QuACK 0.2.0 (Dao-AILab/quack, quack/rmsnorm.py) and its blog "Getting memory-bound
// kernels to speed of light": a CTA (or a cluster of up to 16 CTAs, for long rows) owns one or
// more rows; persistent CTAs stage their row slices in shared memory with the bulk-copy engine
// (cp.async.bulk) two row blocks ahead; thread -> warp -> block -> cluster (distributed shared
// memory) reductions in fp32. The prenorm residual gradient follows QuACK ≥ 0.2.3 (0.2.0 was
// wrong).
#pragma once

#include <cstddef>
#include <cuda_runtime_api.h>

#include "quack/tensor.h"

namespace quack {

/// Arguments of rmsnorm_fwd. M rows of N ≥ 1 elements. All tensors live on one CUDA device; the
/// launch goes to that device on `stream`.
///
/// Paths: the vector path (rows staged in shared memory by the bulk-copy engine, 16-byte
/// accesses, one pass over HBM) is taken when every (M, N) tensor has column stride 1, a
/// 16-byte-aligned base and a row stride that keeps rows 16-byte aligned, N is a multiple of 16
/// bytes of x's dtype, and the CTA's staged slices fit 227 KB of shared memory: two row blocks
/// of x and residual plus the weight and bias slices, with the row split over at most 16 CTAs
/// of 512 threads (e.g. bf16 x with fp32 weight up to N ≈ 450K; with an fp32 residual up to
/// N = 131072). Anything else (any strides, including 0; any N) takes the general path: same
/// results, two passes over global memory.
/// The default forward ("simple" path; QUACK_RMSNORM_FWD=staged, read once, turns it off) takes
/// aligned rows with a weight (x's dtype or fp32), no bias, out and residual/residual_out in
/// x's dtype: one row per CTA, the row in registers (two passes through L2 beyond 64 KB rows);
/// rows of 16-32 KB and other arguments keep the paths above. Same results within the tolerance of one fp32 sum.
/// Outputs may alias inputs of the same layout (out = x, residual_out = residual).
/// Dtypes: every operand may be any of fp32, fp16, bf16 (each converted to fp32 on load); rstd
/// is fp32.
///
///   h    = x + residual                      (x when no residual; fp32 sum)
///   rstd = 1 / sqrt(mean_j(h_j^2) + eps)     (fp32)
///   out  = h * rstd * weight + bias          (weight = 1 and bias = 0 when absent)
///
/// | tensor       | shape  | dtype                       | required |
/// |--------------|--------|-----------------------------|----------|
/// | x            | (M, N) | fp32, fp16, bf16            | yes      |
/// | weight       | (N)    | fp32, fp16, bf16            | no       |
/// | bias         | (N)    | fp32, fp16, bf16            | no       |
/// | residual     | (M, N) | fp32, fp16, bf16            | no       |
/// | out          | (M, N) | fp32, fp16, bf16            | yes      |
/// | residual_out | (M, N) | fp32, fp16, bf16; h stored | no       |
/// | rstd         | (M)    | fp32, any stride            | no       |
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
/// the argument, expected and actual value) for a wrong shape, dtype, device, negative or
/// overlapping output strides, N = 0 with M > 0, eps < 0, or a QUACK_RMSNORM_FWD other than
/// simple or staged; CudaError when the launch fails.
void rmsnorm_fwd(const RmsNormFwdArgs& args, cudaStream_t stream);

/// Arguments of rmsnorm_bwd. `x` is the norm's input h (residual_out when the forward had a
/// residual), `rstd` the forward's rstd. Paths as for the forward, with N ≤ 262144 (16-bit x)
/// or N ≤ 131072 (fp32 x) on the vector path. dx (and dresidual) may alias dout of the same
/// layout. Dtypes: any of fp32, fp16, bf16 per operand, as in the forward.
///
///   xhat = x * rstd;  g = dout * weight
///   dh   = rstd * (g - xhat * mean_j(g_j * xhat_j)) + dresidual_out
///   dx   = dh;  dresidual = dh                (d(residual) equals d(x) for h = x + residual)
///   dweight = sum_rows dout * xhat;  dbias = sum_rows dout   (fp32 accumulation, fixed order:
///                                                             identical bits run to run)
///
/// | tensor        | shape  | dtype                       | required                |
/// |---------------|--------|-----------------------------|-------------------------|
/// | x             | (M, N) | fp32, fp16, bf16            | yes                     |
/// | weight        | (N)    | fp32, fp16, bf16            | no                      |
/// | dout          | (M, N) | fp32, fp16, bf16, any strides (0 too) | yes          |
/// | rstd          | (M)    | fp32, any stride            | yes                     |
/// | dresidual_out | (M, N) | fp32, fp16, bf16            | no                      |
/// | dx            | (M, N) | fp32, fp16, bf16            | yes                     |
/// | dresidual     | (M, N) | fp32, fp16, bf16            | no (a second copy of dh)|
/// | dweight       | (N)    | fp32, fp16, bf16            | no (needs weight)       |
/// | dbias         | (N)    | fp32, fp16, bf16            | no                      |
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
