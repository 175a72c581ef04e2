// Tier 1: the float64 reference, the host fp16/bf16 conversions and the tolerance rule,
// checked on hand-computed values (no GPU).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "reference/half_host.h"
#include "reference/random.h"
#include "reference/rmsnorm_ref.h"
#include "reference/tolerance.h"

namespace quack::test {
namespace {

// ---------------------------------------------------------------- fp16 / bf16 conversions

TEST(HalfHost, Bf16HandValues) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16_bits(-0.0f), 0x8000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even -> 1.
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3·2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even) -> 1 + 2^-6.
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  // Just above the tie rounds up.
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // overflow -> inf
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::nanf("")))));
  EXPECT_EQ(bf16_bits_to_float(0x3fc0), 1.5f);
  EXPECT_EQ(round_to(DType::kBFloat16, 3.14159f), 3.140625f);
}

TEST(HalfHost, Fp16HandValues) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);       // largest finite
  EXPECT_EQ(float_to_half_bits(65519.0f), 0x7bff);       // below the tie: stays finite
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);       // tie to even -> inf
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (0)
  EXPECT_EQ(float_to_half_bits(3 * std::ldexp(1.0f, -25)), 0x0002);  // 1.5 ulp tie -> 2
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even
  EXPECT_EQ(half_bits_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_bits_to_float(0x8400), -std::ldexp(1.0f, -14));
  EXPECT_EQ(half_bits_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(std::nanf("")))));
  EXPECT_EQ(round_to(DType::kFloat16, 3.14159f), 3.140625f);
}

// Our bit code against CUDA's own host conversions (cuda_fp16.h / cuda_bf16.h), on every
// 16-bit pattern (exact round trip) and on a sweep of random fp32 bit patterns.
uint16_t cuda_half_bits(float f) {
  __half h = __float2half_rn(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
uint16_t cuda_bf16_bits(float f) {
  __nv_bfloat16 h = __float2bfloat16_rn(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

TEST(HalfHost, RoundTripEvery16BitPattern) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float fh = half_bits_to_float(h), fb = bf16_bits_to_float(h);
    if (!std::isnan(fh)) {
      ASSERT_EQ(float_to_half_bits(fh), h) << std::hex << b;
      __half_raw raw;
      raw.x = h;
      ASSERT_EQ(__half2float(__half(raw)), fh) << std::hex << b;
    }
    if (!std::isnan(fb)) {
      ASSERT_EQ(float_to_bf16_bits(fb), h) << std::hex << b;
    }
  }
}

TEST(HalfHost, MatchesCudaHostConversions) {
  Rng rng(1234);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = static_cast<uint32_t>(rng.next());
    if (i % 2) u = (u & 0x83ffffffu) | 0x38000000u;  // half the samples near fp16's range
    const float f = bits_float(u);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(f))));
      EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(f))));
      continue;
    }
    ASSERT_EQ(float_to_half_bits(f), cuda_half_bits(f)) << std::hexfloat << f;
    ASSERT_EQ(float_to_bf16_bits(f), cuda_bf16_bits(f)) << std::hexfloat << f;
  }
}

// ---------------------------------------------------------------- forward reference

constexpr double kEps = 1e-6;

TEST(RmsNormRef, FwdRow34) {
  // One row [3, 4]: mean(h^2) = 12.5, rstd = 1/sqrt(12.5 + eps).
  const double x[] = {3, 4};
  const auto r = ref::rmsnorm_fwd_ref(1, 2, x, nullptr, nullptr, nullptr, kEps);
  const double rstd = 1.0 / std::sqrt(12.5 + kEps);
  ASSERT_EQ(r.rstd.size(), 1u);
  EXPECT_DOUBLE_EQ(r.rstd[0], rstd);
  EXPECT_DOUBLE_EQ(r.out[0], 3 * rstd);
  EXPECT_DOUBLE_EQ(r.out[1], 4 * rstd);
  EXPECT_NEAR(r.out[0], 0.848528137, 1e-7);  // 3 / sqrt(12.5)
  EXPECT_NEAR(r.out[1], 1.131370850, 1e-7);
  // With eps = 0: out = [3, 4]/sqrt(12.5) has mean square exactly 1.
  const auto r0 = ref::rmsnorm_fwd_ref(1, 2, x, nullptr, nullptr, nullptr, 0.0);
  EXPECT_NEAR((r0.out[0] * r0.out[0] + r0.out[1] * r0.out[1]) / 2, 1.0, 1e-15);
}

TEST(RmsNormRef, FwdWeightBiasResidual) {
  // Two rows; row 0 = [1, 2] + residual [2, 2] = [3, 4]; row 1 = [-6, 8] + [0, 0] (mean sq 50).
  const double x[] = {1, 2, -6, 8};
  const double res[] = {2, 2, 0, 0};
  const double w[] = {2, 0.5};
  const double b[] = {1, -1};
  const double eps = 0.5;  // visible in the result
  const auto r = ref::rmsnorm_fwd_ref(2, 2, x, w, b, res, eps);
  const double r0 = 1 / std::sqrt(12.5 + 0.5), r1 = 1 / std::sqrt(50 + 0.5);
  EXPECT_DOUBLE_EQ(r.rstd[0], r0);
  EXPECT_DOUBLE_EQ(r.rstd[1], r1);
  EXPECT_DOUBLE_EQ(r.h[0], 3);
  EXPECT_DOUBLE_EQ(r.h[1], 4);
  EXPECT_DOUBLE_EQ(r.h[2], -6);
  EXPECT_DOUBLE_EQ(r.out[0], 3 * r0 * 2 + 1);
  EXPECT_DOUBLE_EQ(r.out[1], 4 * r0 * 0.5 - 1);
  EXPECT_DOUBLE_EQ(r.out[2], -6 * r1 * 2 + 1);
  EXPECT_DOUBLE_EQ(r.out[3], 8 * r1 * 0.5 - 1);
}

TEST(RmsNormRef, FwdSingleColumnIsSign) {
  // N = 1, eps = 0: out = x / |x| = sign(x).
  const double x[] = {-3.5, 0.25, 7};
  const auto r = ref::rmsnorm_fwd_ref(3, 1, x, nullptr, nullptr, nullptr, 0.0);
  EXPECT_DOUBLE_EQ(r.out[0], -1);
  EXPECT_DOUBLE_EQ(r.out[1], 1);
  EXPECT_DOUBLE_EQ(r.out[2], 1);
}

// ---------------------------------------------------------------- backward reference

TEST(RmsNormRef, BwdRow34Hand) {
  // x = [3, 4], w = dy = [1, 1], eps = 0: rstd = 1/sqrt(12.5), xhat = [3, 4]·rstd,
  // mean(g·xhat) = 7·rstd/2, dx_i = rstd·(1 − xhat_i·7·rstd/2).
  const double x[] = {3, 4}, ones[] = {1, 1};
  const double rstd = 1 / std::sqrt(12.5);
  const auto r = ref::rmsnorm_bwd_ref(1, 2, x, ones, ones, &rstd, nullptr);
  EXPECT_NEAR(r.dx[0], rstd * (1 - 3 * rstd * 3.5 * rstd), 1e-15);  // = rstd·(1 − 0.84) = 0.04525
  EXPECT_NEAR(r.dx[1], rstd * (1 - 4 * rstd * 3.5 * rstd), 1e-15);  // = rstd·(1 − 1.12) = −0.03394
  EXPECT_NEAR(r.dx[0], 0.16 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(r.dx[1], -0.12 / std::sqrt(12.5), 1e-15);
  EXPECT_DOUBLE_EQ(r.dw[0], 3 * rstd);
  EXPECT_DOUBLE_EQ(r.dw[1], 4 * rstd);
  EXPECT_DOUBLE_EQ(r.db[0], 1);
  EXPECT_DOUBLE_EQ(r.db[1], 1);
}

TEST(RmsNormRef, BwdC01ClosedForm) {
  // C01: dy = ones, w = ones: dx_i = rstd·(1 − xhat_i·mean(xhat)), dw = Σ_rows xhat, db = M.
  Rng rng(1);
  const int64_t M = 16, N = 256;
  const auto x = random_values(rng, M * N, DType::kBFloat16);
  const std::vector<double> ones(M * N, 1.0), w(N, 1.0);
  const auto rstd = ref::rmsnorm_rstd_ref(M, N, x.data(), kEps);
  const auto r = ref::rmsnorm_bwd_ref(M, N, x.data(), w.data(), ones.data(), rstd.data(), nullptr);
  std::vector<double> dw(N, 0.0);
  for (int64_t i = 0; i < M; ++i) {
    double mean = 0;
    for (int64_t j = 0; j < N; ++j) mean += x[i * N + j] * rstd[i];
    mean /= N;
    for (int64_t j = 0; j < N; ++j) {
      const double xh = x[i * N + j] * rstd[i];
      EXPECT_NEAR(r.dx[i * N + j], rstd[i] * (1 - xh * mean), 1e-13);
      dw[j] += xh;
    }
  }
  for (int64_t j = 0; j < N; ++j) {
    EXPECT_NEAR(r.dw[j], dw[j], 1e-12);
    EXPECT_EQ(r.db[j], static_cast<double>(M));
  }
}

TEST(RmsNormRef, BwdOrthogonalToXhatWithoutEps) {
  // With eps = 0 and no dresidual_out: Σ_j dx_j·xhat_j = rstd·(S − mean(xhat²)·S) = 0.
  Rng rng(2);
  const int64_t M = 3, N = 37;
  const auto x = random_values(rng, M * N, DType::kFloat32);
  const auto w = random_uniform(rng, N, DType::kFloat32, 0.5, 1.5);
  const auto dy = random_values(rng, M * N, DType::kFloat32);
  const auto rstd = ref::rmsnorm_rstd_ref(M, N, x.data(), 0.0);
  const auto r = ref::rmsnorm_bwd_ref(M, N, x.data(), w.data(), dy.data(), rstd.data(), nullptr);
  for (int64_t i = 0; i < M; ++i) {
    double s = 0, scale = 0;
    for (int64_t j = 0; j < N; ++j) {
      s += r.dx[i * N + j] * x[i * N + j] * rstd[i];
      scale += std::fabs(r.dx[i * N + j]);
    }
    EXPECT_NEAR(s, 0.0, 1e-13 * scale);
  }
}

TEST(RmsNormRef, BwdMatchesFiniteDifferencesOfFwd) {
  // L = Σ dy·y(x, w, b); dL/dx, dL/dw, dL/db by central differences of the forward reference
  // (with eps, so rstd's dependence on x is exercised), against the backward reference.
  Rng rng(3);
  const int64_t M = 3, N = 11;
  const double eps = 1e-2;
  auto x = random_values(rng, M * N, DType::kFloat32);
  auto w = random_uniform(rng, N, DType::kFloat32, 0.5, 1.5);
  auto b = random_values(rng, N, DType::kFloat32);
  const auto dy = random_values(rng, M * N, DType::kFloat32);
  const auto dres = random_values(rng, M * N, DType::kFloat32);
  auto loss = [&]() {
    const auto f = ref::rmsnorm_fwd_ref(M, N, x.data(), w.data(), b.data(), nullptr, eps);
    double l = 0;
    for (int64_t k = 0; k < M * N; ++k) l += dy[k] * f.out[k];
    return l;
  };
  const auto rstd = ref::rmsnorm_rstd_ref(M, N, x.data(), eps);
  const auto r = ref::rmsnorm_bwd_ref(M, N, x.data(), w.data(), dy.data(), rstd.data(), dres.data());
  const double h = 1e-6;
  auto central = [&](double& v) {
    const double v0 = v;
    v = v0 + h;
    const double lp = loss();
    v = v0 - h;
    const double lm = loss();
    v = v0;
    return (lp - lm) / (2 * h);
  };
  for (int64_t k = 0; k < M * N; ++k)  // dx includes the incoming dresidual_out
    EXPECT_NEAR(r.dx[k] - dres[k], central(x[k]), 1e-6) << "dx " << k;
  for (int64_t j = 0; j < N; ++j) {
    EXPECT_NEAR(r.dw[j], central(w[j]), 1e-6) << "dw " << j;
    EXPECT_NEAR(r.db[j], central(b[j]), 1e-6) << "db " << j;
  }
}

TEST(RmsNormRef, BwdEmptyBatchGivesZeroSums) {
  // C02: M = 0 -> dw = db = 0 exactly (N entries), dx empty.
  const auto r = ref::rmsnorm_bwd_ref(0, 2520, nullptr, nullptr, nullptr, nullptr, nullptr);
  EXPECT_TRUE(r.dx.empty());
  ASSERT_EQ(r.dw.size(), 2520u);
  for (int64_t j = 0; j < 2520; ++j) {
    EXPECT_EQ(r.dw[j], 0.0);
    EXPECT_EQ(r.db[j], 0.0);
  }
}

// ---------------------------------------------------------------- tolerance table

TEST(Tolerance, Table) {
  EXPECT_EQ(tolerance(DType::kFloat32), 1e-5);
  EXPECT_EQ(tolerance(DType::kFloat16), 1e-3);
  EXPECT_EQ(tolerance(DType::kBFloat16), 8e-3);
  // The low-precision bounds cover two half-ulps of the output rounding (relative).
  EXPECT_GE(tolerance(DType::kFloat16), 2 * std::ldexp(1.0, -11));
  EXPECT_GE(tolerance(DType::kBFloat16), 2 * std::ldexp(1.0, -8));
  // Row sums: grows with sqrt(M).
  EXPECT_EQ(reduction_tolerance(DType::kFloat32, 0), reduction_tolerance(DType::kFloat32, 1));
  EXPECT_NEAR(reduction_tolerance(DType::kFloat32, 65536) - 1e-5, 8.0 * 256 / 16777216.0, 1e-15);
  EXPECT_LT(reduction_tolerance(DType::kBFloat16, 100), reduction_tolerance(DType::kBFloat16, 10000));
}

TEST(Tolerance, Compare) {
  const std::vector<double> ref = {1.0, -2.0, 0.5};
  EXPECT_TRUE(compare("t", ref, ref, 0.0).ok);
  EXPECT_TRUE(compare("t", {1.0, -2.0 + 1.9e-5, 0.5}, ref, 1e-5).ok);  // bound = 2e-5
  auto bad = compare("t", {1.0, -2.0 + 2.1e-5, 0.5}, ref, 1e-5, 3);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.worst, 1);
  EXPECT_NE(bad.message.find("row 0, col 1"), std::string::npos) << bad.message;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto n = compare("t", {1.0, nan, 0.5}, ref, 1.0);  // NaN never passes, whatever the bound
  EXPECT_FALSE(n.ok);
  EXPECT_EQ(n.worst, 1);
  EXPECT_FALSE(compare("t", {1.0, -2.0, INFINITY}, ref, 1.0).ok);
  // All-zero reference: exact zeros only.
  EXPECT_TRUE(compare("z", {0.0, 0.0}, {0.0, 0.0}, 1e-3).ok);
  EXPECT_FALSE(compare("z", {0.0, 1e-30}, {0.0, 0.0}, 1e-3).ok);
  EXPECT_FALSE(compare("s", {1.0}, {1.0, 2.0}, 1.0).ok);
  // A floor raises the scale (cancellation): 1e-3 off a reference of 1e-4 passes at rel 1e-2
  // only with the terms' magnitude (1.0) as floor.
  EXPECT_FALSE(compare("f", {1.1e-3}, {1e-4}, 1e-2).ok);
  EXPECT_TRUE(compare("f", {1.1e-3}, {1e-4}, 1e-2, 0, 1.0).ok);
  EXPECT_DOUBLE_EQ(reduction_floor({3.0, 8.0, 1.0}, 16), 2.0);  // max Σ|t| / sqrt(M)
  EXPECT_EQ(reduction_floor({3.0}, 0), 0.0);
}

TEST(RmsNormRef, BwdTermsForTolerances) {
  // N = 1: dx = rstd·g·(1 − xhat²) cancels; dx_terms keeps the size of the terms.
  const double x[] = {2.0}, dy[] = {3.0};
  const double eps = 1e-6, rstd = 1 / std::sqrt(4.0 + eps);
  const auto r = ref::rmsnorm_bwd_ref(1, 1, x, nullptr, dy, &rstd, nullptr);
  EXPECT_LT(std::fabs(r.dx[0]), 1e-6);
  EXPECT_NEAR(r.dx_terms, 2 * 3 * rstd, 1e-6);
  EXPECT_DOUBLE_EQ(r.dw_abs[0], 3 * 2 * rstd);
  EXPECT_DOUBLE_EQ(r.db_abs[0], 3.0);
}

}  // namespace
}  // namespace quack::test
