// Cross-entropy public API (quack/cross_entropy.h): validation at the boundary, then the row
// skeleton's call (traits: cross_entropy_traits.cuh) between the prep and finish kernels
// (cross_entropy_aux.cu). Host only.
#include <cmath>
#include <string>

#include "common/check.h"
#include "common/launch.h"
#include "cross_entropy/cross_entropy_internal.h"
#include "cross_entropy/cross_entropy_params.h"
#include "quack/cross_entropy.h"
#include "row_gen/row_ops.h"

namespace quack {

namespace detail {

namespace {

constexpr const char* kFwd = "cross_entropy_fwd";
constexpr const char* kBwd = "cross_entropy_bwd";
constexpr const char* kScale = "cross_entropy_scale_grad";
constexpr const char* kTrainBwd = "cross_entropy_train_bwd";

// (M) operands as the row kernels read them: row_vector_io (row/row_op.h).

RowIO scalars_io(void* p) {
  RowIO io;
  io.ptr = p;
  io.dtype = DType::kFloat32;
  io.row_stride = 0;
  io.col_stride = 1;
  return io;
}

void check_vector(const ArgCheck& chk, const TensorRef& t, const char* name, int64_t n,
                  int device, bool output) {
  chk.vector(t, name, n);
  chk.float_dtype(t, name);
  chk.same_device(t, name, device);
  if (output) chk.non_overlapping(t, name);
}

void check_target(const ArgCheck& chk, const TensorRef& t, int64_t M, int device) {
  chk.vector(t, "target", M);
  chk.dtype_in(t, "target", {DType::kInt32, DType::kInt64});
  chk.same_device(t, "target", device);
}

void check_options(const ArgCheck& chk, float eps, float zs, float cap) {
  if (!(eps >= 0.f && eps <= 1.f))
    chk.fail("label_smoothing is " + format_float(eps) + ", expected a value in [0, 1]");
  if (!(zs >= 0.f && std::isfinite(zs)))  // Python's name for it is z_loss
    chk.fail("z_loss_scale (Python: z_loss) is " + format_float(zs) +
             ", expected a finite value ≥ 0");
  if (!(cap >= 0.f && std::isfinite(cap)))
    chk.fail("logit_softcap is " + format_float(cap) +
             ", expected a finite value > 0 (or 0: no softcap)");
}

void check_weight(const ArgCheck& chk, const TensorRef& w, int64_t V, int device) {
  if (!w.present()) return;
  chk.vector(w, "weight", V);
  chk.dtype_in(w, "weight", {DType::kFloat32});
  chk.same_device(w, "weight", device);
}

// dx: (M, V) float output (against x, the header's rule — x itself or memory of its own — in
// the callers' ArgCheck::outputs_apart).
void check_dx(const ArgCheck& chk, const TensorRef& dx, int64_t M, int64_t V, int device) {
  row_check_mn(chk, dx, "dx", M, V, device, /*output=*/true);
}

void check_v(const ArgCheck& chk, int64_t M, int64_t V, const char* what) {
  if (M > 0 && V < 1)
    chk.fail(std::string(what) + " has V = " + std::to_string(V) +
             " classes, expected V ≥ 1 (every non-ignored target must be a class)");
  if (V >= (int64_t{1} << 31))
    chk.fail(std::string(what) + " has V = " + std::to_string(V) + " classes, expected < 2^31");
}

void set_options(RowParams& p, float eps, float zs, float cap, int64_t ignore, int64_t V,
                 int64_t flags) {
  p.scalar[ce::kEps] = eps;
  p.scalar[ce::kZScale] = zs;
  p.scalar[ce::kCap] = cap;
  p.scalar[ce::kInvCap] = cap > 0.f ? 1.f / cap : 0.f;
  p.iscalar[ce::kIgnore] = ignore;
  ce::set_classes(p, V);  // after ε
  p.iscalar[ce::kFlags] = flags;
}

const RowOpEntry& fwd_entry(bool grad, bool cap, bool ws) {
  if (ws && grad)
    return cap ? row_op_cross_entropy_fwd_grad_cap_ws() : row_op_cross_entropy_fwd_grad_ws();
  if (ws) return cap ? row_op_cross_entropy_fwd_cap_ws() : row_op_cross_entropy_fwd_ws();
  if (grad) return cap ? row_op_cross_entropy_fwd_grad_cap() : row_op_cross_entropy_fwd_grad();
  return cap ? row_op_cross_entropy_fwd_cap() : row_op_cross_entropy_fwd();
}

// The predicted training forward's two kernels (kSplit): loss only, or loss + dx.
const RowOpEntry& split_entry(bool grad, bool cap) {
  if (grad) return cap ? row_op_cross_entropy_fwd_split_grad_cap() : row_op_cross_entropy_fwd_split_grad();
  return cap ? row_op_cross_entropy_fwd_split_loss_cap() : row_op_cross_entropy_fwd_split_loss();
}

const RowOpEntry& bwd_entry(bool cap, bool ws) {
  if (ws) return cap ? row_op_cross_entropy_bwd_cap_ws() : row_op_cross_entropy_bwd_ws();
  return cap ? row_op_cross_entropy_bwd_cap() : row_op_cross_entropy_bwd();
}

// dx_state: (kCrossEntropyDxStateFloats) fp32, unit stride (the kernels index it as an array),
// on `device`.
void check_dx_state(const ArgCheck& chk, const TensorRef& t, int device) {
  chk.vector(t, "dx_state", kCrossEntropyDxStateFloats);
  chk.dtype_in(t, "dx_state", {DType::kFloat32});
  chk.same_device(t, "dx_state", device);
  if (t.stride[0] != 1)
    chk.fail("dx_state has stride " + std::to_string(t.stride[0]) + ", expected 1");
}

// dx_predict: one int32 on `device`.
void check_dx_predict(const ArgCheck& chk, const TensorRef& t, int device) {
  chk.vector(t, "dx_predict", 1);
  chk.dtype_in(t, "dx_predict", {DType::kInt32});
  chk.same_device(t, "dx_predict", device);
}

bool weighted_smoothing(const CrossEntropyFwdArgs& a) {
  return a.weight.present() && a.label_smoothing > 0.f;
}

}  // namespace

CeFwdCall cross_entropy_fwd_call(const CrossEntropyFwdArgs& a, CePredictedForm form) {
  ArgCheck chk(kFwd, "target");  // the device reference: target, then x where present
  const int r = static_cast<int>(a.reduction);
  if (r < 0 || r > 2)
    chk.fail("reduction has value " + std::to_string(r) + ", expected kNone, kSum or kMean");
  const bool none = a.reduction == Reduction::kNone, mean = a.reduction == Reduction::kMean;
  chk.required(a.target, "target");
  if (a.target.ndim != 1)
    chk.fail("target has " + std::to_string(a.target.ndim) + " dimensions " +
             describe(a.target) + ", expected 1 (M)");
  const int64_t M = a.target.shape[0];
  const bool partial = a.lse_partial.present(), given = a.target_logit.present();
  int64_t V = a.num_classes;
  int device = a.target.device;
  if (a.x.present()) {
    chk.matrix(a.x, "x", M, -1);
    chk.float_dtype(a.x, "x");
    device = a.x.device;
    chk.set_device_ref("x");
    if (a.num_classes >= 0 && a.num_classes != a.x.shape[1])
      chk.fail("num_classes is " + std::to_string(a.num_classes) + ", expected -1 or x's V = " +
               std::to_string(a.x.shape[1]));
    V = a.x.shape[1];
  } else if (!(partial && given)) {
    chk.fail("x is absent, expected the (M, V) logits (only lse_partial with target_logit "
             "replaces them)");
  } else if (a.num_classes < 0) {
    chk.fail("num_classes is " + std::to_string(a.num_classes) +
             ", expected V ≥ 1 (x is absent: lse_partial with target_logit)");
  }
  check_v(chk, M, V, a.x.present() ? "x" : "num_classes");
  check_target(chk, a.target, M, device);
  check_options(chk, a.label_smoothing, a.z_loss_scale, a.logit_softcap);
  check_weight(chk, a.weight, V, device);
  int64_t K = 0;
  if (partial) {
    chk.matrix(a.lse_partial, "lse_partial", M, -1);
    chk.float_dtype(a.lse_partial, "lse_partial");
    chk.same_device(a.lse_partial, "lse_partial", device);
    K = a.lse_partial.shape[1];
    if (M > 0 && K < 1)
      chk.fail("lse_partial has shape " + describe(a.lse_partial) + ", expected K ≥ 1 columns");
  }
  if (given) check_vector(chk, a.target_logit, "target_logit", M, device, false);
  if (partial || given) {
    const char* with = partial ? "lse_partial" : "target_logit";
    if (a.label_smoothing > 0.f)
      chk.fail(std::string("label_smoothing is ") + format_float(a.label_smoothing) +
               " with " + with + ", expected 0 (smoothing needs every logit)");
    if (a.logit_softcap > 0.f)
      chk.fail(std::string("logit_softcap is ") + format_float(a.logit_softcap) + " with " +
               with + ", expected 0 (the softcap applies to every logit)");
  }
  if (partial && a.dx.present())
    chk.fail("dx is given with lse_partial, expected no dx (compute the gradient with "
             "cross_entropy_bwd from the combined lse)");
  check_vector(chk, a.loss, "loss", none ? M : 1, device, true);
  if (a.lse.present()) check_vector(chk, a.lse, "lse", M, device, true);
  if (a.z_loss.present()) check_vector(chk, a.z_loss, "z_loss", none ? M : 1, device, true);
  if (a.dx.present()) {
    check_dx(chk, a.dx, M, V, device);
  }
  const bool state = a.dx_state.present();
  if (state) {
    if (!a.dx.present())
      chk.fail("dx_state is given without dx, expected dx (the state records how dx was "
               "written)");
    if (none)
      chk.fail("dx_state is given with reduction kNone, expected kSum or kMean (the training "
               "backward takes one grad_output)");
    check_dx_state(chk, a.dx_state, device);
    chk.non_overlapping(a.dx_state, "dx_state");
  }
  if (a.dx_predict.present()) {
    if (!state)
      chk.fail("dx_predict is given without dx_state, expected dx_state (where the forward "
               "records whether it wrote dx)");
    check_dx_predict(chk, a.dx_predict, device);
  }
  // The outputs share no byte with each other or with the inputs; dx may be x itself.
  chk.outputs_apart({{&a.dx, "dx"}, {&a.loss, "loss"}, {&a.lse, "lse"}, {&a.z_loss, "z_loss"},
                     {&a.dx_state, "dx_state"}},
                    {{&a.x, "x"}, {&a.target, "target"}, {&a.weight, "weight"},
                     {&a.lse_partial, "lse_partial"}, {&a.target_logit, "target_logit"},
                     {&a.dx_predict, "dx_predict"}},
                    {{&a.dx, &a.x}});
  const size_t need = cross_entropy_fwd_workspace_size(a);
  if (need > 0) {
    if (a.workspace == nullptr || a.workspace_bytes < need)
      chk.fail("workspace has " + std::to_string(a.workspace == nullptr ? 0 : a.workspace_bytes) +
               " bytes, expected ≥ " + std::to_string(need) +
               " (cross_entropy_fwd_workspace_size)");
    if (reinterpret_cast<uintptr_t>(a.workspace) % 16 != 0)
      chk.fail("workspace is not 16-byte aligned, expected a 16-byte aligned device pointer");
  }

  const bool ws = weighted_smoothing(a), grad = a.dx.present();
  const bool cap = a.logit_softcap > 0.f, z = a.z_loss_scale != 0.f;
  int64_t flags = 0;
  if (a.weight.present()) flags |= ce::kHasWeight;
  if (ws) flags |= ce::kWeightedSmoothing;
  if (given) flags |= ce::kTargetGiven;
  else if (partial) flags |= ce::kTargetGather;
  if (mean && grad) flags |= ce::kDeviceScale;
  if (!none) flags |= ce::kSplitLoss;
  if (a.dx_predict.present()) flags |= ce::kDxGated;

  CeFwdCall c;
  c.device = device;
  const TensorRef& in = partial ? a.lse_partial : a.x;
  // The predicted forward: two kernels, loss only where the word is 0 (the loss-only plan and
  // occupancy), loss + dx where it is not. Weighted smoothing runs on the general policy only,
  // where the two instances do not differ in occupancy: one kernel, stores gated.
  c.split = a.dx_predict.present() && !ws && form == CePredictedForm::kSplit;
  if (c.split) {
    c.row = make_row_call(split_entry(false, cap), kFwd, {&in}, {});
    c.row_dx = make_row_call(split_entry(true, cap), kFwd, {&in}, {&a.dx});
  } else {
    c.row = grad ? make_row_call(fwd_entry(true, cap, ws), kFwd, {&in}, {&a.dx})
                 : make_row_call(fwd_entry(false, cap, ws), kFwd, {&in}, {});
  }
  c.row.device = device;
  RowParams& p = c.row.p;
  // The device scalars: in the dx state when there is one (the training backward reads them).
  float* dev = state ? static_cast<float*>(a.dx_state.data) : static_cast<float*>(a.workspace);
  float* ce_rows = need > 0 ? reinterpret_cast<float*>(static_cast<char*>(a.workspace) +
                                                       ce::kScalarBytes)
                            : nullptr;
  const size_t row_bytes = (static_cast<size_t>(M) * 4 + 15) / 16 * 16;
  float* z_rows = !none && z ? reinterpret_cast<float*>(reinterpret_cast<char*>(ce_rows) +
                                                        row_bytes)
                             : nullptr;
  p.row_in[ce::kTarget] = row_vector_io(a.target);
  if (given) p.row_in[ce::kTargetLogit] = row_vector_io(a.target_logit);
  else if (partial) p.row_in[ce::kTargetLogit] = row_io(a.x);  // gathered at (row, target)
  if (dev) p.row_in[ce::kDevScalars] = scalars_io(dev);
  if (none) {
    p.row_out[ce::kLoss] = row_vector_io(a.loss);
    p.row_out[ce::kZ] = row_vector_io(a.z_loss);
  } else {
    p.row_out[ce::kLoss] = scalars_io(ce_rows);
    p.row_out[ce::kLoss].row_stride = 1;
    if (z_rows) {
      p.row_out[ce::kZ] = scalars_io(z_rows);
      p.row_out[ce::kZ].row_stride = 1;
    }
  }
  p.row_out[ce::kLseOut] = row_vector_io(a.lse);
  p.vec[ce::kWeight] = row_io(a.weight);
  set_options(p, a.label_smoothing, a.z_loss_scale, a.logit_softcap, a.ignore_index, V, flags);
  if (c.split) {  // the same parameters (per-row inputs and outputs, options, flags); dx out
    const RowIO dx_out = c.row_dx.p.out[0];
    c.row_dx.p = p;
    c.row_dx.p.out[0] = dx_out;
    c.row_dx.device = device;
  }

  c.prep = mean || ws || state;
  c.prep_params.mean = mean;
  c.prep_params.dx_on = state;
  c.prep_params.predict = static_cast<const int32_t*>(a.dx_predict.data);
  c.prep_params.target = row_vector_io(a.target);
  c.prep_params.weight = row_io(a.weight);
  c.prep_params.dev = dev;
  c.prep_params.M = M;
  c.prep_params.V = V;
  c.prep_params.ignore_index = a.ignore_index;
  c.prep_params.weight_sum = ws;
  c.finish = !none;
  c.finish_params.ce_rows = ce_rows;
  c.finish_params.z_rows = z_rows;
  c.finish_params.dev = dev;
  c.finish_params.loss = row_vector_io(a.loss);
  c.finish_params.z = row_vector_io(a.z_loss);
  c.finish_params.M = M;
  c.finish_params.mean = mean;
  return c;
}

CeFwdPlan plan_cross_entropy_fwd(const CeFwdCall& c, int config, int dx_config) {
  CeFwdPlan plan;
  plan.row = plan_row_call(c.row, config);
  if (c.split) plan.dx = plan_row_call(c.row_dx, dx_config);
  return plan;
}

void run_cross_entropy_fwd(const CeFwdCall& c, const CeFwdPlan& plan, cudaStream_t stream) {
  const bool rows = plan.row.policy != RowPolicy::kNone || plan.dx.policy != RowPolicy::kNone;
  if (!c.prep && !c.finish && !rows) return;  // 'none', M = 0
  const DeviceGuard guard(c.device, kFwd);
  if (c.prep) launch_ce_prep(c.prep_params, stream, kFwd);
  run_row_call(c.row, plan.row, stream);  // nothing when M = 0
  // Split: one of the two kernels returns at once (the state's kDxOn, written by the prep).
  if (c.split) run_row_call(c.row_dx, plan.dx, stream);
  if (c.finish) launch_ce_finish(c.finish_params, stream, kFwd);
}

void run_cross_entropy_fwd(const CeFwdCall& c, const RowPlan& plan, cudaStream_t stream) {
  if (c.split)
    throw InvalidArgument(std::string(kFwd) +
                          ": internal error: a split call runs with the plans of its two "
                          "kernels (plan_cross_entropy_fwd)");
  CeFwdPlan p;
  p.row = plan;
  run_cross_entropy_fwd(c, p, stream);
}

RowCall cross_entropy_bwd_call(const CrossEntropyBwdArgs& a, const char* fn, int64_t flags) {
  const ArgCheck chk(fn);
  chk.matrix(a.x, "x", -1, -1);
  chk.float_dtype(a.x, "x");
  const int64_t M = a.x.shape[0], V = a.x.shape[1];
  const int device = a.x.device;
  check_v(chk, M, V, "x");
  check_target(chk, a.target, M, device);
  check_options(chk, a.label_smoothing, a.z_loss_scale, a.logit_softcap);
  check_weight(chk, a.weight, V, device);
  check_vector(chk, a.lse, "lse", M, device, false);
  chk.required(a.dloss, "dloss");
  if (a.dloss.ndim == 1 && a.dloss.shape[0] == 1 && M != 1) {
    check_vector(chk, a.dloss, "dloss", 1, device, false);  // one value for every row
  } else {
    check_vector(chk, a.dloss, "dloss", M, device, false);
  }
  check_dx(chk, a.dx, M, V, device);
  // dx is written while the other inputs are read by other rows: separate memory (or x
  // itself).
  chk.outputs_apart({{&a.dx, "dx"}},
                    {{&a.x, "x"}, {&a.target, "target"}, {&a.lse, "lse"}, {&a.dloss, "dloss"},
                     {&a.weight, "weight"}},
                    {{&a.dx, &a.x}});

  const bool ws = a.weight.present() && a.label_smoothing > 0.f;
  if (a.weight.present()) flags |= ce::kHasWeight;
  if (ws) flags |= ce::kWeightedSmoothing;
  RowCall c = make_row_call(bwd_entry(a.logit_softcap > 0.f, ws), fn, {&a.x}, {&a.dx});
  RowParams& p = c.p;
  p.row_in[ce::kTarget] = row_vector_io(a.target);
  p.row_in[ce::kLseIn] = row_vector_io(a.lse);
  p.row_in[ce::kDloss] = row_vector_io(a.dloss);
  if (a.dloss.shape[0] == 1) p.row_in[ce::kDloss].row_stride = 0;
  p.vec[ce::kWeight] = row_io(a.weight);
  set_options(p, a.label_smoothing, a.z_loss_scale, a.logit_softcap, a.ignore_index, V, flags);
  return c;
}

}  // namespace detail

size_t cross_entropy_fwd_workspace_size(const CrossEntropyFwdArgs& a) {
  const int64_t M = a.target.ndim == 1 && a.target.shape[0] > 0 ? a.target.shape[0] : 0;
  const bool reduced = a.reduction != Reduction::kNone;
  if (!reduced && !detail::weighted_smoothing(a)) return 0;
  return detail::ce::workspace_bytes(M, reduced, a.z_loss_scale != 0.f);
}

void cross_entropy_fwd(const CrossEntropyFwdArgs& args, cudaStream_t stream) {
  const detail::CeFwdCall c = detail::cross_entropy_fwd_call(args);
  detail::run_cross_entropy_fwd(c, detail::plan_cross_entropy_fwd(c), stream);
}

void cross_entropy_bwd(const CrossEntropyBwdArgs& args, cudaStream_t stream) {
  detail::run_row_call(detail::cross_entropy_bwd_call(args), stream);
}

namespace detail {

RowCall cross_entropy_train_bwd_call(const CrossEntropyTrainBwdArgs& a) {
  const ArgCheck chk(kTrainBwd);
  chk.required(a.x, "x");
  chk.required(a.lse, "lse");
  chk.required(a.grad_output, "grad_output");
  check_vector(chk, a.grad_output, "grad_output", 1, a.x.device, false);
  chk.required(a.dx, "dx");
  chk.required(a.dx_state, "dx_state");
  // cross_entropy_bwd's row call (its checks of x, target, lse, the options and the weight;
  // dloss = grad_output for every row) into dx_out or dx.
  CrossEntropyBwdArgs b;
  b.x = a.x;
  b.target = a.target;
  b.lse = a.lse;
  b.dloss = a.grad_output;
  b.dx = a.dx_out.present() ? a.dx_out : a.dx;
  b.weight = a.weight;
  b.ignore_index = a.ignore_index;
  b.label_smoothing = a.label_smoothing;
  b.z_loss_scale = a.z_loss_scale;
  b.logit_softcap = a.logit_softcap;
  RowCall c = cross_entropy_bwd_call(b, kTrainBwd, ce::kTrainBwd);
  c.p.row_in[ce::kBwdState] = scalars_io(a.dx_state.data);
  c.problem.finish_loads = true;  // the state's scales, per row in finish
  check_dx_state(chk, a.dx_state, a.x.device);
  return c;
}

}  // namespace detail

void cross_entropy_train_bwd(const CrossEntropyTrainBwdArgs& a, cudaStream_t stream) {
  using namespace detail;
  const ArgCheck chk(kTrainBwd);
  // The recompute, run on the device only where the forward did not write dx (kTrainBwd: the
  // state's kDxOn).
  const RowCall c = cross_entropy_train_bwd_call(a);
  const bool out_of_place = a.dx_out.present() && a.dx_out.data != a.dx.data;
  const int64_t M = a.x.shape[0], V = a.x.shape[1];
  const int device = a.x.device;
  if (a.dx_out.present()) {
    check_dx(chk, a.dx, M, V, device);
    if (a.dx_out.dtype != a.dx.dtype)
      chk.fail("dx_out has dtype " + describe_full(a.dx_out) + ", expected dx's " +
               describe_full(a.dx));
    chk.same_or_disjoint(a.dx, "dx", a.x, "x");
    chk.same_or_disjoint(a.dx_out, "dx_out", a.dx, "dx");
  }
  if (a.dx_predict.present()) check_dx_predict(chk, a.dx_predict, device);
  if (M == 0 || V == 0) return;

  // The rescale: g·dx where the forward wrote dx (nothing in place for g == 1).
  CeScaleParams q;
  q.dx = row_io(a.dx);
  q.grad = row_vector_io(a.grad_output);
  if (out_of_place) q.out = row_io(a.dx_out);
  q.state = static_cast<const float*>(a.dx_state.data);
  q.predict = static_cast<int32_t*>(a.dx_predict.data);
  q.M = M;
  q.V = V;
  const int vec_elems = 16 / dtype_size(a.dx.dtype);
  q.vec = vector_ok(a.dx, vec_elems) && (!out_of_place || vector_ok(a.dx_out, vec_elems));

  const DeviceGuard guard(device, kTrainBwd);
  launch_ce_scale_grad(q, device, stream, kTrainBwd);
  run_row_call(c, stream);
}

void cross_entropy_scale_grad(const CrossEntropyScaleGradArgs& a, cudaStream_t stream) {
  using namespace detail;
  const ArgCheck chk(kScale, "dx");
  chk.matrix(a.dx, "dx", -1, -1);
  chk.float_dtype(a.dx, "dx");
  chk.non_overlapping(a.dx, "dx");
  const int device = a.dx.device;
  check_vector(chk, a.grad_output, "grad_output", 1, device, false);
  CeScaleParams q;
  q.dx = row_io(a.dx);
  q.grad = row_vector_io(a.grad_output);
  q.M = a.dx.shape[0];
  q.V = a.dx.shape[1];
  q.vec = vector_ok(a.dx, 16 / dtype_size(a.dx.dtype));
  if (q.M == 0 || q.V == 0) return;
  const DeviceGuard guard(device, kScale);
  launch_ce_scale_grad(q, device, stream, kScale);
}

}  // namespace quack
