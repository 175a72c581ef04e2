// Declarations of the row skeleton's launchers (host). The definitions live in row_launch.cuh;
// the generated TUs of the instance list (row_ops.cmake) instantiate launch_row_vector once
// per (op, input dtype, output dtype) pair and launch_row_general once per op.
#pragma once

#include <cuda_runtime_api.h>

#include "row/row_params.h"
#include "row/row_plan.h"

namespace quack::detail {

/// Launches the plan's vector-policy kernel (plan.config) of Op for inputs in TIn and outputs
/// in TOut on `stream` (current device = `device`, whose residency sizes the ring's grid).
template <class Op, typename TIn, typename TOut>
void launch_row_vector(const RowPlan& plan, const RowParams& p, int device, cudaStream_t stream,
                       const char* where);

/// Launches Op's general-policy kernel (runtime dtypes and strides).
template <class Op>
void launch_row_general(const RowPlan& plan, const RowParams& p, cudaStream_t stream,
                        const char* where);

}  // namespace quack::detail
