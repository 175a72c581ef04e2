// Tier 2: gemm_act and gemm_dact on the device against a float64 CPU reference. Skips without a GPU.
//
// Every activation, the tiles of bf16 (QUACK_GEMM_TILE_N = 256: cooperative 128x256, 128:
// pingpong 128x128, 192: pingpong 128x192 where compiled: gpu/gemm_tiles.h; an A/B build's candidates by name), the other compiled dtypes (fp16; fp32 outputs of bf16 inputs), tails (M, N not multiples of the tile; N·2 bytes not a multiple of 16: the
// clipped stores), batches, C with beta, preact / postact stored or not, the dynamic scheduler,
// K = 0, tuned, operands TMA cannot address (padded copies, plain loads and stores), column-major
// outputs (gemm_act with C and a bias; gemm_dact with a, b and outputs column-major), C09 (NaN /
// Inf in C: never read at beta = 0, propagated at beta ≠ 0). Inputs are random (never zero) and
// exact in their dtype; every output (and its row padding) is poisoned with NaN before the call: an unwritten element fails, a write outside
// an output is caught, an output that must not be written stays NaN.
// Reference (float64): acc = Σ_k a·b; gemm_act: preact = alpha·acc + beta·c + bias, postact = act(preact)
// (from the unrounded preact, as the kernel); gemm_dact: dpreact = acc·act'(preact), postact =
// act(preact) (from the bf16 preact the kernel reads). Tolerance (reference/tolerance.h): the
// output's dtype rel (bf16 8e-3), plus 8e-3 for the activations computed through tanh.approx.f32
// (relative error 2^-11, amplified in the derivatives), times scale = max(max|ref|, floor), floor
// = the magnitude of the summed terms (Σ_k|a·b| / sqrt(K), times max|act'| for dpreact).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/gemm_mat.h"
#include "gpu/gemm_tiles.h"
#include "gpu/gpu_util.h"
#include "quack/errors.h"
#include "quack/gemm_act.h"
#include "reference/random.h"

namespace quack::test {
namespace {

constexpr Activation kActs[] = {Activation::kIdentity, Activation::kRelu, Activation::kReluSq,
                                Activation::kGeluTanhApprox, Activation::kSilu, Activation::kTanh,
                                Activation::kGeluErf, Activation::kQuickGelu};

// act(x) and act'(x) in float64 (the formulas of quack/gemm_act.h).
double act_ref(Activation a, double x) {
  switch (a) {
    case Activation::kRelu: return x > 0 ? x : 0.0;
    case Activation::kReluSq: return x > 0 ? x * x : 0.0;
    case Activation::kGeluTanhApprox: {
      const double c = std::sqrt(2.0 / M_PI);
      return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
    }
    case Activation::kSilu: return x / (1.0 + std::exp(-x));
    case Activation::kTanh: return std::tanh(x);
    case Activation::kGeluErf: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));  // no cancellation at x << 0
    case Activation::kQuickGelu: return x / (1.0 + std::exp(-1.702 * x));
    default: return x;
  }
}

double dact_ref(Activation a, double x) {
  switch (a) {
    case Activation::kRelu: return x > 0 ? 1.0 : 0.0;
    case Activation::kReluSq: return x > 0 ? 2.0 * x : 0.0;
    case Activation::kGeluTanhApprox: {
      const double c = std::sqrt(2.0 / M_PI), t = std::tanh(c * (x + 0.044715 * x * x * x));
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
    }
    case Activation::kSilu: {
      const double s = 1.0 / (1.0 + std::exp(-x));
      return s * (1.0 + x * (1.0 - s));
    }
    case Activation::kTanh: {
      const double t = std::tanh(x);
      return 1.0 - t * t;
    }
    case Activation::kGeluErf:
      return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
    case Activation::kQuickGelu: {
      const double s = 1.0 / (1.0 + std::exp(-1.702 * x));
      return s + 1.702 * x * s * (1.0 - s);
    }
    default: return 1.0;
  }
}

// Extra relative tolerance of the activations the kernel computes through tanh.approx.f32.
double approx_rel(Activation a) {
  return a == Activation::kGeluTanhApprox || a == Activation::kSilu || a == Activation::kTanh ? 8e-3 : 0.0;
}

struct ActCase {
  int64_t L = 1, M = 1, N = 1, K = 1;
  Activation act = Activation::kRelu;
  bool dact = false;            // gemm_dact (a and b row-major), else gemm_act (a row-major, b column-major)
  bool store_preact = true;     // gemm_act: preact given
  bool store_postact = true;    // gemm_dact: postact given
  bool with_c = false;          // gemm_act: C with beta
  float alpha = 1.f, beta = 0.f;
  double preact_std = 2.f;      // gemm_dact: spread of the preact input
  bool dynamic = false;         // tile_counter
  bool tuned = false;
  bool tight = false;           // leading strides = the contiguous extents (not 16-byte multiples)
  int64_t offset = 0;           // every tensor's first element this many elements into its buffer
  bool workspace = false;       // the padded copies in a caller's workspace (else gemm_act's own)
  DType ab = DType::kBFloat16;  // a and b
  DType out = DType::kBFloat16; // C, preact, postact (gemm_dact: preact, dpreact, postact)
  // Column-major: gemm_act's C, preact and postact; gemm_dact's a, b, preact, dpreact and
  // postact (its other accepted layout). The kernel then computes the transpose (Dᵀ = Bᵀ·Aᵀ).
  bool col = false;
  int bias = 0;                       // gemm_act: kBiasRow (N,) / (L, N) and/or kBiasCol (M,) / (L, M)
  DType bias_t = DType::kFloat32;     // both bias vectors' dtype
  // C09 (shared/cases/handed.md). c_unread: gemm_act gets C with beta = 0 but C is never
  // uploaded (all NaN, its poison): it must not be read. c_special: C holds a NaN at one element
  // and +Inf at another (beta > 0 required): preact there is NaN / +Inf, postact act(NaN) = NaN
  // (quack/gemm_act.h: NaN propagates through every activation) and act(+Inf) of the float64
  // formula; every other element as the reference.
  bool c_unread = false;
  bool c_special = false;
  uint64_t seed = 1;
};

constexpr int kBiasRow = 1, kBiasCol = 2;

std::string describe(const ActCase& c) {
  return std::string(c.dact ? "gemm_dact " : "gemm_act ") + activation_name(c.act) + " L=" + std::to_string(c.L) +
         " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
         (c.dact ? (c.store_postact ? " +postact" : " -postact") : (c.store_preact ? " +preact" : " -preact")) +
         (c.with_c ? " c" : "") + (c.dynamic ? " dynamic" : "") + (c.tuned ? " tuned" : "") +
         (c.tight ? " tight" : "") + (c.offset ? " offset=" + std::to_string(c.offset) : "") +
         (c.workspace ? " workspace" : "") + (c.col ? " col-major" : "") +
         (c.bias ? " bias=" + std::to_string(c.bias) + ":" + dtype_name(c.bias_t) : "") +
         (c.c_unread ? " c-unread(NaN)" : "") + (c.c_special ? " c-NaN/Inf" : "") + " " + dtype_name(c.ab) +
         "->" + dtype_name(c.out);
}

// The rows checked against the reference: all for small problems, else the tile edges and a sample.
std::set<int64_t> rows_to_check(int64_t L, int64_t M, int64_t N, int64_t K) {
  std::set<int64_t> rows;
  const bool full = double(L) * M * N * std::max<int64_t>(K, 1) <= double(1 << 26);
  for (int64_t r = 0; r < L * M; ++r) {
    const int64_t i = r % M;
    const bool edge = i < 2 || i >= M - 2 || i % 64 == 0 || i % 64 == 63 || i % 128 == 127;
    if (full || edge || r % std::max<int64_t>(1, (L * M) / 48) == 0) rows.insert(r);
  }
  return rows;
}

bool all_nan(const std::vector<double>& v) {
  for (double x : v)
    if (!std::isnan(x)) return false;
  return true;
}

// Elements that differ (NaN counts as differing from everything).
int64_t count_differ(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) return -1;
  int64_t n = 0;
  for (size_t i = 0; i < x.size(); ++i) n += x[i] == y[i] ? 0 : 1;
  return n;
}

// A bias vector of n elements per batch, random in dtype t: (n,) for L = 1, else (L, n).
struct HostBias {
  DeviceTensor mem;
  TensorRef ref;
  std::vector<double> v;  // (L, n)
};
HostBias make_bias(Rng& rng, DType t, int64_t L, int64_t n) {
  HostBias b;
  b.v = random_values(rng, L * n, t);
  b.mem = upload(b.v, t, L, n);
  b.ref = L == 1 ? TensorRef::vector(b.mem.ref.data, t, n) : TensorRef::matrix(b.mem.ref.data, t, L, n);
  return b;
}

// Runs one case and checks it against the float64 reference; out_d / out_p (optional) receive
// the logical values of preact (dpreact) and postact as downloaded.
void run_case(const ActCase& c, std::vector<double>* out_d = nullptr, std::vector<double>* out_p = nullptr) {
  SCOPED_TRACE(describe(c));
  ASSERT_TRUE(!c.c_unread || (!c.dact && c.with_c && c.beta == 0.f)) << "c_unread: gemm_act with C and beta = 0";
  ASSERT_TRUE(!c.c_special || (!c.dact && c.with_c && c.beta > 0.f)) << "c_special: gemm_act with C and beta > 0";
  ASSERT_TRUE(c.bias == 0 || !c.dact) << "gemm_dact has no bias";
  Rng rng(c.seed);
  const int64_t L = c.L, M = c.M, N = c.N, K = c.K;
  const DType ab = c.ab, bf = c.out;  // bf: the outputs' (and C's) dtype
  const std::vector<double> a = random_values(rng, L * M * K, ab);  // (L, M, K)
  const std::vector<double> b = random_values(rng, L * K * N, ab);  // (L, K, N)
  // C or preact. Not drawn where nothing reads it and nothing is drawn after it (gemm_act without
  // C or a bias): an (L, M, N) draw saved; the other cases' numbers are unaffected.
  const bool draw_c = c.dact || c.with_c || c.bias != 0;
  std::vector<double> cv = draw_c ? random_values(rng, L * M * N, bf, 0.0, c.dact ? c.preact_std : 1.0)
                                  : std::vector<double>(size_t(L * M * N), 0.0);
  // c_special: NaN in batch L − 1's middle row, +Inf at the last element of batch 0 (the tail
  // tile of both M and N); logical indices r·N + j, r = l·M + i.
  std::set<int64_t> special;
  if (c.c_special && M > 0 && N > 0) {
    const int64_t nan_at = ((L - 1) * M + M / 2) * N + N / 3, inf_at = M * N - 1;
    cv[size_t(nan_at)] = std::numeric_limits<double>::quiet_NaN();
    cv[size_t(inf_at)] = std::numeric_limits<double>::infinity();
    special = {nan_at, inf_at};
  }
  std::vector<double> row_v(size_t(L * N), 0.0), col_v(size_t(L * M), 0.0);
  HostBias brow, bcol;
  if (c.bias & kBiasRow) {
    brow = make_bias(rng, c.bias_t, L, N);
    row_v = brow.v;
  }
  if (c.bias & kBiasCol) {
    bcol = make_bias(rng, c.bias_t, L, M);
    col_v = bcol.v;
  }

  // gemm_act: a row-major, b column-major; gemm_dact: a, b row-major, or both column-major.
  const char ao = c.dact && c.col ? 'c' : 'r', bo = c.dact && !c.col ? 'r' : 'c', oo = c.col ? 'c' : 'r';
  Mat A = make_mat(ab, L, M, K, ao, 0, c.tight, c.offset);
  upload_into(A.mem, to_memory(A, a));
  Mat B = make_mat(ab, L, K, N, bo, 0, c.tight, c.offset);
  upload_into(B.mem, to_memory(B, b));
  Mat C = make_mat(bf, L, M, N, oo, 0, c.tight, c.offset);  // gemm_act's C or gemm_dact's preact (NaN unless read)
  Mat D = make_mat(bf, L, M, N, oo, 0, c.tight, c.offset);  // preact / dpreact (NaN)
  Mat P = make_mat(bf, L, M, N, oo, 0, c.tight, c.offset);  // postact (NaN)

  static DeviceBuffer* counter = nullptr;  // one for every dynamic case; each launch leaves it at 0
  if (c.dynamic && counter == nullptr) {
    counter = new DeviceBuffer(sizeof(uint32_t));
    QUACK_CUDA_OK(cudaMemset(counter->get(), 0, sizeof(uint32_t)));
  }
  uint32_t* tile_counter = c.dynamic ? static_cast<uint32_t*>(counter->get()) : nullptr;
  bool d_written = true, p_written = true;
  if (c.dact) {
    upload_into(C.mem, to_memory(C, cv));
    GemmDActArgs g;
    g.a = A.arg;
    g.b = B.arg;
    g.preact = C.arg;
    g.dpreact = D.arg;
    if (c.store_postact) g.postact = P.arg;
    p_written = c.store_postact;
    g.activation = c.act;
    g.tuned = c.tuned;
    g.tile_counter = tile_counter;
    DeviceBuffer ws(c.workspace ? gemm_workspace_size(g) : 0);
    if (c.workspace) {
      EXPECT_GT(gemm_workspace_size(g), 0u);
      g.workspace = ws.get();
      g.workspace_bytes = gemm_workspace_size(g);
    }
    ASSERT_NO_THROW(gemm_dact(g, nullptr));
    QUACK_CUDA_OK(cudaDeviceSynchronize());  // before ws goes
  } else {
    if (c.with_c && !c.c_unread) upload_into(C.mem, to_memory(C, cv));
    GemmActArgs g;
    g.a = A.arg;
    g.b = B.arg;
    if (c.with_c) g.c = C.arg;
    if (c.store_preact) g.preact = D.arg;
    d_written = c.store_preact;
    g.postact = P.arg;
    if (c.bias & kBiasRow) g.bias.row = brow.ref;
    if (c.bias & kBiasCol) g.bias.col = bcol.ref;
    g.activation = c.act;
    g.alpha = c.alpha;
    g.beta = c.with_c ? c.beta : 0.f;
    g.tuned = c.tuned;
    g.tile_counter = tile_counter;
    DeviceBuffer ws(c.workspace ? gemm_workspace_size(g) : 0);
    if (c.workspace) {
      EXPECT_GT(gemm_workspace_size(g), 0u);
      g.workspace = ws.get();
      g.workspace_bytes = gemm_workspace_size(g);
    }
    ASSERT_NO_THROW(gemm_act(g, nullptr));
    QUACK_CUDA_OK(cudaDeviceSynchronize());  // before ws goes
  }
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  if (c.dynamic) {
    uint32_t left = 1;
    QUACK_CUDA_OK(cudaMemcpy(&left, counter->get(), sizeof(left), cudaMemcpyDeviceToHost));
    EXPECT_EQ(left, 0u) << "the tile counter is not back at 0 after the launch";
  }
  const std::vector<double> got_d = from_memory(D, download(D.mem)), got_p = from_memory(P, download(P.mem));
  if (out_d) *out_d = got_d;
  if (out_p) *out_p = got_p;
  EXPECT_TRUE(gaps_untouched(c.dact ? "dpreact" : "preact", D.mem));
  EXPECT_TRUE(gaps_untouched("postact", P.mem));
  if (c.dact) {
    EXPECT_TRUE(gaps_untouched("preact (input)", C.mem));
  }
  if (M == 0 || N == 0 || L == 0) {
    EXPECT_TRUE(all_nan(got_d) && all_nan(got_p)) << "an empty problem wrote an output";
    return;
  }
  // Outputs not asked for stay NaN; the others are complete (non-finite only where C09's
  // special elements put it: checked against the reference below).
  auto nonfinite_elsewhere = [&](const std::vector<double>& v) {
    int64_t n = 0;
    for (size_t i = 0; i < v.size(); ++i) n += std::isfinite(v[i]) || special.count(int64_t(i)) ? 0 : 1;
    return n;
  };
  if (d_written) {
    EXPECT_EQ(nonfinite_elsewhere(got_d), 0) << "preact/dpreact has non-finite elements";
  } else {
    EXPECT_TRUE(all_nan(got_d)) << "preact was written without being asked for";
  }
  if (p_written) {
    EXPECT_EQ(nonfinite_elsewhere(got_p), 0) << "postact has non-finite elements";
  } else {
    EXPECT_TRUE(all_nan(got_p)) << "postact was written without being asked for";
  }

  std::vector<double> ref_d, ref_p, sub_d, sub_p;
  double floor_acc = 0.0, max_slope = 0.0;
  std::set<int64_t> rows = rows_to_check(L, M, N, K);
  for (int64_t s : special) rows.insert(s / N);  // the special elements are always compared
  std::vector<double> acc, acc_abs;
  for (int64_t r : rows) {
    const int64_t l = r / M;
    ref_row_sums(a, b, r, l, N, K, acc, acc_abs);  // Σ_k a·b, Σ_k |a·b| of row r
    for (int64_t j = 0; j < N; ++j) {
      const bool sp = special.count(r * N + j) > 0;  // NaN / +Inf in C here: kept out of the scales
      const double s = acc[size_t(j)], s_abs = acc_abs[size_t(j)];
      const double cij = cv[size_t(r * N + j)];
      if (c.dact) {
        const double slope = std::fabs(dact_ref(c.act, cij));
        ref_d.push_back(s * dact_ref(c.act, cij));
        ref_p.push_back(act_ref(c.act, cij));
        floor_acc = std::max(floor_acc, s_abs * slope);
        max_slope = std::max(max_slope, slope);
      } else {
        const double pre = double(c.alpha) * s + (c.with_c ? double(c.beta) * cij : 0.0) + row_v[size_t(l * N + j)] +
                           col_v[size_t(r)];
        ref_d.push_back(pre);
        // NaN propagates through every activation (act_ref's relu would give 0 for it).
        ref_p.push_back(std::isnan(pre) ? pre : act_ref(c.act, pre));
        floor_acc = std::max(floor_acc, std::fabs(double(c.alpha)) * s_abs);
        if (!sp) max_slope = std::max(max_slope, std::fabs(dact_ref(c.act, pre)));
      }
      sub_d.push_back(got_d[size_t(r * N + j)]);
      sub_p.push_back(got_p[size_t(r * N + j)]);
    }
  }
  floor_acc = K > 0 ? floor_acc / std::sqrt(double(K)) : 0.0;
  const double extra = approx_rel(c.act);
  if (c.dact) {
    EXPECT_TRUE(close("dpreact", sub_d, ref_d, reduction_tolerance(bf, K) + extra, N, floor_acc));
    if (p_written) {
      EXPECT_TRUE(close("postact", sub_p, ref_p, tolerance(bf) + extra, N));
    }
  } else {
    if (d_written) {
      EXPECT_TRUE(close("preact", sub_d, ref_d, reduction_tolerance(bf, K), N, floor_acc));
    }
    // postact: the preact's fp32 error (relative to floor_acc) passes through act' (≤ max_slope).
    EXPECT_TRUE(close("postact", sub_p, ref_p, reduction_tolerance(bf, K) + extra, N, floor_acc * max_slope));
  }
}

ActCase mk(int64_t M, int64_t N, int64_t K, Activation act, bool dact) {
  ActCase c;
  c.M = M;
  c.N = N;
  c.K = K;
  c.act = act;
  c.dact = dact;
  c.seed = uint64_t(M * 1000003 + N * 1009 + K * 7 + int(act) * 131 + (dact ? 17 : 0));
  return c;
}

template <typename F>
ActCase with(ActCase c, F f) {
  f(c);
  return c;
}

// Shapes: tails along M and N (N = 255: rows of 510 bytes, the clipped-store path; N = 250: 500
// bytes), several tiles per CTA (1000 x 3000), one narrow column of tiles, a long K.
struct Shape3 {
  int64_t M, N, K;
};
constexpr Shape3 kShapes[] = {{127, 255, 63}, {129, 250, 136}, {1000, 3000, 520}, {64, 8, 1024}, {2048, 2048, 256}};

class GemmActTest : public GpuTest, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (!fused_tile_compiled(GetParam(), {detail::GemmEpilogue::kAct, detail::GemmEpilogue::kDAct}))
      GTEST_SKIP() << fused_tile_name(GetParam()) << " not compiled for these epilogues (instances_ab.txt: "
                   << "-DQUACK_GEMM_AB_INSTANCES=ON)";
    setenv("QUACK_GEMM_TILE_N", GetParam(), 1);
  }
  void TearDown() override {
    unsetenv("QUACK_GEMM_TILE_N");
    GpuTest::TearDown();
  }
};

// Every activation on every shape, preact stored and not, with and without C.
TEST_P(GemmActTest, ActEveryActivation) {
  for (Activation act : kActs)
    for (const Shape3& s : kShapes) {
      run_case(mk(s.M, s.N, s.K, act, false));
      run_case(with(mk(s.M, s.N, s.K, act, false), [](ActCase& c) {
        c.store_preact = false;
        c.with_c = true;
        c.alpha = 0.5f;
        c.beta = -1.25f;
        c.seed += 5;
      }));
    }
}

TEST_P(GemmActTest, DActEveryActivation) {
  for (Activation act : kActs)
    for (const Shape3& s : kShapes) {
      run_case(mk(s.M, s.N, s.K, act, true));
      run_case(with(mk(s.M, s.N, s.K, act, true), [](ActCase& c) {
        c.store_postact = false;
        c.seed += 5;
      }));
    }
}

// Batches, alpha with C and preact stored, the dynamic scheduler, tuned (cache in a fresh folder).
TEST_P(GemmActTest, BatchesDynamicTuned) {
  for (bool dact : {false, true}) {
    run_case(with(mk(200, 300, 100, Activation::kGeluTanhApprox, dact), [](ActCase& c) { c.L = 3; }));
    run_case(with(mk(300, 520, 200, Activation::kReluSq, dact), [](ActCase& c) {
      c.with_c = !c.dact;
      c.alpha = 2.f;
      c.beta = 0.5f;
    }));
    run_case(with(mk(1000, 3000, 520, Activation::kSilu, dact), [](ActCase& c) { c.dynamic = true; }));
    run_case(with(mk(4096, 4096, 200, Activation::kRelu, dact), [](ActCase& c) { c.dynamic = true; }));
  }
  const std::string dir = "/tmp/quack_act_tune_test_" + std::to_string(::getpid());
  setenv("QUACK_CACHE_DIR", dir.c_str(), 1);
  for (bool dact : {false, true})
    for (int rep = 0; rep < 2; ++rep)  // timed, then cached
      run_case(with(mk(256, 1024, 512, Activation::kTanh, dact), [](ActCase& c) { c.tuned = true; }));
  unsetenv("QUACK_CACHE_DIR");
}

// Any alignment, as gemm: a and b that TMA cannot address through padded copies (gemm_act's own
// workspace or the caller's), c, preact, postact (and gemm_dact's preact input) through the
// epilogue's plain loads and stores. K = 63 and 1001 (rows of 126 and 2002 bytes: a and b
// copied), N = 255 and 1001 (outputs of 510 and 2002-byte rows), every base one element in,
// batches (batch strides unaligned too), C with beta, preact / postact absent, K = 0.
TEST_P(GemmActTest, UnalignedOperands) {
  auto tight = [](ActCase c, int64_t offset = 0) {
    c.tight = true;
    c.offset = offset;
    return c;
  };
  for (bool dact : {false, true}) {
    const Activation act = dact ? Activation::kGeluTanhApprox : Activation::kSilu;
    run_case(tight(mk(127, 255, 63, act, dact)));
    run_case(tight(mk(300, 1001, 256, act, dact)));
    run_case(tight(mk(257, 640, 1001, act, dact)));
    run_case(tight(mk(129, 1001, 1001, act, dact), 1));
    run_case(tight(with(mk(200, 1001, 100, act, dact), [](ActCase& c) { c.L = 3; })));
    run_case(tight(with(mk(300, 1001, 300, Activation::kReluSq, dact), [](ActCase& c) {
      c.with_c = !c.dact;
      c.alpha = 2.f;
      c.beta = -0.5f;
      c.store_preact = false;
      c.store_postact = false;
    }), 1));
    run_case(tight(with(mk(300, 1001, 137, act, dact), [](ActCase& c) { c.workspace = true; })));
    run_case(tight(mk(100, 1001, 0, act, dact)));  // K = 0 fill
  }
}

// Column-major outputs, which can_implement accepts and the kernel computes as the transpose
// (Dᵀ = Bᵀ·Aᵀ: a and b trade places, the user's row bias becomes the kernel's column bias and
// vice versa): gemm_act (a row-major, b column-major) with C and a row and a column bias (fp32,
// and bf16), preact stored or not; gemm_dact with a, b and every output column-major, postact
// stored or not. Tails along M and N (both swap roles), batches, columns TMA cannot address
// (M = 129, tight: 258-byte columns, plain loads and stores; a and b copied), K = 0 (fill).
TEST_P(GemmActTest, ColumnMajorOutputs) {
  auto col = [](ActCase c) {
    c.col = true;
    return c;
  };
  for (const Shape3& s : {Shape3{127, 255, 63}, Shape3{1000, 3000, 520}}) {
    run_case(col(mk(s.M, s.N, s.K, Activation::kGeluTanhApprox, false)));
    run_case(col(with(mk(s.M, s.N, s.K, Activation::kReluSq, false), [](ActCase& c) {
      c.with_c = true;
      c.alpha = 0.5f;
      c.beta = -1.25f;
      c.bias = kBiasRow | kBiasCol;
      c.seed += 5;
    })));
    run_case(col(with(mk(s.M, s.N, s.K, Activation::kSilu, false), [](ActCase& c) {
      c.store_preact = false;
      c.with_c = true;
      c.beta = 0.5f;
      c.bias = kBiasRow | kBiasCol;
      c.bias_t = DType::kBFloat16;
      c.seed += 7;
    })));
    run_case(col(mk(s.M, s.N, s.K, Activation::kGeluTanhApprox, true)));
    run_case(col(with(mk(s.M, s.N, s.K, Activation::kReluSq, true), [](ActCase& c) {
      c.store_postact = false;
      c.seed += 5;
    })));
  }
  for (bool dact : {false, true}) {
    run_case(col(with(mk(200, 300, 100, Activation::kTanh, dact), [](ActCase& c) {
      c.L = 3;
      c.with_c = !c.dact;
      c.beta = 2.f;
      c.bias = c.dact ? 0 : kBiasRow | kBiasCol;
    })));
    run_case(col(with(mk(129, 1001, 1001, Activation::kSilu, dact), [](ActCase& c) { c.tight = true; })));
    run_case(col(with(mk(100, 300, 0, Activation::kGeluTanhApprox, dact), [](ActCase& c) {  // K = 0 fill
      c.with_c = !c.dact;
      c.beta = 2.f;
      c.bias = c.dact ? 0 : kBiasRow | kBiasCol;
      c.bias_t = DType::kBFloat16;
    })));
  }
}

INSTANTIATE_TEST_SUITE_P(Tiles, GemmActTest, ::testing::ValuesIn(kFusedTiles),
                         [](const ::testing::TestParamInfo<const char*>& i) { return fused_tile_name(i.param); });

// Every gemm_act / gemm_dact A/B candidate of an A/B build (instances_ab.txt: dact on 128x192
// pingpong with a preact ring, a1d2 / a2d2), each forced by its tile name: tails along M and N,
// several tiles per CTA and per pingpong warpgroup, every activation, C with beta, preact /
// postact absent, batches, and rows TMA cannot address (plain loads and stores).
class GemmActAbTiles : public GpuTest {};

TEST_F(GemmActAbTiles, EveryCandidateTile) {
  std::vector<std::string> tiles;
  for (const detail::GemmInstance& i : detail::kGemmInstances)
    if ((i.epilogue == detail::GemmEpilogue::kAct || i.epilogue == detail::GemmEpilogue::kDAct) && i.candidate &&
        !i.diagnostic && i.ab == DType::kBFloat16 && std::find(tiles.begin(), tiles.end(), i.tile) == tiles.end())
      tiles.push_back(i.tile);
  if (tiles.empty()) GTEST_SKIP() << "no gemm_act / gemm_dact A/B candidate compiled (-DQUACK_GEMM_AB_INSTANCES=ON)";
  struct Unset {
    ~Unset() { unsetenv("QUACK_GEMM_TILE"); }
  } unset;
  for (const std::string& tile : tiles) {
    SCOPED_TRACE("tile " + tile);
    setenv("QUACK_GEMM_TILE", tile.c_str(), 1);
    for (bool dact : {false, true}) {
      for (const Shape3& s : kShapes) run_case(mk(s.M, s.N, s.K, Activation::kGeluTanhApprox, dact));
      for (Activation act : kActs) run_case(mk(1000, 3000, 520, act, dact));
      run_case(with(mk(1000, 3000, 520, Activation::kReluSq, dact), [](ActCase& c) {
        c.with_c = !c.dact;
        c.beta = -1.25f;
        c.store_preact = false;
        c.store_postact = false;
        c.L = 2;
      }));
      run_case(with(mk(300, 1001, 256, Activation::kSilu, dact), [](ActCase& c) { c.tight = true; }));
      // gemm_act's C loaded into the output buffer beside a clipped subtile (N = 255: plain stores).
      if (!dact)
        run_case(with(mk(127, 255, 63, Activation::kRelu, false), [](ActCase& c) {
          c.with_c = true;
          c.beta = 0.75f;
        }));
    }
  }
}

// The other compiled dtypes (src/gemm/sm90/instances.txt; one tile each, which every
// QUACK_GEMM_TILE_N falls back to): fp16 inputs with fp16 outputs (gemm_act and gemm_dact), bf16
// inputs with fp32 preact and postact (gemm_act; QuACK's out_dtype = float32). Every activation
// on the shapes above, C with alpha and beta, preact absent, batches, the dynamic scheduler,
// outputs TMA cannot address (plain stores), K = 0.
struct DtypeParam {
  DType ab, out;
  bool dact;  // gemm_dact compiled for these dtypes
  const char* name;
};

std::ostream& operator<<(std::ostream& os, const DtypeParam& p) { return os << p.name; }

class GemmActDtypes : public GpuTest, public ::testing::WithParamInterface<DtypeParam> {};

TEST_P(GemmActDtypes, EveryActivationAndPath) {
  const DtypeParam d = GetParam();
  auto dt = [&](ActCase c) {
    c.ab = d.ab;
    c.out = d.out;
    c.seed += 101;
    return c;
  };
  for (bool dact : {false, true}) {
    if (dact && !d.dact) continue;
    for (Activation act : kActs)
      for (const Shape3& s : kShapes) {
        run_case(dt(mk(s.M, s.N, s.K, act, dact)));
        run_case(dt(with(mk(s.M, s.N, s.K, act, dact), [](ActCase& c) {
          c.store_preact = false;
          c.store_postact = false;
          c.with_c = !c.dact;
          c.alpha = 0.5f;
          c.beta = -1.25f;
          c.seed += 5;
        })));
      }
    run_case(dt(with(mk(200, 300, 100, Activation::kGeluTanhApprox, dact), [](ActCase& c) { c.L = 3; })));
    run_case(dt(with(mk(1000, 3000, 520, Activation::kSilu, dact), [](ActCase& c) { c.dynamic = true; })));
    run_case(dt(with(mk(300, 1001, 256, Activation::kReluSq, dact), [](ActCase& c) { c.tight = true; })));
    run_case(dt(with(mk(129, 1001, 1001, Activation::kTanh, dact), [](ActCase& c) {
      c.tight = true;
      c.offset = 1;
    })));
    run_case(dt(with(mk(100, 300, 0, Activation::kGeluTanhApprox, dact), [](ActCase& c) {
      c.with_c = !c.dact;
      c.beta = 2.f;
    })));
    // Column-major outputs (gemm_dact: a and b too), with C and a bias of the inputs' dtype.
    run_case(dt(with(mk(300, 520, 200, Activation::kReluSq, dact), [&](ActCase& c) {
      c.col = true;
      c.with_c = !c.dact;
      c.beta = 0.5f;
      c.bias = c.dact ? 0 : kBiasRow | kBiasCol;
      c.bias_t = d.ab;
    })));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GemmActDtypes,
                         ::testing::Values(DtypeParam{DType::kFloat16, DType::kFloat16, true, "f16"},
                                           DtypeParam{DType::kBFloat16, DType::kFloat32, false, "bf16_f32out"}),
                         [](const ::testing::TestParamInfo<DtypeParam>& i) { return std::string(i.param.name); });

class GemmActEdge : public GpuTest {};

// K = 0: preact = beta·C (zeros without C), postact = act(preact); dpreact = 0, postact = act(preact).
// M = 0 or N = 0: nothing written.
TEST_F(GemmActEdge, EmptyAndKZero) {
  for (Activation act : {Activation::kGeluTanhApprox, Activation::kReluSq}) {
    run_case(mk(100, 300, 0, act, false));
    run_case(with(mk(100, 300, 0, act, false), [](ActCase& c) {
      c.with_c = true;
      c.beta = 2.f;
    }));
    run_case(mk(100, 300, 0, act, true));
  }
  run_case(mk(0, 128, 64, Activation::kRelu, false));
  run_case(mk(64, 0, 64, Activation::kRelu, true));
}

// C09 (shared/cases/handed.md), beta = 0: C is never read (quack/gemm_act.h), so a C full of
// NaN (never uploaded: its poison) gives exactly the outputs of the call without C, bit for bit,
// and no NaN; alpha = 0.5; K > 0 (the epilogue) and K = 0 (the fill kernel), outputs row- and
// column-major, and a C TMA cannot address (tight: the plain-load path).
TEST_F(GemmActEdge, C09NanCIsNotReadWithBetaZero) {
  for (int64_t K : {int64_t{100}, int64_t{0}})
    for (bool col : {false, true})
      for (bool tight : {false, true}) {
        const ActCase base =
            with(mk(tight ? 127 : 200, tight ? 255 : 300, K, Activation::kSilu, false), [&](ActCase& c) {
              c.alpha = 0.5f;
              c.col = col;
              c.tight = tight;
            });
        const ActCase nan_c = with(base, [](ActCase& c) {
          c.with_c = true;
          c.c_unread = true;
          c.beta = 0.f;
        });
        std::vector<double> d0, p0, d1, p1;
        run_case(base, &d0, &p0);
        run_case(nan_c, &d1, &p1);
        SCOPED_TRACE(describe(nan_c));
        EXPECT_EQ(count_differ(d0, d1), 0) << "preact differs from the call without C";
        EXPECT_EQ(count_differ(p0, p1), 0) << "postact differs from the call without C";
      }
}

// C09, beta ≠ 0: a NaN and a +Inf in C reach preact at their elements (alpha·acc + beta·C) and
// postact through the activation (NaN stays NaN for every activation, act(+Inf) as the float64
// formula: +Inf, or 1 for tanh); every other element as the reference (run_case: c_special).
// Several activations, K > 0 and K = 0 (fill), preact not stored, column-major C and outputs, a
// C TMA cannot address (plain loads), fp32 C and outputs, fp16.
TEST_F(GemmActEdge, C09NanInfInCPropagateWithBeta) {
  auto special = [](ActCase c) {
    c.with_c = true;
    c.c_special = true;
    c.alpha = 0.5f;
    c.beta = 0.75f;
    return c;
  };
  for (Activation act : {Activation::kIdentity, Activation::kRelu, Activation::kSilu, Activation::kTanh})
    for (int64_t K : {int64_t{100}, int64_t{0}}) run_case(special(mk(200, 300, K, act, false)));
  run_case(special(with(mk(200, 300, 100, Activation::kReluSq, false), [](ActCase& c) { c.store_preact = false; })));
  run_case(special(with(mk(200, 300, 100, Activation::kRelu, false), [](ActCase& c) { c.col = true; })));
  run_case(special(with(mk(127, 255, 63, Activation::kGeluTanhApprox, false), [](ActCase& c) { c.tight = true; })));
  run_case(special(with(mk(200, 300, 100, Activation::kSilu, false), [](ActCase& c) { c.out = DType::kFloat32; })));
  run_case(special(with(mk(200, 300, 100, Activation::kGeluErf, false), [](ActCase& c) {
    c.ab = DType::kFloat16;
    c.out = DType::kFloat16;
  })));
}

// gelu_erf's Φ at fp32 precision (activation.cuh, normal_cdf: gemm_dact's postact and dpreact
// use the same function), elementwise and relative, where the bf16 cases' scale-relative bounds
// cannot see it: gemm_act with fp32 C and outputs (gemm_dact has no fp32 instance), C a grid
// over x in [−12, 10] (both tails: Φ(−12) ≈ 1.8e-33), a and b random ±1 (acc an exact even
// integer), alpha = 1/64, beta = 1 (the epilogue) and K = 0 (the fill); postact against
// gelu_erf(the stored fp32 preact: the value the kernel activated). Bound: 3e-6 + 8e-8·x²
// relative (the fit's fp32 error is ~7e-7 below |x| = 3 and ~5e-6 at 10; Φ through
// 1 + erff(x/√2) is 57 % off at x = −5.5 and 0 below −8).
TEST_F(GemmActEdge, GeluErfPhiRelativeFp32) {
  const DType bf = DType::kBFloat16, f32 = DType::kFloat32;
  const int64_t M = 128, N = 256;
  std::vector<double> grid(size_t(M * N));
  for (int64_t e = 0; e < M * N; ++e)  // fp32-exact values spread over [−12, 10], shuffled
    grid[size_t(e)] = double(float(-12.0 + 22.0 * double((e * 7919) % (M * N)) / double(M * N - 1)));
  for (int64_t K : {int64_t{64}, int64_t{0}}) {
    SCOPED_TRACE("K=" + std::to_string(K));
    Rng rng(uint64_t(4242 + K));
    std::vector<double> a(size_t(M * K)), b(size_t(K * N));
    for (double& v : a) v = random_values(rng, 1, bf)[0] < 0 ? -1.0 : 1.0;
    for (double& v : b) v = random_values(rng, 1, bf)[0] < 0 ? -1.0 : 1.0;
    Mat A = make_mat(bf, 1, M, K, 'r', 0), B = make_mat(bf, 1, K, N, 'c', 0);
    upload_into(A.mem, to_memory(A, a));
    upload_into(B.mem, to_memory(B, b));
    Mat C = make_mat(f32, 1, M, N, 'r', 0), D = make_mat(f32, 1, M, N, 'r', 0), P = make_mat(f32, 1, M, N, 'r', 0);
    upload_into(C.mem, to_memory(C, grid));
    GemmActArgs g;
    g.a = A.arg;
    g.b = B.arg;
    g.c = C.arg;
    g.preact = D.arg;
    g.postact = P.arg;
    g.activation = Activation::kGeluErf;
    g.alpha = 1.f / 64.f;
    g.beta = 1.f;
    ASSERT_NO_THROW(gemm_act(g, nullptr));
    QUACK_CUDA_OK(cudaDeviceSynchronize());
    const std::vector<double> pre = from_memory(D, download(D.mem)), post = from_memory(P, download(P.mem));
    int64_t far = 0, bad = 0;
    std::string first;
    for (int64_t e = 0; e < M * N; ++e) {
      const double x = pre[size_t(e)];
      far += std::fabs(x - grid[size_t(e)]) <= 1.0 ? 0 : 1;  // |alpha·acc| <= 1
      const double ref = act_ref(Activation::kGeluErf, x), err = std::fabs(post[size_t(e)] - ref);
      if (!(err <= (3e-6 + 8e-8 * x * x) * std::fabs(ref))) {  // NaN fails too
        if (bad++ == 0) {
          std::ostringstream m;
          m.precision(9);
          m << "x " << x << ": got " << post[size_t(e)] << ", ref " << ref;
          first = m.str();
        }
      }
    }
    EXPECT_EQ(far, 0) << "preact is not alpha·acc + C";
    EXPECT_EQ(bad, 0) << "postact off at " << bad << " elements; first " << first;
  }
}

// Stream-K forced (QUACK_GEMM_STREAMK=1, gemm_act's own workspace) on the cooperative 128x256
// tile: the activation runs once per tile, on the partials summed by the tile's finisher; tails,
// K not a multiple of 64, C with beta, batches, gemm_dact's preact read only by the finisher.
TEST_F(GemmActEdge, StreamKForced) {
  setenv("QUACK_GEMM_STREAMK", "1", 1);
  setenv("QUACK_GEMM_TILE", "128x256", 1);
  for (bool dact : {false, true}) {
    run_case(mk(1000, 600, 1500, Activation::kGeluTanhApprox, dact));
    run_case(mk(127, 255, 4033, Activation::kRelu, dact));
    run_case(with(mk(300, 520, 2000, Activation::kReluSq, dact), [](ActCase& c) {
      c.with_c = !c.dact;
      c.alpha = 2.f;
      c.beta = 0.5f;
    }));
    run_case(with(mk(200, 300, 700, Activation::kSilu, dact), [](ActCase& c) { c.L = 3; }));
  }
  unsetenv("QUACK_GEMM_TILE");
  unsetenv("QUACK_GEMM_STREAMK");
}

// Combinations without an instance throw before any launch and write nothing.
TEST_F(GemmActEdge, UncompiledCombinationsThrow) {
  const DType bf = DType::kBFloat16;
  Mat A = make_mat(bf, 1, 64, 64, 'r', 0);
  Mat Bc = make_mat(bf, 1, 64, 64, 'c', 0), Br = make_mat(bf, 1, 64, 64, 'r', 0);
  Mat P = make_mat(bf, 1, 64, 64, 'r', 0), P32 = make_mat(DType::kFloat32, 1, 64, 64, 'r', 0);
  upload_into(A.mem, std::vector<double>(64 * 64, 1.0));
  upload_into(Bc.mem, std::vector<double>(64 * 64, 1.0));
  upload_into(Br.mem, std::vector<double>(64 * 64, 1.0));
  GemmActArgs g;
  g.a = A.arg;
  g.b = Br.arg;  // b row-major: not compiled for gemm_act
  g.postact = P.arg;
  g.activation = Activation::kRelu;
  EXPECT_THROW(gemm_act(g, nullptr), InvalidArgument);
  g.b = Bc.arg;
  g.preact = P.arg;
  g.postact = P32.arg;  // bf16 preact with an fp32 postact: not compiled (fp32 both, or bf16 both)
  EXPECT_THROW(gemm_act(g, nullptr), InvalidArgument);
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_TRUE(all_nan(download(P.mem)));
  EXPECT_TRUE(all_nan(download(P32.mem)));
}

}  // namespace
}  // namespace quack::test
