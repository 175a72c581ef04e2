// What a generated entry TU of the instance list (row_ops.cmake) builds for one op: its
// RowOpEntry — the op's info from its traits, which dtype triples have vector-path instances
// (in the op's per-dtype TUs), the launch and the residency query (general policy here,
// vector policies there).
#pragma once

#include <cstddef>
#include <string>

#include "quack/errors.h"
#include "row/policy_general.cuh"
#include "row/row_launch.h"
#include "row/row_op.h"

namespace quack::detail {

using RowVectorLaunch = void (*)(const RowPlan&, const RowParams&, int, cudaStream_t, const char*,
                                 int64_t*);

/// One compiled (input, output, vector dtype) triple and its launcher.
struct RowPair {
  DType in, out, vec;
  RowVectorLaunch launch;
};

template <class Op>
RowOpInfo row_op_info(const char* name) {
  RowOpInfo i;
  i.n_in = Op::kIn;
  i.n_out = Op::kOut;
  i.n_cols = Op::kCols;
  i.n_acc = Op::kAcc;
  i.n_opt_in = Op::kOptIn;
  i.red_floats = Op::Red::kFloats;
  i.name = name;
  return i;
}

/// The first triple of (in, out) with vector dtype `vec` (vec < 0: any).
template <size_t N>
const RowPair* row_find_pair(const RowPair (&pairs)[N], DType in, DType out, int vec) {
  for (const RowPair& e : pairs)
    if (e.in == in && e.out == out && (vec < 0 || static_cast<int>(e.vec) == vec)) return &e;
  return nullptr;
}

template <size_t N>
bool row_find_pair_entry(const RowPair (&pairs)[N], DType in, DType out, int vec,
                         DType* vec_out) {
  const RowPair* e = row_find_pair(pairs, in, out, vec);
  if (e != nullptr) *vec_out = e->vec;
  return e != nullptr;
}

template <size_t N>
const RowPair& row_plan_pair(const RowPair (&pairs)[N], const RowPlan& plan, const char* where) {
  const RowPair* e = row_find_pair(pairs, plan.in, plan.out, static_cast<int>(plan.vec));
  if (e == nullptr)
    throw InvalidArgument(std::string(where) + ": internal error: no instance for " +
                          dtype_name(plan.in) + " -> " + dtype_name(plan.out) + " (vectors " +
                          dtype_name(plan.vec) + ")");
  return *e;
}

template <class Op, size_t N>
void row_launch_entry(const RowPair (&pairs)[N], const RowPlan& plan, const RowParams& p,
                      int device, cudaStream_t stream, const char* where) {
  if (plan.policy == RowPolicy::kGeneral) return launch_row_general<Op>(plan, p, stream, where);
  row_plan_pair(pairs, plan, where).launch(plan, p, device, stream, where, nullptr);
}

template <class Op, size_t N>
int64_t row_resident_entry(const RowPair (&pairs)[N], const RowPlan& plan, const RowParams& p,
                           int device, const char* where) {
  if (plan.policy == RowPolicy::kGeneral) return row_general_resident<Op>(plan, device, where);
  int64_t resident = 0;
  row_plan_pair(pairs, plan, where).launch(plan, p, device, nullptr, where, &resident);
  return resident;
}

}  // namespace quack::detail
