// Tier 2: linear + cross-entropy (quack/linear_cross_entropy.h) on the device against a float64
// reference. Skips without a GPU.
//
// Reference: the logits z = round_bf16(x·Wᵀ + b) in float64 (the GEMM rounds its fp32 result
// once to bf16, as the reference does here), the cross-entropy of reference/cross_entropy_ref.h
// on z (loss, lse, R = ∂loss/∂z for grad_output 1 or a per-row dloss), then dx = R·W,
// dW = Rᵀ·x (+ the old dW with accumulate), db = Σ_i R_i, all in float64.
// Tolerance (reference/tolerance.h): loss and lse 1e-3 of max|ref| (a logit whose fp32 sum
// rounds to the other bf16 neighbour than the float64 one moves a row's loss by ~2^-9·|z|);
// dx, dW, db: the device rounds each R element to bf16 before its GEMMs, so bf16's rel (plus
// the fp32 accumulation term over K) times max(max|ref|, max Σ_k|terms| / sqrt(K)), whatever
// the output dtype.
// Every output (and the workspace) starts as NaN; padded layouts check that nothing is written
// between rows. The plan of each case is checked too (lce_plan.h), so each suite provably runs
// the path it names: one chunk, several chunks with the fp32 accumulator split between dweight
// and the workspace, all of it in the workspace (accumulate, padded dweight), an fp32 dweight
// accumulated directly, and the low-memory mode's vocabulary slices.
//
//   LceShapes   odd T (1 .. 1000), V not a multiple of 8, D 8 .. 256 (and 60 with padded rows),
//               bias or not, 20 % ignored rows, every reduction, default chunks and forced ones
//   LcePaths    the dweight paths and modes above, accumulate, fp32 outputs, chunk 1
//   LceOptions  label smoothing, z-loss, softcap (each and together) × reductions × modes
//   LceBwd      the backward from lse with per-row dloss (stride 1 and 0) and one value,
//               several vocabulary slices (the last one partial), fp32 dx
//   LceCases    C02 (T = 0, D = 0), C04 (all ignored), C06 (reduction 'none' shape: T = 8, D =
//               10 padded, V = 15, per-token dloss; chunk 3), C10 (out-of-range targets), V = 1,
//               int32 targets, the rescale (grad_output 1 untouched, others scaled)
//   LceLarge    C03: T·V > 2^31 (16744 × 128256 and 8193 × 262144), reductions 'none' and 'sum',
//               sampled rows and columns, every row's loss (filter -*Large*)
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gemm/gemm_instances.h"
#include "gpu/gpu_util.h"
#include "linear_cross_entropy/lce_plan.h"
#include "quack/errors.h"
#include "quack/linear_cross_entropy.h"
#include "reference/cross_entropy_ref.h"
#include "reference/random.h"

namespace quack::test {
namespace {

using Mode = LinearCrossEntropyMode;
constexpr DType kBF = DType::kBFloat16, kF16 = DType::kFloat16, kF32 = DType::kFloat32;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

struct LceCase {
  int64_t T = 7, D = 64, V = 100;
  bool bias = false;
  int reduction = 2;  // quack::Reduction
  double eps = 0.0, zs = 0.0, cap = 0.0;
  int64_t ignore_index = -100;
  double ignore_frac = 0.2;
  int bad_targets = 0;  // rows with targets outside [0, V) (C10)
  bool all_ignored = false;
  bool want_dx = true, want_dw = true, want_db = true;  // db only with bias
  DType ab = kBF;  // x, weight and bias (the logits' dtype)
  DType dx_dt = kBF, dw_dt = kBF, db_dt = kBF;
  bool accumulate = false;
  Mode mode = Mode::kDefault;
  int64_t chunk = 0, vchunk = 0;
  int64_t x_pad = 0;   // extra elements per row of x, weight and dx (D + pad: 8-aligned)
  int64_t dw_pad = 0;  // extra elements per row of dweight
  DType target_dt = DType::kInt64;
  bool bwd = false;    // linear_cross_entropy_bwd with dloss
  int dloss_kind = 0;  // bwd: 0 per row (stride 1), 1 per row broadcast (stride 0), 2 (1)
  uint64_t seed = 1;
};

struct Data {
  std::vector<double> x, w, b, dw0, db0, dloss;
  std::vector<int64_t> t;
};

Data make_data(const LceCase& c) {
  Rng rng(c.seed);
  Data d;
  d.x = random_uniform(rng, c.T * c.D, c.ab, -1.0, 1.0);
  const double ws = 2.0 / std::sqrt(static_cast<double>(std::max<int64_t>(c.D, 1)));
  d.w = random_uniform(rng, c.V * c.D, c.ab, -ws, ws);
  if (c.bias) d.b = random_uniform(rng, c.V, c.ab, -1.0, 1.0);
  d.t.resize(static_cast<size_t>(c.T));
  for (int64_t i = 0; i < c.T; ++i) {
    int64_t t = static_cast<int64_t>(rng.uniform() * static_cast<double>(c.V));
    if (t >= c.V) t = c.V - 1;
    if (c.all_ignored || rng.uniform() < c.ignore_frac) t = c.ignore_index;
    d.t[i] = t;
  }
  for (int k = 0; k < c.bad_targets && k < c.T; ++k) {  // C10: V and −1 (not ignore_index)
    const int64_t i = (k * 7 + 1) % c.T;
    d.t[i] = k % 2 ? -1 : c.V + k;
  }
  if (c.accumulate) {
    d.dw0 = random_uniform(rng, c.V * c.D, c.dw_dt, -0.05, 0.05);
    if (c.bias) d.db0 = random_uniform(rng, c.V, c.db_dt, -0.05, 0.05);
  }
  if (c.bwd) d.dloss = random_uniform(rng, c.T, kF32, 0.5, 2.0);
  if (c.bwd && c.dloss_kind > 0)
    std::fill(d.dloss.begin(), d.dloss.end(), d.dloss.empty() ? 0.0 : d.dloss[0]);
  return d;
}

struct Ref {
  ref::CeRef ce;
  std::vector<double> dx, dw, db, dx_floor, dw_floor, db_floor;
};

Ref reference(const LceCase& c, const Data& d) {
  const int64_t T = c.T, D = c.D, V = c.V;
  std::vector<double> z(static_cast<size_t>(T * V));
  for (int64_t i = 0; i < T; ++i)
    for (int64_t v = 0; v < V; ++v) {
      double s = c.bias ? d.b[v] : 0.0;
      for (int64_t k = 0; k < D; ++k) s += d.x[i * D + k] * d.w[v * D + k];
      z[i * V + v] = round_to(c.ab, s);
    }
  ref::CeOptions o;
  o.ignore_index = c.ignore_index;
  o.reduction = c.reduction;
  o.eps = c.eps;
  o.zs = c.zs;
  o.cap = c.cap;
  Ref r;
  r.ce =
      ref::cross_entropy_ref(T, V, z.data(), d.t.data(), o, true, c.bwd ? d.dloss.data() : nullptr);
  const std::vector<double>& R = r.ce.dx;
  r.dx.assign(static_cast<size_t>(T * D), 0.0);
  r.dw.assign(static_cast<size_t>(V * D), 0.0);
  r.db.assign(static_cast<size_t>(V), 0.0);
  std::vector<double> dx_abs(r.dx.size(), 0.0), dw_abs(r.dw.size(), 0.0), db_abs(r.db.size(), 0.0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t v = 0; v < V; ++v) {
      const double g = R[i * V + v];
      if (g == 0.0) continue;
      r.db[v] += g;
      db_abs[v] += std::fabs(g);
      for (int64_t k = 0; k < D; ++k) {
        r.dx[i * D + k] += g * d.w[v * D + k];
        dx_abs[i * D + k] += std::fabs(g * d.w[v * D + k]);
        r.dw[v * D + k] += g * d.x[i * D + k];
        dw_abs[v * D + k] += std::fabs(g * d.x[i * D + k]);
      }
    }
  if (c.accumulate) {
    for (size_t k = 0; k < r.dw.size(); ++k) r.dw[k] += d.dw0[k];
    for (size_t k = 0; k < r.db.size() && !d.db0.empty(); ++k) r.db[k] += d.db0[k];
  }
  r.dx_floor = dx_abs;
  r.dw_floor = dw_abs;
  r.db_floor = db_abs;
  return r;
}

double floor_of(const std::vector<double>& abs_sums, int64_t K) {
  double m = 0.0;
  for (double v : abs_sums)
    if (std::isfinite(v)) m = std::fmax(m, v);
  return K > 0 ? m / std::sqrt(static_cast<double>(K)) : 0.0;
}

// The plan of the case (lce_plan.h), for the path checks.
detail::LcePlan plan_of(const LinearCrossEntropyFwdArgs& a) { return detail::lce_plan_fwd(a); }

struct LceRun {
  detail::LcePlan plan;
};

// Runs the case (forward, or forward for lse then backward) and compares every output.
LceRun run_case(const LceCase& c) {
  const Data d = make_data(c);
  const int64_t T = c.T, D = c.D, V = c.V;
  const bool none = c.reduction == 0;
  Layout xl;
  xl.row_stride = D + c.x_pad;
  DeviceTensor x = upload(d.x, c.ab, T, D, xl);
  DeviceTensor w = upload(d.w, c.ab, V, D, xl);
  DeviceTensor b = c.bias ? upload_vector(d.b, c.ab, V) : DeviceTensor();
  DeviceTensor t = alloc_tensor(c.target_dt, 1, T, {}, true);
  {  // integers: upload as raw bytes
    std::vector<unsigned char> img(t.buf.bytes(), 0);
    for (int64_t i = 0; i < T; ++i) {
      if (c.target_dt == DType::kInt64)
        std::memcpy(img.data() + i * 8, &d.t[i], 8);
      else {
        const int32_t v = static_cast<int32_t>(d.t[i]);
        std::memcpy(img.data() + i * 4, &v, 4);
      }
    }
    EXPECT_EQ(cudaMemcpy(t.buf.get(), img.data(), img.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  DeviceTensor loss = alloc_tensor(kF32, 1, none ? T : 1, {}, true);
  DeviceTensor lse = alloc_tensor(kF32, 1, T, {}, true);
  Layout dwl;
  dwl.row_stride = D + c.dw_pad;
  Layout dxl;
  dxl.row_stride = D + c.x_pad;
  DeviceTensor dx = c.want_dx ? alloc_tensor(c.dx_dt, T, D, dxl) : DeviceTensor();
  DeviceTensor dw = c.want_dw ? (c.accumulate ? upload(d.dw0, c.dw_dt, V, D, dwl)
                                              : alloc_tensor(c.dw_dt, V, D, dwl))
                              : DeviceTensor();
  const bool want_db = c.want_db && c.bias;
  DeviceTensor db = want_db ? (c.accumulate ? upload_vector(d.db0, c.db_dt, V)
                                            : alloc_tensor(c.db_dt, 1, V, {}, true))
                            : DeviceTensor();
  const auto ref_of = [](const DeviceTensor& t) { return t.ref; };

  LinearCrossEntropyFwdArgs a;
  a.x = x.ref;
  a.weight = w.ref;
  if (c.bias) a.bias = b.ref;
  a.target = t.ref;
  a.loss = loss.ref;
  a.lse = lse.ref;
  if (!c.bwd) {
    if (c.want_dx) a.dx = ref_of(dx);
    if (c.want_dw) a.dweight = ref_of(dw);
    if (want_db) a.dbias = ref_of(db);
  }
  a.accumulate = c.accumulate;
  a.ignore_index = c.ignore_index;
  a.reduction = static_cast<Reduction>(c.reduction);
  a.label_smoothing = static_cast<float>(c.eps);
  a.z_loss_scale = static_cast<float>(c.zs);
  a.logit_softcap = static_cast<float>(c.cap);
  a.mode = c.mode;
  a.chunk_size = c.chunk;
  a.vocab_chunk_size = c.vchunk;
  LceRun run;
  run.plan = plan_of(a);
  const size_t bytes = linear_cross_entropy_fwd_workspace_size(a);
  EXPECT_EQ(bytes, run.plan.total);
  DeviceBuffer ws(bytes);
  ws.poison();
  a.workspace = ws.get();
  a.workspace_bytes = bytes;
  linear_cross_entropy_fwd(a, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  DeviceTensor dl;
  if (c.bwd) {
    LinearCrossEntropyBwdArgs g;
    g.x = x.ref;
    g.weight = w.ref;
    if (c.bias) g.bias = b.ref;
    g.target = t.ref;
    g.lse = lse.ref;
    if (c.dloss_kind == 2) {
      dl = upload_vector({d.dloss.empty() ? 1.0 : d.dloss[0]}, kF32, 1);
    } else if (c.dloss_kind == 1) {
      dl = upload_vector({d.dloss.empty() ? 1.0 : d.dloss[0]}, kF32, 1);
      dl.ref.shape[0] = T;  // one element broadcast: stride 0
      dl.ref.stride[0] = 0;
    } else {
      dl = upload_vector(d.dloss, kF32, T);
    }
    g.dloss = dl.ref;
    if (c.want_dx) g.dx = dx.ref;
    if (c.want_dw) g.dweight = dw.ref;
    if (want_db) g.dbias = db.ref;
    g.accumulate = c.accumulate;
    g.ignore_index = c.ignore_index;
    g.label_smoothing = a.label_smoothing;
    g.z_loss_scale = a.z_loss_scale;
    g.logit_softcap = a.logit_softcap;
    g.mode = c.mode;
    g.vocab_chunk_size = c.vchunk;
    run.plan = detail::lce_plan_bwd(g);
    const size_t gb = linear_cross_entropy_bwd_workspace_size(g);
    DeviceBuffer gws(gb);
    gws.poison();
    g.workspace = gws.get();
    g.workspace_bytes = gb;
    linear_cross_entropy_bwd(g, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }

  const Ref r = reference(c, d);
  const std::string where =
      " (T=" + std::to_string(T) + " D=" + std::to_string(D) + " V=" + std::to_string(V) + ")";
  if (!c.bwd) {
    const std::vector<double> got = download(loss);
    if (none) {
      EXPECT_TRUE(close("loss" + where, got, r.ce.loss_rows, 1e-3));
    } else {
      const double want = r.ce.loss;
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(got[0])) << "loss" << where << ": " << got[0];
      else
        EXPECT_NEAR(got[0], want, 1e-3 * std::fmax(std::fabs(want), r.ce.loss_terms) + 1e-6)
            << "loss" << where;
    }
  }
  EXPECT_TRUE(close("lse" + where, download(lse), r.ce.lse, 1e-3));
  const double rel = tolerance(c.ab);
  if (c.want_dx) {
    EXPECT_TRUE(close("dx" + where, download(dx), r.dx,
                      rel + kAccumPerSqrtRow * std::sqrt(double(V)), D, floor_of(r.dx_floor, V)));
  }
  if (c.want_dw) {
    EXPECT_TRUE(close("dweight" + where, download(dw), r.dw,
                      rel + kAccumPerSqrtRow * std::sqrt(double(std::max<int64_t>(T, 1))), D,
                      floor_of(r.dw_floor, T)));
    EXPECT_TRUE(gaps_untouched("dweight" + where, dw));
  }
  if (want_db) {
    EXPECT_TRUE(close("dbias" + where, download(db), r.db,
                      rel + kAccumPerSqrtRow * std::sqrt(double(std::max<int64_t>(T, 1))), 0,
                      floor_of(r.db_floor, T)));
  }
  return run;
}

// ------------------------------------------------------------------ shapes

struct Shape {
  int64_t T, D, V;
};
const std::vector<Shape> kShapes = {{1, 64, 15},     {7, 64, 1000},    {129, 128, 1001},
                                    {257, 64, 4099}, {300, 256, 2048}, {1000, 64, 333},
                                    {64, 8, 8},      {33, 16, 100000}};

using ShapeParam = std::tuple<Shape, int, bool, int64_t>;  // shape, reduction, bias, chunk
class LceShapes : public GpuTest, public ::testing::WithParamInterface<ShapeParam> {};

TEST_P(LceShapes, MatchesReference) {
  const auto [s, red, bias, chunk] = GetParam();
  LceCase c;
  c.T = s.T;
  c.D = s.D;
  c.V = s.V;
  c.reduction = red;
  c.bias = bias;
  c.chunk = chunk;
  c.bwd = red == 0;  // 'none' trains through the backward from lse
  c.seed = static_cast<uint64_t>(s.T * 131 + s.V * 7 + s.D + red * 3 + (bias ? 1 : 0) + chunk);
  const LceRun run = run_case(c);
  if (!c.bwd && chunk > 0) {
    EXPECT_EQ(run.plan.chunk, std::min(chunk, s.T));
  }
}

INSTANTIATE_TEST_SUITE_P(All, LceShapes,
                         ::testing::Combine(::testing::ValuesIn(kShapes),
                                            ::testing::Values(0, 1, 2), ::testing::Bool(),
                                            ::testing::Values(int64_t{0}, int64_t{64})),
                         [](const auto& info) {
                           const Shape s = std::get<0>(info.param);
                           return "T" + std::to_string(s.T) + "_D" + std::to_string(s.D) + "_V" +
                                  std::to_string(s.V) + "_r" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_bias" : "") + "_c" +
                                  std::to_string(std::get<3>(info.param));
                         });

// ------------------------------------------------------------------ dweight paths and modes

class LcePaths : public GpuTest {};

TEST_F(LcePaths, OneChunkWritesDweightDirectly) {
  LceCase c;
  c.T = 100;
  c.V = 1003;
  c.bias = true;
  const LceRun r = run_case(c);
  EXPECT_EQ(r.plan.n_chunks, 1);
  EXPECT_EQ(r.plan.dw, detail::LceDw::kDirect);
}

TEST_F(LcePaths, SplitAccumulatorInsideDweight) {
  for (int64_t V : {1000, 1001, 24, 9}) {
    LceCase c;
    c.T = 200;
    c.V = V;
    c.chunk = 48;  // 5 chunks, the last of 8 tokens
    c.bias = true;
    c.seed = static_cast<uint64_t>(V);
    const LceRun r = run_case(c);
    EXPECT_EQ(r.plan.n_chunks, 5);
    EXPECT_EQ(r.plan.dw, detail::LceDw::kAcc);
    EXPECT_EQ(r.plan.acc_in_dw, detail::lce_split_rows(V)) << V;
    // rows [0, acc_in_dw) compacted inside the last chunk, the rest stored by its GEMM
    EXPECT_TRUE(r.plan.dw_ws_last_direct) << V;
  }
}

TEST_F(LcePaths, AccumulatorInWorkspace) {
  LceCase c;  // accumulate: the old dweight is read, so the accumulator cannot live in it
  c.T = 150;
  c.V = 777;
  c.chunk = 64;
  c.bias = true;
  c.accumulate = true;
  LceRun r = run_case(c);
  EXPECT_EQ(r.plan.dw, detail::LceDw::kAcc);
  EXPECT_EQ(r.plan.acc_in_dw, 0);
  EXPECT_FALSE(r.plan.dw_ws_last_direct);  // added into dweight by the cast at the end
  LceCase p;  // a padded dweight: rows are not contiguous
  p.T = 150;
  p.V = 777;
  p.chunk = 64;
  p.dw_pad = 8;
  r = run_case(p);
  EXPECT_EQ(r.plan.acc_in_dw, 0);
  EXPECT_TRUE(r.plan.dw_ws_last_direct);  // every row stored by the last chunk's GEMM
}

TEST_F(LcePaths, Fp32DweightAccumulatedDirectly) {
  for (bool acc : {false, true}) {
    LceCase c;
    c.T = 130;
    c.V = 500;
    c.chunk = 32;
    c.dw_dt = kF32;
    c.dx_dt = kF32;
    c.db_dt = kF32;
    c.bias = true;
    c.accumulate = acc;
    const LceRun r = run_case(c);
    EXPECT_EQ(r.plan.dw, detail::LceDw::kDirect);
    EXPECT_EQ(r.plan.n_chunks, 5);
  }
}

// The dweight GEMMs' tiles (the fp32 accumulation: bf16 inputs, fp32 D = C, a and b MN-major)
// forced through QUACK_GEMM_TILE's name part ("f32_mm:<tile>", the other GEMMs on the rule):
// 128x256, 128x192ppa1d2 and, in A/B builds (-DQUACK_GEMM_AB_INSTANCES=ON), the C-ring variants
// of instances_ab.txt. Five chunks accumulated into the split accumulator (dweight's memory and
// the workspace) and, with accumulate, all in the workspace; N = D = 320: on 128x256 a full
// 256-column tile and a tail of 64 columns (two subtiles), on 128x192 one full tile and a tail
// of 128.
TEST_F(LcePaths, DweightTilesForced) {
  struct Unset {
    ~Unset() { unsetenv("QUACK_GEMM_TILE"); }
  } unset;
  for (DType ab : {kBF, kF16}) {
    std::vector<std::string> tiles;
    for (const detail::GemmInstance& i : detail::kGemmInstances)
      if (i.epilogue == detail::GemmEpilogue::kLinComb && i.ab == ab && i.d == kF32 && i.c == kF32 &&
          i.a == detail::GemmMajor::kMN && i.b == detail::GemmMajor::kMN)
        tiles.push_back(i.tile);
    ASSERT_FALSE(tiles.empty());
    for (const std::string& tile : tiles) {
      const std::string spec = "f32_mm:" + tile;
      setenv("QUACK_GEMM_TILE", spec.c_str(), 1);
      for (bool acc : {false, true}) {
        SCOPED_TRACE(spec + (ab == kF16 ? ", fp16" : ", bf16") + (acc ? ", accumulate" : ""));
        LceCase c;
        c.T = 300;
        c.D = 320;
        c.V = 1003;
        c.chunk = 64;
        c.bias = true;
        c.ab = c.dx_dt = c.dw_dt = c.db_dt = ab;
        c.accumulate = acc;
        c.seed = acc ? 18 : 17;
        const LceRun r = run_case(c);
        EXPECT_EQ(r.plan.dw, detail::LceDw::kAcc);
        EXPECT_EQ(r.plan.n_chunks, 5);
        EXPECT_EQ(r.plan.acc_in_dw, acc ? 0 : detail::lce_split_rows(c.V));
      }
    }
  }
}

// float16 x, weight and bias on every dweight path (one chunk, the split accumulator inside
// dweight, the workspace accumulator, accumulate, fp32 dweight, low memory) and the backward
// from lse.
TEST_F(LcePaths, Float16) {
  LceCase c;
  c.T = 257;
  c.D = 64;
  c.V = 1001;
  c.bias = true;
  c.ab = c.dx_dt = c.dw_dt = c.db_dt = kF16;
  run_case(c);  // one chunk
  c.chunk = 64;
  EXPECT_EQ(run_case(c).plan.dw, detail::LceDw::kAcc);  // split inside dweight
  c.dw_pad = 8;
  EXPECT_EQ(run_case(c).plan.acc_in_dw, 0);  // padded rows: the accumulator in the workspace
  c.dw_pad = 0;
  c.accumulate = true;  // the old dweight and dbias added (fp32 sums, one rounding)
  EXPECT_EQ(run_case(c).plan.acc_in_dw, 0);
  c.accumulate = false;
  c.dw_dt = c.db_dt = kF32;
  EXPECT_EQ(run_case(c).plan.dw, detail::LceDw::kDirect);
  c.dw_dt = c.db_dt = kF16;
  c.mode = Mode::kLowMemory;
  c.vchunk = 128;
  EXPECT_LT(run_case(c).plan.v_begin, c.V);
  c.mode = Mode::kDefault;
  c.reduction = 0;
  c.bwd = true;
  EXPECT_TRUE(run_case(c).plan.dx_acc);  // dx summed in fp32 across the slices
}

TEST_F(LcePaths, ChunkOfOneToken) {
  LceCase c;
  c.T = 9;
  c.V = 300;
  c.chunk = 1;
  c.bias = true;
  run_case(c);
}

TEST_F(LcePaths, LowMemoryVocabularySlices) {
  for (int64_t vchunk : {0, 8, 136}) {
    for (int red : {1, 2}) {
      LceCase c;
      c.T = 111;
      c.V = 1003;
      c.chunk = 40;
      c.vchunk = vchunk;
      c.mode = Mode::kLowMemory;
      c.reduction = red;
      c.bias = true;
      c.seed = static_cast<uint64_t>(vchunk * 3 + red);
      const LceRun r = run_case(c);
      EXPECT_EQ(r.plan.dw, detail::LceDw::kAcc);
      EXPECT_EQ(r.plan.dw_rows, detail::lce_low_memory_rows(1003));
      EXPECT_EQ(r.plan.acc_in_dw, r.plan.dw_rows);
      EXPECT_EQ(r.plan.v_begin, r.plan.dw_rows);
      if (vchunk > 0) {
        EXPECT_EQ(r.plan.vslice, std::min<int64_t>(vchunk, 1003 - r.plan.v_begin));
      }
    }
  }
}

TEST_F(LcePaths, LowMemoryAccumulateAndTinyVocabulary) {
  LceCase c;
  c.T = 70;
  c.V = 500;
  c.chunk = 16;
  c.mode = Mode::kLowMemory;
  c.accumulate = true;
  c.bias = true;
  LceRun r = run_case(c);
  EXPECT_EQ(r.plan.acc_in_dw, 0);
  LceCase s;  // V < 24: no row for the token-chunk pass, the slices do all of dweight
  s.T = 50;
  s.V = 15;
  s.chunk = 8;
  s.mode = Mode::kLowMemory;
  r = run_case(s);
  EXPECT_EQ(r.plan.dw_rows, 0);
  EXPECT_EQ(r.plan.v_begin, 0);
}

TEST_F(LcePaths, PaddedRowsAndPartialOutputs) {
  LceCase c;
  c.T = 40;
  c.D = 60;  // rows of 60 in rows of 64 (the GEMM's K and N tails)
  c.x_pad = 4;
  c.dw_pad = 4;
  c.V = 301;
  c.chunk = 16;
  c.bias = true;
  run_case(c);
  for (int which = 0; which < 3; ++which) {  // each gradient alone
    LceCase p;
    p.T = 45;
    p.V = 200;
    p.chunk = 16;
    p.bias = true;
    p.want_dx = which == 0;
    p.want_dw = which == 1;
    p.want_db = which == 2;
    p.seed = static_cast<uint64_t>(which + 10);
    run_case(p);
  }
  LceCase n;  // no gradient at all: loss and lse only
  n.T = 45;
  n.V = 200;
  n.chunk = 16;
  n.want_dx = n.want_dw = n.want_db = false;
  run_case(n);
}

// ------------------------------------------------------------------ options

using OptParam = std::tuple<int, int, Mode>;  // option set, reduction, mode
class LceOptions : public GpuTest, public ::testing::WithParamInterface<OptParam> {};

TEST_P(LceOptions, MatchesReference) {
  const auto [opt, red, mode] = GetParam();
  LceCase c;
  c.T = 97;
  c.V = 515;
  c.chunk = 32;
  c.vchunk = 136;
  c.mode = mode;
  c.reduction = red;
  c.bwd = red == 0;
  c.bias = opt % 2 == 1;
  c.eps = opt == 1 || opt == 4 ? 0.1 : 0.0;
  c.zs = opt == 2 || opt == 4 ? 1e-2 : 0.0;
  c.cap = opt == 3 || opt == 4 ? 3.0 : 0.0;
  c.ignore_index = opt == 2 ? 7 : -100;  // an ignore_index inside [0, V)
  c.seed = static_cast<uint64_t>(opt * 10 + red + static_cast<int>(mode) * 100);
  run_case(c);
}

INSTANTIATE_TEST_SUITE_P(All, LceOptions,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(0, 1, 2),
                                            ::testing::Values(Mode::kDefault, Mode::kLowMemory)));

// ------------------------------------------------------------------ backward from lse

class LceBwd : public GpuTest {};

TEST_F(LceBwd, PerRowAndBroadcastDloss) {
  for (int kind : {0, 1, 2}) {
    for (int64_t vchunk : {0, 64, 200}) {
      LceCase c;
      c.T = 77;
      c.V = 1001;
      c.bias = true;
      c.reduction = 0;
      c.bwd = true;
      c.dloss_kind = kind;
      c.vchunk = vchunk;
      c.seed = static_cast<uint64_t>(kind * 7 + vchunk);
      const LceRun r = run_case(c);
      EXPECT_EQ(r.plan.n_slices, vchunk == 0 ? 1 : (1001 + vchunk - 1) / vchunk);
      EXPECT_EQ(r.plan.dx_acc, r.plan.n_slices > 1);
    }
  }
}

TEST_F(LceBwd, Fp32OutputsAndAccumulate) {
  LceCase c;
  c.T = 60;
  c.V = 333;
  c.bias = true;
  c.reduction = 0;
  c.bwd = true;
  c.vchunk = 64;
  c.dx_dt = c.dw_dt = c.db_dt = kF32;
  c.accumulate = true;
  run_case(c);
}

// ------------------------------------------------------------------ handed cases and edges

class LceCases : public GpuTest {};

TEST_F(LceCases, C06NoneWithPerTokenGradOutput) {
  // B·T = 8 tokens, H = 10 (rows padded to 16), V = 15, 2 ignored; chunk 3 does not divide 8.
  for (int64_t chunk : {0, 3}) {
    LceCase c;
    c.T = 8;
    c.D = 10;
    c.x_pad = 6;
    c.dw_pad = 6;
    c.V = 15;
    c.bias = true;
    c.ignore_frac = 0.0;
    c.reduction = 0;
    c.bwd = true;
    c.chunk = chunk;
    c.vchunk = 8;
    run_case(c);
  }
  LceCase s;  // 'sum' with grad_output 3.7: the backward from lse with dloss (1)
  s.T = 8;
  s.D = 16;
  s.V = 15;
  s.bias = true;
  s.reduction = 0;
  s.bwd = true;
  s.dloss_kind = 2;
  run_case(s);
}

TEST_F(LceCases, C04AllIgnored) {
  for (int red : {0, 1, 2}) {
    LceCase c;
    c.T = 5;
    c.D = 16;
    c.V = 10;
    c.bias = true;
    c.reduction = red;
    c.all_ignored = true;
    c.chunk = 2;
    run_case(c);  // 'none' zeros, 'sum' 0, 'mean' NaN; every gradient exactly 0 (no NaN)
  }
}

TEST_F(LceCases, C10OutOfRangeTargets) {
  for (Mode mode : {Mode::kDefault, Mode::kLowMemory}) {
    LceCase c;
    c.T = 6;
    c.D = 16;
    c.V = 5;
    c.ignore_frac = 0.0;
    c.bad_targets = 2;
    c.reduction = 0;
    c.chunk = 2;
    c.mode = mode;
    run_case(c);  // rows 1 and 2 NaN (loss, dx rows); dW and db NaN; others finite and right
    LceCase i;    // ignore_index 255 with V = 3
    i.T = 6;
    i.D = 16;
    i.V = 3;
    i.ignore_index = 255;
    i.ignore_frac = 0.3;
    i.bad_targets = 1;
    i.reduction = 2;
    i.mode = mode;
    run_case(i);
  }
}

TEST_F(LceCases, C02EmptyTokensAndHidden) {
  for (int red : {0, 1, 2}) {
    LceCase c;
    c.T = 0;
    c.D = 16;
    c.V = 40;
    c.bias = true;
    c.reduction = red;
    run_case(c);  // loss empty / 0 / NaN; dweight and dbias zeros
  }
  LceCase d;  // D = 0: the logits are the bias
  d.T = 9;
  d.D = 0;
  d.V = 12;
  d.bias = true;
  d.chunk = 4;
  run_case(d);
}

TEST_F(LceCases, OneClassAndInt32Targets) {
  LceCase c;
  c.T = 20;
  c.V = 1;
  c.chunk = 8;
  run_case(c);
  LceCase t;
  t.T = 50;
  t.V = 999;
  t.target_dt = DType::kInt32;
  t.chunk = 16;
  t.bias = true;
  run_case(t);
}

TEST_F(LceCases, ScaleGrad) {
  Rng rng(5);
  const int64_t T = 33, D = 24, V = 70;
  const auto vx = random_values(rng, T * D, kBF), vw = random_values(rng, V * D, kF32),
             vb = random_values(rng, V, kBF);
  for (double g : {1.0, 2.5}) {
    DeviceTensor dx = upload(vx, kBF, T, D), dw = upload(vw, kF32, V, D);
    DeviceTensor db = upload_vector(vb, kBF, V);
    const auto before = download_bytes(dx);
    DeviceTensor go = upload_vector({g}, kF32, 1);
    LinearCrossEntropyScaleGradArgs a;
    a.dx = dx.ref;
    a.dweight = dw.ref;
    a.dbias = db.ref;
    a.grad_output = go.ref;
    linear_cross_entropy_scale_grad(a, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (g == 1.0) {
      EXPECT_EQ(download_bytes(dx), before);
    }
    std::vector<double> ex = vx, ew = vw, eb = vb;
    for (auto& v : ex) v = round_to(kBF, v * g);
    for (auto& v : ew) v *= g;
    for (auto& v : eb) v = round_to(kBF, v * g);
    EXPECT_TRUE(close("dx", download(dx), ex, 0.0));
    EXPECT_TRUE(close("dweight", download(dw), ew, 1e-7));
    EXPECT_TRUE(close("dbias", download(db), eb, 0.0));
  }
}

TEST_F(LceCases, BadWorkspace) {
  LceCase c;
  const Data d = make_data(c);
  DeviceTensor x = upload(d.x, kBF, c.T, c.D), w = upload(d.w, kBF, c.V, c.D);
  DeviceTensor t = alloc_tensor(DType::kInt64, 1, c.T, {}, true);
  DeviceTensor loss = alloc_tensor(kF32, 1, 1, {}, true);
  LinearCrossEntropyFwdArgs a;
  a.x = x.ref;
  a.weight = w.ref;
  a.target = t.ref;
  a.loss = loss.ref;
  EXPECT_THROW(linear_cross_entropy_fwd(a, nullptr), InvalidArgument);  // no workspace
}

// ------------------------------------------------------------------ C03: T·V > 2^31

// One C03 problem (D = 64, bf16): the forward with lse, dx and dweight in both modes, for
// reduction 'none' and 'sum' (the gradients are those of Σ_i loss_i either way). Checked: lse,
// dx and — 'none' — the loss of sampled rows (the last one, whose target holds a large logit,
// included) against the row's own float64 reference; every row's loss ('none') and the total
// ('sum') against lse_i − z_{i,t_i} from the device's lse (checked on the samples) and the host's
// bf16-rounded target logit: the target gather at i·V + t_i > 2^31 for the late rows; sampled
// dweight rows (the last one included).
void run_large(int64_t T, int64_t V) {
  const int64_t D = 64;
  ASSERT_GT(T * V, int64_t{1} << 31);
  for (Mode mode : {Mode::kDefault, Mode::kLowMemory})
    for (Reduction red : {Reduction::kNone, Reduction::kSum}) {
      SCOPED_TRACE("T=" + std::to_string(T) + " V=" + std::to_string(V) + " mode " + std::to_string(int(mode)) +
                   (red == Reduction::kNone ? " none" : " sum"));
      Rng rng(77);
      std::vector<double> vx = random_uniform(rng, T * D, kBF, -1.0, 1.0);
      const std::vector<double> vw = random_uniform(rng, V * D, kBF, -0.25, 0.25);
      std::vector<int64_t> tg(static_cast<size_t>(T));
      for (auto& e : tg) e = static_cast<int64_t>(rng.uniform() * static_cast<double>(V)) % V;
      tg[T - 1] = V - 1;  // the last row: a large logit at its target
      for (int64_t k = 0; k < D; ++k) vx[(T - 1) * D + k] = vw[(V - 1) * D + k] > 0 ? 1.0 : -1.0;
      DeviceTensor x = upload(vx, kBF, T, D), w = upload(vw, kBF, V, D);
      DeviceTensor t = alloc_tensor(DType::kInt64, 1, T, {}, true);
      ASSERT_EQ(cudaMemcpy(t.buf.get(), tg.data(), T * 8, cudaMemcpyHostToDevice), cudaSuccess);
      const bool none = red == Reduction::kNone;
      DeviceTensor loss = alloc_tensor(kF32, 1, none ? T : 1, {}, true),
                   lse = alloc_tensor(kF32, 1, T, {}, true);
      DeviceTensor dx = alloc_tensor(kBF, T, D), dw = alloc_tensor(kBF, V, D);
      LinearCrossEntropyFwdArgs a;
      a.x = x.ref;
      a.weight = w.ref;
      a.target = t.ref;
      a.loss = loss.ref;
      a.lse = lse.ref;
      a.dx = dx.ref;
      a.dweight = dw.ref;
      a.reduction = red;
      a.mode = mode;
      const size_t bytes = linear_cross_entropy_fwd_workspace_size(a);
      DeviceBuffer ws(bytes);
      a.workspace = ws.get();
      a.workspace_bytes = bytes;
      linear_cross_entropy_fwd(a, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<double> glse = download(lse), gdx = download(dx), gdw = download(dw), gloss = download(loss);
      // Sampled rows: lse, dx and ('none') the loss from the row's own float64 reference.
      std::vector<double> z(static_cast<size_t>(V));
      double lse_err = 0.0, lse_scale = 0.0, dx_err = 0.0, dx_scale = 0.0, loss_err = 0.0, loss_scale = 0.0;
      int64_t loss_nonfinite = 0;
      for (int64_t i : {int64_t{0}, int64_t{1}, T / 2, T - 2, T - 1}) {
        double m = -1e300;
        for (int64_t v = 0; v < V; ++v) {
          double s = 0.0;
          for (int64_t k = 0; k < D; ++k) s += vx[i * D + k] * vw[v * D + k];
          z[v] = round_to(kBF, s);
          m = std::fmax(m, z[v]);
        }
        double se = 0.0;
        for (int64_t v = 0; v < V; ++v) se += std::exp(z[v] - m);
        const double l = m + std::log(se);
        lse_err = std::fmax(lse_err, std::fabs(glse[i] - l));
        lse_scale = std::fmax(lse_scale, std::fabs(l));
        if (none) {
          const double ref_loss = l - z[tg[i]];
          if (std::isfinite(gloss[i]))
            loss_err = std::fmax(loss_err, std::fabs(gloss[i] - ref_loss));
          else
            ++loss_nonfinite;
          loss_scale = std::fmax(loss_scale, std::fabs(ref_loss));
          if (i == T - 1) {
            EXPECT_NEAR(gloss[i], ref_loss, 1e-3 * std::fabs(l)) << "the last row's loss";
          }
        }
        for (int64_t k = 0; k < D; ++k) {
          double s = 0.0;
          for (int64_t v = 0; v < V; ++v)
            s += (std::exp(z[v] - l) - (v == tg[i] ? 1.0 : 0.0)) * vw[v * D + k];
          dx_err = std::fmax(dx_err, std::fabs(gdx[i * D + k] - s));
          dx_scale = std::fmax(dx_scale, std::fabs(s));
        }
      }
      EXPECT_LE(lse_err, 1e-3 * lse_scale) << "lse";
      EXPECT_LE(dx_err, 2e-2 * dx_scale + 1e-3) << "dx";
      if (none) {
        EXPECT_EQ(loss_nonfinite, 0) << "non-finite loss in the sampled rows";
        EXPECT_LE(loss_err, 1e-3 * loss_scale) << "loss of the sampled rows";
      }
      // Every row's loss against the device's lse minus the host's target logit (bf16-rounded as
      // the kernel's; where the fp32 and float64 sums round to neighbouring bf16 values the loss
      // moves by one bf16 ulp of z_t, ≤ 2^-7·|z_t|: allowed per row, and 0.5 for the total).
      double total = 0.0, total_abs = 0.0;
      int64_t bad_rows = 0, first_bad = -1;
      for (int64_t i = 0; i < T; ++i) {
        double s = 0.0;
        for (int64_t k = 0; k < D; ++k) s += vx[i * D + k] * vw[tg[i] * D + k];
        const double zt = round_to(kBF, s), li = glse[i] - zt;
        total += li;
        total_abs += std::fabs(li);
        if (none && !(std::fabs(gloss[i] - li) <= 1e-4 * std::fabs(glse[i]) + std::ldexp(std::fabs(zt), -7) + 1e-6)) {
          if (first_bad < 0) first_bad = i;
          ++bad_rows;
        }
      }
      if (none) {
        EXPECT_EQ(bad_rows, 0) << "rows whose loss is not lse − z_target, the first " << first_bad
                               << (first_bad >= 0 ? ": " + std::to_string(gloss[first_bad]) : std::string());
      } else {
        EXPECT_NEAR(gloss[0], total, 1e-5 * total_abs + 0.5) << "the 'sum' loss";
      }
      // Sampled dweight rows (the last one included) from the device's lse (checked above on
      // samples; a full float64 pass over T·V is too slow for the host).
      std::vector<double> gcol(static_cast<size_t>(T));
      for (int64_t v : {int64_t{0}, V / 3, V / 2, V - 1}) {
        for (int64_t i = 0; i < T; ++i) {
          double zz = 0.0;
          for (int64_t k = 0; k < D; ++k) zz += vx[i * D + k] * vw[v * D + k];
          gcol[i] = std::exp(round_to(kBF, zz) - glse[i]) - (tg[i] == v ? 1.0 : 0.0);
        }
        double err = 0.0, scale = 0.0;
        for (int64_t k = 0; k < D; ++k) {
          double s = 0.0;
          for (int64_t i = 0; i < T; ++i) s += gcol[i] * vx[i * D + k];
          err = std::fmax(err, std::fabs(gdw[v * D + k] - s));
          scale = std::fmax(scale, std::fabs(s));
        }
        EXPECT_LE(err, 2e-2 * scale + 1e-2) << "dweight row " << v;
      }
      for (double e : gdw) ASSERT_TRUE(std::isfinite(e));
    }
}

class LceLarge : public GpuTest {};

// handed.md C03's first shape: 16744 × 128256 = 2,147,518,464 logits.
TEST_F(LceLarge, TokensTimesVocabularyAbove2To31) { run_large(16744, 128256); }

// C03's second shape: 8193 × 262144 = 2,147,745,792 logits (a 256k vocabulary; the last row,
// 8192, starts at element 8192·262144 = 2^31, one past INT32_MAX).
// Device memory (D = 64, bf16): x 1 MB, weight and dweight 33.5 MB each, the workspace (logits
// chunks of ≤ 1 GiB, the fp32 dweight accumulator's half) 906,035,968 bytes by
// linear_cross_entropy_fwd_workspace_size (kLowMemory 536,970,240): under 1 GB in all, far below
// an H200's 141 GB (or an H100's 80 GB); the logits are never materialised. Host: ~0.2 GB
// (the float64 copies of the weight and of x).
TEST_F(LceLarge, TokensTimesVocabularyAbove2To31Vocab256k) { run_large(8193, 262144); }

}  // namespace
}  // namespace quack::test
