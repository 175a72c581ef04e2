// Top-k for k > kTopkQueueMaxK: each row sorted by CUB's segmented radix sort, then the first k
// written (with the softmax). Correct for any k ≤ N; not tuned.
//
//   1. prep:      key[i] = (2^W − 1) − key(x'), col[i] = column  (ascending = best first;
//                 topk_warp.cuh's keys: NaN first for largest, last for smallest)
//   2. sort:      cub::DeviceSegmentedRadixSort::SortPairs on the W key bits, one segment per
//                 row (topk_sort_cub.cu); stable, so equal keys keep the lower column first
//   3. epilogue:  one CTA per row: the softmax's (max, sum) over the k values (kSelected) or
//                 over the row of x (kRow), then values, indices and lse
// CUB takes an int item count, so rows are sorted in batches of ≤ 2^31 − 1 elements; the
// workspace holds one batch: two buffers of keys and of columns (4 bytes each) and CUB's
// temporary storage.
#include <algorithm>
#include <limits>

#include "common/dispatch.h"
#include "common/launch.h"
#include "topk/topk_internal.h"
#include "topk/topk_queue_kernel.cuh"

namespace quack::detail {

namespace {

constexpr int kSortThreads = 256;

/// Online (max, Σ e^(x − max)) of one more element (global-memory fold of OnlineMaxSum).
__device__ __forceinline__ void topk_fold(float& m, float& s, float x) {
  if (x > m) {
    s = s * exp_diff(m, x) + exp_diff(x, x);  // e^0 = 1; NaN for x = +inf
    m = x;
  } else if (x != kNegInf) {
    s += exp_diff(x, m);
  }
}

/// (max, sum) over the CTA, in every thread (fixed combine order).
__device__ OnlineMaxSum::Val topk_block_allreduce(OnlineMaxSum::Val v, float* red) {
  v = warp_allreduce_red<OnlineMaxSum>(v, 32);
  const int w = static_cast<int>(threadIdx.x / 32), nw = static_cast<int>(blockDim.x / 32);
  if ((threadIdx.x & 31) == 0) {
    red[2 * w] = v.v[0];
    red[2 * w + 1] = v.v[1];
  }
  __syncthreads();
  OnlineMaxSum::Val t = OnlineMaxSum::identity();
  for (int i = 0; i < nw; ++i) t = OnlineMaxSum::combine(t, {{red[2 * i], red[2 * i + 1]}});
  return t;
}

template <typename T>
__global__ void __launch_bounds__(kSortThreads)
    topk_sort_prep_kernel(const TopkParams p, int64_t row0, int64_t rows, uint32_t* keys,
                          int32_t* cols) {
  using Key = TopkKey<T>;
  const uint32_t sgn = p.largest ? 0u : 0x80000000u;
  const int64_t n = rows * p.N;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t r = i / p.N, c = i - r * p.N;
    const T* xr = static_cast<const T*>(p.x.ptr) + (row0 + r) * p.x.row_stride;
    const float xp = topk_flip(to_float(xr[c * p.x.col_stride]), sgn);
    keys[i] = Key::kMask - Key::key(xp, p.largest);
    cols[i] = static_cast<int32_t>(c);
  }
}

template <typename T>
__global__ void __launch_bounds__(kSortThreads)
    topk_sort_epilogue_kernel(const TopkParams p, int64_t row0, const uint32_t* keys,
                              const int32_t* cols) {
  using Key = TopkKey<T>;
  __shared__ float red[2 * kSortThreads / 32];
  const int64_t r = blockIdx.x, row = row0 + r;
  const uint32_t* kr = keys + r * p.N;
  const int32_t* cr = cols + r * p.N;
  const uint32_t sgn = p.largest ? 0u : 0x80000000u;
  auto value = [&](int64_t e) { return topk_flip(Key::value(Key::kMask - kr[e]), sgn); };
  float m = 0.f, inv_s = 1.f;
  if (p.softmax != kTopkSoftmaxNone) {
    float lm = kNegInf, ls = 0.f;
    if (p.softmax == kTopkSoftmaxSelected) {
      for (int64_t e = threadIdx.x; e < p.k; e += blockDim.x) topk_fold(lm, ls, value(e));
    } else {
      const T* xr = static_cast<const T*>(p.x.ptr) + row * p.x.row_stride;
      for (int64_t c = threadIdx.x; c < p.N; c += blockDim.x)
        topk_fold(lm, ls, to_float(xr[c * p.x.col_stride]));
    }
    const OnlineMaxSum::Val t = topk_block_allreduce({{lm, ls}}, red);
    m = t.v[0] == kNegInf ? 0.f : t.v[0];
    inv_s = 1.f / t.v[1];
    if (p.softmax == kTopkSoftmaxRow && p.lse.ptr != nullptr && threadIdx.x == 0)
      static_cast<float*>(p.lse.ptr)[row * p.lse.col_stride] = t.v[0] + log2_approx(t.v[1]) * kLn2;
  }
  for (int64_t e = threadIdx.x; e < p.k; e += blockDim.x)
    topk_store_entry(p, row, e, value(e), cr[e], m, inv_s);
}

size_t align256(size_t v) { return (v + 255) / 256 * 256; }

/// Rows per batch: CUB's item count is an int.
int64_t batch_rows(int64_t M, int64_t N) {
  const int64_t cap = std::numeric_limits<int>::max() / std::max<int64_t>(N, 1);
  return std::max<int64_t>(1, std::min(M, cap));
}

struct SortLayout {
  size_t keys[2], cols[2], temp, temp_bytes, total;
  int bits;
};

SortLayout sort_layout(int64_t rows, int64_t N, DType x, const char* where) {
  SortLayout l;
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(N);
  l.bits = dtype_size(x) * 8;
  size_t off = 0;
  for (int i = 0; i < 2; ++i) {
    l.keys[i] = off;
    off = align256(off + n * sizeof(uint32_t));
  }
  for (int i = 0; i < 2; ++i) {
    l.cols[i] = off;
    off = align256(off + n * sizeof(int32_t));
  }
  l.temp = off;
  const size_t tb = topk_cub_sort_temp_bytes(rows, N, l.bits, where);
  l.temp_bytes = tb;
  l.total = align256(off + tb);
  return l;
}

}  // namespace

size_t topk_sort_workspace_size(int64_t M, int64_t N, DType x, const char* where) {
  if (M <= 0 || N <= 0) return 0;
  return sort_layout(batch_rows(M, N), N, x, where).total;
}

void topk_sort_run(const TopkParams& p, DType x, void* workspace, size_t workspace_bytes,
                   cudaStream_t stream, const char* where) {
  const int64_t batch = batch_rows(p.M, p.N);
  const SortLayout l = sort_layout(batch, p.N, x, where);
  if (workspace_bytes < l.total)
    throw InvalidArgument(std::string(where) + ": workspace has " +
                          std::to_string(workspace_bytes) + " bytes, expected at least " +
                          std::to_string(l.total));
  char* const base = static_cast<char*>(workspace);
  dispatch_float(x, where, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t row0 = 0; row0 < p.M; row0 += batch) {
      const int64_t rows = std::min(batch, p.M - row0);
      const int64_t n = rows * p.N;
      auto* k0 = reinterpret_cast<uint32_t*>(base + l.keys[0]);
      auto* k1 = reinterpret_cast<uint32_t*>(base + l.keys[1]);
      auto* c0 = reinterpret_cast<int32_t*>(base + l.cols[0]);
      auto* c1 = reinterpret_cast<int32_t*>(base + l.cols[1]);
      const int64_t grid = std::min<int64_t>((n + kSortThreads - 1) / kSortThreads, 1 << 16);
      launch(topk_sort_prep_kernel<T>, grid, kSortThreads, 0, 1, stream, where, p, row0, rows, k0,
             c0);
      uint32_t* keys = nullptr;
      int32_t* cols = nullptr;
      topk_cub_sort(base + l.temp, l.temp_bytes, k0, k1, c0, c1, rows, p.N, l.bits, stream, where,
                    &keys, &cols);
      launch(topk_sort_epilogue_kernel<T>, rows, kSortThreads, 0, 1, stream, where, p, row0, keys,
             cols);
    }
  });
}

}  // namespace quack::detail
