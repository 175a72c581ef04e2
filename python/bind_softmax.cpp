// quack_cpp._C: softmax and log_softmax (quack/softmax.h), forward and backward. Conversion only
// (bind_util.h); every check is the C++ API's.
#include <nanobind/nanobind.h>

#include <string>

#include "bind_util.h"
#include "quack/softmax.h"

namespace nb = nanobind;

namespace {

using quack_py::OptTensor;
using quack_py::to_ref;
using quack_py::to_stream;

quack::SoftmaxFwdArgs fwd_args(const OptTensor& x, const OptTensor& out, const char* fn) {
  quack::SoftmaxFwdArgs a;
  a.x = to_ref(x, fn, "x");
  a.out = to_ref(out, fn, "out");
  return a;
}

quack::SoftmaxBwdArgs bwd_args(const OptTensor& y, const OptTensor& dy, const OptTensor& dx,
                               const char* fn) {
  quack::SoftmaxBwdArgs a;
  a.y = to_ref(y, fn, "y");
  a.dy = to_ref(dy, fn, "dy");
  a.dx = to_ref(dx, fn, "dx");
  return a;
}

constexpr const char* kRaises =
    "M = 0 or N = 0 launches nothing. Raises ValueError for a bad argument (the message names\n"
    "it), RuntimeError for a CUDA error.";

}  // namespace

void bind_softmax(nb::module_& m) {
  m.def(
      "softmax_fwd",
      [](const OptTensor& x, const OptTensor& out, uintptr_t stream) {
        const quack::SoftmaxFwdArgs a = fwd_args(x, out, "softmax_fwd");
        nb::gil_scoped_release release;
        quack::softmax_fwd(a, to_stream(stream));
      },
      nb::arg("x"), nb::arg("out"), nb::arg("stream") = 0,
      (std::string("Softmax over the last dimension (quack::softmax_fwd; QuACK 0.2.0's online\n"
                   "softmax), written into out:\n"
                   "  out[i, j] = exp(x[i, j] - max_k x[i, k]) / sum_k exp(x[i, k] - max_k x[i, k])\n"
                   "x, out: (M, N) fp32/fp16/bf16, any non-negative strides (out: no overlapping\n"
                   "elements; may be x). fp32 math. A row of all -inf gives NaN, as torch.\n") +
       quack_py::kTensorDoc + kRaises)
          .c_str());

  m.def(
      "log_softmax_fwd",
      [](const OptTensor& x, const OptTensor& out, uintptr_t stream) {
        const quack::SoftmaxFwdArgs a = fwd_args(x, out, "log_softmax_fwd");
        nb::gil_scoped_release release;
        quack::log_softmax_fwd(a, to_stream(stream));
      },
      nb::arg("x"), nb::arg("out"), nb::arg("stream") = 0,
      (std::string("log_softmax over the last dimension (quack::log_softmax_fwd), written into out:\n"
                   "  out[i, j] = x[i, j] - max_k x[i, k] - log sum_k exp(x[i, k] - max_k x[i, k])\n"
                   "Tensors and layouts as softmax_fwd.\n") +
       quack_py::kTensorDoc + kRaises)
          .c_str());

  m.def(
      "softmax_bwd",
      [](const OptTensor& y, const OptTensor& dy, const OptTensor& dx, uintptr_t stream) {
        const quack::SoftmaxBwdArgs a = bwd_args(y, dy, dx, "softmax_bwd");
        nb::gil_scoped_release release;
        quack::softmax_bwd(a, to_stream(stream));
      },
      nb::arg("y"), nb::arg("dy"), nb::arg("dx"), nb::arg("stream") = 0,
      (std::string("Softmax backward (quack::softmax_bwd), written into dx; y is the forward's\n"
                   "output:\n"
                   "  dx[i, j] = y[i, j] * (dy[i, j] - sum_k y[i, k] * dy[i, k])\n"
                   "y, dy, dx: (M, N) fp32/fp16/bf16, any non-negative strides (dy may have stride\n"
                   "0; dx: no overlapping elements, may be dy). fp32 math.\n") +
       quack_py::kTensorDoc + kRaises)
          .c_str());

  m.def(
      "log_softmax_bwd",
      [](const OptTensor& y, const OptTensor& dy, const OptTensor& dx, uintptr_t stream) {
        const quack::SoftmaxBwdArgs a = bwd_args(y, dy, dx, "log_softmax_bwd");
        nb::gil_scoped_release release;
        quack::log_softmax_bwd(a, to_stream(stream));
      },
      nb::arg("y"), nb::arg("dy"), nb::arg("dx"), nb::arg("stream") = 0,
      (std::string("log_softmax backward (quack::log_softmax_bwd), written into dx; y is the\n"
                   "forward's output:\n"
                   "  dx[i, j] = dy[i, j] - exp(y[i, j]) * sum_k dy[i, k]\n"
                   "Tensors and layouts as softmax_bwd.\n") +
       quack_py::kTensorDoc + kRaises)
          .c_str());
}
