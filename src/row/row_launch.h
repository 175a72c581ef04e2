// Declarations of the row skeleton's launchers (host). The definitions live in row_launch.cuh;
// the generated TUs of the instance list (row_ops.cmake) instantiate launch_row_vector once
// per (op, instance dtypes) and launch_row_general once per op.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "row/row_params.h"
#include "row/row_plan.h"

namespace quack::detail {

/// Launches the plan's vector-policy kernel (plan.config) of Op for the instance's dtypes D
/// (RowDtypes: per input stream, per output stream, per-column vectors; row_dtypes.cuh) on
/// `stream` (current device = `device`, whose residency sizes the persistent grids when
/// plan.grid is 0). With `resident` non-null it launches nothing and stores there the resident
/// clusters of that kernel on `device` instead.
template <class Op, class D>
void launch_row_vector(const RowPlan& plan, const RowParams& p, int device, cudaStream_t stream,
                       const char* where, int64_t* resident);

/// Launches Op's general-policy kernel (runtime dtypes and strides).
template <class Op>
void launch_row_general(const RowPlan& plan, const RowParams& p, cudaStream_t stream,
                        const char* where);

}  // namespace quack::detail
