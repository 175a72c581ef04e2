// Tier 2: softmax / log_softmax forward and backward on the device against the float64
// reference (softmax_runner.h). Skips without a GPU.
//
//   SoftmaxShapes   the public API over (M, N) pairs from 1 to 262152 columns, M = 0 and N = 0,
//                   every dtype pair with a vector-path instance and two without (general policy);
//                   aligned shapes must take a vector policy.
//   SoftmaxConfigs  every entry of the row skeleton's table (row_config.h) and the general
//                   policy, forced, on rows that fill its capacity, end inside it, or span
//                   clusters of 1, 2, 3 and 16 CTAs; persistent kernels with more rows than
//                   resident clusters (stages reused, mbarrier phases flipping).
//   SoftmaxLayouts  strided, misaligned, broadcast (stride 0) and in-place tensors; rows of
//                   −inf, all −inf (NaN, as PyTorch) and NaN.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu/gpu_util.h"
#include "gpu/softmax_runner.h"
#include "quack/errors.h"
#include "row/row_config.h"

namespace quack::test {
namespace {

using detail::kRowConfigCount;
using detail::kRowConfigs;
using detail::RowPolicy;

using Shape = std::pair<int64_t, int64_t>;  // (M, N)

const std::vector<Shape> kShapes = {
    {1, 1},     {7, 1},     {3, 7},     {5, 127},   {100, 500}, {33, 128},  {65, 256},
    {17, 1024}, {16, 2048}, {64, 4096}, {9, 8192},  {5, 16384}, {3, 32768}, {3, 65536},
    {2, 65537}, {2, 131072}, {2, 262144}, {1, 262152}, {0, 4096}, {4, 0}};

struct Dtypes {
  DType in, dy, out;  // fwd: x, -, out; bwd: y, dy, dx
  bool vec;           // a vector-path instance exists
};

// A case of shape (M, N) in the dtypes d.
SoftmaxCase make_case(const Shape& s, const Dtypes& d, bool log, bool bwd) {
  SoftmaxCase c;
  c.M = s.first;
  c.N = s.second;
  c.log = log;
  c.bwd = bwd;
  c.in = d.in;
  c.dy = d.dy;
  c.out = d.out;
  return c;
}
const std::vector<Dtypes> kFwdDtypes = {
    {DType::kFloat32, DType::kFloat32, DType::kFloat32, true},
    {DType::kFloat16, DType::kFloat16, DType::kFloat16, true},
    {DType::kFloat16, DType::kFloat16, DType::kFloat32, true},
    {DType::kBFloat16, DType::kBFloat16, DType::kBFloat16, true},
    {DType::kBFloat16, DType::kBFloat16, DType::kFloat32, true},
    {DType::kBFloat16, DType::kBFloat16, DType::kFloat16, false},
    {DType::kFloat32, DType::kFloat32, DType::kBFloat16, false}};
const std::vector<Dtypes> kBwdDtypes = {
    {DType::kFloat32, DType::kFloat32, DType::kFloat32, true},
    {DType::kFloat16, DType::kFloat16, DType::kFloat16, true},
    {DType::kBFloat16, DType::kBFloat16, DType::kBFloat16, true},
    {DType::kFloat32, DType::kFloat32, DType::kBFloat16, true},
    {DType::kFloat32, DType::kFloat32, DType::kFloat16, true},
    {DType::kBFloat16, DType::kFloat32, DType::kBFloat16, false},
    {DType::kFloat16, DType::kFloat16, DType::kFloat32, false}};

std::string dname(const Dtypes& d, bool bwd) {
  return std::string(short_name(d.in)) + (bwd ? std::string("_") + short_name(d.dy) : "") + "_" +
         short_name(d.out);
}

// ------------------------------------------------------------------ the public API over shapes

using ShapeParam = std::tuple<Shape, int, bool, bool>;  // shape, dtype index, log, bwd
class SoftmaxShapes : public GpuTest, public ::testing::WithParamInterface<ShapeParam> {};

TEST_P(SoftmaxShapes, MatchesReference) {
  const auto [shape, di, log, bwd] = GetParam();
  const Dtypes& d = (bwd ? kBwdDtypes : kFwdDtypes)[static_cast<size_t>(di)];
  SoftmaxCase c = make_case(shape, d, log, bwd);
  c.seed = static_cast<uint64_t>(c.M * 1000003 + c.N * 7 + di * 3 + log + 2 * bwd);
  const detail::RowPlan plan = run_softmax_case(c);
  const int64_t vec = 16 / dtype_size(d.in);
  if (c.M > 0 && c.N > 0) {
    const bool vector_expected = d.vec && c.N % vec == 0;
    EXPECT_EQ(plan.policy != RowPolicy::kGeneral, vector_expected)
        << "aligned calls with a compiled pair take a vector policy, the others the general one";
  }
}

std::string shape_name(const ::testing::TestParamInfo<ShapeParam>& info) {
  const Shape s = std::get<0>(info.param);
  const int di = std::get<1>(info.param);
  const bool log = std::get<2>(info.param), bwd = std::get<3>(info.param);
  return std::string(log ? "log_" : "") + "M" + std::to_string(s.first) + "_N" +
         std::to_string(s.second) + "_" + dname((bwd ? kBwdDtypes : kFwdDtypes)[di], bwd);
}

INSTANTIATE_TEST_SUITE_P(
    Fwd, SoftmaxShapes,
    ::testing::Combine(::testing::ValuesIn(kShapes), ::testing::Range(0, 7), ::testing::Bool(),
                       ::testing::Values(false)),
    shape_name);
INSTANTIATE_TEST_SUITE_P(
    Bwd, SoftmaxShapes,
    ::testing::Combine(::testing::ValuesIn(kShapes), ::testing::Range(0, 7), ::testing::Bool(),
                       ::testing::Values(true)),
    shape_name);

// ------------------------------------------------------------------ every configuration

// Rows to run a configuration on, in elements of a `elt`-byte input: one vector, half the
// capacity plus one vector, the capacity; the looped policy also 2.5 passes; the ring: one
// CTA's slice, a slice plus one vector (two CTAs), three slices less a vector, 16 slices.
std::vector<Shape> config_rows(int config, int elt) {
  const int64_t vec = 16 / elt;
  if (config == kRowConfigCount) return {{3, 1}, {37, 300}, {5, 4097}, {2, 70001}};  // general
  const detail::RowConfig& k = kRowConfigs[config];
  const int64_t chunk = k.chunk_bytes() / elt;  // elements per pass or CTA slice
  const int64_t rows = 2 * k.rows + 1;          // a partial last CTA
  switch (k.policy) {
    case RowPolicy::kRegister:
      return {{rows, vec}, {rows, chunk / 2 + vec}, {rows, chunk}};
    case RowPolicy::kLooped:
      return {{3, vec}, {3, chunk}, {3, 2 * chunk + chunk / 2 + vec}};
    case RowPolicy::kRing:
      // More rows than resident clusters at one and two CTAs per row (each CTA loops several
      // times: every stage reused, the copy and exchange barriers change phase).
      return {{600, chunk}, {600, chunk + vec}, {5, 3 * chunk - vec}, {3, 16 * chunk}};
    case RowPolicy::kClusterRegister:  // the forwards' entries under trial (forced only)
      // One vector, one CTA's slice, two CTAs, a partial third, 16 CTAs; the persistent
      // entries also more rows than resident clusters (each loops over several rows).
      if (k.stages > 0)
        return {{7, vec},           {600, chunk},      {300, chunk + vec},
                {5, 3 * chunk - vec}, {3, 16 * chunk}, {1500, 2 * chunk + vec}};
      return {{7, vec}, {600, chunk}, {300, chunk + vec}, {5, 3 * chunk - vec}, {3, 16 * chunk}};
    default:
      return {};
  }
}

using ConfigParam = std::tuple<int, bool>;  // configuration (kRowConfigCount: general), bwd
class SoftmaxConfigs : public GpuTest, public ::testing::WithParamInterface<ConfigParam> {};

TEST_P(SoftmaxConfigs, MatchesReference) {
  const auto [config, bwd] = GetParam();
  // One compiled pair per input width, and a pair whose output is narrower or wider.
  const std::vector<Dtypes> dts =
      bwd ? std::vector<Dtypes>{kBwdDtypes[2], kBwdDtypes[0], kBwdDtypes[3]}
          : std::vector<Dtypes>{kFwdDtypes[3], kFwdDtypes[0], kFwdDtypes[4]};
  uint64_t seed = 5000 + 100 * config + bwd;
  int ran = 0;
  // The cases of one input dtype (x; bwd: y and dy) and shape read one draw of x (and dy):
  // both directions' log and plain forms, and every output dtype of that input (the numbers do
  // not pick the code path; the dtypes, the form and the shape do). Each case compares its
  // output on a sample of rows (SoftmaxCase::sample_rows: about 4M elements; the other rows
  // checked finite).
  std::vector<std::pair<DType, DType>> inputs;  // (x or y, dy) dtypes, in dts' order
  for (const Dtypes& d : dts)
    if (std::find(inputs.begin(), inputs.end(), std::make_pair(d.in, d.dy)) == inputs.end())
      inputs.push_back({d.in, d.dy});
  for (const auto& [in_t, dy_t] : inputs)
    for (const Shape& s : config_rows(config, dtype_size(in_t))) {
      std::vector<double> x, dy;  // drawn when a case first needs them
      Rng rng(++seed);
      for (const Dtypes& d : dts) {
        if (d.in != in_t || d.dy != dy_t) continue;
        for (bool log : {false, true}) {
          // Is the entry compiled for this op and dtype? (Not: skip, as the plan would.) The
          // forwards compile the entries under trial (kTrialConfigs), softmax's forward the
          // held entries (kHeldFold).
          if (config < kRowConfigCount &&
              !detail::row_config_usable(kRowConfigs[config], bwd ? 2 : 1, bwd ? 1 : 2, 0,
                                         dtype_size(d.in), 0, 4, -1, false, 1, !bwd, false,
                                         false, !bwd && !log))
            continue;
          if (x.empty()) {
            x = random_values(rng, s.first * s.second, in_t, 0.0, 2.0);
            if (bwd) dy = random_values(rng, s.first * s.second, dy_t, 0.0, 1.0);
          }
          SoftmaxCase c = make_case(s, d, log, bwd);
          c.config = config;
          c.x_values = &x;
          if (bwd) c.dy_values = &dy;
          c.sample_rows = true;
          run_softmax_case(c);
          ++ran;
        }
      }
    }
  if (ran == 0) GTEST_SKIP() << "configuration not compiled for this direction";
}

INSTANTIATE_TEST_SUITE_P(All, SoftmaxConfigs,
                         ::testing::Combine(::testing::Range(0, kRowConfigCount + 1),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<ConfigParam>& info) {
                           const int config = std::get<0>(info.param);
                           const bool bwd = std::get<1>(info.param);
                           std::string n = config < kRowConfigCount ? kRowConfigs[config].name
                                                                    : "general";
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n + (bwd ? "_bwd" : "_fwd");
                         });

// ------------------------------------------------------------------ layouts and special values

class SoftmaxLayouts : public GpuTest, public ::testing::WithParamInterface<std::tuple<bool, bool>> {
 protected:
  SoftmaxCase base(int64_t M, int64_t N, DType t) const {
    SoftmaxCase c;
    c.M = M;
    c.N = N;
    c.log = std::get<0>(GetParam());
    c.bwd = std::get<1>(GetParam());
    c.in = c.out = t;
    c.seed = static_cast<uint64_t>(M * 31 + N);
    return c;
  }
};

TEST_P(SoftmaxLayouts, SpecialValues) {
  // −inf rows, an all −inf row (NaN) and a NaN row, on the register, ring and general policies.
  for (auto [N, t] : {std::pair<int64_t, DType>{4096, DType::kBFloat16},
                      {131072, DType::kBFloat16},
                      {301, DType::kFloat32},
                      {16384, DType::kFloat32}}) {
    SoftmaxCase c = base(6, N, t);
    c.specials = true;
    run_softmax_case(c);
  }
}

TEST_P(SoftmaxLayouts, RowStrides) {
  for (DType t : {DType::kBFloat16, DType::kFloat32}) {
    const int64_t vec = 16 / dtype_size(t);
    for (int64_t N : {int64_t{1024}, int64_t{65536}}) {
      SoftmaxCase c = base(9, N, t);
      c.in_l.row_stride = N + vec;      // wider rows, still 16-byte aligned: vector policies
      c.dy_l.row_stride = N + 2 * vec;
      c.out_l.row_stride = N + 3 * vec;
      const detail::RowPlan plan = run_softmax_case(c);
      EXPECT_NE(plan.policy, RowPolicy::kGeneral);
      c.in_l.row_stride = N + 1;        // misaligned rows: the general policy
      EXPECT_EQ(run_softmax_case(c).policy, RowPolicy::kGeneral);
      c.in_l = {};
      c.out_l.offset = 1;               // misaligned output base
      EXPECT_EQ(run_softmax_case(c).policy, RowPolicy::kGeneral);
    }
  }
}

TEST_P(SoftmaxLayouts, ColumnStridesAndTransposes) {
  SoftmaxCase c = base(7, 500, DType::kFloat16);
  c.in_l.col_stride = 3;
  c.in_l.row_stride = 3 * 500 + 1;
  c.out_l.row_stride = 1;  // out transposed: (M, N) with strides (1, M)
  c.out_l.col_stride = 7;
  c.dy_l.col_stride = 2;
  c.dy_l.row_stride = 1000;
  EXPECT_EQ(run_softmax_case(c).policy, RowPolicy::kGeneral);
  c = base(3, 70000, DType::kBFloat16);  // a long strided row: general policy over a cluster
  c.in_l.col_stride = 2;
  c.in_l.row_stride = 140000;
  EXPECT_EQ(run_softmax_case(c).policy, RowPolicy::kGeneral);
}

TEST_P(SoftmaxLayouts, BroadcastInput) {
  // fwd: every row of x at one address; bwd: dy with row stride 0 (an expanded gradient: rows
  // equal, columns distinct). A row stride of 0 keeps rows aligned: the vector policies read
  // the one row for every row (register, ring); odd N: the general policy.
  for (int64_t N : {int64_t{2048}, int64_t{131072}, int64_t{2049}}) {
    SoftmaxCase c = base(33, N, DType::kBFloat16);
    c.broadcast_in = true;
    if (c.bwd) c.dy_l.row_stride = 0;
    else c.in_l.row_stride = 0;
    EXPECT_EQ(run_softmax_case(c).policy == RowPolicy::kGeneral, N % 8 != 0);
  }
}

TEST_P(SoftmaxLayouts, InPlace) {
  for (int64_t N : {int64_t{4096}, int64_t{262144}, int64_t{4099}}) {
    SoftmaxCase c = base(5, N, DType::kBFloat16);
    c.inplace = true;
    run_softmax_case(c);
    c.in = c.out = DType::kFloat32;
    run_softmax_case(c);
  }
}

class SoftmaxErrors : public GpuTest {};

TEST_F(SoftmaxErrors, DevicePastTheCount) {
  // Tensors claiming a device this process does not see: InvalidArgument naming the index and
  // the count, before any launch (cudaSetDevice's own error named neither), no error left.
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  DeviceTensor x = alloc_tensor(DType::kBFloat16, 4, 256), y = alloc_tensor(DType::kBFloat16, 4, 256);
  SoftmaxFwdArgs a;
  a.x = x.ref;
  a.out = y.ref;
  a.x.device = a.out.device = count;
  try {
    softmax_fwd(a, nullptr);
    ADD_FAILURE() << "a tensor on cuda:" << count << " was accepted";
  } catch (const InvalidArgument& e) {
    const std::string want = "softmax_fwd: the tensors are on cuda:" + std::to_string(count) +
                             ", expected a device below the " + std::to_string(count);
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// The ring policy's L2 modes (RingL2: its prefetch and the stage copies' cache policies) move
// lines in L2, never values: every mode's outputs are bitwise the plan's mode's, which match
// the float64 reference. bf16 rows of 128 KB (clusters of 2); 600 rows, so every persistent
// cluster refills its stages and prefetches. Forward on ring-t1024v4-s3, backward (two
// streams) on ring-t1024v2-s3.
class SoftmaxRingL2 : public GpuTest {};

TEST_F(SoftmaxRingL2, EveryModeBitwise) {
  constexpr int64_t M = 600, N = 65536;
  constexpr DType T = DType::kBFloat16;
  Rng rng(4242);
  const std::vector<double> xh = random_values(rng, M * N, T, 0.0, 2.0);
  const std::vector<double> dyh = random_values(rng, M * N, T);
  const DeviceTensor x = upload(xh, T, M, N), dy = upload(dyh, T, M, N);
  const DeviceTensor y = alloc_tensor(T, M, N), dx = alloc_tensor(T, M, N);
  SoftmaxFwdArgs fa;
  fa.x = x.ref;
  fa.out = y.ref;
  SoftmaxBwdArgs ba;
  ba.y = y.ref;
  ba.dy = dy.ref;
  ba.dx = dx.ref;
  const detail::RowCall fc = detail::softmax_fwd_call(fa, false);
  const detail::RowCall bc = detail::softmax_bwd_call(ba, false);
  detail::RowPlan fp = detail::plan_row_call(fc, detail::row_config_index("ring-t1024v4-s3"));
  detail::RowPlan bp = detail::plan_row_call(bc, detail::row_config_index("ring-t1024v2-s3"));
  ASSERT_EQ(fp.policy, detail::RowPolicy::kRing);
  ASSERT_EQ(bp.policy, detail::RowPolicy::kRing);
  ASSERT_GT(fp.cluster_n, 1);
  std::vector<unsigned char> y0, dx0;
  for (int mode = 0; mode < detail::kRingL2Count; ++mode) {
    SCOPED_TRACE("ring_l2 " + std::to_string(mode));
    fp.ring_l2 = bp.ring_l2 = static_cast<detail::RingL2>(mode);
    y.poison();
    detail::run_row_call(fc, fp, nullptr);
    QUACK_CUDA_OK(cudaDeviceSynchronize());
    const std::vector<unsigned char> yb = download_bytes(y);
    if (mode == 0) {
      y0 = yb;
      const std::vector<double> yref = ref::softmax_fwd_ref(M, N, xh.data(), false);
      ASSERT_TRUE(close_rows("out", download(y), yref, M, N, tolerance(T), nullptr, true,
                             underflow_floor(T)));
    } else {
      EXPECT_TRUE(yb == y0) << "softmax fwd differs from ring_l2 0";
    }
    dx.poison();
    detail::run_row_call(bc, bp, nullptr);  // from this mode's y: bitwise mode 0's
    QUACK_CUDA_OK(cudaDeviceSynchronize());
    const std::vector<unsigned char> dxb = download_bytes(dx);
    if (mode == 0) {
      dx0 = dxb;
      const std::vector<double> yc = download(y);
      const ref::SoftmaxBwdRef dref = ref::softmax_bwd_ref(M, N, yc.data(), dyh.data(), false);
      ASSERT_TRUE(close_rows("dx", download(dx), dref.dx, M, N, tolerance(T), &dref.row_terms,
                             false, underflow_floor(T)));
    } else {
      EXPECT_TRUE(dxb == dx0) << "softmax bwd differs from ring_l2 0";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, SoftmaxLayouts,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<bool, bool>>& info) {
                           return std::string(std::get<0>(info.param) ? "log_" : "") +
                                  (std::get<1>(info.param) ? "bwd" : "fwd");
                         });

}  // namespace
}  // namespace quack::test
