// Tier 2: rmsnorm_fwd on the device against the float64 reference. Skips without a GPU.
// The option and layout suites run twice: through the public API (cases the vector policies
// take must take them: require_vector) and on the general policy (forced); every compiled
// configuration of the row skeleton runs on its own suite with each dtype mix and option.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/gpu_util.h"
#include "gpu/rmsnorm_runner.h"
#include "quack/errors.h"
#include "quack/norm.h"
#include "row/row_config.h"

namespace quack::test {
namespace {

using Shape = std::pair<int64_t, int64_t>;  // (M, N)

// Vector policies (N a multiple of 16 bytes): rows in registers with a partial last CTA
// (130 x 1024, 65537 x 16), one pass (4096 ... 32768), clusters (65536 ... 524288), two passes
// (524296); the general policy (odd N); many short rows.
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

using detail::kRowConfigCount;
using detail::kRowConfigs;
using detail::RowPolicy;

// The public API (-1) and the general policy.
const int kPlans[] = {-1, kRowConfigCount};

// Whether the vector policies take case c (an instance of its dtypes: row_ops.cmake's rmsnorm
// lines; 16-byte rows of contiguous columns; contiguous aligned vectors).
bool vector_expected(const FwdCase& c) {
  const DType x = c.x, f32 = DType::kFloat32;
  const bool res = c.residual || c.residual_out;
  if (c.weight && *c.weight != x && *c.weight != f32) return false;
  if (c.bias && *c.bias != x && *c.bias != f32) return false;
  if (c.weight && c.bias && *c.bias != *c.weight) return false;
  if (c.weight_stride != 1) return false;
  if (c.out_dtype() != x) return false;
  if (res) {
    // The residual stream in x's dtype, or both ends fp32 (16-bit x, no bias).
    const DType r = c.residual ? *c.residual : *c.residual_out;
    if (c.residual && c.residual_out && *c.residual != *c.residual_out) return false;
    if (r != x && (r != f32 || x == f32 || c.bias)) return false;
  }
  const int64_t vec = 16 / dtype_size(x);
  auto rows_ok = [&](const Layout& l) {
    return (l.col_stride == 1 || c.N == 1) && l.offset % vec == 0 &&
           (l.row_stride < 0 || c.M == 1 || l.row_stride % vec == 0);
  };
  if (c.N % vec != 0) return false;
  return rows_ok(c.x_l) && rows_ok(c.out_l) && (!c.residual || rows_ok(c.res_l)) &&
         (!c.residual_out || rows_ok(c.res_out_l));
}

using ShapeParam = std::tuple<Shape, DtypePair, int>;
class RmsNormFwdShapes : public GpuTest, public ::testing::WithParamInterface<ShapeParam> {};

TEST_P(RmsNormFwdShapes, MatchesReference) {
  const auto [shape, dt, plan] = GetParam();
  FwdCase c;
  c.M = shape.first;
  c.N = shape.second;
  c.x = dt.x;
  c.weight = dt.w;
  c.seed = static_cast<uint64_t>(c.M * 1000003 + c.N);
  c.config = plan;
  c.require_vector = plan < 0 && vector_expected(c);
  run_fwd(c);
}

std::string shape_name(const ::testing::TestParamInfo<ShapeParam>& info) {
  const auto [s, d, plan] = info.param;
  return "M" + std::to_string(s.first) + "_N" + std::to_string(s.second) + "_x" +
         short_name(d.x) + "_w" + short_name(d.w) + "_" + config_name(plan);
}

INSTANTIATE_TEST_SUITE_P(All, RmsNormFwdShapes,
                         ::testing::Combine(::testing::ValuesIn(kShapes), ::testing::ValuesIn(kDtypes),
                                            ::testing::ValuesIn(kPlans)),
                         shape_name);

// ------------------------------------------------------------------ every configuration

// Rows to run a configuration on, in elements of an `elt`-byte input (as the LayerNorm tests):
// one vector, half the capacity plus one vector, the capacity; looped: 2.5 passes; ring: one
// CTA's slice, a slice plus one vector (more rows than resident clusters: each CTA loops, the
// copy and reduction barriers change phase), three slices less a vector, 16 slices; staged:
// small rows packed into CTAs, rows over one CTA, over a cluster of 2 and of 16 CTAs.
std::vector<Shape> config_rows(int config, int elt) {
  const int64_t vec = 16 / elt;
  if (config == kRowConfigCount) return {{3, 1}, {37, 300}, {5, 4097}, {2, 70001}, {700, 128}};
  const detail::RowConfig& k = kRowConfigs[config];
  const int64_t chunk = k.chunk_bytes() / elt;
  const int64_t rows = 2 * k.rows + 1;
  switch (k.policy) {
    case RowPolicy::kRegister:
      return {{rows, vec}, {rows, chunk / 2 + vec}, {rows, chunk}};
    case RowPolicy::kLooped:
      return {{3, vec}, {3, chunk}, {3, 2 * chunk + chunk / 2 + vec}};
    case RowPolicy::kRing:
      return {{600, chunk}, {600, chunk + vec}, {5, 3 * chunk - vec}, {3, 16 * chunk}};
    case RowPolicy::kStaged: {
      const int64_t cta = int64_t{std::min(detail::kRowStagedMaxRowThreads, k.threads())} *
                          k.vecs * vec;  // one CTA's row
      return {{3000, vec}, {700, 2048 + vec}, {300, cta}, {200, 2 * cta}, {40, 16 * cta}};
    }
    default:
      return {};
  }
}

// The forward's variants on every configuration: the weight in x's dtype or fp32, the residual
// stream (x's dtype; fp32 for 16-bit x; residual_out alone), a bias, and an offset.
struct FwdVariant {
  const char* name;
  bool residual, residual_out, res_f32, bias;
  float offset;
};
const FwdVariant kVariants[] = {
    {"plain", false, false, false, false, 0.f},   {"offset", false, false, false, false, 1.f},
    {"residual", true, true, false, false, 0.f},  {"res_f32", true, true, true, false, 0.f},
    {"res_out", false, true, false, false, 0.f},  {"res_f32_in", true, false, true, false, 0.f},
    {"bias", false, false, false, true, 0.5f},    {"res_bias", true, true, false, true, 0.f},
};

class RmsNormFwdConfigs : public GpuTest, public ::testing::WithParamInterface<int> {};

// One shape's inputs for x of one dtype, drawn and uploaded once and read by every weight dtype
// and variant on that shape (the numbers do not pick the code path; the dtypes, operands and
// shape do): x, and the residual, weight and bias of each dtype, drawn when first needed.
struct SharedFwdInputs {
  int64_t M, N;
  DType xt;
  Rng rng;
  std::vector<double> x;
  DeviceTensor dx;
  using Drawn = std::pair<std::vector<double>, DeviceTensor>;  // host values, device copy
  std::map<DType, Drawn> res, w, b;  // by dtype

  SharedFwdInputs(int64_t m, int64_t n, DType t, uint64_t seed) : M(m), N(n), xt(t), rng(seed) {
    x = random_values(rng, M * N, xt);
    dx = upload(x, xt, M, N);
  }
  // The operand of dtype t in `m`, an (N) vector or (M, N), drawn and uploaded when first asked.
  Drawn& drawn(std::map<DType, Drawn>& m, DType t, bool vector, double mean, double spread) {
    Drawn& e = m[t];
    if (e.first.empty()) {
      e.first = random_values(rng, (vector ? 1 : M) * N, t, mean, spread);
      e.second = vector ? upload_vector(e.first, t, N) : upload(e.first, t, M, N);
    }
    return e;
  }
  // The inputs of case c (dense layouts; no aliasing), drawing what it needs first.
  FwdInputs inputs(const FwdCase& c) {
    FwdInputs in;
    in.x = &x;
    in.dx = &dx;
    if (c.weight) {
      Drawn& e = drawn(w, *c.weight, true, 1.0, 0.5);
      in.w = &e.first;
      in.dw = &e.second;
    }
    if (c.bias) {
      Drawn& e = drawn(b, *c.bias, true, 0.0, 0.5);
      in.b = &e.first;
      in.db = &e.second;
    }
    if (c.residual) {
      Drawn& e = drawn(res, *c.residual, false, 0.0, 1.0);
      in.res = &e.first;
      in.dres = &e.second;
    }
    return in;
  }
};

// Every (x dtype, weight dtype, variant, shape) the configuration compiles. The cases of one x
// dtype and shape share their inputs (SharedFwdInputs: the rows of 600 x 32768 elements were
// drawn, uploaded and referenced once per weight and variant before), and compare out and
// residual_out on a sample of rows (FwdCase::sample_rows: about 4M elements a case; the other
// rows checked finite, rstd compared on every row).
TEST_P(RmsNormFwdConfigs, MatchesReference) {
  const int config = GetParam();
  uint64_t seed = 3000 + 100 * config;
  int ran = 0;
  for (DType xt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    const int elt = dtype_size(xt);
    // The (weight, variant) pairs compiled for this configuration.
    std::vector<std::pair<DType, const FwdVariant*>> todo;
    for (int wi = 0; wi < (xt == DType::kFloat32 ? 1 : 2); ++wi) {  // weight: fp32, x's dtype
      const DType wt = wi == 0 ? DType::kFloat32 : xt;
      for (const FwdVariant& v : kVariants) {
        if (v.res_f32 && xt == DType::kFloat32) continue;
        const DType rt = v.res_f32 ? DType::kFloat32 : xt;
        // The instance's shape, for row_config_usable: streams, their 16-byte words per
        // vector, the vectors.
        const int n_in = v.residual || v.residual_out ? 2 : 1;
        const int words = 1 + (n_in == 2 ? dtype_size(rt) / elt : 0);
        const int n_cols = v.bias ? 2 : 1;
        const bool usable =
            config == kRowConfigCount ||
            detail::row_config_usable(kRowConfigs[config], n_in, 1, n_cols, elt, 0,
                                      dtype_size(wt), words, true);
        if (usable) todo.push_back({wt, &v});
      }
    }
    if (todo.empty()) continue;
    for (const Shape& s : config_rows(config, elt)) {
      SharedFwdInputs shared(s.first, s.second, xt, ++seed);
      for (const auto& [wt, vp] : todo) {
        const FwdVariant& v = *vp;
        const DType rt = v.res_f32 ? DType::kFloat32 : xt;
        const int n_in = v.residual || v.residual_out ? 2 : 1;
        FwdCase c;
        c.M = s.first;
        c.N = s.second;
        c.x = xt;
        c.weight = wt;
        if (v.bias) c.bias = wt;
        if (v.residual) c.residual = rt;
        if (v.residual_out) c.residual_out = rt;
        c.offset = v.offset;
        c.config = config;
        c.sample_rows = true;
        // The staged policy's longest rows with a second stream leave its two row blocks
        // beyond 227 KB: the plan may refuse them.
        c.allow_untaken = config < kRowConfigCount &&
                          kRowConfigs[config].policy == RowPolicy::kStaged && n_in == 2 &&
                          c.N * elt > 128 * 1024;
        SCOPED_TRACE(v.name);
        run_fwd(c, shared.inputs(c));
        ++ran;
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "configuration not compiled for the forward";
}

INSTANTIATE_TEST_SUITE_P(All, RmsNormFwdConfigs, ::testing::Range(0, kRowConfigCount + 1),
                         [](const ::testing::TestParamInfo<int>& info) {
                           std::string n = config_name(info.param);
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// The remaining suites run twice: the public API and the general policy.
class RmsNormFwd : public GpuTest, public ::testing::WithParamInterface<int> {
 protected:
  bool api() const { return GetParam() < 0; }
  // The case on this suite's plan: the public API (which must take a vector policy where one
  // is expected) or the general policy.
  void run(FwdCase c) const {
    c.config = GetParam();
    c.require_vector = api() && vector_expected(c);
    run_fwd(c);
  }
  // rmsnorm_fwd on this suite's plan; `vector`: the public API must take a vector policy.
  void call(const RmsNormFwdArgs& a, cudaStream_t stream, bool vector = false) const {
    const detail::RowCall c = detail::rmsnorm_fwd_call(a);
    if (api()) {
      if (vector) {
        EXPECT_NE(detail::plan_row_call(c).policy, RowPolicy::kGeneral);
      }
      rmsnorm_fwd(a, stream);
    } else {
      detail::run_row_call(c, detail::plan_row_call(c, GetParam()), stream);
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Plans, RmsNormFwd, ::testing::ValuesIn(kPlans),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return config_name(info.param);
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
      for (const FwdCase& c : cases) run(c);
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
      for (const FwdCase& c : cases) run(c);
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
      // With and without a weight (the vector policies take both when N allows).
      const auto w = random_values(rng, N, DType::kFloat32, 1.0, 0.5);
      DeviceTensor dx = upload(x, xt, M, N, l), dw = upload_vector(w, DType::kFloat32, N);
      for (bool weighted : {false, true}) {
        DeviceTensor out = alloc_tensor(xt, M, N);
        RmsNormFwdArgs a;
        a.x = dx.ref;
        a.out = out.ref;
        if (weighted) a.weight = dw.ref;
        ASSERT_NO_THROW(call(a, nullptr, N % (16 / dtype_size(xt)) == 0));
        QUACK_CUDA_OK(cudaDeviceSynchronize());
        const auto ref = ref::rmsnorm_fwd_ref(M, N, x.data(), weighted ? w.data() : nullptr,
                                              nullptr, nullptr, a.eps);
        EXPECT_TRUE(close("out", download(out), ref.out, tolerance(xt), N));
      }
    }
}

TEST_P(RmsNormFwd, InPlace) {
  // out = x (and residual_out = residual), in registers, on a cluster (ring), over the general
  // policy.
  uint64_t seed = 900;
  for (const auto& [M, N] : {Shape{64, 4096}, Shape{2, 262144}, Shape{5, 127}, Shape{3, 65537}})
    for (DType xt : kXTypes) {
      FwdCase c;
      c.M = M;
      c.N = N;
      c.x = xt;
      c.out_aliases_x = true;
      auto go = [&] {
        c.seed = ++seed;
        run(c);
      };
      go();
      c.residual = xt;
      c.residual_out = xt;
      c.residual_out_aliases_residual = true;
      go();  // no bias
      c.bias = DType::kFloat32;
      go();
      // Wider rows, in place.
      c.x_l.row_stride = N + 8;
      c.res_l.row_stride = N + 8;
      go();
      c.bias.reset();
      go();
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
    EXPECT_NO_THROW(call(a, nullptr));
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
  EXPECT_NO_THROW(call(a, s, true));
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
    a.weight = dw.ref;  // 0 · rstd · w is still exactly 0
    ASSERT_NO_THROW(call(a, nullptr, true));
    const auto got = download(out);
    for (int64_t j = 0; j < N; ++j) ASSERT_EQ(got[N + j], 0.0) << "col " << j;
    const auto r = download(rstd);
    EXPECT_NEAR(r[1], 1.0 / std::sqrt(1e-6), 1e-5 * 1000);
  }
}

TEST_P(RmsNormFwd, WeightOffset) {
  // y = h·rstd·(w + offset): Gemma's 1 with a zero-centred weight, and another value; without
  // a weight the offset is not used (factor 1). In registers, on a cluster, general.
  uint64_t seed = 1200;
  for (const auto& [M, N] : {Shape{33, 4096}, Shape{3, 131072}, Shape{5, 127}})
    for (DType xt : kXTypes)
      for (float offset : {1.f, -0.5f}) {
        FwdCase c;
        c.M = M;
        c.N = N;
        c.x = xt;
        c.offset = offset;
        c.seed = ++seed;
        run(c);
        c.weight.reset();
        c.seed = ++seed;
        run(c);
        c.weight = xt;
        c.residual = xt;
        c.residual_out = xt;
        c.seed = ++seed;
        run(c);
      }
}

}  // namespace
}  // namespace quack::test
