// QuACK-C++ GEMM with rotary position embedding in the epilogue (Hopper, sm_90a). Host-only
// header.
//
//   gemm_rotary: D = rot(alpha · A·B)   (the columns n < rotary_cols rotated, the rest as gemm)
//
// An attention layer's fused qkv projection x·Wᵀ (x: (B·T, d_model), W: (3·H·D, d_model)) with
// q and k rotated before they leave the GEMM: the output's columns [0, 2·H·D) are q's then k's
// heads, each of D = head_dim columns, rotated in the interleaved pair layout (flash-attn's
// interleaved=True, GPT-J), v's columns passed through. It replaces the GEMM + separate rotary
// pass (one read and one write of q and k fewer). A model whose checkpoint uses the
// non-interleaved (rotate_half, GPT-NeoX / Llama) layout permutes each head's rows of W_q and
// W_k once so that output columns (2i, 2i + 1) hold its (i, i + D/2): q·k is unchanged when q and
// k share one permutation of the head dimension (demo/ours.py).
//
// Same kernel, tiles and scheduler as quack/gemm.h with another epilogue visitor
// (src/gemm/sm90/epilogue_rotary.cuh): the rotation is applied to the fp32 values before they
// are rounded once to D's dtype. The backward (the gradient of the preact from dq, dk, dv) is
// quack::rotary_qkv_pack with interleaved = true (quack/rotary.h), then the Linear's dgrad and
// wgrad GEMMs.
// Method: RoFormer's rotation (Su et al. 2021) on CUTLASS's epilogue-visitor design, as QuACK's
// fused epilogues.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "quack/gemm.h"
#include "quack/tensor.h"

namespace quack {

/// Arguments of gemm_rotary.
///
///   y = alpha · A · B   (fp32, M × N)
///   for each row m, t = m % seqlen (the rows are B sequences of seqlen tokens, row-major), and
///   each column pair (n, n + 1) with n even, n < rotary_cols, p = (n % head_dim) / 2:
///     D(m, n)     = y(m, n) · cos[t, p] − y(m, n + 1) · sin[t, p]
///     D(m, n + 1) = y(m, n + 1) · cos[t, p] + y(m, n) · sin[t, p]
///   D(m, n) = y(m, n) for n ≥ rotary_cols
///
/// rounded once to D's dtype (the rotation in fp32, one fma each, as apply_rotary).
///
/// | tensor   | shape                  | dtype | layout                                         | required |
/// |----------|------------------------|-------|------------------------------------------------|----------|
/// | a        | (M, K)                 | bf16  | row-major (stride 1 along K), e.g. x           | yes      |
/// | b        | (K, N)                 | bf16  | column-major (stride 1 along K): Wᵀ of an nn.Linear weight W (N, K) | yes |
/// | d        | (M, N)                 | bf16  | row-major (stride 1 along N)                   | yes      |
/// | cos, sin | (S_ro, head_dim / 2)   | fp32  | unit column stride (or paired, below), equal strides; S_ro ≥ seqlen | yes |
///
/// cos and sin may also be the two columns of one (S_ro, head_dim / 2, 2) fp32 tensor t (cos =
/// t[..., 0], sin = t[..., 1]: column stride 2, sin.data one element after cos.data, an even row
/// stride, cos.data 8-byte aligned): the epilogue then reads each (cos, sin) pair with one 8-byte
/// load instead of two 4-byte loads from two tables (quack_cpp.linear_rotary_qkv passes this).
///
/// Compiled (src/gemm/sm90/instances.txt): bf16 with the 128x192 pingpong tile (2x1 cluster).
/// Alignment, strides and the workspace of padded copies: as gemm_act (quack/gemm_act.h); d must
/// not overlap a, b, cos or sin.
struct GemmRotaryArgs {
  TensorRef a;
  TensorRef b;
  TensorRef d;     // output
  TensorRef cos;   // (S_ro, head_dim / 2) fp32
  TensorRef sin;   // cos's shape and strides
  int64_t rotary_cols = 0;  // columns [0, rotary_cols) rotated: a multiple of head_dim, ≤ N
  int64_t head_dim = 0;     // even, ≥ 2; N a multiple of it
  int64_t seqlen = 0;       // ≥ 1, M a multiple of it; row m is at position m % seqlen
  float alpha = 1.f;
  /// As GemmArgs::tuned (the candidates: the compiled tiles of this epilogue).
  bool tuned = false;
  /// As GemmArgs::tile_counter (the dynamic tile scheduler).
  uint32_t* tile_counter = nullptr;
  /// As GemmArgs::workspace (gemm_workspace_size(GemmRotaryArgs) bytes; null: allocated and
  /// freed on the stream when a or b needs a padded copy).
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  /// As GemmArgs::streamk_workspace (stream-K on the cooperative tiles).
  void* streamk_workspace = nullptr;
  size_t streamk_workspace_bytes = 0;
};

/// Validates `args` for gemm_rotary without touching the device (no CUDA call). Throws
/// InvalidArgument whose message starts with "gemm_rotary: " and names the argument, what came
/// and what was expected, for everything gemm_act's can_implement rejects (applied to a, b and
/// d, with d row-major) and: a or b not 2-D; head_dim odd or < 2; N not a multiple of head_dim;
/// rotary_cols negative, past N or not a multiple of head_dim; seqlen < 1 or M not a multiple of
/// it; cos or sin not 2-D fp32 on d's device, of another shape than (S_ro ≥ seqlen,
/// head_dim / 2), with a column stride other than 1 (outside the paired layout), negative
/// strides, or sin's strides not
/// cos's; d overlapping cos or sin; a dtype combination that is not compiled.
void can_implement(const GemmRotaryArgs& args);

/// Bytes of GemmRotaryArgs::workspace that gemm_rotary needs for `args` (as gemm_workspace_size
/// of quack/gemm.h). Validates as can_implement; a workspace already in args is ignored.
size_t gemm_workspace_size(const GemmRotaryArgs& args);

/// gemm_rotary on `stream`, on the tensors' device. Runs can_implement first. M = 0 or N = 0:
/// nothing is launched. K = 0: d = 0. Throws InvalidArgument as can_implement, CudaError when a
/// CUDA call or the launch fails. Asynchronous.
void gemm_rotary(const GemmRotaryArgs& args, cudaStream_t stream);

}  // namespace quack
