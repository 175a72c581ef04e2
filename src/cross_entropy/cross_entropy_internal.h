// The cross-entropy family's calls without launching them (host, no CUDA call): validation,
// the row skeleton's call and the auxiliary kernels' parameters, for the tests and quack-bench,
// which plan and run the row kernel with a forced configuration. Not part of the public API.
#pragma once

#include <cuda_runtime_api.h>

#include "cross_entropy/cross_entropy_aux.h"
#include "quack/cross_entropy.h"
#include "row/row_op.h"

namespace quack::detail {

/// One cross_entropy_fwd call: [prep] -> row kernel (when M > 0) -> [finish].
struct CeFwdCall {
  RowCall row;  // on x (M, V), or on lse_partial (M, K)
  bool prep = false, finish = false;
  CePrepParams prep_params;
  CeFinishParams finish_params;
  int device = 0;
};

/// Validates `args` (throws as cross_entropy_fwd) and builds the call.
CeFwdCall cross_entropy_fwd_call(const CrossEntropyFwdArgs& args);
/// Runs the call with the row kernel's plan `plan` (plan_row_call(call.row, config)).
void run_cross_entropy_fwd(const CeFwdCall& call, const RowPlan& plan, cudaStream_t stream);

/// Validates `args` (throws InvalidArgument naming `fn`) and builds the row call.
/// fn: the caller's name in messages; flags: ce::Flag bits added to the options' (the training
/// backward's kTrainBwd).
RowCall cross_entropy_bwd_call(const CrossEntropyBwdArgs& args,
                               const char* fn = "cross_entropy_bwd", int64_t flags = 0);

}  // namespace quack::detail
