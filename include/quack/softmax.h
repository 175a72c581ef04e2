// QuACK-C++ softmax and log_softmax over the last dimension of an (M, N) matrix, forward and
// backward. Host-only header.
//
// Method: QuACK 0.2.0 (Dao-AILab/quack, quack/softmax.py) and its blog "Getting memory-bound
// kernels to speed of light": each row is read from HBM once while its max and sum of
// exponentials are reduced together in one pass ("online softmax", Milakov & Gimelshein 2018),
// thread -> warp -> CTA -> cluster (distributed shared memory, up to 16 CTAs per row), in fp32.
// The kernels are the row skeleton's (docs/architecture.md, "The row skeleton"): a row held in
// one CTA's registers (up to 64 KB; 128 KB for fp32 forward); longer rows split over a cluster.
// The forwards' CTAs keep their slices in registers (src/row/row_plan.cpp, preferred_entry:
// cl-t256v8, 32 KB slices, rows up to 512 KB; cl-t512v8, 64 KB slices, up to 1 MB); the
// backwards' in shared memory, fetched ahead by the bulk-copy engine (rows up to 1 MB of each
// input). Longer rows are read twice (the second time from L2); layouts the vector kernels do
// not take, element at a time.
#pragma once

#include <cuda_runtime_api.h>

#include "quack/tensor.h"

namespace quack {

/// Arguments of softmax_fwd and log_softmax_fwd: M rows of N elements. x and out live on one
/// CUDA device; the launch goes to that device on `stream`.
///
///   softmax:      out[i, j] = e^(x[i, j] − m_i) / Σ_k e^(x[i, k] − m_i),   m_i = max_k x[i, k]
///   log_softmax:  out[i, j] = x[i, j] − m_i − ln Σ_k e^(x[i, k] − m_i)
///
/// fp32 math (e^x and ln x on the hardware's approximate units, relative error ≤ 2^-21), one
/// rounding to out's dtype. −inf inputs give 0 (log_softmax: −inf); a row of all −inf gives NaN,
/// as PyTorch does; a NaN in a row makes the row NaN.
///
/// | tensor | shape  | dtype            | layout                                   |
/// |--------|--------|------------------|------------------------------------------|
/// | x      | (M, N) | fp32, fp16, bf16 | any non-negative strides (0 included)    |
/// | out    | (M, N) | fp32, fp16, bf16 | any non-negative strides, no two elements |
/// |        |        |                  | at one address; may be x itself          |
///
/// out's dtype is free (usually x's, or fp32). The vector kernels take out in x's dtype or fp32
/// (fp32 x: fp32 out), every row with unit column stride and 16-byte aligned start, N a
/// multiple of 16 bytes of x (8 elements for 16-bit x, 4 for fp32); any other call runs the
/// general kernel (correct, slower). out may alias x only with x's layout.
struct SoftmaxFwdArgs {
  TensorRef x;
  TensorRef out;
};

/// Runs softmax over each row of x into out on `stream`. M = 0 or N = 0 launches nothing.
/// Throws InvalidArgument (naming the function, the argument, what was expected and what came)
/// for an absent tensor, a tensor not 2-D, a negative size or stride, a shape other than x's,
/// a non-float dtype, a tensor in host memory (device < 0) or on another device than x, or an out whose
/// elements overlap; CudaError when the launch fails (including "no CUDA driver/GPU").
void softmax_fwd(const SoftmaxFwdArgs& args, cudaStream_t stream);

/// log_softmax over each row of x into out; arguments, layouts and errors as softmax_fwd.
void log_softmax_fwd(const SoftmaxFwdArgs& args, cudaStream_t stream);

/// Arguments of softmax_bwd and log_softmax_bwd: y is the forward's output, dy the gradient of
/// the loss with respect to it, dx the gradient with respect to x.
///
///   softmax:      dx[i, j] = y[i, j]·(dy[i, j] − Σ_k y[i, k]·dy[i, k])
///   log_softmax:  dx[i, j] = dy[i, j] − e^y[i, j]·Σ_k dy[i, k]
///
/// fp32 math, one rounding to dx's dtype.
///
/// | tensor | shape  | dtype            | layout                                    |
/// |--------|--------|------------------|-------------------------------------------|
/// | y      | (M, N) | fp32, fp16, bf16 | any non-negative strides (0 included)     |
/// | dy     | (M, N) | fp32, fp16, bf16 | any non-negative strides (0 included)     |
/// | dx     | (M, N) | fp32, fp16, bf16 | any non-negative strides, no two elements |
/// |        |        |                  | at one address; may be dy (or y) itself   |
///
/// The vector kernels take y and dy in one dtype and dx in that dtype, or y and dy in fp32 with
/// dx in fp16/bf16 (a forward that wrote fp32), with the layouts of softmax_fwd's; any other
/// call runs the general kernel.
struct SoftmaxBwdArgs {
  TensorRef y;
  TensorRef dy;
  TensorRef dx;
};

/// Runs the softmax backward on `stream`. M = 0 or N = 0 launches nothing. Throws like
/// softmax_fwd (for y, dy and dx).
void softmax_bwd(const SoftmaxBwdArgs& args, cudaStream_t stream);

/// The log_softmax backward (y: log_softmax's output); as softmax_bwd.
void log_softmax_bwd(const SoftmaxBwdArgs& args, cudaStream_t stream);

}  // namespace quack
