// Tier 2: gemm on the device against a float64 CPU reference. Skips without a GPU.
//
// Inputs are random (never zero) and exact in their dtype; D (and its row padding) is poisoned
// with NaN, so an unwritten element fails and a write outside D's elements is caught. For large
// problems the reference is computed on a sample of rows (tile edges included) and every element
// of D is still checked to be finite.
// Tolerance (reference/tolerance.h): a sum over K products accumulated in fp32 and stored in d's
// dtype, rel = reduction_tolerance(d, K), scale = max(max|ref|, max Σ_k|a·b| / sqrt(K)).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "quack/errors.h"
#include "quack/gemm.h"
#include "reference/random.h"

namespace quack::test {
namespace {

struct GemmCase {
  int64_t L = 1, M = 1, N = 1, K = 1;
  DType ab = DType::kBFloat16, d = DType::kBFloat16;
  float alpha = 1.f, beta = 0.f;
  bool with_c = false;     // C present (read when beta ≠ 0; poisoned with NaN when beta = 0)
  int64_t pad = 0;         // extra elements on every leading stride (a multiple of 8)
  uint64_t seed = 1;
};

int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// A (L·M, K) row-major 2-D buffer seen as (L, M, K) when L > 1 (and likewise for B, C, D).
TensorRef batched(const TensorRef& t2, int64_t L, int64_t rows, int64_t cols, int64_t s_rows,
                  int64_t s_cols, int64_t s_batch) {
  if (L == 1) return t2;
  TensorRef r = t2;
  r.ndim = 3;
  r.shape[0] = L;
  r.shape[1] = rows;
  r.shape[2] = cols;
  r.stride[0] = s_batch;
  r.stride[1] = s_rows;
  r.stride[2] = s_cols;
  return r;
}

void run_case(const GemmCase& c) {
  Rng rng(c.seed);
  const int64_t L = c.L, M = c.M, N = c.N, K = c.K;
  const int64_t align_d = 16 / dtype_size(c.d);
  const int64_t lda = round_up(std::max<int64_t>(K, 1), 8) + c.pad;
  const int64_t ldb = lda;
  const int64_t ldd = round_up(std::max<int64_t>(N, 1), align_d) + c.pad;

  // Host values, dense row-major over the 2-D buffers' logical shapes.
  const std::vector<double> a = random_values(rng, L * M * K, c.ab);  // (L·M, K)
  const std::vector<double> b = random_values(rng, K * L * N, c.ab);  // (K, L·N)
  const std::vector<double> cv = random_values(rng, L * M * N, c.d);  // (L·M, N)

  Layout la;
  la.row_stride = lda;
  DeviceTensor A = upload(a, c.ab, L * M, K, la);
  Layout lb;  // column-major (K, L·N): stride 1 along K
  lb.row_stride = 1;
  lb.col_stride = ldb;
  DeviceTensor B = upload(b, c.ab, K, L * N, lb);
  Layout ld;
  ld.row_stride = ldd;
  DeviceTensor D = alloc_tensor(c.d, L * M, N, ld);  // NaN
  DeviceTensor C;
  if (c.with_c) {
    C = alloc_tensor(c.d, L * M, N, ld);  // NaN; filled only when it is read
    if (c.beta != 0.f) upload_into(C, cv);
  }

  GemmArgs args;
  args.a = batched(A.ref, L, M, K, lda, 1, M * lda);
  args.b = batched(B.ref, L, K, N, 1, ldb, N * ldb);
  args.d = batched(D.ref, L, M, N, ldd, 1, M * ldd);
  if (c.with_c) args.c = batched(C.ref, L, M, N, ldd, 1, M * ldd);
  args.alpha = c.alpha;
  args.beta = c.beta;
  ASSERT_NO_THROW(gemm(args, nullptr));
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<double> got = download(D);
  EXPECT_TRUE(gaps_untouched("d", D));
  if (M == 0 || N == 0 || L == 0) return;

  // Every element written (no NaN left from the poison).
  int64_t nonfinite = 0;
  for (double v : got) nonfinite += std::isfinite(v) ? 0 : 1;
  EXPECT_EQ(nonfinite, 0) << "d has " << nonfinite << " non-finite elements";

  // Rows of D (over all batches) to check against the reference.
  std::set<int64_t> rows;
  const bool full = double(L) * M * N * std::max<int64_t>(K, 1) <= double(1 << 26);
  for (int64_t r = 0; r < L * M; ++r) {
    const int64_t i = r % M;
    const bool edge = i < 2 || i >= M - 2 || i % 128 == 0 || i % 128 == 127 || i % 256 == 255;
    if (full || edge || r % std::max<int64_t>(1, (L * M) / 48) == 0) rows.insert(r);
  }
  std::vector<double> ref, sub;
  double floor = 0.0;
  for (int64_t r : rows) {
    const int64_t l = r / M;
    for (int64_t j = 0; j < N; ++j) {
      double s = 0.0, s_abs = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double t = a[size_t(r * K + k)] * b[size_t(k * L * N + l * N + j)];
        s += t;
        s_abs += std::fabs(t);
      }
      double v = double(c.alpha) * s;
      if (c.with_c && c.beta != 0.f) v += double(c.beta) * cv[size_t(r * N + j)];
      ref.push_back(v);
      sub.push_back(got[size_t(r * N + j)]);
      floor = std::max(floor, std::fabs(double(c.alpha)) * s_abs);
    }
  }
  floor = K > 0 ? floor / std::sqrt(double(K)) : 0.0;
  EXPECT_TRUE(close("d", sub, ref, reduction_tolerance(c.d, K), N, floor))
      << "L=" << L << " M=" << M << " N=" << N << " K=" << K << " (" << rows.size() << " rows checked)";
}

struct Named {
  const char* name;
  GemmCase c;
};

GemmCase mk(int64_t M, int64_t N, int64_t K) {
  GemmCase c;
  c.M = M;
  c.N = N;
  c.K = K;
  c.seed = uint64_t(M * 1000003 + N * 1009 + K);
  return c;
}

template <typename F>
GemmCase with(GemmCase c, F f) {
  f(c);
  return c;
}

const std::vector<Named> kCases = {
    {"M1_N1_K1", mk(1, 1, 1)},
    {"M127_N255_K63", mk(127, 255, 63)},
    {"M256_N512_K64", mk(256, 512, 64)},
    {"M1_N255_K64", mk(1, 255, 64)},
    {"M2_N255_K64", mk(2, 255, 64)},
    {"M128_N250_K64", mk(128, 250, 64)},
    {"M128_N40_K64", mk(128, 40, 64)},
    {"M129_N257_K65", mk(129, 257, 65)},  // odd cluster: the second CTA of the last cluster idles
    {"M1000_N3000_K520", mk(1000, 3000, 520)},
    {"M2048_N2048_K2048", mk(2048, 2048, 2048)},
    {"M64_N8_K4096", mk(64, 8, 4096)},  // long K, one narrow tile
    {"alpha_M300_N200_K100", with(mk(300, 200, 100), [](GemmCase& c) { c.alpha = -1.75f; })},
    {"padded_M200_N136_K72", with(mk(200, 136, 72), [](GemmCase& c) { c.pad = 24; })},
    {"batch3_M200_N300_K100", with(mk(200, 300, 100), [](GemmCase& c) { c.L = 3; })},
    {"fp16_M127_N255_K63", with(mk(127, 255, 63), [](GemmCase& c) { c.ab = c.d = DType::kFloat16; })},
    {"fp16_M1000_N3000_K520", with(mk(1000, 3000, 520), [](GemmCase& c) { c.ab = c.d = DType::kFloat16; })},
    {"bf16_f32out_M127_N255_K63", with(mk(127, 255, 63), [](GemmCase& c) { c.d = DType::kFloat32; })},
    {"bf16_f32out_M512_N1024_K256", with(mk(512, 1024, 256), [](GemmCase& c) { c.d = DType::kFloat32; })},
    {"fp16_f32out_M300_N200_K100",
     with(mk(300, 200, 100), [](GemmCase& c) { c.ab = DType::kFloat16; c.d = DType::kFloat32; })},
    {"c_beta_M127_N255_K63", with(mk(127, 255, 63), [](GemmCase& c) { c.with_c = true; c.beta = 0.5f; c.alpha = 2.f; })},
    {"c_beta_M1000_N600_K200", with(mk(1000, 600, 200), [](GemmCase& c) { c.with_c = true; c.beta = -1.f; })},
    {"c_beta_f32out_M130_N260_K70",
     with(mk(130, 260, 70), [](GemmCase& c) { c.with_c = true; c.beta = 0.25f; c.d = DType::kFloat32; })},
    {"c_nan_beta0_M200_N300_K100", with(mk(200, 300, 100), [](GemmCase& c) { c.with_c = true; })},  // C never read
    {"K0_zeros_M100_N300", mk(100, 300, 0)},
    {"K0_beta_c_M100_N300", with(mk(100, 300, 0), [](GemmCase& c) { c.with_c = true; c.beta = 2.f; })},
    {"K0_batch2_f32out", with(mk(33, 17, 0), [](GemmCase& c) { c.L = 2; c.d = DType::kFloat32; })},
    {"M0_N128_K64", mk(0, 128, 64)},
    {"M64_N0_K64", mk(64, 0, 64)},
};

class GemmCases : public GpuTest, public ::testing::WithParamInterface<Named> {};

TEST_P(GemmCases, MatchesReference) { run_case(GetParam().c); }

INSTANTIATE_TEST_SUITE_P(All, GemmCases, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Named>& i) { return std::string(i.param.name); });

// Two calls on one stream with different shapes reuse the kernel (attributes set once) and
// leave no error behind; a misaligned stride still throws before any launch.
class Gemm : public GpuTest {};

TEST_F(Gemm, RepeatedCallsAndErrorAfterwards) {
  run_case(mk(256, 256, 128));
  run_case(mk(300, 260, 70));
  DeviceTensor A = alloc_tensor(DType::kBFloat16, 64, 63);  // lda = 63: not 16-byte rows
  Layout lb;
  lb.row_stride = 1;
  lb.col_stride = 64;
  DeviceTensor B = alloc_tensor(DType::kBFloat16, 63, 64, lb);
  DeviceTensor D = alloc_tensor(DType::kBFloat16, 64, 64);
  GemmArgs args;
  args.a = A.ref;
  args.b = B.ref;
  args.d = D.ref;
  EXPECT_THROW(gemm(args, nullptr), InvalidArgument);
}

}  // namespace
}  // namespace quack::test
