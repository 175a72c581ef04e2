// A row-major view of an (M, N) operand or an (N) vector as the kernels see it: pointer,
// runtime dtype and element strides. Plain data shared by host and device.
#pragma once

#include <cstdint>

#include "quack/tensor.h"

namespace quack::detail {

struct RowIO {
  void* ptr = nullptr;
  int64_t row_stride = 0;  // elements between rows (0 for an (N) vector)
  int64_t col_stride = 1;  // elements between columns
  DType dtype = DType::kFloat32;

#ifdef __CUDACC__
  /// Element offset of (row, col). kVecPath: columns are contiguous (col_stride == 1).
  template <bool kVecPath>
  __device__ __forceinline__ int64_t offset(int64_t row, int64_t col) const {
    if constexpr (kVecPath) return row * row_stride + col;
    else return row * row_stride + col * col_stride;
  }
#endif
};

}  // namespace quack::detail
