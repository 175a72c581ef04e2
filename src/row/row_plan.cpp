// The row skeleton's host side: plan (policy, configuration, geometry) and the call/launch glue.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "common/check.h"
#include "common/launch.h"
#include "row/row_op.h"
#include "row/row_plan.h"

namespace quack::detail {

namespace {

int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

constexpr int64_t kMaxGrid = 0x7fffffff;  // gridDim.x

}  // namespace

bool row_config_takes(int config, int64_t M, int64_t row_bytes) {
  if (config < 0 || config >= kRowConfigCount) return false;
  const RowConfig& c = kRowConfigs[config];
  if (row_bytes / 16 > 0x7fffffff) return false;  // vector indices in a row are 32-bit
  switch (c.policy) {
    case RowPolicy::kRegister:
      return row_bytes <= c.chunk_bytes() && (M + c.rows - 1) / c.rows <= kMaxGrid;
    case RowPolicy::kLooped:
      return M <= kMaxGrid;
    case RowPolicy::kRing:
      return row_bytes <= c.capacity_bytes();
    default:
      return false;
  }
}

RowGeometry row_general_geometry(int64_t M, int64_t N) {
  RowGeometry g;
  const int64_t threads = next_pow2((std::max<int64_t>(N, 1) + kRowGeneralValuesPerThread - 1) /
                                    kRowGeneralValuesPerThread);
  g.rows = M;
  g.cols = N;
  g.vec = 1;
  g.vpt = 0;  // threads loop over their columns
  g.tpr = static_cast<int>(std::min<int64_t>(threads, 256));
  g.cluster_n = static_cast<int>(std::min<int64_t>(kRowMaxCluster, threads / g.tpr));
  g.cta_threads = std::max(g.tpr, 128);
  const int rows_per_cta = g.cta_threads / g.tpr;
  g.row_blocks = (M + rows_per_cta - 1) / rows_per_cta;
  return g;
}

int64_t row_general_smem_bytes(const RowGeometry& g, int red_floats) {
  const int64_t slots = 2 * int64_t{g.reduce_slots()} * row_slot_floats(red_floats) * 4;
  return (slots + 15) / 16 * 16 + (g.cluster_n > 1 ? 128 : 0);
}

RowPlan plan_row(const RowOpInfo& op, const RowProblem& pr, int forced_config) {
  RowPlan plan;
  plan.in = pr.in;
  plan.out = pr.out;
  plan.g.rows = pr.M;
  plan.g.cols = pr.N;
  if (pr.M <= 0 || pr.N <= 0) return plan;  // nothing to launch
  const int in_elt = dtype_size(pr.in);
  const int64_t row_bytes = pr.N * in_elt;
  const bool force_general = forced_config == kRowConfigCount;
  if (pr.pair && pr.vec_ok && !force_general) {
    for (int i = 0; i < kRowConfigCount; ++i) {
      if (forced_config >= 0 && i != forced_config) continue;
      const RowConfig& c = kRowConfigs[i];
      if (!row_config_usable(c, op.n_in, op.red_floats, op.n_cols, in_elt)) continue;
      if (!row_config_takes(i, pr.M, row_bytes)) continue;
      plan.policy = c.policy;
      plan.config = i;
      plan.threads = c.threads();
      plan.g.vec = 16 / in_elt;
      plan.g.vpt = c.vecs;
      plan.g.tpr = c.tpr;
      plan.g.cta_threads = c.threads();
      if (c.policy == RowPolicy::kRing) {
        plan.cluster_n = static_cast<int>((row_bytes + c.chunk_bytes() - 1) / c.chunk_bytes());
        plan.smem = static_cast<size_t>(row_ring_smem_bytes(c, op.n_in, op.red_floats));
        plan.grid = 0;  // persistent: resident clusters, at launch
        plan.g.row_blocks = pr.M;
      } else {
        plan.grid = (pr.M + c.rows - 1) / c.rows;
        plan.g.row_blocks = plan.grid;
      }
      plan.g.cluster_n = plan.cluster_n;
      return plan;
    }
  }
  if (forced_config >= 0 && !force_general) return plan;  // the forced entry does not take it
  plan.policy = RowPolicy::kGeneral;
  plan.g = row_general_geometry(pr.M, pr.N);
  plan.threads = plan.g.cta_threads;
  plan.cluster_n = plan.g.cluster_n;
  plan.grid = plan.g.row_blocks * plan.g.cluster_n;
  plan.smem = static_cast<size_t>(row_general_smem_bytes(plan.g, op.red_floats));
  return plan;
}

const char* row_plan_name(const RowPlan& plan, char* buf, size_t len) {
  switch (plan.policy) {
    case RowPolicy::kNone:
      std::snprintf(buf, len, "none");
      break;
    case RowPolicy::kGeneral:
      std::snprintf(buf, len, "general-t%d-x%d", plan.g.tpr, plan.cluster_n);
      break;
    case RowPolicy::kRing:
      std::snprintf(buf, len, "%s-x%d", kRowConfigs[plan.config].name, plan.cluster_n);
      break;
    default:
      std::snprintf(buf, len, "%s", kRowConfigs[plan.config].name);
      break;
  }
  return buf;
}

RowCall make_row_call(const RowOpEntry& op, const char* fn,
                      std::initializer_list<const TensorRef*> in,
                      std::initializer_list<const TensorRef*> out) {
  RowCall c;
  c.op = &op;
  c.fn = fn;
  const TensorRef& x = **in.begin();
  c.device = x.device;
  c.p.g.rows = x.shape[0];
  c.p.g.cols = x.shape[1];
  RowProblem& pr = c.problem;
  pr.M = x.shape[0];
  pr.N = x.shape[1];
  pr.in = x.dtype;
  pr.out = out.size() > 0 ? (*out.begin())->dtype : x.dtype;
  bool uniform = true;
  int i = 0;
  for (const TensorRef* t : in) {
    c.p.in[i++] = row_io(*t);
    uniform = uniform && t->dtype == pr.in;
  }
  int o = 0;
  for (const TensorRef* t : out) {
    c.p.out[o++] = row_io(*t);
    uniform = uniform && t->dtype == pr.out;
  }
  pr.pair = uniform && op.has_pair(pr.in, pr.out);
  const int vec = 16 / dtype_size(pr.in);
  pr.vec_ok = true;
  for (const TensorRef* t : in) pr.vec_ok = pr.vec_ok && vector_ok(*t, vec);
  for (const TensorRef* t : out) pr.vec_ok = pr.vec_ok && vector_ok(*t, vec);
  return c;
}

RowPlan plan_row_call(const RowCall& c, int forced_config) {
  return plan_row(c.op->info, c.problem, forced_config);
}

void run_row_call(const RowCall& c, const RowPlan& plan, cudaStream_t stream) {
  if (plan.policy == RowPolicy::kNone) return;
  if (plan.grid > kMaxGrid)  // the general policy's grid for billions of rows
    ArgCheck(c.fn).fail("operands of (M, N) = (" + std::to_string(plan.g.rows) + ", " +
                        std::to_string(plan.g.cols) + ") need " + std::to_string(plan.grid) +
                        " CTAs on this layout, expected at most 2^31 - 1 (one launch)");
  std::optional<DeviceGuard> guard;
  try {
    guard.emplace(c.device);
  } catch (const CudaError& e) {  // e.g. no driver: say which call met it
    throw CudaError(std::string(c.fn) + ": " + e.what());
  }
  RowParams p = c.p;
  p.g = plan.g;
  c.op->launch(plan, p, c.device, stream, c.fn);
}

void row_check_mn(const ArgCheck& chk, const TensorRef& t, const char* name, int64_t M,
                  int64_t N, int device, bool output) {
  chk.matrix(t, name, M, N);
  chk.float_dtype(t, name);
  chk.same_device(t, name, device);
  if (output) chk.non_overlapping(t, name);
}

}  // namespace quack::detail
