// Tier 1: validation of gemm_gated / gemm_dgated and of the bias (quack/gemm.h GemmBias, on gemm,
// gemm_act and gemm_gated) before any CUDA call (no GPU): each bad argument throws
// quack::InvalidArgument whose message starts with the function and names the argument; valid
// arguments get past validation and meet the hidden device (CudaError). Also the gated activation
// names.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "host_test_util.h"
#include "quack/errors.h"
#include "quack/gemm.h"
#include "quack/gemm_act.h"

namespace quack {
namespace {

using namespace test;

constexpr int64_t M = 128, N = 256, K = 64, H = N / 2;
constexpr DType kBf = DType::kBFloat16, kF32 = DType::kFloat32;

// fc1 of a gated MLP: a (M, K) row-major, b = W1ᵀ (K, N) column-major, preact (M, N), postact (M, N/2).
GemmGatedArgs gated_args() {
  GemmGatedArgs g;
  g.a = row_major(fake(1), kBf, M, K);
  g.b = col_major(fake(2), kBf, K, N);
  g.preact = row_major(fake(3), kBf, M, N);
  g.postact = row_major(fake(4), kBf, M, H);
  g.activation = Activation::kSwiglu;
  return g;
}

// fc2's dgrad: a = dout (M, K) row-major, b = W2 (K, H) row-major, preact / dpreact (M, 2H).
GemmDGatedArgs dgated_args() {
  GemmDGatedArgs g;
  g.a = row_major(fake(1), kBf, M, K);
  g.b = row_major(fake(2), kBf, K, H);
  g.preact = row_major(fake(3), kBf, M, N);
  g.dpreact = row_major(fake(4), kBf, M, N);
  g.postact = row_major(fake(5), kBf, M, H);
  g.activation = Activation::kGeglu;
  return g;
}

GemmArgs gemm_args() {
  GemmArgs g;
  g.a = row_major(fake(1), kBf, M, K);
  g.b = col_major(fake(2), kBf, K, N);
  g.d = row_major(fake(3), kBf, M, N);
  g.bias.row = TensorRef::vector(fake(6), kF32, N);
  return g;
}

void expect_gated_error(const GemmGatedArgs& g, const std::string& part) {
  expect_can_implement_error(g, "gemm_gated", part);
  EXPECT_THROW(gemm_gated(g, nullptr), InvalidArgument) << part;
}
void expect_dgated_error(const GemmDGatedArgs& g, const std::string& part) {
  expect_can_implement_error(g, "gemm_dgated", part);
  EXPECT_THROW(gemm_dgated(g, nullptr), InvalidArgument) << part;
}

TEST(GemmGatedValidation, Baseline) {
  GemmGatedArgs g = gated_args();
  EXPECT_NO_THROW(can_implement(g));
  EXPECT_THROW(gemm_gated(g, nullptr), CudaError);  // past validation: the hidden device
  for (Activation a : {Activation::kSwiglu, Activation::kSwigluOai, Activation::kReglu, Activation::kGeglu,
                       Activation::kGlu}) {
    g.activation = a;
    EXPECT_NO_THROW(can_implement(g)) << activation_name(a);
  }
  g = gated_args();
  g.preact = TensorRef();  // store_preact off
  EXPECT_NO_THROW(can_implement(g));
  g = gated_args();
  g.c = row_major(fake(5), kBf, M, N);
  g.beta = 1.f;
  g.bias.row = TensorRef::vector(fake(6), kF32, N);
  g.bias.col = TensorRef::vector(fake(7), kBf, M);
  EXPECT_NO_THROW(can_implement(g));
  g.concat_layout = true;
  EXPECT_NO_THROW(can_implement(g));
  // Batched, a shared (N,) bias and a per-batch (L, N) one.
  g = gated_args();
  g.a = TensorRef::batched(fake(1), kBf, 3, M, K, 0, M * K, K, 1);
  g.b = TensorRef::batched(fake(2), kBf, 3, K, N, 0, N * K, 1, K);
  g.preact = TensorRef::batched(fake(3), kBf, 3, M, N, 0, M * N, N, 1);
  g.postact = TensorRef::batched(fake(4), kBf, 3, M, H, 0, M * H, H, 1);
  g.bias.row = TensorRef::vector(fake(6), kF32, N);
  EXPECT_NO_THROW(can_implement(g));
  g.bias.row = TensorRef::matrix(fake(6), kF32, 3, N);
  EXPECT_NO_THROW(can_implement(g));
  // K = 0 and empty problems need no instance.
  g = gated_args();
  g.a = row_major(fake(1), kBf, M, 0);
  g.b = col_major(fake(2), kBf, 0, N);
  EXPECT_NO_THROW(can_implement(g));
  g.preact.dtype = kF32;  // fp32 preact with a bf16 postact: not compiled, at K = 0 as at K > 0
  expect_gated_error(g, "preact float32 and postact bfloat16 are not compiled");
  g = gated_args();
  g.a = row_major(fake(1), kBf, 0, K);
  g.preact = row_major(fake(3), kBf, 0, N);
  g.postact = row_major(fake(4), kBf, 0, H);
  EXPECT_NO_THROW(gemm_gated(g, nullptr));  // nothing launched

  GemmDGatedArgs d = dgated_args();
  EXPECT_NO_THROW(can_implement(d));
  EXPECT_THROW(gemm_dgated(d, nullptr), CudaError);
  d.postact = TensorRef();
  EXPECT_NO_THROW(can_implement(d));
}

TEST(GemmGatedValidation, GatedArguments) {
  GemmGatedArgs g = gated_args();
  g.activation = Activation::kRelu;
  expect_gated_error(g, "activation is relu, expected a gated one");
  g = gated_args();
  g.activation = static_cast<Activation>(77);
  expect_gated_error(g, "activation is 77");
  g = gated_args();
  g.b = col_major(fake(2), kBf, K, N - 1);
  expect_gated_error(g, "expected an even N");
  g = gated_args();
  g.postact = row_major(fake(4), kBf, M, N);
  expect_gated_error(g, "postact has shape (128, 256) bfloat16, expected (M, N/2) = (128, 128)");
  g = gated_args();
  g.postact = TensorRef();
  expect_gated_error(g, "postact is absent");
  g = gated_args();
  g.postact.dtype = DType::kFloat16;
  expect_gated_error(g, "postact has dtype float16, expected bfloat16 or float32");
  g = gated_args();
  g.preact = col_major(fake(3), kBf, M, N);
  expect_gated_error(g, "preact is column-major");
  g = gated_args();
  g.postact = row_major(static_cast<char*>(fake(3)) + 64, kBf, M, H);  // inside preact
  expect_gated_error(g, "overlap");
  g = gated_args();
  g.beta = 1.f;
  expect_gated_error(g, "beta is");
  // Uncompiled: b row-major (also with concat_layout), fp32 preact.
  g = gated_args();
  g.b = row_major(fake(2), kBf, K, N);
  expect_gated_error(g, "not yet supported");
  g.concat_layout = true;
  expect_gated_error(g, "not yet supported");
}

// The compiled dtypes (quack/gemm_act.h): bf16 or fp16 inputs with outputs of the input dtype
// (both layouts); bf16 inputs with fp32 preact and postact (interleaved layout). Every other
// combination throws InvalidArgument naming the tensors, their dtypes and what is compiled.
TEST(GemmGatedValidation, Dtypes) {
  const DType kF16 = DType::kFloat16;
  GemmGatedArgs g = gated_args();
  g.a.dtype = g.b.dtype = g.preact.dtype = g.postact.dtype = kF16;
  EXPECT_NO_THROW(can_implement(g));
  EXPECT_THROW(gemm_gated(g, nullptr), CudaError);
  g.concat_layout = true;
  EXPECT_NO_THROW(can_implement(g));
  g = gated_args();
  g.preact.dtype = g.postact.dtype = kF32;
  EXPECT_NO_THROW(can_implement(g));
  EXPECT_THROW(gemm_gated(g, nullptr), CudaError);
  g.preact = TensorRef();
  EXPECT_NO_THROW(can_implement(g));
  // Uncompiled.
  g = gated_args();
  g.preact.dtype = g.postact.dtype = kF32;
  g.concat_layout = true;
  expect_gated_error(g, "preact float32 and postact float32 are not compiled for bfloat16 inputs (no kernel "
                        "instance), expected (preact, postact) = (bfloat16, bfloat16) with concat_layout");
  g = gated_args();
  g.preact.dtype = kF32;
  expect_gated_error(g, "preact float32 and postact bfloat16 are not compiled for bfloat16 inputs (no kernel "
                        "instance), expected (preact, postact) = (bfloat16, bfloat16) or (float32, float32)");
  g = gated_args();
  g.a.dtype = g.b.dtype = g.preact.dtype = kF16;
  g.postact.dtype = kF32;
  expect_gated_error(g, "expected (preact, postact) = (float16, float16)");

  GemmDGatedArgs d = dgated_args();
  d.a.dtype = d.b.dtype = d.preact.dtype = d.dpreact.dtype = d.postact.dtype = kF16;
  EXPECT_NO_THROW(can_implement(d));
  EXPECT_THROW(gemm_dgated(d, nullptr), CudaError);
  d.postact = TensorRef();
  EXPECT_NO_THROW(can_implement(d));
  d = dgated_args();
  d.postact.dtype = kF32;
  expect_dgated_error(d, "postact float32 is not compiled for bfloat16 inputs (no kernel instance), expected "
                         "postact = bfloat16");
  d = dgated_args();
  d.a.dtype = d.b.dtype = kF16;  // bf16 pairs with fp16 inputs
  d.postact.dtype = kF16;
  expect_dgated_error(d, "dpreact has dtype bfloat16, expected float16 (a's dtype: the (gate, up) pairs are packed "
                         "16-bit values of the input dtype)");
}

TEST(GemmGatedValidation, DGatedArguments) {
  GemmDGatedArgs g = dgated_args();
  g.activation = Activation::kSilu;
  expect_dgated_error(g, "activation is silu, expected a gated one");
  g = dgated_args();
  g.preact = row_major(fake(3), kBf, M, H);
  expect_dgated_error(g, "preact has shape (128, 128) bfloat16, expected (M, 2H) = (128, 256)");
  g = dgated_args();
  g.postact = row_major(fake(5), kBf, M, N);
  expect_dgated_error(g, "postact has shape");
  g = dgated_args();
  g.dpreact.dtype = kF32;
  g.preact.dtype = kF32;
  expect_dgated_error(g, "dpreact has dtype float32, expected bfloat16 (a's dtype");
  g = dgated_args();
  g.preact.dtype = DType::kFloat16;
  expect_dgated_error(g, "preact has dtype float16, expected bfloat16");
  g = dgated_args();
  g.preact = TensorRef();
  expect_dgated_error(g, "preact is absent");
  g = dgated_args();
  g.dpreact = col_major(fake(4), kBf, M, N);
  expect_dgated_error(g, "dpreact is column-major");
  g = dgated_args();
  g.b = col_major(fake(2), kBf, K, H);
  expect_dgated_error(g, "not yet supported");
}

// Outputs against inputs. gemm_gated as gemm_act (quack/gemm_act.h): preact and postact must not
// overlap a, b, a read c or the bias. gemm_dgated: dpreact and postact disjoint from a and b;
// dpreact either preact itself (in place, as gemm's d = c) or disjoint from it.
TEST(GemmGatedValidation, OutputsOverlappingInputs) {
  GemmGatedArgs g = gated_args();
  g.postact = row_major(fake(1), kBf, M, H);
  expect_gated_error(g, "postact overlaps a in memory");
  g = gated_args();
  g.preact = row_major(fake(2), kBf, M, N);
  expect_gated_error(g, "preact overlaps b in memory");
  g = gated_args();
  g.c = g.preact;
  g.beta = 1.f;
  expect_gated_error(g, "preact overlaps c in memory");
  g = gated_args();
  g.bias.row = TensorRef::vector(static_cast<char*>(fake(3)) + 128, kF32, N);
  expect_gated_error(g, "preact overlaps bias.row in memory");

  GemmDGatedArgs d = dgated_args();
  d.dpreact = d.preact;
  EXPECT_NO_THROW(can_implement(d));
  d.dpreact = row_major(static_cast<char*>(fake(3)) + 64, kBf, M, N);
  expect_dgated_error(d, "dpreact overlaps preact in memory");
  d = dgated_args();
  d.postact = row_major(fake(3), kBf, M, H);  // preact's first half: never preact's own view
  expect_dgated_error(d, "postact overlaps preact in memory");
  d = dgated_args();
  d.dpreact = row_major(fake(1), kBf, M, N);
  expect_dgated_error(d, "dpreact overlaps a in memory");
  d = dgated_args();
  d.postact = row_major(fake(2), kBf, M, H);
  expect_dgated_error(d, "postact overlaps b in memory");
}

TEST(GemmGatedValidation, Bias) {
  GemmArgs g = gemm_args();
  EXPECT_NO_THROW(can_implement(g));
  EXPECT_THROW(gemm(g, nullptr), CudaError);
  g.bias.row.dtype = kBf;
  EXPECT_NO_THROW(can_implement(g));
  g.bias.col = TensorRef::vector(fake(7), DType::kFloat16, M);
  EXPECT_NO_THROW(can_implement(g));
  g = gemm_args();
  g.d = col_major(fake(3), kBf, M, N);  // (row, column, column): served through Dᵀ
  EXPECT_NO_THROW(can_implement(g));
  g = gemm_args();
  g.bias.row = TensorRef::vector(fake(6), kF32, N + 1);
  expect_can_implement_error(g, "gemm", "bias.row has shape (257,) float32, expected (N,) = (256,)");
  g = gemm_args();
  g.bias.row = TensorRef::matrix(fake(6), kF32, 2, N);  // 2-D bias with 2-D operands
  expect_can_implement_error(g, "gemm", "bias.row has 2 dimensions");
  g = gemm_args();
  g.bias.row.dtype = DType::kInt32;
  expect_can_implement_error(g, "gemm", "bias.row has dtype int32");
  g = gemm_args();
  g.bias.row = TensorRef::vector(fake(6), kF32, N, 0, 2);  // strided
  expect_can_implement_error(g, "gemm", "bias.row has stride 2");
  g = gemm_args();
  g.bias.row = TensorRef::vector(static_cast<char*>(fake(6)) + 2, kF32, N);
  expect_can_implement_error(g, "gemm", "not 4-byte aligned");
  g = gemm_args();
  g.bias.row.device = 1;
  expect_can_implement_error(g, "gemm", "bias.row");
  g = gemm_args();
  g.bias.col = TensorRef::vector(fake(7), kF32, N);
  expect_can_implement_error(g, "gemm", "bias.col has shape (256,) float32, expected (M,) = (128,)");
  g = gemm_args();
  g.b = row_major(fake(2), kBf, K, N);  // (row, row, row) with a bias: no instance
  expect_can_implement_error(g, "gemm", "not yet supported for bfloat16 inputs and bfloat16 d with a bias");
  g = gemm_args();
  g.a.dtype = g.b.dtype = g.d.dtype = DType::kFloat16;  // fp16 with a bias: compiled
  EXPECT_NO_THROW(can_implement(g));
  EXPECT_THROW(gemm(g, nullptr), CudaError);
  g.bias.row.dtype = DType::kFloat16;
  EXPECT_NO_THROW(can_implement(g));
  g.b = row_major(fake(2), DType::kFloat16, K, N);  // (row, row, row) with a bias: no instance
  expect_can_implement_error(g, "gemm", "not yet supported for float16 inputs and float16 d with a bias");
  g = gemm_args();
  g.d.dtype = kF32;  // fp32 d with a bias: not compiled
  expect_can_implement_error(g, "gemm", "d float32 is not compiled for bfloat16 inputs (no kernel instance), expected d = bfloat16 "
                          "(with a bias)");
  // K = 0 runs no GEMM kernel, yet the same dtypes are refused: one answer whatever K.
  g.a = row_major(fake(1), kBf, M, 0);
  g.b = col_major(fake(2), kBf, 0, N);
  expect_can_implement_error(g, "gemm", "d float32 is not compiled for bfloat16 inputs");
  // Batched: (N,) shared, (L, N) per batch, (L + 1, N) wrong.
  g = gemm_args();
  g.a = TensorRef::batched(fake(1), kBf, 3, M, K, 0, M * K, K, 1);
  g.b = TensorRef::batched(fake(2), kBf, 3, K, N, 0, N * K, 1, K);
  g.d = TensorRef::batched(fake(3), kBf, 3, M, N, 0, M * N, N, 1);
  EXPECT_NO_THROW(can_implement(g));
  g.bias.row = TensorRef::matrix(fake(6), kF32, 3, N);
  EXPECT_NO_THROW(can_implement(g));
  g.bias.row = TensorRef::matrix(fake(6), kF32, 4, N);
  expect_can_implement_error(g, "gemm", "bias.row has shape (4, 256) float32, expected (N,) or (L, N)");

  GemmActArgs a;
  a.a = row_major(fake(1), kBf, M, K);
  a.b = col_major(fake(2), kBf, K, N);
  a.postact = row_major(fake(4), kBf, M, N);
  a.activation = Activation::kRelu;
  a.bias.row = TensorRef::vector(fake(6), kF32, N);
  EXPECT_NO_THROW(can_implement(a));
  a.activation = Activation::kSwiglu;
  expect_can_implement_error(a, "gemm_act", "activation is swiglu (gated: gemm_gated computes it)");
  a.activation = Activation::kRelu;
  a.bias.row = TensorRef::vector(fake(6), kF32, M);
  expect_can_implement_error(a, "gemm_act", "bias.row has shape");
}

// Unaligned K and N as gemm: a and b that TMA cannot address get padded copies (workspace
// bytes), outputs and c take the epilogue's plain path; gemm_dgated's packed preact / dpreact
// need 4-byte (gate, up) pairs.
TEST(GemmGatedValidation, UnalignedOperands) {
  constexpr int64_t Ku = 63;  // a's rows and b's columns (K-major) of 126 bytes
  GemmGatedArgs g = gated_args();
  EXPECT_EQ(gemm_workspace_size(g), 0u);
  g.a = row_major(fake(1), kBf, M, Ku);
  g.b = col_major(fake(2), kBf, Ku, N);
  // a: 128 rows of 63 -> 64 elements (16 KB), b: 256 columns of 63 -> 64 (32 KB), 256-aligned.
  EXPECT_EQ(gemm_workspace_size(g), size_t(M * 64 * 2 + N * 64 * 2));
  g.concat_layout = true;
  EXPECT_EQ(gemm_workspace_size(g), size_t(M * 64 * 2 + N * 64 * 2));
  g.workspace = fake(9);
  g.workspace_bytes = 1024;
  expect_gated_error(g, "workspace has 1024 bytes, expected ≥ 49152");
  g.workspace_bytes = 49152;
  EXPECT_NO_THROW(can_implement(g));
  EXPECT_THROW(gemm_gated(g, nullptr), CudaError);
  // Odd H: postact rows of 2·H' bytes (not 16-byte multiples) and preact rows of 4·H' bytes.
  constexpr int64_t Nu = 2 * 63;
  g = gated_args();
  g.b = col_major(fake(2), kBf, K, Nu);
  g.preact = row_major(fake(3), kBf, M, Nu);
  g.postact = row_major(fake(4), kBf, M, Nu / 2);
  EXPECT_EQ(gemm_workspace_size(g), 0u);  // b K-major (rows of K = 64): TMA-ready
  EXPECT_NO_THROW(can_implement(g));
  g.postact = TensorRef::matrix(static_cast<char*>(fake(4)) + 2, kBf, M, Nu / 2);  // odd-element view
  EXPECT_NO_THROW(can_implement(g));
  g.postact = TensorRef::matrix(static_cast<char*>(fake(4)) + 1, kBf, M, Nu / 2);
  expect_gated_error(g, "postact has a base address that is not 2-byte aligned");

  GemmDGatedArgs d = dgated_args();
  EXPECT_EQ(gemm_workspace_size(d), 0u);
  d.a = row_major(fake(1), kBf, M, Ku);
  d.b = row_major(fake(2), kBf, Ku, H);  // K-major rows of H: TMA-ready, only a is copied
  EXPECT_EQ(gemm_workspace_size(d), size_t(M * 64 * 2));
  EXPECT_NO_THROW(can_implement(d));
  // H = 63: pairs rows of 252 bytes (not 16-byte multiples): plain loads and stores.
  d = dgated_args();
  d.b = row_major(fake(2), kBf, K, 63);
  d.preact = row_major(fake(3), kBf, M, 126);
  d.dpreact = row_major(fake(4), kBf, M, 126);
  d.postact = row_major(fake(5), kBf, M, 63);
  EXPECT_EQ(gemm_workspace_size(d), size_t(K * 64 * 2));  // b: K rows of 63 -> 64
  EXPECT_NO_THROW(can_implement(d));
  EXPECT_THROW(gemm_dgated(d, nullptr), CudaError);
  // Pairs split across 4-byte words: odd base (in elements) or odd leading stride.
  d.preact = TensorRef::matrix(static_cast<char*>(fake(3)) + 2, kBf, M, 126);
  expect_dgated_error(d, "preact");
  expect_dgated_error(d, "expected a 4-byte aligned base and even strides");
  d.preact = TensorRef::matrix(fake(3), kBf, M, 126, 0, 127, 1);
  expect_dgated_error(d, "leading stride 127");
  d.preact = row_major(fake(3), kBf, M, 126);
  d.dpreact = TensorRef::matrix(fake(4), kBf, M, 126, 0, 129, 1);
  expect_dgated_error(d, "dpreact");
}

TEST(GemmGatedValidation, ActivationNames) {
  for (int v = 0; v <= static_cast<int>(Activation::kGlu); ++v) {
    const Activation a = static_cast<Activation>(v);
    Activation back = Activation::kRelu;
    ASSERT_TRUE(activation_from_name(activation_name(a), &back)) << activation_name(a);
    EXPECT_EQ(back, a);
    EXPECT_EQ(is_gated(a), v >= static_cast<int>(Activation::kSwiglu)) << activation_name(a);
  }
  EXPECT_STREQ(activation_name(Activation::kSwigluOai), "swiglu_oai");
  EXPECT_FALSE(is_gated(static_cast<Activation>(11)));
}

}  // namespace
}  // namespace quack
