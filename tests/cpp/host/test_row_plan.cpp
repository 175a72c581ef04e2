// Tier 1: the row skeleton's plan (no GPU): every plan, swept over N, dtypes and the op shapes
// of the softmax family (one input stream with a 2-float reduction; two streams with a 1-float
// sum) and LayerNorm's forward (one or two streams, a 3-float reduction, two per-column vectors
// in x's dtype or fp32), stays inside the kernels' limits (threads, registers, shared memory, cluster
// size, row capacity); the training shapes take the policies documented in row_config.h; odd
// layouts and dtype mixes fall back to the general policy. Fake pointers: no CUDA call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "common/pdl.h"
#include "host_test_util.h"
#include "scoped_env.h"
#include "row/row_config.h"
#include "row/row_plan.h"
#include "softmax/softmax_internal.h"

namespace quack::detail {
namespace {

RowOpInfo fwd_info() {  // softmax_fwd's shape without its trial entries: x -> y, (max, sum)
  RowOpInfo i;
  i.n_in = 1;
  i.n_out = 1;
  i.red_floats = 2;
  i.name = "fwd";
  return i;
}
RowOpInfo bwd_info() {  // softmax_bwd's shape: (y, dy) -> dx, one sum
  RowOpInfo i;
  i.n_in = 2;
  i.n_out = 1;
  i.red_floats = 1;
  i.name = "bwd";
  return i;
}

RowOpInfo ln_fwd_info(int n_in) {  // layernorm_fwd(_res)'s shape: weight, bias; (n, mean, M2)
  RowOpInfo i;
  i.n_in = n_in;
  i.n_out = 2;
  i.n_cols = 2;
  i.red_floats = 3;
  i.cols_at_apply = true;
  i.name = n_in == 1 ? "ln_fwd" : "ln_fwd_res";
  return i;
}

RowOpInfo ce_fwd_info(int n_out) {  // cross-entropy's forwards: loss (n_out 0) or + dx
  RowOpInfo i;
  i.n_in = 1;
  i.n_out = n_out;
  i.red_floats = 4;
  i.trial_configs = true;
  i.trial_planned = true;
  i.name = n_out == 0 ? "ce_fwd" : "ce_fwd_grad";
  return i;
}

RowOpInfo ce_bwd_info(bool no_reduce = true) {  // cross-entropy's backward: x -> dx, gated
  RowOpInfo i;
  i.n_in = 1;
  i.n_out = 1;
  i.red_floats = 1;
  i.gate_kernel = true;
  i.no_reduce = no_reduce;  // false: weighted smoothing (W summed per row)
  i.name = no_reduce ? "ce_bwd" : "ce_bwd_ws";
  return i;
}

RowProblem problem(int64_t M, int64_t N, DType in, bool vec_ok = true, bool pair = true,
                   DType vec = DType::kFloat32) {
  RowProblem p;
  p.M = M;
  p.N = N;
  p.in = in;
  p.out = in;
  p.vec = vec;
  p.pair = pair;
  p.vec_ok = vec_ok && N % (16 / dtype_size(in)) == 0;
  return p;
}

std::string name_of(const RowPlan& plan) {
  char buf[64];
  return row_plan_name(plan, buf, sizeof(buf));
}

// The limits every plan must respect.
void check_plan(const RowOpInfo& op, const RowProblem& pr, const RowPlan& plan) {
  SCOPED_TRACE(std::string(op.name) + " " + dtype_name(pr.in) + " M=" + std::to_string(pr.M) +
               " N=" + std::to_string(pr.N) + " -> " + name_of(plan));
  const int elt = dtype_size(pr.in);
  const int64_t row_bytes = pr.N * elt;
  ASSERT_NE(plan.policy, RowPolicy::kNone);
  EXPECT_GE(plan.threads, 32);
  EXPECT_LE(plan.threads, 1024);
  EXPECT_EQ(plan.threads % 32, 0);
  EXPECT_GE(plan.cluster_n, 1);
  EXPECT_LE(plan.cluster_n, kRowMaxCluster);
  EXPECT_LE(static_cast<int64_t>(plan.smem), kRowMaxSmem);
  EXPECT_EQ(plan.g.rows, pr.M);
  EXPECT_EQ(plan.g.cols, pr.N);
  if (plan.policy == RowPolicy::kGeneral) {
    const RowGeometry& g = plan.g;
    EXPECT_EQ(g.tpr & (g.tpr - 1), 0);
    EXPECT_LE(g.cta_threads, 256);  // the general kernel's __launch_bounds__
    EXPECT_EQ(g.cta_threads % g.tpr, 0);
    EXPECT_TRUE(g.cluster_n == 1 || g.rows_per_cta() == 1);
    EXPECT_TRUE(g.cluster_n == 1 || (g.tpr / 32) * row_slot_floats(op.red_floats) >= 4)
        << "cluster_exchange moves 16-byte chunks";
    EXPECT_EQ(plan.grid, g.row_blocks * g.cluster_n);
    EXPECT_GE(g.row_blocks * g.rows_per_cta(), pr.M);
    EXPECT_LE(plan.grid, 0x7fffffff);
    EXPECT_EQ(static_cast<int64_t>(plan.smem), row_general_smem_bytes(g, op.red_floats));
    return;
  }
  ASSERT_GE(plan.config, 0);
  ASSERT_LT(plan.config, kRowConfigCount);
  const RowConfig& c = kRowConfigs[plan.config];
  if (plan.policy == RowPolicy::kClusterRegister) {  // the kernel reads its slice length from g
    const int64_t row_vecs = pr.N / plan.g.vec;
    EXPECT_EQ(plan.g.slice_vecs, (row_vecs + plan.cluster_n - 1) / plan.cluster_n);
    EXPECT_LE(plan.g.slice_vecs, int64_t{c.tpr} * c.vecs);
    EXPECT_EQ(plan.g.vec * elt, 16);
  }
  EXPECT_TRUE(pr.vec_ok && pr.pair);
  EXPECT_TRUE(row_config_usable(c, op.n_in, op.red_floats, op.n_cols, elt, op.n_acc,
                                dtype_size(pr.vec), -1, op.late_cols, op.n_out,
                                op.trial_configs, op.cols_at_apply, op.no_reduce,
                                op.held_fold));
  if (c.at_apply) {
    EXPECT_TRUE(op.cols_at_apply) << "at-apply entries only where asked";
  }
  if (c.policy == RowPolicy::kMap) {
    EXPECT_TRUE(op.no_reduce) << "map entries only for ops without a reduction";
  }
  if (c.trial) {
    EXPECT_TRUE(op.trial_configs) << "entries under trial only where asked";
  }
  if (c.early_refill) {
    EXPECT_EQ(op.n_out, 0) << "early refills only without outputs";
  }
  EXPECT_EQ(plan.policy, c.policy);
  if (c.policy != RowPolicy::kStaged) {
    EXPECT_EQ(plan.threads, c.threads());
  }
  const int64_t vec_bytes = 16;
  const int64_t row_vecs = row_bytes / vec_bytes;
  switch (c.policy) {
    case RowPolicy::kRegister: {
      EXPECT_LE(row_bytes, c.chunk_bytes()) << "the row fits one pass";
      const int cap = std::min(255, 65536 / c.threads());
      EXPECT_LE(c.vecs * 4 * op.n_in + kRowRegisterBudgetSlack, cap) << "packed values fit";
      EXPECT_EQ(plan.grid, (pr.M + c.rows - 1) / c.rows);
      EXPECT_EQ(plan.cluster_n, 1);
      break;
    }
    case RowPolicy::kLooped:
      EXPECT_EQ(plan.grid, pr.M);
      EXPECT_EQ(plan.cluster_n, 1);
      break;
    case RowPolicy::kRing: {
      const int64_t chunk_vecs = c.chunk_bytes() / vec_bytes;
      EXPECT_GE(plan.cluster_n * chunk_vecs, row_vecs) << "the cluster holds the row";
      EXPECT_LT((plan.cluster_n - 1) * chunk_vecs, row_vecs) << "no CTA more than needed";
      // The kernel's balanced slices: S = ceil(R / cluster_n) ≤ the slice buffer, and every
      // CTA owns at least one vector.
      const int64_t S = (row_vecs + plan.cluster_n - 1) / plan.cluster_n;
      EXPECT_LE(S, chunk_vecs);
      EXPECT_LT((plan.cluster_n - 1) * S, row_vecs);
      EXPECT_EQ(static_cast<int64_t>(plan.smem), row_ring_smem_bytes(c, op.n_in, op.red_floats));
      EXPECT_LE(op.n_in * S * vec_bytes, int64_t{1} << 20) << "an mbarrier's tx count";
      EXPECT_LE(row_col_regs(c, op.n_cols, elt, dtype_size(pr.vec)), kRowRingColRegs);
      break;
    }
    case RowPolicy::kClusterRegister: {
      const int64_t chunk_vecs = c.chunk_bytes() / vec_bytes;
      EXPECT_GE(plan.cluster_n * chunk_vecs, row_vecs) << "the cluster holds the row";
      EXPECT_LT((plan.cluster_n - 1) * chunk_vecs, row_vecs) << "no CTA more than needed";
      const int64_t S = (row_vecs + plan.cluster_n - 1) / plan.cluster_n;
      EXPECT_LE(S, chunk_vecs);
      EXPECT_LT((plan.cluster_n - 1) * S, row_vecs);
      if (c.stages > 0) {
        EXPECT_EQ(plan.grid, 0) << "persistent: resident clusters, at launch";
        EXPECT_EQ(static_cast<int64_t>(plan.smem),
                  row_ring_smem_bytes(c, op.n_in, op.red_floats));
        EXPECT_LE(static_cast<int64_t>(plan.smem), kRowMaxSmem);
        EXPECT_LE(row_cluster_register_ctas_per_sm(c.tpr, false) *
                      (static_cast<int64_t>(plan.smem) + kRowCtaSmemReserve),
                  kRowSmSmem)
            << "the fwd+dx's CTAs per SM";
        EXPECT_LE(op.n_in * S * vec_bytes, int64_t{1} << 20) << "an mbarrier's tx count";
      } else {
        EXPECT_EQ(plan.smem, 0u);
        EXPECT_EQ(plan.grid, pr.M * plan.cluster_n);
        EXPECT_LE(plan.grid, 0x7fffffff);
      }
      EXPECT_LE(row_cluster_register_smem_bytes(c.tpr, op.red_floats), 48 * 1024)
          << "static shared memory";
      EXPECT_LE(c.vecs * 4 * op.n_in + kRowRegisterBudgetSlack,
                65536 / (c.tpr * row_cluster_register_ctas_per_sm(c.tpr)))
          << "packed values fit";
      EXPECT_EQ(op.n_cols, 0);
      break;
    }
    case RowPolicy::kMap: {  // one CTA per (row, chunk of tpr·vecs vectors), no cluster
      const int64_t chunks = (row_bytes + c.chunk_bytes() - 1) / c.chunk_bytes();
      EXPECT_EQ(plan.grid, pr.M * chunks);
      EXPECT_LE(plan.grid, 0x7fffffff) << "32-bit tile indices";
      EXPECT_LE(row_vecs, 0x7fffffff);
      EXPECT_EQ(plan.cluster_n, 1);
      EXPECT_EQ(plan.smem, 0u);
      EXPECT_LE(c.vecs * 4 * op.n_in + kRowRegisterBudgetSlack,
                65536 / (c.tpr * row_map_ctas_per_sm(c.tpr)))
          << "packed values fit 64 registers";
      EXPECT_EQ(op.n_cols, 0);
      EXPECT_EQ(op.n_acc, 0);
      break;
    }
    case RowPolicy::kStaged: {
      const RowGeometry& g = plan.g;
      EXPECT_LE(g.vpt, c.vecs);
      EXPECT_GE(int64_t{g.vpt} * g.tpr * g.cluster_n * g.vec, pr.N) << "the geometry holds the row";
      EXPECT_EQ(g.tpr & (g.tpr - 1), 0);
      EXPECT_LE(g.cta_threads, c.threads());
      EXPECT_EQ(g.cta_threads % 32, 0);
      EXPECT_EQ(g.cta_threads % g.tpr, 0);
      EXPECT_EQ(plan.threads, g.cta_threads);
      EXPECT_EQ(plan.cluster_n, g.cluster_n);
      EXPECT_TRUE(g.cluster_n == 1 || g.rows_per_cta() == 1);
      EXPECT_TRUE(g.cluster_n == 1 || (g.tpr / 32) * row_slot_floats(op.red_floats) >= 4);
      EXPECT_EQ(static_cast<int64_t>(plan.smem),
                row_staged_smem_bytes(int64_t{g.vpt} * g.tpr * g.vec, g.rows_per_cta(),
                                      g.reduce_slots(), g.cluster_n, op.red_floats, op.n_in * elt,
                                      op.n_cols, c.stages));
      EXPECT_GE(g.row_blocks * g.rows_per_cta(), pr.M);
      break;
    }
    default:
      ADD_FAILURE() << "unexpected policy";
  }
}

std::vector<int64_t> sweep_ns() {
  std::vector<int64_t> ns;
  for (int64_t n = 1; n <= 64; ++n) ns.push_back(n);
  for (int64_t p = 128; p <= (int64_t{1} << 21); p *= 2)
    for (int64_t d : {-8, -4, -1, 0, 1, 4, 8, 24}) ns.push_back(p + d);
  for (int64_t n : {1000, 3000, 50257, 65537, 100000, 128256, 152064, 262152, 300000, 524296})
    ns.push_back(n);
  return ns;
}

TEST(RowPlan, EveryPlanWithinLimits) {
  for (const RowOpInfo& op :
       {fwd_info(), bwd_info(), ln_fwd_info(1), ln_fwd_info(2), ce_bwd_info()})
    for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
      for (DType v : {t, DType::kFloat32})
        for (int64_t M : {int64_t{1}, int64_t{7}, int64_t{16384}})
          for (int64_t N : sweep_ns())
            for (bool vec_ok : {true, false}) {
              if (op.n_cols == 0 && v != t) continue;
              const RowProblem pr = problem(M, N, t, vec_ok, true, v);
              check_plan(op, pr, plan_row(op, pr));
            }
}

TEST(RowPlan, EveryForcedConfigWithinLimits) {
  for (const RowOpInfo& op : {fwd_info(), bwd_info(), ln_fwd_info(1), ce_fwd_info(0),
                              ce_fwd_info(1), ce_bwd_info()})
    for (DType t : {DType::kBFloat16, DType::kFloat32})
      for (int64_t N : sweep_ns())
        for (int c = 0; c <= kRowConfigCount; ++c) {
          const RowProblem pr = problem(33, N, t);
          const RowPlan plan = plan_row(op, pr, c);
          if (plan.policy == RowPolicy::kNone) {
            // Only when the entry is not compiled for the op or does not take the row.
            ASSERT_LT(c, kRowConfigCount);
            EXPECT_FALSE(pr.vec_ok &&
                         row_config_usable(kRowConfigs[c], op.n_in, op.red_floats, op.n_cols,
                                           dtype_size(t), op.n_acc, dtype_size(pr.vec), -1,
                                           op.late_cols, op.n_out, op.trial_configs,
                                           op.cols_at_apply, op.no_reduce) &&
                         row_config_takes(c, pr.M, N * dtype_size(t)))
                << kRowConfigs[c].name << " N=" << N;
            continue;
          }
          EXPECT_EQ(plan.config, c == kRowConfigCount ? -1 : c);
          check_plan(op, pr, plan);
        }
}

// Entries under trial are compiled for cross-entropy's forwards and reached only when forced,
// but for cl-t512v8, which both forwards take on 16-bit rows of (32, 64] KB, cl-t256v8-s1,
// which the fwd+dx takes on 16-bit rows beyond 64 KB (and the gated loss-only kernel on rows
// of (64, 256] KB), and cl-t256v8, which the loss alone takes on 16-bit rows of (64, 256] KB
// (beyond, the looped entry).
TEST(RowPlan, TrialEntriesPlannedOnlyByRule) {
  for (int n_out : {0, 1}) {
    const RowOpInfo op = ce_fwd_info(n_out);
    for (DType t : {DType::kBFloat16, DType::kFloat32})
      for (int64_t N : sweep_ns()) {
        const RowProblem pr = problem(16384, N, t);
        const RowPlan plan = plan_row(op, pr);
        check_plan(op, pr, plan);
        if (plan.config < 0 || !kRowConfigs[plan.config].trial) continue;
        if (N * 2 <= kRowRegisterMaxRowBytes)  // (32, 64] KB
          EXPECT_TRUE(dtype_size(t) == 2 && N * 2 > kRowRegisterMaxRowBytes / 2 &&
                      std::string(kRowConfigs[plan.config].name) == "cl-t512v8")
              << name_of(plan);
        else
          EXPECT_TRUE(dtype_size(t) == 2 &&
                      (n_out == 1 || N * 2 <= 4 * kRowRegisterMaxRowBytes) &&
                      std::string(kRowConfigs[plan.config].name) ==
                          (n_out ? "cl-t256v8-s1" : "cl-t256v8"))
              << name_of(plan);
      }
    // The fwd+dx takes cl-t256v8-s1 on 16-bit rows beyond 64 KB; the loss alone (n_out = 0)
    // takes cl-t256v8 on rows of (64, 256] KB, then skips the ring for the looped entry; fp32
    // fwd+dx keeps the ring.
    EXPECT_EQ(name_of(plan_row(op, problem(16384, 131072, DType::kBFloat16))),
              n_out ? "cl-t256v8-s1-x8" : "cl-t256v8-x8");
    EXPECT_EQ(name_of(plan_row(op, problem(8192, 262144, DType::kBFloat16))),
              n_out ? "cl-t256v8-s1-x16" : "t1024v2-looped");
    EXPECT_EQ(name_of(plan_row(op, problem(16384, 32768, DType::kBFloat16))), "cl-t512v8-x1");
    EXPECT_EQ(name_of(plan_row(op, problem(16384, 16384, DType::kBFloat16))), "t512v4");
    EXPECT_EQ(name_of(plan_row(op, problem(16384, 65536, DType::kBFloat16))),
              n_out ? "cl-t256v8-s1-x4" : "cl-t256v8-x4");
    if (n_out) {
      EXPECT_EQ(name_of(plan_row(op, problem(16384, 65536, DType::kFloat32))),
                "ring-t1024v4-s3-x4");
    }
  }
  // Forced: QuACK's clusters for bf16 131072 and 262144 (32 KB per CTA).
  int cl = -1;
  for (int i = 0; i < kRowConfigCount; ++i)
    if (std::string(kRowConfigs[i].name) == "cl-t256v8") cl = i;
  ASSERT_GE(cl, 0);
  EXPECT_EQ(name_of(plan_row(ce_fwd_info(0), problem(16384, 131072, DType::kBFloat16), cl)),
            "cl-t256v8-x8");
  EXPECT_EQ(name_of(plan_row(ce_fwd_info(1), problem(8192, 262144, DType::kBFloat16), cl)),
            "cl-t256v8-x16");
  EXPECT_EQ(plan_row(fwd_info(), problem(16384, 131072, DType::kBFloat16), cl).policy,
            RowPolicy::kNone)
      << "not compiled for ops that do not ask";
  // The predicted training forward's gated loss-only kernel takes -s1 where the loss alone
  // takes cl-t256v8 (its closed launch: the resident clusters), the looped entry beyond.
  RowOpInfo gated = ce_fwd_info(0);
  gated.gate_kernel = true;
  EXPECT_EQ(name_of(plan_row(gated, problem(16384, 65536, DType::kBFloat16))),
            "cl-t256v8-s1-x4");
  EXPECT_EQ(name_of(plan_row(gated, problem(16384, 131072, DType::kBFloat16))),
            "cl-t256v8-s1-x8");
  EXPECT_EQ(name_of(plan_row(gated, problem(8192, 262144, DType::kBFloat16))),
            "t1024v2-looped");
  EXPECT_EQ(name_of(plan_row(gated, problem(16384, 32768, DType::kBFloat16))), "cl-t512v8-x1");
  // Its persistent entries with shared-memory stages: compiled for both forwards (planned for
  // the fwd+dx and the gated loss-only kernel).
  for (const char* e : {"cl-t256v8-s1", "cl-t256v8-s2"}) {
    const int cls = row_config_index(e);
    ASSERT_GE(cls, 0);
    for (auto [M, N, cl_n] : {std::tuple<int64_t, int64_t, int>{16384, 65536, 4},
                              {16384, 131072, 8},
                              {8192, 262144, 16}}) {
      const RowPlan ps = plan_row(ce_fwd_info(1), problem(M, N, DType::kBFloat16), cls);
      EXPECT_EQ(name_of(ps), std::string(e) + "-x" + std::to_string(cl_n));
      EXPECT_EQ(ps.grid, 0);
      EXPECT_EQ(ps.g.slice_vecs,
                plan_row(ce_fwd_info(1), problem(M, N, DType::kBFloat16), cl).g.slice_vecs)
          << "cl-t256v8's slices";
    }
    EXPECT_EQ(name_of(plan_row(ce_fwd_info(0), problem(16384, 65536, DType::kBFloat16), cls)),
              std::string(e) + "-x4")
        << "forced for the loss alone";
  }
}

// Softmax's and log_softmax's forwards compile the entries under trial (kTrialConfigs) without
// the rules measured for cross-entropy (kTrialPlanned): unforced they plan cl-t256v8 on 16-bit
// rows beyond 64 KB (fp32: 128 KB) where it takes the shape, cl-t512v8 on rows beyond its 512
// KB, elsewhere as without the entries; forced, the
// cluster register entries take their long rows.
TEST(RowPlan, SoftmaxFwdTrialEntriesPlannedOnLongRows) {
  RowOpInfo sm = fwd_info();
  sm.trial_configs = true;
  const int cl = row_config_index("cl-t256v8");
  const int wide = row_config_index("cl-t512v8");
  ASSERT_GE(cl, 0);
  ASSERT_GE(wide, 0);
  int planned = 0;
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
    for (int64_t N : sweep_ns()) {
      const RowProblem pr = problem(16384, N, t);
      const int64_t row_bytes = N * dtype_size(t);
      // Beyond 64 KB (fp32: 128 KB), cl-t256v8 up to 512 KB, cl-t512v8 beyond.
      const bool f32 = dtype_size(t) == 4;
      const RowPlan forced = plan_row(sm, pr, row_bytes > 8 * 65536 ? wide : cl);
      const bool takes = (f32 ? row_bytes > 2 * 65536 : row_bytes > 65536) &&
                         forced.policy != RowPolicy::kNone;
      if (takes) ++planned;
      EXPECT_EQ(name_of(plan_row(sm, pr)), takes ? name_of(forced) : name_of(plan_row(fwd_info(), pr)))
          << dtype_name(t) << " N=" << N;
    }
  EXPECT_EQ(name_of(plan_row(sm, problem(16384, 131072, DType::kFloat32))), "cl-t256v8-x16");
  EXPECT_EQ(name_of(plan_row(sm, problem(8192, 262144, DType::kFloat32))), "cl-t512v8-x16");
  EXPECT_EQ(name_of(plan_row(sm, problem(16384, 32768, DType::kFloat32))), "t1024v8")
      << "fp32 rows of 128 KB keep t1024v8";
  EXPECT_GT(planned, 10) << "the rule takes the long 16-bit rows of the sweep";
  EXPECT_EQ(name_of(plan_row(sm, problem(16384, 65536, DType::kBFloat16))), "cl-t256v8-x4");
  EXPECT_EQ(name_of(plan_row(sm, problem(8192, 262144, DType::kBFloat16))), "cl-t256v8-x16");
  EXPECT_EQ(name_of(plan_row(sm, problem(16384, 32768, DType::kBFloat16))),
            name_of(plan_row(fwd_info(), problem(16384, 32768, DType::kBFloat16))))
      << "64 KB rows keep the register plan";
  EXPECT_EQ(name_of(plan_row(sm, problem(32768, 2048, DType::kBFloat16))), "r4t32v8")
      << "the warp-per-row entry stays";
  for (auto [e, N, name] : {std::tuple<const char*, int64_t, const char*>{
                                "cl-t256v8", 131072, "cl-t256v8-x8"},
                            {"cl-t256v8-s1", 65536, "cl-t256v8-s1-x4"},
                            {"cl-t256v8", 32768, "cl-t256v8-x2"}}) {
    const int i = row_config_index(e);
    ASSERT_GE(i, 0);
    EXPECT_EQ(name_of(plan_row(sm, problem(16384, N, DType::kBFloat16), i)), name);
  }
}

// The held entry (RowConfig::held: cl-t256v8-h) is compiled only for ops with held folds
// (softmax's forward, kHeldFold); forced, it takes its long rows (64 fp32 values per thread at
// most: 16-bit rows, of fp32 ones 32); unforced, the plan never picks it (last in the table,
// after entries that take every shape it takes).
TEST(RowPlan, HeldEntriesOnlyForHeldFolds) {
  RowOpInfo sm = fwd_info();
  sm.trial_configs = true;
  RowOpInfo held = sm;
  held.held_fold = true;
  const int h8 = row_config_index("cl-t256v8-h");
  ASSERT_GE(h8, 0);
  EXPECT_TRUE(kRowConfigs[h8].held);
  EXPECT_LT(row_config_index("cl-t256v4-h"), 0) << "taken out after run AE";
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
    for (int64_t N : sweep_ns()) {
      const RowProblem pr = problem(16384, N, t);
      EXPECT_EQ(name_of(plan_row(held, pr)), name_of(plan_row(sm, pr)))
          << dtype_name(t) << " N=" << N;
      EXPECT_EQ(plan_row(sm, pr, h8).policy, RowPolicy::kNone) << "not compiled without kHeldFold";
      EXPECT_EQ(plan_row(bwd_info(), pr, h8).policy, RowPolicy::kNone);
    }
  EXPECT_EQ(name_of(plan_row(held, problem(16384, 65536, DType::kBFloat16), h8)), "cl-t256v8-h-x4");
  EXPECT_EQ(name_of(plan_row(held, problem(8192, 262144, DType::kBFloat16), h8)),
            "cl-t256v8-h-x16");
  EXPECT_EQ(name_of(plan_row(held, problem(16384, 65536, DType::kFloat32), h8)), "cl-t256v8-h-x8");
}

// LayerNorm's forward without a residual compiles the entries under trial too (weight and bias
// at apply): unforced it plans cl-t256v8 on 16-bit rows beyond 64 KB with fp32 weight and bias
// (the ring it takes otherwise holds fp32 vector slices only in ring-t1024v2-s6), elsewhere
// (16-bit weight and bias: the ring) as without the entries; forced, the cluster register
// entries take its long rows. Of the persistent ones it compiles -s1 only (no -s2 for ops with
// per-column vectors; softmax's forward keeps both).
TEST(RowPlan, LayerNormFwdTrialEntriesPlannedOnLongRows) {
  RowOpInfo ln = ln_fwd_info(1);
  ln.trial_configs = true;
  const int cl = row_config_index("cl-t256v8"), s1 = row_config_index("cl-t256v8-s1"),
            s2 = row_config_index("cl-t256v8-s2");
  ASSERT_GE(cl, 0);
  ASSERT_GE(s1, 0);
  ASSERT_GE(s2, 0);
  for (int vec_elt : {2, 4}) {
    EXPECT_FALSE(row_config_usable(kRowConfigs[s2], 1, 3, 2, 2, 0, vec_elt, -1, false, 2, true,
                                   true))
        << "no -s2 for LayerNorm's forward, vectors of " << vec_elt << " bytes";
    EXPECT_EQ(row_config_usable(kRowConfigs[s1], 1, 3, 2, 2, 0, vec_elt, -1, false, 2, true,
                                true),
              vec_elt == 2)
        << "-s1 with 16-bit vectors only";
  }
  RowOpInfo sm = fwd_info();
  sm.trial_configs = true;
  EXPECT_TRUE(row_config_usable(kRowConfigs[s2], sm.n_in, sm.red_floats, sm.n_cols, 2, 0, 4, -1,
                                false, sm.n_out, true, false))
      << "softmax's forward keeps -s2";
  int planned = 0;
  for (DType t : {DType::kBFloat16, DType::kFloat32})
    for (DType v : {DType::kFloat32, DType::kBFloat16})
      for (int64_t N : sweep_ns()) {
        const RowProblem pr = problem(16384, N, t, true, true, v);
        const RowPlan forced = plan_row(ln, pr, cl);
        const bool takes = dtype_size(t) == 2 && dtype_size(v) == 4 && N * 2 > 65536 &&
                           forced.policy != RowPolicy::kNone;
        if (takes) ++planned;
        EXPECT_EQ(name_of(plan_row(ln, pr)),
                  takes ? name_of(forced) : name_of(plan_row(ln_fwd_info(1), pr)))
            << dtype_name(t) << " " << dtype_name(v) << " N=" << N;
        EXPECT_EQ(plan_row(ln, pr, s2).policy, RowPolicy::kNone) << "no -s2: N=" << N;
      }
  EXPECT_GT(planned, 5) << "the rule takes the long 16-bit rows of the sweep";
  const RowProblem f32v = problem(8192, 262144, DType::kBFloat16, true, true, DType::kFloat32);
  const RowProblem bf16v = problem(8192, 262144, DType::kBFloat16, true, true, DType::kBFloat16);
  EXPECT_EQ(name_of(plan_row(ln, f32v, cl)), "cl-t256v8-x16");
  EXPECT_EQ(name_of(plan_row(ln, f32v)), "cl-t256v8-x16");
  EXPECT_EQ(plan_row(ln, f32v, s1).policy, RowPolicy::kNone) << "fp32 vectors: no -s1";
  EXPECT_EQ(name_of(plan_row(ln, bf16v, s1)), "cl-t256v8-s1-x16");
  EXPECT_EQ(name_of(plan_row(ln, bf16v)), name_of(plan_row(ln_fwd_info(1), bf16v)))
      << "16-bit weight and bias: the ring";
  EXPECT_EQ(name_of(plan_row(ln, bf16v)).rfind("ring-", 0), 0u);
  EXPECT_EQ(plan_row(ln, bf16v, s2).policy, RowPolicy::kNone) << "no -s2 for LayerNorm";
  EXPECT_EQ(name_of(plan_row(sm, bf16v, s2)), "cl-t256v8-s2-x16") << "softmax's forward";
  EXPECT_EQ(plan_row(ln_fwd_info(1), bf16v, cl).policy, RowPolicy::kNone)
      << "not compiled without kTrialConfigs";
}

// r16t16v2 (at_apply): compiled only for ops whose vectors load at apply (LayerNorm's
// forward), which the plan takes on 16-bit rows of (256, 512] B.
TEST(RowPlan, AtApplyEntriesForLayerNormFwd) {
  const int e = row_config_index("r16t16v2");
  ASSERT_GE(e, 0);
  EXPECT_TRUE(kRowConfigs[e].at_apply);
  const RowProblem pr = problem(32768, 256, DType::kBFloat16);
  const RowPlan forced = plan_row(ln_fwd_info(1), pr, e);
  EXPECT_EQ(name_of(forced), "r16t16v2");
  EXPECT_EQ(forced.threads, 256);
  EXPECT_EQ(forced.grid, 32768 / 16);
  EXPECT_EQ(name_of(plan_row(ln_fwd_info(1), pr)), "r16t16v2");
  EXPECT_EQ(plan_row(ln_fwd_info(1), problem(32768, 264, DType::kBFloat16), e).policy,
            RowPolicy::kNone)
      << "rows over 512 B";
  EXPECT_EQ(plan_row(fwd_info(), pr, e).policy, RowPolicy::kNone)
      << "not compiled for ops that do not ask";
  EXPECT_EQ(plan_row(bwd_info(), pr, e).policy, RowPolicy::kNone);
}

// The map entry is compiled only for ops without a reduction (kNoReduce: cross-entropy's
// backward without weighted smoothing) and planned (map-t256v8) on rows of any dtype beyond the
// ring's 16 x 64 KB; where finish reads per-row device scalars (RowProblem::finish_loads: the
// training backward) the looped entry takes 16-bit rows of (64 KB, 16 x 64 KB]. Forced, the map
// takes rows of any length in tiles.
TEST(RowPlan, MapEntriesForOpsWithoutReduction) {
  const DType bf = DType::kBFloat16, f32 = DType::kFloat32;
  const int map = row_config_index("map-t256v8"), looped = row_config_index("t1024v2-looped");
  ASSERT_GE(map, 0);
  ASSERT_GE(looped, 0);
  EXPECT_LT(row_config_index("map-t128v8"), 0) << "never ahead of map-t256v8 (runs AD4 / AD5)";
  const RowOpInfo op = ce_bwd_info();
  for (DType t : {bf, DType::kFloat16, f32})
    for (int64_t N : sweep_ns())
      for (bool loads : {false, true}) {
        RowProblem pr = problem(16384, N, t);
        pr.finish_loads = loads;
        const RowPlan plan = plan_row(op, pr);
        check_plan(op, pr, plan);
        const int64_t row_bytes = N * dtype_size(t);
        const bool planned = pr.vec_ok && row_bytes > 16 * kRowRegisterMaxRowBytes;
        EXPECT_EQ(plan.config == map, planned)
            << dtype_name(t) << " N=" << N << " loads=" << loads << " " << name_of(plan);
        if (pr.vec_ok && loads && dtype_size(t) == 2 && row_bytes > kRowRegisterMaxRowBytes &&
            !planned) {
          EXPECT_EQ(plan.config, looped) << dtype_name(t) << " N=" << N;
        }
        // The ops with a reduction never take the map, even forced.
        for (const RowOpInfo& other :
             {fwd_info(), bwd_info(), ce_fwd_info(1), ce_bwd_info(false)}) {
          EXPECT_NE(plan_row(other, pr).policy, RowPolicy::kMap);
          EXPECT_EQ(plan_row(other, pr, map).policy, RowPolicy::kNone);
        }
      }
  // The backward's training shapes, forced: 32 KB tiles, M x chunks CTAs.
  for (auto [M, N, chunks] : {std::tuple<int64_t, int64_t, int64_t>{16384, 65536, 4},
                              {16384, 131072, 8},
                              {8192, 262144, 16},
                              {16384, 128256, 8},
                              {4, 1048576, 64}}) {
    RowProblem pr = problem(M, N, bf);
    pr.finish_loads = true;
    const RowPlan p = plan_row(op, pr, map);
    EXPECT_EQ(name_of(p), "map-t256v8") << N;
    EXPECT_EQ(p.grid, M * chunks) << N;
    EXPECT_EQ(name_of(plan_row(op, pr)),
              N * 2 > 16 * kRowRegisterMaxRowBytes ? "map-t256v8" : "t1024v2-looped")
        << N;
  }
  // 16-bit rows of (32, 64] KB: the ring (one CTA a row), with per-row loads in finish or
  // without (the map there read 0.950 x QuACK on the H200, run AZ).
  for (bool loads : {false, true})
    for (int64_t N : {16392, 32768}) {
      RowProblem pr = problem(16384, N, bf);
      pr.finish_loads = loads;
      EXPECT_EQ(name_of(plan_row(op, pr)), "ring-t1024v4-s3-x1") << N << " loads=" << loads;
    }
  EXPECT_EQ(name_of(plan_row(op, problem(16384, 131072, bf))), "ring-t1024v4-s3-x4")
      << "no per-row loads in finish: the ring";
  EXPECT_EQ(name_of(plan_row(op, problem(16384, 65536, f32))), "ring-t1024v4-s3-x4");
  EXPECT_EQ(name_of(plan_row(op, problem(16384, 262144, f32))), "ring-t1024v4-s3-x16");
  EXPECT_EQ(name_of(plan_row(op, problem(64, 262148, f32))), "map-t256v8");  // beyond the ring
  EXPECT_EQ(name_of(plan_row(ce_bwd_info(false), problem(16384, 131072, bf))),
            "ring-t1024v4-s3-x4")
      << "with a reduction: the ring";
  // Forced: short rows are one tile per row.
  EXPECT_EQ(plan_row(op, problem(33, 8, bf), map).grid, 33);
  EXPECT_EQ(plan_row(op, problem(33, 16384, bf), map).grid, 33);
  EXPECT_EQ(plan_row(op, problem(33, 16392, bf), map).grid, 66);
  // M x chunks beyond 2^31 - 1 CTAs: not the map (the ring takes the row).
  const int64_t big = 0x7fffffff / 8 + 1;
  EXPECT_EQ(plan_row(op, problem(big, 131072, bf), map).policy, RowPolicy::kNone);
  EXPECT_EQ(name_of(plan_row(op, problem(big, 131072, bf))), "ring-t1024v4-s3-x4");
  EXPECT_EQ(plan_row(op, problem(big - 1, 131072, bf), map).grid, (big - 1) * 8);
}

TEST(RowPlan, EmptyAndUnalignedInputs) {
  EXPECT_EQ(plan_row(fwd_info(), problem(0, 4096, DType::kBFloat16)).policy, RowPolicy::kNone);
  EXPECT_EQ(plan_row(fwd_info(), problem(8, 0, DType::kBFloat16)).policy, RowPolicy::kNone);
  // N not a multiple of the vector, a layout the vector kernels do not take, or no instance
  // of the dtype pair: the general policy.
  EXPECT_EQ(plan_row(fwd_info(), problem(8, 4097, DType::kBFloat16)).policy, RowPolicy::kGeneral);
  EXPECT_EQ(plan_row(fwd_info(), problem(8, 4096, DType::kBFloat16, false)).policy,
            RowPolicy::kGeneral);
  EXPECT_EQ(plan_row(fwd_info(), problem(8, 4096, DType::kBFloat16, true, false)).policy,
            RowPolicy::kGeneral);
}

struct Expect {
  DType t;
  int64_t N;
  bool bwd;
  const char* plan;
};

// The training shapes and the small rows of the benchmarks take the configurations
// row_config.h documents (a change of the table or the plan that sends them elsewhere fails).
TEST(RowPlan, TrainingShapes) {
  const DType bf = DType::kBFloat16, f32 = DType::kFloat32;
  const Expect cases[] = {
      {bf, 128, false, "r16t16v1"},          {bf, 256, false, "r8t32v1"},
      {bf, 1024, false, "r4t32v4"},          {bf, 2048, false, "r4t32v8"},
      {bf, 4096, false, "t128v4"},           {bf, 8192, false, "t256v4"},
      {bf, 16384, false, "t512v4"},          {bf, 32768, false, "t1024v4"},
      {bf, 65536, false, "ring-t1024v4-s3-x2"}, {bf, 131072, false, "ring-t1024v4-s3-x4"},
      {bf, 262144, false, "ring-t1024v4-s3-x8"}, {bf, 524288, false, "ring-t1024v4-s3-x16"},
      {bf, 524296, false, "t1024v2-looped"}, {f32, 16384, false, "t1024v4"},
      {f32, 32768, false, "t1024v8"},        {f32, 131072, false, "ring-t1024v4-s3-x8"},
      {f32, 262144, false, "ring-t1024v4-s3-x16"},
      {bf, 128, true, "r16t16v1"},           {bf, 4096, true, "t256v2"},
      {bf, 32768, true, "t1024v4"},          {bf, 65536, true, "ring-t1024v2-s3-x4"},
      {bf, 131072, true, "ring-t1024v2-s3-x8"}, {bf, 262144, true, "ring-t1024v2-s3-x16"},
      {f32, 16384, true, "t1024v4"},         {f32, 32768, true, "ring-t1024v2-s3-x4"},
      {f32, 131072, true, "ring-t1024v2-s3-x16"}, {f32, 262144, true, "ring-t1024v4-s1-x16"},
      {f32, 262148, true, "t1024v2-looped"},
  };
  for (const Expect& e : cases) {
    const RowOpInfo op = e.bwd ? bwd_info() : fwd_info();
    const int64_t M = e.N >= 262144 ? 8192 : 16384;
    EXPECT_EQ(name_of(plan_row(op, problem(M, e.N, e.t))), e.plan)
        << dtype_name(e.t) << " N=" << e.N << (e.bwd ? " bwd" : " fwd");
  }
}

// The cluster exchange's two mbarriers sit alone in their 128-byte line after the reduction's
// slots, 8-byte aligned; without a cluster the slots are only padded to 16 bytes.
TEST(RowPlan, ExchangeBarriersOwnTheirLine) {
  for (int slots : {1, 2, 4, 8, 16, 32, 64, 128, 256})
    for (int cluster_n : {1, 2, 16})
      for (int red : {1, 2, 3, 4}) {
        const int64_t bytes = row_reduce_smem_bytes(slots, cluster_n, red);
        const int64_t slot_bytes = 2 * int64_t{slots} * row_slot_floats(red) * 4;
        EXPECT_EQ(bytes % 16, 0);
        if (cluster_n == 1) {
          EXPECT_LT(bytes - slot_bytes, 16);
        } else {
          EXPECT_EQ(row_align16(slot_bytes) % 8, 0);
          EXPECT_GE(bytes - row_align16(slot_bytes), 128);
        }
      }
}

using quack::test::fake;

// Through the softmax API's call builder: the layout and dtype checks that decide between the
// vector policies and the general one (make_row_call).
TEST(RowPlan, SoftmaxCallsPickTheirPolicy) {
  const DType bf = DType::kBFloat16, f16 = DType::kFloat16, f32 = DType::kFloat32;
  auto fwd = [&](DType xt, DType ot, int64_t N, int64_t row_stride = -1, int offset = 0) {
    SoftmaxFwdArgs a;
    a.x = TensorRef::matrix(static_cast<char*>(fake(1)) + offset, xt, 64, N, 0, row_stride);
    a.out = TensorRef::matrix(fake(2), ot, 64, N);
    return plan_row_call(softmax_fwd_call(a, false)).policy;
  };
  EXPECT_EQ(fwd(bf, bf, 4096), RowPolicy::kRegister);
  EXPECT_EQ(fwd(bf, f32, 4096), RowPolicy::kRegister);  // compiled pair bf16 -> fp32
  EXPECT_EQ(fwd(f32, f32, 262144), RowPolicy::kClusterRegister);  // cl-t512v8 (run AG3)
  EXPECT_EQ(fwd(bf, f16, 4096), RowPolicy::kGeneral);   // no bf16 -> fp16 instance
  EXPECT_EQ(fwd(f32, bf, 4096), RowPolicy::kGeneral);   // no fp32 -> bf16 forward instance
  EXPECT_EQ(fwd(bf, bf, 4096, 4104), RowPolicy::kRegister);  // 16-byte row stride
  EXPECT_EQ(fwd(bf, bf, 4096, 4100), RowPolicy::kGeneral);   // 8-byte row stride
  EXPECT_EQ(fwd(bf, bf, 4096, -1, 2), RowPolicy::kGeneral);  // 2-byte aligned base
  EXPECT_EQ(fwd(bf, bf, 4100), RowPolicy::kGeneral);         // N not a multiple of 8

  auto bwd = [&](DType yt, DType dyt, DType dxt, int64_t N, int64_t dy_col_stride = 1) {
    SoftmaxBwdArgs a;
    a.y = TensorRef::matrix(fake(1), yt, 64, N);
    a.dy = TensorRef::matrix(fake(2), dyt, 64, N, 0, dy_col_stride == 1 ? -1 : 1, dy_col_stride);
    a.dx = TensorRef::matrix(fake(3), dxt, 64, N);
    return plan_row_call(softmax_bwd_call(a, true)).policy;
  };
  EXPECT_EQ(bwd(bf, bf, bf, 4096), RowPolicy::kRegister);
  EXPECT_EQ(bwd(f32, f32, bf, 4096), RowPolicy::kRegister);  // fp32 forward output, bf16 dx
  EXPECT_EQ(bwd(bf, bf, bf, 262144), RowPolicy::kRing);
  EXPECT_EQ(bwd(bf, f32, bf, 4096), RowPolicy::kGeneral);    // y and dy differ
  EXPECT_EQ(bwd(bf, bf, bf, 4096, 64), RowPolicy::kGeneral); // dy column-major
}

// View::value_at's ownership rule (row_vector_owner): over the thread layouts of the register,
// looped and ring configurations, each thread claims exactly the columns of its own vectors (at
// the right vector and element, and not the columns just outside them), and those cover every
// column of the row once.
TEST(RowPlan, EveryColumnHasOneOwner) {
  for (int c = 0; c < kRowConfigCount; ++c) {
    const RowConfig& k = kRowConfigs[c];
    if (k.policy != RowPolicy::kRegister && k.policy != RowPolicy::kLooped &&
        k.policy != RowPolicy::kRing)
      continue;
    for (int vec : {8, 4}) {
      const int chunk = k.tpr * k.vecs;  // vectors of a pass or slice
      const int step = k.tpr * vec;      // columns from a thread's vector to its next
      std::vector<int> rows = {1, chunk / 2 + 1, chunk};
      if (k.policy == RowPolicy::kLooped) rows = {1, chunk, 2 * chunk + chunk / 2 + 1};
      if (k.policy == RowPolicy::kRing) rows = {chunk, chunk + 1, 3 * chunk - 1, 16 * chunk};
      for (int R : rows) {  // the row's vectors
        const int64_t cols = int64_t{R} * vec;
        std::vector<int> owners(static_cast<size_t>(cols), 0);
        // A thread whose vector 0 starts at column col0 with n vectors of the row or slice
        // ahead of its first one.
        auto visit = [&](int64_t col0, int n) {
          int j = -1, i = -1;
          if (col0 > 0) {
            ASSERT_FALSE(row_vector_owner(col0 - 1, col0, step, k.tpr, n, vec, k.vecs, j, i));
          }
          for (int jj = 0; jj < k.vecs && jj * k.tpr < n; ++jj) {
            for (int ii = 0; ii < vec; ++ii) {
              const int64_t col = col0 + int64_t{jj} * step + ii;
              ASSERT_LT(col, cols) << k.name;
              ASSERT_TRUE(row_vector_owner(col, col0, step, k.tpr, n, vec, k.vecs, j, i)) << k.name;
              ASSERT_EQ(j, jj);
              ASSERT_EQ(i, ii);
              ++owners[static_cast<size_t>(col)];
            }
            const int64_t after = col0 + int64_t{jj} * step + vec;  // the next thread's column
            if (after < cols) {
              ASSERT_FALSE(row_vector_owner(after, col0, step, k.tpr, n, vec, k.vecs, j, i))
                  << k.name;
            }
          }
          const int64_t beyond = col0 + int64_t{k.vecs} * step;  // past the thread's vectors
          if (beyond < cols) {
            ASSERT_FALSE(row_vector_owner(beyond, col0, step, k.tpr, n, vec, k.vecs, j, i));
          }
        };
        if (k.policy == RowPolicy::kRing) {
          const int cluster = (R + chunk - 1) / chunk;
          const int per_cta = (R + cluster - 1) / cluster;
          for (int rank = 0; rank < cluster; ++rank) {
            const int slice = std::max(0, std::min(per_cta, R - rank * per_cta));
            for (int t = 0; t < k.tpr; ++t)
              visit((int64_t{rank} * per_cta + t) * vec, slice - t);
          }
        } else if (k.policy == RowPolicy::kLooped) {
          for (int t = 0; t < k.tpr; ++t)
            for (int o = 0; o < R - t; o += chunk) visit(int64_t{o + t} * vec, R - t - o);
        } else {
          for (int t = 0; t < k.tpr; ++t) visit(int64_t{t} * vec, R - t);
        }
        for (size_t col = 0; col < owners.size(); ++col)
          ASSERT_EQ(owners[col], 1) << k.name << " vec " << vec << " R " << R << " col " << col;
      }
    }
  }
}

}  // namespace
}  // namespace quack::detail

namespace quack::detail {
namespace {

// The column sums' programmatic launch (common/pdl.h) is on unless QUACK_PDL=0, read at each
// launch: unset or anything else keeps it on.
TEST(RowPlan, ProgrammaticLaunchSwitch) {
  const test::ScopedEnv restore("QUACK_PDL", "1");  // the earlier value back at the end
  unsetenv("QUACK_PDL");
  EXPECT_TRUE(pdl_enabled());
  for (const char* v : {"1", "", "true", "00"}) {
    setenv("QUACK_PDL", v, 1);
    EXPECT_TRUE(pdl_enabled()) << "QUACK_PDL=" << v;
  }
  setenv("QUACK_PDL", "0", 1);
  EXPECT_FALSE(pdl_enabled());
}

// The ring's L2 use: the plan takes kHinted (row_params.h: the prefetch at evict-last, the stage
// copies at evict-first; runs AZ and BA), and each mode's hints are the ones its name says.
TEST(RowPlan, RingL2Modes) {
  EXPECT_EQ(RowPlan{}.ring_l2, RingL2::kHinted);
  EXPECT_EQ(RowParams{}.ring_l2, RingL2::kHinted);
  EXPECT_EQ(plan_row(ce_bwd_info(), problem(16384, 32768, DType::kBFloat16)).ring_l2,
            RingL2::kHinted);
  constexpr RingL2Use h = ring_l2_use(RingL2::kHinted), pl = ring_l2_use(RingL2::kPlain),
                      np = ring_l2_use(RingL2::kNoPrefetch);
  EXPECT_TRUE(h.prefetch && h.prefetch_evict_last && h.copy_evict_first);
  EXPECT_TRUE(pl.prefetch && !pl.prefetch_evict_last && !pl.copy_evict_first);
  EXPECT_TRUE(!np.prefetch && !np.prefetch_evict_last && !np.copy_evict_first);
  EXPECT_EQ(kRingL2Count, 3);
}

}  // namespace
}  // namespace quack::detail
