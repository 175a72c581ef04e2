// Top-k's host plan (topk_plan.h): path, queue size, entry width, load path and geometry.
#include "topk/topk_plan.h"

#include <algorithm>
#include <cstdio>

namespace quack::detail {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

TopkPlan plan_topk(const TopkProblem& pr, int forced_warps) {
  TopkPlan plan;
  if (pr.M <= 0 || pr.k <= 0 || pr.N <= 0) return plan;
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
  return plan;
}

const char* topk_plan_name(const TopkPlan& plan, char* buf, size_t len) {
  switch (plan.path) {
    case TopkPath::kNone: std::snprintf(buf, len, "none"); break;
    case TopkPath::kSort: std::snprintf(buf, len, "sort"); break;
    case TopkPath::kQueue:
      std::snprintf(buf, len, "queue-q%d-p%d-%s-w%dr%d", 32 * plan.queue_regs, plan.packed_bits,
                    plan.vec_io ? "vec" : "elt", plan.warps_per_row, plan.rows_per_cta);
      break;
  }
  return buf;
}

}  // namespace quack::detail
