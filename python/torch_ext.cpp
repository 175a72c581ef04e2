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
// Why: the Python fast path's own work (the route, tensor tuples, allocation calls, the Python
// autograd.Function) is per call several times torch's F.layer_norm host path; here it is C++
// (docs/architecture.md, "Host time per eager call").
//
// Errors: quack::InvalidArgument (std::invalid_argument) -> ValueError, as through _C.
#include <torch/extension.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>
#include <string>
#include <tuple>

#include "quack/quack.h"

namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Launches skipped (tests and the CPU host-time bench: allocation and autograd only).
bool g_stub_launches = false;

quack::DType dtype_of(const Tensor& t, const char* fn, const char* name) {
  switch (t.scalar_type()) {
    case at::kFloat: return quack::DType::kFloat32;
    case at::kHalf: return quack::DType::kFloat16;
    case at::kBFloat16: return quack::DType::kBFloat16;
    case at::kInt: return quack::DType::kInt32;
    case at::kLong: return quack::DType::kInt64;
    default: {
      const at::ScalarType s = t.scalar_type();
      const std::string dt = s == at::kDouble ? "float64" : s == at::kShort ? "int16"
                             : s == at::kChar ? "int8" : s == at::kByte ? "uint8"
                             : s == at::kBool ? "bool" : std::string(c10::toString(s));
      throw quack::InvalidArgument(std::string(fn) + ": " + name + " has dtype " + dt +
                                   ", expected float32, float16 or bfloat16");
    }
  }
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
    // when stored, then rstd when stored.
    variable_list outs{out};
    if (residual_out.defined()) outs.push_back(residual_out);
    if (rstd.defined()) outs.push_back(rstd);
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
  const auto py_or_none = [](const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); };
  return py::make_tuple(o, py_or_none(ro), py_or_none(mn), py_or_none(rs));
}

}  // namespace

PYBIND11_MODULE(_torch, m) {
  m.doc() =
      "quack_cpp._torch: the eager fast paths of rmsnorm, layernorm, softmax and log_softmax in "
      "C++ (see python/torch_ext.cpp); used by quack_cpp.ops, layernorm_ops and softmax_ops "
      "when importable.";
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
  m.def("_set_stub_launches", [](bool v) { g_stub_launches = v; },
        "Skip the kernel launches (tests and the CPU host-time bench only).");
}
