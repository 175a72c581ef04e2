// QuACK-C++ top-k over the rows of an (M, N) matrix, with the MoE router's softmax fused,
// forward and backward. Host-only header.
//
// Method (docs/architecture.md, "Top-k"):
// - k ≤ 256 (the MoE-routing and sampling range), any N, where neither the register method
//   nor radix select (below) takes the row: the warp queue of RAFT's
//   `warp_sort_filtered` (Zhang et al., "Parallel Top-K Algorithms on GPU: A Comprehensive
//   Study and New Methods", SC'23) and FAISS's WarpSelect (Johnson et al., 2017). One warp
//   (or up to 16 warps) per row streams the row once from HBM with 16-byte loads; each
//   element is compared in registers against the k-th best (key, index) the warp holds, so
//   almost every element is rejected by one compare; the few that pass are buffered in
//   shared memory, 32 at a time sorted and merged into a sorted queue of k ≤ 32·R ≤ 256
//   entries held across the warp's registers (bitonic networks on shuffles). A first
//   threshold comes from the k-th largest of per-lane or per-vector maxima of the first
//   block (a valid lower bound: k disjoint groups each hold an element at least that large),
//   for k ≥ 32 (16-byte rows) from the maxima of 512 groups of the first (up to 32) iterations.
//   QuACK 0.2.0's topk (registers only, bitonic, N a power of 2 ≤ 4096, k ≤ 128) sorts every
//   element; this rejects most of them.
// - 16-bit x with 16-byte rows, N ≤ 4096, k ≤ 32, and k ≤ 16 or N ≤ 2048 (the plan's rule,
//   src/topk/topk_plan.h): QuACK 0.2.0's register method instead (T ≤ 32 threads per row,
//   ≤ 128 elements each in registers, sorting networks and bitonic merges, exact (key, column)
//   entries; power-of-2 rows without tail loads or column masks); faster there on H200
//   (kernel-only, 65536 rows: 2.4× the warp queue at N = 1024, k = 8). At N = 4096, k = 32
//   the warp queue with its prefix bound is ahead (1.13×) and keeps the shape. fp32 x with
//   16-byte rows takes it at N ≤ 2048 with k ≤ 16 (truncated entries + an exactness fix-up:
//   results exact; on H200 2.0× the warp queue at (65536, 1024, 8), 1.35× at (65536, 2048,
//   16), 1.49× at (65536, 1000, 8)), and with k ≤ 32 on short rows: N ≤ 512, or N = 1024
//   (at k = 32: 1.04× the warp queue at N = 1024, 1.48× at 512).
// - 16-bit x with 16-byte rows, 4096 ≤ N ≤ 8192, k ≤ 256, where the register method does not
//   take the row, except N = 4096 with k ≥ 32 (the warp queue is ahead there): radix select,
//   one CTA per row holding it on chip; a bound from per-vector maxima keeps ~k candidates in
//   shared memory, which one warp sorts (or an 8-bit-digit radix select of the k-th entry
//   narrows when more remain); on H200 (bf16, 16384 rows) 1.09-1.78× the warp queue at
//   N = 6000-8192, k 64-256 (src/topk/topk_plan.h, kTopkRadixPlanMinN).
// - k > 256: a segmented radix sort of each row (CUB's DeviceSegmentedRadixSort: stable, so
//   ties keep the lower index first) in a caller-provided workspace; correct, slower.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "quack/tensor.h"

namespace quack {

/// The largest k that topk_fwd runs without a workspace (the warp queue's capacity: 8 registers
/// × 32 lanes); larger k sorts each row in the workspace of topk_fwd_workspace_size. Exported to
/// Python as quack_cpp._C.topk_max_k_without_workspace.
inline constexpr int kTopkMaxKWithoutWorkspace = 256;

/// The softmax topk_fwd fuses into its values (MoE router gating).
enum class TopkSoftmax : int {
  kNone = 0,      ///< values are the selected elements of x
  kSelected = 1,  ///< values = softmax over the k selected elements (`softmax=True`)
  kRow = 2,       ///< values = softmax over the whole row, at the selected columns (`"pre"`)
};

/// Arguments of topk_fwd: for each of the M rows of x, the k best of its N elements, k =
/// values' column count (0 ≤ k ≤ N).
///
/// Order: best first — largest: descending; smallest: ascending. NaN counts as larger than
/// every number (as torch.topk does): largest puts NaNs first, smallest last. Among equal
/// values (and among NaNs) the lower column index comes first; −0 ranks below +0. `sorted`
/// = false allows any order of the k (the kernels return them sorted either way).
///
///   kNone:      values[i, j]  = x[i, c_ij],        indices[i, j] = c_ij
///   kSelected:  values[i, j]  = e^(x[i, c_ij] − m_i) / Σ_l e^(x[i, c_il] − m_i),
///               m_i = max_l x[i, c_il]
///   kRow:       values[i, j]  = e^(x[i, c_ij] − lse_i),  lse_i = ln Σ_{n<N} e^(x[i, n])
///
/// where c_i0, c_i1, ... are the columns of row i in the order above. The selection is made on
/// x (softmax is monotone, so kRow selects the same columns). kNone values are exact (x's
/// values in values' dtype); the softmax is fp32 math (e^x on the MUFU, relative error
/// ≤ 2^-21), rounded once to values' dtype. A NaN among the softmax's inputs makes its
/// outputs NaN; all −inf gives NaN (as torch.softmax).
///
/// | tensor  | shape  | dtype            | layout                                          |
/// |---------|--------|------------------|-------------------------------------------------|
/// | x       | (M, N) | fp32, fp16, bf16 | any non-negative strides                        |
/// | values  | (M, k) | fp32, fp16, bf16 | any non-negative strides, no overlap            |
/// | indices | (M, k) | int64, int32     | any non-negative strides, no overlap            |
/// | lse     | (M)    | fp32             | optional, only with kRow: lse_i (for topk_bwd)  |
///
/// Outputs must not overlap x or each other. The fast kernels take x with column stride 1, a
/// 16-byte aligned base and a row stride that is a multiple of 16 bytes; other layouts load
/// element by element (correct, slower). N ≤ 2^31 − 1.
struct TopkFwdArgs {
  TensorRef x;
  TensorRef values;
  TensorRef indices;
  TensorRef lse;
  bool largest = true;
  bool sorted = true;
  TopkSoftmax softmax = TopkSoftmax::kNone;
};

/// Bytes of device workspace topk_fwd needs for these arguments: 0 for k ≤ 256 (and for
/// M = 0 or k = 0); for k > 256 the segmented sort's keys, column indices and CUB's temporary
/// storage, about 16·M·N bytes. Throws InvalidArgument like topk_fwd; CudaError when CUB's
/// size query fails (k > 256 only; it runs on x's device, switched to and back).
size_t topk_fwd_workspace_size(const TopkFwdArgs& args);

/// Runs top-k on `stream`, on x's device. `workspace` must hold topk_fwd_workspace_size(args)
/// bytes on that device (nullptr when that is 0); it is overwritten. M = 0 or k = 0 launches
/// nothing. Throws InvalidArgument (naming the function, the argument, what was expected and
/// what came) for an absent tensor, a tensor of the wrong rank, shape or dtype, a negative
/// size or stride, k > N, N ≥ 2^31, a tensor in host memory (device < 0) or on another device than x,
/// overlapping outputs, lse without kRow, or a too-small workspace; CudaError when a launch
/// fails (including "no CUDA driver/GPU").
void topk_fwd(const TopkFwdArgs& args, void* workspace, size_t workspace_bytes,
              cudaStream_t stream);

/// topk_fwd for arguments that need no workspace (k ≤ 256); throws InvalidArgument otherwise.
void topk_fwd(const TopkFwdArgs& args, cudaStream_t stream);

/// Arguments of topk_bwd: the gradient dx of a loss with respect to x, given the gradient
/// dvalues with respect to topk_fwd's values (same `softmax`), its indices and:
///
///   kNone:      dx[i, c_ij] = dvalues[i, j];  0 elsewhere
///   kSelected:  dx[i, c_ij] = p_ij·(dvalues[i, j] − s_i),  s_i = Σ_l p_il·dvalues[i, l],
///               p = values (the forward's output); 0 elsewhere
///   kRow:       dx[i, n] = y_in·(g_in − s_i),  y_in = e^(x[i, n] − lse_i),
///               g_in = dvalues[i, j] where n = c_ij (0 elsewhere),
///               s_i = Σ_l y_{i c_il}·dvalues[i, l]
///
/// fp32 math, one rounding to dx's dtype. Index entries outside [0, N) are skipped (never an
/// out-of-bounds access); an index repeated within a row (not topk_fwd's output) leaves one
/// of its gradients, unspecified which.
///
/// | tensor   | shape  | dtype            | required                                      |
/// |----------|--------|------------------|-----------------------------------------------|
/// | dvalues  | (M, k) | fp32, fp16, bf16 | yes                                           |
/// | indices  | (M, k) | int64, int32     | yes                                           |
/// | values   | (M, k) | fp32, fp16, bf16 | with kSelected (the forward's values)         |
/// | x        | (M, N) | fp32, fp16, bf16 | with kRow                                     |
/// | lse      | (M)    | fp32             | with kRow (the forward's lse)                 |
/// | dx       | (M, N) | fp32, fp16, bf16 | yes; no overlapping elements, no overlap with |
/// |          |        |                  | the inputs                                    |
///
/// Any non-negative strides (dvalues may have stride 0).
struct TopkBwdArgs {
  TensorRef dvalues;
  TensorRef indices;
  TensorRef values;
  TensorRef x;
  TensorRef lse;
  TensorRef dx;
  TopkSoftmax softmax = TopkSoftmax::kNone;
};

/// Runs the top-k backward on `stream` (one kernel: every element of dx is written). M = 0 or
/// N = 0 launches nothing. Throws InvalidArgument like topk_fwd (for each tensor above; k > N;
/// a tensor required by `softmax` absent); CudaError when the launch fails.
void topk_bwd(const TopkBwdArgs& args, cudaStream_t stream);

}  // namespace quack
