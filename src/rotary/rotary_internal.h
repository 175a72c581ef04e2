// Rotary embedding (quack/rotary.h): the kernel's parameters and launcher, shared by the API
// (rotary.cpp: validation, the vector-path choice) and the kernel TU (rotary.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "quack/rotary.h"
#include "quack/tensor.h"

namespace quack::detail {

/// One of q, k, v: input and output bases with their (B, S, head) strides in elements (the D
/// stride is 1). `write`: the kernel writes this tensor's pass-through columns (q, k: columns
/// R..D; v: all) — false when the output is the input (in place) or the tensor is absent.
/// `in` == nullptr with `write` (rotary_qkv_pack's absent gradients): the input reads as zeros.
struct RotaryTensor {
  const void* in = nullptr;
  void* out = nullptr;
  int heads = 0;
  bool write = false;
  int64_t in_b = 0, in_s = 0, in_h = 0;
  int64_t out_b = 0, out_s = 0, out_h = 0;
};

/// t[0] = q and t[1] = k are rotated, t[2] = v copied. cos/sin rows are positions; columns
/// 0..half-1 with column stride cs_col (1 on the vector path). interleaved: the rotated pairs
/// are columns (2i, 2i + 1) (GPT-J), else (i, i + half) (GPT-NeoX rotate_half).
struct RotaryParams {
  RotaryTensor t[3];
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t cs_row = 0, cs_col = 0;
  int64_t B = 0, S = 0;
  int D = 0, half = 0;
  int64_t seqlen_offset = 0;
  bool conjugate = false;
  bool interleaved = false;  // pairs (2i, 2i + 1) of the rotated columns, else (i, i + R/2)
};

/// Threads per CTA of the rotary kernel.
constexpr int kRotaryThreads = 256;

/// Launches the kernel for element type `dtype` on `stream` (current device): the vector
/// instance (16-byte accesses) when `vec`, else the element-at-a-time one. B·S ≥ 1.
void launch_rotary(const RotaryParams& p, DType dtype, bool vec, cudaStream_t stream,
                   const char* where);

/// Whether apply_rotary(a) takes the vector kernel (a already valid; for the tests).
bool rotary_vector_path(const RotaryArgs& a);

/// Whether rotary_qkv_pack(a) takes the vector kernel (a already valid; for the tests).
bool rotary_pack_vector_path(const RotaryPackArgs& a);

}  // namespace quack::detail
