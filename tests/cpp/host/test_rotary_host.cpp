// Tier 1 (no GPU): every validation path of apply_rotary and rotary_qkv_pack throws
// quack::InvalidArgument naming
// the function and the argument before any CUDA call; valid arguments (odd layouts included)
// reach CUDA, which is hidden here, and report "no CUDA driver/GPU"; empty inputs return
// without CUDA; the vector-path choice.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "host_test_util.h"
#include "quack/errors.h"
#include "quack/rotary.h"
#include "rotary/rotary_internal.h"

namespace quack {
namespace {

using namespace test;

constexpr int64_t B = 2, S = 16, H = 4, D = 128, kHalf = 64, kRo = 32;

// A (B, S, heads, D) slice of a packed (B, S, 3, H, D) tensor at p (group g).
TensorRef bshd(void* p, DType t, int64_t heads = H, int64_t g = 0, int64_t groups = 3) {
  TensorRef r;
  r.data = static_cast<char*>(p) + g * H * D * dtype_size(t);
  r.dtype = t;
  r.ndim = 4;
  r.shape[0] = B, r.shape[1] = S, r.shape[2] = heads, r.shape[3] = D;
  r.stride[3] = 1, r.stride[2] = D, r.stride[1] = groups * H * D, r.stride[0] = S * groups * H * D;
  r.device = 0;
  return r;
}

RotaryArgs args(DType t = DType::kBFloat16) {
  RotaryArgs a;
  a.q = bshd(fake(1), t, H, 0);
  a.k = bshd(fake(1), t, H, 1);
  a.v = bshd(fake(1), t, H, 2);
  a.q_out = bshd(fake(2), t, H, 0);
  a.k_out = bshd(fake(2), t, H, 1);
  a.v_out = bshd(fake(2), t, H, 2);
  a.cos = TensorRef::matrix(fake(3), DType::kFloat32, kRo, kHalf);
  a.sin = TensorRef::matrix(fake(4), DType::kFloat32, kRo, kHalf);
  return a;
}

void expect_bad(const RotaryArgs& a, const std::vector<std::string>& parts) {
  expect_invalid([&] { apply_rotary(a, nullptr); }, "apply_rotary", parts);
}

TEST(RotaryValidation, Baseline) {
  ASSERT_TRUE(kCudaHidden);
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    expect_reaches_cuda([&] { apply_rotary(args(t), nullptr); }, "packed qkv");
  }
  RotaryArgs a = args();
  a.k = a.k_out = a.v = a.v_out = TensorRef();
  expect_reaches_cuda([&] { apply_rotary(a, nullptr); }, "q only");
  a = args();
  a.q_out = a.q, a.k_out = a.k, a.v_out = a.v;
  expect_reaches_cuda([&] { apply_rotary(a, nullptr); }, "in place");
  a = args();
  a.k = bshd(fake(5), a.q.dtype, 1, 0, 1);  // GQA: one k/v head
  a.k_out = bshd(fake(6), a.q.dtype, 1, 0, 1);
  a.v = bshd(fake(7), a.q.dtype, 1, 0, 1);
  a.v_out = bshd(fake(8), a.q.dtype, 1, 0, 1);
  expect_reaches_cuda([&] { apply_rotary(a, nullptr); }, "gqa");
  a = args();
  a.cos.shape[1] = a.sin.shape[1] = 16;  // rotary_dim 32 < D
  a.seqlen_offset = kRo - S;
  a.conjugate = true;
  expect_reaches_cuda([&] { apply_rotary(a, nullptr); }, "partial, offset, conjugate");
  a = args();
  a.q.stride[1] = 1000;  // odd strides: element-at-a-time kernel
  a.cos.stride[0] = 65;
  a.sin.stride[0] = 65;
  expect_reaches_cuda([&] { apply_rotary(a, nullptr); }, "odd strides");
}

TEST(RotaryValidation, EmptyInputsReturnWithoutCuda) {
  RotaryArgs a = args();
  a.q.shape[0] = a.q_out.shape[0] = a.k.shape[0] = a.k_out.shape[0] = 0;
  a.v.shape[0] = a.v_out.shape[0] = 0;
  EXPECT_NO_THROW(apply_rotary(a, nullptr));
  a = args();
  for (TensorRef* t : {&a.q, &a.q_out, &a.k, &a.k_out, &a.v, &a.v_out}) t->shape[1] = 0;
  a.cos.shape[0] = a.sin.shape[0] = 0;  // no positions needed
  EXPECT_NO_THROW(apply_rotary(a, nullptr));
  a = args();
  a.k = a.k_out = a.v = a.v_out = TensorRef();
  a.q.shape[2] = a.q_out.shape[2] = 0;
  EXPECT_NO_THROW(apply_rotary(a, nullptr));
  // All strides 0 (autograd's gradient of an empty tensor's sum): nothing read, no stride check.
  a = args();
  a.k = a.k_out = a.v = a.v_out = TensorRef();
  a.q.shape[0] = a.q_out.shape[0] = 0;
  for (int i = 0; i < 4; ++i) a.q.stride[i] = 0;
  EXPECT_NO_THROW(apply_rotary(a, nullptr));
}

TEST(RotaryValidation, MissingTensors) {
  RotaryArgs a = args();
  a.q = TensorRef();
  expect_bad(a, {"q is absent"});
  a = args();
  a.q_out = TensorRef();
  expect_bad(a, {"q_out is absent", "q is given"});
  a = args();
  a.k_out = TensorRef();
  expect_bad(a, {"k_out is absent"});
  a = args();
  a.v = TensorRef();
  expect_bad(a, {"v is absent", "v_out is given"});
  a = args();
  a.cos = TensorRef();
  expect_bad(a, {"cos is absent"});
  a = args();
  a.sin = TensorRef();
  expect_bad(a, {"sin is absent"});
}

TEST(RotaryValidation, Shapes) {
  RotaryArgs a = args();
  a.q.ndim = 3;
  expect_bad(a, {"q has 3 dimensions", "expected 4"});
  a = args();
  a.k.shape[1] = S + 1;
  expect_bad(a, {"k has shape", "q's B, S and D"});
  a = args();
  a.v.shape[3] = 64;
  a.v.stride[3] = 1;
  expect_bad(a, {"v has shape", "q's B, S and D"});
  a = args();
  a.k_out.shape[2] = H + 1;
  expect_bad(a, {"k_out has shape", "k's shape"});
  a = args();
  a.sin.shape[1] = 32;
  expect_bad(a, {"sin has shape", "cos's shape"});
  a = args();
  a.cos.shape[1] = a.sin.shape[1] = 65;
  expect_bad(a, {"cos has shape", "rotary_dim", "≤ D = 128"});
  a = args();
  a.cos.shape[1] = a.sin.shape[1] = 0;
  expect_bad(a, {"cos has shape", "rotary_dim / 2 ≥ 1"});
  a = args();
  a.cos.shape[0] = a.sin.shape[0] = S - 1;
  expect_bad(a, {"cos has 15 rows", "S + seqlen_offset"});
  a = args();
  a.seqlen_offset = kRo - S + 1;
  expect_bad(a, {"cos has 32 rows", "= 33"});
  a = args();
  a.seqlen_offset = -1;
  expect_bad(a, {"seqlen_offset is -1"});
  a = args();
  a.q.shape[1] = -1;
  expect_bad(a, {"q has a negative size"});
}

TEST(RotaryValidation, DtypesDevicesLayouts) {
  RotaryArgs a = args();
  a.q.dtype = a.q_out.dtype = DType::kInt32;
  expect_bad(a, {"q has dtype int32"});
  a = args();
  a.k.dtype = DType::kFloat16;
  expect_bad(a, {"k has dtype float16", "q's dtype"});
  a = args();
  a.v_out.dtype = DType::kFloat32;
  expect_bad(a, {"v_out has dtype float32"});
  a = args();
  a.cos.dtype = DType::kBFloat16;
  expect_bad(a, {"cos has dtype bfloat16", "expected float32"});
  a = args();
  a.k.device = 1;
  expect_bad(a, {"k is on cuda:1"});
  a = args();
  a.sin.device = -1;
  expect_bad(a, {"sin is in host memory"});
  a = args();
  a.q.stride[3] = 2;
  expect_bad(a, {"q has D stride 2", "expected 1"});
  a = args();
  a.q_out.stride[2] = 0;
  expect_bad(a, {"output q_out has overlapping elements"});
  a = args();
  a.k.stride[1] = -5;
  expect_bad(a, {"k has a negative stride"});
  a = args();
  a.q_out.data = a.q.data;
  a.q_out.stride[1] = a.q.stride[1] + 8;
  a.q_out.stride[0] = 100000000;
  expect_bad(a, {"q_out overlaps q in memory", "expected q itself (in place"});
  a = args();
  a.sin.stride[0] = 72;
  expect_bad(a, {"sin is (", "cos's"});
}

// An output sharing memory with another tensor of the call: caught, naming both (the kernel
// writes it while it reads or writes the other). The packed slices of args() interleave and
// do not overlap: they pass (Baseline).
TEST(RotaryValidation, OutputsApart) {
  RotaryArgs a = args();
  a.k_out = a.q;  // k's output written over q's input
  expect_bad(a, {"k_out overlaps q in memory", "expected separate memory"});
  a = args();
  a.q_out = a.v_out;  // two outputs on one buffer
  expect_bad(a, {"q_out overlaps v_out in memory"});
  a = args();
  a.k_out = a.k;  // k in place, q_out onto k
  a.q_out = a.k;
  expect_bad(a, {"q_out overlaps k in memory"});
  a = args();
  a.q_out.data = static_cast<char*>(a.q.data) + 2 * 8;  // q shifted by 8 elements
  expect_bad(a, {"q_out overlaps q in memory"});
  a = args();
  a.v_out.data = static_cast<char*>(a.k_out.data) + 2 * 64;  // half a head into k_out's heads
  expect_bad(a, {"k_out overlaps v_out in memory"});
  a = args();
  a.k = a.k_out = TensorRef();
  a.v_out.data = a.cos.data;
  expect_bad(a, {"v_out overlaps cos in memory"});
  // In place (each output its input exactly) and separate outputs pass.
  a = args();
  a.q_out = a.q, a.k_out = a.k;
  expect_reaches_cuda([&] { apply_rotary(a, nullptr); }, "q, k in place, v_out separate");
}

TEST(RotaryValidation, VectorPathChoice) {
  EXPECT_TRUE(detail::rotary_vector_path(args()));
  EXPECT_TRUE(detail::rotary_vector_path(args(DType::kFloat32)));
  RotaryArgs a = args();
  a.cos.shape[1] = a.sin.shape[1] = 20;  // half not a multiple of 8
  EXPECT_FALSE(detail::rotary_vector_path(a));
  a = args(DType::kFloat32);
  a.cos.shape[1] = a.sin.shape[1] = 20;  // fp32: a multiple of 4 is enough
  EXPECT_TRUE(detail::rotary_vector_path(a));
  a = args();
  a.k.data = static_cast<char*>(a.k.data) + 2;  // base off 16 bytes
  EXPECT_FALSE(detail::rotary_vector_path(a));
  a = args();
  a.v_out.stride[1] += 4;  // token stride not a multiple of 8 elements
  EXPECT_FALSE(detail::rotary_vector_path(a));
  a = args();
  a.cos.stride[0] = a.sin.stride[0] = 66;  // row not 16-byte aligned
  EXPECT_FALSE(detail::rotary_vector_path(a));
  a = args();
  a.cos.stride[0] = a.sin.stride[0] = 128;  // the demo's cos[:, :hd / 2]
  EXPECT_TRUE(detail::rotary_vector_path(a));
}

// rotary_qkv_pack: dq, dk, dv (B, S, H, D) contiguous, dqkv the packed (B, S, 3 * H, D).
TensorRef contiguous_bshd(void* p, DType t) { return bshd(p, t, H, 0, 1); }

RotaryPackArgs pack_args(DType t = DType::kBFloat16) {
  RotaryPackArgs a;
  a.dq = contiguous_bshd(fake(1), t);
  a.dk = contiguous_bshd(fake(2), t);
  a.dv = contiguous_bshd(fake(3), t);
  a.dqkv = bshd(fake(4), t, 3 * H, 0, 3);
  a.cos = TensorRef::matrix(fake(5), DType::kFloat32, kRo, kHalf);
  a.sin = TensorRef::matrix(fake(6), DType::kFloat32, kRo, kHalf);
  return a;
}

void expect_bad_pack(const RotaryPackArgs& a, const std::vector<std::string>& parts) {
  expect_invalid([&] { rotary_qkv_pack(a, nullptr); }, "rotary_qkv_pack", parts);
}

TEST(RotaryPackValidation, Baseline) {
  ASSERT_TRUE(kCudaHidden);
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
    expect_reaches_cuda([&] { rotary_qkv_pack(pack_args(t), nullptr); }, "all gradients");
  RotaryPackArgs a = pack_args();
  a.dq = a.dv = TensorRef();
  expect_reaches_cuda([&] { rotary_qkv_pack(a, nullptr); }, "dk only");
  a.dk = TensorRef();
  expect_reaches_cuda([&] { rotary_qkv_pack(a, nullptr); }, "no gradient: zeros");
  a = pack_args();
  a.dq = bshd(fake(1), a.dqkv.dtype, H, 0, 3);  // a slice of a packed tensor
  a.cos.shape[1] = a.sin.shape[1] = 16;
  a.seqlen_offset = kRo - S;
  a.conjugate = false;
  expect_reaches_cuda([&] { rotary_qkv_pack(a, nullptr); }, "strided, partial, offset");
}

TEST(RotaryPackValidation, EmptyInputsReturnWithoutCuda) {
  RotaryPackArgs a = pack_args();
  for (TensorRef* t : {&a.dq, &a.dk, &a.dv, &a.dqkv}) t->shape[0] = 0;
  EXPECT_NO_THROW(rotary_qkv_pack(a, nullptr));
  a = pack_args();
  for (TensorRef* t : {&a.dq, &a.dk, &a.dv, &a.dqkv}) t->shape[1] = 0;
  a.cos.shape[0] = a.sin.shape[0] = 0;
  EXPECT_NO_THROW(rotary_qkv_pack(a, nullptr));
  a = pack_args();
  a.dq = a.dk = a.dv = TensorRef();
  a.dqkv.shape[2] = 0;
  EXPECT_NO_THROW(rotary_qkv_pack(a, nullptr));
}

TEST(RotaryPackValidation, Errors) {
  RotaryPackArgs a = pack_args();
  a.dqkv = TensorRef();
  expect_bad_pack(a, {"dqkv is absent"});
  a = pack_args();
  a.dqkv.ndim = 3;
  expect_bad_pack(a, {"dqkv has 3 dimensions", "expected 4 (B, S, 3·H, D)"});
  a = pack_args();
  a.dqkv.shape[2] = 3 * H + 1;
  expect_bad_pack(a, {"dqkv has shape", "divisible by 3"});
  a = pack_args();
  a.dq.shape[2] = H + 1;
  expect_bad_pack(a, {"dq has shape", "dqkv's H = 12 / 3"});
  a = pack_args();
  a.dk.shape[1] = S + 1;
  expect_bad_pack(a, {"dk has shape", "dqkv's B, S and D"});
  a = pack_args();
  a.dv.dtype = DType::kFloat32;
  expect_bad_pack(a, {"dv has dtype float32", "dqkv's dtype"});
  a = pack_args();
  a.dqkv.dtype = DType::kInt64;
  expect_bad_pack(a, {"dqkv has dtype int64"});
  a = pack_args();
  a.dq.device = 1;
  expect_bad_pack(a, {"dq is on cuda:1", "the device of dqkv"});
  a = pack_args();
  a.dqkv.device = -1;
  expect_bad_pack(a, {"dqkv is in host memory"});
  a = pack_args();
  a.dv.stride[3] = 2;
  expect_bad_pack(a, {"dv has D stride 2", "expected 1"});
  a = pack_args();
  a.dqkv.stride[2] = 0;
  expect_bad_pack(a, {"output dqkv has overlapping elements"});
  a = pack_args();
  a.cos.dtype = DType::kFloat16;
  expect_bad_pack(a, {"cos has dtype float16", "expected float32"});
  a = pack_args();
  a.cos.shape[1] = a.sin.shape[1] = 65;
  expect_bad_pack(a, {"cos has shape", "rotary_dim", "≤ D = 128"});
  a = pack_args();
  a.seqlen_offset = kRo - S + 1;
  expect_bad_pack(a, {"cos has 32 rows", "= 33"});
  a = pack_args();
  a.sin.device = 1;
  expect_bad_pack(a, {"sin is on cuda:1", "the device of dqkv"});
}

TEST(RotaryPackValidation, OutputApartFromGradients) {
  RotaryPackArgs a = pack_args();
  a.dk = bshd(a.dqkv.data, a.dqkv.dtype, H, 1, 3);  // dk is dqkv's k slice
  expect_bad_pack(a, {"dqkv overlaps dk in memory", "expected separate memory"});
  a = pack_args();
  a.dq.data = static_cast<char*>(a.dqkv.data) + 2 * 128;  // dq inside dqkv's first token
  expect_bad_pack(a, {"dqkv overlaps dq in memory"});
  a = pack_args();
  a.dv = contiguous_bshd(a.dqkv.data, a.dqkv.dtype);
  expect_bad_pack(a, {"dqkv overlaps dv in memory"});
  a = pack_args();
  a.sin.data = static_cast<char*>(a.dqkv.data) + 4096;
  expect_bad_pack(a, {"dqkv overlaps sin in memory"});
}

TEST(RotaryPackValidation, VectorPathChoice) {
  EXPECT_TRUE(detail::rotary_pack_vector_path(pack_args()));
  RotaryPackArgs a = pack_args();
  a.dq = a.dk = a.dv = TensorRef();  // absent gradients pass
  EXPECT_TRUE(detail::rotary_pack_vector_path(a));
  a = pack_args();
  a.dk.data = static_cast<char*>(a.dk.data) + 2;
  EXPECT_FALSE(detail::rotary_pack_vector_path(a));
  a = pack_args();
  a.cos.shape[1] = a.sin.shape[1] = 20;
  EXPECT_FALSE(detail::rotary_pack_vector_path(a));
}

}  // namespace
}  // namespace quack
