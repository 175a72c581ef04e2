// Tier 2, large: M·N > 2^31 (64-bit offsets; handed.md C03's shape, applied to RMSNorm), and
// the simple backward path (rows ≤ 64 KB) at (131073, 16384).
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
#include "quack/norm.h"
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

  // Forward: vector (staged) path (contiguous weight), general path (weight with stride 2),
  // simple path (contiguous weight; 512 KB rows: a cluster instance, 16 CTAs per row, so the
  // grid has 8193 x 16 CTAs and the last row's CTAs address past 2^31 elements).
  for (int pass = 0; pass < 3; ++pass) {
    SCOPED_TRACE(pass == 0 ? "fwd vector path" : pass == 1 ? "fwd general path" : "fwd simple path");
    const auto& wv = pass == 1 ? w_strided : w_dense;
    out.poison();
    rstd.poison();
    RmsNormFwdArgs a;
    a.x = TensorRef::matrix(x.get(), kT, kM, kN);
    a.weight = pass == 1 ? w_strided_ref : wd.ref;
    a.out = TensorRef::matrix(out.get(), kT, kM, kN);
    a.rstd = rstd.ref;
    a.eps = eps;
    ScopedFwdPath path(pass == 2 ? RmsNormFwdPath::kSimple : RmsNormFwdPath::kStaged);
    if (pass == 2) {
      const int cfg = detail::rmsnorm_fwd_simple_config(a);
      ASSERT_GE(cfg, 0);
      ASSERT_GT(detail::kSimpleFwdConfigs[cfg].cluster, 1) << detail::kSimpleFwdConfigs[cfg].name;
    } else {
      ASSERT_EQ(detail::rmsnorm_fwd_vector_path(a), pass == 0);
    }
    ASSERT_NO_THROW(rmsnorm_fwd(a, nullptr));
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

  // Backward with the forward's rstd; vector path, then general path.
  const auto rv = download(rstd);
  std::vector<double> rstd_c(K);
  for (int64_t k = 0; k < K; ++k) rstd_c[k] = rv[checked[k]];
  DeviceTensor dw = alloc_tensor(DType::kFloat32, 1, kN, {}, true);
  DeviceTensor db = alloc_tensor(DType::kFloat32, 1, kN, {}, true);
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "bwd vector path" : "bwd general path");
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

// The simple backward path (rows of at most 64 KB) past 2^31 elements: bf16 (131073, 16384) =
// 2^31 + 2^14 elements, the last row starts at element 2^31 (32 KB rows: dweight and dbias
// column sums fit shared memory; 64 KB bf16 rows with both run staged). Constant rows as above; rows 0,
// M-2 and M-1 random; rstd from the host (closed form for the constant rows); dx checked on
// rows 0, M/2, M-2, M-1 and the last column of every row; dweight / dbias over all rows. Run
// twice: identical bits.
TEST_F(RmsNormLarge, Large64BitOffsetsSimpleBwd) {
  constexpr int64_t M = 131073, N = 16384;
  const size_t bytes = static_cast<size_t>(M) * N * 2;  // 4.3 GB per tensor
  size_t free_b = 0, total_b = 0;
  QUACK_CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  if (free_b < 3 * bytes + (size_t{2} << 30))
    GTEST_SKIP() << "needs " << (3 * bytes >> 20) << " MiB + 2 GiB free, have " << (free_b >> 20);
  ASSERT_GT(M * N, int64_t{1} << 31);
  DeviceBuffer x(bytes), dy(bytes), dx(bytes);
  ASSERT_TRUE(x.get() && dy.get() && dx.get());
  QUACK_CUDA_OK(cudaMemset(x.get(), 0x3F, bytes));
  QUACK_CUDA_OK(cudaMemset(dy.get(), 0xBE, bytes));
  const double cx = bf16_bits_to_float(0x3F3F), cdy = bf16_bits_to_float(0xBEBE);
  const std::vector<int64_t> special = {0, M - 2, M - 1};
  const std::vector<int64_t> checked = {0, M / 2, M - 2, M - 1};
  Rng rng(131073);
  const auto xs = random_values(rng, 3 * N, kT), dys = random_values(rng, 3 * N, kT);
  // put_rows / get_rows work in rows of kN elements: a row of N here is 1/8 of one, so write
  // and read through 2-D copies of N-element rows.
  auto put = [&](void* dev, const std::vector<double>& host) {
    std::vector<uint16_t> buf(N);
    for (size_t r = 0; r < special.size(); ++r) {
      for (int64_t j = 0; j < N; ++j) buf[j] = float_to_bf16_bits(static_cast<float>(host[r * N + j]));
      ASSERT_EQ(cudaMemcpy(static_cast<uint16_t*>(dev) + special[r] * N, buf.data(), N * 2,
                           cudaMemcpyHostToDevice),
                cudaSuccess);
    }
  };
  put(x.get(), xs);
  put(dy.get(), dys);
  const auto w = random_values(rng, N, kT, 1.0, 0.5);
  DeviceTensor wd = upload_vector(w, kT, N);
  const float eps = 1e-6f;
  // rstd as the forward stores it (fp32): random rows from the reference, the rest constant.
  const auto sr = ref::rmsnorm_rstd_ref(3, N, xs.data(), eps);
  const float rc = static_cast<float>(1.0 / std::sqrt(cx * cx + eps));
  std::vector<double> rv(M, rc);
  for (size_t s = 0; s < special.size(); ++s) rv[special[s]] = static_cast<float>(sr[s]);
  DeviceTensor rstd = upload_vector(rv, DType::kFloat32, M);
  DeviceTensor dw = alloc_tensor(DType::kFloat32, 1, N, {}, true);
  DeviceTensor db = alloc_tensor(DType::kFloat32, 1, N, {}, true);
  RmsNormBwdArgs a;
  a.x = TensorRef::matrix(x.get(), kT, M, N);
  a.weight = wd.ref;
  a.dout = TensorRef::matrix(dy.get(), kT, M, N);
  a.rstd = rstd.ref;
  a.dx = TensorRef::matrix(dx.get(), kT, M, N);
  a.dweight = dw.ref;
  a.dbias = db.ref;
  ScopedBwdPath path(RmsNormBwdPath::kSimple);
  ASSERT_GE(detail::rmsnorm_bwd_simple_config(a), 0);
  size_t wsb = 0;
  ASSERT_NO_THROW(wsb = rmsnorm_bwd_workspace_size(a));
  DeviceBuffer ws(wsb);

  // References: the checked rows, the last column of every row, dweight and dbias.
  std::vector<double> xc, dyc, rstd_c;
  for (int64_t r : checked) {
    bool found = false;
    for (size_t s = 0; s < special.size(); ++s)
      if (special[s] == r) {
        xc.insert(xc.end(), xs.begin() + s * N, xs.begin() + (s + 1) * N);
        dyc.insert(dyc.end(), dys.begin() + s * N, dys.begin() + (s + 1) * N);
        found = true;
      }
    if (!found) {
      xc.insert(xc.end(), N, cx);
      dyc.insert(dyc.end(), N, cdy);
    }
    rstd_c.push_back(rv[r]);
  }
  const int64_t K = static_cast<int64_t>(checked.size());
  const auto ref = ref::rmsnorm_bwd_ref(K, N, xc.data(), w.data(), dyc.data(), rstd_c.data(), nullptr);
  double wmean = 0;
  for (double v : w) wmean += v;
  wmean /= N;
  std::vector<double> last_ref(M);
  for (int64_t i = 0; i < M; ++i)
    last_ref[i] = rv[i] * (cdy * w[N - 1] - cx * rv[i] * cdy * cx * rv[i] * wmean);
  for (int64_t k = 0; k < K; ++k) last_ref[checked[k]] = ref.dx[k * N + N - 1];
  std::vector<double> srv(special.size());
  for (size_t s = 0; s < special.size(); ++s) srv[s] = rv[special[s]];
  const auto sref = ref::rmsnorm_bwd_ref(3, N, xs.data(), w.data(), dys.data(), srv.data(), nullptr);
  double const_rstd_sum = 0;
  for (int64_t i = 0; i < M; ++i)
    if (i != special[0] && i != special[1] && i != special[2]) const_rstd_sum += rv[i];
  std::vector<double> dw_ref(N), db_ref(N);
  for (int64_t j = 0; j < N; ++j) {
    dw_ref[j] = sref.dw[j] + cdy * cx * const_rstd_sum;
    db_ref[j] = sref.db[j] + cdy * static_cast<double>(M - 3);
  }

  std::vector<unsigned char> dw_bits, db_bits;
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    dx.poison();
    dw.poison();
    db.poison();
    ASSERT_NO_THROW(rmsnorm_bwd(a, ws.get(), wsb, nullptr));
    QUACK_CUDA_OK(cudaDeviceSynchronize());
    // Checked rows, through N-element row copies.
    std::vector<double> got;
    std::vector<uint16_t> buf(N);
    for (int64_t r : checked) {
      ASSERT_EQ(cudaMemcpy(buf.data(), static_cast<const uint16_t*>(dx.get()) + r * N, N * 2,
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      for (int64_t j = 0; j < N; ++j) got.push_back(bf16_bits_to_float(buf[j]));
    }
    EXPECT_TRUE(close("dx rows", got, ref.dx, tolerance(kT), N, ref.dx_terms));
    std::vector<uint16_t> col(M);
    ASSERT_EQ(cudaMemcpy2D(col.data(), 2, static_cast<const uint16_t*>(dx.get()) + (N - 1), N * 2,
                           2, M, cudaMemcpyDeviceToHost),
              cudaSuccess);
    std::vector<double> last(M);
    for (int64_t i = 0; i < M; ++i) last[i] = bf16_bits_to_float(col[i]);
    EXPECT_TRUE(close("dx[:, N-1]", last, last_ref, tolerance(kT), 0, ref.dx_terms));
    EXPECT_TRUE(close("dweight", download(dw), dw_ref, reduction_tolerance(DType::kFloat32, M)));
    EXPECT_TRUE(close("dbias", download(db), db_ref, reduction_tolerance(DType::kFloat32, M)));
    if (run == 0) {
      dw_bits = download_bytes(dw);
      db_bits = download_bytes(db);
    } else {
      EXPECT_TRUE(download_bytes(dw) == dw_bits) << "dweight differs between runs";
      EXPECT_TRUE(download_bytes(db) == db_bits) << "dbias differs between runs";
    }
  }
}

}  // namespace
}  // namespace quack::test
