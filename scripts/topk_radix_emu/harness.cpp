// The radix kernel on the host emulation (run.sh): bf16 / fp16 / fp32 x; the plan's E and the
// forced 8 and 32; random, 8-value (ties), special (NaN, ±0, ±inf, all-NaN, all −inf), ascending
// and descending rows; odd N, k = 1, k = N, k = 256 (the radix fallback), N up to 8192; the
// softmax modes and both index dtypes in turn. Indices must equal the reference's, values bit
// for bit (softmax: within 2e-2, lse 1e-4). Exit status 1 on any mismatch.
#include "cuda_mock.h"
#include "emu_check.h"

#include <cstdio>
#include <string>
#include <vector>

#include "reference/topk_ref.h"
#include "topk/topk_plan.h"
#include "topk/topk_radix_kernel.cuh"

namespace quack::detail {
alignas(16) unsigned char topk_smem[1 << 16];
size_t g_smem_limit = 1 << 16;
}  // namespace quack::detail

using namespace quack;
using namespace quack::detail;

enum Data { kRandom, kDup, kSpecials, kAsc, kDesc };

struct Case {
  int64_t M, N, k;
  int e;
  Data data;
  bool largest;
  int softmax;
  bool idx32;
  uint64_t seed;
};

int failures = 0;

template <typename T, typename P>
void run(const Case& c) {
  std::mt19937_64 rng(c.seed);
  std::normal_distribution<float> nd;
  const float set[] = {-2, -1, -0.5f, 0.5f, 1, 1.5f, 2, 3};
  EmuBuffers<T> buf(c.M, c.N, c.k, [&](int64_t i) {
    std::vector<float> r(c.N);
    for (auto& v : r) v = c.data == kDup ? set[rng() % 8] : nd(rng);
    if (c.data == kSpecials) {
      for (int64_t j = 0; j < c.N; ++j) {
        switch (i % 5) {
          case 0: if (j % 3 == 0) r[j] = NAN; break;
          case 1: r[j] = j % 3 == 0 ? 0.f : j % 3 == 1 ? -0.f : -std::fabs(r[j]); break;
          case 2: if (j % 5 == 0) r[j] = j % 2 ? INFINITY : -INFINITY; break;
          case 3: r[j] = NAN; break;
          default: r[j] = -INFINITY; break;
        }
      }
    }
    if (c.data == kAsc || c.data == kDesc) {
      std::sort(r.begin(), r.end());
      if (c.data == kDesc) std::reverse(r.begin(), r.end());
    }
    return r;
  });
  TopkParams p = buf.params(c.softmax, c.largest, c.idx32);
  const TopkPlan plan = plan_topk(buf.problem(), 0, TopkPath::kRadix, c.e);
  if (plan.path != TopkPath::kRadix) {
    std::printf("not radix\n");
    ++failures;
    return;
  }
  p.threads_per_row = plan.threads_per_row;
  launch_topk_radix<T, P>(plan, p, nullptr, "emu");

  char name[200];
  std::snprintf(name, sizeof(name), "M%ld N%ld k%ld E%d data%d %s sm%d %s %s", (long)c.M,
                (long)c.N, (long)c.k, plan.elems, c.data, c.largest ? "largest" : "smallest",
                c.softmax, c.idx32 ? "i32" : "i64", sizeof(T) == 2 ? "16-bit" : "fp32");
  failures += buf.differ(name, c.softmax, c.largest, c.idx32);
}

int main(int argc, char** argv) {
  const int level = argc > 1 ? std::atoi(argv[1]) : 0;
  struct S { int64_t M, N, k; };
  std::vector<S> shapes = {{3, 1024, 8},  {2, 4096, 32}, {2, 4096, 128}, {1, 4099, 100},
                           {1, 1001, 13}, {2, 256, 256}, {3, 64, 64},    {3, 4096, 1},
                           {2, 4104, 32}, {2, 8, 8},     {1, 1, 1},      {1, 3, 2},
                           {2, 2048, 200}, {2, 8192, 256}, {2, 4096, 256}, {3, 1024, 64}};
  if (level > 0) shapes = {{3, 1024, 8}, {2, 4096, 32}, {1, 1001, 13}, {2, 2048, 200}};
  uint64_t seed = 1;
  int n = 0;
  for (const S& s : shapes)
    for (int dt = 0; dt < 3; ++dt)
      for (int e : {0, 8, 32})
        for (Data d : {kRandom, kDup, kSpecials, kAsc, kDesc}) {
          if (dt == 2 && s.N > 4096) continue;
          Case c{s.M, s.N, s.k, e, d, seed % 3 != 0, static_cast<int>(seed % 3), seed % 2 == 0,
                 seed};
          ++seed;
          if (level > 1 && (e != 0 || d == kDesc)) continue;
          if (dt == 0) run<__nv_bfloat16, uint32_t>(c);
          if (dt == 1) run<__half, uint32_t>(c);
          if (dt == 2) run<float, uint64_t>(c);
          ++n;
          if (n % 50 == 0) { std::printf("%d cases, %d failed\n", n, failures); std::fflush(stdout); }
        }
  std::printf("%d cases, %d failed\n", n, failures);
  return failures != 0;
}
