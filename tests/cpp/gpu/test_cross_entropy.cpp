// Tier 2: cross-entropy forward (with and without dx), backward from lse and the gradient
// rescale on the device against the float64 reference (cross_entropy_runner.h). Skips
// without a GPU.
//
//   CeShapes    the public API over (M, V) from 1 to 262152 classes, every logits dtype,
//               int32 and int64 targets, 30 % of rows ignored; aligned shapes take a vector
//               policy.
//   CeOptions   reduction × label smoothing × z-loss × class weights × softcap, each with
//               ignore_index, for the forward, the forward with dx and the backward, on a
//               register and a general-policy shape.
//   CeConfigs   every entry of the row skeleton's table and the general policy, forced, for
//               the forward, the forward with dx and the backward.
//   CeCases     the handed cases (C03's kind at small size, C04, C05, C08's in-place dx, C10),
//               M = 0, all rows ignored, −inf and NaN rows, V = 1, shifted logits,
//               lse_partial, target_logit, strided logits, output dtypes.
//   CeScaleGrad the rescale: grad_output 1 leaves dx untouched (bit for bit), others scale.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/cross_entropy_runner.h"
#include "gpu/gpu_util.h"
#include "row/row_config.h"

namespace quack::test {
namespace {

using detail::kRowConfigCount;
using detail::kRowConfigs;
using detail::RowPolicy;

using Shape = std::pair<int64_t, int64_t>;  // (M, V)

enum class Dir { kFwd, kGrad, kBwd };
const char* dir_name(Dir d) { return d == Dir::kFwd ? "fwd" : d == Dir::kGrad ? "grad" : "bwd"; }

CeCase make_case(int64_t M, int64_t V, DType x, Dir d, uint64_t seed) {
  CeCase c;
  c.M = M;
  c.V = V;
  c.x = x;
  c.grad = d == Dir::kGrad;
  c.bwd = d == Dir::kBwd;
  c.seed = seed;
  return c;
}

// ------------------------------------------------------------------ the public API over shapes

const std::vector<Shape> kShapes = {
    {1, 1},     {7, 1},      {3, 7},      {5, 127},   {100, 500},  {33, 128},  {65, 256},
    {17, 1024}, {16, 2048},  {64, 4096},  {9, 8192},  {5, 16384},  {3, 32768}, {3, 65536},
    {2, 65537}, {2, 131072}, {2, 262144}, {1, 262152}, {3, 128256}, {0, 4096}};

using ShapeParam = std::tuple<Shape, DType, Dir>;
class CeShapes : public GpuTest, public ::testing::WithParamInterface<ShapeParam> {};

TEST_P(CeShapes, MatchesReference) {
  const auto [shape, dt, dir] = GetParam();
  CeCase c = make_case(shape.first, shape.second, dt, dir,
                       static_cast<uint64_t>(shape.first * 1000003 + shape.second * 7) +
                           static_cast<uint64_t>(dt) * 3 + static_cast<uint64_t>(dir));
  c.target = shape.second % 2 ? DType::kInt32 : DType::kInt64;
  const detail::RowPlan plan = run_ce_case(c);
  const int64_t vec = 16 / dtype_size(dt);
  if (c.M > 0) {
    EXPECT_EQ(plan.policy != RowPolicy::kGeneral, c.V % vec == 0)
        << "aligned calls take a vector policy, the others the general one";
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, CeShapes,
    ::testing::Combine(::testing::ValuesIn(kShapes),
                       ::testing::Values(DType::kBFloat16, DType::kFloat16, DType::kFloat32),
                       ::testing::Values(Dir::kFwd, Dir::kGrad, Dir::kBwd)),
    [](const ::testing::TestParamInfo<ShapeParam>& info) {
      const Shape s = std::get<0>(info.param);
      return "M" + std::to_string(s.first) + "_V" + std::to_string(s.second) + "_" +
             short_name(std::get<1>(info.param)) + "_" + dir_name(std::get<2>(info.param));
    });

// ------------------------------------------------------------------ options × ignore_index

const char* const kRedNames[] = {"none", "sum", "mean"};

// (reduction, eps, zs, weight, cap) over three shapes and the three directions.
using OptionParam = std::tuple<int, bool, bool, bool, bool, Dir>;
class CeOptions : public GpuTest, public ::testing::WithParamInterface<OptionParam> {};

TEST_P(CeOptions, MatchesReference) {
  const auto [red, eps, zs, weight, cap, dir] = GetParam();
  if (dir == Dir::kBwd && red != 0) GTEST_SKIP() << "the backward has no reduction";
  // bf16 V = 1000: register policy (r4t32v4); fp32 V = 4099: general policy; fp32 V = 40000:
  // the ring (160 KB rows, clusters of 3).
  for (auto [M, V, dt] : {std::tuple<int64_t, int64_t, DType>{37, 1000, DType::kBFloat16},
                          {21, 4099, DType::kFloat32},
                          {5, 40000, DType::kFloat32}}) {
    CeCase c = make_case(M, V, dt, dir, static_cast<uint64_t>(V + red * 7 + eps * 11 + zs * 13 +
                                                              weight * 17 + cap * 19));
    c.red = static_cast<Reduction>(red);
    c.eps = eps ? 0.1 : 0.0;
    c.zs = zs ? 1e-3 : 0.0;
    c.weight = weight;
    c.cap = cap ? 5.0 : 0.0;  // a cap near the logits' range (sd 2): tanh far from linear
    c.z_out = dir == Dir::kFwd || dir == Dir::kGrad;
    c.ignore = red == 1 ? 7 : -100;  // a class index as ignore_index too
    run_ce_case(c);
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, CeOptions,
    ::testing::Combine(::testing::Range(0, 3), ::testing::Bool(), ::testing::Bool(),
                       ::testing::Bool(), ::testing::Bool(),
                       ::testing::Values(Dir::kFwd, Dir::kGrad, Dir::kBwd)),
    [](const ::testing::TestParamInfo<OptionParam>& info) {
      const auto& p = info.param;
      return std::string(kRedNames[std::get<0>(p)]) + (std::get<1>(p) ? "_eps" : "") +
             (std::get<2>(p) ? "_z" : "") + (std::get<3>(p) ? "_weight" : "") +
             (std::get<4>(p) ? "_cap" : "") + "_" + dir_name(std::get<5>(p));
    });

// ------------------------------------------------------------------ every configuration

// Rows per configuration (elements of an `elt`-byte input), as the softmax tests: a vector, half
// the capacity plus a vector, the capacity; looped 2.5 passes; the ring: a slice, a slice plus
// a vector (two CTAs), three slices less a vector, 16 slices; more rows than resident clusters;
// the cluster register policy: a vector (one CTA), then the ring's rows; its persistent entry
// (one stage) also 1500 rows of two slices and a vector (clusters of 3, several rows per
// cluster: the stage's mbarrier phases and the reducer's stages reused); the map (the
// backward): a vector, a tile, a tile and a vector (a second tile of one vector), three tiles
// less a vector, 16 tiles, and 20 rows of 40 tiles and a vector.
std::vector<Shape> config_rows(int config, int elt) {
  const int64_t vec = 16 / elt;
  if (config == kRowConfigCount) return {{3, 1}, {37, 300}, {5, 4097}, {2, 70001}};
  const detail::RowConfig& k = kRowConfigs[config];
  const int64_t chunk = k.chunk_bytes() / elt;
  const int64_t rows = 2 * k.rows + 1;
  switch (k.policy) {
    case RowPolicy::kRegister:
      return {{rows, vec}, {rows, chunk / 2 + vec}, {rows, chunk}};
    case RowPolicy::kLooped:
      return {{3, vec}, {3, chunk}, {3, 2 * chunk + chunk / 2 + vec}};
    case RowPolicy::kRing:
      return {{600, chunk}, {300, chunk + vec}, {5, 3 * chunk - vec}, {3, 16 * chunk}};
    case RowPolicy::kClusterRegister:
      if (k.stages > 0)
        return {{7, vec},           {600, chunk},      {300, chunk + vec},
                {5, 3 * chunk - vec}, {3, 16 * chunk}, {1500, 2 * chunk + vec}};
      return {{7, vec}, {600, chunk}, {300, chunk + vec}, {5, 3 * chunk - vec}, {3, 16 * chunk}};
    case RowPolicy::kMap:
      return {{7, vec},           {600, chunk},     {300, chunk + vec},
              {5, 3 * chunk - vec}, {3, 16 * chunk}, {20, 40 * chunk + vec}};
    default:
      return {};
  }
}

using ConfigParam = std::tuple<int, Dir>;
class CeConfigs : public GpuTest, public ::testing::WithParamInterface<ConfigParam> {};

TEST_P(CeConfigs, MatchesReference) {
  const auto [config, dir] = GetParam();
  uint64_t seed = 7000 + 100 * config + static_cast<int>(dir);
  int ran = 0;
  for (DType dt : {DType::kBFloat16, DType::kFloat32}) {
    // Is the entry compiled for this op (one input stream, 4-float or 1-float reduction; the
    // forward's loss alone has no per-element output; the forwards take the entries under
    // trial; the backward without weighted smoothing has no reduction: the map entries)?
    const int red_floats = dir == Dir::kBwd ? 1 : 4;
    const int n_out = dir == Dir::kFwd ? 0 : 1;
    if (config < kRowConfigCount &&
        !detail::row_config_usable(kRowConfigs[config], 1, red_floats, 0, dtype_size(dt), 0, 4,
                                   -1, false, n_out, dir != Dir::kBwd, false,
                                   dir == Dir::kBwd))
      continue;
    for (const Shape& s : config_rows(config, dtype_size(dt))) {
      CeCase c = make_case(s.first, s.second, dt, dir, ++seed);
      c.config = config;
      c.eps = 0.1;  // every float of the reduction in use
      c.red = Reduction::kMean;
      c.z_out = true;
      c.zs = 1e-4;
      run_ce_case(c);
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "configuration not compiled for this direction";
}

INSTANTIATE_TEST_SUITE_P(All, CeConfigs,
                         ::testing::Combine(::testing::Range(0, kRowConfigCount + 1),
                                            ::testing::Values(Dir::kFwd, Dir::kGrad, Dir::kBwd)),
                         [](const ::testing::TestParamInfo<ConfigParam>& info) {
                           const int config = std::get<0>(info.param);
                           std::string n = config < kRowConfigCount ? kRowConfigs[config].name
                                                                    : "general";
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n + "_" + dir_name(std::get<1>(info.param));
                         });

// ------------------------------------------------------------------ cases

class CeCases : public GpuTest {};

// C05: fp32 and bf16 [8, 1000], 3 of 8 rows ignored; mean and sum; loss and dx divided by 5.
TEST_F(CeCases, C05MeanCountsNonIgnoredRows) {
  for (DType dt : {DType::kFloat32, DType::kBFloat16})
    for (Reduction red : {Reduction::kMean, Reduction::kSum}) {
      CeCase c = make_case(8, 1000, dt, Dir::kGrad, 5);
      c.red = red;
      c.targets = {3, -100, 999, 0, -100, 512, -100, 42};
      run_ce_case(c);
    }
}

// C04: every target ignored: none → zeros, sum → 0, mean → NaN, dx exactly 0, lse the true
// logsumexp.
TEST_F(CeCases, C04AllIgnored) {
  for (Reduction red : {Reduction::kNone, Reduction::kSum, Reduction::kMean})
    for (Dir d : {Dir::kFwd, Dir::kGrad}) {
      CeCase c = make_case(5, 10, DType::kFloat32, d, 4);
      c.red = red;
      c.targets.assign(5, -100);
      c.z_out = true;
      c.zs = 1e-3;
      run_ce_case(c);
    }
  // The same on a register-policy and a ring-policy shape, with smoothing and weights.
  for (int64_t V : {int64_t{4096}, int64_t{131072}}) {
    CeCase c = make_case(6, V, DType::kBFloat16, Dir::kGrad, 44);
    c.red = Reduction::kMean;
    c.targets.assign(6, -100);
    c.eps = 0.1;
    EXPECT_NE(run_ce_case(c).policy, RowPolicy::kGeneral);
    c.weight = true;  // weighted smoothing: general policy
    run_ce_case(c);
  }
}

// C10: out-of-range and negative non-ignored targets: NaN loss and dx for those rows only,
// nothing read or written out of bounds (the runner checks dx's gaps; run under
// compute-sanitizer for the reads).
TEST_F(CeCases, C10OutOfRangeTargets) {
  for (Reduction red : {Reduction::kNone, Reduction::kSum, Reduction::kMean})
    for (Dir d : {Dir::kFwd, Dir::kGrad, Dir::kBwd}) {
      if (d == Dir::kBwd && red != Reduction::kNone) continue;
      CeCase c = make_case(6, 5, DType::kFloat32, d, 10);
      c.red = red;
      c.targets = {1, 0, 5, -1, 2, -100};
      run_ce_case(c);
    }
  CeCase c = make_case(4, 3, DType::kFloat32, Dir::kGrad, 11);
  c.ignore = 255;
  c.targets = {254, 1, 255, 3};
  c.red = Reduction::kNone;
  run_ce_case(c);
  // Vector policies and the ring (the backward: the map), int32 targets far out of range, then
  // every option.
  for (int64_t V : {int64_t{4096}, int64_t{262144}}) {
    CeCase v = make_case(5, V, DType::kBFloat16, Dir::kGrad, 12);
    v.target = DType::kInt32;
    v.targets = {V, 3, -7, 2147483647, V - 1};
    v.red = Reduction::kNone;
    v.zs = 1e-3;
    v.z_out = true;
    EXPECT_NE(run_ce_case(v).policy, RowPolicy::kGeneral);  // register / ring policy
    CeCase b = v;  // the backward: register policy / map (262144 bf16: 16 tiles per row)
    b.grad = false;
    b.bwd = true;
    EXPECT_NE(run_ce_case(b).policy, RowPolicy::kGeneral);
    v.eps = 0.1;
    v.weight = true;
    run_ce_case(v);  // weighted smoothing: general policy
  }
}

// C08 (the C++ part): dx written over the logits, on every policy, equals the reference.
TEST_F(CeCases, C08InPlace) {
  for (auto [V, dt] : {std::pair<int64_t, DType>{1000, DType::kBFloat16},
                       {32768, DType::kBFloat16},
                       {131072, DType::kBFloat16},
                       {4099, DType::kFloat32},
                       {65536, DType::kFloat32}}) {
    CeCase c = make_case(7, V, dt, Dir::kGrad, 8);
    c.inplace = true;
    run_ce_case(c);
    c.bwd = true;
    c.grad = false;
    run_ce_case(c);
  }
  CeCase c = make_case(9, 2048, DType::kBFloat16, Dir::kGrad, 81);  // strided rows in place
  c.x_l.row_stride = 2048 + 64;
  c.inplace = true;
  run_ce_case(c);
}

TEST_F(CeCases, EmptyBatch) {
  for (Reduction red : {Reduction::kNone, Reduction::kSum, Reduction::kMean})
    for (Dir d : {Dir::kFwd, Dir::kGrad, Dir::kBwd}) {
      CeCase c = make_case(0, 4096, DType::kBFloat16, d, 2);
      c.red = red;
      c.z_out = true;
      run_ce_case(c);  // sum 0, mean NaN (the reference's 0/0)
    }
}

// −inf rows (a row whose target is its only finite logit: loss 0), all −inf (NaN), NaN rows.
TEST_F(CeCases, SpecialValues) {
  for (auto [V, dt] : {std::pair<int64_t, DType>{4096, DType::kBFloat16},
                       {131072, DType::kBFloat16},
                       {301, DType::kFloat32},
                       {16384, DType::kFloat32}})
    for (Dir d : {Dir::kFwd, Dir::kGrad, Dir::kBwd}) {
      CeCase c = make_case(6, V, dt, d, 3);
      c.specials = true;
      c.red = Reduction::kNone;
      c.ignore_frac = 0.0;
      run_ce_case(c);
      c.eps = 0.1;  // smoothing over −inf logits: +inf, as PyTorch
      c.cap = 10.0;
      run_ce_case(c);
    }
}

TEST_F(CeCases, OneClassAndShiftedLogits) {
  for (Dir d : {Dir::kFwd, Dir::kGrad, Dir::kBwd}) {
    CeCase c = make_case(9, 1, DType::kFloat32, d, 1);  // V = 1: loss 0, dx 0
    c.red = Reduction::kNone;
    run_ce_case(c);
    c = make_case(17, 32768, DType::kFloat32, d, 100);  // logits + 100
    c.shift = 100.0;
    c.sd = 1.0;
    run_ce_case(c);
  }
}

TEST_F(CeCases, LsePartialAndTargetLogit) {
  for (Reduction red : {Reduction::kNone, Reduction::kSum, Reduction::kMean}) {
    CeCase c = make_case(33, 4000, DType::kFloat32, Dir::kFwd, 20);
    c.red = red;
    c.partial_k = 32;  // lse of 125-column chunks; target logit gathered from x
    c.zs = 1e-3;
    c.z_out = true;
    c.weight = true;
    run_ce_case(c);
    c.given = true;  // target_logit given, x absent
    c.keep_x = false;
    run_ce_case(c);
    c.partial_k = 0;  // target_logit given with x (and dx)
    c.keep_x = true;
    c.grad = true;
    run_ce_case(c);
  }
  CeCase c = make_case(8, 128256, DType::kBFloat16, Dir::kFwd, 21);  // K = 1002 (QuACK's test)
  c.partial_k = 1002;
  run_ce_case(c);
}

TEST_F(CeCases, LayoutsAndDtypes) {
  CeCase c = make_case(9, 4096, DType::kBFloat16, Dir::kGrad, 30);
  c.x_l.row_stride = 4096 + 8;  // wider rows, aligned: vector policy
  EXPECT_NE(run_ce_case(c).policy, RowPolicy::kGeneral);
  c.x_l.row_stride = 4096 + 1;  // misaligned rows: general policy
  EXPECT_EQ(run_ce_case(c).policy, RowPolicy::kGeneral);
  c.x_l = {};
  c.x_l.col_stride = 2;  // column-strided logits
  c.x_l.row_stride = 2 * 4096;
  EXPECT_EQ(run_ce_case(c).policy, RowPolicy::kGeneral);
  c = make_case(7, 2048, DType::kFloat16, Dir::kFwd, 31);
  c.out = DType::kBFloat16;  // loss, lse, z in bf16
  c.red = Reduction::kNone;
  c.z_out = true;
  c.zs = 1e-2;
  run_ce_case(c);
  c = make_case(7, 2048, DType::kFloat16, Dir::kGrad, 32);  // fp16 with a softcap: general
  c.cap = 20.0;
  EXPECT_EQ(run_ce_case(c).policy, RowPolicy::kGeneral);
}

// ------------------------------------------------------------------ the gradient rescale

class CeScaleGrad : public GpuTest {};

TEST_F(CeScaleGrad, OneLeavesDxUntouchedOthersScale) {
  using Dx = std::tuple<int64_t, int64_t, DType, int64_t>;  // M, V, dtype, row stride
  for (auto [M, V, dt, rs] :
       {Dx{33, 4096, DType::kBFloat16, -1}, Dx{5, 1001, DType::kFloat32, -1},
        Dx{6, 512, DType::kFloat16, 520}, Dx{4, 300, DType::kBFloat16, 301}}) {
    SCOPED_TRACE("M=" + std::to_string(M) + " V=" + std::to_string(V));
    Rng rng(static_cast<uint64_t>(M * V));
    Layout l;
    l.row_stride = rs;
    const std::vector<double> h = random_values(rng, M * V, dt, 0.0, 1.0);
    DeviceTensor dx = upload(h, dt, M, V, l);
    const auto before = download_bytes(dx);
    for (double g : {1.0, 0.5, -3.0}) {
      upload_into(dx, h);
      DeviceTensor go = upload_vector({g}, DType::kFloat32, 1);
      CrossEntropyScaleGradArgs a;
      a.dx = dx.ref;
      a.grad_output = go.ref;
      cross_entropy_scale_grad(a, nullptr);
      QUACK_CUDA_OK(cudaDeviceSynchronize());
      if (g == 1.0) {
        EXPECT_EQ(download_bytes(dx), before) << "grad_output 1: dx untouched";
      } else {
        std::vector<double> ref = h;
        for (double& v : ref) v *= g;
        round_all(dt, ref);
        EXPECT_TRUE(close("dx", download(dx), ref, tolerance(dt) / 8, V));
        EXPECT_TRUE(gaps_untouched("dx", dx));
      }
    }
  }
}

}  // namespace
}  // namespace quack::test
