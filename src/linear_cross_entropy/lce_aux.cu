// Linear + cross-entropy: the small kernels (lce_aux.h). Plain elementwise or column kernels;
// none of them is on the critical path of a large call but colsum (dbias, one read of each
// chunk).
//
// fill     thread -> one 16-byte vector of 8 columns, rows blockIdx.y, +gridDim.y, ...; the 8
//          bias values are loaded once per thread.
// colsum   CTA of 8 warps -> 256 columns; lane -> 8 columns (one 16-byte load per row), warp w
//          -> rows w, w + 8, ... (fp32 sums in registers), then the 8 warps' partials are added
//          in warp order through shared memory: a fixed order, so the bits repeat run to run.
// cast     CTA -> rows blockIdx.x, +gridDim.x, ...; thread -> 8-element vectors (or elements).
// compact  the first launch (one CTA) reads elements [0, n0) into registers, synchronises, then
//          writes them; a later launch over [a, b) with b ≤ 2a writes bytes [2a, 2b), which
//          held elements below a (moved by earlier launches), and reads bytes [4a, 4b): its
//          reads and writes never meet, and stream order separates the launches.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "common/launch.h"
#include "common/row_general.cuh"
#include "common/vec.cuh"
#include "linear_cross_entropy/lce_aux.h"

namespace quack::detail {

namespace {

constexpr int kThreads = 256;
constexpr int kCompactFirst = 1024 * 8;  // elements of the first compaction launch

__global__ void __launch_bounds__(kThreads) lce_fill_kernel(const LceFillParams q) {
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * 8;
  if (c0 >= q.cols) return;  // the vector holding column cols - 1 also zeroes the padding
  float b[8];
#pragma unroll
  for (int k = 0; k < 8; ++k)
    b[k] = q.bias.ptr != nullptr && c0 + k < q.cols ? load1(q.bias, 0, c0 + k) : 0.f;
  for (int64_t r = blockIdx.y; r < q.rows; r += gridDim.y)
    store_any<8>(q.dst, q.dtype, r * q.ld + c0, b);
}

__global__ void __launch_bounds__(kThreads) lce_colsum_kernel(const LceColsumParams q) {
  __shared__ float part[kThreads / 32][kThreads];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kThreads + lane * 8;
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (c0 < q.cols) {
#pragma unroll 4
    for (int64_t r = warp; r < q.rows; r += kThreads / 32) {
      float v[8];
      load_any<8>(q.src, q.dtype, r * q.ld + c0, v);
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[k] += v[k];
    }
  }
#pragma unroll
  for (int k = 0; k < 8; ++k) part[warp][lane * 8 + k] = acc[k];
  __syncthreads();
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (j >= q.cols) return;
  float s = 0.f;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) s += part[w][threadIdx.x];
  if (q.add) s += load1(q.out, 0, j);
  store1(q.out, 0, j, s);
}

__global__ void __launch_bounds__(kThreads) lce_shift_kernel(const LceShiftParams q) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < q.T;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t off = i * q.target.row_stride;
    const int64_t t = q.target.dtype == DType::kInt64
                          ? static_cast<const int64_t*>(q.target.ptr)[off]
                          : int64_t{static_cast<const int32_t*>(q.target.ptr)[off]};
    int32_t s;
    if (t == q.ignore_index)
      s = -1;
    else if (t < 0 || t >= q.V)
      s = -2;
    else
      s = static_cast<int32_t>(t >= q.v0 ? t - q.v0 : t - q.v0 + q.V);
    q.out[i] = s;
  }
}

__global__ void __launch_bounds__(kThreads) lce_cast_kernel(const LceCastParams q) {
  for (int64_t r = blockIdx.x; r < q.rows; r += gridDim.x) {
    const float* src = q.src + r * q.ld_src;
    if (q.vec) {
      for (int64_t c = threadIdx.x * 8; c < q.cols; c += kThreads * 8) {
        float s[8];
        load_vec<float, 8>(src + c, s);
        const int64_t off = r * q.dst.row_stride + c;
        if (q.add) {
          float d[8];
          load_any<8, Cache::kNormal>(q.dst.ptr, q.dst.dtype, off, d);
#pragma unroll
          for (int k = 0; k < 8; ++k) s[k] += d[k];
        }
        store_any<8>(q.dst.ptr, q.dst.dtype, off, s);
      }
    } else {
      for (int64_t c = threadIdx.x; c < q.cols; c += kThreads) {
        float s = src[c];
        if (q.add) s += load1(q.dst, r, c);
        store1(q.dst, r, c, s);
      }
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(1024) lce_compact_first_kernel(void* buf, int64_t n) {
  const int64_t i = static_cast<int64_t>(threadIdx.x) * 8;
  float v[8];
  if (i < n) load_vec<float, 8, Cache::kNormal>(static_cast<const float*>(buf) + i, v);
  __syncthreads();  // every element of [0, n) is in registers before any is overwritten
  if (i < n) store_vec<T, 8>(static_cast<T*>(buf) + i, v);
}

template <typename T>
__global__ void __launch_bounds__(kThreads) lce_compact_kernel(void* buf, int64_t a, int64_t b) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads * 8;
  for (int64_t i = a + (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * 8; i < b;
       i += step) {
    float v[8];
    load_vec<float, 8>(static_cast<const float*>(buf) + i, v);
    store_vec<T, 8>(static_cast<T*>(buf) + i, v);
  }
}

__global__ void lce_set_kernel(float* p, float v) { *p = v; }

void check_launch(const char* where, const char* kernel) {
  check_cuda(cudaGetLastError(), where, kernel);
}

unsigned grid_of(int64_t items, int64_t per_cta, int64_t cap) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min(cap, (items + per_cta - 1) / per_cta)));
}

}  // namespace

void launch_lce_fill(const LceFillParams& q, cudaStream_t stream, const char* where) {
  if (q.rows == 0 || q.cols == 0) return;
  const int64_t vecs = (q.cols + 7) / 8;
  const dim3 grid(grid_of(vecs, kThreads, int64_t{1} << 30),
                  static_cast<unsigned>(std::min<int64_t>(q.rows, 256)));
  lce_fill_kernel<<<grid, kThreads, 0, stream>>>(q);
  check_launch(where, "lce_fill_kernel launch");
}

void launch_lce_colsum(const LceColsumParams& q, cudaStream_t stream, const char* where) {
  if (q.cols == 0) return;
  lce_colsum_kernel<<<grid_of(q.cols, kThreads, int64_t{1} << 30), kThreads, 0, stream>>>(q);
  check_launch(where, "lce_colsum_kernel launch");
}

void launch_lce_shift(const LceShiftParams& q, cudaStream_t stream, const char* where) {
  if (q.T == 0) return;
  lce_shift_kernel<<<grid_of(q.T, kThreads, 1024), kThreads, 0, stream>>>(q);
  check_launch(where, "lce_shift_kernel launch");
}

void launch_lce_cast(const LceCastParams& q, int device, cudaStream_t stream, const char* where) {
  if (q.rows == 0 || q.cols == 0) return;
  const unsigned grid = grid_of(q.rows, 1, int64_t{sm_count(device)} * 8);
  lce_cast_kernel<<<grid, kThreads, 0, stream>>>(q);
  check_launch(where, "lce_cast_kernel launch");
}

void launch_lce_compact(void* buf, int64_t n, DType dtype, int device, cudaStream_t stream,
                        const char* where) {
  if (n <= 0) return;
  const bool bf16 = dtype == DType::kBFloat16;
  const int64_t n0 = std::min<int64_t>(n, kCompactFirst);
  if (bf16)
    lce_compact_first_kernel<__nv_bfloat16><<<1, 1024, 0, stream>>>(buf, n0);
  else
    lce_compact_first_kernel<__half><<<1, 1024, 0, stream>>>(buf, n0);
  check_launch(where, "lce_compact_first_kernel launch");
  const int64_t cap = int64_t{sm_count(device)} * 8;
  for (int64_t a = n0; a < n;) {
    const int64_t b = std::min(2 * a, n);
    const unsigned grid = grid_of((b - a) / 8, kThreads, cap);
    if (bf16)
      lce_compact_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(buf, a, b);
    else
      lce_compact_kernel<__half><<<grid, kThreads, 0, stream>>>(buf, a, b);
    check_launch(where, "lce_compact_kernel launch");
    a = b;
  }
}

void launch_lce_set(float* p, float v, cudaStream_t stream, const char* where) {
  lce_set_kernel<<<1, 1, 0, stream>>>(p, v);
  check_launch(where, "lce_set_kernel launch");
}

}  // namespace quack::detail
