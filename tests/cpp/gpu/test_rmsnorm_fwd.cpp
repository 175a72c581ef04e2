// Tier 2: rmsnorm_fwd on the device against the float64 reference. Skips without a GPU.
// Every suite runs on both forward paths (staged and simple, rmsnorm_tuning.h); cases the
// simple path takes must take it (require_simple), the others fall back to the staged one.
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
// Simple path: one warp per row with a partial last CTA (130 x 1024, 65537 x 16), single pass
// (4096, 8192, 16384, 32768) and looped (65536 and up).
const std::vector<Shape> kShapes = {
    {1, 1},      {33, 1},     {7, 127},    {5, 127},    {100, 500},   {16, 1024},
    {130, 1024}, {64, 4096},  {257, 8192}, {5, 16384},  {9, 32768},   {7, 65536},
    {3, 65537},  {2, 262144}, {1, 262144}, {2, 262152}, {1, 300000},  {1, 524288},
    {1, 524296}, {65537, 16}, {8192, 64}};

struct DtypePair {
  DType x, w;
};
const std::vector<DtypePair> kDtypes = {{DType::kFloat32, DType::kFloat32},
                                        {DType::kFloat16, DType::kFloat16},
                                        {DType::kFloat16, DType::kFloat32},
                                        {DType::kBFloat16, DType::kBFloat16},
                                        {DType::kBFloat16, DType::kFloat32}};

const RmsNormFwdPath kPaths[] = {RmsNormFwdPath::kStaged, RmsNormFwdPath::kSimple};

// Whether the simple path takes case c: rmsnorm_tuning.h's list (weight in x's dtype or fp32,
// no bias, out in x's dtype, residual and residual_out in x's dtype, residual_out only with a
// residual, 16-byte rows of contiguous columns).
bool simple_expected(const FwdCase& c) {
  const int64_t vec = 16 / dtype_size(c.x);
  auto rows_ok = [&](const Layout& l) {
    return (l.col_stride == 1 || c.N == 1) && l.offset % vec == 0 &&
           (l.row_stride < 0 || c.M == 1 || l.row_stride % vec == 0);
  };
  if (!c.weight || (*c.weight != c.x && *c.weight != DType::kFloat32) || c.weight_stride != 1)
    return false;
  if (c.bias || c.out_dtype() != c.x) return false;
  if (c.residual && *c.residual != c.x) return false;
  if (c.residual_out && (!c.residual || *c.residual_out != c.x)) return false;
  if (c.N % vec != 0) return false;
  if (detail::simple_fwd_config(c.N * dtype_size(c.x), dtype_size(c.x), c.residual.has_value()) < 0) return false;  // the table routes this row size to staged
  return rows_ok(c.x_l) && rows_ok(c.out_l) && (!c.residual || rows_ok(c.res_l)) &&
         (!c.residual_out || rows_ok(c.res_out_l));
}

using ShapeParam = std::tuple<Shape, DtypePair, RmsNormFwdPath>;
class RmsNormFwdShapes : public GpuTest, public ::testing::WithParamInterface<ShapeParam> {};

TEST_P(RmsNormFwdShapes, MatchesReference) {
  const auto [shape, dt, path] = GetParam();
  ScopedFwdPath guard(path);
  FwdCase c;
  c.M = shape.first;
  c.N = shape.second;
  c.x = dt.x;
  c.weight = dt.w;
  c.seed = static_cast<uint64_t>(c.M * 1000003 + c.N);
  c.require_simple = path == RmsNormFwdPath::kSimple && simple_expected(c);
  run_fwd(c);
}

std::string shape_name(const ::testing::TestParamInfo<ShapeParam>& info) {
  const auto [s, d, path] = info.param;
  return "M" + std::to_string(s.first) + "_N" + std::to_string(s.second) + "_x" +
         short_name(d.x) + "_w" + short_name(d.w) + "_" + path_name(path);
}

INSTANTIATE_TEST_SUITE_P(All, RmsNormFwdShapes,
                         ::testing::Combine(::testing::ValuesIn(kShapes), ::testing::ValuesIn(kDtypes),
                                            ::testing::ValuesIn(kPaths)),
                         shape_name);

// Every compiled simple instance (kSimpleFwdConfigs), each weight dtype and residual variant,
// on rows that fill its capacity, end inside its last vector group, or (looped) take 2.5 chunks.
class RmsNormFwdSimpleConfigs : public GpuTest,
                                public ::testing::WithParamInterface<int> {};

TEST_P(RmsNormFwdSimpleConfigs, MatchesReference) {
  const int cfg = GetParam();
  const detail::SimpleFwdConfig& k = detail::kSimpleFwdConfigs[cfg];
  uint64_t seed = 3000 + 100 * cfg;
  for (DType xt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    const int64_t vec = 16 / dtype_size(xt);
    const int64_t cap = k.capacity_bytes() / dtype_size(xt);  // elements per pass
    const int64_t slice = k.slice_bytes() / dtype_size(xt);    // prefetch: per CTA
    std::vector<int64_t> ns = {vec, cap / 2 + vec, cap};
    if (k.looped) ns.push_back(2 * cap + cap / 2 + vec);
    // Prefetch: one CTA, a cluster of 2 with a one-vector last slice, 3 (not a power of two).
    if (k.prefetch) ns = {vec, slice / 2 + vec, slice, slice + vec, 3 * slice - vec, cap};
    for (int64_t N : ns)
      for (int variant = 0; variant < (k.no_residual ? 2 : 4); ++variant) {
        FwdCase c;
        // A partial last CTA when rows > 1; prefetch: more rows than resident clusters (each
        // CTA loops, the copy and reduction barriers change phase) at two row lengths.
        c.M = k.prefetch && (N == slice || N == slice + vec) ? 397 : 2 * k.rows + 1;
        c.N = N;
        c.x = xt;
        c.weight = variant % 2 == 0 ? DType::kFloat32 : xt;
        if (variant >= 2) {
          c.residual = xt;
          c.residual_out = xt;
        }
        if (variant == 3) c.residual_out.reset();  // residual without residual_out
        c.simple_config = cfg;
        c.seed = ++seed;
        run_fwd(c);
      }
  }
}

INSTANTIATE_TEST_SUITE_P(All, RmsNormFwdSimpleConfigs,
                         ::testing::Range(0, detail::kSimpleFwdConfigCount),
                         [](const ::testing::TestParamInfo<int>& info) {
                           std::string n = detail::kSimpleFwdConfigs[info.param].name;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// The remaining suites run on both paths (the fixture sets it for each test).
class RmsNormFwd : public GpuTest, public ::testing::WithParamInterface<RmsNormFwdPath> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    previous_ = detail::rmsnorm_fwd_path();
    detail::set_rmsnorm_fwd_path(GetParam());
  }
  void TearDown() override {
    detail::set_rmsnorm_fwd_path(previous_);
    GpuTest::TearDown();
  }
  bool simple() const { return GetParam() == RmsNormFwdPath::kSimple; }

 private:
  RmsNormFwdPath previous_ = RmsNormFwdPath::kStaged;
};

INSTANTIATE_TEST_SUITE_P(Paths, RmsNormFwd, ::testing::ValuesIn(kPaths),
                         [](const ::testing::TestParamInfo<RmsNormFwdPath>& info) {
                           return std::string(path_name(info.param));
                         });

// Optional operands and output dtypes, on a general-path, a vector-path and a cluster shape.
const std::vector<Shape> kOptionShapes = {{5, 127}, {64, 4096}, {3, 16384}};
const DType kXTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

TEST_P(RmsNormFwd, OptionalOperandsAndDtypes) {
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
      for (FwdCase c : cases) {
        c.require_simple = simple() && simple_expected(c);
        run_fwd(c);
      }
    }
}

// x, residual, outputs as slices of wider buffers, strided columns, misaligned bases,
// broadcast rows and transposed outputs.
TEST_P(RmsNormFwd, Layouts) {
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
      for (FwdCase c : cases) {
        c.require_simple = simple() && simple_expected(c);
        run_fwd(c);
      }
    }
}

TEST_P(RmsNormFwd, BroadcastInputRow) {
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
      // With and without a weight (the simple path takes the former when N allows).
      const auto w = random_values(rng, N, DType::kFloat32, 1.0, 0.5);
      DeviceTensor dx = upload(x, xt, M, N, l), dw = upload_vector(w, DType::kFloat32, N);
      for (bool weighted : {false, true}) {
        DeviceTensor out = alloc_tensor(xt, M, N);
        RmsNormFwdArgs a;
        a.x = dx.ref;
        a.out = out.ref;
        if (weighted) a.weight = dw.ref;
        if (weighted && simple() && N % (16 / dtype_size(xt)) == 0) {
          EXPECT_GE(detail::rmsnorm_fwd_simple_config(a), 0);
        }
        ASSERT_NO_THROW(rmsnorm_fwd(a, nullptr));
        QUACK_CUDA_OK(cudaDeviceSynchronize());
        const auto ref = ref::rmsnorm_fwd_ref(M, N, x.data(), weighted ? w.data() : nullptr,
                                              nullptr, nullptr, a.eps);
        EXPECT_TRUE(close("out", download(out), ref.out, tolerance(xt), N));
      }
    }
}

TEST_P(RmsNormFwd, InPlace) {
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
      auto run = [&] {
        c.seed = ++seed;
        c.require_simple = simple() && simple_expected(c);
        run_fwd(c);
      };
      run();
      c.residual = xt;
      c.residual_out = xt;
      c.residual_out_aliases_residual = true;
      run();  // no bias: the simple path's in-place residual
      c.bias = DType::kFloat32;
      run();
      // Wider rows, in place.
      c.x_l.row_stride = N + 8;
      c.res_l.row_stride = N + 8;
      run();
      c.bias.reset();
      run();
    }
}

TEST_P(RmsNormFwd, EmptyBatch) {
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

TEST_P(RmsNormFwd, Stream) {
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

TEST_P(RmsNormFwd, ZeroRowIsExact) {
  // An all-zero row normalises to exactly 0 (handed.md: exact cases), eps > 0.
  const int64_t M = 3, N = 4096;
  for (DType xt : kXTypes) {
    Rng rng(5);
    auto x = random_values(rng, M * N, xt);
    for (int64_t j = 0; j < N; ++j) x[N + j] = 0.0;  // row 1
    const auto w = random_values(rng, N, DType::kFloat32, 1.0, 0.5);
    DeviceTensor dx = upload(x, xt, M, N), out = alloc_tensor(xt, M, N);
    DeviceTensor rstd = alloc_tensor(DType::kFloat32, 1, M, {}, true);
    DeviceTensor dw = upload_vector(w, DType::kFloat32, N);
    RmsNormFwdArgs a;
    a.x = dx.ref;
    a.out = out.ref;
    a.rstd = rstd.ref;
    a.weight = dw.ref;  // 0 · rstd · w is still exactly 0; lets the simple path take it
    if (simple()) {
      EXPECT_GE(detail::rmsnorm_fwd_simple_config(a), 0);
    }
    ASSERT_NO_THROW(rmsnorm_fwd(a, nullptr));
    const auto got = download(out);
    for (int64_t j = 0; j < N; ++j) ASSERT_EQ(got[N + j], 0.0) << "col " << j;
    const auto r = download(rstd);
    EXPECT_NEAR(r[1], 1.0 / std::sqrt(1e-6), 1e-5 * 1000);
  }
}

}  // namespace
}  // namespace quack::test
