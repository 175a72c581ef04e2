// The row skeleton's host plan: which policy, configuration, threads, cluster size and grid a
// call runs with, from (M, N, dtypes, layout) and what the op's traits declare. Pure host
// code, no CUDA call: the host tests sweep it over N.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/row_geometry.h"
#include "quack/tensor.h"
#include "row/row_config.h"
#include "row/row_params.h"

namespace quack::detail {

/// What the plan needs to know about an op; built from its traits by the generated entry
/// (row_ops.cmake) so host code never includes device code.
struct RowOpInfo {
  int n_in = 1;        // per-element input streams (Traits::kIn)
  int n_out = 1;       // per-element output streams (Traits::kOut)
  int n_cols = 0;      // per-column vectors (Traits::kCols)
  int n_acc = 0;       // column accumulations (Traits::kAcc)
  int n_opt_in = 0;    // trailing input streams that may be absent (Traits::kOptIn)
  int red_floats = 1;  // floats reduced together per row (Traits::Red::kFloats)
  bool late_cols = false;  // Traits::kLateCols
  bool cols_at_apply = false;  // Traits::kColsAtApply
  bool trial_configs = false;  // Traits::kTrialConfigs: the configurations under trial compiled
  bool trial_planned = false;  // Traits::kTrialPlanned: cross-entropy's forwards' plan rules
  bool gate_kernel = false;    // Traits::kGate == RowGate::kKernel (cross-entropy's backward
                               // and the predicted forward's two kernels)
  bool no_reduce = false;      // Traits::kNoReduce: the map entries (RowPolicy::kMap)
  bool held_fold = false;      // Traits::kHeldFold: the held cluster register entries
  const char* name = "";
};

/// One call's shape and layout, as the plan sees it.
struct RowProblem {
  int64_t M = 0, N = 0;
  DType in = DType::kFloat32;   // dtype of the instance's narrowest input stream (its vectors
                                // are 16 bytes of it; every input stream's, for one dtype)
  DType out = DType::kFloat32;  // dtype of the first output stream
  DType vec = DType::kFloat32;  // dtype of every per-column vector (when `pair`)
  bool pair = false;     // a vector-path instance of the call's dtypes is compiled for the op
  bool vec_ok = false;   // every (M, N) stream: unit column stride, 16-byte aligned base and
                         // row stride, N a multiple of 16 bytes of `in`; vectors contiguous
                         // and 16-byte aligned
  int n_present = -1;    // input streams present (optional ones may be absent); -1: all
  int in_words = -1;     // 16-byte words per vector over all the instance's input streams
                         // (-1: one per stream, one dtype)
  int present_bytes = -1;  // bytes per element over the present input streams (-1:
                           // n_present x the size of `in`)
  int inst = -1;         // the instance (RowOpEntry::insts) when `pair`
  bool finish_loads = false;  // the op's finish reads per-row device scalars besides its row
                              // inputs (cross-entropy's training backward: its dx state); on
                              // 16-bit rows beyond 64 KB the looped entry takes them, where the
                              // ring's lockstep rows would put those loads on every row's path
                              // (row_plan.cpp, preferred_entry)
};

struct RowPlan {
  RowPolicy policy = RowPolicy::kNone;  // kNone: nothing to launch (M = 0 or N = 0)
  int config = -1;                      // kRowConfigs index (vector policies)
  int inst = -1;                        // the op's instance (vector policies)
  DType in = DType::kFloat32, out = DType::kFloat32, vec = DType::kFloat32;  // for messages
  int threads = 0;                      // per CTA
  int cluster_n = 1;                    // CTAs per row (ring, cluster register, staged, general)
  // CTAs (register, looped, cluster register, general); ring and staged: 0, set at launch
  // (resident clusters);
  // ops with column accumulations: the persistent grid, fixed by row_call_partials.
  int64_t grid = 0;
  int64_t partials = -1;  // ops with column accumulations: P (row_call_partials); -1: not yet
  size_t smem = 0;   // dynamic shared memory per CTA
  RowGeometry g;     // rows = M, cols = N; the staged and general policies' thread geometry
  RingL2 ring_l2 = RingL2::kHinted;  // the ring policy's L2 use (row_params.h)
};

/// The plan for `op` on problem `pr`. forced_config ≥ 0 plans only that entry of kRowConfigs
/// (tests, benchmarks): the returned policy is kNone when it does not take the problem.
/// Otherwise the first compiled configuration that takes the row, else the general policy.
RowPlan plan_row(const RowOpInfo& op, const RowProblem& pr, int forced_config = -1);

/// Whether configuration `config` takes rows of row_bytes (bytes of the narrowest input stream)
/// and M rows.
bool row_config_takes(int config, int64_t M, int64_t row_bytes);

/// The general policy's geometry: about kRowGeneralValuesPerThread elements per thread and
/// sweep, rows of up to 256 threads, then clusters of up to 16 CTAs; small rows share a CTA of
/// 128 threads.
inline constexpr int kRowGeneralValuesPerThread = 16;
RowGeometry row_general_geometry(int64_t M, int64_t N);

/// Bytes of the general policy's reduction slots (two stages of one slot per warp and cluster
/// CTA, slot_floats floats each, 16-byte padded; clusters: + 128 for the exchange mbarriers).
int64_t row_general_smem_bytes(const RowGeometry& g, int red_floats);

/// The staged policy's geometry for rows of N elements whose narrowest input stream has in_elt
/// bytes, at most max_vecs 16-byte vectors of it per thread (RMSNorm's backward geometry: rows
/// over up to max_threads threads per CTA, then clusters of up to 16 CTAs, small rows packed
/// into CTAs of kRowStagedMinThreads), shrunk (fewer rows per CTA, then fewer vectors per
/// thread) until its shared memory (row_staged_smem_bytes: `stages` row blocks of the present
/// streams, present_bytes per element together, and n_cols fp32 vectors) fits 227 KB. False
/// when no geometry holds the row.
bool row_staged_geometry(int64_t M, int64_t N, int in_elt, int max_vecs, int present_bytes,
                         int red_floats, int n_cols, RowGeometry* g, int64_t* smem,
                         int max_threads = kRowStagedMaxThreads, int stages = 2);

/// Readable name of a plan for benchmarks and messages: "t1024v4", "ring-t1024v4-s3-x8",
/// "general-t256-x16".
const char* row_plan_name(const RowPlan& plan, char* buf, size_t len);

}  // namespace quack::detail
