// Tier 1: bad input every entry point shares, checked in ArgCheck::required before any CUDA
// call (no GPU): a rank above TensorRef::kMaxDims, a view whose elements span more than 2^62
// bytes (its element count or offsets would wrap int64), a base address not aligned to the
// element size; and apply_rotary's seqlen_offset near 2^63 (S + seqlen_offset wrapped). Also
// the size limits of topk_fwd and apply_rotary. Each case breaks one argument
// of a call whose other arguments are valid (the Baseline tests of each op's own file).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "host_test_util.h"
#include "quack/quack.h"

namespace quack {
namespace {

using namespace test;

constexpr DType kBf = DType::kBFloat16, kF32 = DType::kFloat32, kI64 = DType::kInt64;

void* offset(void* p, int bytes) { return static_cast<char*>(p) + bytes; }

// A contiguous (B, S, H, D) tensor.
TensorRef bshd(void* p, DType t, int64_t B, int64_t S, int64_t H, int64_t D) {
  TensorRef r;
  r.data = p;
  r.dtype = t;
  r.ndim = 4;
  r.shape[0] = B, r.shape[1] = S, r.shape[2] = H, r.shape[3] = D;
  r.stride[3] = 1, r.stride[2] = D, r.stride[1] = H * D, r.stride[0] = S * H * D;
  return r;
}

RmsNormFwdArgs rms_args() {
  RmsNormFwdArgs a;
  a.x = TensorRef::matrix(fake(1), kBf, 8, 4096);
  a.weight = TensorRef::vector(fake(2), kF32, 4096);
  a.out = TensorRef::matrix(fake(3), kBf, 8, 4096);
  a.rstd = TensorRef::vector(fake(4), kF32, 8);
  return a;
}

LayerNormFwdArgs ln_args() {
  LayerNormFwdArgs a;
  a.x = TensorRef::matrix(fake(1), kBf, 8, 4096);
  a.out = TensorRef::matrix(fake(2), kBf, 8, 4096);
  a.mean = TensorRef::vector(fake(3), kF32, 8);
  a.rstd = TensorRef::vector(fake(4), kF32, 8);
  return a;
}

SoftmaxFwdArgs softmax_args(int64_t M = 8, int64_t N = 4096, DType t = kBf) {
  SoftmaxFwdArgs a;
  a.x = TensorRef::matrix(fake(1), t, M, N);
  a.out = TensorRef::matrix(fake(1, uintptr_t{1} << 63), t, M, N);
  return a;
}

CrossEntropyFwdArgs ce_args() {
  CrossEntropyFwdArgs a;
  a.x = TensorRef::matrix(fake(1), kBf, 8, 4096);
  a.target = TensorRef::vector(fake(2), kI64, 8);
  a.loss = TensorRef::vector(fake(3), kF32, 1);
  a.workspace = fake(9);
  a.workspace_bytes = size_t{1} << 20;
  return a;
}

TopkFwdArgs topk_args() {
  TopkFwdArgs a;
  a.x = TensorRef::matrix(fake(1), kBf, 8, 4096);
  a.values = TensorRef::matrix(fake(2), kBf, 8, 16);
  a.indices = TensorRef::matrix(fake(3), kI64, 8, 16);
  return a;
}

TopkBwdArgs topk_bwd_args() {
  TopkBwdArgs a;
  a.dvalues = TensorRef::matrix(fake(1), kF32, 8, 16);
  a.indices = TensorRef::matrix(fake(2), kI64, 8, 16);
  a.dx = TensorRef::matrix(fake(3), kBf, 8, 4096);
  return a;
}

// q (2, 16, 4, 128) rotated by (32, 64) tables: S = 16 of S_ro = 32 positions.
RotaryArgs rotary_args() {
  RotaryArgs a;
  a.q = bshd(fake(1), kBf, 2, 16, 4, 128);
  a.q_out = bshd(fake(2), kBf, 2, 16, 4, 128);
  a.cos = TensorRef::matrix(fake(3), kF32, 32, 64);
  a.sin = TensorRef::matrix(fake(4), kF32, 32, 64);
  return a;
}

GemmArgs gemm_args() {
  GemmArgs g;
  g.a = row_major(fake(1), kBf, 128, 64);
  g.b = col_major(fake(2), kBf, 64, 256);
  g.d = row_major(fake(3), kBf, 128, 256);
  return g;
}

GemmRotaryArgs gemm_rotary_args() {
  constexpr int64_t T = 64, HD = 128;
  GemmRotaryArgs g;
  g.a = row_major(fake(1), kBf, 2 * T, 64);
  g.b = col_major(fake(2), kBf, 64, 6 * HD);
  g.d = row_major(fake(3), kBf, 2 * T, 6 * HD);
  g.cos = row_major(fake(4), kF32, T, HD / 2);
  g.sin = row_major(fake(5), kF32, T, HD / 2);
  g.rotary_cols = 4 * HD;
  g.head_dim = HD;
  g.seqlen = T;
  return g;
}

LinearCrossEntropyFwdArgs lce_args() {
  LinearCrossEntropyFwdArgs a;
  a.x = TensorRef::matrix(fake(1), kBf, 16, 64);
  a.weight = TensorRef::matrix(fake(2), kBf, 100, 64);
  a.target = TensorRef::vector(fake(3), kI64, 16);
  a.loss = TensorRef::vector(fake(4), kF32, 1);
  a.workspace = fake(9);
  a.workspace_bytes = size_t{1} << 40;
  return a;
}

// The calls, by the name their messages start with.
void rms(const RmsNormFwdArgs& a) { rmsnorm_fwd(a, nullptr); }
void ln(const LayerNormFwdArgs& a) { layernorm_fwd(a, nullptr); }
void sm(const SoftmaxFwdArgs& a) { softmax_fwd(a, nullptr); }
void ce(const CrossEntropyFwdArgs& a) { cross_entropy_fwd(a, nullptr); }
void tk(const TopkFwdArgs& a) { topk_fwd(a, nullptr); }
void tkb(const TopkBwdArgs& a) { topk_bwd(a, nullptr); }
void rot(const RotaryArgs& a) { apply_rotary(a, nullptr); }
void gm(const GemmArgs& g) { gemm(g, nullptr); }
void gr(const GemmRotaryArgs& g) { gemm_rotary(g, nullptr); }
void lce(const LinearCrossEntropyFwdArgs& a) { linear_cross_entropy_fwd(a, nullptr); }

TEST(BadInput, BaselinesReachCuda) {
  ASSERT_TRUE(kCudaHidden);
  expect_reaches_cuda([] { rms(rms_args()); }, "rmsnorm_fwd");
  expect_reaches_cuda([] { ln(ln_args()); }, "layernorm_fwd");
  expect_reaches_cuda([] { sm(softmax_args()); }, "softmax_fwd");
  expect_reaches_cuda([] { ce(ce_args()); }, "cross_entropy_fwd");
  expect_reaches_cuda([] { tk(topk_args()); }, "topk_fwd");
  expect_reaches_cuda([] { tkb(topk_bwd_args()); }, "topk_bwd");
  expect_reaches_cuda([] { rot(rotary_args()); }, "apply_rotary");
  expect_reaches_cuda([] { gm(gemm_args()); }, "gemm");
  expect_reaches_cuda([] { gr(gemm_rotary_args()); }, "gemm_rotary");
  expect_reaches_cuda([] { lce(lce_args()); }, "linear_cross_entropy_fwd");
}

// ndim > kMaxDims: shape and stride hold 4 entries, so a larger ndim would make describe(),
// numel() and the shape checks read past them. Rejected before anything reads them.
TEST(BadInput, RankAboveFourNamesTheArgument) {
  auto with = [](std::string name) {
    return std::vector<std::string>{name + " has ndim 5", "expected 1 to 4 dimensions"};
  };
  {
    auto a = rms_args();
    a.x.ndim = 5;
    expect_invalid([&] { rms(a); }, "rmsnorm_fwd", with("x"));
    a = rms_args();
    a.weight.ndim = 5;
    expect_invalid([&] { rms(a); }, "rmsnorm_fwd", with("weight"));
  }
  {
    auto a = softmax_args();
    a.out.ndim = 5;
    expect_invalid([&] { sm(a); }, "softmax_fwd", with("out"));
  }
  {
    auto a = ce_args();
    a.target.ndim = 5;
    expect_invalid([&] { ce(a); }, "cross_entropy_fwd", with("target"));
  }
  {
    auto a = topk_args();
    a.values.ndim = 5;
    expect_invalid([&] { tk(a); }, "topk_fwd", with("values"));
  }
  {
    auto a = rotary_args();
    a.cos.ndim = 5;
    expect_invalid([&] { rot(a); }, "apply_rotary", with("cos"));
    a = rotary_args();
    a.q.ndim = 1000;  // far past the arrays
    expect_invalid([&] { rot(a); }, "apply_rotary", {"q has ndim 1000", "expected 1 to 4"});
  }
  {
    auto g = gemm_args();
    g.b.ndim = 5;
    expect_invalid([&] { gm(g); }, "gemm", with("b"));
  }
  {  // gemm_gated reads b's last extent (N even) before plan_fused: b's rank is checked first
    GemmGatedArgs g;
    const GemmArgs base = gemm_args();
    g.a = base.a;
    g.b = base.b;
    g.postact = row_major(fake(3), kBf, 128, 128);
    g.b.ndim = 1000;
    expect_invalid([&] { gemm_gated(g, nullptr); }, "gemm_gated", {"b has ndim 1000", "expected 1 to 4"});
  }
  {
    auto a = lce_args();
    a.weight.ndim = 5;
    expect_invalid([&] { lce(a); }, "linear_cross_entropy_fwd", with("weight"));
  }
}

// A view whose element count or farthest byte offset exceeds 2^62 bytes: no memory holds it,
// and its sizes wrap int64 arithmetic (B·S of 2^40 · 2^40 wraps to 0, where apply_rotary would
// return without doing anything; N = 2^62 float32 would reach the launch).
TEST(BadInput, ElementsSpanningMoreThan2To62BytesAreRejected) {
  const std::string span = "its element count or extent exceeds 2^62 bytes";
  const int64_t k40 = int64_t{1} << 40;
  {
    // float32 rows of 2^60 elements: exactly 2^62 bytes passes, one element more does not.
    auto a = softmax_args(1, int64_t{1} << 60, kF32);
    a.out.data = fake(1, uintptr_t{1} << 63);
    expect_reaches_cuda([&] { sm(a); }, "a 2^62-byte row");
    a = softmax_args(1, (int64_t{1} << 60) + 1, kF32);
    expect_invalid([&] { sm(a); }, "softmax_fwd", {"x is (1, 1152921504606846977) float32", span});
    a = softmax_args(1, int64_t{1} << 62, kF32);
    expect_invalid([&] { sm(a); }, "softmax_fwd", {"x is (1, 4611686018427387904)", span});
  }
  {
    auto a = rms_args();
    a.x = TensorRef::matrix(fake(1), kBf, k40, k40);
    expect_invalid([&] { rms(a); }, "rmsnorm_fwd", {"x is (1099511627776, 1099511627776)", span});
  }
  {
    auto a = rotary_args();
    a.q.shape[0] = a.q_out.shape[0] = k40;
    a.q.shape[1] = a.q_out.shape[1] = k40;
    expect_invalid([&] { rot(a); }, "apply_rotary", {"q is (1099511627776, 1099511627776, 4, 128)", span});
  }
  {
    auto a = topk_args();
    a.x.stride[0] = int64_t{1} << 61;  // rows 2^62 bytes apart
    expect_invalid([&] { tk(a); }, "topk_fwd", {"x is (8, 4096) bfloat16 strides (2305843009213693952, 1)", span});
  }
  {
    auto a = ce_args();
    a.target.stride[0] = -(int64_t{1} << 62);  // a negative stride reaches as far
    expect_invalid([&] { ce(a); }, "cross_entropy_fwd", {"target is (8,) int64", span});
  }
  {
    auto g = gemm_args();
    g.a = TensorRef::batched(fake(1), kBf, 3, 128, 64, 0, int64_t{1} << 61, 64, 1);
    g.b = TensorRef::batched(fake(2), kBf, 3, 64, 256, 0, 64 * 256, 1, 64);
    g.d = TensorRef::batched(fake(3), kBf, 3, 128, 256, 0, 128 * 256, 256, 1);
    expect_invalid([&] { gm(g); }, "gemm", {"a is (3, 128, 64) bfloat16", span});
  }
  {
    // Broadcast (stride 0) views count their elements too.
    SoftmaxBwdArgs a;
    a.y = TensorRef::matrix(fake(1), kF32, 8, 4096);
    a.dy = TensorRef::matrix(fake(2), kF32, 8, 4096);
    a.dx = TensorRef::matrix(fake(3), kF32, 8, 4096);
    a.dy.stride[0] = a.dy.stride[1] = 0;
    expect_reaches_cuda([&] { softmax_bwd(a, nullptr); }, "a broadcast dy");
    a.y = TensorRef::matrix(fake(1), kF32, int64_t{1} << 31, int64_t{1} << 31, 0, 0, 0);
    expect_invalid([&] { softmax_bwd(a, nullptr); }, "softmax_bwd", {"y is (2147483648, 2147483648) float32", span});
  }
}

// A base address that is not a multiple of the element size: the kernels' element loads and
// stores would fault (misaligned address, a sticky CUDA error). Every op's tensors get this
// check, GEMM operands included. Element-aligned addresses that break only the
// 16-byte vector paths still run (the general paths), and empty tensors are not addressed.
TEST(BadInput, BaseAddressesAlignedToTheirElements) {
  const std::string msg = "expected the alignment of its elements";
  {
    auto a = rms_args();
    a.x.data = offset(a.x.data, 1);
    expect_invalid([&] { rms(a); }, "rmsnorm_fwd", {"x has a base address that is not 2-byte aligned", msg});
    a = rms_args();
    a.rstd.data = offset(a.rstd.data, 2);
    expect_invalid([&] { rms(a); }, "rmsnorm_fwd", {"rstd has a base address that is not 4-byte aligned", msg});
    a = rms_args();
    a.x.data = offset(a.x.data, 2);  // element-aligned, not 16-byte aligned: the general path
    expect_reaches_cuda([&] { rms(a); }, "rmsnorm_fwd, x 2 bytes past 16");
    a = rms_args();
    a.x.shape[0] = a.out.shape[0] = a.rstd.shape[0] = 0;
    a.x.data = offset(a.x.data, 1);  // empty: never read
    EXPECT_NO_THROW(rms(a));
  }
  {
    auto a = ln_args();
    a.mean.data = offset(a.mean.data, 2);
    expect_invalid([&] { ln(a); }, "layernorm_fwd", {"mean has a base address that is not 4-byte aligned", msg});
  }
  {
    auto a = softmax_args();
    a.out.data = offset(a.out.data, 1);
    expect_invalid([&] { sm(a); }, "softmax_fwd", {"out has a base address that is not 2-byte aligned", msg});
  }
  {
    auto a = ce_args();
    a.target.data = offset(a.target.data, 4);
    expect_invalid([&] { ce(a); }, "cross_entropy_fwd", {"target has a base address that is not 8-byte aligned", msg});
  }
  {
    auto a = topk_bwd_args();
    a.indices.data = offset(a.indices.data, 4);
    expect_invalid([&] { tkb(a); }, "topk_bwd", {"indices has a base address that is not 8-byte aligned", msg});
  }
  {
    auto a = rotary_args();
    a.cos.data = offset(a.cos.data, 2);
    a.sin.data = offset(a.sin.data, 2);
    expect_invalid([&] { rot(a); }, "apply_rotary", {"cos has a base address that is not 4-byte aligned", msg});
    a = rotary_args();
    a.q_out.data = offset(a.q_out.data, 1);
    expect_invalid([&] { rot(a); }, "apply_rotary", {"q_out has a base address that is not 2-byte aligned", msg});
  }
  {
    auto g = gemm_rotary_args();
    g.cos.data = offset(g.cos.data, 2);
    g.sin.data = offset(g.sin.data, 2);
    expect_invalid([&] { gr(g); }, "gemm_rotary", {"cos has a base address that is not 4-byte aligned", msg});
  }
  {
    auto a = lce_args();
    a.target.data = offset(a.target.data, 4);
    expect_invalid([&] { lce(a); }, "linear_cross_entropy_fwd", {"target has a base address that is not 8-byte aligned", msg});
  }
}

// apply_rotary's positions s + seqlen_offset must lie in the table; the check formed
// S + seqlen_offset, which wrapped negative for an offset near 2^63 and let the kernel read
// rows far outside cos and sin.
TEST(BadInput, RotarySeqlenOffsetNearInt64Max) {
  auto a = rotary_args();
  a.seqlen_offset = 32 - 16;  // the last positions of the table
  expect_reaches_cuda([&] { rot(a); }, "apply_rotary, positions 16..31 of 32");
  a.seqlen_offset = 32 - 16 + 1;
  expect_invalid([&] { rot(a); }, "apply_rotary", {"cos has 32 rows", "= 16 + 17 = 33"});
  a.seqlen_offset = std::numeric_limits<int64_t>::max();
  expect_invalid([&] { rot(a); }, "apply_rotary",
                 {"cos has 32 rows", "S + seqlen_offset = 16 + 9223372036854775807"});
  a.seqlen_offset = std::numeric_limits<int64_t>::max() - 10;
  expect_invalid([&] { rot(a); }, "apply_rotary", {"cos has 32 rows", "16 + 9223372036854775797"});
}

// Size limits: topk_fwd's grid (one row per block index: M ≤ 2^31 − 1) and
// apply_rotary's 32-bit per-token offsets (heads · D ≤ 2^31 − 1, per tensor and q, k, v
// together).
TEST(BadInput, SizeLimitsWithoutTests) {
  {
    TopkFwdArgs a;
    const int64_t M = int64_t{1} << 31;
    a.x = TensorRef::matrix(fake(1), kBf, M, 1);
    a.values = TensorRef::matrix(fake(2), kBf, M, 1);
    a.indices = TensorRef::matrix(fake(3), DType::kInt32, M, 1);
    expect_invalid([&] { tk(a); }, "topk_fwd", {"x has M = 2147483648 rows", "expected M ≤ 2147483647"});
  }
  {
    RotaryArgs a = rotary_args();
    a.q = bshd(fake(1), kBf, 1, 1, int64_t{1} << 24, 128);
    a.q_out = bshd(fake(2), kBf, 1, 1, int64_t{1} << 24, 128);
    expect_invalid([&] { rot(a); }, "apply_rotary",
                   {"q has 2147483648 elements per token", "expected at most 2^31 - 1"});
    const int64_t H = int64_t{1} << 23;  // 2^30 per tensor, 2^31 for q and k together
    a.q = bshd(fake(1), kBf, 1, 1, H, 128);
    a.q_out = bshd(fake(2), kBf, 1, 1, H, 128);
    a.k = bshd(fake(5), kBf, 1, 1, H, 128);
    a.k_out = bshd(fake(6), kBf, 1, 1, H, 128);
    expect_invalid([&] { rot(a); }, "apply_rotary",
                   {"q, k and v have 16777216 heads of D = 128 together", "at most 2^31 - 1"});
  }
}

}  // namespace
}  // namespace quack
