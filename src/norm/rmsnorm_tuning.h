// RMSNorm entry points with explicit geometry knobs: the public functions use the defaults;
// quack-bench's sweep passes others to measure them. Not part of the public API.
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

/// Whether rmsnorm_fwd / rmsnorm_bwd would take the vector (staged) path for these arguments
/// (validates them; no CUDA call). For tests of the path heuristic.
bool rmsnorm_fwd_vector_path(const RmsNormFwdArgs& args);
bool rmsnorm_bwd_vector_path(const RmsNormBwdArgs& args);

}  // namespace quack::detail
