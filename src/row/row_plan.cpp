// The row skeleton's host side: plan (policy, configuration, geometry) and the call/launch glue.
#include <algorithm>
#include <cstdio>
#include <string>

#include "common/check.h"
#include "common/colsum.h"
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

// Chunks of c.chunk_bytes() covering a row (at least 1): the ring's and cluster register
// policy's CTAs per row, the map's tiles per row.
int64_t row_chunks(const RowConfig& c, int64_t row_bytes) {
  return std::max<int64_t>(1, (row_bytes + c.chunk_bytes() - 1) / c.chunk_bytes());
}

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
    case RowPolicy::kClusterRegister:  // grid: M x the cluster (persistent: resident clusters)
      return row_bytes <= c.capacity_bytes() &&
             (c.stages > 0 || M <= kMaxGrid / row_chunks(c, row_bytes));
    case RowPolicy::kMap:  // M x chunks tiles, 32-bit tile indices (policy_register.cuh)
      return M <= kMaxGrid / row_chunks(c, row_bytes);
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
  return row_reduce_smem_bytes(g.reduce_slots(), g.cluster_n, red_floats);
}

namespace {

// RMSNorm's row geometry with the staged policy's knobs: at most values_per_thread elements per
// thread, rows over the fewest threads (a power of two) up to min(kRowStagedMaxRowThreads,
// max_threads) per CTA, then clusters of such CTAs (up to 16; past that, wider CTAs up to
// max_threads); small rows share CTAs of kRowStagedMinThreads.
bool staged_geometry_for(int64_t M, int64_t N, int vec, int values_per_thread, int max_threads,
                         RowGeometry* g) {
  const int max_vpt = values_per_thread / vec;
  if (N < 1 || max_vpt < 1) return false;
  const int64_t nvec = (N + vec - 1) / vec;
  const int64_t threads = next_pow2((nvec + max_vpt - 1) / max_vpt);  // per row, all CTAs
  const int row_threads = std::min(kRowStagedMaxRowThreads, max_threads);
  int tpr, cluster_n;
  if (threads <= row_threads) {
    tpr = static_cast<int>(threads);
    cluster_n = 1;
  } else {
    tpr = row_threads;
    const int64_t cl = threads / tpr;
    if (cl > kRowMaxCluster) {
      const int64_t wide = threads / kRowMaxCluster;
      if (wide > max_threads) return false;
      tpr = static_cast<int>(wide);
      cluster_n = kRowMaxCluster;
    } else {
      cluster_n = static_cast<int>(cl);
    }
  }
  g->rows = M;
  g->cols = N;
  g->vec = vec;
  g->tpr = tpr;
  g->cluster_n = cluster_n;
  g->vpt = static_cast<int>((nvec + int64_t{tpr} * cluster_n - 1) / (int64_t{tpr} * cluster_n));
  g->cta_threads = std::min(std::max(tpr, kRowStagedMinThreads), max_threads);
  g->row_blocks = (M + g->rows_per_cta() - 1) / g->rows_per_cta();
  return true;
}

}  // namespace

bool row_staged_geometry(int64_t M, int64_t N, int in_elt, int max_vecs, int present_bytes,
                         int red_floats, int n_cols, RowGeometry* g, int64_t* smem,
                         int max_threads, int stages) {
  const int vec = 16 / in_elt;
  int values = max_vecs * vec;
  if (!staged_geometry_for(M, N, vec, values, max_threads, g)) return false;
  auto bytes = [&] {
    return row_staged_smem_bytes(int64_t{g->vpt} * g->tpr * g->vec, g->rows_per_cta(),
                                 g->reduce_slots(), g->cluster_n, red_floats, present_bytes,
                                 n_cols, stages);
  };
  for (;;) {
    // Fewer rows per CTA first (halving the CTA), then fewer values per thread (a longer
    // cluster, so a smaller slice per CTA), as RMSNorm's fit_shared_memory.
    while (bytes() > kRowMaxSmem && g->cta_threads > g->tpr && g->cta_threads > 32) {
      g->cta_threads /= 2;
      g->row_blocks = (M + g->rows_per_cta() - 1) / g->rows_per_cta();
    }
    if (bytes() <= kRowMaxSmem) break;
    if (values <= vec) return false;
    values /= 2;
    if (!staged_geometry_for(M, N, vec, values, max_threads, g)) return false;
  }
  *smem = bytes();
  return true;
}

namespace {

// Entries the plan tries before kRowConfigs' order, found once (preferred_entry).
constexpr int kClusterEntry = row_config_index("cl-t256v8");
constexpr int kWideClusterEntry = row_config_index("cl-t512v8");
constexpr int kClusterStageEntry = row_config_index("cl-t256v8-s1");
constexpr int kShortRowEntry = row_config_index("t128v4");
constexpr int kRingEntry = row_config_index("ring-t1024v4-s3");
constexpr int kWarpRowEntry = row_config_index("r4t32v8");
constexpr int kQuarterWarpEntry = row_config_index("r16t16v2");
constexpr int kMapEntry = row_config_index("map-t256v8");
constexpr int kLoopedEntry = row_config_index("t1024v2-looped");
constexpr int kRowAheadEntry = row_config_index("staged-v4-ra");
static_assert(kClusterEntry >= 0 && kWideClusterEntry >= 0 && kClusterStageEntry >= 0 &&
                  kShortRowEntry >= 0 && kRingEntry >= 0 && kWarpRowEntry >= 0 &&
                  kQuarterWarpEntry >= 0 && kMapEntry >= 0 && kLoopedEntry >= 0 &&
                  kRowAheadEntry >= 0,
              "the preferred entries are in kRowConfigs");

// The entry an unforced plan tries first (-1: none; it falls back to kRowConfigs' order where
// that entry is not usable or does not take the shape). H200, kernel-only (quack-bench <op>
// --config all), bf16 unless a bullet says fp32; each bullet names its run (t128v4's and
// ring-t1024v4-s3's: runs T and T2; docs/performance.md, "The runs cited"):
//  - cross-entropy's forward with dx (the ops with planned trial entries, kTrialPlanned, and
//    per-element outputs) on 16-bit rows beyond 64 KB: cl-t256v8-s1 (persistent, the next
//    row's slice prefetched into
//    shared memory), training pair grad 1 at 16384 x 65536 / 131072, 8192 x 262144 (run AB)
//    1.293 / 2.633 / 2.714 ms against cl-t256v8's 1.302 / 2.666 / 2.871 (the forward with
//    the word at 0, its dx kernel closed on a resident grid: 0.56 / 1.10 ms against 0.63 /
//    1.24); cl-t256v8 itself 2.68 / 2.90 ms at 131072 / 262144 against the ring's 3.24 / 3.59
//    (run T); its loss alone on rows of (64, 256] KB: cl-t256v8 (with
//    the rank-0 gather, run AA3) 3.84 / 3.84 TB/s at 16384 x 65536 / 131072 against the looped
//    entry's 2.87 / 3.42 (beyond, the looped entry: 3.74 against 3.45 at 8192 x 262144);
//  - one-stream ops without column accumulations or a kernel gate (softmax, RMSNorm and
//    LayerNorm forwards, cross-entropy's forwards) on 16-bit rows of (4, 8] KB: t128v4, at
//    16384 x 4096 softmax fwd 3.94 TB/s against t256v2's 3.71, RMSNorm fwd 3.85 / 3.75,
//    LayerNorm fwd 2.84 / 2.74, cross-entropy fwd 3.76, fwd+dx 3.09 (t256v4: 2.34);
//  - ops with a kernel gate and no planned trial entries (cross-entropy's backward) on 16-bit
//    rows of (32, 64] KB: ring-t1024v4-s3, 4.02 TB/s at 16384 x 32768 against t1024v4's 3.53
//    (run T2, H200). Run AZ (H200, the backward from lse, the ring without L2 hints):
//    kernel-only 0.538 ms against map-t256v8's 0.564, ring-t1024v2-s6-x2's 0.583; by the
//    acceptance method the map read 0.950 x QuACK (AZ), the ring 1.007 (run W). The H100 read
//    the map ahead of the unhinted ring (run AX: 0.742 against 0.760 ms) and behind the hinted
//    one (run BA: 0.754 against 0.737; 0.988 x QuACK by the acceptance method);
//  - one-stream ops without planned trial entries (softmax, log_softmax, RMSNorm and LayerNorm
//    forwards) on 16-bit rows of (2, 4] KB: r4t32v8, one warp per row (no shared-memory stage
//    in the reduction's exchanges) with 8 vectors per thread, where t256v2 leaves half its
//    threads without a vector. Run Y (H200, 32768 x 2048): LayerNorm 2.62 TB/s against
//    t256v2's 1.93 (fp32 weight and bias held in registers with the row), RMSNorm 3.89
//    / 3.48, softmax 3.93 / 3.43 (its t128v4: 4.04);
//  - one-stream ops whose vectors load at apply (kColsAtApply: LayerNorm's forward) on 16-bit
//    rows of (256, 512] B: r16t16v2, 16 threads per row with 2 vectors each at 32 registers (8
//    CTAs per SM: 32768 rows of 256 in one wave). LayerNorm fwd at 32768 x 256, fp32 weight and
//    bias, run AA3 (at 40 registers for r32t8v4): 2.30 TB/s against r32t8v4's 2.19 and
//    r8t32v1's 2.13 (run Z, at 48: r32t8v4 2.20, r8t32v1 2.05); RMSNorm (2.70 / 2.72) and
//    softmax (2.73 / 2.67) do not gain from r32t8v4 there (run Z) and keep r8t32v1.
//  - cross-entropy's forwards (kTrialPlanned) on 16-bit rows of (32, 64] KB: cl-t512v8, one
//    512-thread CTA a row (two CTAs per SM at 64 registers; one for the softcap's fwd+dx, whose
//    cluster kernels are not bounded to 64: unmeasured), where kRowConfigs' order gives t1024v4
//    (one 1024-thread CTA per SM in lockstep). Run AV (H100, kernel-only, bf16 16384 x 32768, both
//    kernels of the predicted forward on the entry): the training pair at grad 1 0.759 ms
//    against t1024v4's 0.822 (t512v8 0.786, cl-t256v8 0.774, cl-t256v8-s1 0.787), at grad 0.5
//    (loss-only forward, then the recompute) 1.167 against 1.274; the forward with the word
//    at 0 alone 0.372 against 0.489. The loss alone (no gate) takes it too, so the split
//    forward's loss-only kernel keeps the loss-only forward's bits (CeTrain.PairBitwise): it
//    read 0.349 ms (1.02 x copy, acceptance method) on t1024v4, unmeasured on cl-t512v8;
//  - the predicted training forward's loss-only kernel (CrossEntropyFwd's kSplit: trial entries
//    and a kernel gate, closed in training) on 16-bit rows of (64, 256] KB: cl-t256v8-s1 too,
//    whose closed launch is the resident clusters (cl-t256v8's is M x cluster_n CTAs that
//    return at once). Run AC, training pair grad 1 with both kernels on -s1 / on cl-t256v8:
//    1.228 / 1.296 ms at 16384 x 65536, 2.523 / 2.655 at 131072; open (the scaled step's
//    forward) it reads 0.580 ms against cl-t256v8's 0.558 at 65536.
//  - the other ops compiling the entries under trial (kTrialConfigs without kTrialPlanned) on
//    16-bit rows beyond 64 KB: softmax's and log_softmax's forwards cl-t256v8, run AE (bf16,
//    kernel-only) 4.21 / 4.21 / 4.14 TB/s at 16384 x 65536 / 131072, 8192 x 262144 against the
//    ring's 3.99 / 3.94 / 3.62 (QuACK 0.2.0: 4.12-4.19, run O); LayerNorm's forward (per-column
//    vectors at apply) with fp32 weight and bias cl-t256v8 too, 3.12 / 2.79 against the ring
//    it takes otherwise (ring-t1024v2-s6: no ring-t1024v4-s3 for fp32 vectors) 2.62 / 2.23 at
//    131072 / 262144; with 16-bit weight and bias the ring (one-sweep statistics), 3.99 / 3.84
//    / 3.70 against cl-t256v8-s1's 3.56 / 3.59 / 3.34.
//  - the same ops without per-column vectors at apply (softmax's and log_softmax's forwards)
//    on fp32 rows beyond 128 KB (t1024v8's limit): cl-t256v8 up to its 512 KB, cl-t512v8
//    beyond (16-bit rows beyond 512 KB too, by the fp32 rows' measurement). Run AG3 (fp32 softmax fwd, kernel-only): 4.22 TB/s at 16384 x 131072 against the
//    ring's 3.96; cl-t512v8 4.05 at 8192 x 262144 against the ring's 3.12. LayerNorm's fp32
//    forward keeps the ring there (3.49 against cl-t512v8's 3.17).
//  - ops without a reduction (kNoReduce: cross-entropy's backward without weighted smoothing):
//    on rows of any dtype that no ring holds (beyond 16 x 64 KB) map-t256v8, one CTA per 32 KB
//    tile, where the looped entry reads the row twice and the map once; where finish reads
//    per-row device scalars (RowProblem::finish_loads: the training backward's dx state) on
//    16-bit rows beyond 64 KB the looped entry: the ring runs each row in lockstep over its
//    cluster, the state's loads on its path. Run AE (kernel-only, bf16, the training
//    backward's recompute at 16384 x 65536 / 131072 and 8192 x 262144): t1024v2-looped 1.090 /
//    2.169 / 2.164 ms, map-t256v8 1.112 / 2.221 / 2.227 (run AD5: the ring 1.136 / 2.456 /
//    2.598). The plain backward (no such loads) keeps the ring and looped entries: in run AD
//    1.084 / 2.183 / 2.106 ms against map-t256v8's 1.108 / 2.230 / 2.225.
//  - ops with column accumulations compiling the entries under trial (LayerNorm's plain
//    backward) on 16-bit rows: staged-v4-ra, which takes the rows staged-v4 takes (the same
//    geometry; fp32 rows keep staged-v4, unmeasured). LayerNorm bwd with bf16 weight and bias
//    (run AI4) at 16384 x 4096 / 32768 / 131072 and 8192 x 262144: 3.217 / 3.942 / 3.679 /
//    3.278 TB/s against staged-v4's 3.139 / 3.623 / 3.423 / 3.106.
int preferred_entry(const RowOpInfo& op, int in_elt, int vec_elt, int64_t row_bytes,
                    bool finish_loads) {
  if (op.no_reduce && op.n_acc == 0) {
    if (row_bytes > kRowMaxCluster * kRowRegisterMaxRowBytes) return kMapEntry;
    if (finish_loads && in_elt == 2 && row_bytes > kRowRegisterMaxRowBytes) return kLoopedEntry;
  }
  // Ops compiling the entries under trial without planned ones and without column
  // accumulations, on rows beyond what one CTA's registers hold (64 KB of 16-bit input, 128 KB
  // of fp32: t1024v8): cl-t256v8, and beyond its 16 CTAs cl-t512v8 for ops without vectors at
  // apply. LayerNorm's forward (vectors at apply) only with 16-bit x and fp32 vectors.
  if (op.trial_configs && !op.trial_planned && op.n_acc == 0 &&
      row_bytes > kRowRegisterMaxRowBytes * in_elt / 2 &&
      (!op.cols_at_apply || (in_elt == 2 && vec_elt == 4))) {
    const int64_t cluster_bytes = kRowMaxCluster * kRowConfigs[kClusterEntry].chunk_bytes();
    return op.cols_at_apply || row_bytes <= cluster_bytes ? kClusterEntry : kWideClusterEntry;
  }
  if (in_elt != 2) return -1;
  if (op.trial_configs && op.n_acc > 0) return kRowAheadEntry;
  const bool gated_bwd = op.gate_kernel && !op.trial_planned;
  if (op.trial_planned && row_bytes > kRowRegisterMaxRowBytes / 2 &&
      row_bytes <= kRowRegisterMaxRowBytes)
    return kWideClusterEntry;
  if (op.trial_planned && row_bytes > kRowRegisterMaxRowBytes &&
      (op.n_out > 0 || row_bytes <= 4 * kRowRegisterMaxRowBytes))
    return op.n_out > 0 || op.gate_kernel ? kClusterStageEntry : kClusterEntry;
  if (op.n_in == 1 && op.n_acc == 0 && !gated_bwd && row_bytes > 4096 && row_bytes <= 8192)
    return kShortRowEntry;
  if (gated_bwd && row_bytes > kRowRegisterMaxRowBytes / 2 && row_bytes <= kRowRegisterMaxRowBytes)
    return kRingEntry;
  if (op.n_in == 1 && !op.trial_planned && op.n_acc == 0 && !gated_bwd && row_bytes > 2048 &&
      row_bytes <= 4096)
    return kWarpRowEntry;
  if (op.n_in == 1 && op.cols_at_apply && op.n_acc == 0 && !gated_bwd && row_bytes > 256 &&
      row_bytes <= 512)
    return kQuarterWarpEntry;
  return -1;
}

}  // namespace

RowPlan plan_row(const RowOpInfo& op, const RowProblem& pr, int forced_config) {
  RowPlan plan;
  plan.in = pr.in;
  plan.out = pr.out;
  plan.vec = pr.vec;
  plan.inst = pr.inst;
  plan.g.rows = pr.M;
  plan.g.cols = pr.N;
  if (pr.M <= 0 || pr.N <= 0) return plan;  // nothing to launch
  const int in_elt = dtype_size(pr.in);
  const int vec_elt = dtype_size(pr.vec);
  const int n_present = pr.n_present < 0 ? op.n_in : pr.n_present;
  const int in_words = pr.in_words < 0 ? op.n_in : pr.in_words;
  const int present_bytes = pr.present_bytes < 0 ? n_present * in_elt : pr.present_bytes;
  const int64_t row_bytes = pr.N * in_elt;
  const bool force_general = forced_config == kRowConfigCount;
  const int first =
      forced_config < 0 ? preferred_entry(op, in_elt, vec_elt, row_bytes, pr.finish_loads) : -1;
  if (pr.pair && pr.vec_ok && !force_general) {
    for (int k = first >= 0 ? -1 : 0; k < kRowConfigCount; ++k) {
      const int i = k < 0 ? first : k;
      if (k >= 0 && i == first) continue;  // tried first
      if (forced_config >= 0 && i != forced_config) continue;
      const RowConfig& c = kRowConfigs[i];
      if (!row_config_usable(c, op.n_in, op.red_floats, op.n_cols, in_elt, op.n_acc, vec_elt,
                             in_words, op.late_cols, op.n_out, op.trial_configs,
                             op.cols_at_apply, op.no_reduce, op.held_fold))
        continue;
      // Ops without per-element outputs (cross-entropy's loss alone) skip the ring: it walks
      // one row at a time per SM, so a read-only op reads at half the copy rate (H200, bf16,
      // kernel-only: ring-t1024v4-s3 2.08 / 1.71 TB/s at 16384 x 131072 / 8192 x 262144, the
      // looped entry below 3.42 / 3.74, QuACK 0.2.0 3.81 / 3.35).
      if (forced_config < 0 && c.policy == RowPolicy::kRing && op.n_out == 0) continue;
      if (c.policy == RowPolicy::kStaged) {
        RowGeometry g;
        int64_t smem = 0;
        if (row_bytes / 16 > 0x7fffffff) continue;
        if (!row_staged_geometry(pr.M, pr.N, in_elt, c.vecs, present_bytes, op.red_floats,
                                 op.n_cols, &g, &smem, c.threads(), c.stages))
          continue;
        plan.policy = c.policy;
        plan.config = i;
        plan.g = g;
        plan.threads = g.cta_threads;
        plan.cluster_n = g.cluster_n;
        plan.smem = static_cast<size_t>(smem);
        plan.grid = 0;  // persistent: resident clusters, at launch (or row_call_partials)
        return plan;
      }
      if (!row_config_takes(i, pr.M, row_bytes)) continue;
      plan.policy = c.policy;
      plan.config = i;
      plan.threads = c.threads();
      plan.g.vec = 16 / in_elt;
      plan.g.vpt = c.vecs;
      plan.g.tpr = c.tpr;
      plan.g.cta_threads = c.threads();
      if (c.policy == RowPolicy::kRing) {
        plan.cluster_n = static_cast<int>(row_chunks(c, row_bytes));
        plan.smem = static_cast<size_t>(row_ring_smem_bytes(c, in_words, op.red_floats));
        plan.grid = 0;  // persistent: resident clusters, at launch
        plan.g.row_blocks = pr.M;
      } else if (c.policy == RowPolicy::kClusterRegister) {
        plan.cluster_n = static_cast<int>(row_chunks(c, row_bytes));
        plan.g.slice_vecs = static_cast<int>((pr.N / plan.g.vec + plan.cluster_n - 1) / plan.cluster_n);
        // Not persistent: the all-reduce's slots are static shared memory. Persistent
        // (stages ≥ 1): the stages, slots and mbarriers in dynamic shared memory, and the
        // resident clusters, at launch.
        plan.smem = c.stages > 0
                        ? static_cast<size_t>(row_ring_smem_bytes(c, in_words, op.red_floats))
                        : 0;
        plan.grid = c.stages > 0 ? 0 : pr.M * plan.cluster_n;
        plan.g.row_blocks = pr.M;
      } else if (c.policy == RowPolicy::kMap) {
        // One CTA per tile (row, chunk of tpr·vecs vectors); ops with a kernel gate: at most
        // the resident CTAs, at launch (row_gated_grid). No cluster.
        plan.grid = pr.M * row_chunks(c, row_bytes);
        plan.g.row_blocks = plan.grid;
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
    case RowPolicy::kClusterRegister:
      std::snprintf(buf, len, "%s-x%d", kRowConfigs[plan.config].name, plan.cluster_n);
      break;
    case RowPolicy::kStaged:
      std::snprintf(buf, len, "%s-t%dr%dv%d-x%d", kRowConfigs[plan.config].name, plan.g.tpr,
                    plan.g.rows_per_cta(), plan.g.vpt, plan.cluster_n);
      break;
    default:
      std::snprintf(buf, len, "%s", kRowConfigs[plan.config].name);
      break;
  }
  return buf;
}

namespace {

// Whether instance `e` has the dtypes of every present operand of the call.
bool inst_matches(const RowInst& e, std::initializer_list<const TensorRef*> in,
                  std::initializer_list<const TensorRef*> out,
                  std::initializer_list<const TensorRef*> vecs) {
  int s = 0;
  for (const TensorRef* t : in) {
    if (t->present() && t->dtype != e.in_at(s)) return false;
    ++s;
  }
  s = 0;
  for (const TensorRef* t : out) {
    if (t->present() && t->dtype != e.out_at(s)) return false;
    ++s;
  }
  for (const TensorRef* t : vecs)
    if (t->present() && t->dtype != e.vec) return false;
  return true;
}

}  // namespace

RowCall make_row_call(const RowOpEntry& op, const char* fn,
                      std::initializer_list<const TensorRef*> in,
                      std::initializer_list<const TensorRef*> out,
                      std::initializer_list<const TensorRef*> vecs,
                      std::initializer_list<const TensorRef*> accs) {
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
  int i = 0;
  pr.n_present = 0;
  for (const TensorRef* t : in) {
    c.p.in[i++] = row_io(*t);
    if (t->present()) ++pr.n_present;
  }
  int o = 0;
  for (const TensorRef* t : out) c.p.out[o++] = row_io(*t);
  int v = 0;
  for (const TensorRef* t : vecs) c.p.vec[v++] = row_io(*t);
  int a = 0;
  for (const TensorRef* t : accs) c.acc_out[a++] = row_io(*t);
  // The first instance with the call's dtypes; its narrowest input stream sets the vectors.
  for (int k = 0; k < op.n_insts && pr.inst < 0; ++k)
    if (inst_matches(op.insts[k], in, out, vecs)) pr.inst = k;
  pr.pair = pr.inst >= 0;
  if (!pr.pair) {
    pr.vec_ok = false;
    return c;
  }
  const RowInst& e = op.insts[pr.inst];
  const int n_in = op.info.n_in;
  int elt = 16;
  for (int s = 0; s < n_in; ++s) {
    if (dtype_size(e.in_at(s)) < elt) {
      elt = dtype_size(e.in_at(s));
      pr.in = e.in_at(s);
    }
  }
  pr.out = e.out_at(0);
  pr.vec = e.vec;
  pr.in_words = 0;
  pr.present_bytes = 0;
  int s = 0;
  for (const TensorRef* t : in) {
    pr.in_words += dtype_size(e.in_at(s)) / elt;
    if (t->present()) pr.present_bytes += dtype_size(e.in_at(s));
    ++s;
  }
  const int vec = 16 / elt;
  pr.vec_ok = true;
  for (const TensorRef* t : in) pr.vec_ok = pr.vec_ok && vector_ok(*t, vec);
  for (const TensorRef* t : out) pr.vec_ok = pr.vec_ok && vector_ok(*t, vec);
  for (const TensorRef* t : vecs) pr.vec_ok = pr.vec_ok && vector_ok(*t, vec);
  return c;
}

RowPlan plan_row_call(const RowCall& c, int forced_config) {
  return plan_row(c.op->info, c.problem, forced_config);
}

namespace {

// The instance a vector-policy plan launches.
const RowInst& row_inst(const RowCall& c, const RowPlan& plan) {
  if (plan.inst < 0 || plan.inst >= c.op->n_insts)
    ArgCheck(c.fn).fail("internal error: a vector-policy plan without an instance");
  return c.op->insts[plan.inst];
}

// Resident clusters of the plan's kernel on the call's device (a device query).
int64_t row_resident(const RowCall& c, const RowPlan& plan, const RowParams& p) {
  if (plan.policy == RowPolicy::kGeneral) return c.op->resident_general(plan, c.device, c.fn);
  int64_t resident = 0;
  row_inst(c, plan).launch(plan, p, c.device, nullptr, c.fn, &resident);
  return resident;
}

}  // namespace

int64_t row_call_partials(const RowCall& c, RowPlan& plan) {
  if (plan.partials >= 0) return plan.partials;
  if (plan.policy == RowPolicy::kNone) {
    plan.partials = 0;
    return 0;
  }
  if (c.op->info.n_acc == 0 ||
      (plan.policy != RowPolicy::kStaged && plan.policy != RowPolicy::kGeneral))
    ArgCheck(c.fn).fail("internal error: partials of an op without column accumulations");
  RowParams p = c.p;
  p.g = plan.g;
  const int64_t resident = row_resident(c, plan, p);
  plan.partials = std::min<int64_t>(resident, plan.g.row_blocks);
  plan.grid = plan.partials * plan.cluster_n;
  return plan.partials;
}

size_t row_call_workspace(const RowCall& c, RowPlan& plan) {
  if (c.op->info.n_acc == 0) return 0;
  const int64_t P = row_call_partials(c, plan);
  int asked = 0;
  for (int a = 0; a < c.op->info.n_acc; ++a) asked += c.acc_out[a].ptr ? 1 : 0;
  return static_cast<size_t>(asked) * static_cast<size_t>(P) *
         static_cast<size_t>(c.problem.N) * sizeof(float);
}

void run_row_call(const RowCall& c, const RowPlan& plan_in, cudaStream_t stream,
                  void* workspace, size_t workspace_bytes) {
  const int n_acc = c.op->info.n_acc;
  const int64_t N = c.problem.N;
  bool acc_asked = false;  // outputs of column accumulations: written even when M = 0
  for (int a = 0; a < n_acc; ++a) acc_asked = acc_asked || c.acc_out[a].ptr != nullptr;
  if (plan_in.policy == RowPolicy::kNone && (!acc_asked || N <= 0)) return;
  if (n_acc == 0 && plan_in.grid > kMaxGrid)  // the general policy's grid for billions of rows
    ArgCheck(c.fn).fail("operands of (M, N) = (" + std::to_string(plan_in.g.rows) + ", " +
                        std::to_string(plan_in.g.cols) + ") need " +
                        std::to_string(plan_in.grid) +
                        " CTAs on this layout, expected at most 2^31 - 1 (one launch)");
  const DeviceGuard guard(c.device, c.fn);
  RowPlan plan = plan_in;
  RowParams p = c.p;
  p.g = plan.g;
  p.ring_l2 = plan.ring_l2;
  if (n_acc > 0) {
    const size_t need = row_call_workspace(c, plan);
    const ArgCheck chk(c.fn);
    if (workspace_bytes < need || (need > 0 && workspace == nullptr))  // null: no bytes
      chk.fail("workspace has " + std::to_string(workspace == nullptr ? 0 : workspace_bytes) +
               " bytes, expected at least " + std::to_string(need) + " (the workspace-size query)");
    if (need > 0 && reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
      chk.fail("workspace is not 16-byte aligned");
    float* ws = static_cast<float*>(workspace);
    int k = 0;
    for (int a = 0; a < n_acc; ++a)
      p.part[a] = c.acc_out[a].ptr ? ws + static_cast<int64_t>(k++) * plan.partials * N : nullptr;
  }
  if (plan.policy == RowPolicy::kGeneral)
    c.op->launch_general(plan, p, stream, c.fn);
  else if (plan.policy != RowPolicy::kNone)
    row_inst(c, plan).launch(plan, p, c.device, stream, c.fn, nullptr);
  // Column sums of the partial rows in a fixed order, every accumulation in one launch; P = 0
  // (M = 0) writes zeros.
  static_assert(kRowMaxAcc <= kMaxColsums);
  const float* parts[kRowMaxAcc];
  RowIO outs[kRowMaxAcc];
  int n_sums = 0;
  for (int a = 0; a < n_acc; ++a)
    if (c.acc_out[a].ptr) {
      parts[n_sums] = p.part[a];
      outs[n_sums++] = c.acc_out[a];
    }
  launch_colsums(parts, outs, n_sums, plan.partials, N, stream, c.fn);
}

void row_check_mn(const ArgCheck& chk, const TensorRef& t, const char* name, int64_t M,
                  int64_t N, int device, bool output) {
  chk.matrix(t, name, M, N);
  chk.float_dtype(t, name);
  chk.same_device(t, name, device);
  if (output) chk.non_overlapping(t, name);
}

void row_check_n(const ArgCheck& chk, const TensorRef& t, const char* name, int64_t N,
                 int device, bool output) {
  chk.vector(t, name, N);
  chk.float_dtype(t, name);
  chk.same_device(t, name, device);
  if (output) chk.non_overlapping(t, name);
}

void row_check_m_f32(const ArgCheck& chk, const TensorRef& t, const char* name, int64_t M,
                     int device, bool output) {
  chk.vector(t, name, M);
  chk.dtype_in(t, name, {DType::kFloat32});
  chk.same_device(t, name, device);
  if (output) chk.non_overlapping(t, name);
}

RowIO row_vector_io(const TensorRef& t) {
  RowIO io;
  if (!t.present()) return io;
  io.ptr = t.data;
  io.dtype = t.dtype;
  io.row_stride = t.stride[0];
  io.col_stride = 1;
  return io;
}

}  // namespace quack::detail
