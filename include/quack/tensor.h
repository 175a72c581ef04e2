// QuACK-C++ tensor reference: a non-owning view of device memory (pointer, dtype, shape,
// strides in elements, device). Host-only; no CUDA headers needed.
//
// Shapes and strides are 64-bit. A default-constructed TensorRef (data == nullptr, ndim == 0)
// means "absent" for optional arguments. Strides may be 0 (broadcast, e.g. the dy that
// autograd hands over for y.sum().backward()) wherever a function says so.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

namespace quack {

/// Element types. Only fp32/fp16/bf16 are row-kernel data types; int32/int64 serve indices.
enum class DType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2, kInt32 = 3, kInt64 = 4 };

/// Bytes per element of `t` (2 for fp16/bf16, 4 for fp32/int32, 8 for int64; 0 for a value
/// outside the enum). Never throws.
inline int dtype_size(DType t) {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kFloat32:
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
  }
  return 0;
}

/// Lower-case name, as in torch: "float32", "float16", "bfloat16", "int32", "int64".
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
  }
  return "unknown";
}

/// A view of 1 ≤ `ndim` ≤ 4 dimensions (ndim 0: absent). Every op rejects (InvalidArgument)
/// a larger ndim, a non-empty view whose elements span more than 2^62 bytes, and a non-empty
/// view whose data pointer is null or not a multiple of the element size. `device` is the
/// CUDA device ordinal of the memory at `data` (−1: host memory, which every op rejects). The
/// ops trust it: they do not inspect the pointer (no driver query per tensor, to keep the host
/// time of a call low), so a host pointer labelled with a device ordinal is the caller's error
/// and faults in the kernel. The factories below default `dev` to 0.
struct TensorRef {
  static constexpr int kMaxDims = 4;

  void* data = nullptr;
  DType dtype = DType::kFloat32;
  int ndim = 0;
  int64_t shape[kMaxDims] = {0, 0, 0, 0};
  int64_t stride[kMaxDims] = {0, 0, 0, 0};  // in elements
  int device = 0;

  /// True when the argument was given (ndim > 0). An empty tensor (a zero in its shape) is
  /// present.
  bool present() const { return ndim > 0; }
  /// Product of the extents (0 when absent or empty).
  int64_t numel() const {
    int64_t n = ndim > 0 ? 1 : 0;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }

  /// An (n) vector at p with element stride st on CUDA device dev. Builds the view only: the
  /// ops validate it (and throw InvalidArgument) when they receive it.
  static TensorRef vector(const void* p, DType t, int64_t n, int dev = 0, int64_t st = 1) {
    TensorRef r;
    r.data = const_cast<void*>(p);
    r.dtype = t;
    r.ndim = 1;
    r.shape[0] = n;
    r.stride[0] = st;
    r.device = dev;
    return r;
  }
  /// An (rows, cols) matrix at p on CUDA device dev with element strides row_stride (default
  /// cols: row-major, contiguous) and col_stride (default 1). Builds the view only.
  static TensorRef matrix(const void* p, DType t, int64_t rows, int64_t cols, int dev = 0,
                          int64_t row_stride = -1, int64_t col_stride = 1) {
    TensorRef r;
    r.data = const_cast<void*>(p);
    r.dtype = t;
    r.ndim = 2;
    r.shape[0] = rows;
    r.shape[1] = cols;
    r.stride[0] = row_stride < 0 ? cols : row_stride;
    r.stride[1] = col_stride;
    r.device = dev;
    return r;
  }
  /// A batch of `batches` (rows, cols) matrices at p on CUDA device dev, shape (batches, rows,
  /// cols), with element strides batch_stride, row_stride and col_stride (e.g. a batched GEMM
  /// operand: row-major is (rows·ld, ld, 1), column-major (cols·ld, 1, ld)). Builds the view only.
  static TensorRef batched(const void* p, DType t, int64_t batches, int64_t rows, int64_t cols, int dev,
                           int64_t batch_stride, int64_t row_stride, int64_t col_stride) {
    TensorRef r = matrix(p, t, rows, cols, dev, row_stride, col_stride);
    r.ndim = 3;
    r.shape[0] = batches;
    r.shape[1] = rows;
    r.shape[2] = cols;
    r.stride[0] = batch_stride;
    r.stride[1] = row_stride;
    r.stride[2] = col_stride;
    return r;
  }
};

/// "(4096, 512) bfloat16" (or "absent"), as the error messages print tensors. Never throws but
/// for std::bad_alloc.
std::string describe(const TensorRef& t);

}  // namespace quack
