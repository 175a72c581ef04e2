// Tier 1: gemm_rotary's validation (quack/gemm_rotary.h) without a device: every check names
// the function and the argument, before any CUDA call; valid arguments reach the (hidden)
// device.
#include <gtest/gtest.h>

#include <string>

#include "host_test_util.h"
#include "quack/errors.h"
#include "quack/gemm_rotary.h"

namespace quack {
namespace {

using namespace test;

constexpr int64_t T = 64, M = 2 * T, K = 64, HD = 128, N = 3 * 2 * HD;
constexpr DType kBf = DType::kBFloat16;

GemmRotaryArgs args() {
  GemmRotaryArgs g;
  g.a = row_major(fake(1), kBf, M, K);
  g.b = col_major(fake(2), kBf, K, N);
  g.d = row_major(fake(3), kBf, M, N);
  g.cos = row_major(fake(4), DType::kFloat32, T, HD / 2);
  g.sin = row_major(fake(5), DType::kFloat32, T, HD / 2);
  g.rotary_cols = 2 * 2 * HD;
  g.head_dim = HD;
  g.seqlen = T;
  return g;
}

void expect_error(const GemmRotaryArgs& g, const std::string& part) {
  expect_can_implement_error(g, "gemm_rotary", part);
  EXPECT_THROW(gemm_rotary(g, nullptr), InvalidArgument) << part;
}

TEST(GemmRotaryValidation, Baseline) {
  GemmRotaryArgs g = args();
  EXPECT_NO_THROW(can_implement(g));
  EXPECT_THROW(gemm_rotary(g, nullptr), CudaError);  // past validation: the hidden device
  g.rotary_cols = 0;  // nothing rotated: a plain GEMM
  EXPECT_NO_THROW(can_implement(g));
  g = args();
  g.cos = row_major(fake(4), DType::kFloat32, 2 * T, HD);  // a wider, longer table's view
  g.cos.shape[1] = HD / 2;
  g.sin = g.cos;
  g.sin.data = fake(5);
  EXPECT_NO_THROW(can_implement(g));
}

// cos and sin as the two columns of one (S_ro, head_dim / 2, 2) fp32 tensor (what
// gemm_rotary_ops passes: one float2 per pair in the epilogue); a column stride of 2 is accepted
// only in that form.
TensorRef pair_column(const void* base, int which, int64_t rows, int64_t row_stride) {
  return TensorRef::matrix(static_cast<const float*>(base) + which, DType::kFloat32, rows, HD / 2, 0, row_stride, 2);
}

TEST(GemmRotaryValidation, PairedTables) {
  GemmRotaryArgs g = args();
  g.cos = pair_column(fake(4), 0, T, HD);
  g.sin = pair_column(fake(4), 1, T, HD);
  EXPECT_NO_THROW(can_implement(g));
  g.cos = pair_column(fake(4), 0, 2 * T, HD + 2);  // a longer table with padded rows (even stride)
  g.sin = pair_column(fake(4), 1, 2 * T, HD + 2);
  EXPECT_NO_THROW(can_implement(g));
  g.cos = pair_column(fake(4), 0, T, HD + 1);  // odd row stride: rows not 8-byte aligned
  g.sin = pair_column(fake(4), 1, T, HD + 1);
  expect_error(g, "cos is (");
  g.cos = pair_column(fake(4), 1, T, HD);  // base 4 bytes past 8-byte alignment
  g.sin = pair_column(fake(4), 2, T, HD);
  expect_error(g, "cos is (");
  g.cos = pair_column(fake(4), 0, T, HD);  // sin not the element after cos
  g.sin = pair_column(fake(5), 1, T, HD);
  expect_error(g, "cos is (");
  g.cos = pair_column(fake(4), 0, T, HD);  // sin first: (sin, cos) pairs are not this layout
  g.sin = pair_column(fake(4), -1, T, HD);
  expect_error(g, "cos is (");
}

TEST(GemmRotaryValidation, Arguments) {
  GemmRotaryArgs g = args();
  g.head_dim = 7;
  expect_error(g, "head_dim is 7");
  g = args();
  g.head_dim = 0;
  expect_error(g, "head_dim is 0");
  g = args();
  g.head_dim = 100;  // 768 % 100 != 0
  expect_error(g, "expected a multiple of head_dim = 100");
  g = args();
  g.rotary_cols = 100;
  expect_error(g, "rotary_cols is 100");
  g = args();
  g.rotary_cols = N + HD;
  expect_error(g, "rotary_cols is");
  g = args();
  g.seqlen = 48;  // 128 % 48 != 0
  expect_error(g, "seqlen is 48");
  g = args();
  g.seqlen = 0;
  expect_error(g, "seqlen is 0");
  g = args();
  g.seqlen = 2 * T;  // the tables hold T positions
  expect_error(g, "cos has shape");
  g = args();
  g.cos = row_major(fake(4), DType::kFloat32, T, HD);
  g.sin = row_major(fake(5), DType::kFloat32, T, HD);
  expect_error(g, "cos");
  g = args();
  g.cos.dtype = kBf;
  expect_error(g, "cos has dtype bfloat16");
  g = args();
  g.sin = col_major(fake(5), DType::kFloat32, T, HD / 2);
  expect_error(g, "sin is (");
  g = args();
  g.d.dtype = DType::kFloat32;
  expect_error(g, "d has dtype float32");
  g = args();
  g.d = col_major(fake(3), kBf, M, N);
  expect_error(g, "d");
  g = args();
  g.d.data = g.cos.data;
  expect_error(g, "overlap");
  g = args();
  g.a = TensorRef();
  expect_error(g, "a");
}

TEST(GemmRotaryValidation, UncompiledDtypes) {
  GemmRotaryArgs g = args();
  g.a.dtype = g.b.dtype = g.d.dtype = DType::kFloat16;
  expect_error(g, "a has dtype float16, expected bfloat16");
}

}  // namespace
}  // namespace quack
