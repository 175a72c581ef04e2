// What a generated entry TU of the instance list (row_ops.cmake) builds for one op: its
// RowOpEntry — the op's info from its traits, its vector-path instances (their kernels live in
// the op's per-dtype TUs) and its general-policy kernel.
#pragma once

#include "row/policy_general.cuh"
#include "row/row_launch.h"
#include "row/row_op.h"

namespace quack::detail {

template <class Op>
RowOpInfo row_op_info(const char* name) {
  RowOpInfo i;
  i.n_in = Op::kIn;
  i.n_out = Op::kOut;
  i.n_cols = Op::kCols;
  i.n_acc = Op::kAcc;
  i.n_opt_in = Op::kOptIn;
  i.red_floats = Op::Red::kFloats;
  i.late_cols = Op::kLateCols;
  i.cols_at_apply = Op::kColsAtApply;
  i.trial_configs = Op::kTrialConfigs;
  i.trial_planned = Op::kTrialPlanned;
  i.gate_kernel = Op::kGate == RowGate::kKernel;
  i.no_reduce = Op::kNoReduce;
  i.held_fold = Op::kHeldFold;
  i.name = name;
  return i;
}

/// The general-policy launcher and residency query of Op, for its entry.
template <class Op>
void row_general_launch_entry(const RowPlan& plan, const RowParams& p, cudaStream_t stream,
                              const char* where) {
  launch_row_general<Op>(plan, p, stream, where);
}
template <class Op>
int64_t row_general_resident_entry(const RowPlan& plan, int device, const char* where) {
  return row_general_resident<Op>(plan, device, where);
}

}  // namespace quack::detail
