// The row skeleton's host plan: which policy, configuration, threads, cluster size and grid a
// call runs with, from (M, N, dtypes, layout) and what the op's traits declare. Pure host
// code, no CUDA call: the host tests sweep it over N.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/row_geometry.h"
#include "quack/tensor.h"
#include "row/row_config.h"

namespace quack::detail {

/// What the plan needs to know about an op; built from its traits by the generated entry
/// (row_ops.cmake) so host code never includes device code.
struct RowOpInfo {
  int n_in = 1;        // per-element input streams (Traits::kIn)
  int n_out = 1;       // per-element output streams (Traits::kOut)
  int n_cols = 0;      // per-column vectors (Traits::kCols)
  int red_floats = 1;  // floats reduced together per row (Traits::Red::kFloats)
  const char* name = "";
};

/// One call's shape and layout, as the plan sees it.
struct RowProblem {
  int64_t M = 0, N = 0;
  DType in = DType::kFloat32;   // dtype of every input stream (when `pair`)
  DType out = DType::kFloat32;  // dtype of every output stream (when `pair`)
  bool pair = false;     // a vector-path instance of (in, out) is compiled for the op
  bool vec_ok = false;   // every (M, N) stream: unit column stride, 16-byte aligned base and
                         // row stride, N a multiple of 16 bytes of `in`
};

struct RowPlan {
  RowPolicy policy = RowPolicy::kNone;  // kNone: nothing to launch (M = 0 or N = 0)
  int config = -1;                      // kRowConfigs index (vector policies)
  DType in = DType::kFloat32, out = DType::kFloat32;  // the instance's dtype pair
  int threads = 0;                      // per CTA
  int cluster_n = 1;                    // CTAs per row (ring, general)
  int64_t grid = 0;  // CTAs (register, looped, general); ring: set at launch (resident clusters)
  size_t smem = 0;   // dynamic shared memory per CTA
  RowGeometry g;     // rows = M, cols = N; the general policy's thread geometry
};

/// The plan for `op` on problem `pr`. forced_config ≥ 0 plans only that entry of kRowConfigs
/// (tests, benchmarks): the returned policy is kNone when it does not take the problem.
/// Otherwise the first compiled configuration that takes the row, else the general policy.
RowPlan plan_row(const RowOpInfo& op, const RowProblem& pr, int forced_config = -1);

/// Whether configuration `config` takes rows of row_bytes (one input stream) and M rows.
bool row_config_takes(int config, int64_t M, int64_t row_bytes);

/// The general policy's geometry: about kRowGeneralValuesPerThread elements per thread and
/// sweep, rows of up to 256 threads, then clusters of up to 16 CTAs; small rows share a CTA of
/// 128 threads.
inline constexpr int kRowGeneralValuesPerThread = 16;
RowGeometry row_general_geometry(int64_t M, int64_t N);

/// Bytes of the general policy's reduction slots (two stages of one slot per warp and cluster
/// CTA, slot_floats floats each, 16-byte padded; clusters: + 128 for the exchange mbarriers).
int64_t row_general_smem_bytes(const RowGeometry& g, int red_floats);

/// Readable name of a plan for benchmarks and messages: "t1024v4", "ring-t1024v4-s3 x8",
/// "general t256 x16".
const char* row_plan_name(const RowPlan& plan, char* buf, size_t len);

}  // namespace quack::detail
