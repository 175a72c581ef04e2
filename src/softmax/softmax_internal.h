// The softmax family's calls without launching them (host, no CUDA call): validation and the
// row skeleton's call, for the tests and quack-bench, which plan and run them with a forced
// configuration (plan_row_call / run_row_call, row/row_op.h). Not part of the public API.
#pragma once

#include "quack/softmax.h"
#include "row/row_op.h"

namespace quack::detail {

/// Validates `args` (throws as softmax_fwd / log_softmax_fwd) and builds the call.
RowCall softmax_fwd_call(const SoftmaxFwdArgs& args, bool log);
/// Validates `args` (throws as softmax_bwd / log_softmax_bwd) and builds the call.
RowCall softmax_bwd_call(const SoftmaxBwdArgs& args, bool log);

}  // namespace quack::detail
