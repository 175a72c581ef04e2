// Top-k's host plan (topk_plan.h): path, queue size, entry width, load path and geometry.
#include "topk/topk_plan.h"

#include <algorithm>
#include <cstdio>

namespace quack::detail {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

/// The bitonic kernel's list size for k: the power of 2 ≥ k, at least 8.
int bitonic_list(int64_t k) { return static_cast<int>(std::max<int64_t>(8, pow2_ceil(k))); }

/// The bitonic kernel's plan (topk_bitonic_ok(pr) holds). Elements per thread: 64 (as QuACK:
/// enough per thread that the T-lane merges stay a small part), or all of a short row in one
/// thread, at least K and 16; T = the power of 2 that covers N, at most 32 (then E grows).
/// want_fit: the fit instance where T·E = N (a forced E up to topk_bitonic_max_fit_elems then,
/// only where T·E = N).
TopkPlan plan_topk_bitonic(const TopkProblem& pr, int forced_elems, bool want_fit,
                           int forced_filter) {
  TopkPlan plan;
  plan.path = TopkPath::kBitonic;
  plan.vec_io = true;
  plan.packed_bits = 32;
  plan.list = bitonic_list(pr.k);
  const int max_e = topk_bitonic_max_elems(dtype_size(pr.x), plan.list);
  const int max_fit_e = topk_bitonic_max_fit_elems(dtype_size(pr.x), plan.list);
  int64_t e = std::max<int64_t>(
      {plan.list, 16, std::min<int64_t>({64, max_e, pow2_ceil(pr.N)})});
  int64_t t = pow2_ceil(ceil_div(pr.N, e));
  if (t > 32) {
    t = 32;
    e = pow2_ceil(ceil_div(pr.N, 32));
  }
  if (forced_elems > 0 && forced_elems >= plan.list &&
      forced_elems <= (want_fit ? max_fit_e : max_e) &&
      (forced_elems & (forced_elems - 1)) == 0 && forced_elems >= 16 &&
      32 * static_cast<int64_t>(forced_elems) >= pr.N) {
    const int64_t ft = std::min<int64_t>(32, pow2_ceil(ceil_div(pr.N, forced_elems)));
    // Above max_e only the fit instance exists (fp32, lists of 8: E = 128).
    if (forced_elems <= max_e || ft * forced_elems == pr.N) {
      e = forced_elems;
      t = ft;
    }
  }
  plan.elems = static_cast<int>(e);
  plan.threads_per_row = static_cast<int>(t);
  plan.fit = want_fit && t * e == pr.N;
  plan.filter = forced_filter != 0 &&
                t >= (forced_filter == 1 ? kTopkBitonicFilterMinT : kTopkFilterPlanMinT) &&
                topk_bitonic_filter_instance(dtype_size(pr.x), plan.list, plan.elems, plan.fit);
  plan.rows_per_cta = kTopkBitonicThreads / plan.threads_per_row;
  plan.threads = kTopkBitonicThreads;
  plan.grid = ceil_div(pr.M, plan.rows_per_cta);
  plan.smem = 0;
  return plan;
}

/// The radix kernel's plan (topk_radix_ok(pr) holds): E elements per thread, T = 32·⌈N /
/// (32·E)⌉ ≥ 32 threads, one row per CTA.
TopkPlan plan_topk_radix(const TopkProblem& pr, int forced_elems) {
  TopkPlan plan;
  plan.path = TopkPath::kRadix;
  plan.vec_io = true;
  const int elt = dtype_size(pr.x);
  plan.packed_bits = elt == 2 ? 32 : 64;
  int64_t e = kTopkRadixElems;
  if ((forced_elems == 8 || forced_elems == 16 || forced_elems == 32) &&
      kTopkRadixMaxThreads * static_cast<int64_t>(forced_elems) >= pr.N)
    e = forced_elems;
  const int64_t t = std::max<int64_t>(32, ceil_div(ceil_div(pr.N, e), 32) * 32);
  plan.elems = static_cast<int>(e);
  plan.threads_per_row = static_cast<int>(t);
  plan.threads = static_cast<int>(t);
  plan.rows_per_cta = 1;
  plan.grid = pr.M;
  plan.smem = topk_radix_smem_layout(pr.N, plan.packed_bits / 8, plan.threads / 32).total;
  return plan;
}

}  // namespace

bool topk_radix_ok(const TopkProblem& pr) {
  const int elt = dtype_size(pr.x);
  return pr.vec_ok && pr.k <= kTopkRadixMaxK &&
         ((elt == 2 && pr.N <= kTopkRadixMaxN16) || (elt == 4 && pr.N <= kTopkRadixMaxN32));
}

bool topk_radix_planned(const TopkProblem& pr) {
  return dtype_size(pr.x) == 2 && pr.N >= kTopkRadixPlanMinN && topk_radix_ok(pr) &&
         !topk_bitonic_planned(pr) && !(pr.N <= kTopkSparseOverRadixMaxN && pr.k >= kTopkPrefixMinK);
}

bool topk_bitonic_ok(const TopkProblem& pr) {
  if (!(dtype_size(pr.x) == 2 || pr.x == DType::kFloat32) || !pr.vec_ok ||
      pr.k > kTopkBitonicMaxK || pr.N > kTopkBitonicMaxN)
    return false;
  // T ≤ 32 threads of at most topk_bitonic_max_elems (fp32: by the list size).
  return pr.N <= 32 * static_cast<int64_t>(topk_bitonic_max_elems(dtype_size(pr.x),
                                                                   bitonic_list(pr.k)));
}

bool topk_bitonic_fits(const TopkProblem& pr) {
  return topk_bitonic_ok(pr) && pr.N >= 16 && (pr.N & (pr.N - 1)) == 0;
}

bool topk_bitonic_planned(const TopkProblem& pr) {
  if (!topk_bitonic_ok(pr)) return false;
  if (pr.x == DType::kFloat32)
    return (pr.N <= kTopkBitonicPlanMaxNF32 && pr.k <= kTopkBitonicPlanMaxKF32) ||
           (pr.k <= kTopkBitonicPlanMaxKF32Short &&
            (pr.N <= kTopkBitonicPlanMaxNF32Short ||
             (pr.N <= 2 * kTopkBitonicPlanMaxNF32Short && topk_bitonic_fits(pr))));
  return pr.k <= kTopkBitonicPlanMaxK || pr.N <= kTopkBitonicPlanMaxN;
}

TopkPlan plan_topk(const TopkProblem& pr, int forced_warps, TopkPath forced_path,
                   int forced_elems, bool forced_fit, int forced_prefix, int forced_filter,
                   int forced_sparse, int forced_narrow) {
  TopkPlan plan;
  if (pr.M <= 0 || pr.k <= 0 || pr.N <= 0) return plan;
  if (forced_path == TopkPath::kRadix && topk_radix_ok(pr))
    return plan_topk_radix(pr, forced_elems);
  if (forced_path == TopkPath::kBitonic && topk_bitonic_ok(pr))
    return plan_topk_bitonic(pr, forced_elems, forced_fit, forced_filter);
  if (forced_path != TopkPath::kQueue && forced_warps <= 0 && topk_bitonic_planned(pr)) {
    // Rows of a power-of-2 length run the fit instance; from N = 1024 with 128 elements per
    // thread (kTopkBitonicFitElems' measurements), or the kernel's largest E below that (fp32:
    // 64, lists of 32: 32; not measured).
    if (forced_elems <= 0 && topk_bitonic_fits(pr)) {
      const int fit_e = std::min(kTopkBitonicFitElems,
                                 topk_bitonic_max_elems(dtype_size(pr.x), bitonic_list(pr.k)));
      return plan_topk_bitonic(pr, pr.N >= kTopkBitonicFitMinN ? fit_e : 0, true, forced_filter);
    }
    return plan_topk_bitonic(pr, forced_elems, false, forced_filter);
  }
  if (forced_path == TopkPath::kNone && forced_warps <= 0 && forced_prefix < 0 &&
      topk_radix_planned(pr))
    return plan_topk_radix(pr, forced_elems);
  if (pr.k > kTopkQueueMaxK) {
    plan.path = TopkPath::kSort;
    return plan;
  }
  plan.path = TopkPath::kQueue;
  const int elt = dtype_size(pr.x);
  int q = 1;
  while (32 * q < pr.k) q *= 2;
  plan.queue_regs = q;
  // (16-bit key, 16-bit column) entries need every column < 2^16 − 1 (the column part ≥ 1).
  plan.packed_bits = elt == 2 && pr.N < 65536 ? 32 : 64;
  plan.vec_io = pr.vec_ok;
  // Warps per row: one, unless the rows are too few to give the device 16 warps per SM and
  // long enough that each warp's slice stays ≥ 16·k columns and ≥ one iteration. More warps
  // per row cost work: each warp accepts ~k·(1 + ln(slice / k)) elements of its own slice
  // (random rows; model in tests), W·k·(1 + ln(N / (W·k))) in all, and the long rows are
  // issue-bound on those merges, not on HBM, once 16 warps per SM stream (2 KB in flight each).
  const int64_t iter = topk_iter_cols(elt);
  const int64_t target_warps = static_cast<int64_t>(std::max(pr.sm_count, 1)) * 16;
  const int64_t min_slice = std::max<int64_t>(iter, 16 * pr.k);
  int w = 1;
  while (w < kTopkMaxWarpsPerRow && pr.M * w < target_warps && pr.N / (2 * w) >= min_slice) w *= 2;
  if (forced_warps > 0) w = forced_warps;
  plan.warps_per_row = w;
  plan.rows_per_cta = w >= 4 ? 1 : 4 / w;
  plan.threads = 32 * w * plan.rows_per_cta;
  plan.slice = ceil_div(ceil_div(pr.N, w), iter) * iter;
  plan.grid = ceil_div(pr.M, plan.rows_per_cta);
  plan.smem = topk_smem_layout(w, plan.rows_per_cta, q, plan.packed_bits / 8).total;
  // The prefix bound from k = kTopkPrefixMinK (below, the first-block bound; run V's table).
  if (plan.vec_io)
    plan.prefix_iters = forced_prefix >= 0        ? forced_prefix
                        : pr.k >= kTopkPrefixMinK ? kTopkPrefixIters
                                                  : 0;
  // The sparse offer where the prefix bound runs (kTopkSparsePlanned's measurements), or forced.
  plan.sparse = plan.vec_io && plan.threads <= kTopkSparseMaxThreads &&
                (forced_sparse == 1 || (forced_sparse < 0 && plan.prefix_iters > 0));
  plan.prefix_narrow = plan.prefix_iters > 0 && forced_narrow == 1;
  return plan;
}

const char* topk_plan_name(const TopkPlan& plan, char* buf, size_t len) {
  switch (plan.path) {
    case TopkPath::kNone: std::snprintf(buf, len, "none"); break;
    case TopkPath::kSort: std::snprintf(buf, len, "sort"); break;
    case TopkPath::kRadix:
      std::snprintf(buf, len, "radix-e%d-t%d", plan.elems, plan.threads_per_row);
      break;
    case TopkPath::kBitonic:
      std::snprintf(buf, len, "bitonic-k%d-e%d-t%d%s%s", plan.list, plan.elems, plan.threads_per_row,
                    plan.fit ? "-fit" : "", plan.filter ? "-flt" : "");
      break;
    case TopkPath::kQueue: {
      char pre[24] = "";
      if (plan.prefix_iters > 0)
        std::snprintf(pre, sizeof(pre), "-pre%d%s", plan.prefix_iters,
                      plan.prefix_narrow ? "-nw" : "");
      std::snprintf(buf, len, "queue-q%d-p%d-%s-w%dr%d%s%s", 32 * plan.queue_regs,
                    plan.packed_bits, plan.vec_io ? "vec" : "elt", plan.warps_per_row,
                    plan.rows_per_cta, pre, plan.sparse ? "-sp" : "");
      break;
    }
  }
  return buf;
}

}  // namespace quack::detail
