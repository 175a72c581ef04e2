// Tier 2: rmsnorm_bwd on the device against the float64 reference. Skips without a GPU.
// The public API on every shape, dtype, option and layout; every configuration of the row
// skeleton that takes the backward (staged ones, general) on its own suite.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
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

// Vector policies (staged: N ≤ 262144; fp32 rows beyond 131072 one row block at a time),
// clusters, the general policy, and many rows (the persistent grid loops over row blocks).
const std::vector<Shape> kShapes = {
    {1, 1},     {33, 1},     {7, 127},     {5, 127},   {100, 500},   {16, 1024},
    {64, 4096}, {257, 8192}, {7, 65536},   {3, 65537}, {2, 131072},  {2, 262144},
    {1, 262144}, {67, 262144}, {1, 300000}, {65537, 16}, {8192, 64}};

struct DtypePair {
  DType x, w;
};
const std::vector<DtypePair> kDtypes = {{DType::kFloat32, DType::kFloat32},
                                        {DType::kFloat16, DType::kFloat16},
                                        {DType::kFloat16, DType::kFloat32},
                                        {DType::kBFloat16, DType::kBFloat16},
                                        {DType::kBFloat16, DType::kFloat32}};
const DType kXTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

class RmsNormBwdShapes : public GpuTest,
                         public ::testing::WithParamInterface<std::tuple<Shape, DtypePair>> {};

TEST_P(RmsNormBwdShapes, MatchesReference) {
  const auto [shape, dt] = GetParam();
  BwdCase c;
  c.M = shape.first;
  c.N = shape.second;
  c.x = dt.x;
  c.weight = dt.w;
  c.dweight = DType::kFloat32;
  c.dbias = DType::kFloat32;
  c.seed = static_cast<uint64_t>(c.M * 1000003 + c.N + 17);
  run_bwd(c);
}

std::string shape_name(const ::testing::TestParamInfo<std::tuple<Shape, DtypePair>>& info) {
  const auto [s, d] = info.param;
  return "M" + std::to_string(s.first) + "_N" + std::to_string(s.second) + "_x" +
         short_name(d.x) + "_w" + short_name(d.w);
}

INSTANTIATE_TEST_SUITE_P(All, RmsNormBwdShapes,
                         ::testing::Combine(::testing::ValuesIn(kShapes), ::testing::ValuesIn(kDtypes)),
                         shape_name);

// ------------------------------------------------------------------ every configuration

using detail::kRowConfigCount;
using detail::kRowConfigs;
using detail::RowPolicy;

// Rows to run a configuration on (the staged ones: small rows packed into CTAs, rows over one
// CTA, over a cluster of 2 and of 16 CTAs, with more row blocks than resident CTAs; general:
// odd rows), in elements of an `elt`-byte x. Row counts on 132 SMs (H200), one CTA of a full
// row slice per SM: 300 rows over 132 CTAs, 150 over 66 clusters of 2, 24 over at most 8
// clusters of 16 (one per GPC) give every CTA at least two row blocks, so both stages are
// refilled and stage 0 is waited on with parity 1 (the 16-CTA rows: 3 blocks per cluster).
// Host cost (float64 reference, conversions, comparisons) is ~0.1-0.2 µs per element, so the
// rows are kept this few: 4.2M elements per case at most.
std::vector<Shape> bwd_config_rows(int config, int elt) {
  const int64_t vec = 16 / elt;
  if (config == kRowConfigCount) return {{3, 1}, {37, 300}, {5, 4097}, {2, 70001}, {700, 128}};
  const detail::RowConfig& k = kRowConfigs[config];
  if (k.policy != RowPolicy::kStaged) return {};
  const int64_t cta = int64_t{std::min(detail::kRowStagedMaxRowThreads, k.threads())} * k.vecs *
                      vec;
  return {{3000, vec}, {700, 2048 + vec}, {300, cta}, {150, 2 * cta}, {24, 16 * cta}};
}

struct BwdVariant {
  const char* name;
  bool dbias, residual, stream_f32;  // stream_f32: x, dresidual_out, dresidual fp32 (16-bit dy)
  float offset;
};
const BwdVariant kBwdVariants[] = {
    {"plain", false, false, false, 0.f},     {"offset", false, false, false, 1.f},
    {"dbias", true, false, false, 0.f},      {"residual", false, true, false, 0.f},
    {"res_dbias", true, true, false, -0.5f}, {"prenorm_f32", false, true, true, 0.f},
};

// One test per (configuration, dtype of dy): each a few seconds to tens of seconds of host
// work, so shards split them and a timeout names the dtype.
class RmsNormBwdConfigs : public GpuTest,
                          public ::testing::WithParamInterface<std::tuple<int, DType>> {};

TEST_P(RmsNormBwdConfigs, MatchesReference) {
  const auto [config, dt] = GetParam();
  const DType f32 = DType::kFloat32;
  uint64_t seed = 9000 + 100 * config + 10 * static_cast<int>(dt);
  int ran = 0;
  const std::vector<DType> weights =
      dt == f32 ? std::vector<DType>{f32} : std::vector<DType>{f32, dt};
  for (DType wt : weights) {
    for (const BwdVariant& v : kBwdVariants) {
      if (v.stream_f32 && dt == f32) continue;
      const DType xt = v.stream_f32 ? f32 : dt;  // x is the residual stream's h
      const int elt = dtype_size(dt);            // the narrowest stream: dy
      const int n_in = v.residual || v.dbias ? 3 : 2;
      const int words = (dtype_size(xt) / elt) + 1 + (n_in == 3 ? dtype_size(xt) / elt : 0);
      if (config < kRowConfigCount &&
          !detail::row_config_usable(kRowConfigs[config], n_in, 1, 1, elt, v.dbias ? 2 : 1,
                                     dtype_size(wt), words))
        continue;
      for (const Shape& s : bwd_config_rows(config, elt)) {
        BwdCase c;
        c.M = s.first;
        c.N = s.second;
        c.x = xt;
        c.dout = dt;
        c.dx = dt;
        c.weight = wt;
        c.dweight = f32;
        if (v.dbias) c.dbias = f32; else c.dbias.reset();
        if (v.residual) {
          c.dresidual_out = xt;
          c.dresidual = xt;
        }
        c.offset = v.offset;
        c.config = config;
        c.seed = ++seed;
        // The staged policy's longest rows with a third stream, or fp32 x beside 16-bit dy,
        // do not fit 227 KB: the plan may refuse them.
        const bool long_row = config < kRowConfigCount && c.N * elt > 128 * 1024 &&
                              (n_in == 3 || xt != dt);
        if (long_row) {
          // Planned without a device: the layout of run_bwd's tensors, at addresses 2^36 bytes
          // apart (the plan checks that outputs do not overlap inputs).
          auto fake = [](int i) { return reinterpret_cast<void*>(uintptr_t(i) << 36); };
          RmsNormBwdArgs probe;
          probe.x = TensorRef::matrix(fake(1), xt, c.M, c.N);
          probe.weight = TensorRef::vector(fake(2), wt, c.N);
          probe.dout = TensorRef::matrix(fake(3), dt, c.M, c.N);
          probe.rstd = TensorRef::vector(fake(4), f32, c.M);
          probe.dx = TensorRef::matrix(fake(5), dt, c.M, c.N);
          if (v.residual) {
            probe.dresidual_out = TensorRef::matrix(fake(6), xt, c.M, c.N);
            probe.dresidual = TensorRef::matrix(fake(7), xt, c.M, c.N);
          }
          probe.dweight = TensorRef::vector(fake(8), f32, c.N);
          if (v.dbias) probe.dbias = TensorRef::vector(fake(9), f32, c.N);
          if (detail::plan_row_call(detail::rmsnorm_bwd_call(probe), config).policy ==
              RowPolicy::kNone)
            continue;
        }
        SCOPED_TRACE(v.name);
        // Named before it runs, so a hang or a timeout names its case.
        std::fprintf(stderr, "[ case     ] %s: %s\n", v.name, c.name().c_str());
        std::fflush(stderr);
        const auto t0 = std::chrono::steady_clock::now();
        run_bwd(c);
        std::fprintf(stderr, "[     done ] %.2f s\n",
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        ++ran;
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "configuration not compiled for the backward";
}

INSTANTIATE_TEST_SUITE_P(All, RmsNormBwdConfigs,
                         ::testing::Combine(::testing::Range(0, kRowConfigCount + 1),
                                            ::testing::ValuesIn(kXTypes)),
                         [](const ::testing::TestParamInfo<std::tuple<int, DType>>& info) {
                           std::string n = config_name(std::get<0>(info.param)) + "_" +
                                           short_name(std::get<1>(info.param));
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

class RmsNormBwd : public GpuTest {};

TEST_F(RmsNormBwd, OptionalOperandsAndDtypes) {
  const DType f32 = DType::kFloat32;
  uint64_t seed = 2000;
  for (const auto& [M, N] : {Shape{5, 127}, Shape{64, 4096}, Shape{3, 16384}})
    for (DType xt : kXTypes) {
      BwdCase base;
      base.M = M;
      base.N = N;
      base.x = xt;
      std::vector<BwdCase> cases;
      auto add = [&](auto edit) {
        BwdCase c = base;
        edit(c);
        c.seed = ++seed;
        cases.push_back(c);
      };
      add([&](BwdCase& c) { c.weight = xt; c.dweight = xt; c.dbias = xt; });  // weight's dtype
      add([&](BwdCase& c) { c.weight = xt; c.dweight = f32; c.dbias = f32; });
      add([&](BwdCase& c) { c.dresidual_out = xt; c.dresidual = xt; });
      add([&](BwdCase& c) { c.dresidual_out = f32; c.dresidual = f32; c.dx = f32; });
      add([&](BwdCase& c) { c.dresidual_out = f32; });  // no dresidual
      add([&](BwdCase& c) { c.weight.reset(); c.dweight.reset(); });  // dbias only
      add([&](BwdCase& c) { c.weight.reset(); c.dweight.reset(); c.dbias.reset(); });
      add([&](BwdCase& c) { c.dweight.reset(); c.dbias.reset(); });  // dx only
      add([&](BwdCase& c) { c.dbias.reset(); });
      add([&](BwdCase& c) { c.dweight.reset(); });
      add([&](BwdCase& c) { c.rstd_stride = 2; });
      add([&](BwdCase& c) { c.dx = f32; });
      for (const auto& c : cases) run_bwd(c);
    }
}

// C01: the upstream gradient in every layout autograd hands over. (2·1024, 256) bf16 with
// w = ones (fp32), eps = 1e-6, dy = ones expanded (both strides 0), then random dy that is
// column-strided, row-strided (a slice of a wider buffer), transposed, in another dtype.
TEST_F(RmsNormBwd, C01DoutLayouts) {
  uint64_t seed = 3000;
  for (const auto& [M, N] : {Shape{2048, 256}, Shape{257, 500}, Shape{3, 65536}, Shape{7, 127}})
    for (DType xt : kXTypes) {
      BwdCase base;
      base.M = M;
      base.N = N;
      base.x = xt;
      base.weight = DType::kFloat32;
      base.weight_ones = M == 2048;  // C01 exactly
      std::vector<BwdCase> cases;
      auto add = [&](auto edit) {
        BwdCase c = base;
        edit(c);
        c.seed = ++seed;
        cases.push_back(c);
      };
      add([&](BwdCase&) {});  // contiguous
      // (a) expanded: y.sum().backward() -> dy = ones with strides (0, 0); also another value.
      add([&](BwdCase& c) { c.dout_l.row_stride = 0; c.dout_l.col_stride = 0; c.dout_constant = 1.0; });
      add([&](BwdCase& c) { c.dout_l.row_stride = 0; c.dout_l.col_stride = 0; c.dout_constant = -0.375; });
      // Expanded along rows only (one dy row for every row).
      add([&](BwdCase& c) { c.dout_l.row_stride = 0; c.dout_constant = 0.625; });
      // (b) column-strided: dy = big[..., ::2].
      add([&](BwdCase& c) { c.dout_l.row_stride = 2 * N; c.dout_l.col_stride = 2; });
      // (c) row-strided: a slice of a wider buffer (aligned, then odd).
      add([&](BwdCase& c) { c.dout_l.row_stride = N + 8; });
      add([&](BwdCase& c) { c.dout_l.row_stride = N + 1; });
      // (d) transposed 2-D view: strides (1, M).
      add([&](BwdCase& c) { c.dout_l.row_stride = 1; c.dout_l.col_stride = M; });
      // dout in another dtype than x (staged on the vector path with its own element size):
      // fp32 dout for 16-bit x, bf16 dout for fp32 x (an fp32 residual stream with bf16 dy).
      if (xt != DType::kFloat32) add([&](BwdCase& c) { c.dout = DType::kFloat32; });
      else add([&](BwdCase& c) { c.dout = DType::kBFloat16; });
      // Misaligned base.
      add([&](BwdCase& c) { c.dout_l.offset = 1; });
      for (const auto& c : cases) run_bwd(c);
    }
}

TEST_F(RmsNormBwd, OtherLayouts) {
  // x, dresidual_out, dx and dresidual as slices of wider buffers, strided or transposed.
  uint64_t seed = 4000;
  for (const auto& [M, N] : {Shape{64, 4096}, Shape{5, 128}, Shape{3, 65536}, Shape{7, 127}})
    for (DType xt : kXTypes) {
      BwdCase base;
      base.M = M;
      base.N = N;
      base.x = xt;
      std::vector<BwdCase> cases;
      auto add = [&](auto edit) {
        BwdCase c = base;
        edit(c);
        c.seed = ++seed;
        cases.push_back(c);
      };
      add([&](BwdCase& c) {  // aligned row strides: stays on the vector path where N allows
        c.x_l.row_stride = N + 8; c.dout_l.row_stride = N + 16; c.dx_l.row_stride = N + 8;
        c.dresidual_out = xt; c.dres_out_l.row_stride = N + 24;
        c.dresidual = DType::kFloat32; c.dres_l.row_stride = N + 8;
      });
      add([&](BwdCase& c) { c.x_l.row_stride = N + 1; });
      add([&](BwdCase& c) { c.dx_l.row_stride = N + 3; });
      add([&](BwdCase& c) { c.dx_l.row_stride = 1; c.dx_l.col_stride = M; });  // transposed dx
      add([&](BwdCase& c) { c.x_l.row_stride = 2 * N; c.x_l.col_stride = 2; });
      add([&](BwdCase& c) { c.dresidual = xt; c.dres_l.row_stride = 2 * N; c.dres_l.col_stride = 2; });
      add([&](BwdCase& c) { c.dresidual_out = xt; c.dres_out_l.offset = 1; });
      add([&](BwdCase& c) { c.x_l.offset = 1; });
      for (const auto& c : cases) run_bwd(c);
    }
}

TEST_F(RmsNormBwd, InPlaceDxAliasesDout) {
  // dx = dout (same dtype and layout): the kernels read an element before they write it.
  uint64_t seed = 5000;
  for (const auto& [M, N] : {Shape{64, 4096}, Shape{5, 127}, Shape{2, 262144}})
    for (DType xt : kXTypes) {
      BwdCase c;
      c.M = M;
      c.N = N;
      c.x = xt;
      c.dx_aliases_dout = true;
      c.seed = ++seed;
      run_bwd(c);
    }
}

// A backward of (M, N) with x, weight, dout and dx in xt (dweight and dbias fp32).
BwdCase same_dtype_case(int64_t M, int64_t N, DType xt, uint64_t seed) {
  BwdCase c;
  c.M = M;
  c.N = N;
  c.x = xt;
  c.weight = xt;
  c.seed = seed;
  return c;
}

TEST_F(RmsNormBwd, DeterministicDweight) {
  // dweight / dbias (and dx) have identical bits run to run: many rows, so many CTAs add
  // partial sums. Vector path, cluster path and general path.
  uint64_t seed = 6000;
  for (const auto& [M, N] : {Shape{4096, 256}, Shape{3001, 255}, Shape{64, 65536}})
    for (DType xt : {DType::kBFloat16, DType::kFloat32}) {
      const BwdCase c = same_dtype_case(M, N, xt, ++seed);
      run_bwd(c, /*runs=*/3);
    }
}

TEST_F(RmsNormBwd, ProgrammaticColsumsSameBits) {
  // QUACK_PDL=1: the column sums launch as programmatic dependents of the row kernel, which
  // lets them start at its entry, and wait on the device for its end (common/pdl.h). dx,
  // dweight and dbias are right on every run and have the bits of the serial launch
  // (QUACK_PDL=0). Staged with many rows per persistent CTA (8192 x 4096), clusters (N =
  // 65536), the general policy (N = 255).
  uint64_t seed = 7000;
  for (const auto& [M, N] : {Shape{8192, 4096}, Shape{64, 65536}, Shape{3001, 255}})
    for (DType xt : {DType::kBFloat16, DType::kFloat32}) {
      const BwdCase c = same_dtype_case(M, N, xt, ++seed);
      BwdResult serial, programmatic;
      {
        const ScopedEnv env("QUACK_PDL", "0");
        serial = run_bwd(c);
      }
      {
        const ScopedEnv env("QUACK_PDL", "1");
        programmatic = run_bwd(c, /*runs=*/3);
      }
      SCOPED_TRACE(c.name());
      EXPECT_TRUE(programmatic.dx == serial.dx) << "dx differs from the serial launch";
      EXPECT_TRUE(programmatic.dweight == serial.dweight) << "dweight differs";
      EXPECT_TRUE(programmatic.dbias == serial.dbias) << "dbias differs";
    }
}

TEST_F(RmsNormBwd, EmptyBatchZeroFillsDweightDbias) {
  // C02: M = 0 -> dx empty, dweight = dbias = 0 exactly (they were NaN-poisoned), no error
  // now or at a later CUDA call. N = 2520 (the C02 shape; vector-path width in bf16), 4096,
  // 127 (general), 262144.
  for (int64_t N : {int64_t{2520}, int64_t{4096}, int64_t{127}, int64_t{262144}})
    for (DType xt : kXTypes)
      for (DType dwt : {DType::kFloat32, xt}) {
        SCOPED_TRACE("N=" + std::to_string(N) + " x=" + short_name(xt) + " dw=" + short_name(dwt));
        DeviceTensor x = alloc_tensor(xt, 0, N), dy = alloc_tensor(xt, 0, N), dx = alloc_tensor(xt, 0, N);
        DeviceTensor w = upload_vector(std::vector<double>(N, 1.0), xt, N);
        DeviceTensor dw = alloc_tensor(dwt, 1, N, {}, true), db = alloc_tensor(dwt, 1, N, {}, true);
        RmsNormBwdArgs a;
        a.x = x.ref;
        a.dout = dy.ref;
        a.dx = dx.ref;
        a.weight = w.ref;
        a.rstd = TensorRef::vector(nullptr, DType::kFloat32, 0);
        a.dweight = dw.ref;
        a.dbias = db.ref;
        size_t ws = 1;
        ASSERT_NO_THROW(ws = rmsnorm_bwd_workspace_size(a));
        EXPECT_EQ(ws, 0u);
        ASSERT_NO_THROW(rmsnorm_bwd(a, nullptr, 0, nullptr));
        QUACK_CUDA_OK(cudaDeviceSynchronize());
        const std::vector<double> zeros(N, 0.0);
        EXPECT_TRUE(close("dweight", download(dw), zeros, 0.0));
        EXPECT_TRUE(close("dbias", download(db), zeros, 0.0));
        // Exactly +0.0: no sign bit either.
        for (const auto& t : {&dw, &db}) {
          const auto bytes = download_bytes(*t);
          for (size_t k = 0; k < bytes.size(); ++k) ASSERT_EQ(bytes[k], 0) << "byte " << k;
        }
      }
}

TEST_F(RmsNormBwd, WorkspaceChecks) {
  // Too small and misaligned workspaces throw InvalidArgument before any launch: dx keeps its
  // poison.
  const int64_t M = 64, N = 4096;
  Rng rng(77);
  const auto xv = random_values(rng, M * N, DType::kBFloat16);
  DeviceTensor x = upload(xv, DType::kBFloat16, M, N), dy = upload(xv, DType::kBFloat16, M, N);
  DeviceTensor w = upload_vector(std::vector<double>(N, 1.0), DType::kFloat32, N);
  DeviceTensor rstd = upload_vector(std::vector<double>(M, 1.0), DType::kFloat32, M);
  DeviceTensor dx = alloc_tensor(DType::kBFloat16, M, N);
  DeviceTensor dw = alloc_tensor(DType::kFloat32, 1, N, {}, true);
  RmsNormBwdArgs a;
  a.x = x.ref;
  a.dout = dy.ref;
  a.weight = w.ref;
  a.rstd = rstd.ref;
  a.dx = dx.ref;
  a.dweight = dw.ref;
  size_t need = 0;
  ASSERT_NO_THROW(need = rmsnorm_bwd_workspace_size(a));
  ASSERT_GE(need, static_cast<size_t>(N) * sizeof(float));  // at least one partial row
  DeviceBuffer ws(need + 16);
  try {
    rmsnorm_bwd(a, ws.get(), need - 1, nullptr);
    ADD_FAILURE() << "a too-small workspace was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(dynamic_cast<const InvalidArgument*>(&e), nullptr);
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("rmsnorm_bwd: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("workspace"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(need - 1)), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(need)), std::string::npos) << msg;
  }
  try {
    rmsnorm_bwd(a, static_cast<char*>(ws.get()) + 4, need, nullptr);
    ADD_FAILURE() << "a misaligned workspace was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("workspace"), std::string::npos) << msg;
    EXPECT_NE(msg.find("aligned"), std::string::npos) << msg;
  }
  try {
    rmsnorm_bwd(a, nullptr, 0, nullptr);
    ADD_FAILURE() << "a missing workspace was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("workspace"), std::string::npos) << e.what();
  }
  try {  // a null pointer with the size claimed
    rmsnorm_bwd(a, nullptr, need, nullptr);
    ADD_FAILURE() << "a null workspace of " << need << " bytes was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("workspace has 0 bytes"), std::string::npos) << e.what();
  }
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  const auto got = download(dx);
  for (double v : got) ASSERT_TRUE(std::isnan(v)) << "dx was written by a rejected call";
  // Without dweight / dbias no workspace is needed.
  a.dweight = TensorRef();
  EXPECT_EQ(rmsnorm_bwd_workspace_size(a), 0u);
  EXPECT_NO_THROW(rmsnorm_bwd(a, nullptr, 0, nullptr));
}

TEST_F(RmsNormBwd, PrenormChainFwdThenBwd) {
  // The prenorm pattern end to end: forward with a residual writes residual_out (h) and rstd;
  // the backward takes x = residual_out, that rstd and the incoming d(residual_out), and
  // returns dx = dresidual. Reference computed from the downloaded h and rstd.
  uint64_t seed = 7000;
  for (const auto& [M, N] : {Shape{64, 4096}, Shape{7, 127}, Shape{3, 65536}})
    for (DType xt : kXTypes) {
      SCOPED_TRACE("M=" + std::to_string(M) + " N=" + std::to_string(N) + " x=" + short_name(xt));
      Rng rng(++seed);
      const auto x = random_values(rng, M * N, xt), res = random_values(rng, M * N, xt);
      const auto w = random_values(rng, N, DType::kFloat32, 1.0, 0.5);
      const auto dy = random_values(rng, M * N, xt), dro = random_values(rng, M * N, xt);
      DeviceTensor dx_in = upload(x, xt, M, N), dres = upload(res, xt, M, N);
      DeviceTensor dw_in = upload_vector(w, DType::kFloat32, N);
      DeviceTensor out = alloc_tensor(xt, M, N), h = alloc_tensor(xt, M, N);
      DeviceTensor rstd = alloc_tensor(DType::kFloat32, 1, M, {}, true);
      RmsNormFwdArgs f;
      f.x = dx_in.ref;
      f.residual = dres.ref;
      f.weight = dw_in.ref;
      f.out = out.ref;
      f.residual_out = h.ref;
      f.rstd = rstd.ref;
      ASSERT_NO_THROW(rmsnorm_fwd(f, nullptr));

      DeviceTensor ddy = upload(dy, xt, M, N), ddro = upload(dro, xt, M, N);
      DeviceTensor ddx = alloc_tensor(xt, M, N), ddres = alloc_tensor(xt, M, N);
      DeviceTensor ddw = alloc_tensor(DType::kFloat32, 1, N, {}, true);
      RmsNormBwdArgs b;
      b.x = h.ref;
      b.weight = dw_in.ref;
      b.dout = ddy.ref;
      b.rstd = rstd.ref;
      b.dresidual_out = ddro.ref;
      b.dx = ddx.ref;
      b.dresidual = ddres.ref;
      b.dweight = ddw.ref;
      size_t wsb = 0;
      ASSERT_NO_THROW(wsb = rmsnorm_bwd_workspace_size(b));
      DeviceBuffer ws(wsb);
      ASSERT_NO_THROW(rmsnorm_bwd(b, ws.get(), wsb, nullptr));
      QUACK_CUDA_OK(cudaDeviceSynchronize());

      const auto hv = download(h), rv = download(rstd);
      const auto ref = ref::rmsnorm_bwd_ref(M, N, hv.data(), w.data(), dy.data(), rv.data(), dro.data());
      EXPECT_TRUE(close("dx", download(ddx), ref.dx, tolerance(xt), N, ref.dx_terms));
      EXPECT_TRUE(download_bytes(ddx) == download_bytes(ddres)) << "dresidual differs from dx";
      EXPECT_TRUE(close("dweight", download(ddw), ref.dw, reduction_tolerance(DType::kFloat32, M), 0,
                        reduction_floor(ref.dw_abs, M)));
      // And the forward's rstd agrees with the reference computed from x + residual.
      std::vector<double> hsum(static_cast<size_t>(M * N));
      for (size_t k = 0; k < hsum.size(); ++k) hsum[k] = x[k] + res[k];
      EXPECT_TRUE(close("rstd", rv, ref::rmsnorm_rstd_ref(M, N, hsum.data(), f.eps),
                        tolerance(DType::kFloat32)));
    }
}

TEST_F(RmsNormBwd, WeightOffset) {
  // g = dy·(w + offset); dweight does not depend on the offset. Staged (one CTA, a cluster,
  // and fp32 262144: one row block at a time), general.
  uint64_t seed = 8000;
  for (const auto& [M, N] : {Shape{64, 4096}, Shape{3, 65536}, Shape{5, 127}})
    for (DType xt : kXTypes)
      for (float offset : {1.f, -0.5f}) {
        BwdCase c;
        c.M = M;
        c.N = N;
        c.x = xt;
        c.offset = offset;
        c.seed = ++seed;
        run_bwd(c);
        c.weight.reset();  // the offset is not used without a weight
        c.dweight.reset();
        c.seed = ++seed;
        run_bwd(c);
      }
  BwdCase c;
  c.M = 9;
  c.N = 262144;
  c.x = DType::kFloat32;
  c.offset = 1.f;
  c.dbias.reset();
  run_bwd(c, /*runs=*/2);
}

}  // namespace
}  // namespace quack::test
