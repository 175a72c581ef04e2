// Tier 2, large (handed case C03): cross-entropy with M·V > 2^31 (64-bit offsets). Filter with
// --gtest_filter=-*Large* to leave it out; it skips itself without enough free memory.
//
// bf16 (16744, 128256) (2,147,518,464 elements) and (8193, 262144) (2^31 + 2^18): the logits are
// a constant byte pattern (cudaMemset) except rows 0, M−2 and M−1, which are random, and the
// last row has one large logit at its target; the reference is computed for the checked rows
// only. Per shape: the forward with dx ('mean', the training path: prep + ring kernel + finish;
// and 'none' with lse), on the plan's policy, the general policy and three entries under trial
// (ring-t1024v4-s3e, cl-t256v8, cl-t256v8-s1), then the backward from the device's lse (dloss
// per row; its plan at both shapes: the ring). Also an out-of-range target in row M−2 (NaN row, nothing touched outside the
// tensors: run under compute-sanitizer memcheck).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cross_entropy/cross_entropy_internal.h"
#include "gpu/cross_entropy_runner.h"
#include "gpu/gpu_util.h"
#include "quack/cross_entropy.h"
#include "reference/cross_entropy_ref.h"
#include "reference/random.h"
#include "row/row_config.h"

namespace quack::test {
namespace {

class CeLarge : public GpuTest {};

constexpr DType kT = DType::kBFloat16;

void put_rows(void* dev, int64_t V, const std::vector<int64_t>& rows,
              const std::vector<double>& host) {
  std::vector<uint16_t> buf(V);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int64_t j = 0; j < V; ++j)
      buf[j] = float_to_bf16_bits(static_cast<float>(host[r * V + j]));
    ASSERT_EQ(cudaMemcpy(static_cast<uint16_t*>(dev) + rows[r] * V, buf.data(), V * 2,
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
}

std::vector<double> get_rows(const void* dev, int64_t V, const std::vector<int64_t>& rows) {
  std::vector<uint16_t> buf(V);
  std::vector<double> out;
  for (int64_t r : rows) {
    EXPECT_EQ(cudaMemcpy(buf.data(), static_cast<const uint16_t*>(dev) + r * V, V * 2,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int64_t j = 0; j < V; ++j) out.push_back(bf16_bits_to_float(buf[j]));
  }
  return out;
}

std::vector<double> get_floats(const DeviceTensor& t, const std::vector<int64_t>& rows) {
  const std::vector<double> all = download(t);
  std::vector<double> out;
  for (int64_t r : rows) out.push_back(all[static_cast<size_t>(r)]);
  return out;
}

void run_shape(int64_t M, int64_t V) {
  SCOPED_TRACE("M=" + std::to_string(M) + " V=" + std::to_string(V));
  const size_t bytes = static_cast<size_t>(M) * V * 2;
  size_t free_b = 0, total_b = 0;
  QUACK_CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  if (free_b < 2 * bytes + (size_t{2} << 30))
    GTEST_SKIP() << "needs " << (2 * bytes >> 20) << " MiB + 2 GiB free, have " << (free_b >> 20);
  ASSERT_GT(M * V, int64_t{1} << 31);

  DeviceBuffer x(bytes), dx(bytes);
  ASSERT_TRUE(x.get() && dx.get());
  QUACK_CUDA_OK(cudaMemset(x.get(), 0x3F, bytes));  // bf16 0x3F3F ≈ 0.746 everywhere
  const std::vector<int64_t> random_rows = {0, M - 2, M - 1};
  const std::vector<int64_t> checked = {0, M / 2, M - 2, M - 1};
  Rng rng(static_cast<uint64_t>(M));
  std::vector<double> rx = random_values(rng, 3 * V, kT, 0.0, 2.0);
  std::vector<int64_t> targets(static_cast<size_t>(M));
  for (int64_t i = 0; i < M; ++i) targets[i] = (i * 7919) % V;
  targets[M / 3] = -100;                    // an ignored row
  targets[M - 1] = V - 3;
  rx[2 * V + (V - 3)] = 12.0;               // the last row: a large logit at its target
  put_rows(x.get(), V, random_rows, rx);
  const std::vector<double> xc = get_rows(x.get(), V, checked);
  const int64_t K = static_cast<int64_t>(checked.size());
  const auto mat = [&](void* p) { return TensorRef::matrix(p, kT, M, V); };

  for (bool bad_target : {false, true}) {
    std::vector<int64_t> t = targets;
    if (bad_target) t[M - 2] = V + 5;  // out of range: NaN row
    DeviceTensor tg = upload_targets(t, DType::kInt64);
    std::vector<int64_t> tc;
    for (int64_t r : checked) tc.push_back(t[r]);
    // The reference for 'mean' needs the whole batch's denominator: every row but the ignored
    // one (and the bad one) is counted.
    const double count = static_cast<double>(M - 1 - (bad_target ? 1 : 0));
    ref::CeOptions o;
    o.reduction = 0;
    const ref::CeRef r = ref::cross_entropy_ref(K, V, xc.data(), tc.data(), o, true);
    // The plan's policy, the general one, and three entries under trial (cross-entropy's
    // forwards only; ring-t1024v4-s3e: the loss alone; cl-t256v8-s1: with dx): a step whose
    // op the entry is not compiled for is skipped.
    std::vector<int> configs = {-1, detail::kRowConfigCount};
    for (int i = 0; i < detail::kRowConfigCount; ++i) {
      const std::string n = detail::kRowConfigs[i].name;
      if (n == "ring-t1024v4-s3e" || n == "cl-t256v8" || n == "cl-t256v8-s1")
        configs.push_back(i);
    }
    ASSERT_EQ(configs.size(), 5u);
    const auto runs = [&](int config, const detail::RowPlan& plan) {
      if (plan.policy != detail::RowPolicy::kNone) return true;
      EXPECT_TRUE(config >= 0 && config < detail::kRowConfigCount &&
                  detail::kRowConfigs[config].trial)
          << "only entries under trial skip a step";
      return false;
    };
    for (int config : configs) {
      SCOPED_TRACE("config " + std::to_string(config) + (bad_target ? ", bad target" : ""));
      // Forward 'mean' with dx (out of place), then 'none' with lse.
      dx.poison();
      DeviceTensor loss = alloc_vector(DType::kFloat32, 1);
      CrossEntropyFwdArgs a;
      a.x = mat(x.get());
      a.target = tg.ref;
      a.loss = loss.ref;
      a.dx = mat(dx.get());
      a.reduction = Reduction::kMean;
      const size_t ws_bytes = cross_entropy_fwd_workspace_size(a);
      DeviceBuffer ws(ws_bytes);
      a.workspace = ws.get();
      a.workspace_bytes = ws_bytes;
      const detail::CeFwdCall call = detail::cross_entropy_fwd_call(a);
      const detail::RowPlan plan = detail::plan_row_call(call.row, config);
      if (runs(config, plan)) {
        detail::run_cross_entropy_fwd(call, plan, nullptr);
        QUACK_CUDA_OK(cudaDeviceSynchronize());
        std::vector<double> dref = r.dx;
        for (double& v : dref) v /= count;
        std::vector<double> floors = r.row_terms;
        for (double& v : floors) v /= count;
        EXPECT_TRUE(ce_close_rows("dx", get_rows(dx.get(), V, checked), dref, K, V,
                                  tolerance(kT), floors));
        const double lsum = download(loss)[0];
        if (bad_target) EXPECT_TRUE(std::isnan(lsum)) << "mean with a bad row: NaN";
        else EXPECT_TRUE(std::isfinite(lsum) && lsum > 0) << lsum;
      }

      DeviceTensor rows = alloc_vector(DType::kFloat32, M), lse = alloc_vector(DType::kFloat32, M);
      CrossEntropyFwdArgs b;
      b.x = mat(x.get());
      b.target = tg.ref;
      b.loss = rows.ref;
      b.lse = lse.ref;
      b.reduction = Reduction::kNone;
      const detail::CeFwdCall call2 = detail::cross_entropy_fwd_call(b);
      // An entry compiled only for the forward with dx (cl-t256v8-s1) leaves the loss alone to
      // the plan.
      detail::RowPlan plan2 = detail::plan_row_call(call2.row, config);
      if (!runs(config, plan2)) plan2 = detail::plan_row_call(call2.row, -1);
      ASSERT_NE(plan2.policy, detail::RowPolicy::kNone);
      detail::run_cross_entropy_fwd(call2, plan2, nullptr);
      QUACK_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_TRUE(
          close("loss", get_floats(rows, checked), r.loss_rows, tolerance(DType::kFloat32)));
      EXPECT_TRUE(close("lse", get_floats(lse, checked), r.lse, tolerance(DType::kFloat32)));

      // Backward from the device's lse, dloss per row.
      std::vector<double> dl = random_values(rng, M, DType::kFloat32, 0.0, 1.0);
      DeviceTensor dloss = upload_vector(dl, DType::kFloat32, M);
      std::vector<double> dlc, lc = get_floats(lse, checked);
      for (int64_t rr : checked) dlc.push_back(dl[static_cast<size_t>(rr)]);
      const ref::CeRef rb = ref::cross_entropy_ref(K, V, xc.data(), tc.data(), o, true, dlc.data());
      dx.poison();
      CrossEntropyBwdArgs g;
      g.x = mat(x.get());
      g.target = tg.ref;
      g.lse = lse.ref;
      g.dloss = dloss.ref;
      g.dx = mat(dx.get());
      const detail::RowCall bc = detail::cross_entropy_bwd_call(g);
      const detail::RowPlan plan3 = detail::plan_row_call(bc, config);
      if (runs(config, plan3)) {
        detail::run_row_call(bc, plan3, nullptr);
        QUACK_CUDA_OK(cudaDeviceSynchronize());
        EXPECT_TRUE(ce_close_rows("dx (bwd)", get_rows(dx.get(), V, checked), rb.dx, K, V,
                                  tolerance(kT), rb.row_terms));
      }
    }
  }
}

TEST_F(CeLarge, Large64BitOffsetsV128256) { run_shape(16744, 128256); }
TEST_F(CeLarge, Large64BitOffsetsV262144) { run_shape(8193, 262144); }

}  // namespace
}  // namespace quack::test
