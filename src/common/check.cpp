#include "common/check.h"
#include "quack/version.h"

#include <algorithm>
#include <utility>

namespace quack {

// No iostreams in the library: an ostream instantiated here against one libstdc++ and run
// against another (torch's process) crashed in the Python extension.
std::string describe(const TensorRef& t) {
  if (!t.present()) return "absent";
  std::string s = "(";
  for (int i = 0; i < t.ndim; ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + (t.ndim == 1 ? ",) " : ") ") + dtype_name(t.dtype);
}

#define QUACK_STR2(x) #x
#define QUACK_STR(x) QUACK_STR2(x)
const char* version() {
  return QUACK_STR(QUACK_VERSION_MAJOR) "." QUACK_STR(QUACK_VERSION_MINOR) "." QUACK_STR(
      QUACK_VERSION_PATCH);
}

}  // namespace quack

namespace quack::detail {

void ArgCheck::fail(const std::string& msg) const { throw InvalidArgument(std::string(fn_) + ": " + msg); }

std::string describe_full(const TensorRef& t) {
  std::string s = describe(t);
  if (!t.present()) return s;
  s += " strides (";
  for (int i = 0; i < t.ndim; ++i) s += (i ? ", " : "") + std::to_string(t.stride[i]);
  return s + ") on " + (t.device < 0 ? std::string("cpu") : "cuda:" + std::to_string(t.device));
}

void ArgCheck::required(const TensorRef& t, const char* name) const {
  if (!t.present()) fail(std::string(name) + " is absent, expected a tensor");
  if (t.device < 0) fail(std::string(name) + " is in host memory, expected a CUDA tensor");
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] < 0)
      fail(std::string(name) + " has a negative size: shape " + describe(t) +
           ", expected sizes ≥ 0");
  if (t.numel() > 0 && t.data == nullptr)
    fail(std::string(name) + " has a null data pointer with " + std::to_string(t.numel()) +
         " elements");
}

void ArgCheck::matrix(const TensorRef& t, const char* name, int64_t rows, int64_t cols) const {
  required(t, name);
  if (t.ndim != 2)
    fail(std::string(name) + " has " + std::to_string(t.ndim) + " dimensions " + describe(t) +
         ", expected 2 (M, N)");
  if ((rows >= 0 && t.shape[0] != rows) || (cols >= 0 && t.shape[1] != cols))
    fail(std::string(name) + " has shape " + describe(t) + ", expected (" +
         (rows >= 0 ? std::to_string(rows) : std::string("M")) + ", " +
         (cols >= 0 ? std::to_string(cols) : std::string("N")) + ")");
  no_negative_strides(t, name);
}

void ArgCheck::vector(const TensorRef& t, const char* name, int64_t n) const {
  required(t, name);
  if (t.ndim != 1 || t.shape[0] != n)
    fail(std::string(name) + " has shape " + describe(t) + ", expected (" + std::to_string(n) +
         ",)");
  no_negative_strides(t, name);
}

void ArgCheck::dtype_in(const TensorRef& t, const char* name,
                        std::initializer_list<DType> ok) const {
  if (std::find(ok.begin(), ok.end(), t.dtype) != ok.end()) return;
  std::string exp;
  for (DType d : ok) exp += (exp.empty() ? "" : " or ") + std::string(dtype_name(d));
  fail(std::string(name) + " has dtype " + dtype_name(t.dtype) + ", expected " + exp);
}

void ArgCheck::float_dtype(const TensorRef& t, const char* name) const {
  dtype_in(t, name, {DType::kFloat32, DType::kFloat16, DType::kBFloat16});
}

void ArgCheck::same_device(const TensorRef& t, const char* name, int device) const {
  if (t.device != device)
    fail(std::string(name) + " is on cuda:" + std::to_string(t.device) + ", expected cuda:" +
         std::to_string(device) + " (the device of x)");
}

void ArgCheck::no_negative_strides(const TensorRef& t, const char* name) const {
  for (int i = 0; i < t.ndim; ++i)
    if (t.stride[i] < 0)
      fail(std::string(name) + " has a negative stride: " + describe_full(t) +
           ", expected strides ≥ 0");
}

void ArgCheck::non_overlapping(const TensorRef& t, const char* name) const {
  if (t.numel() <= 1) return;
  // Sort dimensions of extent > 1 by stride; each stride must pass the span of the previous.
  std::pair<int64_t, int64_t> dims[TensorRef::kMaxDims];  // (stride, extent)
  int n = 0;
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] > 1) dims[n++] = {t.stride[i], t.shape[i]};
  for (int i = 1; i < n; ++i)  // insertion sort of ≤ 4 entries
    for (int j = i; j > 0 && dims[j] < dims[j - 1]; --j) std::swap(dims[j], dims[j - 1]);
  int64_t span = 1;
  for (int i = 0; i < n; ++i) {
    if (dims[i].first < span)
      fail(std::string("output ") + name + " has overlapping elements: " + describe_full(t) +
           ", expected a layout where each element has its own address");
    span = dims[i].first * dims[i].second;
  }
}

RowIO row_io(const TensorRef& t) {
  RowIO io;
  if (!t.present()) return io;
  io.ptr = t.data;
  io.dtype = t.dtype;
  if (t.ndim == 1) {
    io.row_stride = 0;
    io.col_stride = t.stride[0];
  } else {
    io.row_stride = t.stride[0];
    io.col_stride = t.stride[1];
  }
  return io;
}

bool vector_ok(const TensorRef& t, int k) {
  if (!t.present()) return true;
  const int64_t n = t.ndim == 1 ? t.shape[0] : t.shape[1];
  const int64_t col_stride = t.ndim == 1 ? t.stride[0] : t.stride[1];
  if (n % k != 0) return false;
  if (col_stride != 1 && n > 1) return false;
  const int64_t align = std::min<int64_t>(16, static_cast<int64_t>(k) * dtype_size(t.dtype));
  if (reinterpret_cast<uintptr_t>(t.data) % align != 0) return false;
  if (t.ndim == 2 && t.shape[0] > 1 && t.stride[0] % k != 0) return false;
  return true;
}

bool staged_ok(const TensorRef& t, int64_t slice_elems) {
  if (!t.present()) return true;
  const int64_t es = dtype_size(t.dtype);
  const int64_t n = t.shape[t.ndim - 1], col_stride = t.stride[t.ndim - 1];
  if (t.ndim > 2 || (col_stride != 1 && n > 1)) return false;
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0) return false;
  if (t.ndim == 2 && t.shape[0] > 1 && (t.stride[0] * es) % 16 != 0) return false;
  return (n * es) % 16 == 0 && (slice_elems * es) % 16 == 0;
}

}  // namespace quack::detail
