// CUB's segmented radix sort for top-k's sort path (topk_sort.cu), in a TU of its own (CUB's
// dispatch is most of the sort path's compile time). One segment per row: offsets i·N.
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cub/device/device_segmented_radix_sort.cuh>

#include "common/launch.h"
#include "topk/topk_internal.h"

namespace quack::detail {

namespace {

struct RowOffset {
  int64_t n;
  __host__ __device__ int64_t operator()(int64_t i) const { return i * n; }
};
using OffsetIt = thrust::transform_iterator<RowOffset, thrust::counting_iterator<int64_t>>;

}  // namespace

size_t topk_cub_sort_temp_bytes(int64_t rows, int64_t N, int bits, const char* where) {
  cub::DoubleBuffer<uint32_t> kb(nullptr, nullptr);
  cub::DoubleBuffer<int32_t> cb(nullptr, nullptr);
  const OffsetIt it(thrust::counting_iterator<int64_t>(0), RowOffset{N});
  size_t bytes = 0;
  check_cuda(cub::DeviceSegmentedRadixSort::SortPairs(
                 nullptr, bytes, kb, cb, static_cast<int>(rows * N), static_cast<int>(rows), it,
                 it + 1, 0, bits, cudaStream_t{}),
             where, "cub::DeviceSegmentedRadixSort::SortPairs (size query)");
  return bytes;
}

void topk_cub_sort(void* temp, size_t temp_bytes, uint32_t* k0, uint32_t* k1, int32_t* c0,
                   int32_t* c1, int64_t rows, int64_t N, int bits, cudaStream_t stream,
                   const char* where, uint32_t** keys, int32_t** cols) {
  cub::DoubleBuffer<uint32_t> kb(k0, k1);
  cub::DoubleBuffer<int32_t> cb(c0, c1);
  const OffsetIt it(thrust::counting_iterator<int64_t>(0), RowOffset{N});
  check_cuda(
      cub::DeviceSegmentedRadixSort::SortPairs(temp, temp_bytes, kb, cb, static_cast<int>(rows * N),
                                               static_cast<int>(rows), it, it + 1, 0, bits, stream),
      where, "cub::DeviceSegmentedRadixSort::SortPairs");
  check_cuda(cudaGetLastError(), where, "cub::DeviceSegmentedRadixSort::SortPairs (launch)");
  *keys = kb.Current();
  *cols = cb.Current();
}

}  // namespace quack::detail
