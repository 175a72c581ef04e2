// quack_cpp._C: gemm_act, gemm_dact, gemm_gated, gemm_dgated and their can_implement
// (quack/gemm_act.h); gemm_rotary (quack/gemm_rotary.h). Tensors are tuples as in binding.cpp
// (bind_util.h); the activation is its name (quack::activation_name: "identity" or "none",
// "relu", "relu_sq", "gelu_tanh_approx", "silu", "tanh", "gelu_erf", "quick_gelu"; gated:
// "swiglu", "swiglu_oai", "reglu", "geglu", "glu"); a bias is two optional tensors, bias_row (N,)
// / (L, N) and bias_col (M,) / (L, M) (quack::GemmBias). No logic: the C++ API validates
// (quack::InvalidArgument -> ValueError, quack::CudaError -> RuntimeError).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "bind_util.h"
#include "quack/errors.h"
#include "quack/gemm_act.h"
#include "quack/gemm_rotary.h"

namespace nb = nanobind;

namespace {

using quack_py::kTensorDoc;
using quack_py::OptTensor;
using quack_py::to_ref;
using quack_py::set_gemm_workspaces;
using quack_py::to_stream;

quack::Activation to_activation(const std::string& name, const char* fn) {
  quack::Activation a;
  if (quack::activation_from_name(name.c_str(), &a)) return a;
  std::string names;  // every value of quack::Activation, in order ("unknown" past the last)
  for (int v = 0;; ++v) {
    const std::string n = quack::activation_name(static_cast<quack::Activation>(v));
    if (n == "unknown") break;
    names += (v ? ", " : "") + n + (v == 0 ? " (or none)" : "");
  }
  throw quack::InvalidArgument(std::string(fn) + ": activation is '" + name + "', expected one of " + names);
}

constexpr const char* kStreamKDoc =
    "streamk_workspace / streamk_workspace_bytes: as gemm's (GemmArgs::streamk_workspace: a\n"
    "buffer of gemm_streamk_workspace_size(device) bytes, zeroed once, one per stream; 0: none).\n";

// The fields GemmActArgs and GemmGatedArgs share (gemm_gated adds concat_layout).
template <class Args>
Args fwd_args(const char* fn, const OptTensor& a, const OptTensor& b, const OptTensor& c, const OptTensor& preact,
              const OptTensor& postact, const std::string& activation, double alpha, double beta, bool tuned,
              uintptr_t tile_counter, const OptTensor& bias_row, const OptTensor& bias_col) {
  Args g;
  g.a = to_ref(a, fn, "a");
  g.b = to_ref(b, fn, "b");
  g.c = to_ref(c, fn, "c");
  g.preact = to_ref(preact, fn, "preact");
  g.postact = to_ref(postact, fn, "postact");
  g.bias.row = to_ref(bias_row, fn, "bias.row");
  g.bias.col = to_ref(bias_col, fn, "bias.col");
  g.activation = to_activation(activation, fn);
  g.alpha = static_cast<float>(alpha);
  g.beta = static_cast<float>(beta);
  g.tuned = tuned;
  g.tile_counter = reinterpret_cast<uint32_t*>(tile_counter);
  return g;
}

// GemmDActArgs and GemmDGatedArgs: the same fields.
template <class Args>
Args bwd_args(const char* fn, const OptTensor& a, const OptTensor& b, const OptTensor& preact,
              const OptTensor& dpreact, const OptTensor& postact, const std::string& activation, bool tuned,
              uintptr_t tile_counter) {
  Args g;
  g.a = to_ref(a, fn, "a");
  g.b = to_ref(b, fn, "b");
  g.preact = to_ref(preact, fn, "preact");
  g.dpreact = to_ref(dpreact, fn, "dpreact");
  g.postact = to_ref(postact, fn, "postact");
  g.activation = to_activation(activation, fn);
  g.tuned = tuned;
  g.tile_counter = reinterpret_cast<uint32_t*>(tile_counter);
  return g;
}

quack::GemmActArgs act_args(const OptTensor& a, const OptTensor& b, const OptTensor& c, const OptTensor& preact,
                            const OptTensor& postact, const std::string& activation, double alpha, double beta,
                            bool tuned, uintptr_t tile_counter, const OptTensor& bias_row,
                            const OptTensor& bias_col) {
  return fwd_args<quack::GemmActArgs>("gemm_act", a, b, c, preact, postact, activation, alpha, beta, tuned,
                                      tile_counter, bias_row, bias_col);
}

quack::GemmRotaryArgs rotary_args(const OptTensor& a, const OptTensor& b, const OptTensor& d, const OptTensor& cos,
                                  const OptTensor& sin, int64_t rotary_cols, int64_t head_dim, int64_t seqlen,
                                  double alpha, bool tuned) {
  const char* fn = "gemm_rotary";
  quack::GemmRotaryArgs g;
  g.a = to_ref(a, fn, "a");
  g.b = to_ref(b, fn, "b");
  g.d = to_ref(d, fn, "d");
  g.cos = to_ref(cos, fn, "cos");
  g.sin = to_ref(sin, fn, "sin");
  g.rotary_cols = rotary_cols;
  g.head_dim = head_dim;
  g.seqlen = seqlen;
  g.alpha = static_cast<float>(alpha);
  g.tuned = tuned;
  return g;
}

quack::GemmDActArgs dact_args(const OptTensor& a, const OptTensor& b, const OptTensor& preact,
                              const OptTensor& dpreact, const OptTensor& postact, const std::string& activation,
                              bool tuned, uintptr_t tile_counter) {
  return bwd_args<quack::GemmDActArgs>("gemm_dact", a, b, preact, dpreact, postact, activation, tuned, tile_counter);
}

quack::GemmGatedArgs gated_args(const OptTensor& a, const OptTensor& b, const OptTensor& c, const OptTensor& preact,
                                const OptTensor& postact, const std::string& activation, double alpha, double beta,
                                bool concat_layout, bool tuned, uintptr_t tile_counter, const OptTensor& bias_row,
                                const OptTensor& bias_col) {
  quack::GemmGatedArgs g = fwd_args<quack::GemmGatedArgs>("gemm_gated", a, b, c, preact, postact, activation, alpha,
                                                          beta, tuned, tile_counter, bias_row, bias_col);
  g.concat_layout = concat_layout;
  return g;
}

quack::GemmDGatedArgs dgated_args(const OptTensor& a, const OptTensor& b, const OptTensor& preact,
                                  const OptTensor& dpreact, const OptTensor& postact, const std::string& activation,
                                  bool tuned, uintptr_t tile_counter) {
  return bwd_args<quack::GemmDGatedArgs>("gemm_dgated", a, b, preact, dpreact, postact, activation, tuned,
                                         tile_counter);
}

constexpr const char* kGatedDoc =
    "  preact[l] = alpha * (A[l] @ B[l]) + beta * C[l] + bias;  postact[l][:, j] =\n"
    "  glu(preact[l][:, 2j], preact[l][:, 2j + 1])   (gate, up interleaved; N even)\n"
    "fp32 accumulation and activation (QuACK 0.6's gated formulas, quack/gemm_act.h), one\n"
    "rounding per output. a: (M, K) or (L, M, K) bf16, row-major; b: (K, N) or (L, K, N), a's\n"
    "dtype, column-major (W.T of fc1's weight W (N, K)); concat_layout: b's columns are the halves\n"
    "[gate | up] instead of interleaved pairs (preact stays interleaved); c, preact: (M, N),\n"
    "postact: (M, N/2), row-major, bf16. activation: swiglu, swiglu_oai, reglu, geglu, glu.\n"
    "bias and workspace as gemm_act (gemm_gated_workspace_size).\n";

constexpr const char* kDGatedDoc =
    "  D[l] = A[l] @ B[l]   ((M, H));  dpreact[l][:, 2j], [:, 2j + 1] = D * dglu/d(gate, up)\n"
    "  (preact[l][:, 2j], preact[l][:, 2j + 1]);  postact[l][:, j] = glu(gate, up)\n"
    "a: (M, K) or (L, M, K) bf16, row-major (dout); b: (K, H), a's dtype, row-major (fc2's weight);\n"
    "preact, dpreact: (M, 2H) row-major, 16-bit, gate/up interleaved (read and written as packed\n"
    "pairs); postact: (M, H) row-major or None. activation as gemm_gated. workspace as gemm_act\n"
    "(gemm_dgated_workspace_size).\n";

constexpr const char* kActDoc =
    "  preact[l] = alpha * (A[l] @ B[l]) + beta * C[l];  postact[l] = act(preact[l])\n"
    "fp32 accumulation and activation (QuACK's formulas, quack/gemm_act.h), one rounding per\n"
    "output. a: (M, K) or (L, M, K) bf16, row-major; b: (K, N) or (L, K, N), a's dtype,\n"
    "column-major (W.T of a weight W (N, K)); c, preact, postact: (M, N) or (L, M, N), row-major,\n"
    "bf16 (what is compiled today; quack/gemm_act.h lists it). preact None: not stored; c None:\n"
    "no C (beta must be 0). activation: identity (none), relu, relu_sq, gelu_tanh_approx, silu,\n"
    "tanh, gelu_erf, quick_gelu. tile_counter: address of one uint32 (zeroed once) for the dynamic scheduler, 0: none.\n"
    "bias_row (N,) / (L, N), bias_col (M,) / (L, M): fp32, bf16 or fp16, contiguous, or None.\n"
    "Any alignment (as gemm): workspace / workspace_bytes, a device buffer of at least\n"
    "gemm_act_workspace_size bytes for the padded copies of a and b TMA cannot address (0: the\n"
    "call allocates it on the stream when needed).\n";

constexpr const char* kDActDoc =
    "  D[l] = A[l] @ B[l];  dpreact[l] = D[l] * act'(preact[l]);  postact[l] = act(preact[l])\n"
    "fp32 accumulation and activation, one rounding per output. a: (M, K) or (L, M, K) bf16,\n"
    "row-major (dout); b: (K, N) or (L, K, N), a's dtype, row-major (a weight W (K = out, N =\n"
    "in)); preact, dpreact, postact: (M, N) or (L, M, N), row-major, bf16. postact None: not\n"
    "stored. activation, tile_counter and workspace as gemm_act (gemm_dact_workspace_size).\n";

// gemm_dact and gemm_dgated take the same arguments (a, b, preact, dpreact, postact,
// activation): their three entry points (can_implement, workspace_size, the launch) come from
// one definition. `problem`: the op's formula and shapes; `what`, `empty`: the launch's lines.
template <class Args>
void def_grad_op(nb::module_& m, const std::string& op, const char* default_act,
                 Args (*make)(const OptTensor&, const OptTensor&, const OptTensor&, const OptTensor&,
                              const OptTensor&, const std::string&, bool, uintptr_t),
                 void (*launch)(const Args&, cudaStream_t), const char* problem, const char* what,
                 const char* empty) {
  m.def(
      (op + "_can_implement").c_str(),
      [make](const OptTensor& a, const OptTensor& b, const OptTensor& preact, const OptTensor& dpreact,
             const OptTensor& postact, const std::string& activation) {
        Args g = make(a, b, preact, dpreact, postact, activation, false, 0);
        nb::gil_scoped_release release;
        quack::can_implement(g);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("preact"), nb::arg("dpreact"), nb::arg("postact").none(),
      nb::arg("activation") = default_act,
      ("Validates " + op + " arguments (quack::can_implement) without any CUDA call;\n"
       "returns None or raises ValueError whose message starts with '" + op + ": '. The\n"
       "problem:\n" + problem + kTensorDoc)
          .c_str());

  m.def(
      (op + "_workspace_size").c_str(),
      [make](const OptTensor& a, const OptTensor& b, const OptTensor& preact, const OptTensor& dpreact,
             const OptTensor& postact, const std::string& activation) {
        Args g = make(a, b, preact, dpreact, postact, activation, false, 0);
        nb::gil_scoped_release release;
        return quack::gemm_workspace_size(g);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("preact"), nb::arg("dpreact"), nb::arg("postact").none(),
      nb::arg("activation") = default_act,
      ("Bytes of workspace " + op + " needs for these arguments (quack::gemm_workspace_size): the\n"
       "padded copies of a and b where TMA cannot address them, 0 otherwise. Validates like\n" +
       op + "_can_implement (ValueError).")
          .c_str());

  m.def(
      op.c_str(),
      [make, launch](const OptTensor& a, const OptTensor& b, const OptTensor& preact, const OptTensor& dpreact,
                     const OptTensor& postact, const std::string& activation, uintptr_t stream, bool tuned,
                     uintptr_t tile_counter, uintptr_t workspace, size_t workspace_bytes,
                     uintptr_t streamk_workspace, size_t streamk_workspace_bytes) {
        Args g = make(a, b, preact, dpreact, postact, activation, tuned, tile_counter);
        set_gemm_workspaces(g, workspace, workspace_bytes, streamk_workspace, streamk_workspace_bytes);
        nb::gil_scoped_release release;
        launch(g, to_stream(stream));
      },
      nb::arg("a"), nb::arg("b"), nb::arg("preact"), nb::arg("dpreact"), nb::arg("postact").none(),
      nb::arg("activation") = default_act, nb::arg("stream") = 0, nb::arg("tuned") = false,
      nb::arg("tile_counter") = 0, nb::arg("workspace") = 0, nb::arg("workspace_bytes") = 0,
      nb::arg("streamk_workspace") = 0, nb::arg("streamk_workspace_bytes") = 0,
      (std::string(what) + problem + empty + kStreamKDoc + kTensorDoc +
       "Raises ValueError for a bad or not yet supported argument, RuntimeError for a CUDA error.")
          .c_str());
}

}  // namespace

void bind_gemm_act(nb::module_& m) {
  m.def(
      "gemm_act_can_implement",
      [](const OptTensor& a, const OptTensor& b, const OptTensor& c, const OptTensor& preact,
         const OptTensor& postact, const std::string& activation, double alpha, double beta,
         const OptTensor& bias_row, const OptTensor& bias_col) {
        quack::GemmActArgs g = act_args(a, b, c, preact, postact, activation, alpha, beta, false, 0, bias_row, bias_col);
        nb::gil_scoped_release release;
        quack::can_implement(g);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("c").none(), nb::arg("preact").none(), nb::arg("postact"),
      nb::arg("activation") = "identity", nb::arg("alpha") = 1.0, nb::arg("beta") = 0.0,
      nb::arg("bias_row").none() = nb::none(), nb::arg("bias_col").none() = nb::none(),
      (std::string("Validates gemm_act arguments (quack::can_implement) without any CUDA call;\n"
                   "returns None or raises ValueError whose message starts with 'gemm_act: '. The\n"
                   "problem:\n") +
       kActDoc + kTensorDoc)
          .c_str());

  m.def(
      "gemm_act_workspace_size",
      [](const OptTensor& a, const OptTensor& b, const OptTensor& c, const OptTensor& preact,
         const OptTensor& postact, const std::string& activation, double alpha, double beta,
         const OptTensor& bias_row, const OptTensor& bias_col) {
        quack::GemmActArgs g = act_args(a, b, c, preact, postact, activation, alpha, beta, false, 0, bias_row, bias_col);
        nb::gil_scoped_release release;
        return quack::gemm_workspace_size(g);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("c").none(), nb::arg("preact").none(), nb::arg("postact"),
      nb::arg("activation") = "identity", nb::arg("alpha") = 1.0, nb::arg("beta") = 0.0,
      nb::arg("bias_row").none() = nb::none(), nb::arg("bias_col").none() = nb::none(),
      "Bytes of workspace gemm_act needs for these arguments (quack::gemm_workspace_size): the\n"
      "padded copies of a and b where TMA cannot address them, 0 otherwise. Validates like\n"
      "gemm_act_can_implement (ValueError).");

  m.def(
      "gemm_act",
      [](const OptTensor& a, const OptTensor& b, const OptTensor& c, const OptTensor& preact,
         const OptTensor& postact, const std::string& activation, double alpha, double beta, uintptr_t stream,
         bool tuned, uintptr_t tile_counter, uintptr_t workspace, size_t workspace_bytes, const OptTensor& bias_row,
         const OptTensor& bias_col, uintptr_t streamk_workspace, size_t streamk_workspace_bytes) {
        quack::GemmActArgs g =
            act_args(a, b, c, preact, postact, activation, alpha, beta, tuned, tile_counter, bias_row, bias_col);
        set_gemm_workspaces(g, workspace, workspace_bytes, streamk_workspace, streamk_workspace_bytes);
        nb::gil_scoped_release release;
        quack::gemm_act(g, to_stream(stream));
      },
      nb::arg("a"), nb::arg("b"), nb::arg("c").none(), nb::arg("preact").none(), nb::arg("postact"),
      nb::arg("activation") = "identity", nb::arg("alpha") = 1.0, nb::arg("beta") = 0.0,
      nb::arg("stream") = 0, nb::arg("tuned") = false, nb::arg("tile_counter") = 0, nb::arg("workspace") = 0,
      nb::arg("workspace_bytes") = 0, nb::arg("bias_row").none() = nb::none(), nb::arg("bias_col").none() = nb::none(),
      nb::arg("streamk_workspace") = 0, nb::arg("streamk_workspace_bytes") = 0,
      (std::string("GEMM with a fused activation (quack::gemm_act), written into preact (when\n"
                   "given) and postact on the given stream:\n") +
       kActDoc +
       "M = 0, N = 0 or L = 0: nothing launched. K = 0: preact = beta * c (zeros without c).\n" +
       kStreamKDoc + kTensorDoc + "Raises ValueError for a bad or not yet supported argument, RuntimeError for a CUDA error.")
          .c_str());

  def_grad_op<quack::GemmDActArgs>(
      m, "gemm_dact", "identity", dact_args, quack::gemm_dact, kDActDoc,
      "Activation gradient fused into a GEMM (quack::gemm_dact), written into dpreact\n"
      "and postact (when given) on the given stream:\n",
      "M = 0, N = 0 or L = 0: nothing launched. K = 0: dpreact = 0, postact = act(preact).\n");

  m.def(
      "gemm_gated_can_implement",
      [](const OptTensor& a, const OptTensor& b, const OptTensor& c, const OptTensor& preact,
         const OptTensor& postact, const std::string& activation, double alpha, double beta, bool concat_layout,
         const OptTensor& bias_row, const OptTensor& bias_col) {
        quack::GemmGatedArgs g =
            gated_args(a, b, c, preact, postact, activation, alpha, beta, concat_layout, false, 0, bias_row, bias_col);
        nb::gil_scoped_release release;
        quack::can_implement(g);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("c").none(), nb::arg("preact").none(), nb::arg("postact"),
      nb::arg("activation") = "swiglu", nb::arg("alpha") = 1.0, nb::arg("beta") = 0.0,
      nb::arg("concat_layout") = false, nb::arg("bias_row").none() = nb::none(),
      nb::arg("bias_col").none() = nb::none(),
      (std::string("Validates gemm_gated arguments (quack::can_implement) without any CUDA call;\n"
                   "returns None or raises ValueError whose message starts with 'gemm_gated: '. The\n"
                   "problem:\n") +
       kGatedDoc + kTensorDoc)
          .c_str());

  m.def(
      "gemm_gated_workspace_size",
      [](const OptTensor& a, const OptTensor& b, const OptTensor& c, const OptTensor& preact,
         const OptTensor& postact, const std::string& activation, double alpha, double beta, bool concat_layout,
         const OptTensor& bias_row, const OptTensor& bias_col) {
        quack::GemmGatedArgs g =
            gated_args(a, b, c, preact, postact, activation, alpha, beta, concat_layout, false, 0, bias_row, bias_col);
        nb::gil_scoped_release release;
        return quack::gemm_workspace_size(g);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("c").none(), nb::arg("preact").none(), nb::arg("postact"),
      nb::arg("activation") = "swiglu", nb::arg("alpha") = 1.0, nb::arg("beta") = 0.0,
      nb::arg("concat_layout") = false, nb::arg("bias_row").none() = nb::none(),
      nb::arg("bias_col").none() = nb::none(),
      "Bytes of workspace gemm_gated needs for these arguments (quack::gemm_workspace_size): the\n"
      "padded copies of a and b where TMA cannot address them, 0 otherwise. Validates like\n"
      "gemm_gated_can_implement (ValueError).");

  m.def(
      "gemm_gated",
      [](const OptTensor& a, const OptTensor& b, const OptTensor& c, const OptTensor& preact,
         const OptTensor& postact, const std::string& activation, double alpha, double beta, bool concat_layout,
         uintptr_t stream, bool tuned, uintptr_t tile_counter, uintptr_t workspace, size_t workspace_bytes,
         const OptTensor& bias_row, const OptTensor& bias_col, uintptr_t streamk_workspace,
         size_t streamk_workspace_bytes) {
        quack::GemmGatedArgs g = gated_args(a, b, c, preact, postact, activation, alpha, beta, concat_layout, tuned,
                                            tile_counter, bias_row, bias_col);
        set_gemm_workspaces(g, workspace, workspace_bytes, streamk_workspace, streamk_workspace_bytes);
        nb::gil_scoped_release release;
        quack::gemm_gated(g, to_stream(stream));
      },
      nb::arg("a"), nb::arg("b"), nb::arg("c").none(), nb::arg("preact").none(), nb::arg("postact"),
      nb::arg("activation") = "swiglu", nb::arg("alpha") = 1.0, nb::arg("beta") = 0.0,
      nb::arg("concat_layout") = false, nb::arg("stream") = 0, nb::arg("tuned") = false,
      nb::arg("tile_counter") = 0, nb::arg("workspace") = 0, nb::arg("workspace_bytes") = 0,
      nb::arg("bias_row").none() = nb::none(), nb::arg("bias_col").none() = nb::none(),
      nb::arg("streamk_workspace") = 0, nb::arg("streamk_workspace_bytes") = 0,
      (std::string("GEMM with a fused gated activation (quack::gemm_gated), written into preact (when\n"
                   "given) and postact on the given stream:\n") +
       kGatedDoc + "M = 0, N = 0 or L = 0: nothing launched. K = 0: preact = beta * c + bias.\n" + kStreamKDoc +
       kTensorDoc +
       "Raises ValueError for a bad or not yet supported argument, RuntimeError for a CUDA error.")
          .c_str());

  const char* kRotaryDoc =
      "d = rot(alpha * a @ b): for each row m (position t = m % seqlen) and column pair (n, n+1),\n"
      "n even, n < rotary_cols, p = (n % head_dim) / 2:\n"
      "  d[m, n] = y[m, n] * cos[t, p] - y[m, n+1] * sin[t, p]\n"
      "  d[m, n+1] = y[m, n+1] * cos[t, p] + y[m, n] * sin[t, p]\n"
      "columns n >= rotary_cols as the plain GEMM; fp32 math, one rounding. a: (M, K) bf16\n"
      "row-major; b: (K, N) bf16 column-major (W.T); d: (M, N) bf16 row-major; cos, sin:\n"
      "(S_ro >= seqlen, head_dim / 2) fp32, unit column stride. head_dim even, N and\n"
      "rotary_cols multiples of head_dim, M a multiple of seqlen.\n";
  m.def(
      "gemm_rotary_workspace_size",
      [](const OptTensor& a, const OptTensor& b, const OptTensor& d, const OptTensor& cos, const OptTensor& sin,
         int64_t rotary_cols, int64_t head_dim, int64_t seqlen, double alpha) {
        const quack::GemmRotaryArgs g = rotary_args(a, b, d, cos, sin, rotary_cols, head_dim, seqlen, alpha, false);
        nb::gil_scoped_release release;
        return quack::gemm_workspace_size(g);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("d"), nb::arg("cos"), nb::arg("sin"), nb::arg("rotary_cols"),
      nb::arg("head_dim"), nb::arg("seqlen"), nb::arg("alpha") = 1.0,
      "Bytes of workspace gemm_rotary needs for these arguments (quack::gemm_workspace_size): the\n"
      "padded copies of a and b where TMA cannot address them, 0 otherwise. Raises ValueError\n"
      "for bad arguments (quack::can_implement's checks).");
  m.def(
      "gemm_rotary",
      [](const OptTensor& a, const OptTensor& b, const OptTensor& d, const OptTensor& cos, const OptTensor& sin,
         int64_t rotary_cols, int64_t head_dim, int64_t seqlen, double alpha, uintptr_t stream, bool tuned,
         uintptr_t workspace, size_t workspace_bytes) {
        quack::GemmRotaryArgs g = rotary_args(a, b, d, cos, sin, rotary_cols, head_dim, seqlen, alpha, tuned);
        g.workspace = reinterpret_cast<void*>(workspace);
        g.workspace_bytes = workspace_bytes;
        nb::gil_scoped_release release;
        quack::gemm_rotary(g, to_stream(stream));
      },
      nb::arg("a"), nb::arg("b"), nb::arg("d"), nb::arg("cos"), nb::arg("sin"), nb::arg("rotary_cols"),
      nb::arg("head_dim"), nb::arg("seqlen"), nb::arg("alpha") = 1.0, nb::arg("stream") = 0,
      nb::arg("tuned") = false, nb::arg("workspace") = 0, nb::arg("workspace_bytes") = 0,
      (std::string("GEMM with rotary position embedding (interleaved pairs) in the epilogue\n"
                   "(quack::gemm_rotary), written into d on the given stream:\n") +
       kRotaryDoc + "M = 0 or N = 0: nothing launched. K = 0: d = 0.\n" + kTensorDoc +
       "Raises ValueError for a bad or not yet supported argument, RuntimeError for a CUDA error.")
          .c_str());

  def_grad_op<quack::GemmDGatedArgs>(
      m, "gemm_dgated", "swiglu", dgated_args, quack::gemm_dgated, kDGatedDoc,
      "The gated activation's gradient fused into a GEMM (quack::gemm_dgated), written\n"
      "into dpreact and postact (when given) on the given stream:\n",
      "M = 0, H = 0 or L = 0: nothing launched. K = 0: dpreact = 0, postact = glu(preact).\n");
}
