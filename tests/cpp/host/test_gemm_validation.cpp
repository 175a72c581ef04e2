// Tier 1: every validation path of gemm / can_implement throws quack::InvalidArgument (a
// std::invalid_argument) whose message names the function, the argument, what came and what was
// expected, before any CUDA call (no GPU).
//
// Pointers are fake, 16-byte aligned and never dereferenced. CUDA is hidden from the process (as
// in test_validation.cpp), so a gemm call that gets past validation meets "no device" and throws
// CudaError: the Baseline tests use that to show the unmodified arguments are valid, so each
// negative test breaks exactly one thing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>

#include "host_test_util.h"
#include "quack/errors.h"
#include "quack/gemm.h"

namespace quack {
namespace {

using namespace test;

constexpr int64_t M = 128, N = 256, K = 64;

// A (M, K) row-major, B (K, N) column-major, D (M, N) row-major, all bf16 (the (K, K) mainloop).
GemmArgs args2d() {
  GemmArgs g;
  g.a = TensorRef::matrix(fake(1), DType::kBFloat16, M, K);
  g.b = TensorRef::matrix(fake(2), DType::kBFloat16, K, N, 0, /*row_stride=*/1, /*col_stride=*/K);
  g.d = TensorRef::matrix(fake(3), DType::kBFloat16, M, N);
  return g;
}

// a (M, K), b (K, N), d (M, N) with the given orientations ('r' row-major, 'c' column-major),
// dtypes ab and dd; c (like d) with beta when with_c.
GemmArgs args_layout(const char* abd, DType ab = DType::kBFloat16, DType dd = DType::kBFloat16,
                     bool with_c = false) {
  auto mk = [](char o, void* p, DType t, int64_t r, int64_t c) {
    return o == 'r' ? row_major(p, t, r, c) : col_major(p, t, r, c);
  };
  GemmArgs g;
  g.a = mk(abd[0], fake(1), ab, M, K);
  g.b = mk(abd[1], fake(2), ab, K, N);
  g.d = mk(abd[2], fake(3), dd, M, N);
  if (with_c) {
    g.c = mk(abd[2], fake(4), dd, M, N);
    g.beta = 0.5f;
  }
  return g;
}

// Transposes the last two strides of a 3-D tensor's matrix part: (L, R, C) strides (R·C, C, 1)
// become (R·C, 1, R) (column-major batches).
TensorRef col_major3(void* p, DType t, int64_t L, int64_t r, int64_t c);

GemmArgs args3d(int64_t L = 4) {
  GemmArgs g;
  g.a = TensorRef::batched(fake(1), DType::kBFloat16, L, M, K, 0, M * K, K, 1);
  g.b = TensorRef::batched(fake(2), DType::kBFloat16, L, K, N, 0, N * K, 1, K);
  g.d = TensorRef::batched(fake(3), DType::kBFloat16, L, M, N, 0, M * N, N, 1);
  return g;
}

TensorRef col_major3(void* p, DType t, int64_t L, int64_t r, int64_t c) { return TensorRef::batched(p, t, L, r, c, 0, r * c, 1, r); }

void expect_error(const GemmArgs& g, const std::string& part) {
  expect_can_implement_error(g, "gemm", part);
  // gemm validates the same way before any CUDA call.
  EXPECT_THROW(gemm(g, nullptr), InvalidArgument) << part;
}

void expect_valid(const GemmArgs& g) {
  EXPECT_NO_THROW(can_implement(g));
  // Past validation, gemm reaches CUDA, which is hidden: CudaError, never InvalidArgument.
  EXPECT_THROW(gemm(g, nullptr), CudaError);
}

TEST(GemmValidation, IsInvalidArgument) {
  static_assert(std::is_base_of<std::invalid_argument, InvalidArgument>::value, "");
}

TEST(GemmValidation, Baseline) {
  expect_valid(args2d());
  expect_valid(args3d());
  GemmArgs g = args2d();
  g.d.dtype = DType::kFloat32;
  expect_valid(g);
  g = args2d();
  g.a.dtype = g.b.dtype = g.d.dtype = DType::kFloat16;
  expect_valid(g);
  g = args2d();
  g.c = TensorRef::matrix(fake(4), DType::kBFloat16, M, N);
  g.beta = 0.5f;
  expect_valid(g);
  g.d = g.c;  // in place
  expect_valid(g);
}

// Every (a, b, d) orientation with a kernel instance (gemm.cpp's table): the three mainloop
// majors (a, b) = (row, column), (row, row), (column, row) with d row-major, and the same kernels
// with the operands swapped for d column-major (Dᵀ = Bᵀ·Aᵀ).
const char* const kSupported[] = {"rcr", "rrr", "crr", "rcc", "ccc", "crc"};

TEST(GemmValidation, LayoutsAccepted) {
  for (const char* l : kSupported) {
    SCOPED_TRACE(l);
    expect_valid(args_layout(l));
    expect_valid(args_layout(l, DType::kBFloat16, DType::kBFloat16, /*with_c=*/true));
    expect_valid(args_layout(l, DType::kFloat16, DType::kFloat16, true));
    expect_valid(args_layout(l, DType::kBFloat16, DType::kFloat32, true));
    // c of the other orientation is fine when it is not read (beta = 0).
    GemmArgs g = args_layout(l);
    g.c = l[2] == 'r' ? col_major(fake(4), DType::kBFloat16, M, N) : row_major(fake(4), DType::kBFloat16, M, N);
    expect_valid(g);
  }
  // fp16 -> fp32 (kk, km and mm mainloops), d row-major or column-major.
  expect_valid(args_layout("rcr", DType::kFloat16, DType::kFloat32, true));
  expect_valid(args_layout("rcc", DType::kFloat16, DType::kFloat32, true));
  // Batched, column-major operands and output; in place c = d column-major.
  const int64_t L = 3;
  GemmArgs g;
  g.a = col_major3(fake(1), DType::kBFloat16, L, M, K);
  g.b = TensorRef::batched(fake(2), DType::kBFloat16, L, K, N, 0, K * N, N, 1);  // row-major
  g.d = col_major3(fake(3), DType::kBFloat16, L, M, N);
  expect_valid(g);  // (column, row, column)
  g.c = g.d;
  g.beta = 1.f;
  expect_valid(g);
  g.d = TensorRef::batched(fake(3), DType::kBFloat16, L, M, N, 0, M * N, N, 1);
  g.c = TensorRef();
  g.beta = 0.f;
  expect_valid(g);  // (column, row, row)
}

TEST(GemmValidation, LayoutCombinationsWithoutInstance) {
  const std::string all = "expected (a, b, d) = (row, column, row), (row, row, row), (column, row, row), "
                          "(row, column, column), (column, column, column), (column, row, column)";
  // The A-MN-major, B-K-major mainloop (_mk) exists for bf16 -> bf16 only: (column, column, row)
  // and, swapped, (row, row, column) are rejected for the other dtype pairs.
  expect_valid(args_layout("ccr"));
  expect_valid(args_layout("rrc"));
  expect_error(args_layout("ccr", DType::kFloat16, DType::kFloat16),
               "a column-major with b column-major and d row-major is not yet supported for "
               "float16 inputs and float16 d (no kernel instance), " + all);
  expect_error(args_layout("rrc", DType::kFloat16, DType::kFloat16),
               "a row-major with b row-major and d column-major is not yet supported");
  expect_error(args_layout("rrc", DType::kBFloat16, DType::kFloat32), "for bfloat16 inputs and float32 d");
  // fp16 -> fp32 has the kk, km and mm mainloops (linear_cross_entropy's GEMMs), not _mk.
  for (const char* l : {"rrr", "crr", "ccc", "crc"}) {
    SCOPED_TRACE(l);
    expect_valid(args_layout(l, DType::kFloat16, DType::kFloat32));
  }
  for (const char* l : {"ccr", "rrc"}) {
    SCOPED_TRACE(l);
    expect_error(args_layout(l, DType::kFloat16, DType::kFloat32),
                 "for float16 inputs and float32 d (no kernel instance), " + all);
  }
}

TEST(GemmValidation, DegenerateExtentsPickTheUsableLayout) {
  // A dimension of extent 1 has no stride that matters: (M, 1) with strides (1, 1), as torch
  // makes it, is column-major; (1, N) with strides (N, 1) row-major.
  GemmArgs g = args2d();
  g.b = TensorRef::matrix(fake(2), DType::kBFloat16, K, 1, 0, 1, 1);  // (K, 1) contiguous
  g.d = TensorRef::matrix(fake(3), DType::kBFloat16, M, 1, 0, 1, 1);  // (M, 1): column-major
  expect_valid(g);                                                     // (row, column, column)
  g.d.dtype = DType::kFloat32;
  expect_valid(g);
  g = args2d();
  g.a = TensorRef::matrix(fake(1), DType::kBFloat16, 1, K, 0, K, 1);  // (1, K): row-major
  g.d = TensorRef::matrix(fake(3), DType::kBFloat16, 1, N, 0, N, 1);
  expect_valid(g);
  g.a = TensorRef::matrix(fake(1), DType::kBFloat16, 1, K, 0, 1, 8);  // (1, K), K apart by 8: column-major, ld 8
  expect_valid(g);                                                    // (column, column, row): _mk
  g.b = TensorRef::matrix(fake(2), DType::kBFloat16, K, N, 0, N, 1);  // row-major b
  expect_valid(g);                                                    // (column, row, row)
  // (M, 1) d with rows 8 apart: row-major.
  g = args2d();
  g.b = TensorRef::matrix(fake(2), DType::kBFloat16, K, 1, 0, 1, K);
  g.d = TensorRef::matrix(fake(3), DType::kBFloat16, M, 1, 0, 8, 1);
  expect_valid(g);
}

TEST(GemmValidation, TailsAndPaddedStrides) {
  GemmArgs g = args2d();
  g.a = TensorRef::matrix(fake(1), DType::kBFloat16, 127, 63, 0, 64);
  g.b = TensorRef::matrix(fake(2), DType::kBFloat16, 63, 255, 0, 1, 64);
  g.d = TensorRef::matrix(fake(3), DType::kBFloat16, 127, 255, 0, 256);
  expect_valid(g);
  // Extents of 1: their strides are ignored (torch gives any value there).
  g.a = TensorRef::matrix(fake(1), DType::kBFloat16, 1, 1, 0, 1, 1);
  g.b = TensorRef::matrix(fake(2), DType::kBFloat16, 1, 1, 0, 1, 1);
  g.d = TensorRef::matrix(fake(3), DType::kBFloat16, 1, 1, 0, 1, 1);
  expect_valid(g);
  g.d.dtype = DType::kFloat32;
  expect_valid(g);
}

TEST(GemmValidation, EmptyLaunchesNothing) {
  // M = 0, N = 0 or L = 0: validated, then no CUDA call at all (CUDA is hidden: no throw).
  GemmArgs g = args2d();
  g.a.shape[0] = 0;
  g.d.shape[0] = 0;
  EXPECT_NO_THROW(gemm(g, nullptr));
  g = args2d();
  g.b.shape[1] = 0;
  g.d.shape[1] = 0;
  EXPECT_NO_THROW(gemm(g, nullptr));
  g = args3d(0);
  EXPECT_NO_THROW(gemm(g, nullptr));
  // Shapes are still checked when empty.
  g = args2d();
  g.a.shape[0] = 0;
  expect_error(g, "d has shape (128, 256) bfloat16, expected (M, N) = (0, 256)");
}

TEST(GemmValidation, KZeroIgnoresInputLayouts) {
  // K = 0: a and b are not read; their strides do not matter. D = beta·C or zeros.
  GemmArgs g = args2d();
  g.a = TensorRef::matrix(fake(1), DType::kBFloat16, M, 0, 0, 0, 1);
  g.b = TensorRef::matrix(fake(2), DType::kBFloat16, 0, N, 0, N, 1);  // row-major: fine when K = 0
  expect_valid(g);
  g.c = TensorRef::matrix(fake(4), DType::kBFloat16, M, N);
  g.beta = 2.f;
  expect_valid(g);
  // No kernel runs: a layout combination without an instance is fine (fp16 -> fp32 has no _mk
  // mainloop: (row, row, column) has none); the dtypes must still be compiled, as at K > 0
  // (test_gemm_gated_validation.cpp: an fp32 d with a bias is refused at K = 0).
  g = args_layout("rrc", DType::kFloat16, DType::kFloat32, /*with_c=*/true);
  g.a.shape[1] = 0;
  g.b.shape[0] = 0;
  g.b.stride[0] = N;  // (0, N) row-major
  expect_valid(g);
  // c must still have d's layout when it is read.
  g.c = row_major(fake(4), DType::kFloat32, M, N);
  expect_error(g, "c is row-major (");
}

TEST(GemmValidation, MissingOrMisplaced) {
  GemmArgs g = args2d();
  g.a = TensorRef();
  expect_error(g, "a is absent, expected a tensor");
  g = args2d();
  g.b = TensorRef();
  expect_error(g, "b is absent, expected a tensor");
  g = args2d();
  g.d = TensorRef();
  expect_error(g, "d is absent, expected a tensor");
  g = args2d();
  g.a.device = -1;
  expect_error(g, "a is in host memory, expected a CUDA tensor");
  g = args2d();
  g.b.device = 1;
  expect_error(g, "b is on cuda:1, expected cuda:0");
  g = args2d();
  g.d.device = 2;
  expect_error(g, "d is on cuda:2, expected cuda:0");
  g = args2d();
  g.c = TensorRef::matrix(fake(4), DType::kBFloat16, M, N, 1);
  expect_error(g, "c is on cuda:1, expected cuda:0");
  g = args2d();
  g.d.data = nullptr;
  expect_error(g, "d has a null data pointer");
}

TEST(GemmValidation, RanksAndShapes) {
  GemmArgs g = args2d();
  g.a = TensorRef::vector(fake(1), DType::kBFloat16, K);
  expect_error(g, "a has 1 dimensions (64,) bfloat16, expected 2 (M, K) or 3 (L, M, K)");
  g = args2d();
  g.b = args3d().b;
  expect_error(g, "b has 3 dimensions (4, 64, 256) bfloat16, expected 2 like a");
  g = args2d();
  g.b = TensorRef::matrix(fake(2), DType::kBFloat16, K + 1, N, 0, 1, K + 8);
  expect_error(g, "b has shape (65, 256) bfloat16, expected (K, N) = (64, *)");
  g = args2d();
  g.d = TensorRef::matrix(fake(3), DType::kBFloat16, M, N + 8);
  expect_error(g, "d has shape (128, 264) bfloat16, expected (M, N) = (128, 256)");
  g = args2d();
  g.c = TensorRef::matrix(fake(4), DType::kBFloat16, M - 1, N);
  expect_error(g, "c has shape (127, 256) bfloat16, expected (M, N) = (128, 256)");
  g = args3d();
  g.d.shape[0] = 3;
  expect_error(g, "d has shape (3, 128, 256) bfloat16, expected (L, M, N) = (4, 128, 256)");
  g = args3d();
  g.b.shape[0] = 5;
  expect_error(g, "b has shape (5, 64, 256) bfloat16, expected (L, K, N) = (4, 64, *)");
}

TEST(GemmValidation, Dtypes) {
  GemmArgs g = args2d();
  g.a.dtype = g.b.dtype = DType::kFloat32;
  expect_error(g, "a has dtype float32, expected bfloat16 or float16");
  g = args2d();
  g.b.dtype = DType::kFloat16;
  expect_error(g, "b has dtype float16, expected bfloat16 (a's dtype");
  g = args2d();
  g.d.dtype = DType::kFloat16;
  expect_error(g, "d has dtype float16, expected bfloat16 or float32");
  g = args2d();
  g.d.dtype = DType::kInt32;
  expect_error(g, "d has dtype int32, expected bfloat16 or float32");
  g = args2d();
  g.c = TensorRef::matrix(fake(4), DType::kFloat32, M, N);
  g.beta = 1.f;  // fp32 c into a bf16 d: the _cf32 instances
  EXPECT_NO_THROW(can_implement(g));
  g.c = TensorRef::matrix(fake(4), DType::kFloat16, M, N);
  expect_error(g, "c has dtype float16, expected bfloat16 (d's dtype; c of another dtype is not yet supported)");
  // fp16 alike (linear + cross-entropy's last dweight chunk: a column-major, b and d row-major).
  g = args_layout("crr", DType::kFloat16, DType::kFloat16, /*with_c=*/true);
  g.c.dtype = DType::kFloat32;
  expect_valid(g);
  g.c.dtype = DType::kBFloat16;
  expect_error(g, "c has dtype bfloat16, expected float16 (d's dtype; c of another dtype is not yet supported)");
  g = args_layout("rcr", DType::kFloat16, DType::kFloat16, /*with_c=*/true);
  g.c.dtype = DType::kFloat32;  // the _cf32 instances are mm only
  expect_error(g, "float32 c (no kernel instance)");
  g = args_layout("crr", DType::kFloat16, DType::kFloat32, /*with_c=*/true);
  g.c.dtype = DType::kFloat16;  // a 16-bit c into an fp32 d: no instance
  expect_error(g, "c has dtype float16, expected float32 (d's dtype");
}

TEST(GemmValidation, BetaNeedsC) {
  GemmArgs g = args2d();
  g.beta = 0.5f;
  expect_error(g, "beta is 0.500000 but c is absent, expected c when beta ≠ 0");
}

TEST(GemmValidation, TooLarge) {
  GemmArgs g = args2d();
  const int64_t big = int64_t(1) << 31;
  g.a = TensorRef::matrix(fake(1), DType::kBFloat16, 1, big);
  g.b = TensorRef::matrix(fake(2), DType::kBFloat16, big, 1, 0, 1, big);
  g.d = TensorRef::matrix(fake(3), DType::kBFloat16, 1, 1);
  expect_error(g, "K = 2147483648 is too large, expected ≤ 2^31 − 1");
}

TEST(GemmValidation, NegativeStrides) {
  GemmArgs g = args2d();
  g.a.stride[0] = -K;
  expect_error(g, "a has a negative stride");
  g = args2d();
  g.d.stride[1] = -1;
  expect_error(g, "d has a negative stride");
}

TEST(GemmValidation, LayoutsNotYetSupported) {
  GemmArgs g = args2d();
  g.d = col_major(fake(3), DType::kBFloat16, M, N);
  g.c = row_major(fake(4), DType::kBFloat16, M, N);  // read (beta ≠ 0): must have d's layout
  g.beta = 1.f;
  expect_error(g, "c is row-major (");
  expect_error(g, "not yet supported, expected column-major like d (c must have d's layout): stride 1 along M");
  g = args2d();
  g.c = col_major(fake(4), DType::kBFloat16, M, N);
  g.beta = 1.f;
  expect_error(g, "c is column-major (");
  expect_error(g, "expected row-major like d (c must have d's layout): stride 1 along N");
  g = args2d();
  g.a = TensorRef::matrix(fake(1), DType::kBFloat16, M, K, 0, 2 * K, 2);  // every other element
  expect_error(g, "a has no dimension of stride 1 (");
  expect_error(g, "not yet supported, expected row-major (M, K): stride 1 along K, or column-major: stride 1 along M");
  g = args2d();
  g.b = TensorRef::matrix(fake(2), DType::kBFloat16, K, N, 0, 2, 2 * K);
  expect_error(g, "b has no dimension of stride 1 (");
  expect_error(g, "expected column-major (K, N): stride 1 along K, or row-major: stride 1 along N");
  g = args2d();
  g.d = TensorRef::matrix(fake(3), DType::kBFloat16, M, N, 0, 2 * N, 2);
  expect_error(g, "d has no dimension of stride 1 (");
  expect_error(g, "expected row-major (M, N): stride 1 along N, or column-major: stride 1 along M");
  g = args2d();
  g.c = TensorRef::matrix(fake(4), DType::kBFloat16, M, N, 0, 2 * N, 2);
  g.beta = 1.f;
  expect_error(g, "c has no dimension of stride 1 (");
  g = args3d();
  g.b.stride[0] = 0;  // one B for every batch
  expect_error(g, "b has batch stride 0");
  expect_error(g, "broadcasting over the batch is not yet supported");
}

// Operands TMA cannot address (base, leading or batch stride not a multiple of 16 bytes) are
// accepted: a and b through padded copies in the workspace (gemm_workspace_size counts them),
// c and d through the epilogue's plain loads and stores (no workspace). An element-misaligned
// base, a leading stride below the contiguous extent and a short or misaligned workspace are
// still errors.
TEST(GemmValidation, UnalignedOperands) {
  GemmArgs g = args2d();
  EXPECT_EQ(gemm_workspace_size(g), 0u);
  g.a.data = static_cast<char*>(fake(1)) + 2;  // a view one element in: a copied
  expect_valid(g);
  EXPECT_EQ(gemm_workspace_size(g), size_t(M * K * 2));  // K = 64 is already a multiple of 8
  g.a.data = static_cast<char*>(fake(1)) + 1;
  expect_error(g, "a has a base address that is not 2-byte aligned");
  g = args2d();
  g.a = TensorRef::matrix(fake(1), DType::kBFloat16, M, 63);
  g.b = TensorRef::matrix(fake(2), DType::kBFloat16, 63, N, 0, 1, 63);
  expect_valid(g);
  // a (128 rows of 63 -> 64) and b (256 columns of 63 -> 64), each 256-byte aligned.
  EXPECT_EQ(gemm_workspace_size(g), size_t(M * 64 * 2 + N * 64 * 2));
  g.workspace = fake(9);
  g.workspace_bytes = gemm_workspace_size(g) - 1;
  expect_error(g, "workspace has 49151 bytes, expected ≥ 49152 (gemm_workspace_size)");
  g.workspace_bytes += 1;
  expect_valid(g);
  g.workspace = static_cast<char*>(fake(9)) + 8;
  expect_error(g, "workspace is not 16-byte aligned");
  // A given workspace is checked also where no copy needs it (quack/gemm.h): TMA-aligned
  // operands, K = 0 and empty problems. Its size then only has to be ≥ 0.
  g = args2d();
  g.workspace = static_cast<char*>(fake(9)) + 8;
  expect_error(g, "workspace is not 16-byte aligned, expected a 16-byte aligned device buffer");
  g.a.shape[1] = 0;
  g.b.shape[0] = 0;
  expect_error(g, "workspace is not 16-byte aligned");
  g = args2d();
  g.a.shape[0] = 0;
  g.d.shape[0] = 0;
  g.workspace = static_cast<char*>(fake(9)) + 8;
  expect_error(g, "workspace is not 16-byte aligned");
  g = args2d();
  g.workspace = fake(9);
  g.workspace_bytes = 0;
  expect_valid(g);
  g = args2d();
  g.b.stride[1] = 60;
  expect_error(g, "b has leading stride 60 < 64 contiguous elements");
  // d and c without TMA alignment: plain stores and loads, no workspace.
  g = args2d();
  g.d = TensorRef::matrix(fake(3), DType::kFloat32, M, N, 0, N + 2);
  expect_valid(g);
  EXPECT_EQ(gemm_workspace_size(g), 0u);
  g = args2d();
  g.c = TensorRef::matrix(fake(4), DType::kBFloat16, M, N);
  g.c.data = static_cast<char*>(fake(4)) + 8;
  g.beta = 1.f;
  expect_valid(g);
  g = args3d();
  g.a.stride[0] = M * K + 4;  // batches 4 elements apart beyond the matrix: a copied
  expect_valid(g);
  EXPECT_EQ(gemm_workspace_size(g), size_t(4 * M * K * 2));
  // Column-major operands: the leading stride is between columns.
  g = args2d();
  g.a = TensorRef::matrix(fake(1), DType::kBFloat16, 127, K, 0, 1, 127);
  g.b = row_major(fake(2), DType::kBFloat16, K, N);
  g.d = row_major(fake(3), DType::kBFloat16, 127, N);
  expect_valid(g);
  EXPECT_EQ(gemm_workspace_size(g), size_t(K * 128 * 2));
  g.a.stride[1] = 128;
  EXPECT_EQ(gemm_workspace_size(g), 0u);
  g = args_layout("rcc");
  g.d = TensorRef::matrix(fake(3), DType::kFloat32, M, N, 0, 1, M + 2);
  expect_valid(g);
  g = args_layout("crc");
  g.b.data = static_cast<char*>(fake(2)) + 4;
  expect_valid(g);
  // The vocabulary shape of issue 16: a row-major (K, 50257) b; d (M, 50257) row-major.
  g = args2d();
  g.b = row_major(fake(2), DType::kBFloat16, K, 50257);
  g.d = row_major(fake(3), DType::kBFloat16, M, 50257);
  expect_valid(g);
  EXPECT_EQ(gemm_workspace_size(g), size_t((K * 50264 * 2 + 255) / 256 * 256));
}

TEST(GemmValidation, OverlappingOutput) {
  GemmArgs g = args3d();
  g.d.stride[0] = 8;  // batches overlap
  expect_error(g, "output d has overlapping elements");
}

// d against the inputs: a, b, c (unless c is d itself) and the bias share no byte with d.
TEST(GemmValidation, OutputApartFromInputs) {
  GemmArgs g = args2d();
  g.a = TensorRef::matrix(g.d.data, DType::kBFloat16, M, K);  // a inside d
  expect_error(g, "d overlaps a in memory");
  g = args2d();
  g.b.data = static_cast<char*>(g.d.data) + 2 * M * N - 2;  // b's first element on d's last
  expect_error(g, "d overlaps b");
  g = args_layout("rcr", DType::kBFloat16, DType::kBFloat16, true);
  g.c = g.d;  // in place (gemm_add_inplace)
  expect_valid(g);
  g.c.data = static_cast<char*>(g.d.data) + 2 * N;  // c one row into d
  expect_error(g, "d overlaps c");
  g = args_layout("rcr", DType::kBFloat16, DType::kBFloat16, true);
  g.c.data = g.d.data;
  g.beta = 0.f;  // c not read: no check
  expect_valid(g);
  g = args2d();
  g.bias.row = TensorRef::vector(g.d.data, DType::kBFloat16, N);
  expect_error(g, "d overlaps bias.row");
}

TEST(GemmValidation, DeviceScalars) {
  GemmArgs g = args2d();
  float* fake_scalar = reinterpret_cast<float*>(fake(9));
  g.alpha_device = fake_scalar;
  expect_valid(g);
  g.beta_device = fake_scalar;
  expect_error(g, "gemm: beta_device is given but c is absent, expected c with a device beta");
  g.beta_device = nullptr;
  g.alpha_device = reinterpret_cast<const float*>(reinterpret_cast<char*>(fake_scalar) + 2);
  expect_error(g, "gemm: alpha_device is not 4-byte aligned");
}

TEST(GemmValidation, TileCounterAlignment) {
  GemmArgs g = args2d();
  g.tile_counter = reinterpret_cast<uint32_t*>(fake(10));
  expect_valid(g);
  g.tile_counter = reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(fake(10)) + 2);
  expect_error(g, "gemm: tile_counter is not 4-byte aligned, expected a pointer to one uint32");
}

// The stream-K workspace's alignment is checked without a CUDA call (its size at the call).
TEST(GemmValidation, StreamKWorkspaceAlignment) {
  GemmArgs g = args2d();
  g.streamk_workspace = fake(11);
  g.streamk_workspace_bytes = size_t(1) << 30;
  expect_valid(g);
  g.streamk_workspace = reinterpret_cast<char*>(fake(11)) + 8;
  expect_error(g, "gemm: streamk_workspace is not 16-byte aligned");
}

}  // namespace
}  // namespace quack
