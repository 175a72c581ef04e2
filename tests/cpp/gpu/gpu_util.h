// Helpers of the GPU tests: skip without a (Hopper) device, an RAII device buffer, upload /
// download of (rows, cols) tensors of any float dtype and layout, NaN poison, comparison with
// the float64 reference.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "quack/tensor.h"
#include "reference/half_host.h"
#include "reference/tolerance.h"
#include "scoped_env.h"

namespace quack::test {

#define QUACK_CUDA_OK(call)                                                              \
  do {                                                                                   \
    const cudaError_t err_ = (call);                                                     \
    ASSERT_EQ(err_, cudaSuccess) << #call << ": " << cudaGetErrorString(err_);           \
  } while (0)

/// "" when a device of compute capability 9.x is usable; else why not (the tests skip).
inline const std::string& gpu_skip_reason() {
  static const std::string reason = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();
      // cudart says "driver version is insufficient" when there is no driver at all.
      if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || e == cudaErrorStubLibrary)
        return std::string("no CUDA driver/GPU (") + cudaGetErrorName(e) + ")";
      return std::string("no CUDA device: ") + cudaGetErrorString(e);
    }
    if (n == 0) return std::string("no CUDA driver/GPU (no device)");
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return std::string("no device properties");
    if (p.major != 9) return std::string("the library is built for sm_90a; device 0 is sm_") +
                             std::to_string(p.major * 10 + p.minor);
    return std::string();
  }();
  return reason;
}

/// Base fixture: skips every test when there is no usable GPU; checks the context is clean
/// after each test (no sticky error left by a launch).
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_skip_reason().empty()) GTEST_SKIP() << gpu_skip_reason();
  }
  void TearDown() override {
    if (!gpu_skip_reason().empty()) return;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const cudaError_t e = cudaGetLastError();
    EXPECT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
  }
};

/// Owned device memory (cudaMalloc: 256-byte aligned). Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0 && cudaMalloc(&ptr_, bytes) != cudaSuccess) {
      cudaGetLastError();
      ptr_ = nullptr;
      ADD_FAILURE() << "cudaMalloc(" << bytes << ") failed";
    }
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr_) cudaFree(ptr_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = o.bytes_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  /// Fills with 0xFF bytes: NaN in fp32, fp16 and bf16 alike.
  void poison() const {
    if (ptr_) {
      EXPECT_EQ(cudaMemset(ptr_, 0xFF, bytes_), cudaSuccess);
    }
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// A (rows, cols) layout in elements. row_stride < 0 means cols (contiguous rows). `offset`
/// elements are skipped at the start of the buffer (a misaligned or sliced base).
struct Layout {
  int64_t row_stride = -1;
  int64_t col_stride = 1;
  int64_t offset = 0;
};

/// A device tensor: its buffer and the TensorRef view of it.
struct DeviceTensor {
  DeviceBuffer buf;
  TensorRef ref;
  int64_t rows = 0, cols = 0;
  bool vector = false;  // a 1-D tensor of `cols` elements
  void poison() const { buf.poison(); }
};

/// Elements spanned by the layout (largest offset + 1), 0 when empty.
inline int64_t span_elems(int64_t rows, int64_t cols, const Layout& l) {
  if (rows == 0 || cols == 0) return l.offset;
  const int64_t rs = l.row_stride < 0 ? cols : l.row_stride;
  return l.offset + (rows - 1) * rs + (cols - 1) * l.col_stride + 1;
}

/// Allocates a (rows, cols) tensor of dtype t with layout l, all bytes poisoned (NaN).
/// vector = true makes a 1-D tensor of `cols` elements (rows must be 1; stride = col_stride).
inline DeviceTensor alloc_tensor(DType t, int64_t rows, int64_t cols, Layout l = {},
                                 bool vector = false) {
  DeviceTensor d;
  d.rows = rows;
  d.cols = cols;
  d.vector = vector;
  const int64_t span = span_elems(rows, cols, l);
  d.buf = DeviceBuffer(static_cast<size_t>(span > 0 ? span : 1) * dtype_size(t));
  d.buf.poison();
  char* base = static_cast<char*>(d.buf.get()) + l.offset * dtype_size(t);
  if (vector)
    d.ref = TensorRef::vector(base, t, cols, 0, l.col_stride);
  else
    d.ref = TensorRef::matrix(base, t, rows, cols, 0, l.row_stride < 0 ? cols : l.row_stride,
                              l.col_stride);
  return d;
}

/// Writes the dense row-major host values (rows·cols, already representable in t) into the
/// tensor's layout; every byte of the buffer outside the tensor stays NaN. With a stride of 0
/// several elements share an address: the values must agree there (the test's job).
inline void upload_into(const DeviceTensor& d, const std::vector<double>& host) {
  const TensorRef& r = d.ref;
  const int es = dtype_size(r.dtype);
  const size_t bytes = d.buf.bytes();
  std::vector<unsigned char> img(bytes, 0xFF);
  const int64_t base = (static_cast<char*>(r.data) - static_cast<char*>(d.buf.get())) / es;
  const int64_t rs = d.vector ? 0 : r.stride[0], cs = d.vector ? r.stride[0] : r.stride[1];
  for (int64_t i = 0; i < d.rows; ++i)
    for (int64_t j = 0; j < d.cols; ++j) {
      const int64_t e = base + i * rs + j * cs;
      store_as(r.dtype, static_cast<float>(host[static_cast<size_t>(i * d.cols + j)]),
               img.data() + e * es);
    }
  EXPECT_EQ(cudaMemcpy(d.buf.get(), img.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
}

/// alloc_tensor + upload_into.
inline DeviceTensor upload(const std::vector<double>& host, DType t, int64_t rows, int64_t cols,
                           Layout l = {}) {
  DeviceTensor d = alloc_tensor(t, rows, cols, l);
  upload_into(d, host);
  return d;
}

/// A 1-D tensor of n elements with stride `stride`.
inline DeviceTensor upload_vector(const std::vector<double>& host, DType t, int64_t n,
                                  int64_t stride = 1) {
  Layout l;
  l.col_stride = stride;
  DeviceTensor d = alloc_tensor(t, 1, n, l, /*vector=*/true);
  upload_into(d, host);
  return d;
}

/// The raw bytes of the buffer (for bitwise comparisons).
inline std::vector<unsigned char> download_bytes(const DeviceTensor& d) {
  std::vector<unsigned char> img(d.buf.bytes());
  EXPECT_EQ(cudaMemcpy(img.data(), d.buf.get(), img.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return img;
}

/// A copy of a tensor's whole buffer on the host, with its element (i, j) located by its
/// strides (a vector's elements along j).
struct HostImage {
  std::vector<unsigned char> img;
  int es = 0;
  int64_t base = 0, rs = 0, cs = 0;  // in elements
  explicit HostImage(const DeviceTensor& d) : img(download_bytes(d)), es(dtype_size(d.ref.dtype)) {
    base = (static_cast<char*>(d.ref.data) - static_cast<char*>(d.buf.get())) / es;
    rs = d.vector ? 0 : d.ref.stride[0];
    cs = d.vector ? d.ref.stride[0] : d.ref.stride[1];
  }
  const unsigned char* at(int64_t i, int64_t j) const { return img.data() + (base + i * rs + j * cs) * es; }
};

/// The tensor's logical elements, dense row-major, as doubles (exact).
inline std::vector<double> download(const DeviceTensor& d) {
  const HostImage h(d);
  std::vector<double> out(static_cast<size_t>(d.rows * d.cols));
  for (int64_t i = 0; i < d.rows; ++i)
    for (int64_t j = 0; j < d.cols; ++j) out[static_cast<size_t>(i * d.cols + j)] = load_as(d.ref.dtype, h.at(i, j));
  return out;
}


/// Whether the element of dtype t at p is finite (inf and NaN have every exponent bit set).
inline bool finite_bits(DType t, const unsigned char* p) {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      const uint16_t e = t == DType::kFloat16 ? 0x7c00u : 0x7f80u;
      return (h & e) != e;
    }
    case DType::kFloat32: {
      uint32_t u;
      std::memcpy(&u, p, 4);
      return (u & 0x7f800000u) != 0x7f800000u;
    }
    default: return true;
  }
}

/// The rows of an (M, N) output that a case checking a sample compares with the float64
/// reference (its other rows are checked finite: written, no NaN poison left): every row up to
/// `budget` elements; beyond, every s-th row (at most about `budget` elements) and the first two
/// and last two rows (partial row blocks, the grid's last CTAs). s is a prime other than 2, 3
/// and 11, the factors of persistent grids on 132 SMs and of power-of-2 rows per CTA: the rows
/// compared fall on every resident CTA or cluster and every row slot of a CTA, not on one
/// residue class of them.
inline std::vector<int64_t> sample_rows(int64_t M, int64_t N, int64_t budget = int64_t{1} << 22) {
  int64_t s = std::max<int64_t>(1, (M * N + budget - 1) / std::max<int64_t>(budget, 1));
  if (s > 1) {
    auto prime = [](int64_t p) {
      for (int64_t d = 2; d * d <= p; ++d)
        if (p % d == 0) return false;
      return true;
    };
    s = std::max<int64_t>(s, 5);
    while (!prime(s) || s == 11) ++s;
  }
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < M; ++i)
    if (s == 1 || i % s == 0 || i < 2 || i >= M - 2) rows.push_back(i);
  return rows;
}

/// download() of the rows `rows` only (dense, cols each, in that order), from one copy of the
/// buffer; *nonfinite receives the count of non-finite elements over the whole tensor (every
/// row: an unwritten element keeps its NaN poison), counted on the raw bits.
inline std::vector<double> download_rows(const DeviceTensor& d, const std::vector<int64_t>& rows,
                                         int64_t* nonfinite) {
  const HostImage h(d);
  int64_t bad = 0;
  for (int64_t i = 0; i < d.rows; ++i)
    for (int64_t j = 0; j < d.cols; ++j) bad += finite_bits(d.ref.dtype, h.at(i, j)) ? 0 : 1;
  *nonfinite = bad;
  std::vector<double> out;
  out.reserve(rows.size() * static_cast<size_t>(d.cols));
  for (int64_t i : rows)
    for (int64_t j = 0; j < d.cols; ++j) out.push_back(load_as(d.ref.dtype, h.at(i, j)));
  return out;
}

/// The bytes of the buffer outside the tensor's elements (row padding, skipped base, column
/// gaps) still hold the 0xFF poison: nothing was written out of the tensor's bounds.
inline ::testing::AssertionResult gaps_untouched(const std::string& what, const DeviceTensor& d) {
  const TensorRef& r = d.ref;
  const int es = dtype_size(r.dtype);
  // A dense tensor that fills its buffer (no offset, contiguous rows and columns) leaves no
  // byte outside its elements: nothing to check (the scan below would find none), and a large
  // output's copy and scan (~10 ns an element) are saved.
  {
    const int64_t rs = d.vector ? d.cols : r.stride[0], cs = d.vector ? r.stride[0] : r.stride[1];
    const bool dense = r.data == d.buf.get() && (d.cols <= 1 || cs == 1) &&
                       (d.vector || d.rows <= 1 || rs == d.cols);
    if (dense && d.rows > 0 && d.cols > 0 &&
        d.buf.bytes() == static_cast<size_t>(d.rows * d.cols * es))
      return ::testing::AssertionSuccess();
  }
  const auto img = download_bytes(d);
  std::vector<char> mine(img.size(), 0);
  const int64_t base = (static_cast<char*>(r.data) - static_cast<char*>(d.buf.get())) / es;
  const int64_t rs = d.vector ? 0 : r.stride[0], cs = d.vector ? r.stride[0] : r.stride[1];
  for (int64_t i = 0; i < d.rows; ++i)
    for (int64_t j = 0; j < d.cols; ++j)
      std::memset(mine.data() + (base + i * rs + j * cs) * es, 1, es);
  // Report how many elements outside the tensor were written and where the first few lie,
  // as (row, column) of the row-stride grid, which is what locates a store-clipping bug.
  int64_t count = 0;
  std::string where;
  for (size_t k = 0; k < img.size(); ++k) {
    if (mine[k] || img[k] == 0xFF) continue;
    const int64_t e = static_cast<int64_t>(k) / es - base;
    if (count < 6) {
      where += " byte " + std::to_string(k);
      if (rs > 0) where += "=(" + std::to_string(e / rs) + "," + std::to_string(e % rs) + ")";
    }
    ++count;
    k += es - 1 - k % es;  // one count per element
  }
  if (count == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << count << " elements outside the tensor were written:"
                                       << where;
}

/// gtest assertion: got within the tolerance of the dtype (or the given rel) of ref.
inline ::testing::AssertionResult close(const std::string& what, const std::vector<double>& got,
                                        const std::vector<double>& ref, double rel,
                                        int64_t cols = 0, double floor = 0.0) {
  const CompareResult r = compare(what, got, ref, rel, cols, floor);
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.message;
}

inline const char* short_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "f32";
    case DType::kFloat16: return "f16";
    case DType::kBFloat16: return "bf16";
    default: return "int";
  }
}

}  // namespace quack::test
