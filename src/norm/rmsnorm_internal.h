// The RMSNorm calls without launching them (host, no CUDA call): validation and the row
// skeleton's call, for the tests and quack-bench, which plan and run them with a forced
// configuration (plan_row_call, row_call_workspace, run_row_call: row/row_op.h). Not part of
// the public API.
#pragma once

#include "quack/norm.h"
#include "row/row_op.h"

namespace quack::detail {

/// Validates `args` (throws as rmsnorm_fwd) and builds the call.
RowCall rmsnorm_fwd_call(const RmsNormFwdArgs& args);
/// Validates `args` (throws as rmsnorm_bwd, naming `fn`) and builds the call.
RowCall rmsnorm_bwd_call(const RmsNormBwdArgs& args, const char* fn = "rmsnorm_bwd");

}  // namespace quack::detail
