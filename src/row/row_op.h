// A row op's call, as its API file builds it: the op's entry (generated from the instance
// list, row_ops.cmake), the kernel parameters and what the plan needs. Host only.
//
//   RowCall c = make_row_call(row_op_softmax_fwd(), "softmax_fwd", {&x}, {&out});
//   ... op-specific parameters (c.p.scalar, c.p.row_out, ...) ...
//   run_row_call(c, stream);                      // plan + launch; nothing for empty inputs
//
// Ops with column accumulations (kAcc > 0: dweight, dbias) name their outputs in
// make_row_call's `accs` and need a device workspace for the per-cluster partial rows:
//   RowPlan plan = plan_row_call(c);
//   size_t bytes = row_call_workspace(c, plan);   // a device query (resident clusters)
//   run_row_call(c, plan, stream, workspace, bytes);  // kernel, then colsum per output
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

/// Launches a vector-policy plan's kernel of one instance (current device = `device`; `where`
/// names the public function); with `resident` non-null it launches nothing and stores there
/// the resident clusters of that kernel on `device` (a device query).
using RowVectorLaunch = void (*)(const RowPlan& plan, const RowParams& p, int device,
                                 cudaStream_t stream, const char* where, int64_t* resident);

/// One compiled vector-path instance of an op: the dtype of each input stream and each output
/// stream (a list shorter than the op's streams gives the rest its last dtype), of the
/// per-column vectors, and its launcher (row_dtypes.cuh, row_ops.cmake).
struct RowInst {
  DType in[kRowMaxIn];
  int n_in;
  DType out[kRowMaxOut];
  int n_out;
  DType vec;
  RowVectorLaunch launch;
  DType in_at(int s) const { return in[s < n_in ? s : n_in - 1]; }
  DType out_at(int s) const { return out[s < n_out ? s : n_out - 1]; }
};

/// An op of the instance list: what it is (from its traits), its vector-path instances (in the
/// list's order: a call takes the first whose dtypes match its present operands) and its
/// general-policy kernel.
struct RowOpEntry {
  RowOpInfo info;
  const RowInst* insts;
  int n_insts;
  /// Launches the general-policy kernel (runtime dtypes and strides).
  void (*launch_general)(const RowPlan& plan, const RowParams& p, cudaStream_t stream,
                         const char* where);
  /// Resident clusters of the general kernel on `device` (its persistent grid with column
  /// accumulations): a device query.
  int64_t (*resident_general)(const RowPlan& plan, int device, const char* where);
};

struct RowCall {
  const RowOpEntry* op = nullptr;
  const char* fn = "";  // public function, for messages
  RowParams p;          // p.g.rows = M, p.g.cols = N; streams in p.in / p.out, vectors p.vec
  RowIO acc_out[kRowMaxAcc];  // outputs of the column accumulations ((N); absent: not asked)
  RowProblem problem;
  int device = 0;
};

/// Builds the call of `op` on the (M, N) input streams `in` and output streams `out`, the (N)
/// per-column vectors `vecs` and the (N) outputs `accs` of its column accumulations (already
/// validated: same M, N and device; in[0] present; `in` holds op.info.n_in tensors, `out`
/// n_out, `vecs` n_cols, `accs` n_acc; optional ones may be absent TensorRefs): fills p.in,
/// p.out, p.vec, M and N from in[0], the instance whose dtypes match the present operands
/// (none: the general policy) and the layout flags.
RowCall make_row_call(const RowOpEntry& op, const char* fn,
                      std::initializer_list<const TensorRef*> in,
                      std::initializer_list<const TensorRef*> out,
                      std::initializer_list<const TensorRef*> vecs = {},
                      std::initializer_list<const TensorRef*> accs = {});

/// plan_row for the call.
RowPlan plan_row_call(const RowCall& c, int forced_config = -1);

/// Ops with column accumulations: fixes the plan's persistent grid (the resident clusters of
/// its kernel on the call's device, at most one per row block: a device query, cached) and
/// returns P, the partial rows per accumulation; 0 when the plan launches nothing. Idempotent.
int64_t row_call_partials(const RowCall& c, RowPlan& plan);

/// Bytes of device workspace run_row_call needs: (accumulations asked for) x P x N x 4 (fp32
/// partial rows); 0 for ops without column accumulations. Fixes the grid (row_call_partials).
size_t row_call_workspace(const RowCall& c, RowPlan& plan);

/// Launches `plan` (from plan_row_call(c)) on `stream` on the call's device; nothing for
/// policy kNone, except that the outputs of column accumulations are zero-filled when M = 0.
/// Ops with column accumulations: `workspace` (16-byte aligned) holds row_call_workspace bytes;
/// the kernel writes the partial rows there, then colsum adds them into the outputs. Throws
/// InvalidArgument for a too-small or misaligned workspace, CudaError when a launch fails.
void run_row_call(const RowCall& c, const RowPlan& plan, cudaStream_t stream,
                  void* workspace = nullptr, size_t workspace_bytes = 0);
inline void run_row_call(const RowCall& c, cudaStream_t stream) {
  run_row_call(c, plan_row_call(c), stream);
}

/// Checks a present (M, N) operand of a row op: 2-D, the given extents, a float dtype, x's
/// device, no negative stride; outputs also no overlapping elements.
void row_check_mn(const ArgCheck& chk, const TensorRef& t, const char* name, int64_t M,
                  int64_t N, int device, bool output);

/// Checks a present (N) per-column operand (weight, bias, dweight, dbias): 1-D of N elements,
/// a float dtype, x's device, no negative stride; outputs also no overlapping elements.
void row_check_n(const ArgCheck& chk, const TensorRef& t, const char* name, int64_t N,
                 int device, bool output);

/// Checks a present (M) fp32 per-row operand (mean, rstd): 1-D of M elements, fp32, x's
/// device, no negative stride; outputs also no overlapping elements.
void row_check_m_f32(const ArgCheck& chk, const TensorRef& t, const char* name, int64_t M,
                     int device, bool output);

/// An (M) per-row tensor as the kernels read it: element `row` at RowIO::offset(row, 0).
RowIO row_vector_io(const TensorRef& t);

}  // namespace quack::detail
