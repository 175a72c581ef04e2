#include "common/check.h"
#include "quack/version.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace quack {

// No iostreams in the library: an ostream instantiated here against one libstdc++ and run
// against another (torch's process) crashed in the Python extension.
std::string describe(const TensorRef& t) {
  if (!t.present()) return "absent";
  // At most kMaxDims extents: a larger ndim (rejected by ArgCheck::required) is named, not read.
  const int n = std::min(t.ndim, TensorRef::kMaxDims);
  std::string s = "(";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  if (n < t.ndim) s += ", ... ndim " + std::to_string(t.ndim);
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
  for (int i = 0; i < std::min(t.ndim, TensorRef::kMaxDims); ++i)
    s += (i ? ", " : "") + std::to_string(t.stride[i]);
  return s + ") on " + (t.device < 0 ? std::string("cpu") : "cuda:" + std::to_string(t.device));
}

void ArgCheck::required(const TensorRef& t, const char* name) const {
  if (!t.present()) fail(std::string(name) + " is absent, expected a tensor");
  // Before anything reads shape[ndim - 1] (describe, numel): the arrays hold kMaxDims.
  if (t.ndim > TensorRef::kMaxDims)
    fail(std::string(name) + " has ndim " + std::to_string(t.ndim) + ", expected 1 to " +
         std::to_string(TensorRef::kMaxDims) + " dimensions");
  if (t.device < 0) fail(std::string(name) + " is in host memory, expected a CUDA tensor");
  bool empty = false;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0)
      fail(std::string(name) + " has a negative size: shape " + describe(t) +
           ", expected sizes ≥ 0");
    empty = empty || t.shape[i] == 0;
  }
  if (empty) return;  // nothing is addressed: any pointer, strides and size
  // The element count and the farthest element's byte offset, exactly (128-bit), so that
  // numel() and every offset computed from the view fit in int64 (no wrap to a small or
  // negative size).
  const __int128 es = dtype_size(t.dtype) > 0 ? dtype_size(t.dtype) : 1;
  const __int128 limit = (__int128{1} << 62) / es;  // elements in 2^62 bytes (GCC / Clang's __int128)
  __int128 count = 1, reach = 0;
  for (int i = 0; i < t.ndim; ++i) {
    // Both stay ≤ 2^62 before each step, and a step adds a factor or a term < 2^126.
    count *= t.shape[i];
    const __int128 st = t.stride[i] < 0 ? -__int128{t.stride[i]} : __int128{t.stride[i]};
    reach += (__int128{t.shape[i]} - 1) * st;
    if (count > limit || reach >= limit)
      fail(std::string(name) + " is " + describe_full(t) +
           ": its element count or extent exceeds 2^62 bytes, expected a tensor that fits in memory");
  }
  if (t.data == nullptr)
    fail(std::string(name) + " has a null data pointer with " + std::to_string(t.numel()) +
         " elements");
  if (reinterpret_cast<uintptr_t>(t.data) % static_cast<uintptr_t>(es) != 0)
    fail(std::string(name) + " has a base address that is not " + std::to_string(int(es)) +
         "-byte aligned (" + describe_full(t) + "), expected the alignment of its elements");
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
         std::to_string(device) + " (the device of " + device_ref_ + ")");
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

void ArgCheck::disjoint(const TensorRef& a, const char* a_name, const TensorRef& b,
                        const char* b_name) const {
  if (may_overlap(a, b))
    fail(std::string(a_name) + " overlaps " + b_name + " in memory: " + describe_full(a) +
         " and " + describe_full(b) + ", expected separate memory");
}

void ArgCheck::outputs_apart(std::initializer_list<Named> outs, std::initializer_list<Named> ins,
                             std::initializer_list<std::pair<const TensorRef*, const TensorRef*>> in_place) const {
  static const TensorRef kAbsent;
  auto ref = [](const Named& n) -> const TensorRef& { return n.t ? *n.t : kAbsent; };
  for (auto o = outs.begin(); o != outs.end(); ++o) {
    for (const Named& i : ins) {
      bool in_place_pair = false;
      for (const auto& pr : in_place) in_place_pair |= pr.first == o->t && pr.second == i.t;
      if (in_place_pair)
        same_or_disjoint(ref(*o), o->name, ref(i), i.name);
      else
        disjoint(ref(*o), o->name, ref(i), i.name);
    }
    for (auto p = o + 1; p != outs.end(); ++p) disjoint(ref(*o), o->name, ref(*p), p->name);
  }
}

void ArgCheck::same_or_disjoint(const TensorRef& out, const char* out_name, const TensorRef& in,
                                const char* in_name) const {
  if (same_view(out, in) || !may_overlap(out, in)) return;
  fail(std::string(out_name) + " overlaps " + in_name + " in memory: " + describe_full(out) +
       " and " + describe_full(in) + ", expected " + in_name +
       " itself (in place: the same address, dtype, shape and strides) or separate memory");
}

bool same_view(const TensorRef& a, const TensorRef& b) {
  if (!a.present() || !b.present() || a.data != b.data || a.dtype != b.dtype ||
      a.ndim != b.ndim)
    return false;
  for (int i = 0; i < a.ndim; ++i)
    if (a.shape[i] != b.shape[i] || (a.shape[i] > 1 && a.stride[i] != b.stride[i]))
      return false;  // a stride of an extent-1 dimension addresses nothing: not compared
  return true;
}

std::string format_float(float v) {
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {  // 9 significant digits round-trip any float
    std::snprintf(buf, sizeof(buf), "%.*g", digits, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v || v != v) break;
  }
  return buf;
}

namespace {

/// [first byte, last byte + 1) of a present, non-empty tensor.
bool byte_span(const TensorRef& t, intptr_t& lo, intptr_t& hi) {
  if (!t.present() || t.numel() == 0) return false;
  int64_t first = 0, last = 0;
  for (int i = 0; i < t.ndim; ++i) {
    const int64_t reach = (t.shape[i] - 1) * t.stride[i];
    (reach < 0 ? first : last) += reach;
  }
  const int64_t es = dtype_size(t.dtype);
  lo = reinterpret_cast<intptr_t>(t.data) + first * es;
  hi = reinterpret_cast<intptr_t>(t.data) + (last + 1) * es;
  return true;
}

struct OverlapDim {
  int64_t stride;    // bytes, > 0
  int64_t lo, hi;    // c = i − j ranges over [lo, hi]: i an index of a, j one of b
};

/// Whether some c_k in [lo_k, hi_k] for dims[k..n) brings a's element within `elem` bytes of
/// b's: |Σ c_k·stride_k − delta| < elem, delta = b's base − a's base. dims sorted by stride,
/// largest first, and nested: stride_k exceeds every |Σ c_j·stride_j| of the later dims by at
/// least elem, so |delta − c_k·stride_k| < stride_k leaves c_k two candidates (floor, + 1).
bool reaches(const OverlapDim* dims, int n, int64_t delta, int64_t elem) {
  if (n == 0) return delta > -elem && delta < elem;
  const int64_t s = dims[0].stride;
  const int64_t q = delta >= 0 ? delta / s : -((-delta + s - 1) / s);  // floor(delta / s)
  for (int64_t c = q; c <= q + 1; ++c) {
    if (c < dims[0].lo || c > dims[0].hi) continue;
    const int64_t rest = delta - c * s;
    if (rest > -s && rest < s && reaches(dims + 1, n - 1, rest, elem)) return true;
  }
  return false;
}

}  // namespace

bool may_overlap(const TensorRef& a, const TensorRef& b) {
  intptr_t alo, ahi, blo, bhi;
  if (!byte_span(a, alo, ahi) || !byte_span(b, blo, bhi)) return false;
  if (ahi <= blo || bhi <= alo) return false;
  // Interleaved ranges: a's elements sit at a + Σ i_k·S_k, b's at b + Σ j_k·S_k (one S).
  if (a.dtype != b.dtype || a.ndim != b.ndim) return true;
  const int64_t es = dtype_size(a.dtype);
  OverlapDim dims[TensorRef::kMaxDims];
  int n = 0;
  for (int i = 0; i < a.ndim; ++i) {
    if (a.shape[i] <= 1 && b.shape[i] <= 1) continue;  // c = 0: the stride does not matter
    if (a.shape[i] > 1 && b.shape[i] > 1 && a.stride[i] != b.stride[i]) return true;
    const int64_t st = a.shape[i] > 1 ? a.stride[i] : b.stride[i];
    if (st <= 0) return true;
    dims[n++] = {st * es, -(b.shape[i] - 1), a.shape[i] - 1};
  }
  // Largest stride first (insertion sort: n ≤ kMaxDims; std::sort here drew GCC 12's
  // -Warray-bounds on its unrolled insertion pass).
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && dims[j - 1].stride < dims[j].stride; --j) std::swap(dims[j - 1], dims[j]);
  int64_t inner = es;  // the largest |Σ c_j·S_j| of the smaller strides, plus one element
  for (int k = n - 1; k >= 0; --k) {
    if (dims[k].stride < inner) return true;  // not nested: no exact answer here
    inner += std::max(-dims[k].lo, dims[k].hi) * dims[k].stride;
  }
  const int64_t delta = reinterpret_cast<intptr_t>(b.data) - reinterpret_cast<intptr_t>(a.data);
  return reaches(dims, n, delta, es);
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
