// Tier 2, large: LayerNorm with M·N > 2^31 (64-bit offsets). Filter with
// --gtest_filter=-*Large* to leave it out; it skips itself without ~20 GB free.
//
// bf16 (8193, 262144): 2^31 + 2^18 elements, the last row starts at element 2^31. x and dout
// are a constant byte pattern (cudaMemset) except rows 0, 8191 and 8192, which are random; the
// reference is computed for the checked rows only (dweight and dbias over all rows: the
// constant rows' terms are known in closed form, so they are checked on random columns against
// the float64 sum of every row). Forward with an fp32 weight and bias on the plan's policy (the
// ring, clusters of 16) and the general policy; backward on the plan's (staged, clusters of
// 16) and the general policy.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "gpu/layernorm_runner.h"
#include "norm/layernorm_internal.h"
#include "quack/norm.h"
#include "reference/layernorm_ref.h"
#include "reference/random.h"
#include "row/row_config.h"

namespace quack::test {
namespace {

class LayerNormLarge : public GpuTest {};

constexpr int64_t kM = 8193, kN = 262144;
constexpr DType kT = DType::kBFloat16;

void put_rows(void* dev, const std::vector<int64_t>& rows, const std::vector<double>& host) {
  std::vector<uint16_t> buf(kN);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int64_t j = 0; j < kN; ++j)
      buf[j] = float_to_bf16_bits(static_cast<float>(host[r * kN + j]));
    ASSERT_EQ(cudaMemcpy(static_cast<uint16_t*>(dev) + rows[r] * kN, buf.data(), kN * 2,
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
}

std::vector<double> get_rows(const void* dev, const std::vector<int64_t>& rows) {
  std::vector<uint16_t> buf(kN);
  std::vector<double> out;
  for (int64_t r : rows) {
    EXPECT_EQ(cudaMemcpy(buf.data(), static_cast<const uint16_t*>(dev) + r * kN, kN * 2,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int64_t j = 0; j < kN; ++j) out.push_back(bf16_bits_to_float(buf[j]));
  }
  return out;
}

std::vector<float> get_f32(const void* dev, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  EXPECT_EQ(cudaMemcpy(v.data(), dev, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

TEST_F(LayerNormLarge, Large64BitOffsets) {
  const size_t bytes = static_cast<size_t>(kM) * kN * 2;  // 4.3 GB per tensor
  size_t free_b = 0, total_b = 0;
  QUACK_CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  if (free_b < 4 * bytes + (size_t{2} << 30))
    GTEST_SKIP() << "needs " << (4 * bytes >> 20) << " MiB + 2 GiB free, have " << (free_b >> 20);
  ASSERT_GT(kM * kN, int64_t{1} << 31);

  DeviceBuffer x(bytes), y(bytes), dy(bytes), dx(bytes);
  ASSERT_TRUE(x.get() && y.get() && dy.get() && dx.get());
  QUACK_CUDA_OK(cudaMemset(x.get(), 0x3F, bytes));   // bf16 0x3F3F
  QUACK_CUDA_OK(cudaMemset(dy.get(), 0xBE, bytes));  // bf16 0xBEBE
  const std::vector<int64_t> random_rows = {0, kM - 2, kM - 1};
  const std::vector<int64_t> checked = {0, kM - 2, kM - 1};
  Rng rng(8193);
  put_rows(x.get(), random_rows, random_values(rng, 3 * kN, kT, 0.5, 2.0));
  put_rows(dy.get(), random_rows, random_values(rng, 3 * kN, kT));
  const std::vector<double> xc = get_rows(x.get(), checked);
  const std::vector<double> dyc = get_rows(dy.get(), checked);
  const int64_t K = static_cast<int64_t>(checked.size());
  std::vector<double> wh, bh;
  DeviceTensor w = random_vector(rng, kN, DType::kFloat32, 1.0, &wh);
  DeviceTensor b = random_vector(rng, kN, DType::kFloat32, 0.0, &bh);
  DeviceBuffer mean(kM * 4), rstd(kM * 4), dw(kN * 4), db(kN * 4);
  const auto mat = [&](void* p) { return TensorRef::matrix(p, kT, kM, kN); };
  const auto vecM = [&](void* p) { return TensorRef::vector(p, DType::kFloat32, kM); };
  const auto vecN = [&](void* p) { return TensorRef::vector(p, DType::kFloat32, kN); };

  // Forward: the general policy first, the plan's last (y, mean and rstd feed the backward).
  const ref::LayerNormFwdRef fref =
      ref::layernorm_fwd_ref(K, kN, xc.data(), wh.data(), bh.data(), nullptr, 1e-5, 0.0);
  for (int config : {detail::kRowConfigCount, -1}) {
    SCOPED_TRACE("fwd config " + std::to_string(config));
    y.poison();
    mean.poison();
    rstd.poison();
    LayerNormFwdArgs a;
    a.x = mat(x.get());
    a.weight = w.ref;
    a.bias = b.ref;
    a.out = mat(y.get());
    a.mean = vecM(mean.get());
    a.rstd = vecM(rstd.get());
    const detail::RowCall call = detail::layernorm_fwd_call(a);
    const detail::RowPlan plan = detail::plan_row_call(call, config);
    ASSERT_NE(plan.policy, detail::RowPolicy::kNone);
    detail::run_row_call(call, plan, nullptr);
    QUACK_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_TRUE(close_rows_ln("out", get_rows(y.get(), checked), fref.out, K, kN, tolerance(kT),
                              fref.out_terms));
    const std::vector<float> m = get_f32(mean.get(), kM), r = get_f32(rstd.get(), kM);
    for (int64_t k = 0; k < K; ++k) {
      const size_t i = static_cast<size_t>(checked[static_cast<size_t>(k)]);
      EXPECT_NEAR(m[i], fref.mean[k], 1e-5 * fref.h_max[k]) << "mean row " << i;
      EXPECT_NEAR(r[i], fref.rstd[k], 2e-5 * fref.rstd[k]) << "rstd row " << i;
    }
  }

  // Backward from the device's mean and rstd (x is h), dweight and dbias over every row.
  const std::vector<float> mf = get_f32(mean.get(), kM), rf = get_f32(rstd.get(), kM);
  std::vector<double> mc, rc;
  for (int64_t i : checked) {
    mc.push_back(mf[static_cast<size_t>(i)]);
    rc.push_back(rf[static_cast<size_t>(i)]);
  }
  const ref::LayerNormBwdRef bref = ref::layernorm_bwd_ref(K, kN, xc.data(), wh.data(), dyc.data(),
                                                           mc.data(), rc.data(), nullptr, 0.0);
  // dweight = Σ_rows dy·x̂ and dbias = Σ_rows dy: the checked rows' terms plus every constant
  // row's (x̂ from that row's own mean and rstd), in float64, on a sample of columns.
  const double xconst = bf16_bits_to_float(0x3F3F), dconst = bf16_bits_to_float(0xBEBE);
  std::vector<int64_t> cols = {0, 1, 4095, 131072, kN - 1};
  for (int q = 0; q < 8; ++q) cols.push_back(static_cast<int64_t>(rng.uniform(0, kN - 1)));
  for (int config : {detail::kRowConfigCount, -1}) {
    SCOPED_TRACE("bwd config " + std::to_string(config));
    dx.poison();
    dw.poison();
    db.poison();
    LayerNormBwdArgs a;
    a.x = mat(x.get());
    a.weight = w.ref;
    a.dout = mat(dy.get());
    a.mean = vecM(mean.get());
    a.rstd = vecM(rstd.get());
    a.dx = mat(dx.get());
    a.dweight = vecN(dw.get());
    a.dbias = vecN(db.get());
    const detail::RowPlan plan = run_ln_bwd(a, config);
    ASSERT_NE(plan.policy, detail::RowPolicy::kNone);
    if (config < 0) {
      EXPECT_EQ(plan.policy, detail::RowPolicy::kStaged);
    }
    EXPECT_TRUE(close_rows_ln("dx", get_rows(dx.get(), checked), bref.dx, K, kN, tolerance(kT),
                              bref.dx_terms));
    const std::vector<float> dwv = get_f32(dw.get(), kN), dbv = get_f32(db.get(), kN);
    for (int64_t col : cols) {
      double sw = 0, sb = 0, aw = 0;
      for (int64_t i = 0; i < kM; ++i) {
        const bool random_row = i == 0 || i >= kM - 2;
        if (random_row) continue;
        const double xh = (xconst - mf[static_cast<size_t>(i)]) * rf[static_cast<size_t>(i)];
        sw += dconst * xh;
        sb += dconst;
        aw += std::fabs(dconst * xh);
      }
      for (int64_t k = 0; k < K; ++k) {
        const double xh = (xc[k * kN + col] - mc[k]) * rc[k];
        sw += dyc[k * kN + col] * xh;
        sb += dyc[k * kN + col];
        aw += std::fabs(dyc[k * kN + col] * xh);
      }
      const double ab = std::fabs(dconst) * (kM - K) + std::fabs(dyc[col]);
      EXPECT_NEAR(dwv[col], sw, reduction_tolerance(DType::kFloat32, kM) *
                                    std::fmax(std::fabs(sw), aw / std::sqrt(double(kM))) + 1e-6)
          << "dweight col " << col;
      EXPECT_NEAR(dbv[col], sb, reduction_tolerance(DType::kFloat32, kM) * ab) << "dbias col " << col;
    }
  }
}

}  // namespace
}  // namespace quack::test
