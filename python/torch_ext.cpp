// quack_cpp._torch: the eager fast paths of the row ops in C++ (torch extension; built by pip
// where the building Python imports torch: python/CMakeLists.txt, QUACK_BUILD_TORCH_EXT).
// quack_cpp._C and the C++ library stay torch-free; this module is the one place that includes
// torch headers.
//
// rmsnorm_fwd(x, weight, bias, residual, eps, weight_offset, out_dtype, residual_out_dtype,
//             store_rstd)
//   The same arguments, outputs and gradients as torch.ops.quack_cpp.rmsnorm_fwd on the eager
//   fast path (quack_cpp.ops.RMSNormFwd: outputs, launch, setup_context, backward), in C++:
//   outputs allocated with at::empty, quack::rmsnorm_fwd on the current stream of x's device,
//   and, when grad mode is on and an input requires grad, a C++ autograd node whose backward
//   allocates the gradients and the workspace and calls quack::rmsnorm_bwd. Absent outputs are
//   None. Under create_graph=True the backward calls the custom op quack_cpp::rmsnorm_bwd (no
//   autograd formula: double backward raises as on the custom-op path).
//
// softmax_fwd(x, out_dtype), log_softmax_fwd(x, out_dtype)
//   torch.ops.quack_cpp.softmax_fwd / log_softmax_fwd on the eager fast path
//   (quack_cpp.softmax_ops: outputs, launch, setup_context, backward): y = at::empty, the quack
//   launch, and where autograd records the call a C++ node (SoftmaxFn, LogSoftmaxFn) saving y
//   whose backward is quack::softmax_bwd / log_softmax_bwd into dx in x's dtype (under
//   create_graph the custom op quack_cpp::<op>_bwd, which has no autograd formula). Both are
//   instances of RowUnaryFn: a row op of one input and one output whose backward reads the
//   output and its gradient; another such op is a RowUnaryOps table and two lines.
//
// layernorm_fwd(x, weight, bias, residual, eps, weight_offset, out_dtype, residual_out_dtype,
//               store_stats)
//   torch.ops.quack_cpp.layernorm_fwd on the eager fast path (quack_cpp.layernorm_ops
//   LayerNormFwd / LayerNormBwd), as rmsnorm_fwd: (out, residual_out, mean, rstd), None where
//   absent; mean and rstd are non-differentiable outputs of the node (LayerNormFn), which saves
//   h, weight, mean and rstd and whose backward is quack::layernorm_bwd (workspace from torch's
//   allocator; under create_graph the custom op quack_cpp::layernorm_bwd).
//
// cross_entropy_fwd(x, target, weight, lse_partial, target_logit, ignore_index, reduction,
//                   label_smoothing, z_loss, logit_softcap, num_classes, want_lse, want_z_loss,
//                   want_dx, predict_dx, dx_into_x)
//   torch.ops.quack_cpp.cross_entropy_fwd on the eager fast path (quack_cpp.cross_entropy_ops
//   CrossEntropyFwd: outputs, launch, setup_context, backward): (loss, lse, z_loss, dx,
//   dx_state), None where absent; quack::cross_entropy_fwd with its workspace from torch's
//   allocator and, with predict_dx, the device's prediction word (owned by the Python
//   dx_predict_word, cached here). The node (CrossEntropyFn) has the Python backward's three
//   modes: the training backward (quack::cross_entropy_train_bwd, into the saved dx only in
//   the last backward through an untraced graph), the rescale of a forward's dx
//   (quack::cross_entropy_scale_grad, or dx * dloss where the graph is kept), and the backward
//   from lse (quack::cross_entropy_bwd). Where the Python path's backward op would take the
//   custom op (grad mode on with an input that requires grad, a dispatch mode, a subclass),
//   the custom op runs through the dispatcher. Returns NotImplemented, before doing anything,
//   for what it leaves to the Python fast path: logits None, lse_partial or target_logit
//   given, a recorded call whose backward is the one from lse with 'mean' (its denominator is
//   torch ops) or without lse.
//
// gemm(A, B, C, alpha, beta, out_dtype, tuned, alpha_t, beta_t, bias, colvec_bias, dynamic_scheduler)
//   torch.ops.quack_cpp.gemm's eager fast path (quack_cpp.gemm_ops: _gemm_impl) for the calls
//   autograd does not record, e.g. inference calls and the GEMMs of Linear's Python Function:
//   D allocated as _new_out decides (its layout decision cached per dtypes, shapes and
//   strides), quack::gemm on D's current stream with the stream-K workspace that
//   gemm_ops._streamk_workspace owns (gemm_run, which LinearFn runs too). NotImplemented,
//   before doing anything, for a C, device scalars, tuning, a column bias (colvec_bias: its
//   checks are the Python path's), the dynamic scheduler (its counters are the Python path's),
//   a recorded call, operands TMA cannot address and bad ranks or K (gemm_takes; the Python
//   fast path runs those, with its messages). Taken unless
//   QUACK_CPP_EAGER_GEMM=0 or QUACK_CPP_EAGER=0 (gemm_op.eager).
//
// linear(x, weight, bias, dtype, fuse_grad_accum, tuned, path)
//   quack_cpp.gemm_ops.linear_op's eager fast path (gemm_ops.Linear: forward, backward), for
//   nn.Linear and linear: x2 and W made operands as there, y = x2 W^T (+ b) on gemm_run, and
//   where autograd records the call a C++ node (LinearFn) saving x2, W and weight as the
//   Function does; its backward runs the dgrad, the wgrad (in weight's dtype where the C++ has
//   that instance) and the bias's fp32 column sum where Linear.backward's route would give
//   EAGER, and otherwise calls Linear.backward itself on the saved state (fused accumulation,
//   create_graph=True, FORCE_CUSTOM_OP, dispatch modes, functorch, a subclass dy). dtype None:
//   linear_dtype's, computed here. NotImplemented, before any launch, for tuning, no
//   bfloat16 / float16 compute dtype, shapes the Python checks reject and operands TMA cannot
//   address. Taken unless QUACK_CPP_EAGER_LINEAR=0, QUACK_CPP_EAGER_GEMM=0 or
//   QUACK_CPP_EAGER=0 (linear_op.eager).
//
// Why: the Python fast path's own work (the route, tensor tuples, allocation calls, the Python
// autograd.Function) is per call several times torch's F.layer_norm host path; here it is C++
// (docs/architecture.md, "Host time per eager call").
//
// Errors: quack::InvalidArgument (std::invalid_argument) -> ValueError, as through _C.
#include <torch/extension.h>

#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/frontend/tracer.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "quack/quack.h"

namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Launches skipped (tests and the CPU host-time bench: allocation and autograd only).
bool g_stub_launches = false;

// Keeps a Python object for the process in `slot` (the callbacks and module dicts the Python
// modules set at import), releasing the one it replaces.
void keep_object(PyObject*& slot, py::object obj) {
  Py_XDECREF(slot);
  slot = obj.release().ptr();
}

quack::DType dtype_of(at::ScalarType s, const char* fn, const char* name) {
  switch (s) {
    case at::kFloat: return quack::DType::kFloat32;
    case at::kHalf: return quack::DType::kFloat16;
    case at::kBFloat16: return quack::DType::kBFloat16;
    case at::kInt: return quack::DType::kInt32;
    case at::kLong: return quack::DType::kInt64;
    default: {
      const std::string dt = s == at::kDouble ? "float64" : s == at::kShort ? "int16"
                             : s == at::kChar ? "int8" : s == at::kByte ? "uint8"
                             : s == at::kBool ? "bool" : std::string(c10::toString(s));
      throw quack::InvalidArgument(std::string(fn) + ": " + name + " has dtype " + dt +
                                   ", expected float32, float16 or bfloat16");
    }
  }
}

quack::DType dtype_of(const Tensor& t, const char* fn, const char* name) {
  return dtype_of(t.scalar_type(), fn, name);
}

quack::TensorRef ref(const Tensor& t, const char* fn, const char* name) {
  quack::TensorRef r;
  if (!t.defined()) return r;
  const int64_t nd = t.dim();
  if (nd < 1 || nd > quack::TensorRef::kMaxDims)
    throw quack::InvalidArgument(std::string(fn) + ": " + name + " has " + std::to_string(nd) +
                                 " dimensions, expected 1 to " +
                                 std::to_string(quack::TensorRef::kMaxDims));
  r.data = t.data_ptr();
  r.dtype = dtype_of(t, fn, name);
  r.ndim = static_cast<int>(nd);
  for (int64_t i = 0; i < nd; ++i) {
    r.shape[i] = t.size(i);
    r.stride[i] = t.stride(i);
  }
  r.device = t.is_cuda() ? t.get_device() : -1;
  return r;
}

Tensor opt(const std::optional<Tensor>& t) { return t.has_value() ? *t : Tensor(); }

// A tensor for Python: None where it is undefined (an absent output, a tensor not saved).
py::object py_or_none(const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

cudaStream_t stream_of(const Tensor& x) {
  return x.is_cuda() ? c10::cuda::getCurrentCUDAStream(x.get_device()).stream() : nullptr;
}

void check_rows(const Tensor& x, const char* fn) {
  if (x.dim() != 2)
    throw quack::InvalidArgument(std::string(fn) + ": x has " + std::to_string(x.dim()) +
                                 " dimensions " + c10::str(x.sizes()) + ", expected 2 (M, N)");
}

// The outputs and common arguments of a norm backward (RmsNormBwdArgs, LayerNormBwdArgs): dx,
// dresidual (when its dtype is given), dweight (need_dweight), dbias (when its dtype is given),
// allocated with at::empty and referenced in a with x, weight, dout, rstd and dresidual_out.
template <class Args>
std::tuple<Tensor, Tensor, Tensor, Tensor> norm_bwd_outputs(
    Args& a, const char* fn, const Tensor& x, const Tensor& weight, const Tensor& dout,
    const Tensor& rstd, const Tensor& dresidual_out, double weight_offset,
    at::ScalarType dx_dtype, std::optional<at::ScalarType> dresidual_dtype, bool need_dweight,
    std::optional<at::ScalarType> dbias_dtype) {
  check_rows(x, fn);
  const int64_t M = x.size(0), N = x.size(1);
  if (need_dweight && !weight.defined())
    throw quack::InvalidArgument(std::string(fn) +
                                 ": need_dweight is True but weight is None, expected a weight");
  Tensor dx = at::empty({M, N}, x.options().dtype(dx_dtype));
  Tensor dres = dresidual_dtype.has_value()
                    ? at::empty({M, N}, x.options().dtype(*dresidual_dtype))
                    : Tensor();
  Tensor dw = need_dweight ? at::empty({N}, x.options().dtype(weight.scalar_type())) : Tensor();
  Tensor db = dbias_dtype.has_value() ? at::empty({N}, x.options().dtype(*dbias_dtype))
                                      : Tensor();
  a.x = ref(x, fn, "x");
  a.weight = ref(weight, fn, "weight");
  a.dout = ref(dout, fn, "dout");
  a.rstd = ref(rstd, fn, "rstd");
  a.dresidual_out = ref(dresidual_out, fn, "dresidual_out");
  a.dx = ref(dx, fn, "dx");
  a.dresidual = ref(dres, fn, "dresidual");
  a.dweight = ref(dw, fn, "dweight");
  a.dbias = ref(db, fn, "dbias");
  a.weight_offset = static_cast<float>(weight_offset);
  return {dx, dres, dw, db};
}

// Launches a norm backward with its workspace from torch's caching allocator (none when stubbed).
template <class Args, class WsFn, class RunFn>
void launch_norm_bwd(const Args& a, const Tensor& x, WsFn ws_size, RunFn run) {
  if (g_stub_launches) return;
  const size_t ws_bytes = ws_size(a);
  Tensor ws = at::empty({static_cast<int64_t>(ws_bytes)}, x.options().dtype(at::kByte));
  run(a, ws.data_ptr(), ws_bytes, stream_of(x));
}

// quack_cpp.ops.RMSNormFwd.outputs + launch.
std::tuple<Tensor, Tensor, Tensor> fwd_impl(const Tensor& x, const Tensor& weight,
                                            const Tensor& bias, const Tensor& residual,
                                            double eps, double weight_offset,
                                            at::ScalarType out_dtype,
                                            std::optional<at::ScalarType> residual_out_dtype,
                                            bool store_rstd) {
  const char* fn = "rmsnorm_fwd";
  check_rows(x, fn);
  const int64_t M = x.size(0), N = x.size(1);
  Tensor out = at::empty({M, N}, x.options().dtype(out_dtype));
  Tensor residual_out = residual_out_dtype.has_value()
                            ? at::empty({M, N}, x.options().dtype(*residual_out_dtype))
                            : Tensor();
  Tensor rstd = store_rstd ? at::empty({M}, x.options().dtype(at::kFloat)) : Tensor();
  quack::RmsNormFwdArgs a;
  a.x = ref(x, fn, "x");
  a.weight = ref(weight, fn, "weight");
  a.bias = ref(bias, fn, "bias");
  a.residual = ref(residual, fn, "residual");
  a.out = ref(out, fn, "out");
  a.residual_out = ref(residual_out, fn, "residual_out");
  a.rstd = ref(rstd, fn, "rstd");
  a.eps = static_cast<float>(eps);
  a.weight_offset = static_cast<float>(weight_offset);
  if (!g_stub_launches) quack::rmsnorm_fwd(a, stream_of(x));
  return {out, residual_out, rstd};
}

// quack_cpp.ops.RMSNormBwd.outputs + launch.
std::tuple<Tensor, Tensor, Tensor, Tensor> bwd_impl(
    const Tensor& x, const Tensor& weight, const Tensor& dout, const Tensor& rstd,
    const Tensor& dresidual_out, double weight_offset, at::ScalarType dx_dtype,
    std::optional<at::ScalarType> dresidual_dtype, bool need_dweight,
    std::optional<at::ScalarType> dbias_dtype) {
  quack::RmsNormBwdArgs a;
  auto outs = norm_bwd_outputs(a, "rmsnorm_bwd", x, weight, dout, rstd, dresidual_out,
                               weight_offset, dx_dtype, dresidual_dtype, need_dweight,
                               dbias_dtype);
  launch_norm_bwd(a, x, quack::rmsnorm_bwd_workspace_size, quack::rmsnorm_bwd);
  return outs;
}

// The custom op quack_cpp::rmsnorm_bwd through the dispatcher (create_graph=True).
std::tuple<Tensor, Tensor, Tensor, Tensor> bwd_custom_op(
    const Tensor& x, const Tensor& weight, const Tensor& dout, const Tensor& rstd,
    const Tensor& dresidual_out, double weight_offset, at::ScalarType dx_dtype,
    std::optional<at::ScalarType> dresidual_dtype, bool need_dweight,
    std::optional<at::ScalarType> dbias_dtype) {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("quack_cpp::rmsnorm_bwd", "")
          .typed<std::tuple<Tensor, Tensor, Tensor, Tensor>(
              const Tensor&, const std::optional<Tensor>&, const Tensor&, const Tensor&,
              const std::optional<Tensor>&, double, at::ScalarType,
              std::optional<at::ScalarType>, bool, std::optional<at::ScalarType>)>();
  auto o = [](const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; };
  return op.call(x, o(weight), dout, rstd, o(dresidual_out), weight_offset, dx_dtype,
                 dresidual_dtype, need_dweight, dbias_dtype);
}

// Row ops of one input x (M, N) -> one output y (M, N) whose backward reads y and dy:
// softmax, log_softmax. The quack functions, their names, and the backward custom op.
struct RowUnaryOps {
  void (*fwd)(const quack::SoftmaxFwdArgs&, cudaStream_t);
  void (*bwd)(const quack::SoftmaxBwdArgs&, cudaStream_t);
  const char* fwd_name;
  const char* bwd_name;
  const char* bwd_op;  // "quack_cpp::<op>_bwd" (y, dy, dx_dtype) -> dx
};

// quack_cpp.softmax_ops' Fwd.outputs + launch.
Tensor unary_fwd_impl(const Tensor& x, at::ScalarType out_dtype, const RowUnaryOps& o) {
  check_rows(x, o.fwd_name);
  Tensor y = at::empty({x.size(0), x.size(1)}, x.options().dtype(out_dtype));
  quack::SoftmaxFwdArgs a;
  a.x = ref(x, o.fwd_name, "x");
  a.out = ref(y, o.fwd_name, "out");
  if (!g_stub_launches) o.fwd(a, stream_of(x));
  return y;
}

// quack_cpp.softmax_ops' Bwd.outputs + launch.
Tensor unary_bwd_impl(const Tensor& y, const Tensor& dy, at::ScalarType dx_dtype,
                      const RowUnaryOps& o) {
  check_rows(y, o.bwd_name);
  Tensor dx = at::empty({y.size(0), y.size(1)}, y.options().dtype(dx_dtype));
  quack::SoftmaxBwdArgs a;
  a.y = ref(y, o.bwd_name, "y");
  a.dy = ref(dy, o.bwd_name, "dy");
  a.dx = ref(dx, o.bwd_name, "dx");
  if (!g_stub_launches) o.bwd(a, stream_of(y));
  return dx;
}

}  // namespace

namespace quack_torch {

// The C++ autograd Function of a RowUnaryOps op (Derived::ops()): the description's
// setup_context (save y, x's dtype) and backward (dx = <op>_bwd(y, dy, x's dtype)).
template <class Derived>
struct RowUnaryFn : public torch::autograd::Function<Derived> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, at::ScalarType out_dtype) {
    Tensor y = unary_fwd_impl(x, out_dtype, Derived::ops());
    ctx->saved_data["x_dtype"] = x.scalar_type();
    ctx->save_for_backward({y});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const Tensor y = ctx->get_saved_variables()[0];
    const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toScalarType());
    const RowUnaryOps& o = Derived::ops();
    Tensor dx;
    if (at::GradMode::is_enabled()) {  // create_graph: the custom op through the dispatcher
      static auto op = c10::Dispatcher::singleton()
                           .findSchemaOrThrow(o.bwd_op, "")
                           .typed<Tensor(const Tensor&, const Tensor&, at::ScalarType)>();
      dx = op.call(y, grads[0], x_dtype);
    } else {
      dx = unary_bwd_impl(y, grads[0], x_dtype, o);
    }
    return {dx, Tensor()};
  }
};

// Node names: torch::autograd::CppNode<quack_torch::SoftmaxFn> (and LogSoftmaxFn).
struct SoftmaxFn : public RowUnaryFn<SoftmaxFn> {
  static const RowUnaryOps& ops() {
    static const RowUnaryOps o{&quack::softmax_fwd, &quack::softmax_bwd, "softmax_fwd",
                               "softmax_bwd", "quack_cpp::softmax_bwd"};
    return o;
  }
};

struct LogSoftmaxFn : public RowUnaryFn<LogSoftmaxFn> {
  static const RowUnaryOps& ops() {
    static const RowUnaryOps o{&quack::log_softmax_fwd, &quack::log_softmax_bwd,
                               "log_softmax_fwd", "log_softmax_bwd", "quack_cpp::log_softmax_bwd"};
    return o;
  }
};

// What a norm forward (RMSNorm's, LayerNorm's setup_context) leaves for its backward: the edge of
// each present tensor input (absent optionals have none: needs_input_grad takes the edge) and
// the dtypes and flags the backward reads.
void save_norm_ctx(AutogradContext* ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                   const Tensor& r, double weight_offset, at::ScalarType out_dtype,
                   std::optional<at::ScalarType> residual_out_dtype, bool store_stats) {
  ctx->set_materialize_grads(false);
  int64_t e = 1;
  auto& d = ctx->saved_data;
  d["ew"] = w.defined() ? e++ : int64_t{-1};
  d["eb"] = b.defined() ? e++ : int64_t{-1};
  d["er"] = r.defined() ? e++ : int64_t{-1};
  d["x_dtype"] = x.scalar_type();
  d["out_dtype"] = out_dtype;
  d["weight_offset"] = weight_offset;
  d["res_dtype"] = r.defined() ? c10::IValue(r.scalar_type()) : c10::IValue();
  d["bias_dtype"] = b.defined() ? c10::IValue(b.scalar_type()) : c10::IValue();
  d["res_out_stored"] = residual_out_dtype.has_value();
  d["can_backward"] = store_stats && (!r.defined() || residual_out_dtype.has_value());
}

// A norm backward's reading of its context and grads (the description's backward): which
// gradients are needed, dout (a stride-0 zero view when only residual_out was used), and the
// arguments of <norm>_bwd after the statistics.
struct NormGrads {
  bool need_x, need_w, need_b, need_r;
  bool separate_dres;  // d(residual) = dh: a separate output only where its dtype differs
  at::ScalarType x_dtype;
  std::optional<at::ScalarType> dres_dtype, dbias_dtype;
  Tensor dout, dres_out;
  double weight_offset;

  NormGrads(AutogradContext* ctx, const variable_list& grads, const Tensor& h,
            const char* no_backward) {
    auto& d = ctx->saved_data;
    if (!d["can_backward"].toBool()) throw std::runtime_error(no_backward);
    const int64_t ew = d["ew"].toInt(), eb = d["eb"].toInt(), er = d["er"].toInt();
    need_x = ctx->needs_input_grad(0);
    need_w = ew >= 0 && ctx->needs_input_grad(ew);
    need_b = eb >= 0 && ctx->needs_input_grad(eb);
    need_r = er >= 0 && ctx->needs_input_grad(er);
    x_dtype = static_cast<at::ScalarType>(d["x_dtype"].toScalarType());
    weight_offset = d["weight_offset"].toDouble();
    std::optional<at::ScalarType> res_dtype;
    if (!d["res_dtype"].isNone()) res_dtype = d["res_dtype"].toScalarType();
    if (need_b && !d["bias_dtype"].isNone()) dbias_dtype = d["bias_dtype"].toScalarType();
    separate_dres = need_r && res_dtype != x_dtype;
    if (separate_dres) dres_dtype = res_dtype;
    dout = grads[0];
    dres_out = d["res_out_stored"].toBool() ? grads[1] : Tensor();  // outputs: the forward's
    if (!dout.defined()) {
      const auto out_dtype = static_cast<at::ScalarType>(d["out_dtype"].toScalarType());
      dout = at::zeros({}, h.options().dtype(out_dtype)).expand(h.sizes());
    }
  }

  // The Function's gradients (x, weight, bias, residual, then the non-tensor arguments).
  variable_list assemble(const Tensor& dx, const Tensor& dres, const Tensor& dw,
                         const Tensor& db) const {
    return {need_x ? dx : Tensor(), need_w ? dw : Tensor(), need_b ? db : Tensor(),
            need_r ? (separate_dres ? dres : dx) : Tensor(), Tensor(), Tensor(), Tensor(),
            Tensor(), Tensor()};
  }
};


// quack_cpp.ops.RMSNormFwd.setup_context + backward as a C++ autograd Function (its node's
// name: torch::autograd::CppNode<quack_torch::RMSNormFn>).
struct RMSNormFn : public torch::autograd::Function<RMSNormFn> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x,
                               const std::optional<Tensor>& weight,
                               const std::optional<Tensor>& bias,
                               const std::optional<Tensor>& residual, double eps,
                               double weight_offset, at::ScalarType out_dtype,
                               std::optional<at::ScalarType> residual_out_dtype,
                               bool store_rstd) {
    const Tensor w = opt(weight), b = opt(bias), r = opt(residual);
    auto [out, residual_out, rstd] =
        fwd_impl(x, w, b, r, eps, weight_offset, out_dtype, residual_out_dtype, store_rstd);
    save_norm_ctx(ctx, x, w, b, r, weight_offset, out_dtype, residual_out_dtype, store_rstd);
    ctx->save_for_backward({r.defined() ? residual_out : x, w, rstd});
    // Only the present outputs (an autograd output must be defined): out, then residual_out
    // when stored, then rstd when stored (a statistic, not a function of the inputs to
    // differentiate, as LayerNorm's and the Python path's norm_setup_context).
    variable_list outs{out};
    if (residual_out.defined()) outs.push_back(residual_out);
    if (rstd.defined()) {
      outs.push_back(rstd);
      ctx->mark_non_differentiable({rstd});
    }
    return outs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const Tensor& h = saved[0];
    const NormGrads g(ctx, grads, h,
                      "quack_cpp::rmsnorm_fwd backward: the forward ran with store_rstd=False, or "
                      "with a residual but residual_out_dtype=None; call it with store_rstd=True "
                      "and a residual_out_dtype (quack_cpp.rmsnorm does this when a gradient is "
                      "needed)");
    const Tensor& weight = saved[1];
    auto bwd = at::GradMode::is_enabled() ? bwd_custom_op : bwd_impl;
    auto [dx, dres, dw, db] = bwd(h, weight, g.dout, saved[2], g.dres_out, g.weight_offset,
                                  g.x_dtype, g.dres_dtype, g.need_w && weight.defined(),
                                  g.dbias_dtype);
    return g.assemble(dx, dres, dw, db);
  }
};

}  // namespace quack_torch

namespace {

using quack_torch::RMSNormFn;

// The entry point of a RowUnaryFn op: its node only where autograd records the call.
template <class Fn>
Tensor row_unary(const Tensor& x, at::ScalarType out_dtype) {
  if (at::GradMode::is_enabled() && x.requires_grad()) return Fn::apply(x, out_dtype);
  py::gil_scoped_release no_gil;
  return unary_fwd_impl(x, out_dtype, Fn::ops());
}

// The entry point: the autograd node only where autograd records the call.
py::tuple rmsnorm_fwd(const Tensor& x, const std::optional<Tensor>& weight,
                      const std::optional<Tensor>& bias, const std::optional<Tensor>& residual,
                      double eps, double weight_offset, at::ScalarType out_dtype,
                      std::optional<at::ScalarType> residual_out_dtype, bool store_rstd) {
  variable_list outs;
  const auto req = [](const std::optional<Tensor>& t) {
    return t.has_value() && t->defined() && t->requires_grad();
  };
  const bool record = at::GradMode::is_enabled() &&
                      (x.requires_grad() || req(weight) || req(bias) || req(residual));
  if (record) {
    outs = RMSNormFn::apply(x, weight, bias, residual, eps, weight_offset, out_dtype,
                            residual_out_dtype, store_rstd);
    size_t i = 1;  // the present outputs in order (RMSNormFn::forward)
    Tensor ro = residual_out_dtype.has_value() ? outs[i++] : Tensor();
    Tensor rs = store_rstd ? outs[i++] : Tensor();
    outs = {outs[0], ro, rs};
  } else {
    py::gil_scoped_release no_gil;
    auto [o, ro, rs] = fwd_impl(x, opt(weight), opt(bias), opt(residual), eps, weight_offset,
                                out_dtype, residual_out_dtype, store_rstd);
    outs = {o, ro, rs};
  }
  // Undefined tensors become None.
  return py::make_tuple(outs[0], outs[1].defined() ? py::cast(outs[1]) : py::none(),
                        outs[2].defined() ? py::cast(outs[2]) : py::none());
}

}  // namespace

// --------------------------------------------------------------------------------------------
// LayerNorm: quack_cpp.layernorm_ops' LayerNormFwd / LayerNormBwd on the eager fast path
// --------------------------------------------------------------------------------------------

namespace {

// quack_cpp.layernorm_ops.LayerNormFwd.outputs + launch.
std::tuple<Tensor, Tensor, Tensor, Tensor> ln_fwd_impl(
    const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual,
    double eps, double weight_offset, at::ScalarType out_dtype,
    std::optional<at::ScalarType> residual_out_dtype, bool store_stats) {
  const char* fn = "layernorm_fwd";
  check_rows(x, fn);
  const int64_t M = x.size(0), N = x.size(1);
  Tensor out = at::empty({M, N}, x.options().dtype(out_dtype));
  Tensor residual_out = residual_out_dtype.has_value()
                            ? at::empty({M, N}, x.options().dtype(*residual_out_dtype))
                            : Tensor();
  Tensor mean, rstd;
  if (store_stats) {
    mean = at::empty({M}, x.options().dtype(at::kFloat));
    rstd = at::empty({M}, x.options().dtype(at::kFloat));
  }
  quack::LayerNormFwdArgs a;
  a.x = ref(x, fn, "x");
  a.weight = ref(weight, fn, "weight");
  a.bias = ref(bias, fn, "bias");
  a.residual = ref(residual, fn, "residual");
  a.out = ref(out, fn, "out");
  a.residual_out = ref(residual_out, fn, "residual_out");
  a.mean = ref(mean, fn, "mean");
  a.rstd = ref(rstd, fn, "rstd");
  a.eps = static_cast<float>(eps);
  a.weight_offset = static_cast<float>(weight_offset);
  if (!g_stub_launches) quack::layernorm_fwd(a, stream_of(x));
  return {out, residual_out, mean, rstd};
}

// quack_cpp.layernorm_ops.LayerNormBwd.outputs + launch.
std::tuple<Tensor, Tensor, Tensor, Tensor> ln_bwd_impl(
    const Tensor& x, const Tensor& weight, const Tensor& dout, const Tensor& mean,
    const Tensor& rstd, const Tensor& dresidual_out, double weight_offset,
    at::ScalarType dx_dtype, std::optional<at::ScalarType> dresidual_dtype, bool need_dweight,
    std::optional<at::ScalarType> dbias_dtype) {
  quack::LayerNormBwdArgs a;
  auto outs = norm_bwd_outputs(a, "layernorm_bwd", x, weight, dout, rstd, dresidual_out,
                               weight_offset, dx_dtype, dresidual_dtype, need_dweight,
                               dbias_dtype);
  a.mean = ref(mean, "layernorm_bwd", "mean");
  launch_norm_bwd(a, x, quack::layernorm_bwd_workspace_size, quack::layernorm_bwd);
  return outs;
}

// The custom op quack_cpp::layernorm_bwd through the dispatcher (create_graph=True).
std::tuple<Tensor, Tensor, Tensor, Tensor> ln_bwd_custom_op(
    const Tensor& x, const Tensor& weight, const Tensor& dout, const Tensor& mean,
    const Tensor& rstd, const Tensor& dresidual_out, double weight_offset,
    at::ScalarType dx_dtype, std::optional<at::ScalarType> dresidual_dtype, bool need_dweight,
    std::optional<at::ScalarType> dbias_dtype) {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("quack_cpp::layernorm_bwd", "")
          .typed<std::tuple<Tensor, Tensor, Tensor, Tensor>(
              const Tensor&, const std::optional<Tensor>&, const Tensor&, const Tensor&,
              const Tensor&, const std::optional<Tensor>&, double, at::ScalarType,
              std::optional<at::ScalarType>, bool, std::optional<at::ScalarType>)>();
  auto o = [](const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; };
  return op.call(x, o(weight), dout, mean, rstd, o(dresidual_out), weight_offset, dx_dtype,
                 dresidual_dtype, need_dweight, dbias_dtype);
}

}  // namespace

namespace quack_torch {

// quack_cpp.layernorm_ops.LayerNormFwd.setup_context + backward as a C++ autograd Function
// (its node's name: torch::autograd::CppNode<quack_torch::LayerNormFn>). Saves h (residual_out
// with a residual, else x), weight, mean and rstd; mean and rstd are non-differentiable
// outputs. Backward (quack::layernorm_bwd):
//   xhat = (h - mean) * rstd;  g = dout * (weight + weight_offset)
//   dh = rstd * (g - mean_j g_j - xhat * mean_j(g_j * xhat_j)) + dresidual_out
//   dx = dresidual = dh;  dweight = sum_rows dout * xhat;  dbias = sum_rows dout
struct LayerNormFn : public torch::autograd::Function<LayerNormFn> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x,
                               const std::optional<Tensor>& weight,
                               const std::optional<Tensor>& bias,
                               const std::optional<Tensor>& residual, double eps,
                               double weight_offset, at::ScalarType out_dtype,
                               std::optional<at::ScalarType> residual_out_dtype,
                               bool store_stats) {
    const Tensor w = opt(weight), b = opt(bias), r = opt(residual);
    auto [out, residual_out, mean, rstd] = ln_fwd_impl(x, w, b, r, eps, weight_offset, out_dtype,
                                                       residual_out_dtype, store_stats);
    save_norm_ctx(ctx, x, w, b, r, weight_offset, out_dtype, residual_out_dtype, store_stats);
    ctx->save_for_backward({r.defined() ? residual_out : x, w, mean, rstd});
    // Only the present outputs: out, residual_out when stored, mean and rstd when stored
    // (statistics, not functions of the inputs to differentiate, as QuACK's and torch's).
    variable_list outs{out};
    if (residual_out.defined()) outs.push_back(residual_out);
    if (store_stats) {
      outs.push_back(mean);
      outs.push_back(rstd);
      ctx->mark_non_differentiable({mean, rstd});
    }
    return outs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const Tensor& h = saved[0];
    const NormGrads g(ctx, grads, h,
                      "quack_cpp::layernorm_fwd backward: the forward ran with store_stats=False, "
                      "or with a residual but residual_out_dtype=None; call it with "
                      "store_stats=True and a residual_out_dtype (quack_cpp.layernorm does this "
                      "when a gradient is needed)");
    const Tensor& weight = saved[1];
    auto bwd = at::GradMode::is_enabled() ? ln_bwd_custom_op : ln_bwd_impl;
    auto [dx, dres, dw, db] = bwd(h, weight, g.dout, saved[2], saved[3], g.dres_out,
                                  g.weight_offset, g.x_dtype, g.dres_dtype,
                                  g.need_w && weight.defined(), g.dbias_dtype);
    return g.assemble(dx, dres, dw, db);
  }
};

}  // namespace quack_torch

namespace {

// The entry point: the autograd node only where autograd records the call; absent outputs
// are None.
py::tuple layernorm_fwd(const Tensor& x, const std::optional<Tensor>& weight,
                        const std::optional<Tensor>& bias, const std::optional<Tensor>& residual,
                        double eps, double weight_offset, at::ScalarType out_dtype,
                        std::optional<at::ScalarType> residual_out_dtype, bool store_stats) {
  Tensor o, ro, mn, rs;
  const auto req = [](const std::optional<Tensor>& t) {
    return t.has_value() && t->defined() && t->requires_grad();
  };
  const bool record = at::GradMode::is_enabled() &&
                      (x.requires_grad() || req(weight) || req(bias) || req(residual));
  if (record) {
    variable_list outs = quack_torch::LayerNormFn::apply(
        x, weight, bias, residual, eps, weight_offset, out_dtype, residual_out_dtype,
        store_stats);
    size_t i = 1;  // the present outputs in order (LayerNormFn::forward)
    o = outs[0];
    if (residual_out_dtype.has_value()) ro = outs[i++];
    if (store_stats) {
      mn = outs[i++];
      rs = outs[i++];
    }
  } else {
    py::gil_scoped_release no_gil;
    std::tie(o, ro, mn, rs) = ln_fwd_impl(x, opt(weight), opt(bias), opt(residual), eps,
                                          weight_offset, out_dtype, residual_out_dtype,
                                          store_stats);
  }
  return py::make_tuple(o, py_or_none(ro), py_or_none(mn), py_or_none(rs));
}

}  // namespace

// --------------------------------------------------------------------------------------------
// Cross-entropy: quack_cpp.cross_entropy_ops' CrossEntropyFwd (outputs, launch, setup_context,
// backward) and the backward ops it calls (cross_entropy_train_bwd, cross_entropy_scale_grad,
// cross_entropy_bwd) on the eager fast path
// --------------------------------------------------------------------------------------------

namespace {

// torch.autograd.graph.increment_version: a write the autograd engine cannot see (inference
// tensors have no version counter: left alone, as torch's).
void bump_version(const Tensor& t) {
  if (!t.is_inference()) torch::autograd::impl::bump_version(t);
}

// A shape as Python prints tuple(t.shape): "(4, 64)", "(4,)", "()".
std::string py_shape(at::IntArrayRef s) {
  std::string o = "(";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + (s.size() == 1 ? ",)" : ")");
}

// A one-element tensor (0-d or (1,)) as a (1) TensorRef (the Python path's scalar_arg). More
// elements are refused: the C++ reads element 0 only, and would ignore the rest silently.
quack::TensorRef scalar_ref(const Tensor& t, const char* fn, const char* name) {
  if (t.numel() != 1)
    throw quack::InvalidArgument(std::string(fn) + ": " + name + " has shape " +
                                 py_shape(t.sizes()) + " (" + std::to_string(t.numel()) +
                                 " elements), expected one element (0-d or (1,))");
  quack::TensorRef r;
  r.data = t.data_ptr();
  r.dtype = dtype_of(t, fn, name);
  r.ndim = 1;
  r.shape[0] = 1;
  r.stride[0] = 1;
  r.device = t.is_cuda() ? t.get_device() : -1;
  return r;
}

// A loss-shaped tensor: (M) as it is, a 0-d scalar as (1) (the Python path's _loss_arg).
quack::TensorRef loss_ref(const Tensor& t, const char* fn, const char* name) {
  if (t.defined() && t.dim() == 0) return scalar_ref(t, fn, name);
  return ref(t, fn, name);
}

quack::Reduction ce_reduction(const std::string& r, const char* fn) {
  if (r == "none") return quack::Reduction::kNone;
  if (r == "sum") return quack::Reduction::kSum;
  if (r == "mean") return quack::Reduction::kMean;
  throw quack::InvalidArgument(std::string(fn) + ": reduction is '" + r +
                               "', expected 'none', 'sum' or 'mean'");
}

// A Python exception raised under a backward (Python code a node calls: Linear.backward, the
// stream-K workspace's owner, cross-entropy's predict word) rethrown as torch's python_error,
// so that the caller of backward sees that exception, type and message, not the engine's
// RuntimeError. Under the GIL.
[[noreturn]] void rethrow_python(py::error_already_set& e) {
  e.restore();
  python_error err;
  err.persist();
  throw std::move(err);
}

// quack_cpp.cross_entropy_ops.dx_predict_word, set at import (_ce_set_predict_word): the Python
// function owns the per-device word; its tensors are cached here (the same tensors, so a test's
// fill_ of the word is seen by both paths). A miss (first call on a device, or a call inside a
// CUDA-graph capture before the word exists, where it returns None) calls the Python function.
// The cache has a fixed size (never reallocated: a backward on an autograd device thread
// reads it without the GIL while a forward may fill another slot) and is never destroyed (no
// tensor freed after the allocator at exit); slot 0 is the CPU (tests with stubbed launches).
constexpr size_t kPredictSlots = 257;              // device index + 1
PyObject* g_predict_word_fn = nullptr;             // a strong reference, never released
std::vector<Tensor>* g_predict_words = new std::vector<Tensor>(kPredictSlots);

Tensor predict_word(const Tensor& like) {
  const size_t slot = like.is_cuda() ? static_cast<size_t>(like.get_device()) + 1 : 0;
  if (slot < kPredictSlots && (*g_predict_words)[slot].defined())
    return (*g_predict_words)[slot];
  if (g_predict_word_fn == nullptr) return Tensor();
  py::gil_scoped_acquire gil;
  py::object w = py::reinterpret_borrow<py::object>(g_predict_word_fn)(like.device());
  if (w.is_none()) return Tensor();
  Tensor t = w.cast<Tensor>();
  if (slot < kPredictSlots) (*g_predict_words)[slot] = t;
  return t;
}

// The cross-entropy options every Args struct of quack/cross_entropy.h carries, from the
// custom ops' Python types.
template <class Args>
void set_ce_options(Args& a, int64_t ignore_index, double label_smoothing, double z_loss,
                    double logit_softcap) {
  a.ignore_index = ignore_index;
  a.label_smoothing = static_cast<float>(label_smoothing);
  a.z_loss_scale = static_cast<float>(z_loss);
  a.logit_softcap = static_cast<float>(logit_softcap);
}

// The outputs of CrossEntropyFwd (None: undefined) in its order.
struct CeOuts {
  Tensor loss, lse, z, dx, state;
};

// quack_cpp.cross_entropy_ops.CrossEntropyFwd.outputs + launch, with x given and no
// lse_partial / target_logit (the entry point sends those calls to the Python fast path).
CeOuts ce_fwd_impl(const Tensor& x, const Tensor& target, const Tensor& weight,
                   int64_t ignore_index, const std::string& reduction, double label_smoothing,
                   double z_loss, double logit_softcap, int64_t num_classes, bool want_lse,
                   bool want_z_loss, bool want_dx, bool predict_dx, bool dx_into_x,
                   const Tensor& word) {
  const char* fn = "cross_entropy_fwd";
  if (target.dim() != 1)
    throw quack::InvalidArgument(std::string(fn) + ": target has shape " +
                                 py_shape(target.sizes()) + ", expected (M,)");
  const int64_t M = target.size(0);
  if (x.dim() != 2 || x.size(0) != M)
    throw quack::InvalidArgument(std::string(fn) + ": x has shape " + py_shape(x.sizes()) +
                                 ", expected (M, V) with M = " + std::to_string(M) +
                                 " (target's length)");
  const quack::Reduction red = ce_reduction(reduction, fn);
  const bool none = red == quack::Reduction::kNone;
  if (predict_dx && !(want_dx && want_lse && !none))
    throw quack::InvalidArgument(std::string(fn) +
                                 ": predict_dx without want_dx, want_lse and reduction 'sum' or "
                                 "'mean', expected all three");
  const auto f32 = target.options().dtype(at::kFloat);
  CeOuts o;
  o.loss = none ? at::empty({M}, f32) : at::empty({}, f32);
  if (want_lse) o.lse = at::empty({M}, f32);
  if (want_z_loss) o.z = none ? at::empty({M}, f32) : at::empty({}, f32);
  if (want_dx && !dx_into_x) o.dx = at::empty({M, x.size(1)}, x.options());
  if (predict_dx) o.state = at::empty({quack::kCrossEntropyDxStateFloats}, f32);
  const Tensor& dx = dx_into_x && want_dx ? x : o.dx;
  quack::CrossEntropyFwdArgs a;
  a.target = ref(target, fn, "target");
  a.weight = ref(weight, fn, "weight");
  a.reduction = red;
  set_ce_options(a, ignore_index, label_smoothing, z_loss, logit_softcap);
  const size_t ws_bytes = quack::cross_entropy_fwd_workspace_size(a);
  Tensor ws = ws_bytes ? at::empty({static_cast<int64_t>(ws_bytes)},
                                   target.options().dtype(at::kByte))
                       : Tensor();
  a.x = ref(x, fn, "x");
  a.loss = loss_ref(o.loss, fn, "loss");
  a.lse = ref(o.lse, fn, "lse");
  a.z_loss = loss_ref(o.z, fn, "z_loss");
  a.dx = ref(dx, fn, "dx");
  a.dx_state = ref(o.state, fn, "dx_state");
  a.dx_predict = ref(predict_dx ? word : Tensor(), fn, "dx_predict");
  a.num_classes = num_classes;
  a.workspace = ws.defined() ? ws.data_ptr() : nullptr;
  a.workspace_bytes = ws_bytes;
  if (!g_stub_launches) quack::cross_entropy_fwd(a, stream_of(target));
  if (dx_into_x && want_dx) bump_version(x);
  return o;
}

// quack_cpp.cross_entropy_ops.CrossEntropyTrainBwd.impl: the gradient into dx itself (into_dx;
// returned) or a new contiguous tensor.
Tensor ce_train_bwd_impl(const Tensor& x, const Tensor& target, const Tensor& lse,
                         const Tensor& grad_output, const Tensor& dx, const Tensor& dx_state,
                         const Tensor& weight, int64_t ignore_index, double label_smoothing,
                         double z_loss, double logit_softcap, bool into_dx) {
  const char* fn = "cross_entropy_train_bwd";
  Tensor out = into_dx ? Tensor() : at::empty_like(dx, at::MemoryFormat::Contiguous);
  const Tensor word = predict_word(dx);
  quack::CrossEntropyTrainBwdArgs a;
  a.x = ref(x, fn, "x");
  a.target = ref(target, fn, "target");
  a.lse = ref(lse, fn, "lse");
  a.grad_output = scalar_ref(grad_output, fn, "grad_output");
  a.dx = ref(dx, fn, "dx");
  a.dx_state = ref(dx_state, fn, "dx_state");
  a.dx_out = ref(out, fn, "dx_out");
  a.dx_predict = ref(word, fn, "dx_predict");
  a.weight = ref(weight, fn, "weight");
  set_ce_options(a, ignore_index, label_smoothing, z_loss, logit_softcap);
  if (!g_stub_launches) quack::cross_entropy_train_bwd(a, stream_of(dx));
  if (into_dx) {
    bump_version(dx);
    return dx;
  }
  return out;
}

// quack_cpp.cross_entropy_ops.CrossEntropyScaleGrad.impl (dx *= grad_output unless it is 1, on
// the device), with the version bump of the registrar's eager path for a mutated argument.
void ce_scale_grad_impl(const Tensor& dx, const Tensor& grad_output) {
  const char* fn = "cross_entropy_scale_grad";
  bump_version(dx);
  quack::CrossEntropyScaleGradArgs a;
  a.dx = ref(dx, fn, "dx");
  a.grad_output = scalar_ref(grad_output, fn, "grad_output");
  if (!g_stub_launches) quack::cross_entropy_scale_grad(a, stream_of(dx));
}

// quack_cpp.cross_entropy_ops.CrossEntropyBwd.impl: dx from x and lse (into x's storage with
// dx_into_x: x returned, its version bumped).
Tensor ce_bwd_impl(const Tensor& x, const Tensor& target, const Tensor& lse, const Tensor& dloss,
                   const Tensor& weight, int64_t ignore_index, double label_smoothing,
                   double z_loss, double logit_softcap, bool dx_into_x) {
  const char* fn = "cross_entropy_bwd";
  if (x.dim() != 2)
    throw quack::InvalidArgument(std::string(fn) + ": x has " + std::to_string(x.dim()) +
                                 " dimensions " + py_shape(x.sizes()) + ", expected 2 (M, V)");
  Tensor dx = dx_into_x ? x : at::empty({x.size(0), x.size(1)}, x.options());
  quack::CrossEntropyBwdArgs a;
  a.x = ref(x, fn, "x");
  a.target = ref(target, fn, "target");
  a.lse = ref(lse, fn, "lse");
  a.dloss = loss_ref(dloss, fn, "dloss");
  a.dx = ref(dx, fn, "dx");
  a.weight = ref(weight, fn, "weight");
  set_ce_options(a, ignore_index, label_smoothing, z_loss, logit_softcap);
  if (!g_stub_launches) quack::cross_entropy_bwd(a, stream_of(x));
  if (dx_into_x) bump_version(x);
  return dx;
}

// _registrar.functional_context's global part: a torch dispatch mode, a jit trace or a
// functorch transform is active (a transform's dynamic layer includes its front-mode key in
// the thread's dispatch keys; torch.compile's compiled autograd is the C++ nodes' known limit).
bool functional_now() {
  return c10::impl::TorchDispatchModeTLS::stack_len() > 0 || torch::jit::tracer::isTracing() ||
         c10::impl::tls_is_dispatch_key_included(
             c10::DispatchKey::FuncTorchDynamicLayerFrontMode);
}

// A tensor subclass or functorch wrapper (_registrar.functional_context's per-tensor part).
bool wrapped(const Tensor& t) {
  const auto ks = t.key_set();
  return ks.has(c10::DispatchKey::Python) || ks.has(c10::DispatchKey::FuncTorchGradWrapper) ||
         ks.has(c10::DispatchKey::FuncTorchBatched);
}

bool functional_context(const Tensor& a, const Tensor& b) {
  return functional_now() || (a.defined() && wrapped(a)) || (b.defined() && wrapped(b));
}

// A dense CUDA tensor of a kernel dtype, no functorch wrapper or Python-key subclass
// (_registrar._is_plain_cuda but its type check). With launches stubbed (tests, CPU bench) CPU
// tensors count as CUDA ones.
bool kernel_operand(const Tensor& t) {
  const auto s = t.scalar_type();
  return (t.is_cuda() || (g_stub_launches && t.is_cpu())) && t.layout() == at::kStrided &&
         !t.is_nested() && (s == at::kFloat || s == at::kHalf || s == at::kBFloat16) &&
         !wrapped(t);
}

// Whether _registrar.route over these tensors (undefined: absent) gives anything but EAGER:
// a mode or transform active (functional_now), a tensor that is not operand_ok, or grad mode
// on with a tensor that requires grad.
bool routes_off_eager(std::initializer_list<const Tensor*> tensors,
                      bool (*operand_ok)(const Tensor&)) {
  if (functional_now()) return true;
  bool grad = false;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (!operand_ok(*t)) return true;
    grad = grad || t->requires_grad();
  }
  return grad && at::GradMode::is_enabled();
}

// _registrar.route for a backward op without a Function of its own (train_bwd, scale_grad,
// cross_entropy_bwd): true where it takes the custom op (a tensor that is not a
// kernel_operand, a mode or transform active, or grad mode on with a tensor that requires
// grad), false where it runs the op's impl.
bool bwd_takes_custom_op(std::initializer_list<const Tensor*> tensors) {
  return routes_off_eager(tensors, kernel_operand);
}

// A custom op quack_cpp::<name> through the dispatcher, boxed (its schema's SymInt and
// optional arguments from IValues), returning its single output (or nothing).
c10::IValue call_custom_op(const char* name, std::vector<c10::IValue> stack) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  op.callBoxed(&stack);
  return stack.empty() ? c10::IValue() : stack[0];
}

c10::IValue opt_iv(const Tensor& t) { return t.defined() ? c10::IValue(t) : c10::IValue(); }

}  // namespace

namespace quack_torch {

// quack_cpp.cross_entropy_ops.CrossEntropyFwd.setup_context + backward as a C++ autograd
// Function (node: torch::autograd::CppNode<quack_torch::CrossEntropyFn>). Inputs x, target,
// weight (the Python Function's tensor inputs but the absent lse_partial / target_logit).
// Modes, as the Python setup_context: "predict" (predict_dx: saves x, target, lse, weight, dx
// or x, state; backward cross_entropy_train_bwd), "dx" (want_dx alone: saves dx; backward
// dx * dloss where the graph is kept or traced, else the in-place rescale; create_graph
// raises), "lse" (saves x, target, lse, weight; backward cross_entropy_bwd with dloss as it
// is: 'none' and 'sum' only; the entry point sends 'mean' to the Python path).
struct CrossEntropyFn : public torch::autograd::Function<CrossEntropyFn> {
  static constexpr size_t kForwardArgs = 15;  // forward's arguments after ctx

  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& target,
                               const std::optional<Tensor>& weight, int64_t ignore_index,
                               const std::string& reduction, double label_smoothing,
                               double z_loss, double logit_softcap, int64_t num_classes,
                               bool want_lse, bool want_z_loss, bool want_dx, bool predict_dx,
                               bool dx_into_x, const std::optional<Tensor>& word) {
    const Tensor w = opt(weight);
    CeOuts o = ce_fwd_impl(x, target, w, ignore_index, reduction, label_smoothing, z_loss,
                           logit_softcap, num_classes, want_lse, want_z_loss, want_dx,
                           predict_dx, dx_into_x, opt(word));
    ctx->set_materialize_grads(false);
    auto& d = ctx->saved_data;
    d["ignore_index"] = ignore_index;
    d["eps"] = label_smoothing;
    d["zs"] = z_loss;
    d["cap"] = logit_softcap;
    d["inplace"] = dx_into_x;
    const Tensor& dx = dx_into_x ? x : o.dx;
    if (predict_dx) {
      d["mode"] = int64_t{0};
      ctx->save_for_backward({x, target, o.lse, w, dx, o.state});
    } else if (want_dx) {
      d["mode"] = int64_t{1};
      ctx->save_for_backward({dx});
    } else {
      d["mode"] = int64_t{2};
      ctx->save_for_backward({x, target, o.lse, w});
    }
    // Only the present outputs, in CrossEntropyFwd's order; all but the loss
    // non-differentiable.
    variable_list outs{o.loss};
    variable_list nondiff;
    for (const Tensor* t : {&o.lse, &o.z, &o.dx, &o.state})
      if (t->defined()) {
        outs.push_back(*t);
        nondiff.push_back(*t);
      }
    if (!nondiff.empty()) ctx->mark_non_differentiable(nondiff);
    return outs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    try {
      return backward_here(ctx, grads);
    } catch (py::error_already_set& e) {  // from predict_word's Python call (a cache miss)
      py::gil_scoped_acquire gil;
      rethrow_python(e);
    }
  }

  static variable_list backward_here(AutogradContext* ctx, const variable_list& grads) {
    // One gradient per forward argument: x's, then none for target, weight and the rest.
    const auto result = [](const Tensor& dx) {
      variable_list r(kForwardArgs);
      r[0] = dx;
      return r;
    };
    const Tensor& dloss = grads[0];
    if (!dloss.defined()) return result(Tensor());
    auto& d = ctx->saved_data;
    const int64_t ii = d["ignore_index"].toInt();
    const double eps = d["eps"].toDouble(), zs = d["zs"].toDouble(), cap = d["cap"].toDouble();
    const int64_t mode = d["mode"].toInt();
    auto saved = ctx->get_saved_variables();
    Tensor g;
    if (mode == 0) {  // predict: cross_entropy_train_bwd
      Tensor x = saved[0], dx = saved[4];
      const Tensor &target = saved[1], &lse = saved[2], &w = saved[3], &state = saved[5];
      if (at::GradMode::is_enabled()) {  // create_graph: a gradient that does not require
        x = x.detach();                  // grad (differentiating it raises, never silently)
        dx = dx.detach();
      }
      const bool into = !(functional_context(dx, dloss) ||
                          torch::autograd::get_current_graph_task_keep_graph());
      if (bwd_takes_custom_op({&x, &lse, &dloss, &dx, &state, &w}))
        g = call_custom_op("quack_cpp::cross_entropy_train_bwd",
                           {x, target, lse, dloss, dx, state, opt_iv(w), ii, eps, zs, cap})
                .toTensor();
      else
        g = ce_train_bwd_impl(x, target, lse, dloss, dx, state, w, ii, eps, zs, cap, into);
    } else if (mode == 1) {  // the gradient for grad_output 1 in dx
      const Tensor& dx = saved[0];
      // As the Python backward (_registrar.refuse_double_backward): dx is a constant of the
      // forward, so a graph recorded through dx * dloss would miss the second derivative.
      TORCH_CHECK(!at::GradMode::is_enabled(),
                  "cross_entropy: backward with create_graph=True (double backward) is not "
                  "supported: the gradient was computed in the forward (want_dx) and saved, and "
                  "is not differentiable; call backward without create_graph, or use torch's "
                  "version of the op for higher-order gradients");
      if (functional_context(dx, dloss) || torch::autograd::get_current_graph_task_keep_graph())
        return result(dx * dloss);  // the graph may be used again: dx unscaled
      if (bwd_takes_custom_op({&dx, &dloss}))
        call_custom_op("quack_cpp::cross_entropy_scale_grad", {dx, dloss});
      else
        ce_scale_grad_impl(dx, dloss);
      g = dx;
    } else {  // from lse ('none', 'sum': dloss as it is)
      const Tensor &x = saved[0], &target = saved[1], &lse = saved[2], &w = saved[3];
      const bool inplace = d["inplace"].toBool() && !functional_context(x, dloss) &&
                           !torch::autograd::get_current_graph_task_keep_graph();
      if (bwd_takes_custom_op({&x, &lse, &dloss, &w}))
        g = call_custom_op("quack_cpp::cross_entropy_bwd",
                           {x, target, lse, dloss, opt_iv(w), ii, eps, zs, cap})
                .toTensor();
      else
        g = ce_bwd_impl(x, target, lse, dloss, w, ii, eps, zs, cap, inplace);
    }
    return result(g);
  }
};

}  // namespace quack_torch

namespace {

// The entry point: torch.ops.quack_cpp.cross_entropy_fwd's arguments (the registrar's eager
// call); (loss, lse, z_loss, dx, dx_state) with None where absent, and the node only where
// autograd records the call. NotImplemented (the registrar then runs the Python fast path) for
// what this path does not cover: logits None, lse_partial or target_logit given, and a
// recorded call whose backward would be the one from lse with reduction 'mean' (a denominator
// in torch ops) or without lse.
py::object cross_entropy_fwd(const std::optional<Tensor>& x_opt, const Tensor& target,
                             const std::optional<Tensor>& weight,
                             const std::optional<Tensor>& lse_partial,
                             const std::optional<Tensor>& target_logit, int64_t ignore_index,
                             const std::string& reduction, double label_smoothing, double z_loss,
                             double logit_softcap, int64_t num_classes, bool want_lse,
                             bool want_z_loss, bool want_dx, bool predict_dx, bool dx_into_x) {
  const auto present = [](const std::optional<Tensor>& t) { return t.has_value() && t->defined(); };
  if (!present(x_opt) || present(lse_partial) || present(target_logit))
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  const Tensor& x = *x_opt;
  const Tensor w = opt(weight);
  const bool record = at::GradMode::is_enabled() &&
                      (x.requires_grad() || (w.defined() && w.requires_grad()));
  if (record && !want_dx && (reduction == "mean" || !want_lse))
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  const Tensor word = predict_dx ? predict_word(target) : Tensor();
  CeOuts o;
  if (record) {
    variable_list outs = quack_torch::CrossEntropyFn::apply(
        x, target, weight, ignore_index, reduction, label_smoothing, z_loss, logit_softcap,
        num_classes, want_lse, want_z_loss, want_dx, predict_dx, dx_into_x,
        word.defined() ? std::optional<Tensor>(word) : std::nullopt);  // (an undefined tensor
    //                                                                  input is refused)
    size_t i = 1;  // the present outputs in order (CrossEntropyFn::forward)
    o.loss = outs[0];
    if (want_lse) o.lse = outs[i++];
    if (want_z_loss) o.z = outs[i++];
    if (want_dx && !dx_into_x) o.dx = outs[i++];
    if (predict_dx) o.state = outs[i++];
  } else {
    py::gil_scoped_release no_gil;
    o = ce_fwd_impl(x, target, w, ignore_index, reduction, label_smoothing, z_loss,
                    logit_softcap, num_classes, want_lse, want_z_loss, want_dx, predict_dx,
                    dx_into_x, word);
  }
  return py::make_tuple(o.loss, py_or_none(o.lse), py_or_none(o.z), py_or_none(o.dx),
                        py_or_none(o.state));
}

}  // namespace

// --------------------------------------------------------------------------------------------
// GEMM: torch.ops.quack_cpp.gemm's eager fast path where autograd records nothing
// --------------------------------------------------------------------------------------------

namespace {

// quack_cpp.gemm_ops._is_col_major: row-major when the last dim (extent > 1) has stride 1, else
// column-major when the one before has; extents of 1 decide the rest.
bool is_col_major(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  if (cols > 1 && t.stride(-1) == 1) return false;
  if (rows > 1 && t.stride(-2) == 1) return true;
  return cols != 1 && rows == 1;
}

// quack_cpp.gemm_ops._tma_ok: 16-byte aligned data, every stride other than 1 a multiple of
// 16 bytes.
bool tma_ok(const Tensor& t) {
  const int64_t align = 16 / static_cast<int64_t>(t.element_size());
  if (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0) return false;
  for (const int64_t st : t.strides())
    if (st != 1 && st % align != 0) return false;
  return true;
}

// quack_cpp.gemm_ops._strides: a row-major (col false) or column-major (M, N) / (L, M, N)
// matrix whose contiguous run is padded to 16 bytes.
std::vector<int64_t> padded_strides(const std::vector<int64_t>& shape, int64_t elt, bool col) {
  const int64_t align = 16 / elt;
  const int64_t m = shape[shape.size() - 2], n = shape.back();
  const int64_t ld = ((col ? m : n) + align - 1) / align * align;
  if (shape.size() == 2) return col ? std::vector<int64_t>{1, ld} : std::vector<int64_t>{ld, 1};
  return col ? std::vector<int64_t>{n * ld, 1, ld} : std::vector<int64_t>{m * ld, ld, 1};
}

// quack_cpp.gemm_ops._accepts for a D spec: whether quack::can_implement takes A and B with a D
// of this shape, strides and dtype. As there, on metadata alone: the pointers are _META_PTR's
// dummies (aligned, 1 TiB apart: no overlap) and the device 0, so the answer depends only on
// what d_col_major's cache key holds.
bool accepts_d(const Tensor& A, const Tensor& B, const std::vector<int64_t>& shape,
               const std::vector<int64_t>& strides, at::ScalarType dtype) {
  quack::GemmArgs g;
  g.a = ref(A, "gemm", "a");
  g.b = ref(B, "gemm", "b");
  g.a.data = reinterpret_cast<void*>(uintptr_t{1} << 40);
  g.b.data = reinterpret_cast<void*>(uintptr_t{2} << 40);
  g.d.data = reinterpret_cast<void*>(uintptr_t{4} << 40);
  g.d.dtype = dtype_of(dtype, "gemm", "d");
  g.d.ndim = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    g.d.shape[i] = shape[i];
    g.d.stride[i] = strides[i];
  }
  g.a.device = g.b.device = g.d.device = 0;
  try {
    quack::can_implement(g);
  } catch (const quack::InvalidArgument&) {
    return false;
  }
  return true;
}

// Which D layouts quack::can_implement takes for these operands (row-major, column-major),
// cached per dtypes, shapes and strides as _new_out_and_args's plans are (two can_implement
// queries cost ~2 µs; the dgrad's and wgrad's layouts ask every call). Bounded: cleared when
// full. Under the GIL.
struct DLayouts {
  bool row, col;
};

std::map<std::vector<int64_t>, DLayouts>* g_d_layouts =
    new std::map<std::vector<int64_t>, DLayouts>();

DLayouts d_layouts(const Tensor& A, const Tensor& B, const std::vector<int64_t>& shape,
                   int64_t elt, at::ScalarType out_dtype) {
  std::vector<int64_t> key{static_cast<int64_t>(A.scalar_type()),
                           static_cast<int64_t>(B.scalar_type()),
                           static_cast<int64_t>(out_dtype)};
  for (const Tensor* t : {&A, &B}) {
    key.push_back(t->dim());
    for (const int64_t v : t->sizes()) key.push_back(v);
    for (const int64_t v : t->strides()) key.push_back(v);
  }
  if (auto it = g_d_layouts->find(key); it != g_d_layouts->end()) return it->second;
  const DLayouts ok{accepts_d(A, B, shape, padded_strides(shape, elt, false), out_dtype),
                    accepts_d(A, B, shape, padded_strides(shape, elt, true), out_dtype)};
  if (g_d_layouts->size() >= 1024) g_d_layouts->clear();
  (*g_d_layouts)[key] = ok;
  return ok;
}

// D's shape for A @ B: (M, N) or (L, M, N).
std::vector<int64_t> out_shape(const Tensor& A, const Tensor& B) {
  std::vector<int64_t> shape{A.size(-2), B.size(-1)};
  if (A.dim() == 3) shape.insert(shape.begin(), A.size(0));
  return shape;
}

// Whether D must be column-major for these operands (_new_out: only that layout is supported
// for A's and B's layouts).
bool d_col_major(const Tensor& A, const Tensor& B, const std::vector<int64_t>& shape,
                 int64_t elt, at::ScalarType out_dtype) {
  const DLayouts ok = d_layouts(A, B, shape, elt, out_dtype);
  return !ok.row && ok.col;
}

// quack_cpp.gemm_ops._streamk_workspace (set by gemm_ops at import), whose workspaces it keeps
// for the process: their (pointer, bytes) here per (device, stream), asked once each. A (0, 0)
// answer (QUACK_GEMM_STREAMK=0, a capture) is not kept. Under the GIL.
PyObject* g_streamk_fn = nullptr;
std::map<std::pair<int, cudaStream_t>, std::pair<void*, size_t>>* g_streamk =
    new std::map<std::pair<int, cudaStream_t>, std::pair<void*, size_t>>();

std::pair<void*, size_t> streamk_workspace(const Tensor& D, cudaStream_t s) {
  if (!D.is_cuda() || g_streamk_fn == nullptr) return {nullptr, 0};
  const auto key = std::make_pair(static_cast<int>(D.get_device()), s);
  if (auto it = g_streamk->find(key); it != g_streamk->end()) return it->second;
  const py::object r = py::reinterpret_borrow<py::object>(g_streamk_fn)(
      D, reinterpret_cast<uintptr_t>(s));
  const auto [ptr, bytes] = r.cast<std::pair<uintptr_t, size_t>>();
  const std::pair<void*, size_t> ws{reinterpret_cast<void*>(ptr), bytes};
  if (ptr != 0) g_streamk->emplace(key, ws);
  return ws;
}

// The last stubbed launch's arguments (tests: compared with what the Python path passes to
// _C.gemm).
quack::GemmArgs* g_last_gemm = new quack::GemmArgs();
// Every stubbed launch's arguments while tests record them (_gemm_log), else null.
std::vector<quack::GemmArgs>* g_gemm_log = nullptr;

// Whether gemm_run serves A @ B into out_dtype: ranks 2 or 3 alike, K and L matching, CUDA
// operands (host ones with launches stubbed) that TMA can address, a kernel out dtype. Where
// not, the Python fast path runs the call (padded copies, or the rank, K and L errors with its
// messages).
bool gemm_takes(const Tensor& A, const Tensor& B, at::ScalarType out_dtype) {
  const int64_t nd = A.dim();
  if ((nd != 2 && nd != 3) || B.dim() != nd || B.size(-2) != A.size(-1) ||
      (nd == 3 && B.size(0) != A.size(0)))
    return false;
  if ((!A.is_cuda() && !g_stub_launches) || !tma_ok(A) || !tma_ok(B)) return false;
  return out_dtype == at::kFloat || out_dtype == at::kHalf || out_dtype == at::kBFloat16;
}

// The result of a GEMM into D (shape, strides): D itself, or with lead (a 2-D D's rows as x's
// leading dims) a tensor (*lead, N) of its own whose (M, N) alias is D, with the strides a
// view of D as (*lead, N) has. Not a view of D: autograd allows in-place ops on a custom
// Function's output, not on a view made inside it.
std::pair<Tensor, Tensor> new_out(const std::vector<int64_t>& shape,
                                  const std::vector<int64_t>& strides,
                                  const at::TensorOptions& opts, c10::OptionalIntArrayRef lead) {
  if (!lead) {
    Tensor D = at::empty_strided(shape, strides, opts);
    return {D, D};
  }
  std::vector<int64_t> final_shape(lead->begin(), lead->end());
  final_shape.push_back(shape[1]);
  // M = the product of lead, and D's rows evenly strided: always viewable
  const std::vector<int64_t> final_strides =
      *at::detail::computeStride(shape, strides, final_shape);
  Tensor out = at::empty_strided(final_shape, final_strides, opts);
  Tensor D = out.as_strided(shape, strides);
  return {out, D};
}

// D = alpha * A @ B (+ bias) for operands gemm_takes serves (gemm_ops._gemm_impl without C):
// D allocated as _new_out decides (row-major unless only column-major is supported for A's
// and B's layouts), quack::gemm on D's current stream with the stream-K workspace; returned
// as D, or with lead as (*lead, N) (new_out). Called under the GIL; the launch runs without
// it.
Tensor gemm_run(const Tensor& A, const Tensor& B, at::ScalarType out_dtype, double alpha,
                const Tensor& bias, c10::OptionalIntArrayRef lead = std::nullopt) {
  const std::vector<int64_t> shape = out_shape(A, B);
  const int64_t elt = static_cast<int64_t>(c10::elementSize(out_dtype));
  bool col = false;
  if (is_col_major(A) || !is_col_major(B))  // not the usual x @ W.T: ask, as _new_out does
    col = d_col_major(A, B, shape, elt, out_dtype);
  const auto [out, D] = new_out(shape, padded_strides(shape, elt, col),
                                A.options().dtype(out_dtype), lead);
  quack::GemmArgs g;
  g.a = ref(A, "gemm", "a");
  g.b = ref(B, "gemm", "b");
  g.d = ref(D, "gemm", "d");
  if (bias.defined()) g.bias.row = ref(bias, "gemm", "bias.row");
  g.alpha = static_cast<float>(alpha);
  g.beta = 0.f;
  const cudaStream_t s = stream_of(D);
  std::tie(g.streamk_workspace, g.streamk_workspace_bytes) = streamk_workspace(D, s);
  if (g_stub_launches) {
    *g_last_gemm = g;  // what a launch would have been given (_last_gemm_args)
    if (g_gemm_log != nullptr) g_gemm_log->push_back(g);
  } else {
    py::gil_scoped_release no_gil;
    quack::gemm(g, s);
  }
  return out;
}

// gemm_op's implementation (quack_cpp.gemm_ops._gemm_impl) for a call without C, device
// scalars, tuning, a column bias or the dynamic scheduler, on operands gemm_takes serves, that
// autograd does not record: gemm_run. NotImplemented, before doing anything, for every other
// call (the registrar then runs the Python fast path).
py::object gemm(const Tensor& A, const Tensor& B, const std::optional<Tensor>& C, double alpha,
                double /*beta: no C*/, at::ScalarType out_dtype, bool tuned,
                const std::optional<Tensor>& alpha_t, const std::optional<Tensor>& beta_t,
                const std::optional<Tensor>& bias, const std::optional<Tensor>& colvec_bias,
                bool dynamic_scheduler) {
  const auto present = [](const std::optional<Tensor>& t) { return t.has_value() && t->defined(); };
  const py::object not_here = py::reinterpret_borrow<py::object>(Py_NotImplemented);
  if (present(C) || present(alpha_t) || present(beta_t) || tuned || present(colvec_bias) ||
      dynamic_scheduler)
    return not_here;
  const Tensor b = opt(bias);
  if (at::GradMode::is_enabled() &&
      (A.requires_grad() || B.requires_grad() || (b.defined() && b.requires_grad())))
    return not_here;
  if (!gemm_takes(A, B, out_dtype)) return not_here;
  return py::cast(gemm_run(A, B, out_dtype, alpha, b));
}

}  // namespace

// --------------------------------------------------------------------------------------------
// Linear: quack_cpp.gemm_ops.Linear (forward, backward) as a C++ autograd node
// --------------------------------------------------------------------------------------------

namespace {

// gemm_ops._cast: t itself where its dtype matches.
Tensor cast_to(const Tensor& t, at::ScalarType dtype) {
  return t.scalar_type() == dtype ? t : t.to(dtype);
}

// gemm_ops._rows: t (..., k) as (M, k), M the product of the leading dims; a 2-D t itself.
// k = 0 names M (reshape(-1, 0) is ambiguous).
Tensor rows_of(const Tensor& t, int64_t k) {
  if (t.dim() == 2) return t;
  if (k) return t.reshape({-1, k});
  int64_t m = 1;
  for (int64_t i = 0; i + 1 < t.dim(); ++i) m *= t.size(i);
  return t.reshape({m, 0});
}

// gemm_ops._as_operand for a 2-D t: t itself when it is a row-major TMA operand (stride 1
// along the last dim, a 16-byte aligned offset, a leading stride of whole 16-byte units no
// shorter than a row), else a row-major copy with padded rows.
Tensor as_operand(const Tensor& t) {
  const int64_t align = 16 / static_cast<int64_t>(t.element_size());
  const auto sh = t.sizes();
  const auto s = t.strides();
  const bool ok = (sh[1] <= 1 || s[1] == 1) && t.storage_offset() % align == 0 &&
                  (sh[0] <= 1 || (s[0] % align == 0 && s[0] >= sh[1]));
  if (ok) return t;
  const std::vector<int64_t> shape(sh.begin(), sh.end());
  Tensor out = at::empty_strided(shape, padded_strides(shape, t.element_size(), false),
                                 t.options());
  out.copy_(t);
  return out;
}

// Whether W^T, with W = cast_to(weight, dtype), is an operand TMA can address (tma_ok),
// decided before any cast: a cast of a contiguous weight is a new contiguous (N, K) tensor, so
// its W^T has strides (1, K); a weight of another layout that needs a cast is left to Python.
bool weight_operand_ok(const Tensor& weight, at::ScalarType dtype) {
  if (weight.scalar_type() == dtype) return tma_ok(weight);  // W^T's strides, permuted
  if (!weight.is_contiguous()) return false;
  const int64_t K = weight.size(1);
  return K == 1 || K % (16 / static_cast<int64_t>(c10::elementSize(dtype))) == 0;
}

// What linear's entry point prepares for LinearFn::forward: the forward GEMM's operands and
// the flags of Linear.forward (needs_input_grad of x, weight and bias; fused accumulation).
struct LinearPrep {
  Tensor x2;  // x as (M, K) rows in the compute dtype, a TMA operand (_as_operand)
  Tensor w;   // weight in the compute dtype
  Tensor wt;  // w.mT(), the forward GEMM's B
  at::ScalarType dtype;
  bool need_x, need_w, need_b, fuse;
};

// The state LinearFn saves besides its tensors, as one int list (one saved_data entry).
enum LinearFlags : int64_t { kNeedX = 1, kNeedW = 2, kNeedB = 4, kFuse = 8, kLead = 16 };

// Whether the engine runs weight's AccumulateGrad in the current graph task, where fused
// accumulation may hand it weight.grad: a backward over the whole graph (no exec info) or one
// whose inputs include weight. Not under autograd.grad, which captures weight's gradient without
// running the accumulator (weight.grad would be cleared and the captured gradient hold the
// old one), nor for a weight that is not a leaf (no accumulator).
bool weight_accumulates(const Tensor& weight) {
  const std::shared_ptr<torch::autograd::Node> acc =
      torch::autograd::impl::try_get_grad_accumulator(weight);
  const auto* info = torch::autograd::get_current_graph_task_exec_info();
  if (!acc || info == nullptr) return false;
  if (info->empty()) return true;
  const auto it = info->find(acc.get());
  return it != info->end() && it->second.needed_;
}

// Linear.forward's ctx fields (gemm_ops.Linear: needs_input_grad of x, weight and bias,
// fuse, dtype, weight's and bias's dtypes, out_features, x's leading dims) as LinearFn keeps
// them: one int list in saved_data["s"] (pack / unpack), narrowed to the backward running now
// by for_task.
struct LinearState {
  int64_t flags;
  at::ScalarType dtype;
  at::ScalarType weight_dtype;  // dW's dtype
  std::optional<at::ScalarType> bias_dtype;
  int64_t n;                  // out_features
  std::vector<int64_t> lead;  // x's leading dims where x is not 2-D (flag kLead)

  // Linear.forward's ctx fields for this call.
  static LinearState of(const LinearPrep& p, const Tensor& x, const Tensor& weight,
                        const Tensor& bias) {
    LinearState s{(p.need_x ? kNeedX : 0) | (p.need_w ? kNeedW : 0) | (p.need_b ? kNeedB : 0) |
                      (p.fuse ? kFuse : 0) | (x.dim() != 2 ? kLead : 0),
                  p.dtype, weight.scalar_type(), std::nullopt, weight.size(0), {}};
    if (bias.defined()) s.bias_dtype = bias.scalar_type();
    if (s.has(kLead)) s.lead.assign(x.sizes().begin(), x.sizes().end() - 1);
    return s;
  }

  std::vector<int64_t> pack() const {
    std::vector<int64_t> v{flags, static_cast<int64_t>(dtype), static_cast<int64_t>(weight_dtype),
                           bias_dtype ? static_cast<int64_t>(*bias_dtype) : -1, n};
    v.insert(v.end(), lead.begin(), lead.end());
    return v;
  }

  static LinearState unpack(const std::vector<int64_t>& v) {
    LinearState s{v[0], static_cast<at::ScalarType>(v[1]), static_cast<at::ScalarType>(v[2]),
                  std::nullopt, v[4], std::vector<int64_t>(v.begin() + 5, v.end())};
    if (v[3] >= 0) s.bias_dtype = static_cast<at::ScalarType>(v[3]);
    return s;
  }

  bool has(LinearFlags f) const { return (flags & f) != 0; }

  // The flags of the backward running now: the gradients the engine's current graph task
  // computes (needs_input_grad is task_should_compute_output: autograd.grad and
  // backward(inputs=...) may leave x's, weight's or bias's out), fused accumulation only where
  // the task runs weight's AccumulateGrad (weight_accumulates). gemm_ops._task_grads alike.
  LinearState for_task(const AutogradContext& ctx, const Tensor& weight) const {
    LinearState s = *this;
    const auto drop = [&s](LinearFlags f) { s.flags &= ~static_cast<int64_t>(f); };
    if (has(kNeedX) && !ctx.needs_input_grad(0)) drop(kNeedX);
    if (has(kNeedW) && !ctx.needs_input_grad(1)) drop(kNeedW);
    if (has(kNeedB) && !ctx.needs_input_grad(2)) drop(kNeedB);  // edge 2: bias is present
    if (has(kFuse) && !(s.has(kNeedW) && weight_accumulates(weight))) drop(kFuse);
    return s;
  }

  // x's leading dims where x is not 2-D (gemm_run's lead), else none.
  c10::OptionalIntArrayRef lead_dims() const {
    return has(kLead) ? c10::OptionalIntArrayRef(lead) : c10::OptionalIntArrayRef();
  }

  // lead + (last,): the shape of a (M, last) result viewed as x's leading dims.
  std::vector<int64_t> lead_shape(int64_t last) const {
    std::vector<int64_t> shape(lead);
    shape.push_back(last);
    return shape;
  }
};

// gemm_ops._linear_node_backward (Linear.backward on the C++ node's saved state) and the
// registrar's module dict (FORCE_CUSTOM_OP), set by gemm_ops at import
// (_linear_set_python). Strong references, kept for the process.
PyObject* g_linear_backward_fn = nullptr;
PyObject* g_registrar_dict = nullptr;

// _registrar.FORCE_CUSTOM_OP as it is now (a test or the user may set it between a forward and
// its backward). Under the GIL.
bool force_custom_op() {
  static PyObject* key = PyUnicode_InternFromString("FORCE_CUSTOM_OP");
  PyObject* v = g_registrar_dict ? PyDict_GetItem(g_registrar_dict, key) : nullptr;
  if (v == nullptr) return false;
  int const truth = PyObject_IsTrue(v);
  if (truth < 0) PyErr_Clear();  // a value without truth: not set
  return truth == 1;
}

// Whether t's Python object, where it has one, is of a Tensor subclass (route's
// type(t) in (Tensor, Parameter)). Under the GIL.
// THPVariable_Wrap gives t's own Python object where it has one (a plain Tensor object where it
// has none), on every torch the package supports (TensorImpl's PyObject slot changed its API).
bool python_subclass(const Tensor& t) {
  if (!t.defined()) return false;
  PyObject* obj = THPVariable_Wrap(t);
  if (obj == nullptr) {
    PyErr_Clear();
    return false;
  }
  bool const sub = !THPVariable_CheckTypeExact(Py_TYPE(obj));
  Py_DECREF(obj);
  return sub;
}

// _registrar._is_plain_cuda (host tensors too with launches stubbed): a kernel_operand whose
// Python object, where it has one, is no subclass. Under the GIL.
bool plain_operand(const Tensor& t) { return kernel_operand(t) && !python_subclass(t); }

// Whether Linear.backward's route over dy's operand, w and x2 would give EAGER (its GEMMs
// then run here), rather than CUSTOM (FORCE_CUSTOM_OP, a dispatch mode, a jit trace, a
// functorch transform, a tensor that is not plain) or EAGER_GRAD (create_graph=True with a
// tensor that requires grad). Under the GIL.
bool backward_routes_eager(const Tensor& dy, const Tensor& w, const Tensor& x2) {
  return !force_custom_op() && !routes_off_eager({&dy, &w, &x2}, plain_operand);
}

// The wgrad's output dtype (weight_grad): weight's where the C++ has that instance for the
// wgrad's layouts (row- or column-major D), else the compute dtype (then cast).
at::ScalarType wgrad_dtype(const Tensor& a, const Tensor& b, at::ScalarType wdt,
                           at::ScalarType dtype) {
  if (wdt == dtype) return wdt;
  const DLayouts ok = d_layouts(a, b, out_shape(a, b), c10::elementSize(wdt), wdt);
  return ok.row || ok.col ? wdt : dtype;
}

// A Python result as a gradient: None -> an undefined Tensor (no gradient), else the tensor.
Tensor tensor_or_undefined(const py::handle& o) {
  return o.is_none() ? Tensor() : o.cast<Tensor>();
}

// Linear.backward on the node's saved state (gemm_ops._linear_node_backward): (dx, dw, db).
// Under the GIL.
variable_list python_backward(const LinearState& st, const Tensor& dy, const Tensor& x2,
                              const Tensor& w, const Tensor& weight) {
  try {
    const py::object lead =
        st.has(kLead) ? py::object(py::tuple(py::cast(st.lead))) : py::object(py::none());
    const py::object bias_dtype =
        st.bias_dtype ? py::object(py::cast(*st.bias_dtype)) : py::object(py::none());
    const py::tuple r = py::reinterpret_borrow<py::object>(g_linear_backward_fn)(
        dy, py::make_tuple(py_or_none(x2), py_or_none(w), py_or_none(weight)),
        py::make_tuple(st.has(kNeedX), st.has(kNeedW), st.has(kNeedB)), st.dtype,
        st.weight_dtype, lead, st.n, bias_dtype, st.has(kFuse));
    return {tensor_or_undefined(r[0]), tensor_or_undefined(r[1]), tensor_or_undefined(r[2]),
            Tensor()};
  } catch (py::error_already_set& e) {
    rethrow_python(e);
  }
}

// The dgrad, wgrad and bias gradient of Linear.backward where its route gives EAGER:
// dx = dy W (viewed as x's leading dims), dW = dy^T x2 in weight's dtype (wgrad_dtype, then
// cast), db = the fp32 column sum of dy in bias's dtype. Empty where the GEMMs are not
// gemm_takes's (the caller then runs Python's). Under the GIL.
std::optional<variable_list> cpp_backward(const LinearState& st, const Tensor& dy,
                                          const Tensor& x2, const Tensor& w) {
  const Tensor g = as_operand(rows_of(cast_to(dy, st.dtype), st.n));
  const Tensor gt = st.has(kNeedW) ? g.mT() : Tensor();  // the wgrad's A
  const at::ScalarType dw_dtype =
      st.has(kNeedW) ? wgrad_dtype(gt, x2, st.weight_dtype, st.dtype) : st.dtype;
  if ((st.has(kNeedX) && !gemm_takes(g, w, st.dtype)) ||
      (st.has(kNeedW) && !gemm_takes(gt, x2, dw_dtype)))
    return std::nullopt;
  Tensor dx, dw, db;
  if (st.has(kNeedX)) {  // dgrad
    dx = gemm_run(g, w, st.dtype, 1.0, Tensor());
    if (st.has(kLead)) dx = dx.view(st.lead_shape(w.size(1)));
  }
  if (st.has(kNeedW))  // wgrad
    dw = cast_to(gemm_run(gt, x2, dw_dtype, 1.0, Tensor()), st.weight_dtype);
  if (st.has(kNeedB)) db = g.sum({0}, false, at::kFloat).to(*st.bias_dtype);
  return variable_list{dx, dw, db, Tensor()};
}

}  // namespace

namespace quack_torch {

// quack_cpp.gemm_ops.Linear's forward and backward as a C++ autograd Function (node:
// torch::autograd::CppNode<quack_torch::LinearFn>). Inputs x, weight, bias (the prepared
// operands ride along as a plain pointer). Forward: y = x2 W^T (+ b) on gemm_run, allocated
// with x's leading dims (a tensor of its own, not a view: in-place ops on y are allowed);
// saves x2 where weight needs a gradient (dW = dy^T x2), W where x does (dx = dy W), and
// weight only where accumulation is fused (its .grad; dW's dtype is in the state), so an
// in-place update of weight between forward and backward is an error only where dx reads W.
// Backward: the gradients the current graph task computes (LinearState::for_task); where
// Linear.backward's route gives EAGER and accumulation is not fused, those here
// (cpp_backward); otherwise (fused accumulation, create_graph=True, FORCE_CUSTOM_OP, dispatch
// modes, functorch, a subclass dy, operands TMA cannot address) Linear.backward's
// computation (python_backward), which routes its GEMMs to the Python Function or the custom
// op.
struct LinearFn : public torch::autograd::Function<LinearFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight,
                        const std::optional<Tensor>& bias, const LinearPrep* p) {
    const Tensor b = opt(bias);
    const LinearState st = LinearState::of(*p, x, weight, b);
    const Tensor y = gemm_run(p->x2, p->wt, p->dtype, 1.0, b, st.lead_dims());
    ctx->saved_data["s"] = st.pack();
    ctx->save_for_backward({p->need_w ? p->x2 : Tensor(), p->need_x ? p->w : Tensor(),
                            p->fuse ? weight : Tensor()});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const Tensor &x2 = saved[0], &w = saved[1], &weight = saved[2];
    const LinearState st =
        LinearState::unpack(ctx->saved_data["s"].toIntVector()).for_task(*ctx, weight);
    const Tensor& dy = grads[0];
    py::gil_scoped_acquire gil;
    if (!st.has(kFuse) && backward_routes_eager(dy, w, x2)) {
      try {
        if (auto grads_here = cpp_backward(st, dy, x2, w)) return *grads_here;
      } catch (const quack::InvalidArgument& e) {  // a ValueError, as on the Python path
        TORCH_CHECK_VALUE(false, e.what());
      } catch (py::error_already_set& e) {  // from the stream-K workspace's lookup
        rethrow_python(e);
      }
    }
    return python_backward(st, dy, x2, w, weight);
  }
};

}  // namespace quack_torch

namespace {

// gemm_ops.linear_dtype: the autocast dtype where autocast is on for x's device type, else
// x's dtype where weight has it; only bfloat16 or float16 (else none: no kernel).
std::optional<at::ScalarType> linear_dtype(const Tensor& x, const Tensor& weight) {
  const at::DeviceType dev = x.device().type();
  at::ScalarType dtype;
  if ((dev == at::kCUDA || dev == at::kCPU) && at::autocast::is_autocast_enabled(dev))
    dtype = at::autocast::get_autocast_dtype(dev);
  else if (x.scalar_type() == weight.scalar_type())
    dtype = x.scalar_type();
  else
    return std::nullopt;
  if (dtype != at::kBFloat16 && dtype != at::kHalf) return std::nullopt;
  return dtype;
}

// Whether the Python path's checks pass these shapes: weight (N, K), x (..., K), bias (N,).
bool linear_shapes_ok(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1) &&
         (!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)));
}

// Linear.forward's operands (x2, W, W^T, made with grad mode off as inside the Function) and
// flags for a call the C++ path serves; none, before any launch, for the calls it leaves to
// Python: tuning, no bfloat16 / float16 compute dtype, shapes the Python checks reject (their
// messages), a weight whose W^T TMA cannot address, an x whose rows TMA cannot address once
// made an operand.
std::optional<LinearPrep> linear_prep(const Tensor& x, const Tensor& weight, const Tensor& b,
                                      std::optional<at::ScalarType> dtype, bool fuse_grad_accum,
                                      bool tuned) {
  if (tuned || g_linear_backward_fn == nullptr) return std::nullopt;
  if (!dtype) dtype = linear_dtype(x, weight);
  if (!dtype || (*dtype != at::kBFloat16 && *dtype != at::kHalf)) return std::nullopt;
  if (!linear_shapes_ok(x, weight, b) || (!x.is_cuda() && !g_stub_launches) ||
      !weight_operand_ok(weight, *dtype))
    return std::nullopt;
  LinearPrep p;
  {
    at::AutoGradMode no_grad(false);
    p.x2 = as_operand(rows_of(cast_to(x, *dtype), weight.size(1)));
    p.w = cast_to(weight, *dtype);
    p.wt = p.w.mT();
  }
  if (!gemm_takes(p.x2, p.wt, *dtype)) return std::nullopt;
  p.dtype = *dtype;
  p.need_x = x.requires_grad();
  p.need_w = weight.requires_grad();
  p.need_b = b.defined() && b.requires_grad();
  p.fuse = fuse_grad_accum && p.need_w;
  return p;
}

// quack_cpp.gemm_ops.linear_op's eager fast path (the registrar's call: Linear.forward's
// arguments, dtype None for linear_dtype's): y, with the LinearFn node where autograd records
// the call; NotImplemented where linear_prep leaves the call to Python.
py::object linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                  std::optional<at::ScalarType> dtype, bool fuse_grad_accum, bool tuned,
                  int64_t /*path*/) {
  const Tensor b = opt(bias);
  std::optional<LinearPrep> p = linear_prep(x, weight, b, dtype, fuse_grad_accum, tuned);
  if (!p) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  if (at::GradMode::is_enabled() && (p->need_x || p->need_w || p->need_b))
    return py::cast(quack_torch::LinearFn::apply(x, weight, bias, &*p));
  const auto lead = x.dim() == 2 ? c10::OptionalIntArrayRef() : x.sizes().slice(0, x.dim() - 1);
  return py::cast(gemm_run(p->x2, p->wt, p->dtype, 1.0, b, lead));
}

py::tuple ref_tuple(const quack::TensorRef& r) {
  if (!r.present()) return py::tuple();
  py::list shape, strides;
  for (int i = 0; i < r.ndim; ++i) {
    shape.append(r.shape[i]);
    strides.append(r.stride[i]);
  }
  return py::make_tuple(reinterpret_cast<uintptr_t>(r.data), static_cast<int>(r.dtype),
                        py::tuple(shape), py::tuple(strides), r.device);
}

// A GemmArgs as _last_gemm_args gives it.
py::tuple gemm_args_tuple(const quack::GemmArgs& g) {
  return py::make_tuple(ref_tuple(g.a), ref_tuple(g.b), ref_tuple(g.d), ref_tuple(g.bias.row),
                        g.alpha, g.beta, reinterpret_cast<uintptr_t>(g.streamk_workspace),
                        g.streamk_workspace_bytes);
}

}  // namespace

PYBIND11_MODULE(_torch, m) {
  m.doc() =
      "quack_cpp._torch: the eager fast paths of rmsnorm, layernorm, softmax, log_softmax, "
      "cross_entropy, gemm and linear in C++ (see python/torch_ext.cpp); used by "
      "quack_cpp.ops, layernorm_ops, softmax_ops, cross_entropy_ops and gemm_ops when "
      "importable.";
  m.def("rmsnorm_fwd", &rmsnorm_fwd, py::arg("x"), py::arg("weight").none(true),
        py::arg("bias").none(true), py::arg("residual").none(true), py::arg("eps"),
        py::arg("weight_offset"), py::arg("out_dtype"), py::arg("residual_out_dtype").none(true), py::arg("store_rstd"),
        "torch.ops.quack_cpp.rmsnorm_fwd's eager fast path: (out, residual_out or None, rstd or "
        "None), with a C++ autograd node when autograd records the call.");
  m.def("softmax_fwd", &row_unary<quack_torch::SoftmaxFn>, py::arg("x"), py::arg("out_dtype"),
        "torch.ops.quack_cpp.softmax_fwd's eager fast path: y, with a C++ autograd node when "
        "autograd records the call.");
  m.def("log_softmax_fwd", &row_unary<quack_torch::LogSoftmaxFn>, py::arg("x"),
        py::arg("out_dtype"),
        "torch.ops.quack_cpp.log_softmax_fwd's eager fast path: y, with a C++ autograd node "
        "when autograd records the call.");
  m.def("layernorm_fwd", &layernorm_fwd, py::arg("x"), py::arg("weight").none(true),
        py::arg("bias").none(true), py::arg("residual").none(true), py::arg("eps"),
        py::arg("weight_offset"), py::arg("out_dtype"), py::arg("residual_out_dtype").none(true),
        py::arg("store_stats"),
        "torch.ops.quack_cpp.layernorm_fwd's eager fast path: (out, residual_out or None, mean "
        "or None, rstd or None), with a C++ autograd node when autograd records the call.");
  m.def("cross_entropy_fwd", &cross_entropy_fwd, py::arg("x").none(true), py::arg("target"),
        py::arg("weight").none(true), py::arg("lse_partial").none(true),
        py::arg("target_logit").none(true), py::arg("ignore_index"), py::arg("reduction"),
        py::arg("label_smoothing"), py::arg("z_loss"), py::arg("logit_softcap"),
        py::arg("num_classes"), py::arg("want_lse"), py::arg("want_z_loss"), py::arg("want_dx"),
        py::arg("predict_dx") = false, py::arg("dx_into_x") = false,
        "torch.ops.quack_cpp.cross_entropy_fwd's eager fast path: (loss, lse, z_loss, dx, "
        "dx_state), None where absent, with a C++ autograd node when autograd records the call; "
        "NotImplemented for the calls it leaves to the Python fast path (logits None, "
        "lse_partial, target_logit, a recorded backward from lse with reduction 'mean').");
  m.def("_ce_set_predict_word",
        [](py::object fn) {
          keep_object(g_predict_word_fn, std::move(fn));
          for (Tensor& w : *g_predict_words) w = Tensor();
        },
        "quack_cpp.cross_entropy_ops.dx_predict_word (called with a torch.device where the "
        "cache of its words misses).");
  m.def("gemm", &gemm, py::arg("A"), py::arg("B"), py::arg("C").none(true), py::arg("alpha"),
        py::arg("beta"), py::arg("out_dtype"), py::arg("tuned"), py::arg("alpha_t").none(true),
        py::arg("beta_t").none(true), py::arg("bias").none(true) = py::none(),
        py::arg("colvec_bias").none(true) = py::none(), py::arg("dynamic_scheduler") = false,
        "torch.ops.quack_cpp.gemm's eager fast path where autograd records nothing: D; "
        "NotImplemented for a C, device scalars, tuning, a column bias, the dynamic scheduler, "
        "operands TMA cannot "
        "address and recorded calls (the Python fast path runs them).");
  m.def("_gemm_set_streamk",
        [](py::object fn) {
          keep_object(g_streamk_fn, std::move(fn));
          g_streamk->clear();
        },
        "quack_cpp.gemm_ops._streamk_workspace (D, stream) -> (pointer, bytes): the stream-K "
        "workspaces, owned there.");
  m.def("linear", &linear, py::arg("x"), py::arg("weight"), py::arg("bias").none(true),
        py::arg("dtype").none(true), py::arg("fuse_grad_accum"), py::arg("tuned"),
        py::arg("path"),
        "quack_cpp.gemm_ops.linear_op's eager fast path (the arguments of Linear.forward; "
        "dtype None: linear_dtype's, the autocast dtype or x's): y = x W^T (+ bias) for x "
        "(..., K), weight (N, K), bias (N,) or None, y (..., N) in the compute dtype (bfloat16 "
        "or float16; x and weight cast to it, bias added in fp32 in the epilogue), with a C++ "
        "autograd node (LinearFn: dgrad, wgrad in weight's dtype, bias gradient; "
        "fuse_grad_accum accumulates the wgrad into weight.grad) when autograd records the "
        "call. NotImplemented, before any launch, for the calls the Python path takes: "
        "tuning, no bfloat16 / float16 compute dtype, host tensors (unless launches are "
        "stubbed), shapes the Python checks reject (they raise ValueError there), operands TMA "
        "cannot address. Raises ValueError where the C++ rejects a GEMM (can_implement's "
        "message), RuntimeError on a CUDA error.");
  m.def("_linear_set_python",
        [](py::object backward, py::object registrar) {
          keep_object(g_linear_backward_fn, std::move(backward));
          keep_object(g_registrar_dict, registrar.attr("__dict__"));
        },
        "quack_cpp.gemm_ops._linear_node_backward (Linear.backward on LinearFn's saved state: "
        "the backwards LinearFn leaves to Python) and the quack_cpp._registrar module "
        "(FORCE_CUSTOM_OP, read at backward time).");
  m.def("_last_gemm_args", [] { return gemm_args_tuple(*g_last_gemm); },
        "The last stubbed gemm launch's arguments ((ptr, dtype, shape, strides, device) of a, "
        "b, d and bias.row, () where absent; alpha, beta, the stream-K workspace): tests.");
  m.def("_gemm_log",
        [](bool on) {
          py::list out;
          if (g_gemm_log != nullptr)
            for (const quack::GemmArgs& g : *g_gemm_log) out.append(gemm_args_tuple(g));
          delete g_gemm_log;
          g_gemm_log = on ? new std::vector<quack::GemmArgs>() : nullptr;
          return out;
        },
        "Tests: the stubbed gemm launches recorded since the last call (each as "
        "_last_gemm_args gives it), recording on from now when on is True, else off.");
  m.def("_set_stub_launches", [](bool v) { g_stub_launches = v; },
        "Skip the kernel launches (tests and the CPU host-time bench only).");
}
