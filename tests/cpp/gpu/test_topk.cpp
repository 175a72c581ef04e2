// Tier 2: top-k forward and backward on the device against the float64 reference
// (reference/topk_ref.h). Skips without a GPU.
//
//   TopkShapes    the public API over (M, N, k) from 1 to 262144 columns, k = 1, k = N, odd N,
//                 the sort path (k > 256), M = 0, k = 0; every x dtype, largest and smallest,
//                 int64 and int32 indices. Indices must equal the reference's exactly (the
//                 tie rule: random bf16 rows hold many equal values), values bit for bit.
//   TopkData      crafted rows: few distinct values (ties everywhere), −inf, NaN, all-NaN,
//                 ±0, +inf, ascending and descending rows (every element enters the queue).
//   TopkPlans     every warps-per-row count (1..16) and the element path forced on one shape.
//   TopkPrefix    the queue kernel's prefix bound forced (none, 1 and 8 iterations) at any k,
//                 and the plan's own (32 iterations for k ≥ 32, clipped to each warp's slice),
//                 1 and 2 warps per row, every data kind and dtype, k = 1, k = N, an odd N,
//                 32- and 64-bit entries; the row softmax beside it. (The queue cases with
//                 k ≥ 32 of TopkShapes, TopkData and TopkSoftmax run the plan's prefix of 32.)
//   TopkBitonic   the register (bitonic) kernel forced with each elements-per-thread count,
//                 every list size, crafted data and softmax modes; each of those again with
//                 the forced `fit` configuration where T·E = N (no tail loads or masks);
//                 every x dtype (fp32: truncated entries + the exactness fix-up), and fp32
//                 rows of near-ties (values 1 + j ulp, a cluster of ulps around the k-th
//                 value, ±0 with subnormals, ±inf / NaN / FLT_MAX − j ulp) that force the
//                 fix-up, against the reference and the queue kernel.
//                 TopkShapes, TopkData and TopkSoftmax run every case twice: the queue
//                 kernel forced (the sort path for k > 256) and the bitonic kernel forced
//                 (where it applies: 16-byte rows, k ≤ 32, N ≤ 4096 for 16-bit x, N ≤ 2048
//                 for fp32 (≤ 1024 for k > 16)), so both
//                 kernels keep every case whichever the plan picks; the plan's own path (the
//                 bitonic rule: k ≤ 16 or N ≤ 2048; the radix rule: 16-bit x from N = 4096
//                 outside it; else the queue kernel) runs in TopkPlanRule, TopkLayouts and
//                 TopkBackward. A
//                 third run forces the radix kernel (16-byte rows, N ≤ 8192 for 16-bit x and
//                 ≤ 4096 for fp32, k ≤ 256; the cases outside its range are left out there).
//   TopkRadix     the radix kernel forced with each elements-per-thread count (8, 16, 32, the
//                 plan's), odd N (one row), k = 1, k = N, k = 256, the longest rows, T not a
//                 power of 2, every data kind (ties: the fallback's radix steps; random rows:
//                 the direct sort), softmax modes, int32 / int64 indices.
//   TopkLayouts   strided and misaligned x, strided values / indices (nothing written
//                 outside them), fp32 values from bf16 x and bf16 values from fp32 x, at a
//                 queue shape and at shapes of the bitonic rule (N = 1000, and 1001 in padded
//                 rows: a partial last vector).
//   TopkSoftmax   kSelected and kRow (with lse), every dtype, on the queue and sort paths.
//   TopkBackward  kNone, kSelected, kRow against topk_bwd_reference on the forward's outputs;
//                 out-of-range indices skipped.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/gpu_util.h"
#include "quack/errors.h"
#include "quack/topk.h"
#include "reference/random.h"
#include "reference/tolerance.h"
#include "reference/topk_ref.h"
#include "topk/topk_internal.h"

namespace quack::test {
namespace {

using detail::TopkPath;

// kNearTies (fp32 x; the bitonic kernel's truncated entries and their fix-up): rows whose
// values differ only in their low mantissa bits around the k-th value (make_x).
enum class Data { kRandom, kDuplicates, kSpecials, kAscending, kDescending, kNearTies };

/// v moved by j units in the last place (its bits + j; j < 0 towards zero for v > 0).
double ulps_from(float v, int j) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  b += static_cast<uint32_t>(j);
  std::memcpy(&v, &b, 4);
  return v;
}

struct TopkCase {
  int64_t M = 1, N = 1, k = 1;
  DType x = DType::kBFloat16;
  DType values = DType::kBFloat16;
  DType indices = DType::kInt64;
  bool largest = true;
  TopkSoftmax softmax = TopkSoftmax::kNone;
  bool lse = false;
  Layout x_l, v_l, i_l;
  Data data = Data::kRandom;
  int forced_warps = 0;       // > 0: plan_topk(problem, forced_warps)
  bool element_path = false;  // force the element-at-a-time loads
  bool bitonic = false;       // plan_topk(problem, 0, kBitonic, forced_elems) where it applies
  bool radix = false;         // plan_topk(problem, 0, kRadix, forced_elems) where it applies
  bool queue = false;         // plan_topk(problem, forced_warps, kQueue) (k ≤ 256)
  int forced_elems = 0;
  bool fit = false;           // with bitonic: plan_topk's forced_fit (N = T·E only)
  int forced_prefix = -1;     // ≥ 0: the queue kernel with plan_topk's forced_prefix
  int forced_filter = -1;     // with bitonic: plan_topk's forced_filter (0: no candidate filter)
  int forced_sparse = -1;     // 1: the queue kernel with plan_topk's forced_sparse (sparse offer)
  int forced_narrow = -1;     // 1: the queue kernel with plan_topk's forced_narrow
  uint64_t seed = 1;
};

std::string case_name(const TopkCase& c) {
  return "topk M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) +
         " k=" + std::to_string(c.k) + " " + short_name(c.x) + "->" + short_name(c.values) +
         (c.indices == DType::kInt32 ? " int32" : "") + (c.largest ? " largest" : " smallest") +
         " softmax=" + std::to_string(static_cast<int>(c.softmax)) +
         " data=" + std::to_string(static_cast<int>(c.data)) +
         (c.forced_warps ? " W=" + std::to_string(c.forced_warps) : "") +
         (c.element_path ? " element-path" : "") +
         (c.bitonic ? " bitonic E=" + std::to_string(c.forced_elems) : "") +
         (c.fit ? " fit" : "") +
         (c.radix ? " radix E=" + std::to_string(c.forced_elems) : "") +
         (c.queue ? " queue" : "") +
         (c.forced_prefix >= 0 ? " prefix=" + std::to_string(c.forced_prefix) : "") +
         (c.forced_filter >= 0 ? " filter=" + std::to_string(c.forced_filter) : "") +
         (c.forced_sparse == 1 ? " sparse" : "") + (c.forced_narrow == 1 ? " narrow" : "");
}

/// Host values of x (dense row-major), exact in c.x.
std::vector<double> make_x(const TopkCase& c) {
  Rng rng(c.seed);
  const int64_t n = c.M * c.N;
  std::vector<double> x = random_values(rng, n, c.x);
  const double inf = INFINITY, nan = NAN;
  switch (c.data) {
    case Data::kRandom: break;
    case Data::kDuplicates: {
      const double set[] = {-2.0, -1.0, -0.5, 0.5, 1.0, 1.5, 2.0, 3.0};
      for (auto& v : x) v = set[rng.next() % 8];
      break;
    }
    case Data::kSpecials:
      for (int64_t i = 0; i < c.M; ++i) {
        double* r = x.data() + i * c.N;
        switch (i % 7) {
          case 0:  // all −inf
            for (int64_t j = 0; j < c.N; ++j) r[j] = -inf;
            break;
          case 1:  // every third NaN
            for (int64_t j = 0; j < c.N; j += 3) r[j] = nan;
            break;
          case 2:  // all NaN
            for (int64_t j = 0; j < c.N; ++j) r[j] = nan;
            break;
          case 3:  // ±0 and negatives
            for (int64_t j = 0; j < c.N; ++j)
              r[j] = j % 3 == 0 ? 0.0 : j % 3 == 1 ? -0.0 : -std::fabs(r[j]);
            break;
          case 4:  // ±inf
            for (int64_t j = 0; j < c.N; j += 5) r[j] = j % 2 ? inf : -inf;
            break;
          case 5:  // every other −inf
            for (int64_t j = 0; j < c.N; j += 2) r[j] = -inf;
            break;
          default:  // one NaN
            r[c.N / 2] = nan;
            break;
        }
      }
      break;
    case Data::kAscending:
    case Data::kDescending:
      for (int64_t i = 0; i < c.M; ++i) {
        double* r = x.data() + i * c.N;
        std::sort(r, r + c.N);
        if (c.data == Data::kDescending) std::reverse(r, r + c.N);
      }
      break;
    case Data::kNearTies:  // exact in fp32 (the other dtypes round them)
      for (int64_t i = 0; i < c.M; ++i) {
        double* r = x.data() + i * c.N;
        switch (i % 5) {
          case 0:  // ±(1 + j ulp), j < 64: one truncated key for the whole row
          case 1:  // 1 + j ulp, j < 8: exact ties as well
            for (int64_t j = 0; j < c.N; ++j)
              r[j] = (i % 10 == 5 ? -1 : 1) * ulps_from(1.f, static_cast<int>(rng.next() % (i % 5 ? 8 : 64)));
            break;
          case 2: {  // a random row with 2k + 3 columns within 4 ulps of its k-th value
            std::vector<double> sorted(r, r + c.N);
            std::sort(sorted.begin(), sorted.end(), std::greater<double>());
            const float kth = static_cast<float>(sorted[static_cast<size_t>(c.k > 0 ? c.k - 1 : 0)]);
            for (int64_t n = 0; n < std::min<int64_t>(c.N / 2 + 1, 2 * c.k + 3); ++n)
              r[rng.next() % c.N] = ulps_from(kth, static_cast<int>(rng.next() % 9) - 4);
            break;
          }
          case 3:  // ±0 and ± the smallest subnormals (one truncated key), a NaN per 16
            for (int64_t j = 0; j < c.N; ++j) {
              const int t = static_cast<int>(rng.next() % 16);
              r[j] = t == 0 ? NAN : t < 4 ? 0.0 : t < 7 ? -0.0 : t < 11 ? ulps_from(0.f, 1 + t % 4)
                                                                       : -ulps_from(0.f, 1 + t % 4);
            }
            break;
          default:  // ±inf, NaN, ±(FLT_MAX − j ulp)
            for (int64_t j = 0; j < c.N; ++j) {
              const int t = static_cast<int>(rng.next() % 6);
              const float fm = std::numeric_limits<float>::max();
              r[j] = t == 0 ? inf : t == 1 ? -inf : t == 2 ? nan
                     : t == 3 ? ulps_from(fm, -static_cast<int>(rng.next() % 6))
                     : t == 4 ? -ulps_from(fm, -static_cast<int>(rng.next() % 6)) : r[j];
            }
            break;
        }
      }
      break;
  }
  return x;
}

/// (M, k) integer tensor -> int64 values, dense row-major.
std::vector<int64_t> download_indices(const DeviceTensor& d) {
  const TensorRef& r = d.ref;
  const int es = dtype_size(r.dtype);
  const auto img = download_bytes(d);
  const int64_t base = (static_cast<char*>(r.data) - static_cast<char*>(d.buf.get())) / es;
  std::vector<int64_t> out(static_cast<size_t>(d.rows * d.cols));
  for (int64_t i = 0; i < d.rows; ++i)
    for (int64_t j = 0; j < d.cols; ++j) {
      const unsigned char* p = img.data() + (base + i * r.stride[0] + j * r.stride[1]) * es;
      if (es == 8) {
        int64_t v;
        std::memcpy(&v, p, 8);
        out[i * d.cols + j] = v;
      } else {
        int32_t v;
        std::memcpy(&v, p, 4);
        out[i * d.cols + j] = v;
      }
    }
  return out;
}

/// (M, k) integer tensor from int64 host values.
DeviceTensor upload_indices(const std::vector<int64_t>& v, DType t, int64_t M, int64_t k) {
  DeviceTensor d = alloc_tensor(t, M, k);
  std::vector<unsigned char> img(d.buf.bytes());
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kInt64) std::memcpy(img.data() + 8 * i, &v[i], 8);
    else {
      const int32_t w = static_cast<int32_t>(v[i]);
      std::memcpy(img.data() + 4 * i, &w, 4);
    }
  }
  EXPECT_EQ(cudaMemcpy(d.buf.get(), img.data(), img.size(), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

/// got equals ref as stored in dtype t: same value (and sign of zero), or both NaN.
::testing::AssertionResult same_values(const std::string& what, const std::vector<double>& got,
                                       const std::vector<double>& ref, DType t, int64_t cols) {
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::isnan(ref[i]) ? NAN : round_to(t, static_cast<float>(ref[i]));
    const bool ok = (std::isnan(e) && std::isnan(got[i])) ||
                    (got[i] == e && std::signbit(got[i]) == std::signbit(e));
    if (!ok)
      return ::testing::AssertionFailure() << what << ": element (" << i / cols << ", " << i % cols
                                           << ") is " << got[i] << ", expected " << e;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_indices(const std::string& what, const std::vector<int64_t>& got,
                                        const std::vector<int64_t>& ref, int64_t cols) {
  for (size_t i = 0; i < ref.size(); ++i)
    if (got[i] != ref[i])
      return ::testing::AssertionFailure() << what << ": index (" << i / cols << ", " << i % cols
                                           << ") is " << got[i] << ", expected " << ref[i];
  return ::testing::AssertionSuccess();
}

struct TopkRun {
  std::vector<double> x;
  DeviceTensor xd, values, indices, lse;
  detail::TopkPlan plan;
};

/// Runs c on the device (outputs poisoned) and checks it against the reference.
TopkRun run_case(const TopkCase& c) {
  SCOPED_TRACE(case_name(c));
  TopkRun r;
  r.x = make_x(c);
  r.xd = upload(r.x, c.x, c.M, c.N, c.x_l);
  r.values = alloc_tensor(c.values, c.M, c.k, c.v_l);
  r.indices = alloc_tensor(c.indices, c.M, c.k, c.i_l);
  if (c.lse) r.lse = alloc_tensor(DType::kFloat32, 1, c.M, {}, /*vector=*/true);
  TopkFwdArgs a;
  a.x = r.xd.ref;
  a.values = r.values.ref;
  a.indices = r.indices.ref;
  if (c.lse) a.lse = r.lse.ref;
  a.largest = c.largest;
  a.softmax = c.softmax;
  detail::TopkCall call = detail::topk_fwd_call(a);
  if (c.element_path) call.problem.vec_ok = false;
  if (c.forced_warps > 0 || c.element_path || c.queue)
    call.plan = detail::plan_topk(call.problem, c.forced_warps,
                                  c.queue ? TopkPath::kQueue : TopkPath::kNone);
  // The bitonic kernel: forced where it applies, or the plan's rule when nothing is forced.
  // The radix kernel: forced where it applies (elsewhere the plan's own, without forced_elems),
  // or the plan's rule when nothing is forced.
  const bool radix = c.radix ? detail::topk_radix_ok(call.problem)
                             : !c.bitonic && !c.queue && c.forced_warps == 0 &&
                                   c.forced_prefix < 0 && detail::topk_radix_planned(call.problem);
  const bool bitonic = !radix && (c.bitonic ? detail::topk_bitonic_ok(call.problem)
                                            : !c.queue && c.forced_warps == 0 &&
                                                  detail::topk_bitonic_planned(call.problem));
  if (c.bitonic)
    call.plan = detail::plan_topk(call.problem, 0, TopkPath::kBitonic, c.forced_elems, c.fit, -1,
                                  c.forced_filter);
  if (c.radix)
    call.plan = detail::plan_topk(call.problem, 0, TopkPath::kRadix, radix ? c.forced_elems : 0);
  if (c.forced_prefix >= 0 || c.forced_sparse >= 0 || c.forced_narrow >= 0)
    call.plan = detail::plan_topk(call.problem, c.forced_warps, TopkPath::kQueue, 0, false,
                                  c.forced_prefix, -1, c.forced_sparse, c.forced_narrow);
  r.plan = call.plan;
  const size_t ws_bytes = topk_fwd_workspace_size(a);
  DeviceBuffer ws(ws_bytes);
  detail::topk_run_call(call, ws.get(), ws_bytes, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (c.M == 0 || c.k == 0) {
    EXPECT_EQ(call.plan.path, TopkPath::kNone);
    return r;
  }
  EXPECT_EQ(call.plan.path, radix                        ? TopkPath::kRadix
                            : bitonic                      ? TopkPath::kBitonic
                            : c.k > detail::kTopkQueueMaxK ? TopkPath::kSort
                                                           : TopkPath::kQueue);
  if (radix) {
    const bool e_ok = (c.forced_elems == 8 || c.forced_elems == 16 || c.forced_elems == 32) &&
                      detail::kTopkRadixMaxThreads * c.forced_elems >= c.N;
    EXPECT_EQ(call.plan.elems, e_ok ? c.forced_elems : detail::kTopkRadixElems);
    EXPECT_GE(static_cast<int64_t>(call.plan.threads) * call.plan.elems, c.N);
  }
  if (c.bitonic && bitonic && c.forced_elems > 0 && 32 * c.forced_elems >= c.N &&
      c.forced_elems >= c.k && c.forced_elems >= 16) {
    // A forced E: taken up to topk_bitonic_max_elems; with forced fit, up to
    // topk_bitonic_max_fit_elems where T·E = N (fp32, lists of 8: E = 128, the fit instance).
    int64_t t = 1;
    while (t < 32 && t * c.forced_elems < c.N) t *= 2;
    const int elt = dtype_size(c.x);
    if (c.forced_elems <= detail::topk_bitonic_max_elems(elt, call.plan.list) ||
        (c.fit && c.forced_elems <= detail::topk_bitonic_max_fit_elems(elt, call.plan.list) &&
         t * c.forced_elems == c.N)) {
      EXPECT_EQ(call.plan.elems, c.forced_elems);
    }
  }
  // Unforced, the power-of-2 rows the rule plans run the fit instance; forced, where forced_fit
  // asks and T·E = N.
  const bool planned_fit = !c.bitonic && !radix && detail::topk_bitonic_fits(call.problem);
  if (bitonic)
    EXPECT_EQ(call.plan.fit,
              planned_fit || (c.fit && static_cast<int64_t>(call.plan.threads_per_row) *
                                               call.plan.elems == c.N));
  else
    EXPECT_FALSE(call.plan.fit);

  const TopkRef ref = topk_reference(r.x, c.M, c.N, c.k, c.largest,
                                     static_cast<TopkRefSoftmax>(static_cast<int>(c.softmax)));
  const std::vector<int64_t> idx = download_indices(r.indices);
  EXPECT_TRUE(same_indices("indices", idx, ref.indices, c.k));
  const std::vector<double> vals = download(r.values);
  if (c.softmax == TopkSoftmax::kNone) {
    EXPECT_TRUE(same_values("values", vals, ref.values, c.values, c.k));
  } else {
    // Softmax outputs lie in [0, 1]: rel · max per row (compare's rule) and elementwise.
    for (int64_t i = 0; i < c.M; ++i) {
      const std::vector<double> g(vals.begin() + i * c.k, vals.begin() + (i + 1) * c.k);
      const std::vector<double> e(ref.values.begin() + i * c.k, ref.values.begin() + (i + 1) * c.k);
      // fp16 probabilities below 2^-14 are subnormal: their spacing 2^-24 bounds the rounding
      // however small the row's largest value is (scale floor = 2^-24 / rel).
      const double rel = 2 * tolerance(c.values);
      const double floor = c.values == DType::kFloat16 ? std::ldexp(1.0, -24) / rel : 0.0;
      EXPECT_TRUE(close("softmax values row " + std::to_string(i), g, e, rel, 0, floor));
    }
  }
  if (c.lse) {
    const std::vector<double> lse = download(r.lse);
    std::vector<double> floor_one(ref.lse.size());
    for (int64_t i = 0; i < c.M; ++i) {
      const double e = ref.lse[i];
      const double bound = 1e-5 * std::fmax(1.0, std::fabs(e));
      const bool ok = std::isfinite(e) ? std::fabs(lse[i] - e) <= bound
                                       : (std::isnan(e) ? std::isnan(lse[i]) : lse[i] == e);
      EXPECT_TRUE(ok) << "lse row " << i << ": " << lse[i] << ", expected " << e;
    }
  }
  EXPECT_TRUE(gaps_untouched("values", r.values));
  EXPECT_TRUE(gaps_untouched("indices", r.indices));
  return r;
}

// ------------------------------------------------------------------ the public API over shapes

struct Mnk {
  int64_t M, N, k;
};
// A case of shape s with x and values in dtype x (the rest TopkCase's defaults).
TopkCase case_of(const Mnk& s, DType x) {
  TopkCase c;
  c.M = s.M;
  c.N = s.N;
  c.k = s.k;
  c.x = c.values = x;
  return c;
}
// The outputs a case asks for, rotated by seed (index dtype, softmax mode, lse with the row
// softmax), and its data seed (++seed).
void rotate_outputs(TopkCase& c, uint64_t& seed) {
  c.indices = seed % 2 ? DType::kInt32 : DType::kInt64;
  c.softmax = static_cast<TopkSoftmax>(seed % 3);
  c.lse = c.softmax == TopkSoftmax::kRow;
  c.seed = ++seed;
}
// A case of shape s with fp32 x of `data` on the bitonic kernel forced (fit: plan_topk's
// forced_fit), largest or smallest, its outputs rotated by seed.
TopkCase bitonic_f32_case(const Mnk& s, Data data, bool fit, bool largest, uint64_t& seed) {
  TopkCase c = case_of(s, DType::kFloat32);
  c.data = data;
  c.bitonic = true;
  c.fit = fit;
  c.largest = largest;
  rotate_outputs(c, seed);
  return c;
}
// Whether the radix kernel takes case c (dense rows as run_case uploads them: 16-byte rows for
// M > 1), or c launches nothing (M = 0, k = 0); the other cases are left out of its runs.
bool radix_runs(const TopkCase& c) {
  if (c.M == 0 || c.k == 0) return true;
  detail::TopkProblem pr;
  pr.M = c.M;
  pr.N = c.N;
  pr.k = c.k;
  pr.x = c.x;
  pr.vec_ok = c.M == 1 || (c.N * dtype_size(c.x)) % 16 == 0;
  return detail::topk_radix_ok(pr);
}

// The forced kernel of a parameterized case: 0 the queue kernel (the sort path for k > 256), 1
// the bitonic kernel, 2 the radix kernel (cases it does not take are left out).
const char* const kPathSuffix[] = {"", "_bitonic", "_radix"};
void force_path(TopkCase& c, int path) {
  c.queue = path == 0;
  c.bitonic = path == 1;
  c.radix = path == 2;
}

const std::vector<Mnk> kShapes = {
    {1, 1, 1},        {3, 7, 1},       {3, 7, 7},      {5, 127, 5},    {7, 1000, 8},
    {33, 1024, 8},    {9, 4096, 32},   {5, 4096, 128}, {3, 4099, 100}, {4, 32768, 64},
    {2, 131072, 256}, {2, 70001, 255}, {3, 65537, 17}, {1, 262144, 8}, {3, 100, 100},
    {65, 256, 8},     {17, 64, 2},     {6, 2048, 33},  {4, 8192, 200}, {2, 300, 257},
    {3, 1000, 1000},  {0, 4096, 8},    {4, 0, 0},      {4, 16, 0},     {300, 512, 16}};
const DType kDtypes[] = {DType::kBFloat16, DType::kFloat16, DType::kFloat32};

// shape, dtype, largest, forced kernel (force_path)
using ShapeParam = std::tuple<int, int, bool, int>;
class TopkShapes : public GpuTest, public ::testing::WithParamInterface<ShapeParam> {};

TEST_P(TopkShapes, MatchesReference) {
  const auto [si, di, largest, path] = GetParam();
  const Mnk s = kShapes[static_cast<size_t>(si)];
  TopkCase c = case_of(s, kDtypes[di]);
  c.indices = si % 2 ? DType::kInt32 : DType::kInt64;
  c.largest = largest;
  force_path(c, path);
  if (c.radix && !radix_runs(c)) GTEST_SKIP() << "outside the radix kernel's range";
  c.seed = static_cast<uint64_t>(1000 * si + 10 * di + largest);
  const TopkRun r = run_case(c);
  // Dense rows of 16-byte multiples (or one row) take the vector loads; others the element path.
  const bool aligned_rows = c.M == 1 || (c.N * dtype_size(c.x)) % 16 == 0;
  if (c.M > 0 && c.k > 0 && r.plan.path == TopkPath::kQueue) {
    EXPECT_EQ(r.plan.vec_io, aligned_rows) << "dense rows of 16-byte multiples take the vector loads";
  }
}

INSTANTIATE_TEST_SUITE_P(All, TopkShapes,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(kShapes.size())),
                                            ::testing::Range(0, 3), ::testing::Bool(),
                                            ::testing::Range(0, 3)),
                         [](const ::testing::TestParamInfo<ShapeParam>& info) {
                           const Mnk s = kShapes[static_cast<size_t>(std::get<0>(info.param))];
                           return "M" + std::to_string(s.M) + "_N" + std::to_string(s.N) + "_k" +
                                  std::to_string(s.k) + "_" +
                                  short_name(kDtypes[std::get<1>(info.param)]) +
                                  (std::get<2>(info.param) ? "_largest" : "_smallest") +
                                  kPathSuffix[std::get<3>(info.param)];
                         });

// ------------------------------------------------------------------ crafted rows

using DataParam = std::tuple<int, int, int>;  // data kind, dtype, forced kernel (force_path)
class TopkData : public GpuTest, public ::testing::WithParamInterface<DataParam> {};

TEST_P(TopkData, MatchesReference) {
  const auto [data, di, path] = GetParam();
  // (M, N, k): queue of 1, 2 and 8 registers, 32- and 64-bit entries, the sort path; the
  // bitonic kernel's lists of 8, 16 and 32 (16-bit x).
  const Mnk shapes[] = {{14, 37, 5},    {14, 1024, 40}, {7, 5000, 256}, {7, 70000, 30},
                        {7, 600, 300},  {14, 1024, 8},  {14, 4096, 32}, {14, 200, 16}};
  uint64_t seed = 77 + 10 * data + di;
  for (const Mnk& s : shapes)
    for (bool largest : {true, false}) {
      TopkCase c = case_of(s, kDtypes[di]);
      c.largest = largest;
      c.data = static_cast<Data>(data);
      force_path(c, path);
      c.seed = ++seed;
      if (c.radix && !radix_runs(c)) continue;
      run_case(c);
    }
}

const char* const kDataNames[] = {"random", "duplicates", "specials", "ascending", "descending"};

INSTANTIATE_TEST_SUITE_P(All, TopkData,
                         ::testing::Combine(::testing::Range(1, 5), ::testing::Range(0, 3),
                                            ::testing::Range(0, 3)),
                         [](const ::testing::TestParamInfo<DataParam>& info) {
                           return std::string(kDataNames[std::get<0>(info.param)]) + "_" +
                                  short_name(kDtypes[std::get<1>(info.param)]) +
                                  kPathSuffix[std::get<2>(info.param)];
                         });

// ------------------------------------------------------------------ the queue's prefix bound

// The queue kernel's prefix bound (plan_topk's forced_prefix): every k, prefixes of 1 and 8
// iterations and none, and the plan's own (forced_prefix −1: kTopkPrefixIters = 32 for k ≥ 32,
// none below), 1 and 2 warps per row, over the crafted rows (ties, ±inf, NaN, sorted rows: an
// ascending row's prefix bound is its lowest part). Rows of 16-byte multiples (the bound needs
// the vector path), an odd N as one row; k = N where the row is shorter than one iteration (no
// prefix: the kernel clips it to the slice). The plan's 32 iterations: clipped at N = 4096
// (4 bf16 iterations per row), the whole slice at 32768 (bf16, one warp), fewer than the slice
// at 40000 and 65536 (bf16 at 65536: 64-bit entries, 32 iterations per warp at two warps).
using PrefixParam = std::tuple<int, int>;  // data kind, dtype
class TopkPrefix : public GpuTest, public ::testing::WithParamInterface<PrefixParam> {};

// A queue-kernel case of the prefix and sparse-offer tests: forced warps and prefix, the row
// softmax (its statistics ignore the prefix pass) on the finite data kinds at even k.
TopkCase queue_case(const Mnk& s, DType t, int data, int w, int prefix, bool largest) {
  TopkCase c = case_of(s, t);
  c.largest = largest;
  c.data = static_cast<Data>(data);
  c.queue = true;
  c.forced_warps = w;
  c.forced_prefix = prefix;
  if (data != static_cast<int>(Data::kSpecials) && s.k % 2 == 0) {
    c.softmax = TopkSoftmax::kRow;
    c.lse = true;
  }
  return c;
}

TEST_P(TopkPrefix, MatchesReference) {
  const auto [data, di] = GetParam();
  const Mnk shapes[] = {{7, 1032, 1},   {7, 2056, 65},  {7, 4096, 128}, {7, 9224, 256},
                        {7, 1024, 256}, {1, 1031, 100}, {1, 3001, 255}, {7, 256, 256},
                        {7, 5000, 64},  {7, 2048, 8},   {7, 4096, 32},  {7, 4096, 64},
                        {3, 32768, 32}, {3, 32768, 64}, {3, 40000, 64}, {2, 65536, 256},
                        {7, 4096, 31}};
  uint64_t seed = 5000 + 10 * data + di;
  for (const Mnk& s : shapes)
    for (int prefix : {0, 1, 8, -1})
      for (int w : {1, 2})
        for (bool largest : {true, false}) {
          TopkCase c = queue_case(s, kDtypes[di], data, w, prefix, largest);
          c.seed = ++seed;
          const TopkRun r = run_case(c);
          if (c.M > 0 && c.k > 0) {
            EXPECT_TRUE(r.plan.vec_io) << case_name(c);
            const int planned = c.k >= detail::kTopkPrefixMinK ? detail::kTopkPrefixIters : 0;
            EXPECT_EQ(r.plan.prefix_iters, prefix >= 0 ? prefix : planned) << case_name(c);
            if (prefix < 0 && c.k >= 32) {
              EXPECT_EQ(r.plan.prefix_iters, 32) << case_name(c);
            }
          }
        }
}

INSTANTIATE_TEST_SUITE_P(All, TopkPrefix,
                         ::testing::Combine(::testing::Range(0, 5), ::testing::Range(0, 3)),
                         [](const ::testing::TestParamInfo<PrefixParam>& info) {
                           return std::string(kDataNames[std::get<0>(info.param)]) + "_" +
                                  short_name(kDtypes[std::get<1>(info.param)]);
                         });

// ------------------------------------------------------------------ the queue's sparse offer

// The queue kernel's sparse offer (plan_topk's forced_sparse 1; planned where the prefix bound
// runs, so TopkPrefix's plan-prefix cases take it too): the prefix bound's shapes and
// data kinds, with the plan's prefix, none (the first iterations offer every slot: up to
// 16 or 32 rounds, merges inside an iteration) and one iteration; 1, 2 and 4 warps per row
// (4: 128 threads, the instances' bound); the row softmax where the prefix test has it. Each
// case also with the narrowed prefix search (forced_narrow 1; k ≤ 32 and above, where its low
// end differs), alternating with the sparse offer off and on.
class TopkSparse : public GpuTest, public ::testing::WithParamInterface<PrefixParam> {};

TEST_P(TopkSparse, MatchesReference) {
  const auto [data, di] = GetParam();
  const Mnk shapes[] = {{7, 1032, 1},   {7, 2056, 65},  {7, 4096, 128}, {7, 9224, 256},
                        {1, 1031, 100}, {7, 256, 256},  {7, 5000, 64},  {7, 2048, 8},
                        {7, 4096, 32},  {9, 4096, 32},  {3, 32768, 64}, {3, 40000, 64},
                        {2, 65536, 256}, {7, 4096, 31}, {5, 1000, 13}};
  uint64_t seed = 7000 + 10 * data + di;
  for (const Mnk& s : shapes)
    for (int prefix : {-1, 0, 1})
      for (int w : {1, 2, 4})
        for (bool largest : {true, false}) {
          TopkCase c = queue_case(s, kDtypes[di], data, w, prefix, largest);
          c.forced_sparse = 1;
          c.seed = ++seed;
          const TopkRun r = run_case(c);
          if (c.M > 0 && c.k > 0) {
            EXPECT_TRUE(r.plan.vec_io) << case_name(c);
            EXPECT_TRUE(r.plan.sparse) << case_name(c);
          }
          c.forced_narrow = 1;
          c.forced_sparse = seed % 2 ? 1 : 0;
          c.seed = ++seed;
          const TopkRun rn = run_case(c);
          if (c.M > 0 && c.k > 0) {
            EXPECT_EQ(rn.plan.prefix_narrow, rn.plan.prefix_iters > 0) << case_name(c);
            EXPECT_EQ(rn.plan.sparse, c.forced_sparse == 1) << case_name(c);
          }
        }
}

INSTANTIATE_TEST_SUITE_P(All, TopkSparse,
                         ::testing::Combine(::testing::Range(0, 5), ::testing::Range(0, 3)),
                         [](const ::testing::TestParamInfo<PrefixParam>& info) {
                           return std::string(kDataNames[std::get<0>(info.param)]) + "_" +
                                  short_name(kDtypes[std::get<1>(info.param)]);
                         });

// ------------------------------------------------------------------ the bitonic kernel forced

class TopkBitonic : public GpuTest {};

TEST_F(TopkBitonic, EveryElementCountListSizeAndSoftmax) {
  // (M, N, k): every list size (8, 16, 32), N from one vector to 4096, partial last vectors
  // (N = 1000, 4088), rows beyond M in the last CTA (M not a multiple of the rows per CTA).
  // fit: the forced `fit` configuration, run only where the plan has T·E = N (the powers of 2
  // here, at most E values each; at N = 8 never: E ≥ 16).
  const Mnk shapes[] = {{37, 1024, 8}, {21, 4096, 32}, {50, 1000, 13}, {9, 4088, 17},
                        {130, 64, 8},  {5, 8, 8},      {67, 2048, 1},  {11, 512, 32}};
  uint64_t seed = 5000;
  int fit_cases = 0;
  for (const Mnk& s : shapes)
    for (DType t : kDtypes)  // fp32: the truncated entries and their fix-up
      for (int e : {0, 16, 32, 64, 128})
        for (bool fit : {false, true})
          for (TopkSoftmax sm : {TopkSoftmax::kNone, TopkSoftmax::kSelected, TopkSoftmax::kRow})
            for (Data d : {Data::kRandom, Data::kDuplicates, Data::kSpecials}) {
              detail::TopkProblem pr;
              pr.M = s.M;
              pr.N = s.N;
              pr.k = s.k;
              pr.x = t;
              pr.vec_ok = true;
              if (!detail::topk_bitonic_ok(pr)) continue;  // fp32: N ≤ 2048 (1024 for k > 16)
              if (fit) {
                if (!detail::plan_topk(pr, 0, TopkPath::kBitonic, e, true).fit) continue;
                ++fit_cases;
              }
              TopkCase c = case_of(s, t);
              c.indices = seed % 2 ? DType::kInt32 : DType::kInt64;
              c.bitonic = true;
              c.forced_elems = e;
              c.fit = fit;
              c.softmax = sm;
              c.lse = sm == TopkSoftmax::kRow;
              c.largest = seed % 3 != 0;
              c.data = d;
              c.seed = ++seed;
              const TopkRun r = run_case(c);
              EXPECT_EQ(r.plan.path, TopkPath::kBitonic) << case_name(c);
              EXPECT_GE(r.plan.elems * r.plan.threads_per_row, s.N) << case_name(c);
              EXPECT_EQ(r.plan.fit, fit) << case_name(c);
            }
  // Fit plans: 23 (shape, E) pairs per dtype at N = 1024, 4096, 64, 2048 and 512 (an E not
  // usable at a shape gives the plan's own, which fits there too), × 3 softmax × 3 data kinds.
  EXPECT_GE(fit_cases, 2 * 20 * 9 + 10 * 9);
}

TEST_F(TopkBitonic, Fp32NearTiesAtTheBoundary) {
  // fp32 x: the kernel selects by entries whose low b bits (2^b ≥ N) hold the column, so values
  // that differ only there tie in the selection; its fix-up must make the results exact. Rows
  // of Data::kNearTies (values 1 + j ulp: the whole row one truncated key, so the selected
  // lowest columns are wrong and the fix-up re-picks them; a cluster within 4 ulps of the k-th
  // value; ±0 with ± subnormals; ±inf, NaN, ±FLT_MAX − j ulp), every list size, k = K (the
  // kernel's dropped-entry test) and k < K (its (k+1)-th entry), fit and generic (a partial
  // last vector at N = 1001 and 2045: one row, 16-byte rows need M = 1 there), every E,
  // largest and smallest, softmax modes and index dtypes in turn. The queue kernel (exact 64-bit
  // entries) runs the same rows as a second reference.
  const Mnk shapes[] = {{37, 1024, 8}, {21, 2048, 16}, {9, 1000, 32}, {50, 1000, 13},
                        {11, 512, 32}, {13, 2048, 1},  {5, 16, 16},   {7, 20, 5},
                        {10, 1024, 32}, {10, 2040, 9},  {1, 1001, 8},  {1, 2045, 16}};
  uint64_t seed = 7000;
  int ran = 0;
  for (const Mnk& s : shapes)
    for (int e : {0, 16, 32, 64, 128})
      for (bool fit : {false, true})
        for (bool largest : {true, false}) {
          TopkCase c = bitonic_f32_case(s, Data::kNearTies, fit, largest, seed);
          c.forced_elems = e;
          const TopkRun r = run_case(c);
          EXPECT_EQ(r.plan.path, TopkPath::kBitonic) << case_name(c);
          ++ran;
          if (e == 0 && !fit) {
            TopkCase q = c;
            q.bitonic = false;
            q.queue = true;
            run_case(q);
          }
        }
  EXPECT_EQ(ran, 12 * 5 * 2 * 2);
}

TEST_F(TopkBitonic, Fp32CandidateFilter) {
  // The fp32 fit instance of lists of 8 at E = 64 with T ≥ 16 (N = 1024, 2048) builds its list
  // from the candidates above the row's 9th-largest thread maximum (topk_bitonic_kernel.cuh,
  // "fp32 filter"); a thread with a NaN takes all its elements as candidates. Each row kind
  // (random, duplicates, specials with NaN / ±inf, ascending, descending, near ties: many
  // candidates and the fix-up), k from 1 to 8, largest and smallest, the filter's plan and the
  // same plan forced without it (forced on: the rule plans it at T = 32 only).
  const Mnk shapes[] = {{37, 1024, 8}, {21, 1024, 5}, {13, 1024, 1}, {19, 2048, 8}, {9, 2048, 3}};
  const Data datas[] = {Data::kRandom,    Data::kDuplicates, Data::kSpecials,
                        Data::kAscending, Data::kDescending, Data::kNearTies};
  uint64_t seed = 9000;
  int filtered = 0;
  for (const Mnk& s : shapes)
    for (Data d : datas)
      for (bool largest : {true, false})
        for (int filter : {1, 0}) {
          TopkCase c = bitonic_f32_case(s, d, true, largest, seed);
          c.forced_filter = filter;
          const TopkRun r = run_case(c);
          EXPECT_EQ(r.plan.path, TopkPath::kBitonic) << case_name(c);
          EXPECT_EQ(r.plan.filter, filter != 0) << case_name(c);
          filtered += r.plan.filter;
        }
  EXPECT_EQ(filtered, 5 * 6 * 2);
}

// ------------------------------------------------------------------ the radix kernel forced

class TopkRadix : public GpuTest {};

TEST_F(TopkRadix, EveryElementCountDataAndSoftmax) {
  // (M, N, k): odd N (one row: 16-byte rows need M = 1 there), k = 1, k = N, k = 256 (the
  // fallback's radix steps even on random rows: ~1.1·k candidates > 256), the longest rows
  // (8192 for 16-bit x; 4096 for fp32), T not a power of 2 (N = 4104: 288 threads at E = 16),
  // the shapes' rows, a row shorter than one warp's vectors, M = 0. Each with every
  // forced E (0: the plan's 16; 8 only where 512·8 ≥ N) and the crafted data kinds (ties and
  // sorted rows take the fallback), softmax modes and index dtypes in turn. k = G / 2 (4096,
  // 256; 1024, 64): the bound's edge (2k ≤ G vectors); (2048, 200): no bound, the whole row
  // into the fallback.
  const Mnk shapes[] = {{1, 4099, 100}, {1, 4095, 100}, {1, 1001, 13}, {1, 8191, 256},
                        {3, 8192, 256}, {5, 256, 256},  {4, 64, 64},   {9, 4096, 1},
                        {6, 4104, 32},  {6, 4088, 32},  {7, 1024, 8},  {5, 4096, 128},
                        {8, 4096, 32},  {2, 8, 8},      {1, 1, 1},     {1, 3, 2},
                        {0, 1024, 8},   {3, 2048, 200}, {4, 4096, 256}, {5, 1024, 64}};
  uint64_t seed = 9000;
  int ran = 0;
  for (const Mnk& s : shapes)
    for (DType t : kDtypes)
      for (int e : {0, 8, 16, 32})
        for (Data d : {Data::kRandom, Data::kDuplicates, Data::kSpecials, Data::kAscending}) {
          TopkCase c = case_of(s, t);
          c.radix = true;
          c.forced_elems = e;
          c.data = d;
          c.indices = seed % 2 ? DType::kInt32 : DType::kInt64;
          c.largest = seed % 3 != 0;
          c.softmax = static_cast<TopkSoftmax>(seed % 3);
          c.lse = c.softmax == TopkSoftmax::kRow && seed % 2 == 0;
          c.seed = ++seed;
          if (!radix_runs(c)) continue;
          const TopkRun r = run_case(c);
          ++ran;
          if (c.M == 0) continue;
          EXPECT_EQ(r.plan.path, TopkPath::kRadix) << case_name(c);
          EXPECT_EQ(r.plan.threads % 32, 0) << case_name(c);
          EXPECT_EQ(r.plan.grid, c.M) << case_name(c);
        }
  EXPECT_GE(ran, 500);
}

// ------------------------------------------------------------------ forced plans

class TopkPlans : public GpuTest {};

TEST_F(TopkPlans, EveryWarpCountAndTheElementPath) {
  const Mnk shapes[] = {{5, 20000, 8}, {3, 100000, 256}, {9, 4099, 40}};
  uint64_t seed = 900;
  for (const Mnk& s : shapes)
    for (DType t : {DType::kBFloat16, DType::kFloat32})
      for (int w : {1, 2, 4, 8, 16})
        for (bool element : {false, true})
          for (TopkSoftmax sm : {TopkSoftmax::kNone, TopkSoftmax::kRow}) {
            TopkCase c = case_of(s, t);
            c.forced_warps = w;
            c.element_path = element;
            c.softmax = sm;
            c.lse = sm == TopkSoftmax::kRow;
            c.largest = (w + element) % 2 == 0;
            c.seed = ++seed;
            const TopkRun r = run_case(c);
            EXPECT_EQ(r.plan.warps_per_row, w);
            // N = 4099: rows not 16-byte multiples take the element path on their own.
            EXPECT_EQ(r.plan.vec_io, !element && (s.N * dtype_size(t)) % 16 == 0);
          }
}

// ------------------------------------------------------------------ the plan's own path

class TopkPlanRule : public GpuTest {};

TEST_F(TopkPlanRule, BitonicInsideTheBoundsQueueOutside) {
  // The plan unforced (run_case expects topk_bitonic_planned's and topk_radix_planned's path):
  // the bitonic rule's edges (16-bit x: k ≤ 16 or N ≤ 2048; fp32: N ≤ 2048 and k ≤ 16;
  // power-of-2 rows it plans: the fit instance, the others the generic one) and just past them
  // (16-bit x from N = 4096: the radix kernel, but at N = 4096 with k ≥ 32; below, and fp32:
  // the queue kernel with its prefix bound of 32 iterations and its sparse offer from k = 32),
  // every softmax mode, int32 / int64 indices, largest and smallest, bf16 / fp16 / fp32 x.
  const Mnk shapes[] = {{300, 2048, 16}, {130, 1024, 8}, {33, 2048, 17}, {9, 2056, 8},
                        {5, 40, 16},     {7, 1000, 1},   {11, 2056, 17}, {6, 4096, 32},
                        {70, 512, 32},   {3, 16, 9},     {5, 4088, 32},  {6, 4096, 16},
                        {6, 4096, 17},   {6, 8192, 64},  {4, 6000, 100}, {3, 4104, 8}};
  uint64_t seed = 8000;
  int n = 0;
  for (const Mnk& s : shapes)
    for (DType t : kDtypes)
      for (TopkSoftmax sm : {TopkSoftmax::kNone, TopkSoftmax::kSelected, TopkSoftmax::kRow}) {
        TopkCase c = case_of(s, t);
        c.values = n % 3 == 0 ? DType::kFloat32 : t;
        c.indices = n % 2 ? DType::kInt32 : DType::kInt64;
        c.softmax = sm;
        c.lse = sm == TopkSoftmax::kRow;
        c.largest = n % 4 < 2;
        c.seed = ++seed;
        ++n;
        const TopkRun r = run_case(c);
        const bool pow2 = (s.N & (s.N - 1)) == 0 && s.N >= 16;
        // fp32: N ≤ 2048 with k ≤ 16 (runs Z, AA), or k ≤ 32 at N ≤ 512 or N = 1024 fit (run
        // AD), power-of-2 N (fit) or not (generic).
        const bool planned =
            dtype_size(t) == 2
                ? s.N <= 4096 && (s.k <= 16 || s.N <= 2048)
                : (s.N <= 2048 && s.k <= 16) ||
                      (s.k <= 32 && (s.N <= 512 || (s.N == 1024 && pow2)));
        const bool radix =
            dtype_size(t) == 2 && !planned && s.N >= 4096 && !(s.N <= 4096 && s.k >= 32);
        EXPECT_EQ(r.plan.path, planned ? TopkPath::kBitonic
                               : radix ? TopkPath::kRadix
                                       : TopkPath::kQueue)
            << case_name(c);
        EXPECT_EQ(r.plan.fit, planned && pow2) << case_name(c);
        if (planned && s.N >= 1024 && pow2) {
          EXPECT_EQ(r.plan.elems, dtype_size(t) == 2 ? 128 : s.k > 16 ? 32 : 64) << case_name(c);
        }
        const bool queue = !planned && !radix;
        EXPECT_EQ(r.plan.prefix_iters, queue && r.plan.vec_io && s.k >= 32 ? 32 : 0)
            << case_name(c);
        EXPECT_EQ(r.plan.sparse, queue && r.plan.vec_io && s.k >= 32 && r.plan.threads <= 128)
            << case_name(c);
      }
}

// ------------------------------------------------------------------ layouts

class TopkLayouts : public GpuTest {};

TEST_F(TopkLayouts, StridedAndMisaligned) {
  struct L {
    Layout x, v, i;
    DType xt, vt;
    bool vec;  // the vector loads are expected
  };
  // (N, k): the queue kernel's; the bitonic rule's with 16-byte rows (every x dtype: the
  // generic instance at N = 1000, and at N = 1001 with a partial last vector in padded rows).
  const std::pair<int64_t, int64_t> nks[] = {{3001, 50}, {1000, 8}, {1001, 8}};
  for (const auto& nk : nks) {
    const int64_t M = 6, N = nk.first, k = nk.second;
    Layout row_pad;  // rows padded to a multiple of 8 elements: vector-aligned
    row_pad.row_stride = 3008;
    Layout odd_stride;
    odd_stride.row_stride = N + 3;
    Layout col2;
    col2.row_stride = 2 * N + 1;
    col2.col_stride = 2;
    Layout offset1;
    offset1.row_stride = 3008;
    offset1.offset = 1;
    Layout out_strided;
    out_strided.row_stride = k + 7;
    Layout out_cols;
    out_cols.row_stride = 2 * k + 3;
    out_cols.col_stride = 2;
    const L cases[] = {
        {row_pad, {}, {}, DType::kBFloat16, DType::kBFloat16, true},
        {odd_stride, out_strided, out_cols, DType::kBFloat16, DType::kFloat32, false},
        {col2, out_cols, out_strided, DType::kFloat32, DType::kBFloat16, false},
        {offset1, {}, {}, DType::kFloat16, DType::kFloat16, false},
        {row_pad, out_cols, {}, DType::kFloat32, DType::kFloat16, true},
    };
    uint64_t seed = 4000;
    for (const L& l : cases)
      for (bool largest : {true, false}) {
        TopkCase c;
        c.M = M;
        c.N = N;
        c.k = k;
        c.x = l.xt;
        c.values = l.vt;
        c.x_l = l.x;
        c.v_l = l.v;
        c.i_l = l.i;
        c.largest = largest;
        c.seed = ++seed;
        const TopkRun r = run_case(c);
        EXPECT_EQ(r.plan.vec_io, l.vec);
        const bool bitonic = N <= 2048 && l.vec;
        EXPECT_EQ(r.plan.path, bitonic ? TopkPath::kBitonic : TopkPath::kQueue);
      }
  }
}

// k > 256 sorts each row in a caller's workspace: absent, too small or misaligned, the call is
// refused with InvalidArgument naming the workspace and the size query, before any launch
// (values keep their poison).
TEST_F(TopkLayouts, SortPathWorkspaceRefused) {
  const int64_t M = 3, N = 1000, k = 300;
  Rng rng(4100);
  const DeviceTensor x = upload(random_values(rng, M * N, DType::kBFloat16), DType::kBFloat16, M, N);
  const DeviceTensor values = alloc_tensor(DType::kBFloat16, M, k);
  const DeviceTensor indices = alloc_tensor(DType::kInt64, M, k);
  TopkFwdArgs a;
  a.x = x.ref;
  a.values = values.ref;
  a.indices = indices.ref;
  const size_t need = topk_fwd_workspace_size(a);
  ASSERT_GT(need, 0u);
  const DeviceBuffer ws(need + 256);
  auto refused = [&](void* w, size_t bytes, const std::string& want) {
    try {
      topk_fwd(a, w, bytes, nullptr);
      ADD_FAILURE() << "accepted a workspace of " << bytes << " bytes at " << w;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refused(nullptr, 0, "workspace has 0 bytes, expected at least topk_fwd_workspace_size(args)");
  refused(nullptr, need, "workspace has 0 bytes");
  refused(ws.get(), need - 1, "expected at least topk_fwd_workspace_size(args) = " + std::to_string(need));
  refused(static_cast<char*>(ws.get()) + 16, need, "workspace is not 256-byte aligned");
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (double v : download(values)) EXPECT_TRUE(std::isnan(v)) << "values written by a refused call";
  topk_fwd(a, ws.get(), need, nullptr);  // the queried size is enough
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (double v : download(values)) EXPECT_FALSE(std::isnan(v));
}

TEST_F(TopkLayouts, BroadcastRows) {
  // x with row stride 0: every row is the same row.
  TopkCase c;
  c.M = 5;
  c.N = 2048;
  c.k = 16;
  c.x = c.values = DType::kBFloat16;
  Rng rng(5);
  const std::vector<double> row = random_values(rng, c.N, c.x);
  std::vector<double> x;
  for (int64_t i = 0; i < c.M; ++i) x.insert(x.end(), row.begin(), row.end());
  Layout l;
  l.row_stride = 0;
  DeviceTensor xd = alloc_tensor(c.x, c.M, c.N, l);
  upload_into(xd, x);
  DeviceTensor values = alloc_tensor(c.values, c.M, c.k),
               indices = alloc_tensor(DType::kInt64, c.M, c.k);
  TopkFwdArgs a;
  a.x = xd.ref;
  a.values = values.ref;
  a.indices = indices.ref;
  topk_fwd(a, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const TopkRef ref = topk_reference(x, c.M, c.N, c.k, true);
  EXPECT_TRUE(same_indices("indices", download_indices(indices), ref.indices, c.k));
  EXPECT_TRUE(same_values("values", download(values), ref.values, c.values, c.k));
}

// ------------------------------------------------------------------ fused softmax

// dtype, kRow (else kSelected), forced kernel (force_path)
using SoftmaxParam = std::tuple<int, bool, int>;
class TopkSoftmaxTest : public GpuTest, public ::testing::WithParamInterface<SoftmaxParam> {};

TEST_P(TopkSoftmaxTest, MatchesReference) {
  const auto [di, row, path] = GetParam();
  const Mnk shapes[] = {{64, 64, 8},    {33, 256, 8},    {9, 4096, 32}, {4, 32768, 128},
                        {3, 3000, 300}, {2, 131072, 64}, {14, 200, 6}};
  uint64_t seed = 7000 + 10 * di + row;
  int n = 0;
  for (const Mnk& s : shapes)
    for (bool largest : {true, false}) {
      TopkCase c = case_of(s, kDtypes[di]);
      c.values = n % 3 == 0 ? DType::kFloat32 : c.x;
      c.softmax = row ? TopkSoftmax::kRow : TopkSoftmax::kSelected;
      c.lse = row && n % 2 == 0;
      c.largest = largest;
      c.data = s.M == 14 ? Data::kSpecials : Data::kRandom;
      force_path(c, path);
      c.seed = ++seed;
      ++n;
      if (c.radix && !radix_runs(c)) continue;
      run_case(c);
    }
}

INSTANTIATE_TEST_SUITE_P(All, TopkSoftmaxTest,
                         ::testing::Combine(::testing::Range(0, 3), ::testing::Bool(),
                                            ::testing::Range(0, 3)),
                         [](const ::testing::TestParamInfo<SoftmaxParam>& info) {
                           return std::string(short_name(kDtypes[std::get<0>(info.param)])) +
                                  (std::get<1>(info.param) ? "_row" : "_selected") +
                                  kPathSuffix[std::get<2>(info.param)];
                         });

// ------------------------------------------------------------------ backward

using BwdParam = std::tuple<int, int>;  // softmax mode, dtype
class TopkBackward : public GpuTest, public ::testing::WithParamInterface<BwdParam> {};

TEST_P(TopkBackward, MatchesReference) {
  const auto [mode, di] = GetParam();
  const TopkSoftmax sm = static_cast<TopkSoftmax>(mode);
  const Mnk shapes[] = {{64, 64, 8}, {7, 1000, 50}, {5, 4096, 128}, {3, 20000, 300},
                        {1, 1, 1},   {4, 100, 0},   {0, 50, 5}};
  uint64_t seed = 8000 + 10 * mode + di;
  for (const Mnk& s : shapes) {
    TopkCase c = case_of(s, kDtypes[di]);
    c.indices = s.N % 2 ? DType::kInt32 : DType::kInt64;
    c.softmax = sm;
    c.lse = sm == TopkSoftmax::kRow;
    c.seed = ++seed;
    TopkRun f = run_case(c);
    SCOPED_TRACE("backward of " + case_name(c));
    Rng rng(c.seed + 1);
    const std::vector<double> dv = random_values(rng, c.M * c.k, c.x);
    DeviceTensor dvd = upload(dv, c.x, c.M, c.k);
    const DType dxt = di == 0 ? DType::kFloat32 : c.x;  // bf16 x: fp32 dx
    Layout dxl;
    dxl.row_stride = c.N + 5;
    DeviceTensor dx = alloc_tensor(dxt, c.M, c.N, dxl);
    TopkBwdArgs b;
    b.dvalues = dvd.ref;
    b.indices = f.indices.ref;
    b.softmax = sm;
    if (sm == TopkSoftmax::kSelected) b.values = f.values.ref;
    if (sm == TopkSoftmax::kRow) {
      b.x = f.xd.ref;
      b.lse = f.lse.ref;
    }
    b.dx = dx.ref;
    topk_bwd(b, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (c.M == 0) continue;
    const std::vector<int64_t> idx = c.k > 0 ? download_indices(f.indices) : std::vector<int64_t>{};
    const std::vector<double> vals = c.k > 0 ? download(f.values) : std::vector<double>{};
    const std::vector<double> lse = c.lse ? download(f.lse) : std::vector<double>(c.M, 0.0);
    const std::vector<double> ref = topk_bwd_reference(dv, idx, vals, f.x, lse, c.M, c.N, c.k,
                                                       static_cast<TopkRefSoftmax>(mode));
    const std::vector<double> got = download(dx);
    if (sm == TopkSoftmax::kNone) EXPECT_TRUE(same_values("dx", got, ref, dxt, c.N));
    else EXPECT_TRUE(close("dx", got, ref, 2 * tolerance(dxt), c.N));
    EXPECT_TRUE(gaps_untouched("dx", dx));
  }
}

const char* const kModeNames[] = {"none", "selected", "row"};

INSTANTIATE_TEST_SUITE_P(All, TopkBackward,
                         ::testing::Combine(::testing::Range(0, 3), ::testing::Range(0, 3)),
                         [](const ::testing::TestParamInfo<BwdParam>& info) {
                           return std::string(kModeNames[std::get<0>(info.param)]) + "_" +
                                  short_name(kDtypes[std::get<1>(info.param)]);
                         });

TEST_F(TopkBackward, OutOfRangeIndicesAreSkipped) {
  const int64_t M = 3, N = 40, k = 4;
  Rng rng(3);
  const std::vector<double> dv = random_values(rng, M * k, DType::kFloat32);
  const std::vector<int64_t> idx = {0, -1, 39, 40, 5, 1000, -7, 6, 2, 3, 4, 1};
  DeviceTensor dvd = upload(dv, DType::kFloat32, M, k);
  DeviceTensor idd = upload_indices(idx, DType::kInt64, M, k);
  DeviceTensor dx = alloc_tensor(DType::kFloat32, M, N);
  TopkBwdArgs b;
  b.dvalues = dvd.ref;
  b.indices = idd.ref;
  b.dx = dx.ref;
  topk_bwd(b, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<double> ref =
      topk_bwd_reference(dv, idx, {}, {}, {}, M, N, k, TopkRefSoftmax::kNone);
  EXPECT_TRUE(same_values("dx", download(dx), ref, DType::kFloat32, N));
}

}  // namespace
}  // namespace quack::test
