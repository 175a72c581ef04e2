// The padded copy of a GEMM operand that TMA cannot address (gemm.cpp: a or b whose base, leading
// or batch stride is not a multiple of 16 bytes, e.g. a row-major (K, 50257) b): the operand's
// rows are copied into a workspace with rows padded to 16 bytes, which the kernel then reads.
//
// Threads → work: a block per destination row (grid-stride over the rows of all batches), a
// thread per 16-byte chunk of it (8 elements). Source reads are 2-byte loads (the source rows sit
// at any 2-byte offset; consecutive threads read consecutive chunks, so a warp's loads fall on
// 512 contiguous bytes), the destination gets one 16-byte store per chunk (the workspace is
// 16-byte aligned and its rows are 16-byte multiples). The padding past `cols` is written with zeros (the kernel's TMA never reads it:
// the tensor's extent is `cols`).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/launch.h"
#include "gemm/gemm_pad.h"

namespace quack::detail {

namespace {

__global__ void __launch_bounds__(256) pad_rows_kernel(const uint16_t* src, int64_t rows, int64_t cols, int64_t ld,
                                                       int64_t batch, int64_t total_rows, int64_t chunks_per_row,
                                                       uint4* dst) {
  for (int64_t row_all = blockIdx.x; row_all < total_rows; row_all += gridDim.x) {
    const int64_t l = row_all / rows, r = row_all - l * rows;
    const uint16_t* const s = src + l * batch + r * ld;
    uint4* const d = dst + row_all * chunks_per_row;
    for (int64_t ch = threadIdx.x; ch < chunks_per_row; ch += blockDim.x) {
      const int64_t c0 = ch * 8;
      uint16_t v[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = c0 + e < cols ? __ldg(s + c0 + e) : uint16_t(0);
      uint4 out;
      out.x = uint32_t(v[0]) | (uint32_t(v[1]) << 16);
      out.y = uint32_t(v[2]) | (uint32_t(v[3]) << 16);
      out.z = uint32_t(v[4]) | (uint32_t(v[5]) << 16);
      out.w = uint32_t(v[6]) | (uint32_t(v[7]) << 16);
      d[ch] = out;
    }
  }
}

}  // namespace

void gemm_pad_rows(const PadCopy& c, cudaStream_t stream) {
  const int64_t total_rows = c.l * c.rows, chunks_per_row = c.ld_dst / 8;
  if (total_rows == 0 || chunks_per_row == 0) return;
  const int64_t blocks = std::min<int64_t>(total_rows, int64_t(sm_count(c.device)) * 16);
  launch(pad_rows_kernel, blocks, 256, 0, 1, stream, "gemm (padded operand copy)",
         static_cast<const uint16_t*>(c.src), c.rows, c.cols, c.ld, c.batch, total_rows, chunks_per_row,
         static_cast<uint4*>(c.dst));
}

}  // namespace quack::detail
