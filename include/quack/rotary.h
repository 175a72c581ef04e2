// QuACK-C++ rotary position embedding (RoPE), non-interleaved ("rotate_half", GPT-NeoX /
// Llama layout) or interleaved (GPT-J: adjacent pairs), forward and backward (the inverse rotation), on q and optionally k of one
// attention layer, with v copied in the same launch. Host-only header.
//
// Method: Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding"; the
// conventions (cos/sin tables of shape (seqlen_ro, rotary_dim / 2), a leading rotary_dim of
// the head rotated and the rest passed through, `seqlen_offset`, `conjugate` for the backward)
// are flash-attn's `apply_rotary_emb` (flash_attn/layers/rotary.py, ops/triton/rotary.py) and
// QuACK's rotary ops. Memory-bound elementwise kernel (src/rotary/rotary.cu): one CTA per
// token, each thread one 16-byte chunk of the first half of the rotated part and the matching
// chunk of the second half, its cos/sin chunk held in registers across the heads it handles.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "quack/tensor.h"

namespace quack {

/// Arguments of apply_rotary. For a head vector x (D elements) at sequence position
/// p = s + seqlen_offset, with R = 2 · cos.shape[1] (rotary_dim ≤ D), x1 = x[0 : R/2],
/// x2 = x[R/2 : R], c = cos[p, :], s = sin[p, :] (s negated when `conjugate`):
///
///   out[0 : R/2] = x1 · c − x2 · s
///   out[R/2 : R] = x2 · c + x1 · s
///   out[R : D]   = x[R : D]                        (passed through)
///
/// or, with `interleaved` (flash-attn's interleaved=True, GPT-J), the pairs adjacent: for
/// i < R/2,
///
///   out[2i]     = x[2i] · c[i] − x[2i + 1] · s[i]
///   out[2i + 1] = x[2i + 1] · c[i] + x[2i] · s[i]
///
/// Applied to every head of q and of k (when given); v (when given) is copied to v_out
/// unchanged, so a packed qkv tensor (B, S, 3, H, D) is served by one launch with q, k and v
/// its three (B, S, H, D) slices. The backward of the rotation is the same call with
/// `conjugate` flipped (the rotation is orthogonal: its transpose is its inverse), applied to
/// the gradients. fp32 math (one fma each), one rounding to the output dtype; the
/// torch formula `x * cat(c, c) + rotate_half(x) * cat(s, s)` with fp32 tables.
///
/// | tensor      | shape          | dtype            | layout                                |
/// |-------------|----------------|------------------|---------------------------------------|
/// | q, q_out    | (B, S, H, D)   | fp32, fp16, bf16 | any non-negative strides, D stride 1  |
/// | k, k_out    | (B, S, Hk, D)  | q's dtype        | as q (optional, both or neither)      |
/// | v, v_out    | (B, S, Hv, D)  | q's dtype        | as q (optional, both or neither)      |
/// | cos, sin    | (S_ro, R/2)    | fp32             | any non-negative strides              |
///
/// Each output has q's dtype, its input's shape, and either is its input exactly (same data
/// and strides: in place; an in-place v is left as it is) or shares no element with any tensor
/// of the call (other outputs, other inputs, cos, sin; checked, with interleaved slices of one
/// buffer, as q, k, v of a packed qkv, told apart exactly). The vector kernel (16-byte loads
/// and stores) runs when D and R/2 are multiples of 16 bytes of the dtype (8 elements for
/// fp16/bf16, 4 for fp32) and every tensor's base is 16-byte aligned with B, S and head strides
/// multiples of those 8 (4) elements, cos and sin with unit column stride and row strides
/// multiples of 4; any other call runs the same kernel one element at a time (correct, slower).
///
/// Differences from flash-attn: one scalar seqlen_offset (no per-batch
/// offsets, no cu_seqlens varlen layout); cos/sin fp32 only; k and v separate tensors (so q,
/// k, v of a packed (B, S, 3, H, D) tensor, or of GQA layouts with Hk ≠ H, are slices).
struct RotaryArgs {
  TensorRef q;
  TensorRef q_out;
  TensorRef k;        // optional
  TensorRef k_out;    // given exactly when k is
  TensorRef v;        // optional
  TensorRef v_out;    // given exactly when v is
  TensorRef cos;
  TensorRef sin;
  int64_t seqlen_offset = 0;  // position of s = 0; S + seqlen_offset ≤ S_ro
  bool conjugate = false;     // rotate by −angle (the backward)
  bool interleaved = false;   // pairs (2i, 2i + 1), else (i, i + R/2)
};

/// Runs the rotation on `stream` (the device of q). B·S = 0 or no heads launches nothing.
/// Throws InvalidArgument (naming the function "apply_rotary", the argument, what was expected
/// and what came) for an absent q, q_out, cos or sin, a k (v) without k_out (v_out) or the
/// reverse, a tensor not 4-D (cos, sin: 2-D), a negative size or stride, shapes that disagree
/// (B, S, D across q, k, v; each output its input's shape; cos and sin equal), cos with 0
/// columns or 2 · cos.shape[1] > D, a D stride other than 1 (D > 1), a dtype other than q's
/// (cos, sin: other than fp32), q not fp32/fp16/bf16, a tensor in host memory (device < 0) or on another
/// device than q, an output whose elements overlap, an output at its input's address with
/// other strides, an output sharing memory with another tensor of the call (not in place),
/// seqlen_offset < 0 or S + seqlen_offset > S_ro, or H·D per token of a tensor
/// past 2^31 elements; CudaError when the launch fails.
void apply_rotary(const RotaryArgs& args, cudaStream_t stream);

/// Arguments of rotary_qkv_pack: the backward of a rotary embedding that took a packed qkv
/// (B, S, 3, H, D) and returned q, k, v as three separate tensors (Python's
/// apply_rotary_emb_qkv_split). It writes the packed gradient in one launch:
///
///   dqkv[:, :, 0] = rot(dq)   (apply_rotary's formula on each head, zeros when dq is absent)
///   dqkv[:, :, 1] = rot(dk)   (zeros when dk is absent)
///   dqkv[:, :, 2] = dv        (copied; zeros when dv is absent)
///
/// with rot the rotation of apply_rotary by cos, sin, seqlen_offset, `interleaved` (the pair
/// layout) and `conjugate` (the
/// backward of a forward rotation passes conjugate = true: the inverse rotation). Same kernel as
/// apply_rotary (fp32 math, one rounding; dv's bits copied), so a packed gradient costs one read
/// of dq, dk, dv and one write of dqkv: no stacking copy.
///
/// | tensor      | shape          | dtype            | layout                                |
/// |-------------|----------------|------------------|---------------------------------------|
/// | dq, dk, dv  | (B, S, H, D)   | dqkv's dtype     | any non-negative strides, D stride 1; |
/// |             |                |                  | each optional (absent: zeros)         |
/// | dqkv        | (B, S, 3·H, D) | fp32, fp16, bf16 | the packed (B, S, 3, H, D) with its   |
/// |             |                |                  | (3, H) dims merged (a view of a       |
/// |             |                |                  | contiguous one); D stride 1, no       |
/// |             |                |                  | overlapping elements                  |
/// | cos, sin    | (S_ro, R/2)    | fp32             | as apply_rotary                       |
///
/// dqkv must not share memory with dq, dk, dv, cos or sin (checked). The vector kernel runs
/// under apply_rotary's conditions on the present tensors and dqkv.
struct RotaryPackArgs {
  TensorRef dq;    // optional
  TensorRef dk;    // optional
  TensorRef dv;    // optional
  TensorRef dqkv;  // the output, (B, S, 3·H, D)
  TensorRef cos;
  TensorRef sin;
  int64_t seqlen_offset = 0;  // position of s = 0; S + seqlen_offset ≤ S_ro
  bool conjugate = true;      // rotate by −angle (the backward of a forward rotation)
  bool interleaved = false;   // pairs (2i, 2i + 1), else (i, i + R/2)
};

/// Runs the packing rotation on `stream` (the device of dqkv). B·S·H = 0 launches nothing.
/// Throws InvalidArgument (naming the function "rotary_qkv_pack", the argument, what was
/// expected and what came) for an absent dqkv, cos or sin, a tensor not 4-D (cos, sin: 2-D),
/// a negative size or stride, dqkv's third dimension not a multiple of 3, dq, dk or dv not
/// (B, S, H, D) of dqkv's B, S, 3·H and D, cos with 0 columns or 2 · cos.shape[1] > D, a D
/// stride other than 1 (D > 1), dqkv not fp32/fp16/bf16, dq, dk, dv not dqkv's dtype (cos,
/// sin: not fp32), a tensor in host memory (device < 0) or on another device than dqkv, dqkv with
/// overlapping elements or sharing memory with dq, dk, dv, cos or sin, seqlen_offset < 0 or
/// S + seqlen_offset > S_ro, or 3·H·D past 2^31 elements; CudaError when the launch fails.
void rotary_qkv_pack(const RotaryPackArgs& args, cudaStream_t stream);

}  // namespace quack
