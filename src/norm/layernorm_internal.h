// The LayerNorm calls without launching them (host, no CUDA call): validation and the row
// skeleton's call, for the tests and quack-bench, which plan and run them with a forced
// configuration (plan_row_call, row_call_workspace, run_row_call: row/row_op.h). Not part of
// the public API.
#pragma once

#include "quack/norm.h"
#include "row/row_op.h"

namespace quack::detail {

/// Validates `args` (throws as layernorm_fwd) and builds the call.
RowCall layernorm_fwd_call(const LayerNormFwdArgs& args);
/// Validates `args` (throws as layernorm_bwd, naming `fn`) and builds the call.
RowCall layernorm_bwd_call(const LayerNormBwdArgs& args, const char* fn = "layernorm_bwd");

}  // namespace quack::detail
