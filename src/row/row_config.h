// The row skeleton's load policies and their compiled configurations (host and device).
//
// A row op (softmax, log_softmax, ... : its traits, op_traits.cuh) runs on one of these
// policies, chosen per call by plan_row (row_plan.h) from the row length, the dtypes, the
// layout and the op's stream count:
//
//   kRegister  one pass, the row in registers; compile-time geometry (kTpr threads per row,
//              kRows rows per CTA, kVecs 16-byte vectors per thread and stream); one CTA per
//              kRows rows, not persistent, no clusters.
//   kLooped    any row length: pass 1 folds the row chunk by chunk (the row stays in L2),
//              pass 2 walks the chunks backwards, re-reads them and writes.
//   kStaged    persistent CTAs (or clusters) with runtime geometry (rows per CTA, threads per
//              row, vectors per thread ≤ the entry's vecs, clusters ≤ 16): each CTA's slices of
//              its next two row blocks (one, and the next in L2, for the one-stage entry)
//              staged in shared memory by the bulk-copy engine (common/row_pipeline.cuh,
//              RMSNorm's staged kernels). The policy of ops with column accumulations
//              (backwards: dweight, dbias): each thread keeps fp32 sums of its own columns over
//              all its rows in registers.
//   kRing      long rows, read once from DRAM: persistent clusters of up to kRowMaxCluster
//              CTAs, each CTA's slice of a row in shared memory, fetched by the bulk-copy
//              engine kStages rows ahead plus one row into L2 (RMSNorm's prefetch kernel).
//   kClusterRegister  long rows, QuACK's cross-entropy geometry: not persistent, one CTA per
//              (row, cluster rank); a cluster of ceil(row / slice) CTAs holds the row, each
//              CTA its slice in registers (16-byte loads straight from global memory), several
//              CTAs per SM in different phases; one cluster exchange per row. Its entry with
//              one stage (ops with per-element outputs): persistent clusters, each CTA's next
//              row fetched into a shared-memory stage by the bulk-copy engine while the
//              current one is reduced, exchanged and written from the registers.
//   kMap       ops without a reduction (Op::kNoReduce: cross-entropy's backward): the register
//              policy's row code over column chunks of kTpr·kVecs vectors (a tile), one CTA per
//              (row, chunk), no reduction, no cluster, no barrier, rows of any length; for ops
//              with a kernel gate at most the resident CTAs, looping over the tiles.
//   kGeneral   anything else (any strides and dtypes, odd N): element at a time, runtime
//              geometry, clusters; the row is read from global memory once per sweep.
//
// Every vector policy needs: all (M, N) streams with unit column stride, 16-byte aligned base
// and row stride, N a multiple of 16 bytes of the narrowest input dtype, per-column vectors
// contiguous and 16-byte aligned, and a compiled instance of the call's dtypes (per stream;
// the instance list, row_ops.cmake, row_dtypes.cuh). The table's order is the plan's order of preference: the first entry
// that is compiled for the op and takes the row wins. Ops with column accumulations (kAcc > 0)
// need a persistent policy: kStaged (or kGeneral).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define QUACK_ROW_HD __host__ __device__
#else
#define QUACK_ROW_HD
#endif

namespace quack::detail {

enum class RowPolicy : int {
  kNone, kRegister, kLooped, kStaged, kRing, kGeneral, kClusterRegister, kMap
};

inline constexpr int kRowMaxCluster = 16;              // CTAs per row (non-portable above 8)
inline constexpr int64_t kRowMaxSmem = 227 * 1024;     // dynamic shared memory per CTA
inline constexpr int64_t kRowSmSmem = 228 * 1024;      // shared memory per SM
inline constexpr int64_t kRowCtaSmemReserve = 1024;    // reserved per CTA (by the system)
inline constexpr int kRowRegisterBudgetSlack = 24;     // registers for addresses and scalars
// Registers the ring policy gives a CTA's per-column vector slices held for the whole kernel
// (1024 threads: 64 registers each). RMSNorm's prefetch kernel held an fp32 weight slice of
// 32 registers (bf16 x, 4 vectors per thread) at 55 registers in all, without spills.
inline constexpr int kRowRingColRegs = 32;
// The staged policy's geometry knobs (RMSNorm's backward geometry, from H200 sweeps): rows split
// over up to the configuration's CTA size (RowConfig::tpr, its __launch_bounds__) before a
// cluster, at least kRowStagedMinThreads threads per CTA (small rows share a CTA).
inline constexpr int kRowStagedMaxThreads = 512;  // the largest staged CTA (staged-v4)
inline constexpr int kRowStagedMaxRowThreads = 512;
inline constexpr int kRowStagedMinThreads = 256;

/// One compiled geometry of a vector policy. Sizes are in vectors of 16 bytes of the op's
/// narrowest input stream (wider streams take 2 words per vector): a pass (register, looped)
/// or a CTA's slice (ring) holds tpr·vecs of them per stream.
struct RowConfig {
  RowPolicy policy;
  int tpr;      // threads per row (per CTA of the row for kRing); kStaged: the CTA's largest
                // size (its __launch_bounds__; threads per row and rows per CTA at run time)
  int rows;     // rows per CTA (1 for kLooped and kRing; kStaged: at run time)
  int vecs;     // vectors per thread, pass and input stream (kStaged: at most); a vector is
                // 16 bytes of the op's narrowest input stream
  int stages;   // kRing: row slices in flight in shared memory; kStaged: row blocks (1 or 2);
                // kClusterRegister: 0, one CTA per (row, rank); 1, persistent clusters with
                // the next row's slice in one shared-memory stage
  int min_in;   // compiled only for ops with at least this many input streams
  int min_elt;  // compiled only for input dtypes of at least this many bytes
  const char* name;
  // kRing: the stage is refilled right after the fold, before the row's all-reduce (ops
  // without per-element outputs only: nothing reads the stage after the fold).
  bool early_refill = false;
  // Compiled only for ops whose traits ask for the configurations under trial
  // (Op::kTrialConfigs): candidates timed by `quack-bench ... --config all` before the plan
  // takes them, without adding kernels to every row op.
  bool trial = false;
  // Compiled only for ops whose per-column vectors load at apply (Op::kColsAtApply:
  // LayerNorm's forward), whose register instances hold only the row across the reduction.
  bool at_apply = false;
  // kClusterRegister, compiled only for ops with held folds (Op::kHeldFold: softmax's
  // forward): the fold keeps each element's fp32 value in registers for the stores (softmax:
  // e^(x − m_t), one exponential per element instead of two), the packed row dead after it;
  // row_cluster_register_held_ctas_per_sm CTAs per SM.
  bool held = false;
  // kStaged: each row block's per-row inputs (Op::load_row: LayerNorm's mean and rstd) are
  // loaded one row block ahead, so their global-load latency overlaps the row block before
  // instead of stalling the fold (results bitwise those of the entry without it).
  bool row_ahead = false;

  QUACK_ROW_HD constexpr int threads() const {
    return policy == RowPolicy::kStaged ? tpr : tpr * rows;
  }
  /// Bytes of one input stream a thread group holds: a pass (register, looped: one row), a
  /// CTA's slice of a row (ring) or a tile (map).
  QUACK_ROW_HD constexpr int64_t chunk_bytes() const { return int64_t{tpr} * vecs * 16; }
  /// Longest row (bytes of one input stream) a single pass or a cluster of kRowMaxCluster CTAs
  /// (ring, cluster register) holds.
  QUACK_ROW_HD constexpr int64_t capacity_bytes() const {
    return policy == RowPolicy::kRing || policy == RowPolicy::kClusterRegister
               ? chunk_bytes() * kRowMaxCluster
               : chunk_bytes();
  }
};

// The compiled configurations, in the plan's order of preference. Origins (H200 measurements
// of the RMSNorm kernels these policies come from; docs/performance.md):
//  - r4t32v4 ... t1024v4: RMSNorm's simple forward table (one warp per row up to 2 KB, then
//    Liger-like single CTAs; t512v4 for 16-32 KB rows read 4.17 TB/s against the staged
//    kernel's 3.67); r16t16v1 and r8t32v1 add rows of 256 and 512 bytes (QuACK's tpr 16/32).
//  - t1024v8: fp32 rows of 64-128 KB in one pass (RMSNorm fp32 32768: 4.18 against 4.01 looped
//    and 3.98 prefetch); 16-bit rows of that size read 3.79 TB/s on the prefetch kernel.
//  - ring-t1024v4-s3: RMSNorm's prefetch kernel (64 KB slices, 3 stages, one row ahead in L2;
//    bf16 65536-262144 at 3.8-4.0 TB/s). Two-stream ops (backward: y and dy) take 32 KB slices
//    (ring-t1024v2-s3, the same 192 KB in flight) and, for rows of 512 KB-1 MB per stream, one
//    64 KB x 2 stage (the only way 16 CTAs hold fp32 262144 x 2 streams on chip; unmeasured).
//  - ring-t1024v2-s6: one-stream ops whose per-column vector slices do not fit the registers
//    at 4 vectors per thread (bf16 x with an fp32 weight and bias): 32 KB slices, 6 stages
//    (the 192 KB in flight of ring-t1024v4-s3); unmeasured.
//  - t1024v2-looped: RMSNorm's looped instance for rows beyond on-chip capacity, and the rows
//    beyond the register entries of ops without per-element outputs (cross-entropy's loss
//    alone), for which plan_row skips the ring (bf16 131072 / 262144: 3.42 / 3.74 TB/s read,
//    the ring 2.08 / 1.71).
//  - staged-v4: RMSNorm's backward kernel (4 vectors per thread, 512-thread CTAs, two row
//    blocks staged; bf16 4096-262144 at 0.83-0.94 x copy, fp32 at 0.93-1.0): the policy of ops
//    with column accumulations; after the looped entry, so other ops take it only when forced.
//  - staged-v16-s1: fp32 rows whose two staged row blocks do not fit 227 KB (backwards of fp32
//    rows beyond 131072: 16 CTAs x 256 threads x 16 vectors hold 262144): one row block in
//    shared memory, the next one prefetched into L2 while it is worked on (the ring's scheme,
//    one stage), 256-thread CTAs so the column sums of 16 vectors per thread stay in registers
//    (255-register cap); unmeasured.
// Entries after staged-v16-s1 are planned only as preferred entries (row_plan.cpp,
// preferred_entry: cl-t512v8, cl-t256v8-s1, cl-t256v8, t128v4, ring-t1024v4-s3, r4t32v8,
// r16t16v2, map-t256v8, staged-v4-ra), else forced by plan_row(op, problem, config) (GPU
// tests, `quack-bench ... --config all`):
//  - r64t4v4, r32t8v4 (rows of ≤ 256 / 512 B), r4t32v8 (≤ 4 KB, one warp per row), t128v4
//    (≤ 8 KB): 4-8 vectors per thread, so more bytes in flight per thread and fewer threads per
//    row (a shorter reduction) than r16t16v1, r8t32v1 and t256v2 (1-2 vectors) at those rows;
//  - t512v8 (≤ 64 KB): half t1024v4's threads per row, 64 elements each (16-bit), two CTAs per
//    SM up to 64 registers: for cross-entropy's forward with dx (t1024v4: 42 registers, one
//    CTA per SM) and a cheaper reduction per element elsewhere;
//  - ring-t512v4-s3 and ring-t512v8-s1: 512-thread rings, two CTAs per SM (one CTA's reduction
//    and cluster exchange overlap the other's fold and stores, which a 1024-thread CTA per SM
//    leaves exposed); t512v8-s1's 64 KB slices hold fp32 rows of 1 MB in 16 CTAs on 8 SMs.
//  - r16t16v2 (`at_apply`: compiled only for ops with Op::kColsAtApply, LayerNorm's forward):
//    rows of ≤ 512 B at 16 threads and 2 vectors per row: the row's 8 registers beside apply's
//    one vector word at a time fit 32 registers (8 CTAs of 256 threads per SM), where
//    r32t8v4's 16 take 40 (6 CTAs per SM); 4 shuffle steps per exchange (r32t8v4: 3, r8t32v1:
//    5). LayerNorm fwd at 32768 x 256 bf16 (run AA3, kernel-only): 2.30 TB/s against
//    r32t8v4's 2.19 and r8t32v1's 2.13: the plan's entry there (row_plan.cpp).
// Entries under trial (`trial`: compiled only for ops with Op::kTrialConfigs: cross-entropy's
// forwards, planned by row_plan.cpp's rules (Op::kTrialPlanned), and softmax's,
// log_softmax's and LayerNorm's (no residual) forwards, planned on 16-bit rows beyond 64 KB
// by row_plan.cpp's preferred entries), for long rows of read-mostly ops: the ring reads bf16 x at ~2 TB/s whether or not
// the op also writes (H200: CE forward 2.05 TB/s at 16384 x 131072 where softmax's forward on
// the same configuration moves 3.89 TB/s, read + write), so a read-only op gets half the copy
// rate; one 1024-thread CTA per SM runs each row in lockstep (wait, fold, cluster all-reduce,
// barrier, refill), and the next refill waits for all of it:
//  - ring-t1024v4-s3e, ring-t1024v2-s6e, ring-t512v4-s3e: the ring entries above with the
//    stage refilled right after the fold (early_refill: ops without per-element outputs), so
//    the copy engine gets the row's all-reduce and finish as lead time, and no barrier ends
//    the row;
//  - cl-t256v8, cl-t512v8, cl-t256v4 (kClusterRegister): QuACK 0.2.0's cross-entropy geometry
//    (quack/cross_entropy.py: 256 threads, 64 16-bit elements per thread, clusters of up to 16
//    for bf16 131072-262144; 3.81 TB/s at 16384 x 131072 on our H200): not persistent, each
//    CTA's slice loaded into registers with 16-byte loads (no bulk copies, no L2 prefetch),
//    up to 1024 / tpr CTAs per SM (64 registers) at different phases of their rows, so one
//    CTA's reduction and exchange overlap the others' loads. Also the fwd+dx (its row stays
//    in registers across the exchange, then dx).
//    cl-t256v8-h (held): the same geometry for ops whose fold keeps its fp32 terms for the
//    stores (softmax's forward: QuACK's softmax computes e^x once per element and keeps it
//    across the exchange); 64 fp32 values per thread take 80 registers (768 threads per SM:
//    3 CTAs, 96 KB of a 16-bit row in flight per SM against cl-t256v8's 128 KB). Run AE1
//    (bf16 softmax fwd, kernel-only, TB/s at 16384 x 65536 / 131072, 8192 x 262144): 4.23 /
//    4.13 / 3.84 against cl-t256v8's 4.21 / 4.21 / 4.14; its 32-value variants (4 CTAs of 256
//    at 63 registers: 3.70 / 3.35 / -; 2 CTAs of 512 at 62: 3.59 / - / 3.09, run AE2) hold
//    half the bytes in flight and are not among the configurations.
//    cl-t256v8 is not persistent: a persistent loss-only variant (min(M, resident) clusters
//    looping over the rows, the next row's loads into registers right after the fold)
//    measured no better in run AA (kernel-only bf16 CE forward, TB/s, cl-t256v8-p /
//    cl-t256v8: 3.632 / 3.656 at 16384 x 65536, 3.431 / 3.483 at 16384 x 131072, 3.156 /
//    3.086 at 8192 x 262144, where t1024v2-looped reads 3.77).
//  - cl-t256v8-s1, cl-t256v8-s2 (cross-entropy's forwards; planned for the forward with dx
//    and the predicted forward's gated loss-only kernel): cl-t256v8's geometry and per-row
//    code, persistent (min(M, resident) clusters over
//    the rows), each CTA's next rows fetched by one bulk copy each into 1 or 2 shared-memory
//    stages of 32 KB while the current row is folded, exchanged and written as dx, then
//    copied into the registers (so loss, lse and dx are bitwise cl-t256v8's): every CTA keeps
//    its next 32 KB (-s1) or 64 KB (-s2: slack for a cluster of 16 waiting on its slowest CTA)
//    in flight during its exchange and stores, 96 / 192 KB per SM, and the closed kernel
//    launches the resident clusters only. Run AB (kernel-only, grad-1 pair, TB/s, -s1 / -s2 /
//    cl-t256v8): 3.32 / 3.32 / 3.30 at 16384 x 65536, 3.26 / 3.26 / 3.22 at 131072, 3.17 /
//    3.15 / 2.99 at 8192 x 262144: the fwd+dx plans -s1 (row_plan.cpp). Softmax's and
//    log_softmax's forwards compile both; LayerNorm's forward (per-column vectors at apply)
//    -s1 only, with 16-bit weight and bias (row_config_usable): run AD (kernel-only, bf16,
//    TB/s, -s1 / -s2) 3.49 / 3.28 at 16384 x 65536, 3.43 / 3.20 at 131072, 3.19 / 2.96 at
//    8192 x 262144, and -s2's fp16 instances spilled 252 bytes with its one-sweep fold.
// Map entries (kMap: compiled only for ops without a reduction, Op::kNoReduce: cross-entropy's
// backward), for the rows the ring would take otherwise: it runs each row in lockstep across
// the cluster (wait, fold, all-reduce, barrier, refill) although such an op reduces nothing
// (H200, CE backward bf16, kernel-only: ring-t1024v4-s3 at 0.77-0.88 x a device copy of the
// same bytes at 16384 x 65536 - 8192 x 262144). Here every CTA is one tile of 32 KB,
// read with 16-byte loads into registers, finished from the row's per-row inputs and stored,
// independently of the row's other tiles; 1024 threads per SM (64 registers):
//  - map-t256v8: 256 threads x 8 vectors (QuACK's cross-entropy CTA), 4 CTAs per SM (a
//    128-thread variant, 8 CTAs per SM, read within 0.5 % of it in runs AD4 / AD5).
// Staged entries compiled only for ops with column accumulations whose traits ask (`trial`,
// Op::kTrialConfigs: LayerNorm's plain backward):
//  - staged-v4-ra: staged-v4 with each row block's per-row inputs loaded one row block ahead
//    (row_ahead), so their latency overlaps the row block before instead of stalling the fold
//    (staged-v4 at 16384 x 4096, run AH3, ncu: 2 CTAs of 256 threads per SM at 128 registers,
//    latency-bound, long-scoreboard stalls leading; the mean and rstd are the loop's only
//    global loads). 128 registers for bf16, no spills. Planned in staged-v4's place on 16-bit
//    rows (row_plan.cpp's preferred entries).
inline constexpr RowConfig kRowConfigs[] = {
    {RowPolicy::kRegister, 16, 16, 1, 0, 1, 2, "r16t16v1"},   // 0: ≤ 256 B
    {RowPolicy::kRegister, 32, 8, 1, 0, 1, 2, "r8t32v1"},     // 1: ≤ 512 B
    {RowPolicy::kRegister, 32, 4, 4, 0, 1, 2, "r4t32v4"},     // 2: ≤ 2 KB
    {RowPolicy::kRegister, 256, 1, 2, 0, 1, 2, "t256v2"},     // 3: ≤ 8 KB
    {RowPolicy::kRegister, 256, 1, 4, 0, 1, 2, "t256v4"},     // 4: ≤ 16 KB
    {RowPolicy::kRegister, 512, 1, 4, 0, 1, 2, "t512v4"},     // 5: ≤ 32 KB
    {RowPolicy::kRegister, 1024, 1, 4, 0, 1, 2, "t1024v4"},   // 6: ≤ 64 KB
    {RowPolicy::kRegister, 1024, 1, 8, 0, 1, 4, "t1024v8"},   // 7: ≤ 128 KB, fp32 input
    {RowPolicy::kRing, 1024, 1, 4, 3, 1, 2, "ring-t1024v4-s3"},  // 8: ≤ 16 x 64 KB
    {RowPolicy::kRing, 1024, 1, 2, 3, 2, 2, "ring-t1024v2-s3"},  // 9: ≤ 16 x 32 KB (2+ streams)
    {RowPolicy::kRing, 1024, 1, 4, 1, 2, 2, "ring-t1024v4-s1"},  // 10: ≤ 16 x 64 KB (2+ streams)
    {RowPolicy::kRing, 1024, 1, 2, 6, 1, 2, "ring-t1024v2-s6"},  // 11: ≤ 16 x 32 KB (1 stream)
    {RowPolicy::kLooped, 1024, 1, 2, 0, 1, 2, "t1024v2-looped"},  // 12: any row
    {RowPolicy::kStaged, 512, 0, 4, 2, 1, 2, "staged-v4"},       // 13: ≤ 16 x 512 threads x 4
    {RowPolicy::kStaged, 256, 0, 16, 1, 1, 4, "staged-v16-s1"},  // 14: ≤ 16 x 256 x 16, fp32
    {RowPolicy::kRegister, 4, 64, 4, 0, 1, 2, "r64t4v4"},     // 15: ≤ 256 B
    {RowPolicy::kRegister, 8, 32, 4, 0, 1, 2, "r32t8v4"},     // 16: ≤ 512 B
    {RowPolicy::kRegister, 32, 4, 8, 0, 1, 2, "r4t32v8"},     // 17: ≤ 4 KB
    {RowPolicy::kRegister, 128, 1, 4, 0, 1, 2, "t128v4"},     // 18: ≤ 8 KB
    {RowPolicy::kRegister, 512, 1, 8, 0, 1, 2, "t512v8"},     // 19: ≤ 64 KB
    {RowPolicy::kRing, 512, 1, 4, 3, 1, 2, "ring-t512v4-s3"},  // 20: ≤ 16 x 32 KB, 2 CTAs/SM
    {RowPolicy::kRing, 512, 1, 8, 1, 1, 2, "ring-t512v8-s1"},  // 21: ≤ 16 x 64 KB, 2 CTAs/SM
    // 22-24: rings refilled after the fold (no per-element outputs), under trial
    {RowPolicy::kRing, 1024, 1, 4, 3, 1, 2, "ring-t1024v4-s3e", true, true},  // ≤ 16 x 64 KB
    {RowPolicy::kRing, 1024, 1, 2, 6, 1, 2, "ring-t1024v2-s6e", true, true},  // ≤ 16 x 32 KB
    {RowPolicy::kRing, 512, 1, 4, 3, 1, 2, "ring-t512v4-s3e", true, true},    // ≤ 16 x 32 KB
    // 25-27: cluster register policy (QuACK's CE geometry), under trial
    {RowPolicy::kClusterRegister, 256, 1, 8, 0, 1, 2, "cl-t256v8", false, true},  // ≤ 16 x 32 KB
    {RowPolicy::kClusterRegister, 512, 1, 8, 0, 1, 2, "cl-t512v8", false, true},  // ≤ 16 x 64 KB
    {RowPolicy::kClusterRegister, 256, 1, 4, 0, 1, 2, "cl-t256v4", false, true},  // ≤ 16 x 16 KB
    // 28: ops whose vectors load at apply only (at_apply)
    {RowPolicy::kRegister, 16, 16, 2, 0, 1, 2, "r16t16v2", false, false, true},  // ≤ 512 B
    // 29-30: the persistent cluster register policy with shared-memory stages, under trial
    {RowPolicy::kClusterRegister, 256, 1, 8, 1, 1, 2, "cl-t256v8-s1", false, true},  // ≤ 16x32 KB
    {RowPolicy::kClusterRegister, 256, 1, 8, 2, 1, 2, "cl-t256v8-s2", false, true},  // ≤ 16x32 KB
    // 31: ops without a reduction (Op::kNoReduce), rows of any length in tiles
    {RowPolicy::kMap, 256, 1, 8, 0, 1, 2, "map-t256v8"},  // tiles of 256 x 8 vectors
    // 32: the cluster register entry with held folds (ops with Op::kHeldFold), under trial
    {RowPolicy::kClusterRegister, 256, 1, 8, 0, 1, 2, "cl-t256v8-h", false, true, false, true},
    // 33: staged-v4 with the per-row inputs one row block ahead (`trial`: ops with column
    // accumulations whose traits ask, LayerNorm's plain backward)
    {RowPolicy::kStaged, 512, 0, 4, 2, 1, 2, "staged-v4-ra", false, true, false, false, true},
};
inline constexpr int kRowConfigCount =
    static_cast<int>(sizeof(kRowConfigs) / sizeof(kRowConfigs[0]));

/// The longest row (bytes) of the register entries (t1024v4: 1024 threads x 4 vectors).
inline constexpr int64_t kRowRegisterMaxRowBytes = 1024 * 4 * 16;

/// Index of the entry named `name` in kRowConfigs, -1 when none.
constexpr int row_config_index(const char* name) {
  for (int i = 0; i < kRowConfigCount; ++i) {
    const char* a = kRowConfigs[i].name;
    const char* b = name;
    while (*a != 0 && *a == *b) ++a, ++b;
    if (*a == 0 && *b == 0) return i;
  }
  return -1;
}

/// Floats of shared memory per reduction slot for a reduction of `floats` floats (slots are
/// padded to a power of two so cluster_exchange moves whole 16-byte chunks).
QUACK_ROW_HD constexpr int row_slot_floats(int floats) {
  return floats <= 1 ? 1 : floats <= 2 ? 2 : 4;
}

QUACK_ROW_HD constexpr int64_t row_align16(int64_t bytes) { return (bytes + 15) / 16 * 16; }

/// Shared memory of the reduction of the runtime-geometry policies (general, staged): two
/// stages of one slot (row_slot_floats(red_floats) floats) per warp and cluster CTA, padded to
/// 16 bytes; clusters: + 128 bytes holding the exchange's two mbarriers alone in their line
/// (with 16 bytes there, their line also held the bulk-copy pipeline's mbarriers and the first
/// staged bytes, and RMSNorm's cluster backward ran 10-20 % slower: H200, bf16 N = 32768 3.46
/// against 4.01 TB/s, fp32 3.47 against 4.21; which sharing cost it is not isolated).
QUACK_ROW_HD constexpr int64_t row_reduce_smem_bytes(int reduce_slots, int cluster_n,
                                                     int red_floats) {
  return row_align16(2 * int64_t{reduce_slots} * row_slot_floats(red_floats) * 4) +
         (cluster_n > 1 ? 128 : 0);
}

/// Dynamic shared memory of the staged policy (policy_staged.cuh): the reduction, then
/// RowPipeline<kIn, ...>'s bytes: 128 bytes of barriers, `stages` stages x rows_per_cta row
/// slices of `slice` elements of every present input stream (present_bytes: the bytes of one
/// element summed over them; slices are whole 16-byte vectors of each stream), and n_cols fp32
/// vector slices.
QUACK_ROW_HD constexpr int64_t row_staged_smem_bytes(int64_t slice, int rows_per_cta,
                                                     int reduce_slots, int cluster_n,
                                                     int red_floats, int present_bytes,
                                                     int n_cols, int stages = 2) {
  return row_reduce_smem_bytes(reduce_slots, cluster_n, red_floats) + 128 +
         int64_t{stages} * row_align16(slice * present_bytes) * rows_per_cta +
         n_cols * row_align16(slice * 4);
}

/// Shared memory of the ring policy's cluster reduction: two stages of one slot per warp and
/// cluster CTA, then the exchange's two mbarriers (16 bytes). ClusterRowReducer::kBytes.
QUACK_ROW_HD constexpr int64_t row_ring_reduce_bytes(int tpr, int red_floats) {
  return 2 * int64_t{tpr / 32} * kRowMaxCluster * row_slot_floats(red_floats) * 4 + 16;
}

/// Dynamic shared memory of a ring configuration for an op whose input streams take in_words
/// 16-byte words per vector together (n_in for one dtype) and a reduction of red_floats
/// floats: [stages x streams x slice] [reduction] [stage mbarriers].
QUACK_ROW_HD constexpr int64_t row_ring_smem_bytes(const RowConfig& c, int in_words,
                                                   int red_floats) {
  return c.stages * in_words * c.chunk_bytes() + row_ring_reduce_bytes(c.tpr, red_floats) +
         (c.stages * 8 + 15) / 16 * 16;
}

/// Whether a thread of a vector policy holds column `col`, and where: its vector j (of at most
/// `vecs`, each of `vec` elements) covers columns col0 + j·step + [0, vec) and exists when
/// j·stride < n (register and ring views: step = tpr·vec, stride = tpr, n = the row's or slice's
/// vectors from the thread's first; staged: runtime step, stride 1, n = the thread's vectors).
/// Exactly one thread of a row holds each column (tests/cpp/host/test_row_plan.cpp). Columns of
/// the vector policies are < 2^31 (32-bit math).
QUACK_ROW_HD constexpr bool row_vector_owner(int64_t col, int64_t col0, int step, int stride,
                                             int n, int vec, int vecs, int& j, int& i) {
  const int d = static_cast<int>(col) - static_cast<int>(col0);
  if (d < 0) return false;
  j = d / step;
  i = d - j * step;
  return i < vec && j < vecs && j * stride < n;
}

/// CTAs per SM a ring configuration is meant for: 1024 threads per SM (a ring of fewer threads
/// per CTA overlaps one CTA's reduction with another's fold and stores).
QUACK_ROW_HD constexpr int row_ring_ctas_per_sm(const RowConfig& c) {
  return c.tpr >= 1024 ? 1 : 1024 / c.tpr;
}

/// CTAs per SM a cluster-register configuration is built for (its __launch_bounds__): 1024
/// threads per SM, so at most 64 registers per thread; 768 for ops whose per-element math
/// spills at 64 (full_sm false: cross-entropy's softcapped fwd+dx, RowClusterFullSm in
/// policy_cluster_register.cuh; a persistent entry's stages that do not fit 1024 threads'
/// CTAs in an SM, -s2 of the fwd+dx, keep 768 too).
QUACK_ROW_HD constexpr int row_cluster_register_ctas_per_sm(int tpr, bool full_sm = true) {
  const int threads = full_sm ? 1024 : 768;
  return tpr >= threads ? 1 : threads / tpr;
}

/// Largest fp32 values per thread of a held entry (RowConfig::held): 64 (cl-t256v8-h of a
/// 16-bit row: 80 registers, no spills).
inline constexpr int kRowHeldMaxFloats = 64;

/// CTAs per SM of a held entry whose threads keep `floats` fp32 values (its
/// __launch_bounds__): up to 32, 1024 threads per SM (64 registers); more, 768 (85 registers:
/// cl-t256v8-h took 80).
QUACK_ROW_HD constexpr int row_cluster_register_held_ctas_per_sm(int tpr, int floats) {
  return row_cluster_register_ctas_per_sm(tpr, floats <= 32);
}

/// Shared memory of the cluster register policy's all-reduce (static, in the kernel): two
/// stages of one slot per warp and cluster CTA, then the exchange's two mbarriers.
/// ClusterRowReducer::kBytes, as the ring's.
QUACK_ROW_HD constexpr int64_t row_cluster_register_smem_bytes(int tpr, int red_floats) {
  return row_ring_reduce_bytes(tpr, red_floats);
}

/// CTAs per SM a map configuration is built for (its __launch_bounds__): 1024 threads per SM,
/// so at most 64 registers per thread.
QUACK_ROW_HD constexpr int row_map_ctas_per_sm(int tpr) { return tpr >= 1024 ? 1 : 1024 / tpr; }

/// Registers a thread of configuration c holds per-column vector slices in: n_cols vectors of
/// vec_elt-byte elements for each of its vecs 16-byte vectors of in_elt-byte input.
QUACK_ROW_HD constexpr int row_col_regs(const RowConfig& c, int n_cols, int in_elt, int vec_elt) {
  return n_cols * c.vecs * (16 / in_elt) * vec_elt / 4;
}

/// Whether a register-policy thread holds the row's packed values (row_regs) and its n_cols
/// per-column vectors' values (col_regs) under the cap, with the usual slack once per vector
/// (RMSNorm's one weight: its simple forward's rule; LayerNorm's looped fp16 instance with an
/// fp32 weight and bias spilled at the single slack), and once more per 16-byte word of the
/// row's wider streams (extra_words: an fp32 residual beside bf16 x takes one; RMSNorm's
/// looped instance with it spilled at the single slack).
QUACK_ROW_HD constexpr bool row_register_cols_fit(int row_regs, int col_regs, int cap,
                                                  int n_cols = 2, int extra_words = 0) {
  const int units = n_cols > 1 + extra_words ? n_cols : 1 + extra_words;
  return row_regs + col_regs + units * kRowRegisterBudgetSlack <= cap;
}

/// Whether configuration c is compiled for an op with n_in input streams, a reduction of
/// red_floats floats, n_cols per-column vectors of vec_elt-byte elements, n_acc column
/// accumulations, in_elt-byte elements in its narrowest input stream and in_words 16-byte words
/// per vector over all its input streams (-1: n_in, one dtype):
///  - register and looped policies: not persistent, so no column accumulations; in_words x
///    vecs packed words (4 registers each) under the CTA's register cap (65536 / threads, at
///    most 255); the register policy also holds the per-column vectors' values of its row
///    beside them (loaded with the row; loaded one vector at a time after the reduction
///    instead, each waits on L1/L2 in turn with one 1024-thread CTA per SM) unless the op
///    allows late vectors (late_cols: RMSNorm's one weight, whose t1024v4 instance at 32
///    registers keeps two CTAs per SM), the looped policy loads them where used;
///  - ring: no column accumulations; the stages fit 227 KB, and row_ring_ctas_per_sm of them
///    an SM's 228 KB; the CTA's vector slices fit kRowRingColRegs registers;
///  - staged: any op (its geometry and shared memory are checked per call by the plan); the
///    one-stage entry and those under trial (staged-v4-ra) only for ops with column
///    accumulations (others have the ring);
///  - cluster register: no column accumulations, per-column vectors only where they load at
///    apply (at_apply_ok: LayerNorm's forward; of the persistent entries only the one-stage
///    ones, with 16-bit vectors); the packed values
///    within 64 registers with the slack (1024 / tpr CTAs per SM); the persistent entries
///    (stages ≥ 1): their shared memory within 227 KB and, for 768 / tpr CTAs (the smallest
///    bound: the softcapped fwd+dx's), within an SM's 228 KB;
///  - map: ops without a reduction (no_reduce: Op::kNoReduce), per-column vectors or column
///    accumulations; the packed values within 64 registers with the slack
///    (row_map_ctas_per_sm);
///  - early_refill rings: ops without per-element outputs (n_out == 0);
///  - trial entries: ops whose traits ask for them (trial_ok: Op::kTrialConfigs);
///  - at_apply entries: ops whose vectors load at apply (at_apply_ok: Op::kColsAtApply);
///  - held entries: ops with held folds (held_ok: Op::kHeldFold; one input stream, no
///    per-column vectors or accumulations), at most kRowHeldMaxFloats values per thread.
QUACK_ROW_HD constexpr bool row_config_usable(const RowConfig& c, int n_in, int red_floats,
                                              int n_cols, int in_elt, int n_acc = 0,
                                              int vec_elt = 4, int in_words = -1,
                                              bool late_cols = false, int n_out = 1,
                                              bool trial_ok = false, bool at_apply_ok = false,
                                              bool no_reduce = false, bool held_ok = false) {
  const int words = in_words < 0 ? n_in : in_words;
  if (n_in < c.min_in || in_elt < c.min_elt) return false;
  if (c.policy == RowPolicy::kMap)
    return no_reduce && n_acc == 0 && n_cols == 0 &&
           c.vecs * 4 * words + kRowRegisterBudgetSlack <=
               65536 / (c.tpr * row_map_ctas_per_sm(c.tpr));
  if (c.trial && !trial_ok) return false;
  if (c.at_apply && !at_apply_ok) return false;
  if (c.held)
    return held_ok && n_in == 1 && n_cols == 0 && n_acc == 0 && n_out > 0 && c.stages == 0 &&
           c.vecs * (16 / in_elt) <= kRowHeldMaxFloats;
  if (c.early_refill && n_out != 0) return false;
  if (c.policy == RowPolicy::kClusterRegister) {
    const int cap = 65536 / (c.tpr * row_cluster_register_ctas_per_sm(c.tpr));
    if (c.stages > 0) {
      // Per-column vectors at apply (LayerNorm fwd's weight and bias): -s1 only, and only
      // 16-bit ones. fp32 ones spilled there at 64 registers (12-56 bytes): the non-persistent
      // entries take them; -s2 never beat -s1 for LayerNorm (run AD) and its fp16 instances
      // spilled 252 bytes with the one-sweep fold.
      if (n_cols > 0 && (vec_elt > 2 || c.stages > 1)) return false;
      const int64_t smem = row_ring_smem_bytes(c, words, red_floats);  // the ring's layout
      const int ctas = row_cluster_register_ctas_per_sm(c.tpr, false);  // the fwd+dx's
      if (smem > kRowMaxSmem || ctas * (smem + kRowCtaSmemReserve) > kRowSmSmem)
        return false;
    }
    return n_acc == 0 && (n_cols == 0 || at_apply_ok) &&
           c.vecs * 4 * words + kRowRegisterBudgetSlack <= cap;
  }
  if (c.policy == RowPolicy::kRegister || c.policy == RowPolicy::kLooped) {
    if (n_acc != 0) return false;
    const int cap = 65536 / c.threads() < 255 ? 65536 / c.threads() : 255;
    if (c.policy == RowPolicy::kRegister && n_cols > 0 && !late_cols)
      return row_register_cols_fit(c.vecs * 4 * words, row_col_regs(c, n_cols, in_elt, vec_elt),
                                   cap, n_cols, words - n_in);
    return c.vecs * 4 * words + kRowRegisterBudgetSlack <= cap;
  }
  if (c.policy == RowPolicy::kRing) {
    const int64_t smem = row_ring_smem_bytes(c, words, red_floats);
    return n_acc == 0 && smem <= kRowMaxSmem &&
           row_ring_ctas_per_sm(c) * (smem + kRowCtaSmemReserve) <= kRowSmSmem &&
           row_col_regs(c, n_cols, in_elt, vec_elt) <= kRowRingColRegs;
  }
  if (c.policy == RowPolicy::kStaged) return (c.stages == 2 && !c.trial) || n_acc > 0;
  return false;
}

}  // namespace quack::detail
