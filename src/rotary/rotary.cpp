// Rotary embedding public API (quack/rotary.h): validation at the boundary, the vector-path
// choice, then the launch (host only).
#include <cstdint>
#include <string>

#include "common/check.h"
#include "common/launch.h"
#include "quack/rotary.h"
#include "rotary/rotary_internal.h"

namespace quack {

namespace {

constexpr const char* kFn = "apply_rotary";

bool same_view(const TensorRef& a, const TensorRef& b) {
  if (a.data != b.data || a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i)
    if (a.shape[i] != b.shape[i] || (a.shape[i] > 1 && a.stride[i] != b.stride[i])) return false;
  return true;
}

// A (B, S, heads, D) tensor of q's dtype on q's device with unit D stride.
void check_bshd(const detail::ArgCheck& chk, const TensorRef& t, const char* name,
                const TensorRef& q) {
  chk.required(t, name);
  if (t.ndim != 4)
    chk.fail(std::string(name) + " has " + std::to_string(t.ndim) + " dimensions " +
             describe(t) + ", expected 4 (B, S, heads, D)");
  chk.no_negative_strides(t, name);
  if (&t != &q) {
    if (t.dtype != q.dtype)
      chk.fail(std::string(name) + " has dtype " + dtype_name(t.dtype) + ", expected " +
               dtype_name(q.dtype) + " (q's dtype)");
    if (t.device != q.device)
      chk.fail(std::string(name) + " is on cuda:" + std::to_string(t.device) +
               ", expected cuda:" + std::to_string(q.device) + " (the device of q)");
    if (t.shape[0] != q.shape[0] || t.shape[1] != q.shape[1] || t.shape[3] != q.shape[3])
      chk.fail(std::string(name) + " has shape " + describe(t) + ", expected (" +
               std::to_string(q.shape[0]) + ", " + std::to_string(q.shape[1]) + ", heads, " +
               std::to_string(q.shape[3]) + ") (q's B, S and D)");
  }
  // An empty tensor's strides are not used (autograd's gradient of an empty sum has all 0).
  if (t.numel() > 0 && t.shape[3] > 1 && t.stride[3] != 1)
    chk.fail(std::string(name) + " has D stride " + std::to_string(t.stride[3]) + ": " +
             detail::describe_full(t) + ", expected 1 (the head dimension contiguous)");
  if (t.shape[2] * t.shape[3] > INT32_MAX)
    chk.fail(std::string(name) + " has " + std::to_string(t.shape[2] * t.shape[3]) +
             " elements per token " + describe(t) + ", expected at most 2^31 - 1");
}

// An input and its output: both or neither; the output the input's shape, non-overlapping,
// and either the input itself or at another address.
void check_pair(const detail::ArgCheck& chk, const TensorRef& in, const char* in_name,
                const TensorRef& out, const char* out_name, const TensorRef& q) {
  if (in.present() != out.present())
    chk.fail(std::string(in.present() ? out_name : in_name) + " is absent but " +
             (in.present() ? in_name : out_name) + " is given, expected both or neither");
  if (!in.present()) return;
  check_bshd(chk, in, in_name, q);
  check_bshd(chk, out, out_name, q);
  if (out.shape[2] != in.shape[2])
    chk.fail(std::string(out_name) + " has shape " + describe(out) + ", expected " +
             describe(in) + " (" + in_name + "'s shape)");
  chk.non_overlapping(out, out_name);
  if (out.data == in.data && in.numel() > 0 && !same_view(in, out))
    chk.fail(std::string(out_name) + " starts at " + in_name + "'s address with other strides (" +
             detail::describe_full(out) + " vs " + detail::describe_full(in) +
             "), expected " + in_name + " itself (in place) or a separate tensor");
}

bool aligned16(const TensorRef& t, int vec) {
  if (!t.present()) return true;
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0) return false;
  for (int i = 0; i < 3; ++i)
    if (t.shape[i] > 1 && t.stride[i] % vec != 0) return false;
  return true;
}

bool vector_path(const RotaryArgs& a, int half, int D) {
  const int vec = 16 / dtype_size(a.q.dtype);
  if (D % vec != 0 || half % vec != 0) return false;
  for (const TensorRef* t : {&a.q, &a.q_out, &a.k, &a.k_out, &a.v, &a.v_out})
    if (!aligned16(*t, vec)) return false;
  for (const TensorRef* t : {&a.cos, &a.sin}) {
    if (reinterpret_cast<uintptr_t>(t->data) % 16 != 0) return false;
    if (t->shape[1] > 1 && t->stride[1] != 1) return false;
    if (t->shape[0] > 1 && t->stride[0] % 4 != 0) return false;
  }
  return true;
}

detail::RotaryTensor tensor_params(const TensorRef& in, const TensorRef& out) {
  detail::RotaryTensor t;
  if (!in.present()) return t;
  t.in = in.data;
  t.out = out.data;
  t.heads = static_cast<int>(in.shape[2]);
  t.write = !same_view(in, out);
  t.in_b = in.stride[0], t.in_s = in.stride[1], t.in_h = in.stride[2];
  t.out_b = out.stride[0], t.out_s = out.stride[1], t.out_h = out.stride[2];
  return t;
}

}  // namespace

bool detail::rotary_vector_path(const RotaryArgs& a) {
  return vector_path(a, static_cast<int>(a.cos.shape[1]), static_cast<int>(a.q.shape[3]));
}

void apply_rotary(const RotaryArgs& a, cudaStream_t stream) {
  const detail::ArgCheck chk(kFn);
  chk.required(a.q, "q");
  if (a.q.ndim != 4)
    chk.fail("q has " + std::to_string(a.q.ndim) + " dimensions " + describe(a.q) +
             ", expected 4 (B, S, H, D)");
  chk.float_dtype(a.q, "q");
  check_pair(chk, a.q, "q", a.q_out, "q_out", a.q);
  check_pair(chk, a.k, "k", a.k_out, "k_out", a.q);
  check_pair(chk, a.v, "v", a.v_out, "v_out", a.q);
  for (const auto& [t, name] : {std::pair{&a.cos, "cos"}, std::pair{&a.sin, "sin"}}) {
    chk.matrix(*t, name, -1, -1);
    chk.dtype_in(*t, name, {DType::kFloat32});
    if (t->device != a.q.device)
      chk.fail(std::string(name) + " is on cuda:" + std::to_string(t->device) +
               ", expected cuda:" + std::to_string(a.q.device) + " (the device of q)");
  }
  if (a.sin.shape[0] != a.cos.shape[0] || a.sin.shape[1] != a.cos.shape[1])
    chk.fail("sin has shape " + describe(a.sin) + ", expected " + describe(a.cos) +
             " (cos's shape)");
  const int64_t B = a.q.shape[0], S = a.q.shape[1], D = a.q.shape[3];
  const int64_t half = a.cos.shape[1];
  if (half < 1)
    chk.fail("cos has shape " + describe(a.cos) +
             ", expected (seqlen_ro, rotary_dim / 2) with rotary_dim / 2 ≥ 1");
  if (2 * half > D)
    chk.fail("cos has shape " + describe(a.cos) + ": rotary_dim = 2 · " +
             std::to_string(half) + " = " + std::to_string(2 * half) +
             ", expected rotary_dim ≤ D = " + std::to_string(D));
  if (a.seqlen_offset < 0)
    chk.fail("seqlen_offset is " + std::to_string(a.seqlen_offset) + ", expected ≥ 0");
  if (B * S > 0 && S + a.seqlen_offset > a.cos.shape[0])
    chk.fail("cos has " + std::to_string(a.cos.shape[0]) + " rows (positions), expected ≥ S + "
             "seqlen_offset = " + std::to_string(S) + " + " + std::to_string(a.seqlen_offset) +
             " = " + std::to_string(S + a.seqlen_offset));

  // The kernel indexes sin with cos's strides.
  if (a.sin.stride[0] != a.cos.stride[0] && a.cos.shape[0] > 1)
    chk.fail("sin has strides " + detail::describe_full(a.sin) + ", expected cos's (" +
             detail::describe_full(a.cos) + ")");
  if (a.sin.stride[1] != a.cos.stride[1] && half > 1)
    chk.fail("sin has strides " + detail::describe_full(a.sin) + ", expected cos's (" +
             detail::describe_full(a.cos) + ")");
  const int64_t heads = a.q.shape[2] + (a.k.present() ? a.k.shape[2] : 0) +
                        (a.v.present() ? a.v.shape[2] : 0);
  if (heads * D > INT32_MAX)
    chk.fail("q, k and v have " + std::to_string(heads) + " heads of D = " + std::to_string(D) +
             " together, expected at most 2^31 - 1 elements per token");
  if (B * S == 0 || heads == 0) return;

  detail::RotaryParams p;
  p.t[0] = tensor_params(a.q, a.q_out);
  p.t[1] = tensor_params(a.k, a.k_out);
  p.t[2] = tensor_params(a.v, a.v_out);
  p.cos = static_cast<const float*>(a.cos.data);
  p.sin = static_cast<const float*>(a.sin.data);
  p.cs_row = a.cos.stride[0];
  p.cs_col = a.cos.stride[1];
  p.B = B;
  p.S = S;
  p.D = static_cast<int>(D);
  p.half = static_cast<int>(half);
  p.seqlen_offset = a.seqlen_offset;
  p.conjugate = a.conjugate;
  const bool vec = vector_path(a, p.half, p.D);
  detail::DeviceGuard guard(a.q.device);
  detail::launch_rotary(p, a.q.dtype, vec, stream, kFn);
}

}  // namespace quack
