// Tier 2: gemm_rotary (quack/gemm_rotary.h) on the device against a float64 reference: D =
// A·Bᵀ-as-B with the columns n < rotary_cols rotated in interleaved pairs per head at
// position m % seqlen. Skips without a GPU.
//
//   GemmRotaryCases  the demo's layout (head_dim 128, q and k rotated, v through), head_dim 64,
//                    a partial rotary_cols, odd M / N tails of the tile (seqlen 7, N = 3·40),
//                    a table longer than seqlen with a wider row stride (a column view), a
//                    K not a multiple of 8 (padded-copy path), K = 0 (zeros); the paired
//                    table layout (cos and sin the two columns of one (S_ro, head_dim / 2, 2)
//                    tensor, what gemm_rotary_ops passes: the epilogue's float2 path) on the
//                    demo's layout, the odd tails, a padded longer table and head_dim 2. D
//                    poisoned (NaN) first; its row padding must stay untouched.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "quack/gemm_rotary.h"
#include "reference/random.h"
#include "reference/tolerance.h"

namespace quack::test {
namespace {

struct Case {
  std::string name;
  int64_t B, T, N, K, head_dim, rotary_cols;
  int64_t table_rows = 0;  // 0: T
  int64_t table_pad = 0;   // table row stride head_dim / 2 + pad (pairs, when paired)
  bool paired = false;     // one (S_ro, head_dim / 2 + pad, 2) table: cos and sin its two columns
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

class GemmRotaryCases : public GpuTest, public ::testing::WithParamInterface<Case> {};

TEST_P(GemmRotaryCases, MatchesReference) {
  const Case c = GetParam();
  const DType bf = DType::kBFloat16;
  const int64_t M = c.B * c.T, N = c.N, K = c.K, hd = c.head_dim, half = hd / 2;
  Rng rng(99 + M + N + K);
  const std::vector<double> a = random_values(rng, M * K, bf);
  const std::vector<double> w = random_values(rng, N * K, bf, 0.0, 1.0 / std::sqrt(double(K > 0 ? K : 1)));
  const int64_t S_ro = c.table_rows > 0 ? c.table_rows : c.T, cw = half + c.table_pad;
  std::vector<double> cs(static_cast<size_t>(S_ro * cw)), sn(cs.size());
  for (int64_t p = 0; p < S_ro; ++p)
    for (int64_t j = 0; j < cw; ++j) {
      const double ang = double(p) * std::pow(10000.0, -double(j % half) / double(half)) + 0.1 * double(j);
      cs[size_t(p * cw + j)] = static_cast<float>(std::cos(ang));
      sn[size_t(p * cw + j)] = static_cast<float>(std::sin(ang));
    }
  Layout pad;
  pad.row_stride = N + 8;  // D's rows padded: the gap must stay poisoned
  DeviceTensor da = upload(a, bf, M, K);  // odd K: rows TMA cannot address (padded copy)
  DeviceTensor dw = upload(w, bf, N, K);
  DeviceTensor dd = alloc_tensor(bf, M, N, pad);
  DeviceTensor dcos = upload(cs, DType::kFloat32, S_ro, cw);
  DeviceTensor dsin = upload(sn, DType::kFloat32, S_ro, cw);
  std::vector<double> pairs(2 * cs.size());  // (S_ro, cw, 2): (cos, sin) per pair
  for (size_t i = 0; i < cs.size(); ++i) pairs[2 * i] = cs[i], pairs[2 * i + 1] = sn[i];
  DeviceTensor dpair = upload(pairs, DType::kFloat32, S_ro, 2 * cw);

  GemmRotaryArgs g;
  g.a = da.ref;
  g.b = TensorRef::matrix(dw.ref.data, bf, K, N, 0, 1, K);  // Wᵀ: column-major (K, N)
  g.d = dd.ref;
  if (c.paired) {
    const float* base = static_cast<const float*>(dpair.ref.data);
    g.cos = TensorRef::matrix(base, DType::kFloat32, S_ro, half, 0, 2 * cw, 2);
    g.sin = TensorRef::matrix(base + 1, DType::kFloat32, S_ro, half, 0, 2 * cw, 2);
  } else {
    g.cos = TensorRef::matrix(dcos.ref.data, DType::kFloat32, S_ro, half, 0, cw);
    g.sin = TensorRef::matrix(dsin.ref.data, DType::kFloat32, S_ro, half, 0, cw);
  }
  g.rotary_cols = c.rotary_cols;
  g.head_dim = hd;
  g.seqlen = c.T;
  ASSERT_NO_THROW(gemm_rotary(g, nullptr));
  QUACK_CUDA_OK(cudaDeviceSynchronize());

  std::vector<double> y(static_cast<size_t>(M * N), 0.0), ref(y.size());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0.0;
      for (int64_t k = 0; k < K; ++k) s += a[size_t(m * K + k)] * w[size_t(n * K + k)];
      y[size_t(m * N + n)] = s;
    }
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const size_t e = size_t(m * N + n);
      if (n >= c.rotary_cols) {
        ref[e] = y[e];
        continue;
      }
      const int64_t n0 = n & ~int64_t{1}, p = (n0 % hd) / 2, t = m % c.T;
      const double co = cs[size_t(t * cw + p)], si = sn[size_t(t * cw + p)];
      const double y0 = y[size_t(m * N + n0)], y1 = y[size_t(m * N + n0 + 1)];
      ref[e] = n == n0 ? y0 * co - y1 * si : y1 * co + y0 * si;
    }
  EXPECT_TRUE(close(c.name, download(dd), ref, tolerance(bf), N));
  EXPECT_TRUE(gaps_untouched(c.name + " d", dd));
}

std::vector<Case> cases() {
  return {
      {"demo_layout_hd128", 2, 64, 3 * 2 * 128, 256, 128, 2 * 2 * 128},
      {"hd64_two_heads_each", 3, 40, 3 * 2 * 64, 192, 64, 2 * 2 * 64},
      {"partial_rotary_cols", 1, 128, 4 * 64, 128, 64, 64},
      {"odd_tails_T7_hd40", 5, 7, 3 * 40, 72, 40, 2 * 40},
      {"long_table_column_view", 2, 33, 3 * 64, 64, 64, 2 * 64, 100, 32},
      {"odd_K_padded_copy", 2, 16, 3 * 64, 61, 64, 2 * 64},
      {"K0_zeros", 2, 16, 3 * 64, 0, 64, 2 * 64},
      {"hd2_smallest_head", 1, 24, 3 * 8, 32, 2, 16},
      {"paired_demo_layout_hd128", 2, 64, 3 * 2 * 128, 256, 128, 2 * 2 * 128, 0, 0, true},
      {"paired_odd_tails_T7_hd40", 5, 7, 3 * 40, 72, 40, 2 * 40, 0, 0, true},
      {"paired_long_table_padded", 2, 33, 3 * 64, 64, 64, 2 * 64, 100, 4, true},
      {"paired_hd2_smallest_head", 1, 24, 3 * 8, 32, 2, 16, 0, 0, true},
  };
}

INSTANTIATE_TEST_SUITE_P(GemmRotary, GemmRotaryCases, ::testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace quack::test
