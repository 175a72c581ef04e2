// Argument checks at the public API boundary (host only). Each throws InvalidArgument with
// "<function>: <argument> <what came>, expected <what was expected>".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "common/row_io.h"
#include "quack/errors.h"
#include "quack/tensor.h"

namespace quack::detail {

class ArgCheck {
 public:
  /// device_ref: the argument whose device the others must share, named in same_device's
  /// message ("x"; softmax_bwd's "y", linear_cross_entropy_scale_grad's "grad_output", ...).
  explicit ArgCheck(const char* fn, const char* device_ref = "x")
      : fn_(fn), device_ref_(device_ref) {}

  /// Names another reference argument, where it is known only after the first checks (e.g.
  /// cross_entropy_fwd: x, or target when x is absent).
  void set_device_ref(const char* name) { device_ref_ = name; }

  [[noreturn]] void fail(const std::string& msg) const;

  /// Present, on a CUDA device, ndim and shape as given (-1 = any extent); a negative size
  /// in the tensor itself is rejected (required).
  void matrix(const TensorRef& t, const char* name, int64_t rows, int64_t cols) const;
  void vector(const TensorRef& t, const char* name, int64_t n) const;
  /// Present, ndim ≤ TensorRef::kMaxDims (checked before any shape is read), in device
  /// memory, no negative size; unless empty: elements spanning at most 2^62 bytes (the element
  /// count and the farthest element's offset, so that int64 sizes and offsets do not wrap),
  /// data non-null and aligned to the element size.
  void required(const TensorRef& t, const char* name) const;
  void dtype_in(const TensorRef& t, const char* name, std::initializer_list<DType> ok) const;
  void float_dtype(const TensorRef& t, const char* name) const;
  void same_device(const TensorRef& t, const char* name, int device) const;
  /// Output layout: no negative strides and no two elements at one address.
  void non_overlapping(const TensorRef& t, const char* name) const;
  void no_negative_strides(const TensorRef& t, const char* name) const;
  /// a and b share no byte (may_overlap below), e.g. an output and an input, or two outputs:
  /// "<a> overlaps <b> in memory: <a's layout> and <b's>, expected separate memory".
  void disjoint(const TensorRef& a, const char* a_name, const TensorRef& b,
                const char* b_name) const;
  /// An output that may be written in place of an input: out is either the input itself (the
  /// same data pointer, dtype, shape and strides) or disjoint from it (no shared byte). A
  /// partial overlap, or the same memory read through another dtype or layout, fails:
  /// "<out> overlaps <in> in memory: <layouts>, expected <in> itself (in place: the same
  /// address, dtype, shape and strides) or separate memory".
  void same_or_disjoint(const TensorRef& out, const char* out_name, const TensorRef& in,
                        const char* in_name) const;
  /// An argument and its name; a null or absent tensor is skipped.
  struct Named {
    const TensorRef* t;
    const char* name;
  };
  /// Every two outputs are disjoint, and every output with every input, except that an
  /// (output, input) pair of `in_place` may be that input itself (same_or_disjoint).
  void outputs_apart(std::initializer_list<Named> outs, std::initializer_list<Named> ins,
                     std::initializer_list<std::pair<const TensorRef*, const TensorRef*>> in_place = {}) const;

 private:
  const char* fn_;
  const char* device_ref_;
};

/// True when a and b are the same tensor view: both present, the same data pointer, dtype,
/// ndim, shape and strides (an in-place output).
bool same_view(const TensorRef& a, const TensorRef& b);

/// A float option for a message: the shortest %g form that reads back as the same float
/// ("0.1", "1.0000001", "inf", "nan"), where std::to_string prints 6 decimals ("1.000000").
std::string format_float(float v);

/// (M, N) view of a 2-D tensor; an (N) view (row_stride 0) of a 1-D one; absent -> null.
RowIO row_io(const TensorRef& t);

/// True when the 2-D tensor can be read in aligned runs of k elements along its rows:
/// column stride 1 (or N == 1), base and row stride aligned to min(16, k·elt) bytes.
bool vector_ok(const TensorRef& t, int k);

/// True when the bulk-copy engine can stage rows of the 2-D tensor (or the 1-D vector) in
/// slices that start every `slice_elems` elements: column stride 1, 16-byte aligned base, row
/// stride, N and slice offsets multiples of 16 bytes. Absent tensors pass.
bool staged_ok(const TensorRef& t, int64_t slice_elems);

/// "(4096, 512) bfloat16 strides (512, 1) on cuda:0"
std::string describe_full(const TensorRef& t);

/// Whether a and b may share a byte. False when either is absent or empty, or their byte ranges
/// [first, last + 1) are disjoint. Ranges that interleave (views of one buffer: q, k and v of a
/// packed qkv) are decided exactly when a and b have one dtype, non-negative strides, equal
/// strides in every dimension of extent > 1 in both, and those strides nest (sorted, each at
/// least the largest offset the smaller ones reach, plus one element); otherwise true
/// (conservative).
bool may_overlap(const TensorRef& a, const TensorRef& b);

}  // namespace quack::detail
