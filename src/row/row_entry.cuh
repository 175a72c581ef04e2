// What a generated entry TU of the instance list (row_ops.cmake) builds for one op: its
// RowOpEntry — the op's info from its traits, which dtype pairs have vector-path instances (in
// the op's per-dtype TUs), and the launch (general policy here, vector policies there).
#pragma once

#include <cstddef>
#include <string>

#include "quack/errors.h"
#include "row/policy_general.cuh"
#include "row/row_launch.h"
#include "row/row_op.h"

namespace quack::detail {

using RowVectorLaunch = void (*)(const RowPlan&, const RowParams&, int, cudaStream_t, const char*);

/// One compiled (input dtype, output dtype) pair and its launcher.
struct RowPair {
  DType in, out;
  RowVectorLaunch launch;
};

template <class Op>
RowOpInfo row_op_info(const char* name) {
  RowOpInfo i;
  i.n_in = Op::kIn;
  i.n_out = Op::kOut;
  i.n_cols = Op::kCols;
  i.red_floats = Op::Red::kFloats;
  i.name = name;
  return i;
}

template <size_t N>
const RowPair* row_find_pair(const RowPair (&pairs)[N], DType in, DType out) {
  for (const RowPair& e : pairs)
    if (e.in == in && e.out == out) return &e;
  return nullptr;
}

template <class Op, size_t N>
void row_launch_entry(const RowPair (&pairs)[N], const RowPlan& plan, const RowParams& p,
                      int device, cudaStream_t stream, const char* where) {
  if (plan.policy == RowPolicy::kGeneral) return launch_row_general<Op>(plan, p, stream, where);
  const RowPair* e = row_find_pair(pairs, plan.in, plan.out);
  if (e == nullptr)
    throw InvalidArgument(std::string(where) + ": internal error: no instance for " +
                          dtype_name(plan.in) + " -> " + dtype_name(plan.out));
  e->launch(plan, p, device, stream, where);
}

}  // namespace quack::detail
