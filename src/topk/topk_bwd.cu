// Top-k backward (quack/topk.h, topk_bwd): the gradient scattered to the selected columns,
// through the fused softmax.
//
// Thread -> data: tpr threads per row (32..256, ~8 columns each), 256 / tpr rows per CTA of 256
// threads; element at a time in runtime dtypes and strides (a small kernel: it writes every
// element of dx once and reads x once for kRow).
//   1. s = Σ_j p_j·dvalues_j over the row's k entries (kSelected: p = values; kRow:
//      p_j = e^(x[c_j] − lse)), summed per thread, then over the row's threads (shuffles, then
//      one slot per warp in shared memory, added in a fixed order);
//   2. every column of the row: dx = −e^(x − lse)·s (kRow) or 0;
//   3. __syncthreads (orders 2's stores before 3's in the CTA), then the k selected columns:
//      dx[c_j] = dvalues_j (kNone) or p_j·(dvalues_j − s). Columns outside [0, N) are skipped.
#include "common/launch.h"
#include "common/row_general.cuh"
#include "row/row_math.cuh"
#include "topk/topk_internal.h"

namespace quack::detail {

namespace {

constexpr int kBwdThreads = 256;

__device__ __forceinline__ int64_t topk_load_index(const RowIO& t, int64_t row, int64_t j) {
  const int64_t off = row * t.row_stride + j * t.col_stride;
  if (t.dtype == DType::kInt64) return static_cast<const int64_t*>(t.ptr)[off];
  return static_cast<const int32_t*>(t.ptr)[off];
}

__global__ void __launch_bounds__(kBwdThreads) topk_bwd_kernel(const TopkBwdParams p) {
  __shared__ float part[kBwdThreads / 32];
  const int tpr = p.tpr;
  const int t = static_cast<int>(threadIdx.x) % tpr;
  const int row_local = static_cast<int>(threadIdx.x) / tpr;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kBwdThreads / tpr) + row_local;
  const bool ok = row < p.M;
  const bool sel = p.softmax == 1, full = p.softmax == 2;

  float lse = 0.f;
  if (ok && full) lse = static_cast<const float*>(p.lse.ptr)[row * p.lse.col_stride];
  // p_j of entry j at column c (softmax modes).
  auto prob = [&](int64_t j, int64_t c) {
    return sel ? load1(p.values, row, j) : exp_diff(load1(p.x, row, c), lse);
  };

  float s = 0.f;
  if (p.softmax != 0) {
    if (ok) {
      for (int64_t j = t; j < p.k; j += tpr) {
        const int64_t c = topk_load_index(p.indices, row, j);
        if (c < 0 || c >= p.N) continue;
        s += prob(j, c) * load1(p.dvalues, row, j);
      }
    }
    for (int off = min(tpr, 32) / 2; off >= 1; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (tpr > 32) {  // kernel-uniform
      if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = s;
      __syncthreads();
      const int w0 = row_local * (tpr / 32);
      s = 0.f;
      for (int w = 0; w < tpr / 32; ++w) s += part[w0 + w];
    }
  }

  if (ok) {
    for (int64_t c = t; c < p.N; c += tpr)
      store1(p.dx, row, c, full ? -exp_diff(load1(p.x, row, c), lse) * s : 0.f);
  }
  __syncthreads();
  if (!ok) return;
  for (int64_t j = t; j < p.k; j += tpr) {
    const int64_t c = topk_load_index(p.indices, row, j);
    if (c < 0 || c >= p.N) continue;
    const float dv = load1(p.dvalues, row, j);
    store1(p.dx, row, c, p.softmax == 0 ? dv : prob(j, c) * (dv - s));
  }
}

}  // namespace

void topk_bwd_launch(const TopkBwdParams& p, int64_t grid, cudaStream_t stream, const char* where) {
  launch(topk_bwd_kernel, grid, kBwdThreads, 0, 1, stream, where, p);
}

}  // namespace quack::detail
