// The cross-entropy family's calls without launching them (host, no CUDA call): validation,
// the row skeleton's call and the auxiliary kernels' parameters, for the tests and quack-bench,
// which plan and run the row kernel with a forced configuration. Not part of the public API.
#pragma once

#include <cuda_runtime_api.h>

#include "cross_entropy/cross_entropy_aux.h"
#include "quack/cross_entropy.h"
#include "row/row_op.h"

namespace quack::detail {

/// One cross_entropy_fwd call: [prep] -> row kernel (when M > 0) -> [finish]. The predicted
/// training forward (dx_predict given; not with class weights and label smoothing) is split:
/// [prep] -> `row`, the loss-only kernel, which runs where the state's kDxOn is 0 -> `row_dx`,
/// the loss + dx kernel, which runs where it is not -> [finish]; each of the two returns at
/// once where the other runs (kernel gates, cross_entropy_traits.cuh), and both write the same
/// per-row outputs (loss or CE parts, z parts, lse) with the same meaning.
struct CeFwdCall {
  RowCall row;     // on x (M, V), or on lse_partial (M, K); split: the loss-only kernel
  RowCall row_dx;  // split only: the loss + dx kernel (row_dx.op == nullptr otherwise)
  bool split = false;
  bool prep = false, finish = false;
  CePrepParams prep_params;
  CeFinishParams finish_params;
  int device = 0;
};

/// The plans of a call's row kernels: `row`'s, and for a split call `dx`'s.
struct CeFwdPlan {
  RowPlan row, dx;
};

/// How cross_entropy_fwd_call builds the predicted training forward: split into two gated
/// kernels (the library's), or one dx kernel whose stores are gated (kSingle: quack-bench's
/// QUACK_BENCH_CE_FWD=single, an A/B of the two forms; the loss then comes from the fwd+dx
/// plan whatever the word says).
enum class CePredictedForm { kSplit, kSingle };

/// Validates `args` (throws as cross_entropy_fwd) and builds the call.
CeFwdCall cross_entropy_fwd_call(const CrossEntropyFwdArgs& args,
                                 CePredictedForm form = CePredictedForm::kSplit);
/// The plans of the call's kernels; config ≥ 0 forces that entry of kRowConfigs on `row`
/// (plan_row_call: policy kNone where it does not take the call), dx_config on `dx`.
CeFwdPlan plan_cross_entropy_fwd(const CeFwdCall& call, int config = -1, int dx_config = -1);
/// Runs the call with its row kernels' plans. A plan of policy kNone launches nothing.
void run_cross_entropy_fwd(const CeFwdCall& call, const CeFwdPlan& plan, cudaStream_t stream);
/// Runs a call that is not split with the row kernel's plan `plan` (plan_row_call(call.row,
/// config)); throws InvalidArgument for a split call.
void run_cross_entropy_fwd(const CeFwdCall& call, const RowPlan& plan, cudaStream_t stream);

/// Validates `args` (throws InvalidArgument naming `fn`) and builds the row call.
/// fn: the caller's name in messages; flags: ce::Flag bits added to the options' (the training
/// backward's kTrainBwd).
RowCall cross_entropy_bwd_call(const CrossEntropyBwdArgs& args,
                               const char* fn = "cross_entropy_bwd", int64_t flags = 0);

/// The training backward's recompute (cross_entropy_train_bwd without its rescale kernel and
/// the dx_out / dx_predict checks): validates `args` and builds the row call on x into dx_out
/// or dx, with the dx state and RowProblem::finish_loads set.
RowCall cross_entropy_train_bwd_call(const CrossEntropyTrainBwdArgs& args);

}  // namespace quack::detail
