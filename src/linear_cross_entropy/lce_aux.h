// Linear + cross-entropy: the small kernels around the GEMMs and the cross-entropy row kernel
// (lce_aux.cu). Host-visible declarations; plain-data parameters. Each launcher runs on the
// current device (the caller holds a DeviceGuard) and throws CudaError naming `where`.
//
//   fill     logits rows := bias (or 0), before the logits GEMM adds x·Wᵀ (C = D = the chunk)
//   colsum   dbias (+)= Σ_rows of a (rows, cols) 16-bit chunk, fp32, fixed order (deterministic)
//   shift    a vocabulary slice's targets: t − v0 for t ≥ v0, t − v0 + V below (outside the
//            slice's columns either way for other slices), −1 for ignore_index, −2 for a target
//            outside [0, V), so the cross-entropy backward sees the slice as columns [0, Vs) of
//            a V-class row (its class count set to V)
//   cast     dst (+)= src: an fp32 (rows, cols) matrix into any float dtype and layout
//   compact  fp32 → 16-bit in place over the first n elements of one buffer (element i moves
//            from byte 4i to byte 2i), by launches over [a, 2a) that never read what they write
//   set      one fp32 device scalar
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/row_io.h"

namespace quack::detail {

struct LceFillParams {
  void* dst = nullptr;  // (rows, ld) of `dtype`, 16-byte aligned, ld a multiple of 8
  DType dtype = DType::kBFloat16;
  int64_t rows = 0, cols = 0, ld = 0;  // columns [cols, round_up(cols, 8)) are written 0
  RowIO bias;                          // (cols) vector (row_stride 0); ptr == nullptr: zeros
};

struct LceColsumParams {
  const void* src = nullptr;  // (rows, cols) of `dtype`, row stride ld (multiple of 8), aligned
  DType dtype = DType::kBFloat16;
  int64_t rows = 0, cols = 0, ld = 0;
  RowIO out;         // (cols) vector of any float dtype and stride
  bool add = false;  // out += Σ (fp32 math, one rounding), else out = Σ
};

struct LceShiftParams {
  RowIO target;            // (T) int32/int64, row_stride = the element stride
  int32_t* out = nullptr;  // (T)
  int64_t T = 0, v0 = 0, V = 0, ignore_index = -100;
};

struct LceCastParams {
  const float* src = nullptr;  // (rows, cols), row stride ld_src
  int64_t ld_src = 0;
  RowIO dst;  // (rows, cols) of any float dtype and strides
  int64_t rows = 0, cols = 0;
  bool add = false;  // dst = src + dst (one rounding), else dst = src
  bool vec = false;  // 8-element vectors: cols, ld_src and dst's row stride multiples
                     // of 8, unit column stride, 16-byte aligned bases
};

void launch_lce_fill(const LceFillParams& q, cudaStream_t stream, const char* where);
void launch_lce_colsum(const LceColsumParams& q, cudaStream_t stream, const char* where);
void launch_lce_shift(const LceShiftParams& q, cudaStream_t stream, const char* where);
void launch_lce_cast(const LceCastParams& q, int device, cudaStream_t stream, const char* where);
/// Compacts n fp32 values at buf (16-byte aligned, n a multiple of 8) into n values of `dtype`
/// (bf16 or fp16) at buf, in place: ⌈log2(n / 8192)⌉ + 1 launches.
void launch_lce_compact(void* buf, int64_t n, DType dtype, int device, cudaStream_t stream,
                        const char* where);
void launch_lce_set(float* p, float v, cudaStream_t stream, const char* where);

}  // namespace quack::detail
