// RMSNorm entry points with explicit geometry knobs and forward-path choice: the public
// functions use the defaults; quack-bench's sweep and A/B pass others to measure them, the GPU
// tests force each forward path. Not part of the public API.
#pragma once

#include <cuda_runtime_api.h>

#include "norm/norm_config.h"
#include "quack/norm.h"

namespace quack::detail {

/// The knobs rmsnorm_fwd / rmsnorm_bwd use for x's dtype.
RowConfigKnobs rmsnorm_fwd_knobs(DType x);
RowConfigKnobs rmsnorm_bwd_knobs(DType x);

void rmsnorm_fwd_with_knobs(const RmsNormFwdArgs& args, const RowConfigKnobs& knobs,
                            cudaStream_t stream);
/// knobs.values_per_thread must not pass rmsnorm_bwd_knobs(x).values_per_thread (registers).
size_t rmsnorm_bwd_workspace_size_with_knobs(const RmsNormBwdArgs& args,
                                             const RowConfigKnobs& knobs);
void rmsnorm_bwd_with_knobs(const RmsNormBwdArgs& args, const RowConfigKnobs& knobs,
                            void* workspace, size_t workspace_bytes, cudaStream_t stream);

/// Forward kernels: kStaged is the persistent kernel that stages rows in shared memory
/// (rmsnorm_fwd_kernel.cuh, with its general two-pass fallback); kSimple the one-row-per-CTA
/// kernel with compile-time geometry (rmsnorm_fwd_simple_kernel.cuh; for long rows without a
/// residual, the prefetch kernel, rmsnorm_fwd_prefetch_kernel.cuh) where it applies: weight
/// present (x's dtype or fp32), no bias, out in x's dtype, residual absent or in x's dtype
/// (residual_out, if any, too), N a multiple of 16 bytes, 16-byte aligned rows. Other
/// arguments take the staged path on either setting.
enum class RmsNormFwdPath { kStaged, kSimple };

/// The path rmsnorm_fwd takes: the last set_rmsnorm_fwd_path, else the environment variable
/// QUACK_RMSNORM_FWD (simple | staged, read once; unset or empty: simple). Throws
/// InvalidArgument naming the variable for any other value.
RmsNormFwdPath rmsnorm_fwd_path();
/// Overrides QUACK_RMSNORM_FWD for the whole process (tests, benchmarks).
void set_rmsnorm_fwd_path(RmsNormFwdPath path);

/// rmsnorm_fwd on `path`. simple_config ≥ 0 runs that entry of kSimpleFwdConfigs (when it fits
/// the row; else the staged path), -1 the table's (simple_fwd_config).
void rmsnorm_fwd_with_path(const RmsNormFwdArgs& args, RmsNormFwdPath path, int simple_config,
                           cudaStream_t stream);

/// The kSimpleFwdConfigs entry rmsnorm_fwd_with_path(args, kSimple, simple_config) runs, or -1
/// when it takes the staged path (validates the arguments; no CUDA call).
int rmsnorm_fwd_simple_config(const RmsNormFwdArgs& args, int simple_config = -1);

/// Whether rmsnorm_fwd / rmsnorm_bwd would take the vector (staged) path for these arguments
/// (validates them; no CUDA call). For tests of the path heuristic.
bool rmsnorm_fwd_vector_path(const RmsNormFwdArgs& args);
bool rmsnorm_bwd_vector_path(const RmsNormBwdArgs& args);

}  // namespace quack::detail
