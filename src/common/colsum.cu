// Column sums: CTA tile (kSlices row slices, 32 columns) of one (P, N) matrix; thread (s, j)
// sums rows s, s + kSlices, ... of column j in order, then slice 0 adds the kSlices slice sums
// in order. Every matrix of a call in one launch (CTA b: matrix b / col_blocks): LayerNorm's
// dweight and dbias do not wait on each other's launch.
#include "common/colsum.h"
#include "common/launch.h"
#include "common/pdl.cuh"
#include "common/pdl.h"
#include "common/vec.cuh"

namespace quack::detail {

constexpr int kColsumCols = 32;

struct ColsumArgs {
  const float* part[kMaxColsums];
  RowIO out[kMaxColsums];
};

template <int kSlices>
__global__ void __launch_bounds__(kColsumCols * kSlices)
    colsum_kernel(const ColsumArgs a, int64_t P, int64_t N, int64_t col_blocks) {
  __shared__ float acc[kSlices][kColsumCols];
  pdl_wait();  // the partial rows are the row kernel's outputs (launch_dependent)
  const int m = static_cast<int>(blockIdx.x / col_blocks);
  const int j = threadIdx.x % kColsumCols;
  const int s = threadIdx.x / kColsumCols;
  const int64_t col = static_cast<int64_t>(blockIdx.x % col_blocks) * kColsumCols + j;
  float sum = 0.f;
  // Matrix m's pointers by selects (an indexed parameter array would go through local memory).
  const float* base = a.part[0];
  RowIO out = a.out[0];
#pragma unroll
  for (int i = 1; i < kMaxColsums; ++i)
    if (m == i) {
      base = a.part[i];
      out = a.out[i];
    }
  if (col < N) {
    const float* p = base + col;
#pragma unroll 4
    for (int64_t r = s; r < P; r += kSlices) sum += p[r * N];
  }
  acc[s][j] = sum;
  __syncthreads();
  if (s == 0 && col < N) {
    float total[1] = {0.f};
#pragma unroll
    for (int i = 0; i < kSlices; ++i) total[0] += acc[i][j];
    store_any<1>(out.ptr, out.dtype, col * out.col_stride, total);
  }
}

void launch_colsums(const float* const* parts, const RowIO* outs, int n, int64_t P, int64_t N,
                    cudaStream_t stream, const char* where) {
  if (n <= 0 || N <= 0) return;
  ColsumArgs a{};
  for (int m = 0; m < n; ++m) {
    a.part[m] = parts[m];
    a.out[m] = outs[m];
  }
  const int64_t col_blocks = (N + kColsumCols - 1) / kColsumCols;
  // 32 slices (1,024 threads) when there are many partial rows (the short rows' 2-3 per SM): a
  // thread's serial chain of dependent adds then stays under ~10 loads; 8 otherwise.
  if (P >= 128)
    launch_dependent(colsum_kernel<32>, col_blocks * n, kColsumCols * 32, 0, stream, where, a, P,
                     N, col_blocks);
  else
    launch_dependent(colsum_kernel<8>, col_blocks * n, kColsumCols * 8, 0, stream, where, a, P,
                     N, col_blocks);
}

}  // namespace quack::detail
