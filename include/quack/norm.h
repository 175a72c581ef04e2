// QuACK-C++ RMSNorm and LayerNorm (forward and backward). Host-only header.
//
// Method: QuACK 0.2.0 (Dao-AILab/quack, quack/rmsnorm.py) and its blog "Getting memory-bound
// kernels to speed of light" (media/2025-07-10-membound-sol.md in that repository): read each
// element from HBM once, keep the row on chip, reduce thread -> warp -> block -> cluster
// (distributed shared memory, up to 16 CTAs per row) in fp32. Both norms run on the row
// skeleton (docs/architecture.md, "The row skeleton"): short rows in registers (one row per
// CTA, compile-time geometry, as Liger-Kernel's and Inductor's row kernels), long rows split
// over clusters whose CTAs keep their slices in shared memory, fetched ahead by the bulk-copy
// engine (QuACK's pipeline), backwards on persistent CTAs that stage row blocks in shared
// memory and keep the dweight/dbias sums in registers, and a general kernel for any other
// layout. The prenorm residual gradient follows QuACK ≥ 0.2.3 (0.2.0 was wrong);
// weight_offset follows QuACK ≥ 0.6.
#pragma once

#include <cstddef>
#include <cuda_runtime_api.h>

#include "quack/tensor.h"

namespace quack {

/// Arguments of rmsnorm_fwd. M rows of N elements. All tensors live on one CUDA device; the
/// launch goes to that device on `stream`.
///
///   h    = x + residual                      (x when no residual; fp32 sum)
///   rstd = 1 / sqrt(mean_j(h_j^2) + eps)     (fp32)
///   out  = h * rstd * (weight + weight_offset) + bias
///          (weight absent: the factor is 1 and weight_offset is not used; bias absent: 0)
///   residual_out = h;  rstd per row
///
/// weight_offset = 1 is Gemma's zero-centred weight (QuACK ≥ 0.6). One rounding of each output
/// to its dtype; residual_out holds h rounded to its dtype, while rstd and out use the
/// unrounded fp32 h.
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
///
/// Layout: any non-negative strides (inputs may have stride 0); outputs may not overlap; out may
/// alias x and residual_out the residual when their layouts agree. Kernels (the row skeleton,
/// src/row/row_ops.cmake's rmsnorm_fwd* lines): x in bf16, fp16 or fp32; weight and bias in
/// one dtype, x's or fp32; the residual and residual_out in x's dtype, or both fp32 (16-bit
/// x: the fp32 residual stream); out in x's dtype (or fp32 without a residual); rows with
/// column stride 1, 16-byte aligned starts and N a multiple of 16 bytes of x; weight and bias
/// contiguous and 16-byte aligned. Such rows up to 64 KB (fp32 x without a residual: 128 KB)
/// sit in registers, one pass; longer rows, up to 16 × 64 KB per input stream, are split over
/// a cluster whose CTAs keep their slices, and their weight slices in registers, on chip (one
/// HBM read); longer rows take two passes (the second from L2). Any other call runs the
/// general kernel (element at a time, runtime dtypes; correct, slower).
struct RmsNormFwdArgs {
  TensorRef x;
  TensorRef weight;
  TensorRef bias;
  TensorRef residual;
  TensorRef out;
  TensorRef residual_out;
  TensorRef rstd;
  float eps = 1e-6f;
  float weight_offset = 0.f;
};

/// Runs the RMSNorm forward on `stream`. M = 0 launches nothing. Throws InvalidArgument (naming
/// the function, the argument, the expected and the actual value) for an absent x or out, a
/// wrong shape (including a negative size), dtype or device, a negative stride (any operand),
/// an output whose elements overlap (out, residual_out, rstd: e.g. a stride of 0 with more than
/// one element), eps < 0 or NaN, or a weight_offset that is not finite; CudaError when the
/// launch fails (including "no CUDA driver/GPU"). N = 0 with M > 0 (as torch): out and
/// residual_out are empty, rstd is NaN (1/sqrt(0/0 + eps); a memset, no kernel).
void rmsnorm_fwd(const RmsNormFwdArgs& args, cudaStream_t stream);

/// Arguments of rmsnorm_bwd. `x` is the norm's input h (residual_out when the forward had a
/// residual), `rstd` the forward's rstd.
///
///   xhat = x * rstd;  g = dout * (weight + weight_offset)   (weight absent: g = dout)
///   dh   = rstd * (g - xhat * mean_j(g_j * xhat_j)) + dresidual_out
///   dx   = dh;  dresidual = dh                (d(residual) equals d(x) for h = x + residual)
///   dweight = sum_rows dout * xhat;  dbias = sum_rows dout   (fp32 accumulation, fixed order:
///                                                             identical bits run to run)
///
/// dweight does not depend on weight_offset. dweight and dbias: each persistent CTA sums its
/// rows per column in fp32 registers, folds them into one partial row per cluster (the
/// workspace, (P, N) fp32), and a second kernel adds the P rows in a fixed order.
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
///
/// Layout: any non-negative strides; inputs may have stride 0 (dout from y.sum().backward()),
/// outputs may not overlap; dx (and dresidual) may alias dout of the same layout. Kernels:
/// x, dout, dresidual_out, dx and dresidual in x's dtype, or the prenorm backward of an fp32
/// residual stream (x, dresidual_out and dresidual fp32; dout and dx bf16 or fp16), the weight
/// in x's (or dout's) dtype or fp32, the vector layouts of rmsnorm_fwd: persistent CTAs stage
/// row slices in shared memory by the bulk-copy engine, rows of up to N = 262144 over clusters
/// of up to 16 CTAs (fp32 rows beyond 131072: one row block at a time, the next fetched into
/// L2); anything else runs the general kernel (two passes over global memory).
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
  float weight_offset = 0.f;
};

/// Bytes of device workspace rmsnorm_bwd needs for these arguments on their device: fp32
/// partial sums of dweight and dbias, one row of N per persistent cluster (or CTA), so
/// (number asked for) × P × N × 4 with P the resident clusters of the chosen kernel on that
/// device (it queries the device: occupancy); 0 when neither is asked for, M = 0 or N = 0.
/// Throws InvalidArgument like rmsnorm_bwd for bad arguments and CudaError when the device
/// query fails.
size_t rmsnorm_bwd_workspace_size(const RmsNormBwdArgs& args);

/// Runs the RMSNorm backward on `stream`. `workspace` must hold rmsnorm_bwd_workspace_size(args)
/// bytes, 16-byte aligned, on the tensors' device; it is overwritten. M = 0 writes dweight =
/// dbias = 0 (no row kernel); N = 0 writes nothing (every output is empty). Throws
/// InvalidArgument for bad arguments (as rmsnorm_fwd, for
/// every tensor above; dweight without weight; a non-finite weight_offset; a too-small or
/// misaligned workspace), CudaError when a launch fails.
void rmsnorm_bwd(const RmsNormBwdArgs& args, void* workspace, size_t workspace_bytes,
                 cudaStream_t stream);

/// Arguments of layernorm_fwd. M rows of N elements. All tensors live on one CUDA device;
/// the launch goes to that device on `stream`.
///
///   h      = x + residual                          (x when no residual; fp32 sum)
///   mean   = mean_j h_j                            (fp32)
///   rstd   = 1 / sqrt(mean_j (h_j − mean)^2 + eps) (biased variance, fp32)
///   out    = (h − mean) * rstd * (weight + weight_offset) + bias
///            (weight absent: the factor is 1 and weight_offset is not used; bias absent: 0)
///   residual_out = h;  mean and rstd per row
///
/// Statistics: each thread's own elements in two passes over on-chip data (count and mean,
/// then the sum of squared deviations about that mean), combined over threads, warps, CTAs and
/// clusters by Chan's parallel formula (Chan, Golub & LeVeque 1983) written so that every
/// thread of a row gets the same bits; never E[h²] − E[h]². Only the row's elements enter the
/// variance (no padding lanes). weight_offset = 1 is Gemma's zero-centred weight (QuACK ≥ 0.6).
/// One rounding of each output to its dtype; residual_out holds h rounded to its dtype, while
/// the statistics and out use the unrounded fp32 h.
///
/// | tensor       | shape  | dtype            | required                    |
/// |--------------|--------|------------------|-----------------------------|
/// | x            | (M, N) | fp32, fp16, bf16 | yes                         |
/// | weight       | (N)    | fp32, fp16, bf16 | no                          |
/// | bias         | (N)    | fp32, fp16, bf16 | no                          |
/// | residual     | (M, N) | fp32, fp16, bf16 | no                          |
/// | out          | (M, N) | fp32, fp16, bf16 | yes                         |
/// | residual_out | (M, N) | fp32, fp16, bf16 | no (prenorm: h is stored)   |
/// | mean         | (M)    | fp32             | no                          |
/// | rstd         | (M)    | fp32             | no                          |
///
/// Layout: any non-negative strides (inputs may have stride 0); outputs may not overlap; out may
/// alias x and residual_out the residual when their layouts agree. Kernels (the row skeleton,
/// docs/architecture.md): x and residual in one dtype, out and residual_out in one dtype,
/// weight and bias in one dtype, with (x, out, weight) one of (bf16, bf16, bf16 or fp32),
/// (fp16, fp16, fp16 or fp32), (fp32, fp32, fp32); or, for 16-bit x, the fp32 residual
/// stream (residual and residual_out fp32, either may be absent); rows with column stride 1,
/// 16-byte aligned starts and N a multiple of 16 bytes of x; weight and bias contiguous and
/// 16-byte aligned.
/// Such rows up to 64 KB (fp32 x: 128 KB) sit in registers, one pass; rows up to 16 × 64 KB
/// per input stream are split over a cluster whose CTAs keep their slices and their weight and
/// bias slices on chip (one HBM read); longer rows take two passes (the second from L2). Any
/// other call runs the general kernel (element at a time, runtime dtypes; correct, slower).
struct LayerNormFwdArgs {
  TensorRef x;
  TensorRef weight;
  TensorRef bias;
  TensorRef residual;
  TensorRef out;
  TensorRef residual_out;
  TensorRef mean;
  TensorRef rstd;
  float eps = 1e-5f;
  float weight_offset = 0.f;
};

/// Runs the LayerNorm forward on `stream`. M = 0 launches nothing. Throws InvalidArgument
/// (naming the function, the argument, what was expected and what came) for an absent x or
/// out, a tensor of the wrong shape (including a negative size) or dtype, in host memory (device < 0) or on
/// another device than x, a negative stride, an output whose elements overlap (out,
/// residual_out, mean, rstd), eps < 0 or NaN, or a weight_offset that is not finite;
/// CudaError when the launch fails (including "no CUDA driver/GPU"). N = 0 with M > 0 (as
/// torch): out and residual_out are empty, mean is 0 and rstd NaN (torch's CPU layer_norm's
/// values; memsets, no kernel).
void layernorm_fwd(const LayerNormFwdArgs& args, cudaStream_t stream);

/// Arguments of layernorm_bwd. `x` is the norm's input h (residual_out when the forward had a
/// residual), `mean` and `rstd` the forward's.
///
///   xhat = (x − mean) * rstd;  g = dout * (weight + weight_offset)   (weight absent: g = dout)
///   dh   = rstd * (g − mean_j g_j − xhat * mean_j (g_j * xhat_j)) + dresidual_out
///   dx   = dh;  dresidual = dh                 (d(residual) equals d(x) for h = x + residual)
///   dweight = sum_rows dout * xhat;  dbias = sum_rows dout
///
/// fp32 math. dweight and dbias: each persistent CTA sums its rows per column in fp32
/// registers, folds them into one partial row per cluster (the workspace, (P, N) fp32), and a
/// second kernel adds the P rows in a fixed order: identical bits run to run on one device.
///
/// | tensor        | shape  | dtype            | required                 |
/// |---------------|--------|------------------|--------------------------|
/// | x             | (M, N) | fp32, fp16, bf16 | yes                      |
/// | weight        | (N)    | fp32, fp16, bf16 | no                       |
/// | dout          | (M, N) | fp32, fp16, bf16 | yes                      |
/// | mean          | (M)    | fp32             | yes                      |
/// | rstd          | (M)    | fp32             | yes                      |
/// | dresidual_out | (M, N) | fp32, fp16, bf16 | no                       |
/// | dx            | (M, N) | fp32, fp16, bf16 | yes                      |
/// | dresidual     | (M, N) | fp32, fp16, bf16 | no (a second copy of dh) |
/// | dweight       | (N)    | fp32, fp16, bf16 | no (needs weight)        |
/// | dbias         | (N)    | fp32, fp16, bf16 | no                       |
///
/// Layout: any non-negative strides (inputs may have stride 0: dout from y.sum().backward());
/// outputs may not overlap; dx (and dresidual) may alias dout of the same layout. Kernel: x,
/// dout and dresidual_out in one dtype, dx and dresidual in one dtype, the weight in x's dtype
/// or fp32 ((x, dx) = (bf16, bf16), (fp16, fp16), (fp32, fp32)), or the prenorm backward of an
/// fp32 residual stream (x, dresidual_out, dresidual fp32; dout and dx bf16 or fp16), the
/// vector layouts of layernorm_fwd: persistent CTAs stage row slices in shared memory by the
/// bulk-copy engine, rows of up to N = 262144 over clusters of up to 16 CTAs (fp32 rows beyond
/// 131072 without dresidual_out: one row block at a time, the next fetched into L2); anything
/// else runs the general kernel (two passes over global memory).
struct LayerNormBwdArgs {
  TensorRef x;
  TensorRef weight;
  TensorRef dout;
  TensorRef mean;
  TensorRef rstd;
  TensorRef dresidual_out;
  TensorRef dx;
  TensorRef dresidual;
  TensorRef dweight;
  TensorRef dbias;
  float weight_offset = 0.f;
};

/// Bytes of device workspace layernorm_bwd needs for these arguments on their device: fp32
/// partial sums of dweight and dbias, (number asked for) × P × N × 4 with P the resident
/// clusters of the chosen kernel on that device (a device query: occupancy); 0 when neither
/// is asked for, M = 0 or N = 0. Throws InvalidArgument like layernorm_bwd for bad arguments
/// and CudaError when the device query fails.
size_t layernorm_bwd_workspace_size(const LayerNormBwdArgs& args);

/// Runs the LayerNorm backward on `stream`. `workspace` must hold
/// layernorm_bwd_workspace_size(args) bytes, 16-byte aligned, on the tensors' device; it is
/// overwritten. M = 0 writes dweight = dbias = 0 (no row kernel); N = 0 writes nothing (every
/// output is empty). Throws InvalidArgument for bad arguments (as layernorm_fwd, for every tensor above; dweight without weight; a
/// too-small or misaligned workspace), CudaError when a launch fails.
void layernorm_bwd(const LayerNormBwdArgs& args, void* workspace, size_t workspace_bytes,
                   cudaStream_t stream);

}  // namespace quack
