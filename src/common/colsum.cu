// Column sums: CTA tile (8 row slices, 32 columns); thread (s, j) sums rows s, s+8, ... of
// column j in order, then slice 0 adds the 8 slice sums in order.
#include "common/colsum.h"
#include "common/launch.h"
#include "common/vec.cuh"

namespace quack::detail {

constexpr int kColsumCols = 32;
constexpr int kColsumSlices = 8;

__global__ void __launch_bounds__(kColsumCols * kColsumSlices)
    colsum_kernel(const float* __restrict__ part, int64_t P, int64_t N, RowIO out) {
  __shared__ float acc[kColsumSlices][kColsumCols];
  const int j = threadIdx.x % kColsumCols;
  const int s = threadIdx.x / kColsumCols;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kColsumCols + j;
  float sum = 0.f;
  if (col < N) {
    const float* p = part + col;
#pragma unroll 4
    for (int64_t r = s; r < P; r += kColsumSlices) sum += p[r * N];
  }
  acc[s][j] = sum;
  __syncthreads();
  if (s == 0 && col < N) {
    float total[1] = {0.f};
#pragma unroll
    for (int i = 0; i < kColsumSlices; ++i) total[0] += acc[i][j];
    store_any<1>(out.ptr, out.dtype, col * out.col_stride, total);
  }
}

void launch_colsum(const float* part, int64_t P, int64_t N, RowIO out, cudaStream_t stream,
                   const char* where) {
  const int64_t grid = (N + kColsumCols - 1) / kColsumCols;
  launch(colsum_kernel, grid, kColsumCols * kColsumSlices, 0, 1, stream, where, part, P, N, out);
}

}  // namespace quack::detail
