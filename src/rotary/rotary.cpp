// Rotary embedding public API (quack/rotary.h): apply_rotary and rotary_qkv_pack, validation
// at the boundary, the vector-path choice, then the launch (host only).
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "common/check.h"
#include "common/launch.h"
#include "quack/rotary.h"
#include "rotary/rotary_internal.h"

namespace quack {

namespace {

constexpr const char* kFn = "apply_rotary";
constexpr const char* kPackFn = "rotary_qkv_pack";

// A (B, S, heads, D) tensor of q's dtype on q's device with unit D stride (q: the reference
// tensor, named q_name: apply_rotary's q, rotary_qkv_pack's dqkv).
void check_bshd(const detail::ArgCheck& chk, const TensorRef& t, const char* name,
                const TensorRef& q, const char* q_name = "q") {
  chk.required(t, name);
  if (t.ndim != 4)
    chk.fail(std::string(name) + " has " + std::to_string(t.ndim) + " dimensions " +
             describe(t) + ", expected 4 (B, S, heads, D)");
  chk.no_negative_strides(t, name);
  if (&t != &q) {
    if (t.dtype != q.dtype)
      chk.fail(std::string(name) + " has dtype " + dtype_name(t.dtype) + ", expected " +
               dtype_name(q.dtype) + " (" + q_name + "'s dtype)");
    if (t.device != q.device)
      chk.fail(std::string(name) + " is on cuda:" + std::to_string(t.device) +
               ", expected cuda:" + std::to_string(q.device) + " (the device of " + q_name +
               ")");
    if (t.shape[0] != q.shape[0] || t.shape[1] != q.shape[1] || t.shape[3] != q.shape[3])
      chk.fail(std::string(name) + " has shape " + describe(t) + ", expected (" +
               std::to_string(q.shape[0]) + ", " + std::to_string(q.shape[1]) + ", heads, " +
               std::to_string(q.shape[3]) + ") (" + q_name + "'s B, S and D)");
  }
  // An empty tensor's strides are not used (autograd's gradient of an empty sum has all 0).
  if (t.numel() > 0 && t.shape[3] > 1 && t.stride[3] != 1)
    chk.fail(std::string(name) + " has D stride " + std::to_string(t.stride[3]) + ": " +
             detail::describe_full(t) + ", expected 1 (the head dimension contiguous)");
  if (t.shape[2] * t.shape[3] > INT32_MAX)
    chk.fail(std::string(name) + " has " + std::to_string(t.shape[2] * t.shape[3]) +
             " elements per token " + describe(t) + ", expected at most 2^31 - 1");
}

// An input and its output: both or neither; the output the input's shape and non-overlapping
// (whether it may share the input's memory: ArgCheck::outputs_apart).
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
}

// cos and sin: (S_ro, R/2) fp32 on x's device (x named x_name), equal shapes and strides,
// 1 ≤ R/2, R ≤ D, and positions seqlen_offset .. S + seqlen_offset − 1 inside the table.
void check_tables(const detail::ArgCheck& chk, const TensorRef& cos, const TensorRef& sin,
                  const TensorRef& x, const char* x_name, int64_t tokens, int64_t S, int64_t D,
                  int64_t seqlen_offset) {
  for (const auto& [t, name] : {std::pair{&cos, "cos"}, std::pair{&sin, "sin"}}) {
    chk.matrix(*t, name, -1, -1);
    chk.dtype_in(*t, name, {DType::kFloat32});
    if (t->device != x.device)
      chk.fail(std::string(name) + " is on cuda:" + std::to_string(t->device) +
               ", expected cuda:" + std::to_string(x.device) + " (the device of " + x_name +
               ")");
  }
  if (sin.shape[0] != cos.shape[0] || sin.shape[1] != cos.shape[1])
    chk.fail("sin has shape " + describe(sin) + ", expected " + describe(cos) +
             " (cos's shape)");
  const int64_t half = cos.shape[1];
  if (half < 1)
    chk.fail("cos has shape " + describe(cos) +
             ", expected (seqlen_ro, rotary_dim / 2) with rotary_dim / 2 ≥ 1");
  if (2 * half > D)
    chk.fail("cos has shape " + describe(cos) + ": rotary_dim = 2 · " +
             std::to_string(half) + " = " + std::to_string(2 * half) +
             ", expected rotary_dim ≤ D = " + std::to_string(D));
  if (seqlen_offset < 0)
    chk.fail("seqlen_offset is " + std::to_string(seqlen_offset) + ", expected ≥ 0");
  // S + seqlen_offset ≤ S_ro without forming the sum (a seqlen_offset near 2^63 would wrap it).
  if (tokens > 0 && seqlen_offset > cos.shape[0] - S)
    chk.fail("cos has " + std::to_string(cos.shape[0]) + " rows (positions), expected ≥ S + "
             "seqlen_offset = " + std::to_string(S) + " + " + std::to_string(seqlen_offset) +
             (seqlen_offset <= INT64_MAX - S ? " = " + std::to_string(S + seqlen_offset)
                                             : std::string()));
  // The kernel indexes sin with cos's strides.
  if ((sin.stride[0] != cos.stride[0] && cos.shape[0] > 1) ||
      (sin.stride[1] != cos.stride[1] && half > 1))
    chk.fail("sin is " + detail::describe_full(sin) + ", expected cos's (" +
             detail::describe_full(cos) + ")");
}

bool aligned16(const TensorRef& t, int vec) {
  if (!t.present()) return true;
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0) return false;
  for (int i = 0; i < 3; ++i)
    if (t.shape[i] > 1 && t.stride[i] % vec != 0) return false;
  return true;
}

// The 16-byte kernel: D and R/2 multiples of 16 bytes, every x tensor (absent ones pass)
// and the tables aligned (the same rule for both pair layouts: a chunk's vectors sit at c·V and
// R/2 + c·V in both; interleaved, its angles at c·V/2 and R/4 + c·V/2 are V/2-float runs,
// aligned as R/2 is a multiple of V).
bool vector_path(DType dtype, std::initializer_list<const TensorRef*> xs, const TensorRef& cos,
                 const TensorRef& sin, int half, int D) {
  const int vec = 16 / dtype_size(dtype);
  if (D % vec != 0 || half % vec != 0) return false;
  for (const TensorRef* t : xs)
    if (!aligned16(*t, vec)) return false;
  for (const TensorRef* t : {&cos, &sin}) {
    if (reinterpret_cast<uintptr_t>(t->data) % 16 != 0) return false;
    if (t->shape[1] > 1 && t->stride[1] != 1) return false;
    if (t->shape[0] > 1 && t->stride[0] % 4 != 0) return false;
  }
  return true;
}

// One tensor's kernel parameters: nothing when out is absent (apply_rotary's absent k or v);
// an absent in with a present out (rotary_qkv_pack's absent gradient) reads as zeros.
detail::RotaryTensor tensor_params(const TensorRef& in, const TensorRef& out) {
  detail::RotaryTensor t;
  if (!out.present()) return t;
  t.out = out.data;
  t.heads = static_cast<int>(out.shape[2]);
  t.write = !in.present() || !detail::same_view(in, out);
  t.out_b = out.stride[0], t.out_s = out.stride[1], t.out_h = out.stride[2];
  if (in.present()) {
    t.in = in.data;
    t.in_b = in.stride[0], t.in_s = in.stride[1], t.in_h = in.stride[2];
  }
  return t;
}

bool apply_vector_path(const RotaryArgs& a, int half, int D) {
  return vector_path(a.q.dtype, {&a.q, &a.q_out, &a.k, &a.k_out, &a.v, &a.v_out}, a.cos, a.sin,
                     half, D);
}

// Slice j (0: q, 1: k, 2: v) of a packed (B, S, 3·H, D) tensor: (B, S, H, D) at head j·H.
TensorRef packed_slice(const TensorRef& qkv, int j) {
  TensorRef t = qkv;
  const int64_t H = qkv.shape[2] / 3;
  t.shape[2] = H;
  t.data = static_cast<char*>(qkv.data) + j * H * qkv.stride[2] * dtype_size(qkv.dtype);
  return t;
}

// The parameters every launch shares: tables, sizes, offset and direction.
detail::RotaryParams table_params(const TensorRef& cos, const TensorRef& sin, int64_t B,
                                  int64_t S, int64_t D, int64_t seqlen_offset, bool conjugate,
                                  bool interleaved) {
  detail::RotaryParams p;
  p.cos = static_cast<const float*>(cos.data);
  p.sin = static_cast<const float*>(sin.data);
  p.cs_row = cos.stride[0];
  p.cs_col = cos.stride[1];
  p.B = B;
  p.S = S;
  p.D = static_cast<int>(D);
  p.half = static_cast<int>(cos.shape[1]);
  p.seqlen_offset = seqlen_offset;
  p.conjugate = conjugate;
  p.interleaved = interleaved;
  return p;
}

}  // namespace

bool detail::rotary_vector_path(const RotaryArgs& a) {
  return apply_vector_path(a, static_cast<int>(a.cos.shape[1]), static_cast<int>(a.q.shape[3]));
}

bool detail::rotary_pack_vector_path(const RotaryPackArgs& a) {
  // dqkv's three slices share its base alignment and strides: dqkv itself stands for them
  // (a slice starts H·stride[2] elements further, a multiple of the vector where dqkv's
  // strides are).
  return vector_path(a.dqkv.dtype, {&a.dq, &a.dk, &a.dv, &a.dqkv}, a.cos, a.sin,
                     static_cast<int>(a.cos.shape[1]), static_cast<int>(a.dqkv.shape[3]));
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
  const int64_t B = a.q.shape[0], S = a.q.shape[1], D = a.q.shape[3];
  check_tables(chk, a.cos, a.sin, a.q, "q", B * S, S, D, a.seqlen_offset);
  // The kernel writes one tensor while it reads or writes the others: each output apart from
  // the rest (q_out inside k, two outputs on one buffer), its own input excepted when it is that
  // input exactly (in place).
  chk.outputs_apart({{&a.q_out, "q_out"}, {&a.k_out, "k_out"}, {&a.v_out, "v_out"}},
                    {{&a.q, "q"}, {&a.k, "k"}, {&a.v, "v"}, {&a.cos, "cos"}, {&a.sin, "sin"}},
                    {{&a.q_out, &a.q}, {&a.k_out, &a.k}, {&a.v_out, &a.v}});
  const int64_t heads = a.q.shape[2] + (a.k.present() ? a.k.shape[2] : 0) +
                        (a.v.present() ? a.v.shape[2] : 0);
  if (heads * D > INT32_MAX)
    chk.fail("q, k and v have " + std::to_string(heads) + " heads of D = " + std::to_string(D) +
             " together, expected at most 2^31 - 1 elements per token");
  if (B * S == 0 || heads == 0) return;

  detail::RotaryParams p = table_params(a.cos, a.sin, B, S, D, a.seqlen_offset, a.conjugate,
                                                  a.interleaved);
  p.t[0] = tensor_params(a.q, a.q_out);
  p.t[1] = tensor_params(a.k, a.k_out);
  p.t[2] = tensor_params(a.v, a.v_out);
  const bool vec = apply_vector_path(a, p.half, p.D);
  const detail::DeviceGuard guard(a.q.device, kFn);
  detail::launch_rotary(p, a.q.dtype, vec, stream, kFn);
}

void rotary_qkv_pack(const RotaryPackArgs& a, cudaStream_t stream) {
  const detail::ArgCheck chk(kPackFn);
  chk.required(a.dqkv, "dqkv");
  if (a.dqkv.ndim != 4)
    chk.fail("dqkv has " + std::to_string(a.dqkv.ndim) + " dimensions " + describe(a.dqkv) +
             ", expected 4 (B, S, 3·H, D): the packed (B, S, 3, H, D) with (3, H) merged");
  chk.float_dtype(a.dqkv, "dqkv");
  check_bshd(chk, a.dqkv, "dqkv", a.dqkv, "dqkv");
  if (a.dqkv.shape[2] % 3 != 0)
    chk.fail("dqkv has shape " + describe(a.dqkv) + ", expected (B, S, 3·H, D): a third "
             "dimension divisible by 3");
  chk.non_overlapping(a.dqkv, "dqkv");
  const int64_t B = a.dqkv.shape[0], S = a.dqkv.shape[1], H = a.dqkv.shape[2] / 3;
  const int64_t D = a.dqkv.shape[3];
  for (const auto& [t, name] :
       {std::pair{&a.dq, "dq"}, std::pair{&a.dk, "dk"}, std::pair{&a.dv, "dv"}}) {
    if (!t->present()) continue;
    check_bshd(chk, *t, name, a.dqkv, "dqkv");
    if (t->shape[2] != H)
      chk.fail(std::string(name) + " has shape " + describe(*t) + ", expected (" +
               std::to_string(B) + ", " + std::to_string(S) + ", " + std::to_string(H) + ", " +
               std::to_string(D) + ") (dqkv's H = " + std::to_string(3 * H) + " / 3)");
  }
  check_tables(chk, a.cos, a.sin, a.dqkv, "dqkv", B * S, S, D, a.seqlen_offset);
  // dqkv is no gradient's in-place output (the kernel writes its three slices from the three;
  // its 3H heads never make it dq's own view, so same_or_disjoint against dq refuses any overlap).
  chk.outputs_apart({{&a.dqkv, "dqkv"}},
                    {{&a.dq, "dq"}, {&a.dk, "dk"}, {&a.dv, "dv"}, {&a.cos, "cos"}, {&a.sin, "sin"}},
                    {{&a.dqkv, &a.dq}});
  if (B * S == 0 || H == 0) return;

  detail::RotaryParams p = table_params(a.cos, a.sin, B, S, D, a.seqlen_offset, a.conjugate,
                                                  a.interleaved);
  const TensorRef* ins[3] = {&a.dq, &a.dk, &a.dv};
  for (int j = 0; j < 3; ++j) p.t[j] = tensor_params(*ins[j], packed_slice(a.dqkv, j));
  const bool vec = detail::rotary_pack_vector_path(a);
  const detail::DeviceGuard guard(a.dqkv.device, kPackFn);
  detail::launch_rotary(p, a.dqkv.dtype, vec, stream, kPackFn);
}

}  // namespace quack
