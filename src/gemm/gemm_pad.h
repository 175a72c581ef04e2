// Padded copies of GEMM operands that TMA cannot address (host side; the kernel is in
// gemm_pad.cu). TMA needs a 16-byte aligned base and leading and batch strides that are multiples
// of 16 bytes; an a or b without them (K or N not a multiple of 8 in memory, e.g. a row-major
// (4096, 50257) b, or a view at an odd offset) is copied once per call into a workspace whose rows
// are padded to 16 bytes, and the kernel reads the copy (gemm.cpp, GemmArgs::workspace).
//
// Why a copy and not a non-TMA load path: a row at a 2-byte offset cannot be fed by cp.async
// (4, 8 or 16-byte accesses aligned to their size) nor by TMA, and a producer gathering it
// with 2-byte loads would need ~20 K loads per 40 KB stage; the copy costs one read and one
// write of the operand at memory bandwidth (0.4 GB for the (4096, 50257) bf16 b: ~0.3 ms beside
// a 5 ms GEMM) and leaves the kernel unchanged.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace quack::detail {

/// One operand to copy: L batches of `rows` rows of `cols` 16-bit elements, rows ld elements
/// apart and batches `batch` apart at src (any 2-byte aligned address); written at dst (16-byte
/// aligned) as L · rows rows of ld_dst elements (ld_dst = cols rounded up to 8; batches
/// rows · ld_dst apart).
struct PadCopy {
  const void* src = nullptr;
  int64_t rows = 0, cols = 0, ld = 0, batch = 0, l = 1;
  void* dst = nullptr;
  int64_t ld_dst = 0;
  int device = 0;

  /// Bytes of the destination.
  int64_t bytes() const { return l * rows * ld_dst * 2; }
};

/// Launches the copy on `stream` (current device = c.device). Throws CudaError.
void gemm_pad_rows(const PadCopy& c, cudaStream_t stream);

}  // namespace quack::detail
