// Tier 2, large: softmax / log_softmax with M·N > 2^31 (64-bit offsets). Filter with
// --gtest_filter=-*Large* to leave it out; it skips itself without ~20 GB free.
//
// bf16 (8193, 262144): 2^31 + 2^18 elements, the last row starts at element 2^31. x and dy are
// a constant byte pattern (cudaMemset) except rows 0, 8191 and 8192, which are random; the
// reference is computed for the checked rows only. Forward on the plan's policy (ring, clusters
// of 8), the looped and the general policy; backward on the plan's (ring, clusters of 16) and
// the general policy.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "gpu/softmax_runner.h"
#include "quack/softmax.h"
#include "reference/random.h"
#include "reference/softmax_ref.h"
#include "row/row_config.h"
#include "softmax/softmax_internal.h"

namespace quack::test {
namespace {

class SoftmaxLarge : public GpuTest {};

constexpr int64_t kM = 8193, kN = 262144;
constexpr DType kT = DType::kBFloat16;

// Copies host rows (dense, N each) into rows `rows` of a device (M, N) bf16 matrix.
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

// Rows `rows` of a device (M, N) bf16 matrix, dense, as doubles.
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

TEST_F(SoftmaxLarge, Large64BitOffsets) {
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
  const std::vector<int64_t> checked = {0, kM / 2, kM - 2, kM - 1};  // row kM/2 is constant
  Rng rng(8193);
  put_rows(x.get(), random_rows, random_values(rng, 3 * kN, kT, 0.0, 2.0));
  put_rows(dy.get(), random_rows, random_values(rng, 3 * kN, kT));
  const std::vector<double> xc = get_rows(x.get(), checked);
  const std::vector<double> dyc = get_rows(dy.get(), checked);
  const int64_t K = static_cast<int64_t>(checked.size());
  const auto mat = [&](void* p) { return TensorRef::matrix(p, kT, kM, kN); };
  int looped = -1;  // the looped policy's entry of row_config.h
  for (int i = 0; i < detail::kRowConfigCount; ++i)
    if (detail::kRowConfigs[i].policy == detail::RowPolicy::kLooped) looped = i;
  ASSERT_GE(looped, 0);

  for (bool log : {false, true}) {
    // Forward: the plan's policy last, so y holds its output for the backward.
    const std::vector<double> yref = ref::softmax_fwd_ref(K, kN, xc.data(), log);
    for (int config : {looped, detail::kRowConfigCount, -1}) {
      SCOPED_TRACE(std::string(log ? "log_softmax" : "softmax") + " fwd config " +
                   std::to_string(config));
      y.poison();
      SoftmaxFwdArgs a;
      a.x = mat(x.get());
      a.out = mat(y.get());
      const detail::RowCall call = detail::softmax_fwd_call(a, log);
      const detail::RowPlan plan = detail::plan_row_call(call, config);
      ASSERT_NE(plan.policy, detail::RowPolicy::kNone);
      detail::run_row_call(call, plan, nullptr);
      QUACK_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_TRUE(close_rows("out", get_rows(y.get(), checked), yref, K, kN, tolerance(kT),
                             nullptr, !log, underflow_floor(kT)));
    }
    // Backward from the device's y.
    const std::vector<double> yc = get_rows(y.get(), checked);
    const ref::SoftmaxBwdRef dref = ref::softmax_bwd_ref(K, kN, yc.data(), dyc.data(), log);
    for (int config : {detail::kRowConfigCount, -1}) {
      SCOPED_TRACE(std::string(log ? "log_softmax" : "softmax") + " bwd config " +
                   std::to_string(config));
      dx.poison();
      SoftmaxBwdArgs a;
      a.y = mat(y.get());
      a.dy = mat(dy.get());
      a.dx = mat(dx.get());
      const detail::RowCall call = detail::softmax_bwd_call(a, log);
      const detail::RowPlan plan = detail::plan_row_call(call, config);
      ASSERT_NE(plan.policy, detail::RowPolicy::kNone);
      detail::run_row_call(call, plan, nullptr);
      QUACK_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_TRUE(close_rows("dx", get_rows(dx.get(), checked), dref.dx, K, kN, tolerance(kT),
                             &dref.row_terms, false, underflow_floor(kT)));
    }
  }
}

}  // namespace
}  // namespace quack::test
