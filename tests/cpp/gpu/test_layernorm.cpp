// Tier 2: LayerNorm forward and backward on the device against the float64 reference
// (layernorm_runner.h). Skips without a GPU.
//
//   LayerNormShapes   the public API over (M, N) pairs from 1 to 262144 columns and M = 0, every
//                     dtype triple with a vector-path instance and mixes without one (general
//                     policy); aligned shapes with a compiled triple must take a vector policy.
//   LayerNormConfigs  every entry of the row skeleton's table the op compiles, and the general
//                     policy, forced, on rows that fill its capacity, end inside it, or span
//                     clusters; persistent kernels with more rows than resident clusters; each
//                     without and with the residual stream (backward: the plain instance and
//                     the residual gradients' one).
//   LayerNormOptions  residual / prenorm (residual_out), residual_out without a residual, weight
//                     or bias absent, weight_offset (Gemma's 1), large-mean rows, strided and
//                     misaligned rows, broadcast x, strided mean/rstd, in place; backward with
//                     dresidual_out / dresidual, dweight or dbias absent, deterministic bits.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <string>
#include <tuple>
#include <vector>

#include "gpu/gpu_util.h"
#include "gpu/layernorm_runner.h"
#include "row/row_config.h"

namespace quack::test {
namespace {

using detail::kRowConfigCount;
using detail::kRowConfigs;
using detail::RowPolicy;

using Shape = std::pair<int64_t, int64_t>;  // (M, N)

const std::vector<Shape> kShapes = {
    {1, 1},     {7, 1},     {3, 7},     {5, 127},   {100, 500},  {33, 128},   {65, 256},
    {17, 1024}, {33, 1536}, {16, 2048}, {64, 4096}, {9, 8192},  {5, 16384},  {3, 32768},  {3, 65536},
    {2, 65537}, {2, 131072}, {2, 262144}, {0, 4096}};

struct Dtypes {
  DType x, out, vec;  // fwd: x, out, weight and bias; bwd: x and dout, dx, weight
  bool vec_path;      // a vector-path instance exists
};
const std::vector<Dtypes> kDtypes = {
    {DType::kFloat32, DType::kFloat32, DType::kFloat32, true},
    {DType::kBFloat16, DType::kBFloat16, DType::kBFloat16, true},
    {DType::kBFloat16, DType::kBFloat16, DType::kFloat32, true},
    {DType::kFloat16, DType::kFloat16, DType::kFloat16, true},
    {DType::kFloat16, DType::kFloat16, DType::kFloat32, true},
    {DType::kBFloat16, DType::kFloat32, DType::kFloat32, false},  // fp32 out of bf16 x
    {DType::kFloat32, DType::kBFloat16, DType::kBFloat16, false}};

std::string dname(const Dtypes& d) {
  return std::string(short_name(d.x)) + "_" + short_name(d.out) + "_w" + short_name(d.vec);
}

// ------------------------------------------------------------------ the public API over shapes

using ShapeParam = std::tuple<Shape, int, bool>;  // shape, dtype index, bwd
class LayerNormShapes : public GpuTest, public ::testing::WithParamInterface<ShapeParam> {};

TEST_P(LayerNormShapes, MatchesReference) {
  const auto [shape, di, bwd] = GetParam();
  const Dtypes& d = kDtypes[static_cast<size_t>(di)];
  LayerNormCase c;
  c.M = shape.first;
  c.N = shape.second;
  c.bwd = bwd;
  c.x = d.x;
  c.out = d.out;
  c.weight = d.vec;
  c.bias = d.vec;
  c.dweight = DType::kFloat32;
  c.dbias = d.vec;
  c.seed = static_cast<uint64_t>(c.M * 1000003 + c.N * 7 + di * 3 + bwd);
  const detail::RowPlan plan = run_layernorm_case(c);
  const int64_t vec = 16 / dtype_size(d.x);
  if (c.M > 0) {
    // The backward's staged policies hold rows of up to 262144 elements: staged-v4 16-bit rows,
    // staged-v16-s1 fp32 rows beyond 131072.
    const bool fits = !bwd || c.N <= 262144;
    const bool vector_expected = d.vec_path && c.N % vec == 0 && fits;
    EXPECT_EQ(plan.policy != RowPolicy::kGeneral, vector_expected)
        << "aligned calls with a compiled triple take a vector policy, the others the general one";
  }
}

std::string shape_name(const ::testing::TestParamInfo<ShapeParam>& info) {
  const Shape s = std::get<0>(info.param);
  return "M" + std::to_string(s.first) + "_N" + std::to_string(s.second) + "_" +
         dname(kDtypes[static_cast<size_t>(std::get<1>(info.param))]);
}

INSTANTIATE_TEST_SUITE_P(Fwd, LayerNormShapes,
                         ::testing::Combine(::testing::ValuesIn(kShapes), ::testing::Range(0, 7),
                                            ::testing::Values(false)),
                         shape_name);
INSTANTIATE_TEST_SUITE_P(Bwd, LayerNormShapes,
                         ::testing::Combine(::testing::ValuesIn(kShapes), ::testing::Range(0, 7),
                                            ::testing::Values(true)),
                         shape_name);

// ------------------------------------------------------------------ every configuration

// Rows to run a configuration on, in elements of an `elt`-byte input (as the softmax tests):
// one vector, half the capacity plus one vector, the capacity; looped: 2.5 passes; ring: one
// CTA's slice, a slice plus one vector, three slices less a vector, 16 slices, with more rows
// than resident clusters; staged: small rows packed into CTAs, rows over one CTA, over a cluster
// of 2 and of 16 CTAs, with more row blocks than resident CTAs.
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
    case RowPolicy::kClusterRegister:  // the forward's entries under trial (forced only)
      // One vector, one CTA's slice, two CTAs, a partial third, 16 CTAs; the persistent
      // entries also more rows than resident clusters (each loops over several rows).
      if (k.stages > 0)
        return {{7, vec},           {600, chunk},      {300, chunk + vec},
                {5, 3 * chunk - vec}, {3, 16 * chunk}, {1500, 2 * chunk + vec}};
      return {{7, vec}, {600, chunk}, {300, chunk + vec}, {5, 3 * chunk - vec}, {3, 16 * chunk}};
    case RowPolicy::kStaged: {
      const int64_t cta = int64_t{std::min(detail::kRowStagedMaxRowThreads, k.threads())} * k.vecs *
                          vec;  // one CTA's row
      return {{3000, vec}, {1500, 128}, {700, 2048 + vec}, {300, cta}, {200, 2 * cta},
              {40, 16 * cta}};
    }
    default:
      return {};
  }
}

using ConfigParam = std::tuple<int, bool>;  // configuration (kRowConfigCount: general), bwd
class LayerNormConfigs : public GpuTest, public ::testing::WithParamInterface<ConfigParam> {};

TEST_P(LayerNormConfigs, MatchesReference) {
  const auto [config, bwd] = GetParam();
  const std::vector<Dtypes> dts = {kDtypes[1], kDtypes[2], kDtypes[0]};
  uint64_t seed = 7000 + 100 * config + bwd;
  int ran = 0;
  for (const Dtypes& d : dts)
    for (const Shape& s : config_rows(config, dtype_size(d.x)))
      for (bool residual : {false, true}) {  // bwd: the residual gradients (their instance)
        // The staged policy's longest rows leave no shared memory for a third stream.
        const bool longest_staged = config < kRowConfigCount &&
                                    kRowConfigs[config].policy == RowPolicy::kStaged &&
                                    s.second * dtype_size(d.x) > 256 * 1024;
        LayerNormCase c;
        c.M = s.first;
        c.N = s.second;
        c.bwd = bwd;
        c.x = d.x;
        c.out = d.out;
        c.weight = d.vec;
        c.bias = d.vec;
        if (residual) {
          if (longest_staged) continue;
          if (bwd) {
            c.dresidual_out = d.x;
            c.dresidual = d.out;
          } else {
            c.residual = d.x;
            c.residual_out = d.out;
          }
        }
        c.offset = residual ? 1.f : 0.f;
        c.config = config;
        c.seed = ++seed;
        const int n_in = (bwd ? 2 : 1) + (residual ? 1 : 0);  // the traits' streams
        const int red = bwd ? 2 : 3;
        const int n_cols = bwd ? 1 : 2;
        if (config < kRowConfigCount &&
            !detail::row_config_usable(kRowConfigs[config], n_in, red, n_cols, dtype_size(d.x),
                                       bwd ? 2 : 0, dtype_size(d.vec), -1, false, 2,
                                       !residual,  // the entries under trial (bwd: staged-v4-ra)
                                       !bwd))  // the forward's vectors load at apply
          continue;
        run_layernorm_case(c);
        ++ran;
      }
  if (ran == 0) GTEST_SKIP() << "configuration not compiled for this direction";
}

INSTANTIATE_TEST_SUITE_P(All, LayerNormConfigs,
                         ::testing::Combine(::testing::Range(0, kRowConfigCount + 1),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<ConfigParam>& info) {
                           const int config = std::get<0>(info.param);
                           std::string n = config < kRowConfigCount ? kRowConfigs[config].name
                                                                    : "general";
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n + (std::get<1>(info.param) ? "_bwd" : "_fwd");
                         });

// ------------------------------------------------------------------ options and layouts

class LayerNormOptions : public GpuTest, public ::testing::WithParamInterface<bool> {
 protected:
  LayerNormCase base(int64_t M, int64_t N, DType t, DType w = DType::kFloat32) const {
    LayerNormCase c;
    c.M = M;
    c.N = N;
    c.bwd = GetParam();
    c.x = c.out = t;
    c.weight = c.bias = w;
    c.seed = static_cast<uint64_t>(M * 31 + N + (c.bwd ? 5 : 0));
    return c;
  }
  static const std::vector<int64_t>& ns() {
    static const std::vector<int64_t> v = {1, 7, 127, 500, 4096, 65537, 131072};
    return v;
  }
};

TEST_P(LayerNormOptions, WeightAndBiasAbsentAndOffset) {
  for (int64_t N : ns())
    for (DType t : {DType::kBFloat16, DType::kFloat32}) {
      LayerNormCase c = base(9, N, t);
      c.weight.reset();
      run_layernorm_case(c);  // no weight (dweight not asked for)
      c = base(9, N, t);
      c.bias.reset();
      c.dbias.reset();
      run_layernorm_case(c);
      c = base(9, N, t);
      c.weight.reset();
      c.bias.reset();
      c.dbias.reset();
      run_layernorm_case(c);
      c = base(9, N, t, t);
      c.offset = 1.f;  // Gemma: zero-centred weights
      run_layernorm_case(c);
      c.dweight.reset();
      c.offset = -0.5f;
      run_layernorm_case(c);
    }
}

TEST_P(LayerNormOptions, Residuals) {
  for (int64_t N : ns())
    for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      LayerNormCase c = base(6, N, t);
      if (!c.bwd) {
        c.residual = t;
        c.residual_out = t;  // prenorm
        run_layernorm_case(c);
        c.residual_out.reset();  // residual without residual_out
        run_layernorm_case(c);
        c.residual.reset();  // residual_out without a residual: h = x stored
        c.residual_out = t;
        run_layernorm_case(c);
        c.residual = DType::kFloat32;  // fp32 residual stream (16-bit x: its own instances)
        c.residual_out = DType::kFloat32;
        run_layernorm_case(c);
        c.residual.reset();  // the first layer of an fp32 residual stream: h = x stored in fp32
        run_layernorm_case(c);
      } else {
        c.dresidual_out = t;
        c.dresidual = t;
        run_layernorm_case(c);
        c.dresidual.reset();
        run_layernorm_case(c);
        c.dresidual_out.reset();
        c.dresidual = t;
        run_layernorm_case(c);
        c.dresidual_out = DType::kFloat32;  // mixed dtypes with 16-bit x: the general policy
        c.dresidual = DType::kFloat32;
        run_layernorm_case(c);
        if (t != DType::kFloat32) {
          // The prenorm backward of an fp32 residual stream: h, dresidual_out, dresidual fp32,
          // dout and dx in t (its own instances).
          c.x = DType::kFloat32;
          c.dout = t;
          c.out = t;
          run_layernorm_case(c);
        }
      }
    }
}

TEST_P(LayerNormOptions, LargeMeanRows) {
  // Rows of mean 1000 and unit spread: a variance from E[h²] − E[h]² would lose every digit in
  // fp32 (1e6 ± 1); the stable statistics keep them.
  for (int64_t N : {int64_t{4096}, int64_t{65536}, int64_t{333}})
    for (DType t : {DType::kFloat32, DType::kBFloat16}) {
      LayerNormCase c = base(8, N, t);
      c.shift = t == DType::kFloat32 ? 1000.0 : 64.0;
      run_layernorm_case(c);
    }
}

TEST_P(LayerNormOptions, Layouts) {
  for (DType t : {DType::kBFloat16, DType::kFloat32}) {
    const int64_t vec = 16 / dtype_size(t);
    for (int64_t N : {int64_t{1024}, int64_t{65536}}) {
      LayerNormCase c = base(9, N, t);
      c.x_l.row_stride = N + vec;  // wider rows, 16-byte aligned: vector policies
      c.dout_l.row_stride = N + 2 * vec;
      c.out_l.row_stride = N + 3 * vec;
      c.stat_stride = 3;
      EXPECT_NE(run_layernorm_case(c).policy, RowPolicy::kGeneral);
      c.x_l.row_stride = N + 1;  // misaligned rows: the general policy
      EXPECT_EQ(run_layernorm_case(c).policy, RowPolicy::kGeneral);
      c.x_l = {};
      c.out_l.offset = 1;  // misaligned output base
      EXPECT_EQ(run_layernorm_case(c).policy, RowPolicy::kGeneral);
    }
    LayerNormCase c = base(7, 500, t);
    c.x_l.col_stride = 3;  // column-strided x, transposed out
    c.x_l.row_stride = 3 * 500 + 1;
    c.out_l.row_stride = 1;
    c.out_l.col_stride = 7;
    c.dout_l.col_stride = 2;
    c.dout_l.row_stride = 1000;
    EXPECT_EQ(run_layernorm_case(c).policy, RowPolicy::kGeneral);
  }
}

TEST_P(LayerNormOptions, BroadcastAndInPlace) {
  for (int64_t N : {int64_t{2048}, int64_t{131072}, int64_t{2049}}) {
    LayerNormCase c = base(33, N, DType::kBFloat16);
    if (c.bwd) {
      c.dout_l.row_stride = 0;  // an expanded gradient
    } else {
      c.broadcast_x = true;
      c.x_l.row_stride = 0;
    }
    EXPECT_EQ(run_layernorm_case(c).policy == RowPolicy::kGeneral, N % 8 != 0);
    c = base(5, N, DType::kBFloat16);
    c.inplace = true;
    run_layernorm_case(c);
  }
}

INSTANTIATE_TEST_SUITE_P(All, LayerNormOptions, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "bwd" : "fwd");
                         });

// C01 for LayerNorm: the upstream gradient as autograd hands it over. y.sum().backward() gives
// dy expanded with both strides 0 (one element in memory: the runner uploads every value to
// that address, so dy is the last one everywhere, and the reference reads dy back from the
// device); also a transposed 2-D dy (strides (1, M)). Every other output contiguous and
// poisoned; dx, dweight and dbias against the float64 reference. Only the general policy can
// read a column stride other than 1 (vector_ok).
class LayerNormBwdDout : public GpuTest {};

TEST_F(LayerNormBwdDout, C01ExpandedAndTransposed) {
  uint64_t seed = 7000;
  for (const auto& [M, N] : {Shape{2048, 256}, Shape{257, 500}, Shape{3, 65536}, Shape{7, 127}})
    for (DType t : {DType::kBFloat16, DType::kFloat32}) {
      LayerNormCase c;
      c.M = M;
      c.N = N;
      c.bwd = true;
      c.x = c.out = t;
      c.eps = 1e-6f;
      c.seed = ++seed;
      c.dout_l.row_stride = 0;  // (a) expanded: every element at one address
      c.dout_l.col_stride = 0;
      EXPECT_EQ(run_layernorm_case(c).policy, RowPolicy::kGeneral);
      c.seed = ++seed;
      c.dout_l.row_stride = 1;  // (d) transposed: dy = big.t(), big (N, M) contiguous
      c.dout_l.col_stride = M;
      EXPECT_EQ(run_layernorm_case(c).policy, RowPolicy::kGeneral);
    }
}

// dweight and dbias: the same bits on every run (fixed-order partials and column sums), on the
// staged and the general policy; M = 0 writes zeros. Rows: many times the resident clusters
// (every persistent cluster folds many rows into its partial): 3000 of 4096 and 4097 columns,
// 1000 of 131072 (a row there takes 4096 threads or more on both plans, staged-v4's 4 vectors
// of 8 per thread and the general policy's 16 values: at most 2048 x 132 SMs / 4096 = 66
// resident clusters, 15 rows each at least). The inputs of a shape are drawn and uploaded once
// and read by both plans (the kernels only read them).
class LayerNormBwdSums : public GpuTest {
 protected:
  // One shape's inputs (bf16 x and dout, fp32 weight, drawn statistics), uploaded once.
  struct Inputs {
    int64_t M = 0, N = 0;
    DeviceTensor x, dy, w, mean, rstd;
  };
  static Inputs inputs(int64_t M, int64_t N, uint64_t seed) {
    Rng rng(seed);
    Inputs in;
    in.M = M;
    in.N = N;
    in.x = upload(random_values(rng, M * N, DType::kBFloat16), DType::kBFloat16, M, N);
    in.dy = upload(random_values(rng, M * N, DType::kBFloat16), DType::kBFloat16, M, N);
    std::vector<double> wh;
    in.w = random_vector(rng, N, DType::kFloat32, 1.0, &wh);
    in.mean = stat_vector(M, 1);
    in.rstd = stat_vector(M, 1);
    upload_into(in.mean, random_values(rng, M, DType::kFloat32, 0.0, 0.1));
    upload_into(in.rstd, random_uniform(rng, M, DType::kFloat32, 0.5, 1.5));
    return in;
  }
  // The backward of `in` into fresh dweight and dbias (fp32, poisoned) and `dx`, on `config`
  // (-1: the public API); returns dweight's and dbias's bytes.
  static std::pair<std::vector<unsigned char>, std::vector<unsigned char>> run(
      const Inputs& in, const DeviceTensor& dx, int config) {
    DeviceTensor dw = alloc_tensor(DType::kFloat32, 1, in.N, {}, true);
    DeviceTensor db = alloc_tensor(DType::kFloat32, 1, in.N, {}, true);
    LayerNormBwdArgs a;
    a.x = in.x.ref;
    a.weight = in.w.ref;
    a.dout = in.dy.ref;
    a.mean = in.mean.ref;
    a.rstd = in.rstd.ref;
    a.dx = dx.ref;
    a.dweight = dw.ref;
    a.dbias = db.ref;
    run_ln_bwd(a, config);
    return {download_bytes(dw), download_bytes(db)};
  }
};

TEST_F(LayerNormBwdSums, DeterministicAndEmpty) {
  for (int64_t N : {int64_t{4096}, int64_t{4097}, int64_t{131072}}) {
    const Inputs in = inputs(N > 65536 ? 1000 : 3000, N, N);
    for (int config : {-1, kRowConfigCount}) {
      SCOPED_TRACE(config < 0 ? "the public API" : "the general policy");
      DeviceTensor dx = alloc_tensor(DType::kBFloat16, in.M, N);
      const auto first = run(in, dx, config);
      for (int r = 1; r < 3; ++r) {
        const auto again = run(in, dx, config);
        EXPECT_EQ(again.first, first.first) << "dweight bits differ between runs, N=" << N;
        EXPECT_EQ(again.second, first.second) << "dbias bits differ between runs, N=" << N;
      }
    }
  }
  // M = 0: dweight = dbias = 0, no row kernel.
  DeviceTensor x = alloc_tensor(DType::kBFloat16, 0, 300);
  DeviceTensor w = upload_vector(std::vector<double>(300, 1.0), DType::kFloat32, 300);
  DeviceTensor mean = stat_vector(0, 1), rstd = stat_vector(0, 1);
  DeviceTensor dw = alloc_tensor(DType::kFloat32, 1, 300, {}, true);
  DeviceTensor db = alloc_tensor(DType::kBFloat16, 1, 300, {}, true);
  LayerNormBwdArgs a;
  a.x = x.ref;
  a.weight = w.ref;
  a.dout = x.ref;
  a.mean = mean.ref;
  a.rstd = rstd.ref;
  a.dx = x.ref;
  a.dweight = dw.ref;
  a.dbias = db.ref;
  EXPECT_EQ(layernorm_bwd_workspace_size(a), 0u);
  layernorm_bwd(a, nullptr, 0, nullptr);
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  for (double v : download(dw)) EXPECT_EQ(v, 0.0);
  for (double v : download(db)) EXPECT_EQ(v, 0.0);
}

// QUACK_PDL=1 (the column sums as programmatic dependents of the row kernel, common/pdl.h):
// dx, dweight and dbias have the bits of the serial launch, three runs each, on the staged plan
// (4096: many rows per persistent CTA; 131072: clusters) and the general policy.
TEST_F(LayerNormBwdSums, ProgrammaticColsumsSameBits) {
  for (int64_t N : {int64_t{4096}, int64_t{131072}}) {
    const Inputs in = inputs(N > 65536 ? 1000 : 8192, N, N + 1);
    for (int config : {-1, kRowConfigCount}) {
      SCOPED_TRACE(std::string(config < 0 ? "the public API" : "the general policy") +
                   ", N=" + std::to_string(N));
      DeviceTensor dx = alloc_tensor(DType::kBFloat16, in.M, N);
      std::pair<std::vector<unsigned char>, std::vector<unsigned char>> serial;
      std::vector<unsigned char> serial_dx;
      {
        const ScopedEnv env("QUACK_PDL", "0");
        serial = run(in, dx, config);
        serial_dx = download_bytes(dx);
      }
      const ScopedEnv env("QUACK_PDL", "1");
      for (int r = 0; r < 3; ++r) {
        dx.poison();
        const auto got = run(in, dx, config);
        EXPECT_EQ(download_bytes(dx), serial_dx) << "dx differs from the serial launch";
        EXPECT_EQ(got.first, serial.first) << "dweight differs from the serial launch";
        EXPECT_EQ(got.second, serial.second) << "dbias differs from the serial launch";
      }
    }
  }
}

// N = 0 with M > 0 (norm.h, as torch): the statistics of empty rows, mean 0 and rstd NaN, in
// strided vectors (the gaps keep their poison); RMSNorm's rstd NaN; the backward writes
// nothing and needs no workspace.
TEST_F(LayerNormBwdSums, ZeroColumns) {
  const int64_t M = 5;
  DeviceTensor x = alloc_tensor(DType::kBFloat16, M, 0), out = alloc_tensor(DType::kBFloat16, M, 0);
  Layout strided;
  strided.col_stride = 3;
  DeviceTensor mean = alloc_tensor(DType::kFloat32, 1, M, strided, true);
  DeviceTensor rstd = alloc_tensor(DType::kFloat32, 1, M, strided, true);
  LayerNormFwdArgs a;
  a.x = x.ref;
  a.out = out.ref;
  a.mean = mean.ref;
  a.rstd = rstd.ref;
  layernorm_fwd(a, nullptr);
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  const auto m = download(mean), r = download(rstd);
  for (int64_t i = 0; i < M; ++i) {
    EXPECT_EQ(m[i], 0.0) << i;
    EXPECT_TRUE(std::isnan(r[i])) << i;
  }
  EXPECT_TRUE(gaps_untouched("mean", mean));
  EXPECT_TRUE(gaps_untouched("rstd", rstd));
  DeviceTensor rstd2 = alloc_tensor(DType::kFloat32, 1, M, {}, true);
  QUACK_CUDA_OK(cudaMemset(rstd2.buf.get(), 0, rstd2.buf.bytes()));
  RmsNormFwdArgs ra;
  ra.x = x.ref;
  ra.out = out.ref;
  ra.rstd = rstd2.ref;
  rmsnorm_fwd(ra, nullptr);
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  for (double v : download(rstd2)) EXPECT_TRUE(std::isnan(v));
  LayerNormBwdArgs b;
  b.x = x.ref;
  b.dout = x.ref;
  b.mean = mean.ref;
  b.rstd = rstd.ref;
  DeviceTensor dx = alloc_tensor(DType::kBFloat16, M, 0);
  b.dx = dx.ref;
  EXPECT_EQ(layernorm_bwd_workspace_size(b), 0u);
  layernorm_bwd(b, nullptr, 0, nullptr);
  QUACK_CUDA_OK(cudaDeviceSynchronize());
}

TEST_F(LayerNormBwdSums, WorkspaceTooSmall) {
  const int64_t M = 64, N = 4096;
  DeviceTensor x = alloc_tensor(DType::kBFloat16, M, N);
  DeviceTensor w = upload_vector(std::vector<double>(N, 1.0), DType::kFloat32, N);
  DeviceTensor mean = stat_vector(M, 1), rstd = stat_vector(M, 1);
  DeviceTensor dw = alloc_tensor(DType::kFloat32, 1, N, {}, true);
  LayerNormBwdArgs a;
  a.x = x.ref;
  a.weight = w.ref;
  a.dout = x.ref;
  a.mean = mean.ref;
  a.rstd = rstd.ref;
  DeviceTensor dx = alloc_tensor(DType::kBFloat16, M, N);
  a.dx = dx.ref;
  a.dweight = dw.ref;
  const size_t bytes = layernorm_bwd_workspace_size(a);
  EXPECT_GT(bytes, 0u);
  DeviceBuffer ws(bytes);
  try {
    layernorm_bwd(a, ws.get(), bytes - 4, nullptr);
    ADD_FAILURE() << "a too-small workspace was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("workspace"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace quack::test
