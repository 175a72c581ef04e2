// Tier 2: rmsnorm_fwd on the device against the float64 reference. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "gpu/gpu_util.h"
#include "gpu/rmsnorm_runner.h"
#include "quack/errors.h"
#include "quack/norm.h"

namespace quack::test {
namespace {

using Shape = std::pair<int64_t, int64_t>;  // (M, N)

// Vector path (N a multiple of 16 bytes; N ≤ 524288 for 16-bit x, 262144 for fp32),
// clusters (long rows), general path (odd N, N beyond the vector limit), many short rows.
const std::vector<Shape> kShapes = {
    {1, 1},      {33, 1},     {7, 127},    {5, 127},    {100, 500},   {16, 1024},
    {64, 4096},  {257, 8192}, {7, 65536},  {3, 65537},  {2, 262144},  {1, 262144},
    {2, 262152}, {1, 300000}, {1, 524288}, {1, 524296}, {65537, 16},  {8192, 64}};

struct DtypePair {
  DType x, w;
};
const std::vector<DtypePair> kDtypes = {{DType::kFloat32, DType::kFloat32},
                                        {DType::kFloat16, DType::kFloat16},
                                        {DType::kFloat16, DType::kFloat32},
                                        {DType::kBFloat16, DType::kBFloat16},
                                        {DType::kBFloat16, DType::kFloat32}};

class RmsNormFwdShapes : public GpuTest,
                         public ::testing::WithParamInterface<std::tuple<Shape, DtypePair>> {};

TEST_P(RmsNormFwdShapes, MatchesReference) {
  const auto [shape, dt] = GetParam();
  FwdCase c;
  c.M = shape.first;
  c.N = shape.second;
  c.x = dt.x;
  c.weight = dt.w;
  c.seed = static_cast<uint64_t>(c.M * 1000003 + c.N);
  run_fwd(c);
}

std::string shape_name(const ::testing::TestParamInfo<std::tuple<Shape, DtypePair>>& info) {
  const auto [s, d] = info.param;
  return "M" + std::to_string(s.first) + "_N" + std::to_string(s.second) + "_x" +
         short_name(d.x) + "_w" + short_name(d.w);
}

INSTANTIATE_TEST_SUITE_P(All, RmsNormFwdShapes,
                         ::testing::Combine(::testing::ValuesIn(kShapes), ::testing::ValuesIn(kDtypes)),
                         shape_name);

// Optional operands and output dtypes, on a general-path, a vector-path and a cluster shape.
class RmsNormFwd : public GpuTest {};

const std::vector<Shape> kOptionShapes = {{5, 127}, {64, 4096}, {3, 16384}};
const DType kXTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

TEST_F(RmsNormFwd, OptionalOperandsAndDtypes) {
  const DType f32 = DType::kFloat32;
  uint64_t seed = 100;
  for (const auto& [M, N] : kOptionShapes)
    for (DType xt : kXTypes) {
      FwdCase base;
      base.M = M;
      base.N = N;
      base.x = xt;
      std::vector<FwdCase> cases;
      auto add = [&](auto edit) {
        FwdCase c = base;
        edit(c);
        c.seed = ++seed;
        cases.push_back(c);
      };
      add([&](FwdCase& c) { c.weight = xt; c.bias = xt; });
      add([&](FwdCase& c) { c.weight = f32; c.bias = f32; });
      add([&](FwdCase& c) { c.weight.reset(); c.bias = f32; });
      add([&](FwdCase& c) { c.weight.reset(); c.rstd = false; });
      add([&](FwdCase& c) { c.residual = xt; c.residual_out = xt; });
      add([&](FwdCase& c) { c.residual = f32; c.residual_out = f32; });
      add([&](FwdCase& c) { c.residual = xt; c.residual_out = f32; });
      add([&](FwdCase& c) { c.residual = f32; });                // no residual_out
      add([&](FwdCase& c) { c.residual_out = xt; });             // h = x, copied
      add([&](FwdCase& c) { c.out = f32; });
      add([&](FwdCase& c) { c.rstd_stride = 3; });
      add([&](FwdCase& c) {
        c.weight = f32; c.bias = f32; c.residual = f32; c.residual_out = f32; c.out = f32;
      });
      add([&](FwdCase& c) { c.eps = 0.f; });
      add([&](FwdCase& c) { c.eps = 0.5f; });  // large eps: visible in rstd
      for (const auto& c : cases) run_fwd(c);
    }
}

// x, residual, outputs as slices of wider buffers, strided columns, misaligned bases,
// broadcast rows and transposed outputs.
TEST_F(RmsNormFwd, Layouts) {
  uint64_t seed = 500;
  for (const auto& [M, N] : {Shape{64, 4096}, Shape{7, 128}, Shape{3, 65536}, Shape{5, 127}})
    for (DType xt : kXTypes) {
      FwdCase base;
      base.M = M;
      base.N = N;
      base.x = xt;
      base.weight = DType::kFloat32;
      std::vector<FwdCase> cases;
      auto add = [&](auto edit) {
        FwdCase c = base;
        edit(c);
        c.seed = ++seed;
        cases.push_back(c);
      };
      // Row stride N + 8 keeps rows 16-byte aligned (vector path where N allows).
      add([&](FwdCase& c) { c.x_l.row_stride = N + 8; c.out_l.row_stride = N + 16; });
      add([&](FwdCase& c) {
        c.residual = xt; c.residual_out = xt;
        c.x_l.row_stride = N + 8; c.res_l.row_stride = N + 24; c.res_out_l.row_stride = N + 8;
        c.out_l.row_stride = N + 8;
      });
      // Odd row strides force the general path.
      add([&](FwdCase& c) { c.x_l.row_stride = N + 1; });
      add([&](FwdCase& c) { c.out_l.row_stride = N + 3; });
      add([&](FwdCase& c) { c.residual = DType::kFloat32; c.res_l.row_stride = N + 1; });
      // Column strides and misaligned bases: general path.
      add([&](FwdCase& c) { c.x_l.row_stride = 2 * N; c.x_l.col_stride = 2; });
      add([&](FwdCase& c) { c.out_l.row_stride = 2 * N; c.out_l.col_stride = 2; });
      add([&](FwdCase& c) { c.x_l.offset = 1; });
      add([&](FwdCase& c) { c.out_l.offset = 1; });
      add([&](FwdCase& c) { c.weight_stride = 2; });
      add([&](FwdCase& c) { c.bias = DType::kFloat32; c.residual = xt; c.res_l.offset = 3; });
      // Transposed output: (M, N) with strides (1, M).
      add([&](FwdCase& c) { c.out_l.row_stride = 1; c.out_l.col_stride = M; });
      for (const auto& c : cases) run_fwd(c);
    }
}

TEST_F(RmsNormFwd, BroadcastInputRow) {
  // x with row stride 0: every row is the same row (an input may overlap itself).
  for (DType xt : kXTypes)
    for (int64_t N : {int64_t{4096}, int64_t{127}}) {
      SCOPED_TRACE(std::string(short_name(xt)) + " N=" + std::to_string(N));
      const int64_t M = 9;
      Rng rng(7 + N);
      const auto row = random_values(rng, N, xt);
      std::vector<double> x;
      for (int64_t i = 0; i < M; ++i) x.insert(x.end(), row.begin(), row.end());
      Layout l;
      l.row_stride = 0;
      DeviceTensor dx = upload(x, xt, M, N, l);
      DeviceTensor out = alloc_tensor(xt, M, N);
      RmsNormFwdArgs a;
      a.x = dx.ref;
      a.out = out.ref;
      ASSERT_NO_THROW(rmsnorm_fwd(a, nullptr));
      QUACK_CUDA_OK(cudaDeviceSynchronize());
      const auto ref = ref::rmsnorm_fwd_ref(M, N, x.data(), nullptr, nullptr, nullptr, a.eps);
      EXPECT_TRUE(close("out", download(out), ref.out, tolerance(xt), N));
    }
}

TEST_F(RmsNormFwd, InPlace) {
  // out = x (and residual_out = residual), on the vector path, the cluster path and the
  // general path.
  uint64_t seed = 900;
  for (const auto& [M, N] : {Shape{64, 4096}, Shape{2, 262144}, Shape{5, 127}, Shape{3, 65537}})
    for (DType xt : kXTypes) {
      FwdCase c;
      c.M = M;
      c.N = N;
      c.x = xt;
      c.out_aliases_x = true;
      c.seed = ++seed;
      run_fwd(c);
      c.residual = xt;
      c.residual_out = xt;
      c.residual_out_aliases_residual = true;
      c.bias = DType::kFloat32;
      c.seed = ++seed;
      run_fwd(c);
      // Wider rows, in place.
      c.x_l.row_stride = N + 8;
      c.res_l.row_stride = N + 8;
      c.seed = ++seed;
      run_fwd(c);
    }
}

TEST_F(RmsNormFwd, EmptyBatch) {
  // C02: M = 0 (x of shape (0, 2520)): no error now and none at a later CUDA call.
  for (DType xt : kXTypes) {
    DeviceTensor x = alloc_tensor(xt, 0, 2520), out = alloc_tensor(xt, 0, 2520);
    DeviceTensor w = alloc_tensor(DType::kFloat32, 1, 2520, {}, true);
    RmsNormFwdArgs a;
    a.x = x.ref;
    a.out = out.ref;
    a.weight = w.ref;
    a.rstd = TensorRef::vector(nullptr, DType::kFloat32, 0);
    EXPECT_NO_THROW(rmsnorm_fwd(a, nullptr));
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
}

TEST_F(RmsNormFwd, Stream) {
  // A non-default stream: the result is ready after that stream's synchronisation.
  cudaStream_t s;
  QUACK_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int64_t M = 16, N = 1024;
  Rng rng(42);
  const auto x = random_values(rng, M * N, DType::kBFloat16);
  DeviceTensor dx = upload(x, DType::kBFloat16, M, N), out = alloc_tensor(DType::kBFloat16, M, N);
  RmsNormFwdArgs a;
  a.x = dx.ref;
  a.out = out.ref;
  // The uploads and the poison ran on the legacy stream, which a non-blocking stream does not
  // wait for.
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_NO_THROW(rmsnorm_fwd(a, s));
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const auto ref = ref::rmsnorm_fwd_ref(M, N, x.data(), nullptr, nullptr, nullptr, a.eps);
  EXPECT_TRUE(close("out", download(out), ref.out, tolerance(DType::kBFloat16), N));
  cudaStreamDestroy(s);
}

TEST_F(RmsNormFwd, ZeroRowIsExact) {
  // An all-zero row normalises to exactly 0 (handed.md: exact cases), eps > 0.
  const int64_t M = 3, N = 4096;
  for (DType xt : kXTypes) {
    Rng rng(5);
    auto x = random_values(rng, M * N, xt);
    for (int64_t j = 0; j < N; ++j) x[N + j] = 0.0;  // row 1
    DeviceTensor dx = upload(x, xt, M, N), out = alloc_tensor(xt, M, N);
    DeviceTensor rstd = alloc_tensor(DType::kFloat32, 1, M, {}, true);
    RmsNormFwdArgs a;
    a.x = dx.ref;
    a.out = out.ref;
    a.rstd = rstd.ref;
    ASSERT_NO_THROW(rmsnorm_fwd(a, nullptr));
    const auto got = download(out);
    for (int64_t j = 0; j < N; ++j) ASSERT_EQ(got[N + j], 0.0) << "col " << j;
    const auto r = download(rstd);
    EXPECT_NEAR(r[1], 1.0 / std::sqrt(1e-6), 1e-5 * 1000);
  }
}

}  // namespace
}  // namespace quack::test
