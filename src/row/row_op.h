// A row op's call, as its API file builds it: the op's entry (generated from the instance
// list, row_ops.cmake), the kernel parameters and what the plan needs. Host only.
//
//   RowCall c = make_row_call(row_op_softmax_fwd(), "softmax_fwd", {&x}, {&out});
//   ... op-specific parameters (c.p.scalar, c.p.row_out, ...) ...
//   run_row_call(c, stream);                      // plan + launch; nothing for empty inputs
//
// Validation happens before (ArgCheck, row_check_mn); make_row_call and plan_row throw nothing
// but internal errors.
#pragma once

#include <cuda_runtime_api.h>

#include <initializer_list>

#include "common/check.h"
#include "quack/tensor.h"
#include "row/row_params.h"
#include "row/row_plan.h"

namespace quack::detail {

/// An op of the instance list: what it is (from its traits) and how to launch it.
struct RowOpEntry {
  RowOpInfo info;
  /// Whether a vector-path instance for (input dtype, output dtype) is compiled.
  bool (*has_pair)(DType in, DType out);
  /// Launches the plan's kernel (current device = `device`; `where` names the public function).
  void (*launch)(const RowPlan& plan, const RowParams& p, int device, cudaStream_t stream,
                 const char* where);
};

struct RowCall {
  const RowOpEntry* op = nullptr;
  const char* fn = "";  // public function, for messages
  RowParams p;          // p.g.rows = M, p.g.cols = N; streams in p.in / p.out
  RowProblem problem;
  int device = 0;
};

/// Builds the call of `op` on the (M, N) input streams `in` and output streams `out` (already
/// validated: same M, N and device; `in` must hold op.info.n_in tensors, `out` n_out): fills
/// p.in / p.out, M and N from in[0], and the problem's dtype pair and layout flags.
RowCall make_row_call(const RowOpEntry& op, const char* fn,
                      std::initializer_list<const TensorRef*> in,
                      std::initializer_list<const TensorRef*> out);

/// plan_row for the call.
RowPlan plan_row_call(const RowCall& c, int forced_config = -1);

/// Launches `plan` (from plan_row_call(c)) on `stream` on the call's device; nothing for
/// policy kNone. Throws CudaError when the launch fails.
void run_row_call(const RowCall& c, const RowPlan& plan, cudaStream_t stream);
inline void run_row_call(const RowCall& c, cudaStream_t stream) {
  run_row_call(c, plan_row_call(c), stream);
}

/// Checks a present (M, N) operand of a row op: 2-D, the given extents, a float dtype, x's
/// device, no negative stride; outputs also no overlapping elements.
void row_check_mn(const ArgCheck& chk, const TensorRef& t, const char* name, int64_t M,
                  int64_t N, int device, bool output);

}  // namespace quack::detail
