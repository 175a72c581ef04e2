// quack_cpp._C: LayerNorm (quack/norm.h), forward, backward and the backward's workspace size.
// Conversion only (bind_util.h); every check is the C++ API's.
#include <nanobind/nanobind.h>

#include <string>

#include "bind_util.h"
#include "quack/norm.h"

namespace nb = nanobind;

namespace {

using quack_py::OptTensor;
using quack_py::to_ref;
using quack_py::to_stream;

quack::LayerNormBwdArgs bwd_args(const OptTensor& x, const OptTensor& weight,
                                 const OptTensor& dout, const OptTensor& mean,
                                 const OptTensor& rstd, const OptTensor& dresidual_out,
                                 const OptTensor& dx, const OptTensor& dresidual,
                                 const OptTensor& dweight, const OptTensor& dbias,
                                 double weight_offset, const char* fn) {
  quack::LayerNormBwdArgs a;
  a.x = to_ref(x, fn, "x");
  a.weight = to_ref(weight, fn, "weight");
  a.dout = to_ref(dout, fn, "dout");
  a.mean = to_ref(mean, fn, "mean");
  a.rstd = to_ref(rstd, fn, "rstd");
  a.dresidual_out = to_ref(dresidual_out, fn, "dresidual_out");
  a.dx = to_ref(dx, fn, "dx");
  a.dresidual = to_ref(dresidual, fn, "dresidual");
  a.dweight = to_ref(dweight, fn, "dweight");
  a.dbias = to_ref(dbias, fn, "dbias");
  a.weight_offset = static_cast<float>(weight_offset);
  return a;
}

constexpr const char* kBwdMath =
    "  xhat = (x - mean) * rstd;  g = dout * (weight + weight_offset)  (g = dout without weight)\n"
    "  dh = rstd * (g - mean_j g_j - xhat * mean_j(g_j * xhat_j)) + dresidual_out\n"
    "  dx = dresidual = dh;  dweight = sum_rows dout * xhat;  dbias = sum_rows dout\n";

}  // namespace

void bind_layernorm(nb::module_& m) {
  m.def(
      "layernorm_fwd",
      [](const OptTensor& x, const OptTensor& weight, const OptTensor& bias,
         const OptTensor& residual, const OptTensor& out, const OptTensor& residual_out,
         const OptTensor& mean, const OptTensor& rstd, double eps, double weight_offset,
         uintptr_t stream) {
        const char* fn = "layernorm_fwd";
        quack::LayerNormFwdArgs a;
        a.x = to_ref(x, fn, "x");
        a.weight = to_ref(weight, fn, "weight");
        a.bias = to_ref(bias, fn, "bias");
        a.residual = to_ref(residual, fn, "residual");
        a.out = to_ref(out, fn, "out");
        a.residual_out = to_ref(residual_out, fn, "residual_out");
        a.mean = to_ref(mean, fn, "mean");
        a.rstd = to_ref(rstd, fn, "rstd");
        a.eps = static_cast<float>(eps);
        a.weight_offset = static_cast<float>(weight_offset);
        nb::gil_scoped_release release;
        quack::layernorm_fwd(a, to_stream(stream));
      },
      nb::arg("x"), nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("residual").none(),
      nb::arg("out"), nb::arg("residual_out").none(), nb::arg("mean").none(),
      nb::arg("rstd").none(), nb::arg("eps") = 1e-5, nb::arg("weight_offset") = 0.0,
      nb::arg("stream") = 0,
      (std::string(
           "LayerNorm forward (quack::layernorm_fwd), written into out, residual_out, mean and\n"
           "rstd:\n"
           "  h = x + residual (fp32 sum; x when residual is None)\n"
           "  mean = mean_j h_j;  rstd = 1 / sqrt(mean_j (h_j - mean)^2 + eps)  (biased, stable)\n"
           "  out = (h - mean) * rstd * (weight + weight_offset) + bias;  residual_out = h\n"
           "x, residual, out, residual_out: (M, N) fp32/fp16/bf16, any non-negative strides;\n"
           "weight, bias: (N,) or None; mean, rstd: (M,) float32 or None. M = 0 launches\n"
           "nothing.\n") +
       quack_py::kTensorDoc +
       "Raises ValueError for a bad argument (the message names it), RuntimeError for a CUDA\n"
       "error.")
          .c_str());

  m.def(
      "layernorm_bwd_workspace_size",
      [](const OptTensor& x, const OptTensor& weight, const OptTensor& dout,
         const OptTensor& mean, const OptTensor& rstd, const OptTensor& dresidual_out,
         const OptTensor& dx, const OptTensor& dresidual, const OptTensor& dweight,
         const OptTensor& dbias, double weight_offset) {
        const quack::LayerNormBwdArgs a =
            bwd_args(x, weight, dout, mean, rstd, dresidual_out, dx, dresidual, dweight, dbias,
                     weight_offset, "layernorm_bwd_workspace_size");
        nb::gil_scoped_release release;
        return quack::layernorm_bwd_workspace_size(a);
      },
      nb::arg("x"), nb::arg("weight").none(), nb::arg("dout"), nb::arg("mean"), nb::arg("rstd"),
      nb::arg("dresidual_out").none(), nb::arg("dx"), nb::arg("dresidual").none(),
      nb::arg("dweight").none(), nb::arg("dbias").none(), nb::arg("weight_offset") = 0.0,
      (std::string("Bytes of device workspace layernorm_bwd needs for these arguments (fp32\n"
                   "per-cluster partial sums of dweight and dbias; 0 when neither is asked for\n"
                   "or M = 0). Queries the device (occupancy) but does not synchronise or\n"
                   "allocate.\n") +
       quack_py::kTensorDoc + "Raises like layernorm_bwd.")
          .c_str());

  m.def(
      "layernorm_bwd",
      [](const OptTensor& x, const OptTensor& weight, const OptTensor& dout,
         const OptTensor& mean, const OptTensor& rstd, const OptTensor& dresidual_out,
         const OptTensor& dx, const OptTensor& dresidual, const OptTensor& dweight,
         const OptTensor& dbias, double weight_offset, uintptr_t workspace_ptr,
         size_t workspace_bytes, uintptr_t stream) {
        const quack::LayerNormBwdArgs a =
            bwd_args(x, weight, dout, mean, rstd, dresidual_out, dx, dresidual, dweight, dbias,
                     weight_offset, "layernorm_bwd");
        nb::gil_scoped_release release;
        quack::layernorm_bwd(a, reinterpret_cast<void*>(workspace_ptr), workspace_bytes,
                             to_stream(stream));
      },
      nb::arg("x"), nb::arg("weight").none(), nb::arg("dout"), nb::arg("mean"), nb::arg("rstd"),
      nb::arg("dresidual_out").none(), nb::arg("dx"), nb::arg("dresidual").none(),
      nb::arg("dweight").none(), nb::arg("dbias").none(), nb::arg("weight_offset") = 0.0,
      nb::arg("workspace_ptr") = 0, nb::arg("workspace_bytes") = 0, nb::arg("stream") = 0,
      (std::string("LayerNorm backward (quack::layernorm_bwd). x is the norm's input h, mean and\n"
                   "rstd the forward's:\n") +
       kBwdMath +
       "(dweight, dbias: fp32 accumulation in a fixed order, identical bits run to run). dout\n"
       "may have any strides, 0 included. The workspace (layernorm_bwd_workspace_size bytes,\n"
       "16-byte aligned, on the tensors' device) is overwritten. M = 0 writes dweight = dbias\n"
       "= 0.\n" +
       quack_py::kTensorDoc +
       "Raises ValueError for a bad argument (a too-small workspace too), RuntimeError for a\n"
       "CUDA error.")
          .c_str());
}
