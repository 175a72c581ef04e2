// Tier 1: validation of gemm_act / gemm_dact (quack/gemm_act.h) before any CUDA call (no GPU):
// each bad argument throws quack::InvalidArgument whose message starts with the function and
// names the argument; valid arguments get past validation and meet the hidden device
// (CudaError), so each negative test breaks exactly one thing of a valid baseline. Also the
// activation names.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "host_test_util.h"
#include "quack/errors.h"
#include "quack/gemm_act.h"

namespace quack {
namespace {

using namespace test;

constexpr int64_t M = 128, N = 256, K = 64;
constexpr DType kBf = DType::kBFloat16;

// gemm_act of a Linear forward: a (M, K) row-major, b = Wᵀ (K, N) column-major, outputs row-major.
GemmActArgs act_args() {
  GemmActArgs g;
  g.a = row_major(fake(1), kBf, M, K);
  g.b = col_major(fake(2), kBf, K, N);
  g.preact = row_major(fake(3), kBf, M, N);
  g.postact = row_major(fake(4), kBf, M, N);
  g.activation = Activation::kGeluTanhApprox;
  return g;
}

// gemm_dact of an MLP's fc2 dgrad: a = dout (M, K) row-major, b = W (K, N) row-major.
GemmDActArgs dact_args() {
  GemmDActArgs g;
  g.a = row_major(fake(1), kBf, M, K);
  g.b = row_major(fake(2), kBf, K, N);
  g.preact = row_major(fake(3), kBf, M, N);
  g.dpreact = row_major(fake(4), kBf, M, N);
  g.postact = row_major(fake(5), kBf, M, N);
  g.activation = Activation::kReluSq;
  return g;
}

void expect_act_error(const GemmActArgs& g, const std::string& part) {
  expect_can_implement_error(g, "gemm_act", part);
  EXPECT_THROW(gemm_act(g, nullptr), InvalidArgument) << part;
}

void expect_dact_error(const GemmDActArgs& g, const std::string& part) {
  expect_can_implement_error(g, "gemm_dact", part);
  EXPECT_THROW(gemm_dact(g, nullptr), InvalidArgument) << part;
}

TEST(GemmActValidation, Baseline) {
  GemmActArgs a = act_args();
  EXPECT_NO_THROW(can_implement(a));
  EXPECT_THROW(gemm_act(a, nullptr), CudaError);  // past validation: the hidden device
  a.preact = TensorRef();  // store_preact off
  EXPECT_NO_THROW(can_implement(a));
  a = act_args();
  a.c = row_major(fake(5), kBf, M, N);
  a.beta = -1.f;
  a.alpha = 0.5f;
  EXPECT_NO_THROW(can_implement(a));
  a.c = col_major(fake(5), kBf, M, N);  // another layout is fine when c is not read
  a.beta = 0.f;
  EXPECT_NO_THROW(can_implement(a));
  for (int v = 0; v <= static_cast<int>(Activation::kTanh); ++v) {
    a.activation = static_cast<Activation>(v);
    EXPECT_NO_THROW(can_implement(a)) << v;
  }
  // Batched.
  a = act_args();
  a.a = TensorRef::batched(fake(1), kBf, 3, M, K, 0, M * K, K, 1);
  a.b = TensorRef::batched(fake(2), kBf, 3, K, N, 0, N * K, 1, K);
  a.preact = TensorRef::batched(fake(3), kBf, 3, M, N, 0, M * N, N, 1);
  a.postact = TensorRef::batched(fake(4), kBf, 3, M, N, 0, M * N, N, 1);
  EXPECT_NO_THROW(can_implement(a));
  // Empty problems and K = 0 need no instance (any layout of the (M, N) tensors' peers).
  a = act_args();
  a.a = row_major(fake(1), kBf, 0, K);
  a.preact = row_major(fake(3), kBf, 0, N);
  a.postact = row_major(fake(4), kBf, 0, N);
  EXPECT_NO_THROW(gemm_act(a, nullptr));  // nothing launched
  a = act_args();
  a.a = row_major(fake(1), kBf, M, 0);
  a.b = col_major(fake(2), kBf, 0, N);
  EXPECT_NO_THROW(can_implement(a));

  GemmDActArgs d = dact_args();
  EXPECT_NO_THROW(can_implement(d));
  EXPECT_THROW(gemm_dact(d, nullptr), CudaError);
  d.postact = TensorRef();
  EXPECT_NO_THROW(can_implement(d));
}

TEST(GemmActValidation, ActArguments) {
  GemmActArgs g = act_args();
  g.postact = TensorRef();
  expect_act_error(g, "postact is absent");
  g = act_args();
  g.activation = static_cast<Activation>(99);
  expect_act_error(g, "activation is 99");
  g = act_args();
  g.postact = row_major(fake(4), kBf, M, N + 8);
  expect_act_error(g, "postact has shape");
  g = act_args();
  g.preact = row_major(fake(3), kBf, M + 1, N);
  expect_act_error(g, "preact has shape");
  g = act_args();
  g.preact = col_major(fake(3), kBf, M, N);
  expect_act_error(g, "preact is column-major");
  g = act_args();
  g.beta = 1.f;
  expect_act_error(g, "beta is");
  g = act_args();
  g.c = row_major(fake(5), DType::kFloat32, M, N);
  g.beta = 1.f;
  expect_act_error(g, "c has dtype float32");
  g = act_args();
  g.a.dtype = g.b.dtype = DType::kFloat32;
  expect_act_error(g, "a has dtype float32");
  g = act_args();
  g.b.dtype = DType::kFloat16;
  expect_act_error(g, "b has dtype float16");
  g = act_args();
  g.postact.dtype = DType::kInt32;
  expect_act_error(g, "postact has dtype int32");
  g = act_args();
  g.postact = row_major(static_cast<char*>(fake(4)) + 1, kBf, M, N);  // an odd byte address
  expect_act_error(g, "postact has a base address that is not 2-byte aligned");
  g = act_args();
  g.postact.device = 1;
  expect_act_error(g, "postact");
  g = act_args();
  g.postact = row_major(static_cast<char*>(fake(3)) + 64, kBf, M, N);  // inside preact
  expect_act_error(g, "overlap");
}

// quack/gemm_act.h: preact and postact must not overlap an input (a, b, a read c, the bias).
TEST(GemmActValidation, OutputsOverlappingInputs) {
  GemmActArgs g = act_args();
  g.postact = row_major(fake(1), kBf, M, N);  // a's memory
  expect_act_error(g, "postact overlaps a in memory");
  g = act_args();
  g.preact = row_major(static_cast<char*>(fake(2)) + 256, kBf, M, N);  // inside b
  expect_act_error(g, "preact overlaps b in memory");
  g = act_args();
  g.c = g.preact;  // in place of a read c: the doc's rule has no in-place exception
  g.beta = 1.f;
  expect_act_error(g, "preact overlaps c in memory");
  g.beta = 0.f;  // c not read: not an input
  EXPECT_NO_THROW(can_implement(g));
  g = act_args();
  g.bias.row = TensorRef::vector(static_cast<char*>(fake(4)) + 64, DType::kFloat32, N);
  expect_act_error(g, "postact overlaps bias.row in memory");
  // K = 0: a and b are empty (not read), so nothing can overlap them.
  g = act_args();
  g.a = row_major(fake(4), kBf, M, 0);
  g.b = col_major(fake(4), kBf, 0, N);
  EXPECT_NO_THROW(can_implement(g));
}

TEST(GemmActValidation, UncompiledCombinations) {
  GemmActArgs g = act_args();
  g.b = row_major(fake(2), kBf, K, N);  // b row-major: no gemm_act instance
  expect_act_error(g, "not yet supported");
  GemmDActArgs d = dact_args();
  d.b = col_major(fake(2), kBf, K, N);
  expect_dact_error(d, "not yet supported");
}

// The compiled dtypes (quack/gemm_act.h): bf16 or fp16 inputs with outputs of the input dtype;
// bf16 inputs with fp32 preact and postact (gemm_act). Each passes validation (the hidden device
// answers); every other combination throws InvalidArgument naming the tensors, their dtypes and
// the compiled combinations.
TEST(GemmActValidation, CompiledDtypes) {
  const DType kF16 = DType::kFloat16, kF32 = DType::kFloat32;
  GemmActArgs g = act_args();
  g.a.dtype = g.b.dtype = g.preact.dtype = g.postact.dtype = kF16;
  EXPECT_NO_THROW(can_implement(g));
  EXPECT_THROW(gemm_act(g, nullptr), CudaError);
  g.c = row_major(fake(5), kF16, M, N);
  g.beta = 1.f;
  EXPECT_NO_THROW(can_implement(g));
  g = act_args();
  g.preact.dtype = g.postact.dtype = kF32;
  EXPECT_NO_THROW(can_implement(g));
  EXPECT_THROW(gemm_act(g, nullptr), CudaError);
  g.c = row_major(fake(5), kF32, M, N);  // C in preact's dtype
  g.beta = 0.5f;
  EXPECT_NO_THROW(can_implement(g));
  g = act_args();
  g.preact = TensorRef();  // not stored: postact's dtype decides
  g.postact.dtype = kF32;
  EXPECT_NO_THROW(can_implement(g));
  g.postact = col_major(fake(4), kF32, M, N);  // column-major outputs through Dᵀ
  EXPECT_NO_THROW(can_implement(g));

  GemmDActArgs d = dact_args();
  d.a.dtype = d.b.dtype = d.preact.dtype = d.dpreact.dtype = d.postact.dtype = kF16;
  EXPECT_NO_THROW(can_implement(d));
  EXPECT_THROW(gemm_dact(d, nullptr), CudaError);
  d.postact = TensorRef();
  EXPECT_NO_THROW(can_implement(d));
}

TEST(GemmActValidation, UncompiledDtypesThrow) {
  const DType kF16 = DType::kFloat16, kF32 = DType::kFloat32;
  GemmActArgs g = act_args();
  g.postact.dtype = kF32;  // bf16 preact with an fp32 postact
  expect_act_error(g, "gemm_act: preact bfloat16 and postact float32 are not compiled for bfloat16 inputs (no kernel "
                      "instance), expected (preact, postact) = (bfloat16, bfloat16) or (float32, float32)");
  g = act_args();
  g.preact.dtype = kF32;  // fp32 preact with a bf16 postact
  expect_act_error(g, "preact float32 and postact bfloat16 are not compiled");
  g.a = row_major(fake(1), kBf, M, 0);  // K = 0: no GEMM kernel, the same answer
  g.b = col_major(fake(2), kBf, 0, N);
  expect_act_error(g, "preact float32 and postact bfloat16 are not compiled");
  g = act_args();
  g.a.dtype = g.b.dtype = g.preact.dtype = kF16;
  g.postact.dtype = kF32;  // fp32 outputs of fp16 inputs
  expect_act_error(g, "preact float16 and postact float32 are not compiled for float16 inputs (no kernel instance), "
                      "expected (preact, postact) = (float16, float16)");
  g.preact = TensorRef();
  expect_act_error(g, "(preact is not stored: its dtype is taken as c's or postact's)");
  g = act_args();
  g.a.dtype = g.b.dtype = kF16;  // bf16 outputs of fp16 inputs: not an output dtype of fp16 inputs
  expect_act_error(g, "postact has dtype bfloat16, expected float16 or float32");

  GemmDActArgs d = dact_args();
  d.preact.dtype = d.dpreact.dtype = d.postact.dtype = kF32;
  expect_dact_error(d, "dpreact float32, preact float32 and postact float32 are not compiled for bfloat16 inputs "
                       "(no kernel instance), expected (dpreact, preact, postact) = (bfloat16, bfloat16, bfloat16)");
  d = dact_args();
  d.postact.dtype = kF32;
  expect_dact_error(d, "postact float32 are not compiled");
  d = dact_args();
  d.a.dtype = d.b.dtype = d.preact.dtype = d.dpreact.dtype = d.postact.dtype = kF16;
  d.postact.dtype = kF32;
  expect_dact_error(d, "expected (dpreact, preact, postact) = (float16, float16, float16)");
}

TEST(GemmActValidation, DActArguments) {
  GemmDActArgs g = dact_args();
  g.preact = TensorRef();
  expect_dact_error(g, "preact is absent");
  g = dact_args();
  g.dpreact = TensorRef();
  expect_dact_error(g, "dpreact is absent");
  g = dact_args();
  g.preact.dtype = DType::kFloat32;
  expect_dact_error(g, "preact has dtype float32, expected bfloat16");
  g = dact_args();
  g.activation = static_cast<Activation>(-1);
  expect_dact_error(g, "activation is -1");
  g = dact_args();
  g.postact = col_major(fake(5), kBf, M, N);
  expect_dact_error(g, "postact is column-major");
  g = dact_args();
  g.postact = g.dpreact;
  expect_dact_error(g, "overlap");
  // Against the inputs: disjoint from a and b; preact itself (in place, as gemm's d = c) or disjoint.
  g = dact_args();
  g.dpreact = g.preact;
  EXPECT_NO_THROW(can_implement(g));
  g.dpreact = row_major(static_cast<char*>(fake(3)) + 64, kBf, M, N);  // preact shifted
  expect_dact_error(g, "dpreact overlaps preact in memory");
  g = dact_args();
  g.postact = row_major(static_cast<char*>(fake(3)) + 64, kBf, M, N);
  expect_dact_error(g, "postact overlaps preact in memory");
  g = dact_args();
  g.dpreact = row_major(fake(1), kBf, M, N);
  expect_dact_error(g, "dpreact overlaps a in memory");
  g = dact_args();
  g.postact = row_major(fake(2), kBf, M, N);
  expect_dact_error(g, "postact overlaps b in memory");
}

// Any alignment, as gemm: a and b that TMA cannot address through padded copies in the
// workspace (gemm_workspace_size counts them), c, preact, postact (and gemm_dact's preact input)
// through the epilogue's plain loads and stores (no workspace). A short or misaligned workspace is
// rejected.
TEST(GemmActValidation, UnalignedOperands) {
  GemmActArgs g = act_args();
  EXPECT_EQ(gemm_workspace_size(g), 0u);
  g.postact = TensorRef::matrix(fake(4), kBf, M, N, 0, N + 4, 1);  // rows of 520 bytes
  g.preact = row_major(static_cast<char*>(fake(3)) + 2, kBf, M, N);  // a 2-byte offset
  EXPECT_NO_THROW(can_implement(g));
  EXPECT_EQ(gemm_workspace_size(g), 0u);
  g = act_args();
  g.c = TensorRef::matrix(fake(5), kBf, M, N, 0, N + 1, 1);
  g.beta = 1.f;
  EXPECT_NO_THROW(can_implement(g));
  EXPECT_EQ(gemm_workspace_size(g), 0u);
  // K = 63: a (128 rows of 63 -> 64) and b (256 columns of 63 -> 64), each 256-byte aligned;
  // outputs of N = 250 (500-byte rows).
  g = act_args();
  g.a = row_major(fake(1), kBf, M, 63);
  g.b = col_major(fake(2), kBf, 63, 250);
  g.preact = row_major(fake(3), kBf, M, 250);
  g.postact = row_major(fake(4), kBf, M, 250);
  EXPECT_NO_THROW(can_implement(g));
  EXPECT_EQ(gemm_workspace_size(g), size_t(M * 64 * 2 + (250 * 64 * 2 + 255) / 256 * 256));
  g.workspace = fake(9);
  g.workspace_bytes = gemm_workspace_size(g) - 1;
  expect_act_error(g, "workspace has");
  g.workspace_bytes += 1;
  EXPECT_NO_THROW(can_implement(g));
  g.workspace = static_cast<char*>(fake(9)) + 8;
  expect_act_error(g, "workspace is not 16-byte aligned");
  g = act_args();  // checked also where no copy needs it (aligned operands)
  g.workspace = static_cast<char*>(fake(9)) + 8;
  expect_act_error(g, "workspace is not 16-byte aligned");
  g.workspace = fake(9);  // 0 bytes: enough without copies
  EXPECT_NO_THROW(can_implement(g));
  // A view at an odd column of a wider a: a alone is copied.
  g = act_args();
  g.a = TensorRef::matrix(static_cast<char*>(fake(1)) + 2, kBf, M, K, 0, K + 8, 1);
  EXPECT_EQ(gemm_workspace_size(g), size_t(M * K * 2));

  GemmDActArgs d = dact_args();
  EXPECT_EQ(gemm_workspace_size(d), 0u);
  // N = 50257 (an LLM vocabulary): b (K, N) row-major is copied (K rows of 50264), the (M, N)
  // tensors go through plain loads and stores. M = 8 keeps each tensor inside its fake MB.
  d.a = row_major(fake(1), kBf, 8, K);
  d.b = row_major(fake(2), kBf, K, 50257);
  d.preact = row_major(fake(3), kBf, 8, 50257);
  d.dpreact = row_major(fake(4), kBf, 8, 50257);
  d.postact = row_major(fake(5), kBf, 8, 50257);
  EXPECT_NO_THROW(can_implement(d));
  EXPECT_EQ(gemm_workspace_size(d), size_t((K * 50264 * 2 + 255) / 256 * 256));
  d.workspace = fake(9);
  d.workspace_bytes = 16;
  expect_dact_error(d, "workspace has 16 bytes");
}

TEST(GemmActValidation, ActivationNames) {
  for (int v = 0; v <= static_cast<int>(Activation::kQuickGelu); ++v) {
    const Activation a = static_cast<Activation>(v);
    Activation back = Activation::kRelu;
    ASSERT_TRUE(activation_from_name(activation_name(a), &back)) << activation_name(a);
    EXPECT_EQ(back, a);
    EXPECT_STRNE(activation_name(a), "unknown") << v;
  }
  EXPECT_STREQ(activation_name(Activation::kGeluTanhApprox), "gelu_tanh_approx");
  EXPECT_STREQ(activation_name(Activation::kGeluErf), "gelu_erf");
  EXPECT_STREQ(activation_name(Activation::kQuickGelu), "quick_gelu");
  EXPECT_FALSE(is_gated(Activation::kGeluErf));
  EXPECT_FALSE(is_gated(Activation::kQuickGelu));
  EXPECT_TRUE(is_gated(Activation::kGlu));
  EXPECT_STREQ(activation_name(static_cast<Activation>(13)), "unknown");
  EXPECT_STREQ(activation_name(static_cast<Activation>(42)), "unknown");
  Activation x = Activation::kRelu;
  EXPECT_TRUE(activation_from_name("none", &x));
  EXPECT_EQ(x, Activation::kIdentity);
  EXPECT_FALSE(activation_from_name("gelu", &x));
  EXPECT_FALSE(activation_from_name(nullptr, &x));
}

}  // namespace
}  // namespace quack
