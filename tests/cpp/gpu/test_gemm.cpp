// Tier 2: gemm on the device against a float64 CPU reference. Skips without a GPU.
//
// Layouts: every (a, b, d) orientation with a kernel instance (kCases: a row-major, b column-major,
// d row-major; layout_cases(): the others, instantiated as GemmCases/Layouts).
// Inputs are random (never zero) and exact in their dtype; D (and its row padding) is poisoned
// with NaN, so an unwritten element fails and a write outside D's elements is caught. For large
// problems the reference is computed on a sample of rows (tile edges included) and every element
// of D is still checked to be finite.
// Tolerance (reference/tolerance.h): a sum over K products accumulated in fp32 and stored in d's
// dtype, rel = reduction_tolerance(d, K), scale = max(max|ref|, max Σ_k|a·b| / sqrt(K)).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>
#include <string>
#include <utility>
#include <vector>

#include "gemm/gemm_instances.h"
#include "gpu/gemm_mat.h"
#include "gpu/gpu_util.h"
#include "quack/errors.h"
#include "quack/gemm.h"
#include "reference/random.h"

namespace quack::test {
namespace {

struct GemmCase {
  int64_t L = 1, M = 1, N = 1, K = 1;
  DType ab = DType::kBFloat16, d = DType::kBFloat16;
  float alpha = 1.f, beta = 0.f;
  bool with_c = false;     // C present (read when beta ≠ 0; poisoned with NaN when beta = 0)
  int64_t pad = 0;         // extra elements on every leading stride (a multiple of 8)
  const char* layout = "rcr";  // a, b, d: 'r' row-major, 'c' column-major; c has d's layout
  bool in_place = false;   // with_c: C is D itself (D holds C's values before the call)
  bool tuned = false;      // GemmArgs::tuned
  bool device_scalars = false;  // alpha (and beta, with C) from device memory; host values wrong
  DType c_dt = DType::kInt32;   // C's dtype; kInt32 (the default) means d's
  bool dynamic = false;         // GemmArgs::tile_counter: one counter shared by every such case
  bool tight = false;           // leading strides = the contiguous extents (make_mat): TMA-unaligned when odd
  int64_t offset = 0;           // every operand's first element this many elements into its buffer
  bool workspace = false;       // the caller passes GemmArgs::workspace (else gemm allocates it)
  // GemmArgs::streamk_workspace: one workspace for every such case, zeroed once; each launch
  // must leave its flags zero (checked), and a second launch must give the same bits.
  bool streamk = false;
  uint64_t seed = 1;
  DType c_dtype() const { return c_dt == DType::kInt32 ? d : c_dt; }
};

// A case's host side: its random operands and the float64 reference at the rows and columns
// checked. It depends on the case alone (the seed gives the operands), not on the tile, scheduler
// or raster order it runs on: the tests that run a case on several share one (gemm_host once,
// run_case per launch) instead of drawing the same numbers and summing the same products again.
struct GemmHost {
  std::vector<double> a, b, cv;     // logical [l][row][col]: (L, M, K), (L, K, N), (L, M, N)
  std::vector<int64_t> rows, cols;  // checked: rows over all batches (r = l·M + i), columns
  std::vector<double> ref;          // (rows, cols)
  double floor = 0.0;               // max Σ_k|alpha·a·b| / sqrt(K)
};

GemmHost gemm_host(const GemmCase& c) {
  GemmHost h;
  Rng rng(c.seed);
  const int64_t L = c.L, M = c.M, N = c.N, K = c.K;
  h.a = random_values(rng, L * M * K, c.ab);
  h.b = random_values(rng, L * K * N, c.ab);
  if (c.with_c) h.cv = random_values(rng, L * M * N, c.c_dtype());
  if (M == 0 || N == 0 || L == 0) return h;

  // Rows of D (over all batches) to check against the reference, and, when rows x N x K is
  // large (N = 50257), a sample of columns too (tile edges of every tile width included).
  const bool full = double(L) * M * N * std::max<int64_t>(K, 1) <= double(1 << 26);
  for (int64_t r = 0; r < L * M; ++r) {
    const int64_t i = r % M;
    const bool edge = i < 2 || i >= M - 2 || i % 64 == 0 || i % 64 == 63 || i % 256 == 255;
    if (full || edge || r % std::max<int64_t>(1, (L * M) / 48) == 0) h.rows.push_back(r);
  }
  const bool all_cols = double(h.rows.size()) * N * std::max<int64_t>(K, 1) <= double(1 << 28);
  for (int64_t j = 0; j < N; ++j) {
    const bool edge = j < 2 || j >= N - 2 || j % 64 == 0 || j % 64 == 63 || j % 192 == 0 || j % 192 == 191;
    if (all_cols || edge || j % std::max<int64_t>(1, N / 256) == 0) h.cols.push_back(j);
  }
  const int64_t n = int64_t(h.cols.size());
  const std::vector<double> b_cols = all_cols ? std::vector<double>{} : gather_cols(h.b, L, K, N, h.cols);
  std::vector<double> s, s_abs;
  h.ref.reserve(h.rows.size() * h.cols.size());
  for (int64_t r : h.rows) {
    ref_row_sums(h.a, all_cols ? h.b : b_cols, r, r / M, n, K, s, s_abs);
    for (int64_t q = 0; q < n; ++q) {
      double v = double(c.alpha) * s[size_t(q)];
      if (c.with_c && c.beta != 0.f) v += double(c.beta) * h.cv[size_t(r * N + h.cols[size_t(q)])];
      h.ref.push_back(v);
      h.floor = std::max(h.floor, std::fabs(double(c.alpha)) * s_abs[size_t(q)]);
    }
  }
  h.floor = K > 0 ? h.floor / std::sqrt(double(K)) : 0.0;
  return h;
}

// Runs case c (its host side h: gemm_host(c)) once on the device and checks it.
void run_case(const GemmCase& c, const GemmHost& h) {
  const int64_t L = c.L, M = c.M, N = c.N, K = c.K;
  const std::vector<double>& a = h.a;
  const std::vector<double>& b = h.b;
  const std::vector<double>& cv = h.cv;

  Mat A = make_mat(c.ab, L, M, K, c.layout[0], c.pad, c.tight, c.offset);
  upload_into(A.mem, to_memory(A, a));
  Mat B = make_mat(c.ab, L, K, N, c.layout[1], c.pad, c.tight, c.offset);
  upload_into(B.mem, to_memory(B, b));
  Mat D = make_mat(c.d, L, M, N, c.layout[2], c.pad, c.tight, c.offset);  // NaN
  Mat C;
  if (c.with_c && !c.in_place) {
    C = make_mat(c.c_dtype(), L, M, N, c.layout[2], c.pad, c.tight, c.offset);  // NaN; filled only when it is read
    if (c.beta != 0.f) upload_into(C.mem, to_memory(C, cv));
  }
  if (c.with_c && c.in_place) upload_into(D.mem, to_memory(D, cv));  // out = alpha·A·B + beta·out

  GemmArgs args;
  args.a = A.arg;
  args.b = B.arg;
  args.d = D.arg;
  if (c.with_c) args.c = c.in_place ? D.arg : C.arg;
  args.alpha = c.alpha;
  args.beta = c.beta;
  args.tuned = c.tuned;
  DeviceBuffer scalars;
  if (c.device_scalars) {
    scalars = DeviceBuffer(2 * sizeof(float));
    const float host[2] = {c.alpha, c.beta};
    QUACK_CUDA_OK(cudaMemcpy(scalars.get(), host, sizeof(host), cudaMemcpyHostToDevice));
    args.alpha_device = static_cast<const float*>(scalars.get());
    if (c.with_c) args.beta_device = static_cast<const float*>(scalars.get()) + 1;
    args.alpha = 7.f;  // ignored: the device values win
    args.beta = 0.f;
  }
  // One counter for every dynamic case of the process: zeroed once, and each launch must leave
  // it at 0 (checked below), which the next case relies on.
  static DeviceBuffer* counter = nullptr;
  if (c.dynamic && counter == nullptr) {
    counter = new DeviceBuffer(sizeof(uint32_t));
    QUACK_CUDA_OK(cudaMemset(counter->get(), 0, sizeof(uint32_t)));
  }
  if (c.dynamic) args.tile_counter = static_cast<uint32_t*>(counter->get());
  DeviceBuffer ws;
  if (c.workspace) {
    const size_t bytes = gemm_workspace_size(args);
    ws = DeviceBuffer(bytes + 16);
    args.workspace = ws.get();
    args.workspace_bytes = bytes;
  }
  static DeviceBuffer* sk_ws = nullptr;
  size_t sk_flag_bytes = 0;
  if (c.streamk) {
    const size_t bytes = gemm_streamk_workspace_size(0);
    if (sk_ws == nullptr) {
      sk_ws = new DeviceBuffer(bytes);
      QUACK_CUDA_OK(cudaMemset(sk_ws->get(), 0, bytes));
    }
    int sms = 0;
    QUACK_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    sk_flag_bytes = size_t((sms * 4 + 255) / 256 * 256);
    args.streamk_workspace = sk_ws->get();
    args.streamk_workspace_bytes = bytes;
  }
  ASSERT_NO_THROW(gemm(args, nullptr));
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  if (c.streamk) {
    std::vector<uint8_t> flags(sk_flag_bytes, 1);
    QUACK_CUDA_OK(cudaMemcpy(flags.data(), sk_ws->get(), flags.size(), cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::count(flags.begin(), flags.end(), uint8_t(0)), int64_t(flags.size()))
        << "stream-K flags left set after the launch";
  }
  if (c.dynamic) {
    uint32_t left = 1;
    QUACK_CUDA_OK(cudaMemcpy(&left, counter->get(), sizeof(left), cudaMemcpyDeviceToHost));
    EXPECT_EQ(left, 0u) << "the tile counter is not back at 0 after the launch";
  }
  const std::vector<double> got = from_memory(D, download(D.mem));
  EXPECT_TRUE(gaps_untouched("d", D.mem));
  if (c.streamk && !c.in_place && M > 0 && N > 0 && L > 0 && K > 0) {
    // Deterministic: a second launch into a re-poisoned D gives the same bits (the partials are
    // added in a fixed order).
    D.mem.poison();
    ASSERT_NO_THROW(gemm(args, nullptr));
    QUACK_CUDA_OK(cudaDeviceSynchronize());
    const std::vector<double> again = from_memory(D, download(D.mem));
    int64_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i)
      differ += std::memcmp(&got[i], &again[i], sizeof(double)) != 0 ? 1 : 0;
    EXPECT_EQ(differ, 0) << "stream-K: two launches differ in " << differ << " elements";
  }
  if (M == 0 || N == 0 || L == 0) return;

  // Every element written (no NaN left from the poison).
  int64_t nonfinite = 0;
  for (double v : got) nonfinite += std::isfinite(v) ? 0 : 1;
  EXPECT_EQ(nonfinite, 0) << "d has " << nonfinite << " non-finite elements";

  // The rows and columns gemm_host checked against the reference.
  std::vector<double> sub;
  sub.reserve(h.ref.size());
  for (int64_t r : h.rows)
    for (int64_t j : h.cols) sub.push_back(got[size_t(r * N + j)]);
  EXPECT_TRUE(close("d", sub, h.ref, reduction_tolerance(c.d, K), int64_t(h.cols.size()), h.floor))
      << c.layout << " L=" << L << " M=" << M << " N=" << N << " K=" << K << " (" << h.rows.size()
      << " rows checked)";
}

void run_case(const GemmCase& c) { run_case(c, gemm_host(c)); }

struct Named {
  const char* name;
  GemmCase c;
};

GemmCase mk(int64_t M, int64_t N, int64_t K) {
  GemmCase c;
  c.M = M;
  c.N = N;
  c.K = K;
  c.seed = uint64_t(M * 1000003 + N * 1009 + K);
  return c;
}

template <typename F>
GemmCase with(GemmCase c, F f) {
  f(c);
  return c;
}

const std::vector<Named> kCases = {
    {"M1_N1_K1", mk(1, 1, 1)},
    {"M127_N255_K63", mk(127, 255, 63)},
    {"M256_N512_K64", mk(256, 512, 64)},
    {"M1_N255_K64", mk(1, 255, 64)},
    {"M2_N255_K64", mk(2, 255, 64)},
    {"M128_N250_K64", mk(128, 250, 64)},
    {"M128_N40_K64", mk(128, 40, 64)},
    {"M129_N257_K65", mk(129, 257, 65)},  // odd cluster: the second CTA of the last cluster idles
    {"M1000_N3000_K520", mk(1000, 3000, 520)},
    {"M2048_N2048_K2048", mk(2048, 2048, 2048)},
    {"M64_N8_K4096", mk(64, 8, 4096)},  // long K, one narrow tile
    {"alpha_M300_N200_K100", with(mk(300, 200, 100), [](GemmCase& c) { c.alpha = -1.75f; })},
    {"padded_M200_N136_K72", with(mk(200, 136, 72), [](GemmCase& c) { c.pad = 24; })},
    {"batch3_M200_N300_K100", with(mk(200, 300, 100), [](GemmCase& c) { c.L = 3; })},
    {"fp16_M127_N255_K63", with(mk(127, 255, 63), [](GemmCase& c) { c.ab = c.d = DType::kFloat16; })},
    {"fp16_M1000_N3000_K520", with(mk(1000, 3000, 520), [](GemmCase& c) { c.ab = c.d = DType::kFloat16; })},
    {"bf16_f32out_M127_N255_K63", with(mk(127, 255, 63), [](GemmCase& c) { c.d = DType::kFloat32; })},
    {"bf16_f32out_M512_N1024_K256", with(mk(512, 1024, 256), [](GemmCase& c) { c.d = DType::kFloat32; })},
    {"fp16_f32out_M300_N200_K100",
     with(mk(300, 200, 100), [](GemmCase& c) { c.ab = DType::kFloat16; c.d = DType::kFloat32; })},
    {"c_beta_M127_N255_K63", with(mk(127, 255, 63), [](GemmCase& c) { c.with_c = true; c.beta = 0.5f; c.alpha = 2.f; })},
    {"c_beta_M1000_N600_K200", with(mk(1000, 600, 200), [](GemmCase& c) { c.with_c = true; c.beta = -1.f; })},
    {"c_beta_f32out_M130_N260_K70",
     with(mk(130, 260, 70), [](GemmCase& c) { c.with_c = true; c.beta = 0.25f; c.d = DType::kFloat32; })},
    {"c_nan_beta0_M200_N300_K100", with(mk(200, 300, 100), [](GemmCase& c) { c.with_c = true; })},  // C never read
    {"K0_zeros_M100_N300", mk(100, 300, 0)},
    {"K0_beta_c_M100_N300", with(mk(100, 300, 0), [](GemmCase& c) { c.with_c = true; c.beta = 2.f; })},
    {"K0_batch2_f32out", with(mk(33, 17, 0), [](GemmCase& c) { c.L = 2; c.d = DType::kFloat32; })},
    {"M0_N128_K64", mk(0, 128, 64)},
    {"M64_N0_K64", mk(64, 0, 64)},
};

// The other layouts, named <a><b><d>_...: 'r' row-major, 'c' column-major (c like d). With d
// row-major the kernel runs them as given: rrr on the (K, MN) mainloop (instances _km), crr on
// (MN, MN) (_mm); with d column-major it computes Dᵀ = Bᵀ·Aᵀ: rcc on _kk, ccc on _km, crc on _mm.
// Every leading stride is padded to 16 bytes in memory, so the tails along the contiguous
// dimensions (N of a row-major d, M of a column-major one: 127, 255, 257 elements) are not 16-byte
// multiples and exercise the clipped store of the last subtile.
GemmCase lay(const char* layout, GemmCase c) {
  c.layout = layout;
  c.seed += uint64_t(layout[0] * 7 + layout[1] * 3 + layout[2]);
  return c;
}

std::vector<Named> layout_cases() {
  static std::deque<std::string> names;  // keeps the names' storage alive (push_back keeps references)
  std::vector<std::pair<std::string, GemmCase>> v;
  for (const char* l : {"rrr", "crr", "rcc", "ccc", "crc"}) {
    const std::string p = std::string(l) + "_";
    v.push_back({p + "M127_N255_K63", lay(l, mk(127, 255, 63))});
    v.push_back({p + "M129_N257_K65", lay(l, mk(129, 257, 65))});
    v.push_back({p + "M1000_N3000_K520", lay(l, mk(1000, 3000, 520))});
    v.push_back({p + "batch3_M200_N300_K100", lay(l, with(mk(200, 300, 100), [](GemmCase& c) { c.L = 3; }))});
    v.push_back({p + "padded_M200_N136_K72", lay(l, with(mk(200, 136, 72), [](GemmCase& c) { c.pad = 24; }))});
    v.push_back({p + "fp16_M127_N255_K63",
                 lay(l, with(mk(127, 255, 63), [](GemmCase& c) { c.ab = c.d = DType::kFloat16; }))});
    v.push_back({p + "f32out_M127_N255_K63", lay(l, with(mk(127, 255, 63), [](GemmCase& c) { c.d = DType::kFloat32; }))});
    v.push_back({p + "c_beta_M130_N260_K70", lay(l, with(mk(130, 260, 70), [](GemmCase& c) {
                                                   c.with_c = true;
                                                   c.alpha = 2.f;
                                                   c.beta = 0.5f;
                                                 }))});
  }
  // A MN-major with B K-major (_mk, bf16 -> bf16 only), directly and swapped.
  v.push_back({"ccr_M127_N255_K63", lay("ccr", mk(127, 255, 63))});
  v.push_back({"ccr_M1000_N3000_K520", lay("ccr", mk(1000, 3000, 520))});
  v.push_back({"ccr_batch3_M200_N300_K100", lay("ccr", with(mk(200, 300, 100), [](GemmCase& c) { c.L = 3; }))});
  v.push_back({"ccr_c_beta_M130_N260_K70", lay("ccr", with(mk(130, 260, 70), [](GemmCase& c) {
                                                 c.with_c = true;
                                                 c.beta = 0.5f;
                                               }))});
  v.push_back({"rrc_M129_N257_K65", lay("rrc", mk(129, 257, 65))});
  v.push_back({"rrc_M1000_N3000_K520", lay("rrc", mk(1000, 3000, 520))});
  v.push_back({"rrr_M2048_N2048_K2048", lay("rrr", mk(2048, 2048, 2048))});
  v.push_back({"crr_M2048_N2048_K2048", lay("crr", mk(2048, 2048, 2048))});
  v.push_back({"crr_M1_N255_K64", lay("crr", mk(1, 255, 64))});     // a (1, K) column-major, K apart by 8
  v.push_back({"crr_M64_N8_K4096", lay("crr", mk(64, 8, 4096))});   // long K, MN-major A
  v.push_back({"rrr_M64_N8_K4096", lay("rrr", mk(64, 8, 4096))});   // long K, MN-major B
  v.push_back({"rcc_M255_N1_K64", lay("rcc", mk(255, 1, 64))});     // d (M, 1) column-major: kernel M' = 1
  v.push_back({"rcc_M1_N255_K64", lay("rcc", mk(1, 255, 64))});
  v.push_back({"rcc_fp16_f32out_M300_N200_K100", lay("rcc", with(mk(300, 200, 100), [](GemmCase& c) {
                                                         c.ab = DType::kFloat16;
                                                         c.d = DType::kFloat32;
                                                       }))});
  v.push_back({"ccc_c_beta_f32out_batch3_M130_N260_K70", lay("ccc", with(mk(130, 260, 70), [](GemmCase& c) {
                                                                 c.L = 3;
                                                                 c.with_c = true;
                                                                 c.beta = -1.f;
                                                                 c.d = DType::kFloat32;
                                                               }))});
  v.push_back({"crc_c_nan_beta0_M200_N300_K100", lay("crc", with(mk(200, 300, 100), [](GemmCase& c) { c.with_c = true; }))});
  v.push_back({"rcc_K0_beta_c_M100_N300", lay("rcc", with(mk(100, 300, 0), [](GemmCase& c) {
                                                  c.with_c = true;
                                                  c.beta = 2.f;
                                                }))});
  v.push_back({"ccc_K0_batch2_f32out", lay("ccc", with(mk(33, 17, 0), [](GemmCase& c) {
                                               c.L = 2;
                                               c.d = DType::kFloat32;
                                             }))});
  std::vector<Named> out;
  for (auto& [n, c] : v) {
    names.push_back(n);
    out.push_back({names.back().c_str(), c});
  }
  return out;
}

class GemmCases : public GpuTest, public ::testing::WithParamInterface<Named> {};

TEST_P(GemmCases, MatchesReference) { run_case(GetParam().c); }

INSTANTIATE_TEST_SUITE_P(All, GemmCases, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Named>& i) { return std::string(i.param.name); });

INSTANTIATE_TEST_SUITE_P(Layouts, GemmCases, ::testing::ValuesIn(layout_cases()),
                         [](const ::testing::TestParamInfo<Named>& i) { return std::string(i.param.name); });

// Two calls on one stream with different shapes reuse the kernel (attributes set once) and
// leave no error behind; mismatched K still throws before any launch.
class Gemm : public GpuTest {};

TEST_F(Gemm, RepeatedCallsAndErrorAfterwards) {
  run_case(mk(256, 256, 128));
  run_case(mk(300, 260, 70));
  DeviceTensor A = alloc_tensor(DType::kBFloat16, 64, 63);
  Layout lb;
  lb.row_stride = 1;
  lb.col_stride = 64;
  DeviceTensor B = alloc_tensor(DType::kBFloat16, 62, 64, lb);  // K = 62, a has K = 63
  DeviceTensor D = alloc_tensor(DType::kBFloat16, 64, 64);
  GemmArgs args;
  args.a = A.ref;
  args.b = B.ref;
  args.d = D.ref;
  EXPECT_THROW(gemm(args, nullptr), InvalidArgument);
}

// Every tile configuration compiled (the kernel names' tile parts in the instance table: 128x256
// cooperative, the default; 128x128 and 128x192 pingpong; 128x64 without a cluster and with a
// 1x2 cluster; 64x128; in A/B builds also those of instances_ab.txt), each forced through
// QUACK_GEMM_TILE; a layout or dtype without that tile runs the default.
std::vector<std::string> tile_names() {
  std::vector<std::string> out;
  for (const detail::GemmInstance& i : detail::kGemmInstances)
    if (i.epilogue == detail::GemmEpilogue::kLinComb && std::find(out.begin(), out.end(), i.tile) == out.end())
      out.push_back(i.tile);
  return out;
}

// Layout combinations without a kernel instance throw before any launch and leave no error.
// Every tile configuration (tile_names) on tails, batches, C and the row-major B of dgrad, then
// "auto" (gemm.cpp's rule). The last cases give each persistent CTA several tiles (pingpong:
// both warpgroups, several turns each; K = 64 is one k-tile per tile).
TEST_F(Gemm, EveryTileConfig) {
  std::vector<GemmCase> cases = {mk(127, 255, 63), mk(129, 257, 65), mk(1000, 3000, 520), mk(128, 8192, 512),
                                 lay("rrr", mk(200, 300, 100)), lay("rrr", mk(129, 1000, 4096))};
  cases.push_back(with(mk(200, 300, 100), [](GemmCase& c) { c.L = 3; }));
  cases.push_back(with(mk(130, 260, 70), [](GemmCase& c) { c.with_c = true; c.beta = 0.5f; }));
  // C loaded into the D buffers (kReuseSmemC) beside a clipped subtile (N = 255: plain stores).
  cases.push_back(with(mk(300, 255, 130), [](GemmCase& c) { c.with_c = true; c.beta = -2.f; }));
  cases.push_back(with(mk(1000, 1000, 128), [](GemmCase& c) { c.with_c = true; c.beta = 1.f; c.L = 2; }));
  cases.push_back(lay("rrr", mk(74, 256, 384)));  // the Linear dgrad that crashed in Python (auto -> 128x64)
  cases.push_back(mk(4096, 4096, 200));
  cases.push_back(lay("rrr", mk(2048, 4096, 64)));
  cases.push_back(with(lay("rrr", mk(3000, 2000, 333)), [](GemmCase& c) { c.with_c = true; c.beta = -1.5f; }));
  // Tails of the 192-wide tile with several tiles per CTA (N = 1000: 5 full tiles and one of 40
  // columns; M = 1100: a partial 2x1 cluster), and an fp32 C.
  cases.push_back(lay("rrr", mk(1100, 1000, 256)));
  cases.push_back(with(mk(640, 2000, 192), [](GemmCase& c) { c.with_c = true; c.beta = 0.5f; c.c_dt = DType::kFloat32; }));
  // The fp32 accumulation of linear + cross-entropy's dweight (a column-major, b row-major: mm;
  // fp32 D += A·B in place, C = D; the rule's 128x192ppa1d2 where C is read, and the A/B builds'
  // variants, instances_ab.txt: 128x256a0d2 / a1d2 / a2d2 / a3d2, 128x128ppa1d2 / a2d2 / a0d4): M and N tails (N = 600: a
  // last 128x256 tile of 3 subtiles, N = 280: of one, fewer than the ring's buffers), a 2x1
  // cluster's partial pair (M = 1000, 300), several tiles per CTA (8192 x 1024: 256, 384 or 512 tiles,
  // K = 64 one k-tile each), beta ≠ 1 and alpha, and rows TMA cannot address (N = 1001, tight:
  // C staged by plain loads into the ring's buffers, D by plain stores).
  auto acc32 = [](int64_t M, int64_t N, int64_t K, float alpha, float beta) {
    return with(lay("crr", mk(M, N, K)), [=](GemmCase& c) {
      c.d = DType::kFloat32;
      c.with_c = true;
      c.in_place = true;
      c.alpha = alpha;
      c.beta = beta;
    });
  };
  cases.push_back(acc32(1000, 600, 300, 1.f, 1.f));
  cases.push_back(acc32(300, 280, 100, 2.f, -0.5f));
  cases.push_back(acc32(8192, 1024, 64, 1.f, 1.f));
  cases.push_back(with(acc32(260, 1001, 96, 1.f, 1.f), [](GemmCase& c) { c.tight = true; }));
  std::vector<std::string> tiles = tile_names();
  tiles.push_back("auto");
  for (const GemmCase& c : cases) {
    const GemmHost h = gemm_host(c);  // one draw and reference for every tile
    for (const std::string& tile : tiles) {
      setenv("QUACK_GEMM_TILE", tile.c_str(), 1);
      SCOPED_TRACE("tile " + tile + ", M " + std::to_string(c.M) + " N " + std::to_string(c.N) + " K " +
                   std::to_string(c.K));
      run_case(c, h);
    }
  }
  unsetenv("QUACK_GEMM_TILE");
}

// A call from a thread that has made no CUDA call yet (PyTorch's autograd worker runs the
// Linear backward on one): the host code's driver calls need the primary context current there
// (DeviceGuard). Without it CuTe's TMA descriptor encoding fails and the process dies.
TEST_F(Gemm, CallFromNewThread) {
  Rng rng(11);
  const int64_t M = 74, N = 256, K = 384;  // the Linear dgrad of test_linear.py: a, b row-major
  Mat A = make_mat(DType::kBFloat16, 1, M, K, 'r', 0);
  upload_into(A.mem, random_values(rng, M * K, DType::kBFloat16));
  Mat B = make_mat(DType::kBFloat16, 1, K, N, 'r', 0);
  upload_into(B.mem, random_values(rng, K * N, DType::kBFloat16));
  for (const char* tile : {"256", "128", "192", "64", "64x128", "64x2"}) {
    SCOPED_TRACE(std::string("tile N ") + tile);
    setenv("QUACK_GEMM_TILE_N", tile, 1);
    Mat D_thread = make_mat(DType::kBFloat16, 1, M, N, 'r', 0), D_main = make_mat(DType::kBFloat16, 1, M, N, 'r', 0);
    GemmArgs args;
    args.a = A.arg;
    args.b = B.arg;
    args.d = D_thread.arg;
    std::string error;
    std::thread t([&] {  // only the library call on this thread: no CUDA call before it
      try {
        gemm(args, nullptr);
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    t.join();
    EXPECT_EQ(error, "");
    args.d = D_main.arg;
    ASSERT_NO_THROW(gemm(args, nullptr));
    QUACK_CUDA_OK(cudaDeviceSynchronize());
    const std::vector<double> got = download(D_thread.mem), want = download(D_main.mem);
    int64_t finite = 0;
    for (double v : want) finite += std::isfinite(v) ? 1 : 0;
    EXPECT_EQ(finite, M * N);  // the main-thread result is complete (NaN poison replaced)
    EXPECT_TRUE(got == want) << "the new thread's d differs from the main thread's";
  }
  unsetenv("QUACK_GEMM_TILE_N");
}

// fp32 C into a bf16 D (the _cf32 instances), tails and a batch; beta = 0 never reads C; K = 0
// reads it as fp32.
TEST_F(Gemm, Float32CIntoBf16D) {
  const std::vector<GemmCase> cases = {
      with(mk(127, 255, 63), [](GemmCase& c) { c.with_c = true; c.beta = 0.5f; c.c_dt = DType::kFloat32; }),
      with(mk(1000, 600, 200), [](GemmCase& c) { c.with_c = true; c.beta = -1.f; c.L = 2; c.c_dt = DType::kFloat32; }),
      with(lay("rrr", mk(300, 520, 136)), [](GemmCase& c) { c.with_c = true; c.beta = 2.f; c.c_dt = DType::kFloat32; }),
      with(mk(200, 300, 100), [](GemmCase& c) { c.with_c = true; c.c_dt = DType::kFloat32; }),  // NaN C, beta 0
      with(mk(100, 300, 0), [](GemmCase& c) { c.with_c = true; c.beta = 2.f; c.c_dt = DType::kFloat32; }),
      // a column-major, b row-major (mm): the _cf32 mm instance (128x192 pingpong with the C
      // ring) that stores linear + cross-entropy's last dweight rows; several tiles per CTA,
      // a 2x1 cluster's partial pair, rows TMA cannot address (N = 1001, tight)
      with(lay("crr", mk(1000, 600, 300)), [](GemmCase& c) { c.with_c = true; c.beta = 1.f; c.c_dt = DType::kFloat32; }),
      with(lay("crr", mk(8192, 1024, 64)), [](GemmCase& c) { c.with_c = true; c.beta = 1.f; c.c_dt = DType::kFloat32; }),
      with(lay("crr", mk(260, 1001, 96)), [](GemmCase& c) {
        c.with_c = true;
        c.beta = 0.5f;
        c.c_dt = DType::kFloat32;
        c.tight = true;
      })};
  for (const GemmCase& c : cases) {
    SCOPED_TRACE("M " + std::to_string(c.M) + " N " + std::to_string(c.N) + " K " + std::to_string(c.K));
    run_case(c);
  }
}

// The dynamic tile scheduler (GemmArgs::tile_counter) on every tile configuration (128x64
// without a cluster runs the static schedule: launch.cuh): one wave,
// several tiles per cluster (pingpong: both warpgroups, several turns), tails, batches, C, the
// 2x1 and 1x2 clusters; the counter is shared by all cases and must be 0 after each launch.
TEST_F(Gemm, DynamicScheduler) {
  std::vector<GemmCase> cases = {mk(127, 255, 63), mk(1000, 3000, 520), lay("rrr", mk(2048, 4096, 64)),
                                 mk(4096, 4096, 200), lay("rrr", mk(128, 8192, 512))};
  cases.push_back(with(mk(200, 300, 100), [](GemmCase& c) { c.L = 3; }));
  cases.push_back(with(lay("rrr", mk(3000, 2000, 333)), [](GemmCase& c) { c.with_c = true; c.beta = -1.5f; }));
  for (GemmCase c : cases) {
    c.dynamic = true;
    const GemmHost h = gemm_host(c);  // one draw and reference for every tile
    for (const std::string& tile : tile_names()) {
      setenv("QUACK_GEMM_TILE", tile.c_str(), 1);
      SCOPED_TRACE("tile " + tile + ", M " + std::to_string(c.M) + " N " + std::to_string(c.N) + " K " +
                   std::to_string(c.K));
      run_case(c, h);
    }
  }
  unsetenv("QUACK_GEMM_TILE");
}

// A 64 x 64 x 64 bf16 problem for the checks that throw before any launch.
struct TinyGemm {
  Mat A = make_mat(DType::kBFloat16, 1, 64, 64, 'r', 0), B = make_mat(DType::kBFloat16, 1, 64, 64, 'c', 0),
      D = make_mat(DType::kBFloat16, 1, 64, 64, 'r', 0);
  GemmArgs args() const {
    GemmArgs g;
    g.a = A.arg;
    g.b = B.arg;
    g.d = D.arg;
    return g;
  }
};

// Stream-K (src/gemm/streamk.h), forced (QUACK_GEMM_STREAMK=1) on every cooperative tile
// configuration with the caller's workspace: a few tiles split over many clusters (long K), a
// single wave split (2048x2048x2048 and 4096x1000x1000 on 128x256: 64 cluster tiles), full
// waves plus the split tail (4096x3000x640, 3 x 2048x2048x1000), M / N / K tails, K not a
// multiple of 64, K < 128 (one or two k-blocks: whole tiles over fewer units), batches, C with
// beta (also in place, and an fp32 C), an fp32 D, every (a, b, d) layout; D poisoned before the
// launch, flags zero after it, and a second launch bitwise equal. Then the rule (env unset,
// workspace given) on one shape on each side of its threshold, and the allocating path (env forced,
// no workspace); QUACK_GEMM_STREAMK=x throws.
TEST_F(Gemm, StreamK) {
  auto sk = [](GemmCase c) {
    c.streamk = true;
    return c;
  };
  std::vector<GemmCase> cases = {
      sk(mk(256, 256, 8192)),  // one cluster tile, 128 k-blocks: 32 units of 4
      sk(mk(127, 255, 4033)),  // tails, K % 64 = 1
      sk(mk(1000, 600, 1000)),
      sk(mk(2048, 2048, 2048)),
      sk(mk(4096, 1000, 1000)),
      sk(mk(4096, 3000, 640)),  // 128x256: 192 cluster tiles on 66 clusters, 1 wave data-parallel
      sk(with(mk(2048, 2048, 1000), [](GemmCase& c) { c.L = 3; })),  // 192 tiles over 3 batches
      sk(mk(300, 200, 64)),    // one k-block
      sk(mk(300, 200, 100)),   // two k-blocks, K < 2·BK
      sk(with(mk(200, 300, 700), [](GemmCase& c) { c.L = 3; })),
      sk(with(mk(640, 512, 3000), [](GemmCase& c) { c.L = 2; c.with_c = true; c.beta = -0.75f; c.alpha = 1.5f; })),
      sk(with(mk(500, 520, 2000), [](GemmCase& c) { c.with_c = true; c.beta = 1.f; c.in_place = true; })),
      sk(with(mk(500, 520, 2000), [](GemmCase& c) { c.with_c = true; c.beta = 2.f; c.c_dt = DType::kFloat32; })),
      sk(with(mk(300, 280, 1500), [](GemmCase& c) { c.d = DType::kFloat32; })),
      sk(with(mk(257, 1001, 1001), [](GemmCase& c) { c.tight = true; })),  // padded copies, plain stores
  };
  for (const char* l : {"rrr", "crr", "rcc", "ccc", "crc"}) cases.push_back(sk(lay(l, mk(700, 900, 1500))));
  setenv("QUACK_GEMM_STREAMK", "1", 1);
  for (const GemmCase& c : cases) {
    const GemmHost h = gemm_host(c);  // one draw and reference for every tile
    for (const std::string& tile : tile_names()) {
      if (tile.find("pp") != std::string::npos) continue;  // pingpong: no stream-K (tile_config.cuh)
      setenv("QUACK_GEMM_TILE", tile.c_str(), 1);
      SCOPED_TRACE("tile " + tile + ", " + c.layout + " L " + std::to_string(c.L) + " M " + std::to_string(c.M) +
                   " N " + std::to_string(c.N) + " K " + std::to_string(c.K));
      run_case(c, h);
    }
  }
  // The library's own workspace (forced, none given).
  setenv("QUACK_GEMM_TILE", "128x256", 1);
  run_case(mk(1000, 600, 1000));
  // The rule with the test's workspace: off at 2048x2048x16384 on 128x256 (64 cluster tiles on
  // 66 clusters), on at 11264x2048x8192 (5.33 waves, 128 k-blocks: the estimate gains 6.9 %);
  // the pingpong tiles ignore it.
  unsetenv("QUACK_GEMM_STREAMK");
  run_case(sk(mk(2048, 2048, 16384)));
  run_case(sk(mk(11264, 2048, 8192)));
  setenv("QUACK_GEMM_TILE", "128x192pp", 1);
  run_case(sk(mk(2048, 2048, 4096)));
  unsetenv("QUACK_GEMM_TILE");
  setenv("QUACK_GEMM_STREAMK", "x", 1);
  const TinyGemm tiny;
  GemmArgs args = tiny.args();
  EXPECT_THROW(gemm(args, nullptr), InvalidArgument);
  unsetenv("QUACK_GEMM_STREAMK");
  // A workspace smaller than gemm_streamk_workspace_size, or misaligned, throws.
  DeviceBuffer small(1024);
  args.streamk_workspace = small.get();
  args.streamk_workspace_bytes = 1024;
  EXPECT_THROW(gemm(args, nullptr), InvalidArgument);
  args.streamk_workspace = static_cast<char*>(small.get()) + 4;
  EXPECT_THROW(can_implement(args), InvalidArgument);
}

// The tile order knob (QUACK_GEMM_RASTER: bands along M or N, QuACK's heuristic, band widths,
// serpentine) on the pingpong tiles: every tile written once (results match), several tiles
// per CTA and partial bands; a malformed value throws InvalidArgument before any launch.
TEST_F(Gemm, RasterOrders) {
  const std::vector<GemmCase> cases = {mk(1000, 3000, 520), lay("rrr", mk(2048, 4096, 64)), mk(4096, 1000, 200)};
  for (const GemmCase& c : cases) {
    const GemmHost h = gemm_host(c);  // one draw and reference for every tile and order
    for (const char* tile : {"128x128pp", "128x192pp", "128x256"}) {
      setenv("QUACK_GEMM_TILE", tile, 1);
      for (const char* raster : {"m8", "n8", "h8s", "m3s", "n1", "m"}) {
        setenv("QUACK_GEMM_RASTER", raster, 1);
        SCOPED_TRACE(std::string("tile ") + tile + ", raster " + raster + ", M " + std::to_string(c.M) + " N " +
                     std::to_string(c.N));
        run_case(c, h);
      }
    }
  }
  setenv("QUACK_GEMM_RASTER", "x8", 1);
  const TinyGemm tiny;
  GemmArgs args = tiny.args();
  EXPECT_THROW(gemm(args, nullptr), InvalidArgument);
  unsetenv("QUACK_GEMM_RASTER");
  unsetenv("QUACK_GEMM_TILE");
}

// Leading dimensions that are not 16-byte multiples and bases TMA cannot address (issue 16):
// a and b through padded copies (gemm_pad.h; the workspace allocated by gemm or passed by the
// caller), c and d through the epilogue's plain loads and stores. Vocabulary widths (N = 1001,
// 50257), K = 1000 and 1001, M, N and K tails, every (a, b, d) layout with an instance, batches,
// C (also fp32), an fp32 D, and the tiles on whose epilogue the plain path runs (pingpong 64 x 64
// and 64 x 32 subtiles, cooperative 128 x 32). Every operand's memory is exactly its elements
// plus the offset (D and C poisoned around them: gaps_untouched).
TEST_F(Gemm, UnalignedOperands) {
  auto tight = [](GemmCase c, int64_t offset = 0) {
    c.tight = true;
    c.offset = offset;
    return c;
  };
  std::vector<GemmCase> cases = {
      tight(mk(300, 1001, 256)),                                  // d rows of 2002 bytes
      tight(mk(130, 50257, 136)),                                 // the GPT-2 vocabulary
      tight(mk(257, 640, 1000)),                                  // K = 1000: 2000-byte rows, aligned
      tight(mk(257, 640, 1001)),                                  // K = 1001: a and b copied
      tight(mk(129, 1001, 1001), 1),                              // every base one element in
      tight(lay("rrr", mk(300, 1001, 520))),                      // dgrad layout: b (K, N) copied
      tight(lay("rrr", mk(130, 50257, 72))),
      tight(lay("crr", mk(1001, 264, 1001))),                     // wgrad layout: a column-major
      tight(lay("rcc", mk(1001, 300, 200))),                      // d column-major (kernel Dᵀ)
      tight(lay("ccc", mk(500, 1001, 999))),
      tight(lay("crc", mk(77, 1001, 133))),
      tight(lay("ccr", mk(301, 300, 1001))),
      tight(lay("rrc", mk(1001, 301, 65))),
      tight(with(mk(200, 1001, 100), [](GemmCase& c) { c.L = 3; })),  // batch strides unaligned too
      tight(with(mk(300, 1001, 300), [](GemmCase& c) { c.with_c = true; c.beta = -0.5f; c.alpha = 2.f; })),
      tight(with(mk(300, 1001, 300), [](GemmCase& c) { c.with_c = true; c.beta = 1.f; c.in_place = true; })),
      tight(with(mk(130, 1001, 200), [](GemmCase& c) { c.with_c = true; c.beta = 2.f; c.c_dt = DType::kFloat32; })),
      tight(with(mk(300, 1001, 136), [](GemmCase& c) { c.d = DType::kFloat32; })),  // 4004-byte rows
      tight(with(mk(300, 1001, 136), [](GemmCase& c) { c.ab = c.d = DType::kFloat16; })),
      tight(with(mk(300, 1001, 136), [](GemmCase& c) { c.workspace = true; })),
      tight(mk(100, 1001, 0)),                                    // K = 0 fill
  };
  for (const GemmCase& c : cases) {
    const GemmHost h = gemm_host(c);  // one draw and reference for every tile
    for (const char* tile : {"auto", "128x192pp", "128x128pp", "128x256", "64x128"}) {
      setenv("QUACK_GEMM_TILE", tile, 1);
      SCOPED_TRACE(std::string("tile ") + tile + ", layout " + c.layout + " L " + std::to_string(c.L) + " M " +
                   std::to_string(c.M) + " N " + std::to_string(c.N) + " K " + std::to_string(c.K));
      run_case(c, h);
    }
  }
  unsetenv("QUACK_GEMM_TILE");
}

// The unaligned benchmark shape at full size (M = 8192, N = 50257, K = 4096, a and b
// row-major: b copied, d stored by plain stores), on the default rule's tile; sampled reference.
// (--gtest_filter=-*Large* leaves it out: ~6 GB of host memory for the float64 copies.)
TEST_F(Gemm, UnalignedVocabularyLarge) {
  GemmCase c = lay("rrr", mk(8192, 50257, 4096));
  c.tight = true;
  run_case(c);
}

// alpha and beta from device memory (GemmArgs::alpha_device / beta_device); a device beta of 0
// must not read C (NaN there).
TEST_F(Gemm, DeviceScalars) {
  auto dev = [](GemmCase c) {
    c.device_scalars = true;
    return c;
  };
  run_case(dev(with(mk(127, 255, 63), [](GemmCase& c) { c.alpha = -1.5f; })));
  run_case(dev(with(mk(300, 520, 200), [](GemmCase& c) { c.with_c = true; c.alpha = 0.5f; c.beta = -2.f; })));
  run_case(dev(with(mk(300, 520, 200), [](GemmCase& c) { c.with_c = true; c.alpha = 2.f; c.beta = 0.f; })));  // NaN C
  run_case(dev(with(lay("rcc", mk(130, 260, 70)), [](GemmCase& c) { c.with_c = true; c.beta = 0.25f; })));
  run_case(dev(with(mk(100, 300, 0), [](GemmCase& c) { c.with_c = true; c.beta = 3.f; })));  // K = 0
  run_case(dev(with(mk(100, 300, 0), [](GemmCase& c) { c.with_c = true; c.beta = 0.f; })));  // K = 0, NaN C
}

// tuned = true: the first call per key times both bf16 configurations on a scratch D and
// caches the choice (QUACK_CACHE_DIR points at a fresh folder); results match the reference,
// also in place (C = D, which must not be written while tuning), and a second call is served
// from the cache.
TEST_F(Gemm, TunedCallsAreCorrectAndCached) {
  const std::string dir = "/tmp/quack_tune_test_" + std::to_string(::getpid());
  setenv("QUACK_CACHE_DIR", dir.c_str(), 1);
  for (const GemmCase& base : {mk(128, 1024, 512), lay("rrr", mk(200, 300, 100))}) {
    GemmCase c = base;
    c.tuned = true;
    run_case(c);
    run_case(c);  // cached
    c.with_c = true;
    c.beta = 1.f;
    c.in_place = true;
    run_case(c);
  }
  unsetenv("QUACK_CACHE_DIR");
}

TEST_F(Gemm, LayoutsWithoutInstanceThrow) {
  // A-MN-major with B-K-major (_mk) is compiled for bf16 -> bf16 only.
  struct Bad {
    const char* layout;
    DType ab, d;
  };
  for (const Bad& x : {Bad{"ccr", DType::kFloat16, DType::kFloat16}, Bad{"rrc", DType::kFloat16, DType::kFloat16},
                       Bad{"ccr", DType::kFloat16, DType::kFloat32}}) {
    Mat A = make_mat(x.ab, 1, 64, 64, x.layout[0], 0);
    Mat B = make_mat(x.ab, 1, 64, 64, x.layout[1], 0);
    Mat D = make_mat(x.d, 1, 64, 64, x.layout[2], 0);
    GemmArgs args;
    args.a = A.arg;
    args.b = B.arg;
    args.d = D.arg;
    EXPECT_THROW(gemm(args, nullptr), InvalidArgument) << x.layout;
    EXPECT_TRUE(gaps_untouched("d", D.mem));
    EXPECT_TRUE(std::isnan(download(D.mem)[0])) << x.layout << ": d was written";
  }
}

}  // namespace
}  // namespace quack::test
