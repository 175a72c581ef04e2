// The register (bitonic) kernel on the host emulation (run.sh), above all fp32 x: its truncated
// entries (column in the key's low b bits), the cheap boundary test, the fix-up (exact re-pick of
// the boundary group) and the exact final order. Every fp32 instance (lists 8 / 16 / 32; E = 16,
// 32, 64; fit and generic; the fit-only E = 128 of lists of 8) over random rows and crafted
// ones: values 1 + j ulp (the whole row one truncated group), a cluster of near-equal values
// at the k-th value, ±0 with ± tiny subnormals, ±inf / NaN (either sign, many payloads) /
// ±FLT_MAX − j ulp, few distinct values (ties), the specials of the radix harness, ascending /
// descending rows; largest and smallest, softmax modes and index dtypes in turn; bf16 / fp16
// beside (the 16-bit path: keys by PRMT / HSET2, lists of 8 through TopkBest8Of16). Indices
// must equal the reference's, values bit for bit (NaN: any NaN; softmax within 2e-2, lse 1e-4).
// Exit status 1 on any mismatch.
#include "cuda_mock.h"
#include "emu_check.h"

#include <cfloat>
#include <cstdio>
#include <string>
#include <vector>

#include "reference/topk_ref.h"
#include "topk/topk_bitonic_kernel.cuh"
#include "topk/topk_plan.h"

namespace quack::detail {
alignas(16) unsigned char topk_smem[1 << 16];
size_t g_smem_limit = 1 << 16;
}  // namespace quack::detail

using namespace quack;
using namespace quack::detail;

enum Data { kRandom, kDup, kSpecials, kAsc, kDesc, kUlp, kCluster, kZeros, kExtremes, kNumData };
const char* const kDataName[] = {"random", "dup", "specials", "asc", "desc",
                                  "ulp", "cluster", "zeros", "extremes"};

struct Case {
  int64_t M, N, k;
  int e;     // forced elements per thread (0: the plan's)
  bool fit;  // forced fit (where T·E = N)
  Data data;
  bool largest;
  int softmax;
  bool idx32;
  uint64_t seed;
};

int failures = 0, fit_runs = 0, fit_only_runs = 0, filter_runs = 0, skipped = 0;

float ulps(float v, int j) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  b += static_cast<uint32_t>(j);
  std::memcpy(&v, &b, 4);
  return v;
}

/// A NaN of either sign and one of 64 payloads inside the top 7 mantissa bits (bf16 and fp16
/// keep them): the kernels must give every NaN one key.
float any_nan(uint64_t v) {
  const uint32_t b = 0x7f800000u | static_cast<uint32_t>(v % 64 + 1) << 16 |
                     (v & 64 ? 0x80000000u : 0u);
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

/// One row of kind d (fp32 values; the 16-bit runs round them).
std::vector<float> make_row(Data d, int64_t i, int64_t N, int64_t k, std::mt19937_64& rng) {
  std::normal_distribution<float> nd;
  std::vector<float> r(N);
  const float set[] = {-2, -1, -0.5f, 0.5f, 1, 1.5f, 2, 3};
  for (auto& v : r) v = d == kDup ? set[rng() % 8] : nd(rng);
  switch (d) {
    case kSpecials:
      for (int64_t j = 0; j < N; ++j) {
        switch (i % 5) {
          case 0: if (j % 3 == 0) r[j] = any_nan(rng()); break;
          case 1: r[j] = j % 3 == 0 ? 0.f : j % 3 == 1 ? -0.f : -std::fabs(r[j]); break;
          case 2: if (j % 5 == 0) r[j] = j % 2 ? INFINITY : -INFINITY; break;
          case 3: r[j] = j % 2 ? NAN : any_nan(rng()); break;
          default: r[j] = -INFINITY; break;
        }
      }
      break;
    case kAsc:
    case kDesc:
      std::sort(r.begin(), r.end());
      if (d == kDesc) std::reverse(r.begin(), r.end());
      break;
    case kUlp: {  // ± (1 + j ulp), j < 64 (or < 8: many exact ties)
      const int span = i % 2 ? 64 : 8;
      const float s = i % 3 == 2 ? -1.f : 1.f;
      for (auto& v : r) v = s * ulps(1.f, static_cast<int>(rng() % span));
      break;
    }
    case kCluster: {  // random row; a cluster of values within a few ulps of the k-th value
      std::vector<float> sorted = r;
      std::sort(sorted.begin(), sorted.end(), std::greater<float>());
      const float kth = sorted[std::min<int64_t>(k, N) - 1];
      const int64_t count = std::max<int64_t>(2, std::min<int64_t>(N / 2, 2 * k + 3));
      for (int64_t c = 0; c < count; ++c) {
        const int64_t j = static_cast<int64_t>(rng() % N);
        r[j] = ulps(kth, static_cast<int>(rng() % 9) - 4);
      }
      break;
    }
    case kZeros:  // ±0, ± tiny subnormals, a few normals
      for (auto& v : r) {
        const int t = static_cast<int>(rng() % 6);
        v = t == 0 ? 0.f : t == 1 ? -0.f : t == 2 ? ulps(0.f, 1 + rng() % 5)
            : t == 3 ? -ulps(0.f, 1 + rng() % 5) : t == 4 ? (i % 2 ? any_nan(rng()) : 1e-3f) : -v;
      }
      break;
    case kExtremes:  // ±inf, NaN, ±(FLT_MAX − j ulp)
      for (auto& v : r) {
        const int t = static_cast<int>(rng() % 7);
        v = t == 0 ? INFINITY : t == 1 ? -INFINITY : t == 2 ? (i % 3 == 0 ? any_nan(rng()) : 0.f)
            : t == 3 ? ulps(FLT_MAX, -static_cast<int>(rng() % 6))
            : t == 4 ? -ulps(FLT_MAX, -static_cast<int>(rng() % 6)) : v;
      }
      break;
    default: break;
  }
  return r;
}

/// forced_filter: plan_topk's (-1 the plan's; a plan with the candidate filter runs again
/// with 0, the networks alone).
template <typename T>
void run(const Case& c, int forced_filter = -1) {
  std::mt19937_64 rng(c.seed);
  EmuBuffers<T> buf(c.M, c.N, c.k,
                    [&](int64_t i) { return make_row(c.data, i, c.N, c.k, rng); });
  const TopkProblem pr = buf.problem();
  if (!topk_bitonic_ok(pr)) {  // fp32: N ≤ 2048, N ≤ 1024 for k > 16
    ++skipped;
    return;
  }
  const TopkPlan plan = plan_topk(pr, 0, TopkPath::kBitonic, c.e, c.fit, -1, forced_filter);
  if (plan.path != TopkPath::kBitonic) {
    std::printf("not bitonic\n");
    ++failures;
    return;
  }
  TopkParams p = buf.params(c.softmax, c.largest, c.idx32);
  p.threads_per_row = plan.threads_per_row;
  p.rows_per_cta = plan.rows_per_cta;
  fit_runs += plan.fit;
  filter_runs += plan.filter;
  // fp32 E above topk_bitonic_max_elems: the fit-only instance (lists of 8, E = 128).
  fit_only_runs += plan.elems > topk_bitonic_max_elems(sizeof(T), plan.list);
  if (plan.fit) launch_topk_bitonic<T, true>(plan, p, nullptr, "emu");
  else launch_topk_bitonic<T, false>(plan, p, nullptr, "emu");

  char name[200];
  std::snprintf(name, sizeof(name), "M%ld N%ld k%ld K%d E%d T%d%s%s %s %s sm%d %s %s", (long)c.M,
                (long)c.N, (long)c.k, plan.list, plan.elems, plan.threads_per_row,
                plan.fit ? " fit" : "", plan.filter ? " filter" : "", kDataName[c.data], c.largest ? "largest" : "smallest",
                c.softmax, c.idx32 ? "i32" : "i64", sizeof(T) == 2 ? "16-bit" : "fp32");
  failures += buf.differ(name, c.softmax, c.largest, c.idx32);
  if (plan.filter) run<T>(c, 0);
}

int main(int argc, char** argv) {
  const int level = argc > 1 ? std::atoi(argv[1]) : 0;
  struct S { int64_t M, N, k; };
  // Every list size, N from one vector to 4096, partial last vectors, power-of-2 rows (fit),
  // k = 1, k = N, k = K (d decides the cheap test) and k < K (top[k] decides it), M not a
  // multiple of the rows per CTA.
  // fp32 takes N ≤ 2048 (≤ 1024 for k > 16): the longer rows run the 16-bit kernels only.
  std::vector<S> shapes = {{9, 1024, 8},  {3, 4096, 32}, {5, 1000, 13}, {3, 4088, 17},
                           {9, 64, 8},    {3, 8, 8},     {5, 2048, 1},  {5, 512, 32},
                           {4, 16, 16},   {3, 17, 5},    {5, 2048, 16}, {3, 2040, 9},
                           {5, 1024, 32}, {7, 128, 7},   {3, 1016, 24}, {3, 256, 31},
                           {4, 2048, 8},  {5, 1000, 17}, {1, 1, 1},    {1, 3, 2},
                           {5, 1024, 5},  {3, 2048, 1}};
  if (level > 0)
    shapes = {{9, 1024, 8}, {5, 1024, 32}, {5, 1000, 13}, {5, 512, 32}, {4, 2048, 16}, {1, 1, 1},
              {1, 3, 2},    {5, 1024, 5},  {3, 2048, 8}};
  // Level 2: the fp32 T 16 instance (N = 1024, E = 64, fit: its float keys and the integer
  // path beside) over more rows and seeds.
  if (level == 2) shapes = {{64, 1024, 8}, {64, 1024, 5}, {33, 1024, 1}, {64, 1024, 7}};
  uint64_t seed = 1;
  int n = 0;
  for (int rep = 0; rep < (level == 2 ? 8 : 1); ++rep)
  for (const S& s : shapes)
    for (int e : {0, 16, 32, 64, 128})
      for (bool fit : {false, true})
        for (int d = 0; d < kNumData; ++d) {
          Case c{s.M, s.N, s.k, e, fit, static_cast<Data>(d), seed % 3 != 0,
                 static_cast<int>(seed % 3), seed % 2 == 0, seed};
          ++seed;
          if (level > 0 && e != 0 && e != 64 && !(e == 128 && fit)) continue;
          if (level == 2 && (e != 64 || !fit)) continue;
          run<float>(c);
          ++n;
          // The 16-bit path beside: every E (the plan's and forced), both fit settings, every
          // kind of data (level 0).
          if (level == 0) {
            run<__nv_bfloat16>(c);
            run<__half>(c);
            n += 2;
          }
          if (n % 200 == 0) { std::printf("%d cases, %d failed\n", n, failures); std::fflush(stdout); }
        }
  std::printf("%d cases (%d fit, of them %d fit-only fp32 E 128; %d runs of the candidate "
              "filter, each also run without it; %d outside the kernel's range skipped), %d "
              "failed\n",
              n, fit_runs, fit_only_runs, filter_runs, skipped, failures);
  // Thread-level counts: rows with the cheap test fired (reload), of them re-picked, and
  // stores placed by rank (two of the k entries with one truncated key).
  std::printf("fp32 fix-up: %ld boundary reloads, %ld re-picks, %ld ranked stores\n",
              emu_stats[0], emu_stats[1], emu_stats[2]);
  const bool covered = emu_stats[0] > 0 && emu_stats[1] > 0 && emu_stats[2] > 0;
  if (!covered) std::printf("FAIL: a branch of the fix-up was never taken\n");
  return failures != 0 || !covered;
}
