// Tier 2: gemm_gated, gemm_dgated and the bias (gemm, gemm_act, gemm_gated) on the device against
// a float64 CPU reference. Skips without a GPU.
//
// Every gated activation, both layouts of gemm_gated (interleaved; concat_layout: b's columns
// [gate | up] and the bias [b_gate; b_up]), the tiles (QUACK_GEMM_TILE_N = 256: cooperative
// 128x256, 128: pingpong 128x128, 192: pingpong 128x192 where compiled, gpu/gemm_tiles.h; the
// concat view has 128x256 only, gemm_dgated no 128x192 pingpong (its cases skip there); in the
// A/B build also each gemm_dgated A/B candidate forced by its tile name), tails along M, N (postact rows of 250 and 264 bytes: the clipped stores of the
// half-width output; the concat view's j dimension cut by TMA), batches, C with beta, preact /
// postact stored or not, bias kinds (row fp32, row bf16, column fp32, column of the inputs'
// dtype, both; per batch or shared), K = 0, the other compiled dtypes (fp16; fp32 outputs of
// bf16 inputs), C09 (NaN / Inf in C: never read at beta = 0, propagated at beta ≠ 0). Inputs are random (never
// zero) and exact in their dtype; every output (and its row padding) is poisoned with NaN before
// the call.
// Reference (float64): acc = Σ_k a·b; gemm_gated: preact = alpha·acc + beta·c + bias, postact =
// glu(preact[2j], preact[2j + 1]); gemm_dgated: (dgate, dup) = acc_j · ∂glu/∂(gate, up) at the
// bf16 preact pair, postact = glu(pair). Tolerance (reference/tolerance.h) as test_gemm_act.cpp:
// the output dtype's rel times max(max|ref|, floor), floor = the magnitude of the summed terms
// (Σ_k|a·b| / sqrt(K), times the largest partial derivative of glu for what passes through it),
// plus 8e-3 for geglu (tanh.approx.f32).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "gpu/gemm_mat.h"
#include "gpu/gemm_tiles.h"
#include "gpu/gpu_util.h"
#include "quack/errors.h"
#include "quack/gemm.h"
#include "quack/gemm_act.h"
#include "reference/random.h"

namespace quack::test {
namespace {

constexpr Activation kGated[] = {Activation::kSwiglu, Activation::kSwigluOai, Activation::kReglu,
                                 Activation::kGeglu, Activation::kGlu};
constexpr DType kBf = DType::kBFloat16;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}
double dgelu(double x) {
  const double c = std::sqrt(2.0 / M_PI), t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

// glu(g, u) and its partial derivatives in float64 (the table of quack/gemm_act.h).
struct Glu {
  double f, dg, du;
};
Glu glu_ref(Activation a, double g, double u) {
  switch (a) {
    case Activation::kSwiglu: {
      const double s = sigmoid(g);
      return {g * s * u, u * s * (1.0 + g * (1.0 - s)), g * s};
    }
    case Activation::kSwigluOai: {
      const double al = 1.702, s = sigmoid(al * g);
      return {g * s * (u + 1.0), (u + 1.0) * (s + al * g * s * (1.0 - s)), g * s};
    }
    case Activation::kReglu: return {(g > 0 ? g : 0.0) * u, g > 0 ? u : 0.0, g > 0 ? g : 0.0};
    case Activation::kGeglu: return {gelu(g) * u, u * dgelu(g), gelu(g)};
    case Activation::kGlu: {
      const double s = sigmoid(g);
      return {s * u, u * s * (1.0 - s), s};
    }
    default: return {g * u, u, g};
  }
}
double approx_rel(Activation a) { return a == Activation::kGeglu ? 8e-3 : 0.0; }

// Bias kinds (bits). kCol16: the column bias (M,) in a 16-bit dtype (the inputs': bf16 or fp16).
constexpr int kRowF32 = 1, kRowBf16 = 2, kCol = 4, kCol16 = 8;
constexpr int kRowAny = kRowF32 | kRowBf16, kColAny = kCol | kCol16;

struct GatedCase {
  int64_t L = 1, M = 1, N = 2, K = 1;  // gemm_gated: N = preact's columns; gemm_dgated: N = H
  Activation act = Activation::kSwiglu;
  bool dgated = false;
  bool concat = false;
  bool store_preact = true;   // gemm_gated
  bool store_postact = true;  // gemm_dgated
  bool with_c = false;
  float alpha = 1.f, beta = 0.f;
  int bias = 0;
  bool shared_bias = false;  // L > 1: a (N,) bias for every batch
  bool tight = false;        // leading strides = the contiguous extents (not 16-byte multiples)
  int64_t offset = 0;        // every tensor's first element this many elements into its buffer
  bool workspace = false;    // the padded copies of a and b in a caller's workspace
  DType ab = kBf;            // a and b (gemm_dgated: also preact and dpreact, packed pairs of ab)
  DType out = kBf;           // gemm_gated: C, preact, postact; gemm_dgated: postact
  // C09 (shared/cases/handed.md), gemm_gated. c_unread: C given with beta = 0 but never uploaded
  // (all NaN, its poison): it must not be read. c_special: C holds a NaN at one element and +Inf
  // at another, an up column (beta > 0 required): preact is NaN / +Inf there, postact of that
  // pair NaN (NaN propagates through every gated activation, quack/gemm_act.h) or glu(g, +Inf)
  // of the float64 formula; every other element as the reference.
  bool c_unread = false;
  bool c_special = false;
  // With c_special: +Inf at two gate columns of row 1 whose ups are negative (−0.5 at K = 0,
  // then u + 1 > 0: glu +Inf; −40: −Inf): swiglu_oai's silu·(u + 1) must not be inf − inf.
  bool gate_inf = false;
  uint64_t seed = 1;
};

std::string describe(const GatedCase& c) {
  return std::string(c.dgated ? "gemm_dgated " : "gemm_gated ") + activation_name(c.act) + " L=" +
         std::to_string(c.L) + " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" +
         std::to_string(c.K) + (c.concat ? " concat" : "") + (c.with_c ? " c" : "") +
         (c.bias ? " bias=" + std::to_string(c.bias) : "") + (c.shared_bias ? " shared" : "") +
         (c.dgated ? (c.store_postact ? "" : " -postact") : (c.store_preact ? "" : " -preact")) +
         (c.tight ? " tight" : "") + (c.offset ? " offset=" + std::to_string(c.offset) : "") +
         (c.workspace ? " workspace" : "") + (c.c_unread ? " c-unread(NaN)" : "") +
         (c.c_special ? " c-NaN/Inf" : "") + (c.gate_inf ? " gate-Inf" : "") + " " + dtype_name(c.ab) + "->" + dtype_name(c.out);
}

// Elements that differ (NaN counts as differing from everything).
int64_t count_differ(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) return -1;
  int64_t n = 0;
  for (size_t i = 0; i < x.size(); ++i) n += x[i] == y[i] ? 0 : 1;
  return n;
}

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

// A bias vector of n elements per batch: values (L·n) in a (L, n) buffer; its TensorRef is
// (n,) when shared (or L = 1), else (L, n).
struct BiasVecT {
  DeviceTensor mem;
  TensorRef ref;
  std::vector<double> v;  // (L, n) logical values (shared: the same row L times)
};
BiasVecT make_bias(Rng& rng, DType t, int64_t L, int64_t n, bool shared) {
  BiasVecT b;
  const int64_t rows = shared ? 1 : L;
  std::vector<double> vals = random_values(rng, rows * n, t);
  b.mem = upload(vals, t, rows, n);
  b.ref = rows == 1 ? TensorRef::vector(b.mem.ref.data, t, n) : TensorRef::matrix(b.mem.ref.data, t, L, n);
  b.v.resize(size_t(L * n));
  for (int64_t l = 0; l < L; ++l)
    for (int64_t j = 0; j < n; ++j) b.v[size_t(l * n + j)] = vals[size_t((shared ? 0 : l) * n + j)];
  return b;
}

// Runs one case and checks it against the float64 reference; out_d / out_p (optional) receive
// the logical values of preact (dpreact) and postact as downloaded.
void run_case(const GatedCase& c, std::vector<double>* out_d = nullptr, std::vector<double>* out_p = nullptr) {
  SCOPED_TRACE(describe(c));
  ASSERT_TRUE(!c.c_unread || (!c.dgated && c.with_c && c.beta == 0.f)) << "c_unread: gemm_gated with C, beta = 0";
  ASSERT_TRUE(!c.c_special || (!c.dgated && c.with_c && c.beta > 0.f)) << "c_special: gemm_gated with C, beta > 0";
  ASSERT_TRUE(!c.gate_inf || (c.c_special && !c.concat && c.M >= 2 && c.N >= 4)) << "gate_inf: c_special, M >= 2, N >= 4";
  Rng rng(c.seed);
  const int64_t L = c.L, M = c.M, N = c.N, K = c.K;
  // gemm_gated: acc (M, N), postact (M, N/2). gemm_dgated: acc (M, H = N), preact (M, 2N).
  const int64_t pre_cols = c.dgated ? 2 * N : N, post_cols = c.dgated ? N : N / 2;
  // pre_t: C / preact / dpreact (gemm_dgated's pairs: the input dtype); post_t: postact.
  const DType ab = c.ab, pre_t = c.dgated ? c.ab : c.out, post_t = c.out;
  const std::vector<double> a = random_values(rng, L * M * K, ab);
  const std::vector<double> b = random_values(rng, L * K * N, ab, 0.0, 0.25);  // (L, K, N) logical
  // C or preact. Not drawn where nothing reads it and nothing is drawn after it (gemm_gated
  // without C or a bias): an (L, M, N) draw saved; the other cases' numbers are unaffected.
  const bool draw_c = c.dgated || c.with_c || c.bias != 0;
  std::vector<double> cv = draw_c ? random_values(rng, L * M * pre_cols, pre_t, 0.0, c.dgated ? 2.0 : 1.0)
                                  : std::vector<double>(size_t(L * M * pre_cols), 0.0);
  // c_special: NaN in batch L − 1's middle row, +Inf at the last element of batch 0 (an up
  // column: N is even); logical preact indices r·N + n (r = l·M + i), and the postact elements
  // of their pairs r·(N/2) + n/2.
  std::set<int64_t> special_d, special_p;
  if (c.c_special && M > 0 && N > 0) {
    const int64_t nan_at = ((L - 1) * M + M / 2) * N + N / 3, inf_at = M * N - 1;
    cv[size_t(nan_at)] = std::numeric_limits<double>::quiet_NaN();
    cv[size_t(inf_at)] = std::numeric_limits<double>::infinity();
    std::vector<int64_t> at = {nan_at, inf_at};
    if (c.gate_inf) {  // row 1's pairs 0 and 1 (N >= 4, not concat: gate 2j, up 2j + 1)
      const int64_t g0 = N, g1 = N + 2;
      cv[size_t(g0)] = cv[size_t(g1)] = std::numeric_limits<double>::infinity();
      cv[size_t(g0 + 1)] = K == 0 ? -0.5 : -40.0;
      cv[size_t(g1 + 1)] = -40.0;
      at.insert(at.end(), {g0, g1});
    }
    for (int64_t e : at) {
      special_d.insert(e);
      special_p.insert(e / N * post_cols + e % N / 2);
    }
  }

  Mat A = make_mat(ab, L, M, K, 'r', 0, c.tight, c.offset);
  upload_into(A.mem, to_memory(A, a));
  Mat B = make_mat(ab, L, K, N, c.dgated ? 'r' : 'c', 0, c.tight, c.offset);
  std::vector<double> b_mem = b;
  if (c.concat) {  // memory column c·H + j holds logical column 2j + c
    const int64_t H = N / 2;
    for (int64_t l = 0; l < L; ++l)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n)
          b_mem[size_t((l * K + k) * N + (n % 2) * H + n / 2)] = b[size_t((l * K + k) * N + n)];
  }
  upload_into(B.mem, to_memory(B, b_mem));
  Mat C = make_mat(pre_t, L, M, pre_cols, 'r', 0, c.tight, c.offset);  // C or preact
  Mat D = make_mat(pre_t, L, M, pre_cols, 'r', 0, c.tight, c.offset);  // preact or dpreact (NaN)
  Mat P = make_mat(post_t, L, M, post_cols, 'r', 0, c.tight, c.offset);  // postact (NaN)

  BiasVecT row, col;
  std::vector<double> row_v(size_t(L * N), 0.0), col_v(size_t(L * M), 0.0);
  if (c.bias & kRowAny) {
    row = make_bias(rng, (c.bias & kRowBf16) ? kBf : DType::kFloat32, L, N, c.shared_bias);
    row_v = row.v;
    if (c.concat) {  // the bias in the concat layout: memory element c·H + j is logical 2j + c
      std::vector<double> mem = row.v;
      const int64_t H = N / 2;
      for (int64_t l = 0; l < (c.shared_bias ? 1 : L); ++l)
        for (int64_t n = 0; n < N; ++n) mem[size_t(l * N + (n % 2) * H + n / 2)] = row.v[size_t(l * N + n)];
      mem.resize(size_t((c.shared_bias ? 1 : L) * N));
      upload_into(row.mem, mem);
    }
  }
  if (c.bias & kColAny) {
    col = make_bias(rng, (c.bias & kCol16) ? c.ab : DType::kFloat32, L, M, c.shared_bias);
    col_v = col.v;
  }

  bool d_written = true, p_written = true;
  if (c.dgated) {
    upload_into(C.mem, to_memory(C, cv));
    GemmDGatedArgs g;
    g.a = A.arg;
    g.b = B.arg;
    g.preact = C.arg;
    g.dpreact = D.arg;
    if (c.store_postact) g.postact = P.arg;
    p_written = c.store_postact;
    g.activation = c.act;
    DeviceBuffer ws(c.workspace ? gemm_workspace_size(g) : 0);
    if (c.workspace) {
      EXPECT_GT(gemm_workspace_size(g), 0u);
      g.workspace = ws.get();
      g.workspace_bytes = gemm_workspace_size(g);
    }
    ASSERT_NO_THROW(gemm_dgated(g, nullptr));
  } else {
    if (c.with_c && !c.c_unread) upload_into(C.mem, to_memory(C, cv));
    GemmGatedArgs g;
    g.a = A.arg;
    g.b = B.arg;
    if (c.with_c) g.c = C.arg;
    if (c.store_preact) g.preact = D.arg;
    d_written = c.store_preact;
    g.postact = P.arg;
    if (c.bias & kRowAny) g.bias.row = row.ref;
    if (c.bias & kColAny) g.bias.col = col.ref;
    g.activation = c.act;
    g.alpha = c.alpha;
    g.beta = c.with_c ? c.beta : 0.f;
    g.concat_layout = c.concat;
    DeviceBuffer ws(c.workspace ? gemm_workspace_size(g) : 0);
    if (c.workspace) {
      EXPECT_GT(gemm_workspace_size(g), 0u);
      g.workspace = ws.get();
      g.workspace_bytes = gemm_workspace_size(g);
    }
    ASSERT_NO_THROW(gemm_gated(g, nullptr));
  }
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<double> got_d = from_memory(D, download(D.mem)), got_p = from_memory(P, download(P.mem));
  if (out_d) *out_d = got_d;
  if (out_p) *out_p = got_p;
  EXPECT_TRUE(gaps_untouched(c.dgated ? "dpreact" : "preact", D.mem));
  EXPECT_TRUE(gaps_untouched("postact", P.mem));
  if (M == 0 || N == 0 || L == 0) {
    EXPECT_TRUE(all_nan(got_d) && all_nan(got_p)) << "an empty problem wrote an output";
    return;
  }
  // Non-finite only where C09's special elements put it (checked against the reference below).
  auto nonfinite_elsewhere = [](const std::vector<double>& v, const std::set<int64_t>& sp) {
    int64_t n = 0;
    for (size_t i = 0; i < v.size(); ++i) n += std::isfinite(v[i]) || sp.count(int64_t(i)) ? 0 : 1;
    return n;
  };
  if (d_written) {
    EXPECT_EQ(nonfinite_elsewhere(got_d, special_d), 0) << "preact/dpreact has non-finite elements";
  } else {
    EXPECT_TRUE(all_nan(got_d)) << "preact was written without being asked for";
  }
  if (p_written) {
    EXPECT_EQ(nonfinite_elsewhere(got_p, special_p), 0) << "postact has non-finite elements";
  } else {
    EXPECT_TRUE(all_nan(got_p)) << "postact was written without being asked for";
  }

  std::vector<double> ref_d, ref_p, sub_d, sub_p;
  double floor_acc = 0.0, floor_post = 0.0;
  std::set<int64_t> rows = rows_to_check(L, M, N, K);
  for (int64_t e : special_d) rows.insert(e / N);  // the special elements are always compared
  std::vector<double> s, s_abs;
  for (int64_t r : rows) {
    const int64_t l = r / M;
    ref_row_sums(a, b, r, l, N, K, s, s_abs);  // acc of row r: (N) values, and Σ_k |a·b|
    if (c.dgated) {
      for (int64_t j = 0; j < N; ++j) {
        const double g = cv[size_t(r * pre_cols + 2 * j)], u = cv[size_t(r * pre_cols + 2 * j + 1)];
        const Glu q = glu_ref(c.act, g, u);
        ref_d.push_back(s[size_t(j)] * q.dg);
        ref_d.push_back(s[size_t(j)] * q.du);
        sub_d.push_back(got_d[size_t(r * pre_cols + 2 * j)]);
        sub_d.push_back(got_d[size_t(r * pre_cols + 2 * j + 1)]);
        ref_p.push_back(q.f);
        sub_p.push_back(got_p[size_t(r * post_cols + j)]);
        floor_acc = std::max(floor_acc, s_abs[size_t(j)] * std::max(std::fabs(q.dg), std::fabs(q.du)));
      }
    } else {
      std::vector<double> pre(static_cast<size_t>(N));
      for (int64_t n = 0; n < N; ++n) {
        pre[size_t(n)] = double(c.alpha) * s[size_t(n)] + (c.with_c ? double(c.beta) * cv[size_t(r * N + n)] : 0.0) +
                         row_v[size_t(l * N + n)] + col_v[size_t(l * M + r % M)];
        ref_d.push_back(pre[size_t(n)]);
        sub_d.push_back(got_d[size_t(r * N + n)]);
        floor_acc = std::max(floor_acc, std::fabs(double(c.alpha)) * s_abs[size_t(n)]);
      }
      for (int64_t j = 0; j < N / 2; ++j) {
        const double g = pre[size_t(2 * j)], u = pre[size_t(2 * j + 1)];
        const Glu q = glu_ref(c.act, g, u);
        // NaN propagates through every gated activation (glu_ref's reglu would give 0 for a NaN gate).
        ref_p.push_back(std::isnan(g) || std::isnan(u) ? std::numeric_limits<double>::quiet_NaN() : q.f);
        sub_p.push_back(got_p[size_t(r * post_cols + j)]);
        if (special_p.count(r * post_cols + j)) continue;  // NaN / +Inf: kept out of the scale
        const double sa = std::max(s_abs[size_t(2 * j)], s_abs[size_t(2 * j + 1)]) * std::fabs(double(c.alpha));
        floor_post = std::max(floor_post, sa * (std::fabs(q.dg) + std::fabs(q.du)));
      }
    }
  }
  const double sk = K > 0 ? std::sqrt(double(K)) : 1.0;
  floor_acc = K > 0 ? floor_acc / sk : 0.0;
  floor_post = K > 0 ? floor_post / sk : 0.0;
  const double extra = approx_rel(c.act);
  if (c.dgated) {
    EXPECT_TRUE(close("dpreact", sub_d, ref_d, reduction_tolerance(pre_t, K) + extra, 2 * N, floor_acc));
    if (p_written) {
      EXPECT_TRUE(close("postact", sub_p, ref_p, tolerance(post_t) + extra, N));
    }
  } else {
    if (d_written) {
      EXPECT_TRUE(close("preact", sub_d, ref_d, reduction_tolerance(pre_t, K), N, floor_acc));
    }
    EXPECT_TRUE(close("postact", sub_p, ref_p, reduction_tolerance(post_t, K) + extra, N / 2, floor_post));
  }
}

GatedCase mk(int64_t M, int64_t N, int64_t K, Activation act, bool dgated) {
  GatedCase c;
  c.M = M;
  c.N = N;
  c.K = K;
  c.act = act;
  c.dgated = dgated;
  c.seed = uint64_t(M * 1000003 + N * 1009 + K * 7 + int(act) * 131 + (dgated ? 17 : 0));
  return c;
}

template <typename F>
GatedCase with(GatedCase c, F f) {
  f(c);
  return c;
}

// Shapes (gemm_gated's N; gemm_dgated's H = N / 2 of the same list): tails along M and N
// (postact rows of 125 / 132 elements: 250 / 264 bytes, the clipped half-width stores), several
// tiles per CTA, a narrow column of tiles, a long K.
struct Shape3 {
  int64_t M, N, K;
};
constexpr Shape3 kShapes[] = {{127, 250, 63}, {129, 264, 136}, {1000, 3072, 520}, {64, 16, 1024}, {2048, 2048, 256}};

class GemmGatedTest : public GpuTest, public ::testing::WithParamInterface<const char*> {
 protected:
  // gemm_dgated's cases run only where its own instance of the tile is compiled (128x192
  // pingpong is gemm_gated's only): elsewhere they would rerun its default tile.
  bool dgated_tile() const { return fused_tile_compiled(GetParam(), {detail::GemmEpilogue::kDGated}); }
  void SetUp() override {
    GpuTest::SetUp();
    if (!fused_tile_compiled(GetParam(), {detail::GemmEpilogue::kGated, detail::GemmEpilogue::kDGated}))
      GTEST_SKIP() << fused_tile_name(GetParam()) << " not compiled for these epilogues (instances_ab.txt: "
                   << "-DQUACK_GEMM_AB_INSTANCES=ON)";
    setenv("QUACK_GEMM_TILE_N", GetParam(), 1);
  }
  void TearDown() override {
    unsetenv("QUACK_GEMM_TILE_N");
    GpuTest::TearDown();
  }
};

TEST_P(GemmGatedTest, GatedEveryActivation) {
  for (Activation act : kGated)
    for (const Shape3& s : kShapes) {
      run_case(mk(s.M, s.N, s.K, act, false));
      run_case(with(mk(s.M, s.N, s.K, act, false), [](GatedCase& c) {
        c.store_preact = false;
        c.with_c = true;
        c.alpha = 0.5f;
        c.beta = -1.25f;
        c.bias = kRowF32;
        c.seed += 5;
      }));
    }
}

// The concat view of b (128x256 only: the pingpong parameter falls back to it).
TEST_P(GemmGatedTest, GatedConcatLayout) {
  for (Activation act : kGated)
    for (const Shape3& s : kShapes)
      run_case(with(mk(s.M, s.N, s.K, act, false), [](GatedCase& c) {
        c.concat = true;
        c.bias = kRowF32;
      }));
}

TEST_P(GemmGatedTest, GatedBiasKinds) {
  for (int bias : {kRowF32, kRowBf16, kCol, kRowF32 | kCol})
    for (bool concat : {false, true}) {
      run_case(with(mk(300, 520, 200, Activation::kSwiglu, false), [&](GatedCase& c) {
        c.bias = bias;
        c.concat = concat;
      }));
      run_case(with(mk(200, 264, 100, Activation::kGeglu, false), [&](GatedCase& c) {
        c.L = 3;
        c.bias = bias;
        c.concat = concat;
        c.shared_bias = bias == kRowBf16;
      }));
    }
}

// A 16-bit column bias (bias.col bf16: the epilogue's add_col of a 16-bit vector and the fill
// kernel's 16-bit load, never run by an fp32 column bias), alone and with a bf16 row bias, both
// layouts of b, per batch (L, M) and shared (M,) over 3 batches, C with beta, K = 0 (fill).
TEST_P(GemmGatedTest, Bias16BitColumn) {
  for (int bias : {kCol16, kRowBf16 | kCol16})
    for (bool concat : {false, true}) {
      run_case(with(mk(300, 520, 200, Activation::kSwiglu, false), [&](GatedCase& c) {
        c.bias = bias;
        c.concat = concat;
      }));
      run_case(with(mk(200, 264, 100, Activation::kGeglu, false), [&](GatedCase& c) {
        c.L = 3;
        c.bias = bias;
        c.concat = concat;
        c.shared_bias = bias == kCol16;
        c.with_c = true;
        c.beta = -0.5f;
      }));
      run_case(with(mk(100, 300, 0, Activation::kSwiglu, false), [&](GatedCase& c) {  // K = 0 fill
        c.bias = bias;
        c.concat = concat;
      }));
    }
}

// Any alignment, as gemm_act: K = 63 and 1001 (a and b copied into padded rows), N = 2·501
// (preact rows of 2004 bytes, postact rows of 1002: the epilogue's plain stores, the half-width
// one included), bases one element in (gemm_dgated: two, its pairs stay 4-byte words), batches
// with unaligned batch strides, C with beta, the concat view over a padded b, a caller's
// workspace, K = 0.
TEST_P(GemmGatedTest, UnalignedOperands) {
  auto tight = [](GatedCase c, int64_t offset = 0) {
    c.tight = true;
    c.offset = offset;
    return c;
  };
  for (bool dgated : {false, true}) {
    if (dgated && !dgated_tile()) continue;
    const Activation act = dgated ? Activation::kGeglu : Activation::kSwiglu;
    const int64_t n = dgated ? 501 : 1002;  // gemm_dgated's H, gemm_gated's N
    const int64_t off = dgated ? 2 : 1;
    run_case(tight(mk(127, dgated ? 125 : 250, 63, act, dgated)));
    run_case(tight(mk(300, n, 256, act, dgated)));
    run_case(tight(mk(257, dgated ? 320 : 640, 1001, act, dgated)));
    run_case(tight(mk(129, n, 1001, act, dgated), off));
    run_case(tight(with(mk(200, n, 100, act, dgated), [](GatedCase& c) { c.L = 3; })));
    run_case(tight(with(mk(300, n, 137, act, dgated), [](GatedCase& c) { c.workspace = true; })));
    run_case(tight(mk(100, n, 0, act, dgated)));  // K = 0 fill
  }
  run_case(tight(with(mk(300, 1002, 300, Activation::kReglu, false), [](GatedCase& c) {
    c.with_c = true;
    c.alpha = 2.f;
    c.beta = -0.5f;
    c.bias = kRowF32 | kCol;
  }), 1));
  run_case(tight(with(mk(300, 1002, 300, Activation::kSwiglu, false), [](GatedCase& c) { c.store_preact = false; }), 1));
  run_case(tight(with(mk(300, 1002, 137, Activation::kSwiglu, false), [](GatedCase& c) {
    c.concat = true;
    c.bias = kRowBf16;
  }), 1));
}

TEST_P(GemmGatedTest, DGatedEveryActivation) {
  if (!dgated_tile()) GTEST_SKIP() << fused_tile_name(GetParam()) << ": no gemm_dgated instance of this tile";
  for (Activation act : kGated)
    for (const Shape3& s : kShapes) {
      run_case(mk(s.M, s.N / 2, s.K, act, true));
      run_case(with(mk(s.M, s.N / 2, s.K, act, true), [](GatedCase& c) {
        c.store_postact = false;
        c.seed += 5;
      }));
    }
  run_case(with(mk(200, 300, 100, Activation::kSwiglu, true), [](GatedCase& c) { c.L = 3; }));
}

// Several tiles per CTA and per pingpong warpgroup (620 tiles of 128x128, 310 of 128x256) with
// partial tiles along M and N (3900 = 30·128 + 60 rows: one 64-row subtile of the last tile
// row; H = 2500 = 19·128 + 68 columns: 3 of 4 subtiles of 32), an odd count of m tiles (the 2x1
// cluster's second CTA gets tiles wholly past M), K of one k-block (the mainloop shortest against
// the epilogue) and batches: the C ring of gemm_dgated (preact loaded ahead: epilogue.cuh,
// kCAhead) across the tiles of a persistent CTA.
TEST_P(GemmGatedTest, DGatedManyTilesPerCta) {
  if (!dgated_tile()) GTEST_SKIP() << fused_tile_name(GetParam()) << ": no gemm_dgated instance of this tile";
  run_case(mk(3900, 2500, 64, Activation::kSwiglu, true));
  run_case(with(mk(3900, 2500, 200, Activation::kGeglu, true), [](GatedCase& c) { c.store_postact = false; }));
  run_case(with(mk(1000, 1500, 40, Activation::kSwigluOai, true), [](GatedCase& c) { c.L = 3; }));
}

// Every gemm_dgated A/B candidate of an A/B build (instances_ab.txt: the buffer splits a<S>[d<D>],
// cf, ip; not the diagnostic tiles, wrong by design), every I/O-warp variant (io, production:
// the rule's at K ≤ kIoWarpMaxK) and 128x192 pingpong (production), each forced by its tile
// name: the shapes
// above, several tiles per CTA and per pingpong warpgroup with partial tiles and a 2x1 cluster's
// empty second CTA (DGatedManyTilesPerCta's), postact absent, batches, and rows TMA cannot
// address (preact staged by plain loads into the ring, dpreact and postact by plain and clipped
// stores; an in-place slot then goes through both). On 128x192 pingpong (two kernels: the
// specialised copies and the generic path) both kernels run.
class GemmDGatedAbTiles : public GpuTest {};

TEST_F(GemmDGatedAbTiles, EveryCandidateTile) {
  std::vector<std::string> tiles;
  for (const detail::GemmInstance& i : detail::kGemmInstances)
    if (i.epilogue == detail::GemmEpilogue::kDGated &&
        (i.candidate || i.io_warps || std::string(i.tile).rfind("128x192pp", 0) == 0) && !i.diagnostic &&
        i.ab == kBf && std::find(tiles.begin(), tiles.end(), i.tile) == tiles.end())
      tiles.push_back(i.tile);
  if (tiles.empty()) GTEST_SKIP() << "no gemm_dgated variant tile compiled";
  struct Unset {
    ~Unset() { unsetenv("QUACK_GEMM_TILE"); }
  } unset;
  auto tight = [](GatedCase c, int64_t offset = 0) {
    c.tight = true;
    c.offset = offset;
    return c;
  };
  for (const std::string& tile : tiles) {
    SCOPED_TRACE("tile " + tile);
    setenv("QUACK_GEMM_TILE", tile.c_str(), 1);
    for (const Shape3& s : kShapes) run_case(mk(s.M, s.N / 2, s.K, Activation::kSwiglu, true));
    run_case(mk(3900, 2500, 64, Activation::kSwiglu, true));
    run_case(with(mk(3900, 2500, 200, Activation::kGeglu, true), [](GatedCase& c) { c.store_postact = false; }));
    run_case(with(mk(1000, 1500, 40, Activation::kSwigluOai, true), [](GatedCase& c) { c.L = 3; }));
    // Rows of 16-byte multiples (preact, dpreact and postact by TMA: an I/O warp tile, io, runs
    // its I/O warps only then): an odd count of m tiles (the 2x1 cluster's empty second CTA),
    // partial tiles along M and N, K of one k-block, batches.
    run_case(mk(3900, 1504, 64, Activation::kSwiglu, true));
    run_case(with(mk(1000, 1504, 40, Activation::kGeglu, true), [](GatedCase& c) {
      c.L = 3;
      c.store_postact = false;
    }));
    run_case(tight(mk(127, 125, 63, Activation::kGeglu, true)));
    run_case(tight(mk(300, 501, 256, Activation::kSwiglu, true)));
    run_case(tight(mk(129, 501, 1001, Activation::kSwiglu, true), 2));
    run_case(tight(with(mk(200, 501, 100, Activation::kReglu, true), [](GatedCase& c) { c.L = 3; })));
    // An activation without a copy (glu) on rows TMA addresses: on 128x192 pingpong the generic
    // kernel's TMA path (epilogue_variants.cuh, EpiPaths).
    run_case(mk(1000, 1504, 40, Activation::kGlu, true));
  }
}

INSTANTIATE_TEST_SUITE_P(Tiles, GemmGatedTest, ::testing::ValuesIn(kFusedTiles),
                         [](const ::testing::TestParamInfo<const char*>& i) { return fused_tile_name(i.param); });

// The other compiled dtypes (src/gemm/sm90/instances.txt; one tile each, which every
// QUACK_GEMM_TILE_N falls back to): fp16 inputs and outputs (gemm_gated in both layouts,
// gemm_dgated with fp16 pairs), bf16 inputs with fp32 preact and postact (gemm_gated,
// interleaved: the half-width postact stored as fp32). Every gated activation on the shapes
// above, C with alpha, beta and a bias, preact / postact absent, batches, outputs TMA cannot
// address (plain and clipped stores of both widths), K = 0.
struct GatedDtypeParam {
  DType ab, out;
  bool more;  // concat_layout and gemm_dgated compiled for these dtypes
  const char* name;
};

std::ostream& operator<<(std::ostream& os, const GatedDtypeParam& p) { return os << p.name; }

class GemmGatedDtypes : public GpuTest, public ::testing::WithParamInterface<GatedDtypeParam> {};

TEST_P(GemmGatedDtypes, EveryActivationAndPath) {
  const GatedDtypeParam d = GetParam();
  auto dt = [&](GatedCase c) {
    c.ab = d.ab;
    c.out = d.out;
    c.seed += 101;
    return c;
  };
  auto tight = [](GatedCase c, int64_t offset = 0) {
    c.tight = true;
    c.offset = offset;
    return c;
  };
  for (Activation act : kGated)
    for (const Shape3& s : kShapes) {
      run_case(dt(mk(s.M, s.N, s.K, act, false)));
      run_case(dt(with(mk(s.M, s.N, s.K, act, false), [](GatedCase& c) {
        c.store_preact = false;
        c.with_c = true;
        c.alpha = 0.5f;
        c.beta = -1.25f;
        c.bias = kRowF32;
        c.seed += 5;
      })));
      if (d.more) {
        run_case(dt(with(mk(s.M, s.N, s.K, act, false), [](GatedCase& c) {
          c.concat = true;
          c.bias = kRowBf16;
        })));
        run_case(dt(mk(s.M, s.N / 2, s.K, act, true)));
        run_case(dt(with(mk(s.M, s.N / 2, s.K, act, true), [](GatedCase& c) {
          c.store_postact = false;
          c.seed += 5;
        })));
      }
    }
  run_case(dt(with(mk(200, 264, 100, Activation::kGeglu, false), [](GatedCase& c) {
    c.L = 3;
    c.bias = kRowF32 | kCol;
  })));
  // A column bias of the inputs' dtype (fp16 for f16) with a bf16 row bias; K = 0 (fill).
  for (int64_t K : {int64_t{136}, int64_t{0}})
    run_case(dt(with(mk(200, 264, K, Activation::kSwiglu, false), [](GatedCase& c) {
      c.L = 3;
      c.bias = kRowBf16 | kCol16;
    })));
  run_case(dt(tight(mk(300, 1002, 256, Activation::kSwiglu, false))));
  run_case(dt(tight(with(mk(300, 1002, 300, Activation::kReglu, false), [](GatedCase& c) {
    c.with_c = true;
    c.alpha = 2.f;
    c.beta = -0.5f;
  }), 1)));
  run_case(dt(tight(mk(100, 1002, 0, Activation::kSwiglu, false))));  // K = 0 fill
  if (d.more) {
    run_case(dt(with(mk(200, 300, 100, Activation::kSwiglu, true), [](GatedCase& c) { c.L = 3; })));
    run_case(dt(tight(mk(129, 501, 1001, Activation::kGeglu, true), 2)));
    run_case(dt(tight(with(mk(300, 1002, 137, Activation::kSwiglu, false), [](GatedCase& c) { c.concat = true; }), 1)));
    run_case(dt(tight(mk(100, 501, 0, Activation::kGeglu, true))));  // K = 0 fill
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GemmGatedDtypes,
                         ::testing::Values(GatedDtypeParam{DType::kFloat16, DType::kFloat16, true, "f16"},
                                           GatedDtypeParam{DType::kBFloat16, DType::kFloat32, false, "bf16_f32out"}),
                         [](const ::testing::TestParamInfo<GatedDtypeParam>& i) { return std::string(i.param.name); });

class GemmGatedEdge : public GpuTest {};

// Stream-K forced (QUACK_GEMM_STREAMK=1, the op's own workspace) on the cooperative 128x256
// tile: the gated epilogue (and gemm_dgated's, whose preact ring C is loaded only by the tile's
// finisher) on the summed partials; bias, C with beta, the concat view of b, batches, tails.
TEST_F(GemmGatedEdge, StreamKForced) {
  setenv("QUACK_GEMM_STREAMK", "1", 1);
  setenv("QUACK_GEMM_TILE", "128x256", 1);
  for (bool dgated : {false, true}) {
    run_case(mk(1000, 600, 1500, Activation::kSwiglu, dgated));
    run_case(mk(129, 264, 4033, Activation::kGeglu, dgated));
    run_case(with(mk(200, 300, 700, Activation::kSwiglu, dgated), [](GatedCase& c) { c.L = 3; }));
  }
  run_case(with(mk(300, 520, 2000, Activation::kSwiglu, false), [](GatedCase& c) {
    c.with_c = true;
    c.alpha = 0.5f;
    c.beta = -1.25f;
    c.bias = kRowF32;
  }));
  run_case(with(mk(640, 512, 3000, Activation::kReglu, false), [](GatedCase& c) {
    c.concat = true;
    c.bias = kRowBf16;
  }));
  unsetenv("QUACK_GEMM_TILE");
  unsetenv("QUACK_GEMM_STREAMK");
}

// C09 (shared/cases/handed.md) for gemm_gated, beta = 0: C is never read (quack/gemm_act.h), so a
// C full of NaN (never uploaded: its poison) gives exactly the outputs of the call without C, bit
// for bit, and no NaN; alpha = 0.5 and a row bias; K > 0 (the epilogue) and K = 0 (the fill
// kernel), both layouts of b, and a C TMA cannot address (tight: the plain-load path).
TEST_F(GemmGatedEdge, C09NanCIsNotReadWithBetaZero) {
  for (int64_t K : {int64_t{100}, int64_t{0}})
    for (bool concat : {false, true})
      for (bool tight : {false, true}) {
        const GatedCase base =
            with(mk(tight ? 127 : 200, tight ? 250 : 300, K, Activation::kSwiglu, false), [&](GatedCase& c) {
              c.alpha = 0.5f;
              c.bias = kRowF32;
              c.concat = concat;
              c.tight = tight;
            });
        const GatedCase nan_c = with(base, [](GatedCase& c) {
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

// C09 for gemm_gated, beta ≠ 0: a NaN (a gate or an up column) and a +Inf (an up column) in C
// reach preact at their elements and the postact of their pairs (NaN stays NaN; glu(g, +Inf) as
// the float64 formula: ±Inf, or NaN for reglu with g < 0, 0·Inf); every other element as the
// reference (run_case: c_special). swiglu, reglu, glu (whose glu(g, +Inf) has the same sign in
// fp32 and float64 for any finite gate), K > 0 and K = 0 (fill), the concat layout with a bias,
// preact not stored, a C TMA cannot address, fp32 C and outputs, fp16.
TEST_F(GemmGatedEdge, C09NanInfInCPropagateWithBeta) {
  auto special = [](GatedCase c) {
    c.with_c = true;
    c.c_special = true;
    c.alpha = 0.5f;
    c.beta = 0.75f;
    return c;
  };
  for (Activation act : {Activation::kSwiglu, Activation::kReglu, Activation::kGlu})
    for (int64_t K : {int64_t{100}, int64_t{0}}) run_case(special(mk(200, 300, K, act, false)));
  run_case(special(with(mk(200, 300, 100, Activation::kSwiglu, false), [](GatedCase& c) {
    c.concat = true;
    c.bias = kRowF32;
  })));
  run_case(special(with(mk(200, 300, 100, Activation::kGlu, false), [](GatedCase& c) { c.store_preact = false; })));
  run_case(special(with(mk(127, 250, 63, Activation::kReglu, false), [](GatedCase& c) { c.tight = true; })));
  run_case(special(with(mk(200, 300, 100, Activation::kSwiglu, false), [](GatedCase& c) { c.out = DType::kFloat32; })));
  run_case(special(with(mk(200, 300, 100, Activation::kSwiglu, false), [](GatedCase& c) {
    c.ab = DType::kFloat16;
    c.out = DType::kFloat16;
  })));
  // swiglu_oai: +Inf gates with negative ups (glu ±Inf, never NaN), fill (K = 0) and mainloop.
  for (int64_t K : {int64_t{100}, int64_t{0}})
    run_case(special(with(mk(200, 300, K, Activation::kSwigluOai, false), [](GatedCase& c) { c.gate_inf = true; })));
}

// K = 0: preact = beta·C + bias, postact = glu of its pairs; dpreact = 0, postact = glu(preact).
// M = 0 or N = 0: nothing written.
TEST_F(GemmGatedEdge, EmptyAndKZero) {
  for (Activation act : {Activation::kSwiglu, Activation::kGeglu}) {
    run_case(mk(100, 300, 0, act, false));
    run_case(with(mk(100, 300, 0, act, false), [](GatedCase& c) {
      c.with_c = true;
      c.beta = 2.f;
      c.bias = kRowF32 | kCol;
    }));
    run_case(with(mk(100, 300, 0, act, false), [](GatedCase& c) {
      c.concat = true;
      c.bias = kRowBf16;
    }));
    run_case(mk(100, 150, 0, act, true));
  }
  run_case(mk(0, 128, 64, Activation::kSwiglu, false));
  run_case(mk(64, 0, 64, Activation::kSwiglu, true));
}

// ---- the bias on gemm and gemm_act ----

struct BiasCase {
  int64_t L = 1, M = 1, N = 1, K = 1;
  int bias = kRowF32;
  bool col_major_d = false;  // d (and c) column-major: the kernel computes Dᵀ (the bias swaps)
  bool with_c = false;
  bool act = false;  // gemm_act (relu_sq) instead of gemm
  DType t = kBf;     // a, b, c, d, postact
  uint64_t seed = 3;
};

void run_bias_case(const BiasCase& c) {
  SCOPED_TRACE("bias=" + std::to_string(c.bias) + " L=" + std::to_string(c.L) + " M=" + std::to_string(c.M) +
               " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) + (c.col_major_d ? " d col" : "") +
               (c.with_c ? " c" : "") + (c.act ? " act" : "") + " " + dtype_name(c.t));
  Rng rng(c.seed);
  const int64_t L = c.L, M = c.M, N = c.N, K = c.K;
  const DType t = c.t;
  const std::vector<double> a = random_values(rng, L * M * K, t), b = random_values(rng, L * K * N, t);
  const std::vector<double> cv = random_values(rng, L * M * N, t);
  Mat A = make_mat(t, L, M, K, 'r', 0), B = make_mat(t, L, K, N, 'c', 0);
  upload_into(A.mem, to_memory(A, a));
  upload_into(B.mem, to_memory(B, b));
  const char o = c.col_major_d ? 'c' : 'r';
  Mat C = make_mat(t, L, M, N, o, 0), D = make_mat(t, L, M, N, o, 0), P = make_mat(t, L, M, N, o, 0);
  if (c.with_c) upload_into(C.mem, to_memory(C, cv));
  BiasVecT row, col;
  std::vector<double> row_v(size_t(L * N), 0.0), col_v(size_t(L * M), 0.0);
  if (c.bias & (kRowF32 | kRowBf16)) {
    row = make_bias(rng, (c.bias & kRowBf16) ? c.t : DType::kFloat32, L, N, false);
    row_v = row.v;
  }
  if (c.bias & kColAny) {
    col = make_bias(rng, (c.bias & kCol16) ? c.t : DType::kFloat32, L, M, L > 1);
    col_v = col.v;
  }
  if (c.act) {
    GemmActArgs g;
    g.a = A.arg;
    g.b = B.arg;
    g.preact = D.arg;
    g.postact = P.arg;
    if (c.with_c) g.c = C.arg;
    g.beta = c.with_c ? 1.f : 0.f;
    if (c.bias & kRowAny) g.bias.row = row.ref;
    if (c.bias & kColAny) g.bias.col = col.ref;
    g.activation = Activation::kReluSq;
    ASSERT_NO_THROW(gemm_act(g, nullptr));
  } else {
    GemmArgs g;
    g.a = A.arg;
    g.b = B.arg;
    g.d = D.arg;
    if (c.with_c) g.c = C.arg;
    g.beta = c.with_c ? 1.f : 0.f;
    if (c.bias & kRowAny) g.bias.row = row.ref;
    if (c.bias & kColAny) g.bias.col = col.ref;
    ASSERT_NO_THROW(gemm(g, nullptr));
  }
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<double> got = from_memory(D, download(D.mem)), got_p = from_memory(P, download(P.mem));
  EXPECT_TRUE(gaps_untouched("d", D.mem));
  std::vector<double> ref, sub, ref_p, sub_p;
  double floor_acc = 0.0;
  std::vector<double> acc, acc_abs;
  for (int64_t r : rows_to_check(L, M, N, K)) {
    const int64_t l = r / M;
    ref_row_sums(a, b, r, l, N, K, acc, acc_abs);  // Σ_k a·b, Σ_k |a·b| of row r
    for (int64_t j = 0; j < N; ++j) {
      const double s = acc[size_t(j)], s_abs = acc_abs[size_t(j)];
      const double v = s + (c.with_c ? cv[size_t(r * N + j)] : 0.0) + row_v[size_t(l * N + j)] +
                       col_v[size_t(l * M + r % M)];
      ref.push_back(v);
      sub.push_back(got[size_t(r * N + j)]);
      ref_p.push_back(v > 0 ? v * v : 0.0);
      sub_p.push_back(got_p[size_t(r * N + j)]);
      floor_acc = std::max(floor_acc, s_abs);
    }
  }
  floor_acc = K > 0 ? floor_acc / std::sqrt(double(K)) : 0.0;
  EXPECT_TRUE(close("d", sub, ref, reduction_tolerance(t, K), N, floor_acc));
  if (c.act) {
    double mx = 0.0;
    for (double v : ref) mx = std::max(mx, std::fabs(v));
    EXPECT_TRUE(close("postact", sub_p, ref_p, reduction_tolerance(t, K) * 3, N, floor_acc * 2 * mx));
  }
}

class GemmBiasTest : public GpuTest, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (!fused_tile_compiled(GetParam(), {detail::GemmEpilogue::kBias}))
      GTEST_SKIP() << fused_tile_name(GetParam()) << " not compiled for these epilogues (instances_ab.txt: "
                   << "-DQUACK_GEMM_AB_INSTANCES=ON)";
    setenv("QUACK_GEMM_TILE_N", GetParam(), 1);
  }
  void TearDown() override {
    unsetenv("QUACK_GEMM_TILE_N");
    GpuTest::TearDown();
  }
};

TEST_P(GemmBiasTest, GemmAndActBiasKinds) {
  const Shape3 shapes[] = {{127, 255, 63}, {1000, 3000, 520}, {256, 136, 128}};
  for (const Shape3& s : shapes)
    for (int bias : {kRowF32, kRowBf16, kCol, kRowF32 | kCol})
      for (bool act : {false, true}) {
        BiasCase c;
        c.M = s.M;
        c.N = s.N;
        c.K = s.K;
        c.bias = bias;
        c.act = act;
        c.seed = uint64_t(s.M + s.N * 7 + bias * 101 + (act ? 3 : 0));
        run_bias_case(c);
      }
  BiasCase c;
  c.L = 3;
  c.M = 200;
  c.N = 264;
  c.K = 100;
  c.bias = kRowF32 | kCol;
  c.with_c = true;
  run_bias_case(c);
  c.act = true;
  run_bias_case(c);
  c = BiasCase{};
  c.M = 300;
  c.N = 520;
  c.K = 64;
  c.bias = kRowF32 | kCol;
  c.col_major_d = true;  // the kernel's Dᵀ: the user's row vector is its column vector
  run_bias_case(c);
  c.K = 0;  // the fill kernel
  run_bias_case(c);
  c.col_major_d = false;
  c.with_c = true;
  run_bias_case(c);
}

// 16-bit bias vectors where the kernel reads them as its column bias, which fp32-only tests never
// ran: bias.col bf16 (row-major d), and a bf16 bias.row on a column-major d (the kernel computes
// Dᵀ: the user's row vector is its column vector; the bf16 bias.col then its row vector); gemm
// and gemm_act (relu_sq, with preact), with C, batches, K = 0 (the fill kernel's 16-bit loads).
TEST_P(GemmBiasTest, Bias16BitColumnAndColumnMajorD) {
  for (bool col_major_d : {false, true})
    for (int bias : {kCol16, kRowBf16, kRowBf16 | kCol16})
      for (bool act : {false, true}) {
        if (!col_major_d && bias == kRowBf16) continue;  // a row-major d's 16-bit row bias: GemmAndActBiasKinds
        BiasCase c;
        c.M = 300;
        c.N = 520;
        c.K = 64;
        c.bias = bias;
        c.act = act;
        c.col_major_d = col_major_d;
        c.seed = uint64_t(bias * 101 + (act ? 3 : 0) + (col_major_d ? 7 : 0) + 23);
        run_bias_case(c);
        c.M = 127;
        c.N = 255;
        c.K = 0;  // the fill kernel
        run_bias_case(c);
        c.L = 3;
        c.M = 200;
        c.N = 264;
        c.K = 100;
        c.with_c = true;
        run_bias_case(c);
      }
}

// fp16 (the bias instances of gemm and gemm_act: 128x128 pingpong only): every bias kind (row
// vectors fp32 or fp16, the "kRowBf16" kind taking the inputs' dtype here), batches with C,
// column-major d, K = 0.
TEST_F(GemmGatedEdge, BiasFp16) {
  const Shape3 shapes[] = {{127, 255, 63}, {1000, 3000, 520}};
  for (const Shape3& s : shapes)
    for (int bias : {kRowF32, kRowBf16, kCol, kRowF32 | kCol})
      for (bool act : {false, true}) {
        BiasCase c;
        c.t = DType::kFloat16;
        c.M = s.M;
        c.N = s.N;
        c.K = s.K;
        c.bias = bias;
        c.act = act;
        c.seed = uint64_t(s.M + s.N * 7 + bias * 101 + (act ? 3 : 0) + 11);
        run_bias_case(c);
      }
  BiasCase c;
  c.t = DType::kFloat16;
  c.L = 3;
  c.M = 200;
  c.N = 264;
  c.K = 100;
  c.bias = kRowF32 | kCol;
  c.with_c = true;
  run_bias_case(c);
  c.act = true;
  run_bias_case(c);
  c = BiasCase{};
  c.t = DType::kFloat16;
  c.M = 300;
  c.N = 520;
  c.K = 64;
  c.bias = kRowF32 | kCol;
  c.col_major_d = true;
  run_bias_case(c);
  c.K = 0;
  run_bias_case(c);
}

// fp16 bias vectors read as the kernel's column bias (as Bias16BitColumnAndColumnMajorD, fp16
// instances: 128x128 pingpong): bias.col fp16 on a row-major d, bias.row fp16 on a column-major
// d (and both), gemm and gemm_act, with C and batches, K = 0.
TEST_F(GemmGatedEdge, BiasFp16Column) {
  for (bool col_major_d : {false, true})
    for (int bias : {kCol16, kRowBf16 | kCol16})  // kRowBf16: a row bias of the inputs' dtype (fp16)
      for (bool act : {false, true}) {
        BiasCase c;
        c.t = DType::kFloat16;
        c.M = 300;
        c.N = 520;
        c.K = 64;
        c.bias = bias;
        c.act = act;
        c.col_major_d = col_major_d;
        c.seed = uint64_t(bias * 101 + (act ? 3 : 0) + (col_major_d ? 7 : 0) + 29);
        run_bias_case(c);
        c.K = 0;
        run_bias_case(c);
        c.L = 3;
        c.M = 200;
        c.N = 264;
        c.K = 100;
        c.with_c = true;
        run_bias_case(c);
      }
}

INSTANTIATE_TEST_SUITE_P(Tiles, GemmBiasTest, ::testing::ValuesIn(kFusedTiles),
                         [](const ::testing::TestParamInfo<const char*>& i) { return fused_tile_name(i.param); });

}  // namespace
}  // namespace quack::test
