// Tier 2, large: M·N > 2^31 (64-bit offsets; handed.md C03's shape, applied to RMSNorm).
// Filter with --gtest_filter=-*Large* to leave it out; it skips itself without ~18 GB free.
//
// bf16 (8193, 262144): 2^31 + 2^18 elements, the last row starts at element 2^31. The bulk of
// x and dy is a constant byte pattern (cudaMemset), rows 0, 8191 and 8192 are random; the
// reference is computed for the checked rows only (and in closed form for the constant rows),
// never for the whole tensor on the CPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "gpu/rmsnorm_runner.h"
#include "norm/rmsnorm_internal.h"
#include "quack/norm.h"
#include "row/row_config.h"
#include "row/row_op.h"
#include "reference/random.h"
#include "reference/rmsnorm_ref.h"

namespace quack::test {
namespace {

class RmsNormLarge : public GpuTest {};

constexpr int64_t kM = 8193, kN = 262144;
constexpr DType kT = DType::kBFloat16;

// Copies host rows (dense, N each) into rows `rows` of a device (M, N) bf16 matrix.
void put_rows(void* dev, const std::vector<int64_t>& rows, const std::vector<double>& host) {
  std::vector<uint16_t> buf(kN);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int64_t j = 0; j < kN; ++j) buf[j] = float_to_bf16_bits(static_cast<float>(host[r * kN + j]));
    ASSERT_EQ(cudaMemcpy(static_cast<uint16_t*>(dev) + rows[r] * kN, buf.data(), kN * 2,
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
}

// Rows `rows` of a device (M, N) matrix of dtype t, dense, as doubles.
std::vector<double> get_rows(const void* dev, DType t, const std::vector<int64_t>& rows) {
  const int es = dtype_size(t);
  std::vector<unsigned char> buf(static_cast<size_t>(kN) * es);
  std::vector<double> out;
  for (int64_t r : rows) {
    EXPECT_EQ(cudaMemcpy(buf.data(), static_cast<const char*>(dev) + r * kN * es, buf.size(),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int64_t j = 0; j < kN; ++j) out.push_back(load_as(t, buf.data() + j * es));
  }
  return out;
}

// Column `col` of every row of a device (M, N) matrix.
std::vector<double> get_column(const void* dev, DType t, int64_t col) {
  const int es = dtype_size(t);
  std::vector<unsigned char> buf(static_cast<size_t>(kM) * es);
  EXPECT_EQ(cudaMemcpy2D(buf.data(), es, static_cast<const char*>(dev) + col * es, kN * es, es, kM,
                         cudaMemcpyDeviceToHost),
            cudaSuccess);
  std::vector<double> out(kM);
  for (int64_t i = 0; i < kM; ++i) out[i] = load_as(t, buf.data() + i * es);
  return out;
}

TEST_F(RmsNormLarge, Large64BitOffsets) {
  const size_t bytes = static_cast<size_t>(kM) * kN * 2;  // 4.3 GB per tensor
  size_t free_b = 0, total_b = 0;
  QUACK_CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  if (free_b < 4 * bytes + (size_t{2} << 30))
    GTEST_SKIP() << "needs " << (4 * bytes >> 20) << " MiB + 2 GiB free, have " << (free_b >> 20);
  ASSERT_GT(kM * kN, int64_t{1} << 31);

  DeviceBuffer x(bytes), out(bytes), dy(bytes), dx(bytes);
  ASSERT_TRUE(x.get() && out.get() && dy.get() && dx.get());
  // Constant rows: x = bf16 0x3F3F, dy = bf16 0xBEBE.
  QUACK_CUDA_OK(cudaMemset(x.get(), 0x3F, bytes));
  QUACK_CUDA_OK(cudaMemset(dy.get(), 0xBE, bytes));
  const double cx = bf16_bits_to_float(0x3F3F), cdy = bf16_bits_to_float(0xBEBE);
  const std::vector<int64_t> special = {0, kM - 2, kM - 1};  // random rows
  const std::vector<int64_t> checked = {0, kM / 2, kM - 2, kM - 1};
  Rng rng(8193);
  const auto xs = random_values(rng, 3 * kN, kT), dys = random_values(rng, 3 * kN, kT);
  put_rows(x.get(), special, xs);
  put_rows(dy.get(), special, dys);
  // Host copies of the checked rows (row kM/2 is constant).
  std::vector<double> xc, dyc;
  for (int64_t r : checked) {
    for (size_t s = 0; s < special.size(); ++s)
      if (special[s] == r) {
        xc.insert(xc.end(), xs.begin() + s * kN, xs.begin() + (s + 1) * kN);
        dyc.insert(dyc.end(), dys.begin() + s * kN, dys.begin() + (s + 1) * kN);
      }
    if (r == kM / 2) {
      xc.insert(xc.end(), kN, cx);
      dyc.insert(dyc.end(), kN, cdy);
    }
  }
  const int64_t K = static_cast<int64_t>(checked.size());
  const auto w = random_values(rng, 2 * kN, kT, 1.0, 0.5);  // strided use reads every other
  std::vector<double> w_dense(kN), w_strided(kN);
  for (int64_t j = 0; j < kN; ++j) {
    w_dense[j] = w[j];
    w_strided[j] = w[2 * j];
  }
  DeviceTensor wd = upload_vector(w_dense, kT, kN), ws2 = upload_vector(w, kT, 2 * kN);
  TensorRef w_strided_ref = TensorRef::vector(ws2.ref.data, kT, kN, 0, 2);
  DeviceTensor rstd = alloc_tensor(DType::kFloat32, 1, kM, {}, true);
  const float eps = 1e-6f;

  // Forward: the plan (the ring: a cluster of 8 CTAs per row), the general policy (weight with
  // stride 2), the looped policy (forced; 16 chunks of 32 KB per row).
  int looped = -1;
  for (int i = 0; i < detail::kRowConfigCount; ++i)
    if (std::string(detail::kRowConfigs[i].name) == "t1024v2-looped") looped = i;
  ASSERT_GE(looped, 0);
  for (int pass = 0; pass < 3; ++pass) {
    SCOPED_TRACE(pass == 0 ? "fwd plan" : pass == 1 ? "fwd general" : "fwd looped");
    const auto& wv = pass == 1 ? w_strided : w_dense;
    out.poison();
    rstd.poison();
    RmsNormFwdArgs a;
    a.x = TensorRef::matrix(x.get(), kT, kM, kN);
    a.weight = pass == 1 ? w_strided_ref : wd.ref;
    a.out = TensorRef::matrix(out.get(), kT, kM, kN);
    a.rstd = rstd.ref;
    a.eps = eps;
    const detail::RowCall call = detail::rmsnorm_fwd_call(a);
    if (pass == 2) {
      const detail::RowPlan plan = detail::plan_row_call(call, looped);
      ASSERT_EQ(plan.policy, detail::RowPolicy::kLooped);
      ASSERT_NO_THROW(detail::run_row_call(call, plan, nullptr));
    } else {
      const detail::RowPlan plan = detail::plan_row_call(call);
      ASSERT_EQ(plan.policy, pass == 0 ? detail::RowPolicy::kRing : detail::RowPolicy::kGeneral);
      ASSERT_NO_THROW(rmsnorm_fwd(a, nullptr));
    }
    QUACK_CUDA_OK(cudaDeviceSynchronize());
    const auto ref = ref::rmsnorm_fwd_ref(K, kN, xc.data(), wv.data(), nullptr, nullptr, eps);
    EXPECT_TRUE(close("out rows", get_rows(out.get(), kT, checked), ref.out, tolerance(kT), kN));
    // rstd of every row; the last column of every row.
    const double rstd_c = 1.0 / std::sqrt(cx * cx + eps);
    std::vector<double> rstd_ref(kM, rstd_c), last_ref(kM, cx * rstd_c * wv[kN - 1]);
    for (int64_t k = 0; k < K; ++k) {
      rstd_ref[checked[k]] = ref.rstd[k];
      last_ref[checked[k]] = ref.out[k * kN + kN - 1];
    }
    EXPECT_TRUE(close("rstd", download(rstd), rstd_ref, tolerance(DType::kFloat32)));
    EXPECT_TRUE(close("out[:, N-1]", get_column(out.get(), kT, kN - 1), last_ref, tolerance(kT)));
  }

  // Backward with the forward's rstd; the staged policy, then the general one.
  const auto rv = download(rstd);
  std::vector<double> rstd_c(K);
  for (int64_t k = 0; k < K; ++k) rstd_c[k] = rv[checked[k]];
  DeviceTensor dw = alloc_tensor(DType::kFloat32, 1, kN, {}, true);
  DeviceTensor db = alloc_tensor(DType::kFloat32, 1, kN, {}, true);
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "bwd staged" : "bwd general");
    const auto& wv = pass == 0 ? w_dense : w_strided;
    dx.poison();
    dw.poison();
    db.poison();
    RmsNormBwdArgs a;
    a.x = TensorRef::matrix(x.get(), kT, kM, kN);
    a.weight = pass == 0 ? wd.ref : w_strided_ref;
    a.dout = TensorRef::matrix(dy.get(), kT, kM, kN);
    a.rstd = rstd.ref;
    a.dx = TensorRef::matrix(dx.get(), kT, kM, kN);
    a.dweight = dw.ref;
    a.dbias = db.ref;
    size_t wsb = 0;
    ASSERT_NO_THROW(wsb = rmsnorm_bwd_workspace_size(a));
    ASSERT_EQ(detail::plan_row_call(detail::rmsnorm_bwd_call(a)).policy,
              pass == 0 ? detail::RowPolicy::kStaged : detail::RowPolicy::kGeneral);
    DeviceBuffer ws(wsb);
    ASSERT_NO_THROW(rmsnorm_bwd(a, ws.get(), wsb, nullptr));
    QUACK_CUDA_OK(cudaDeviceSynchronize());

    const auto ref = ref::rmsnorm_bwd_ref(K, kN, xc.data(), wv.data(), dyc.data(), rstd_c.data(), nullptr);
    EXPECT_TRUE(close("dx rows", get_rows(dx.get(), kT, checked), ref.dx, tolerance(kT), kN,
                      ref.dx_terms));
    // Last column of every row: constant rows in closed form,
    // dx = rstd·(cdy·w − cx·rstd·mean(cdy·w·cx·rstd)).
    double wmean = 0;
    for (double v : wv) wmean += v;
    wmean /= kN;
    std::vector<double> last_ref(kM);
    for (int64_t i = 0; i < kM; ++i)
      last_ref[i] = rv[i] * (cdy * wv[kN - 1] - cx * rv[i] * cdy * cx * rv[i] * wmean);
    for (int64_t k = 0; k < K; ++k) last_ref[checked[k]] = ref.dx[k * kN + kN - 1];
    EXPECT_TRUE(close("dx[:, N-1]", get_column(dx.get(), kT, kN - 1), last_ref, tolerance(kT), 0,
                      ref.dx_terms));
    // dweight, dbias over all rows: the random rows through the reference, the constant ones
    // in closed form (dy·xhat = cdy·cx·rstd_i, the same in every column).
    std::vector<double> sx, sdy, sr;
    for (size_t s = 0; s < special.size(); ++s) sr.push_back(rv[special[s]]);
    const auto sref = ref::rmsnorm_bwd_ref(3, kN, xs.data(), wv.data(), dys.data(), sr.data(), nullptr);
    double const_rstd_sum = 0;
    for (int64_t i = 0; i < kM; ++i)
      if (i != special[0] && i != special[1] && i != special[2]) const_rstd_sum += rv[i];
    std::vector<double> dw_ref(kN), db_ref(kN);
    for (int64_t j = 0; j < kN; ++j) {
      dw_ref[j] = sref.dw[j] + cdy * cx * const_rstd_sum;
      db_ref[j] = sref.db[j] + cdy * static_cast<double>(kM - 3);
    }
    EXPECT_TRUE(close("dweight", download(dw), dw_ref, reduction_tolerance(DType::kFloat32, kM)));
    EXPECT_TRUE(close("dbias", download(db), db_ref, reduction_tolerance(DType::kFloat32, kM)));
  }
}

}  // namespace
}  // namespace quack::test
