// quack_cpp._C: linear + cross-entropy (quack/linear_cross_entropy.h): the chunk rule, the
// forward (loss, lse, and the gradients for grad_output 1) and the backward from lse with their
// workspace sizes, and the device-side rescale of the gradients. Conversion only (bind_util.h);
// every check is the C++ API's.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>

#include "bind_util.h"
#include "quack/linear_cross_entropy.h"

namespace nb = nanobind;

namespace {

using quack_py::OptTensor;
using quack_py::to_ref;
using quack_py::to_stream;

quack::Reduction to_reduction(const std::string& r, const char* fn) {
  if (r == "none") return quack::Reduction::kNone;
  if (r == "sum") return quack::Reduction::kSum;
  if (r == "mean") return quack::Reduction::kMean;
  throw quack::InvalidArgument(std::string(fn) + ": reduction is '" + r +
                               "', expected 'none', 'sum' or 'mean'");
}

quack::LinearCrossEntropyMode to_mode(bool low_memory) {
  return low_memory ? quack::LinearCrossEntropyMode::kLowMemory
                    : quack::LinearCrossEntropyMode::kDefault;
}

struct FwdIn {
  OptTensor x, weight, bias, target, loss, lse, z_loss, dx, dweight, dbias;
};

quack::LinearCrossEntropyFwdArgs fwd_args(const char* fn, const FwdIn& t, bool accumulate,
                                          int64_t ignore_index, const std::string& reduction,
                                          double eps, double zs, double cap, bool low_memory,
                                          int64_t chunk_size, int64_t vocab_chunk_size) {
  quack::LinearCrossEntropyFwdArgs a;
  a.x = to_ref(t.x, fn, "x");
  a.weight = to_ref(t.weight, fn, "weight");
  a.bias = to_ref(t.bias, fn, "bias");
  a.target = to_ref(t.target, fn, "target");
  a.loss = to_ref(t.loss, fn, "loss");
  a.lse = to_ref(t.lse, fn, "lse");
  a.z_loss = to_ref(t.z_loss, fn, "z_loss");
  a.dx = to_ref(t.dx, fn, "dx");
  a.dweight = to_ref(t.dweight, fn, "dweight");
  a.dbias = to_ref(t.dbias, fn, "dbias");
  a.accumulate = accumulate;
  a.ignore_index = ignore_index;
  a.reduction = to_reduction(reduction, fn);
  a.label_smoothing = static_cast<float>(eps);
  a.z_loss_scale = static_cast<float>(zs);
  a.logit_softcap = static_cast<float>(cap);
  a.mode = to_mode(low_memory);
  a.chunk_size = chunk_size;
  a.vocab_chunk_size = vocab_chunk_size;
  return a;
}

quack::LinearCrossEntropyBwdArgs bwd_args(
    const char* fn, const OptTensor& x, const OptTensor& weight, const OptTensor& bias,
    const OptTensor& target, const OptTensor& lse, const OptTensor& dloss, const OptTensor& dx,
    const OptTensor& dweight, const OptTensor& dbias, bool accumulate, int64_t ignore_index,
    double eps, double zs, double cap, bool low_memory, int64_t vocab_chunk_size) {
  quack::LinearCrossEntropyBwdArgs a;
  a.x = to_ref(x, fn, "x");
  a.weight = to_ref(weight, fn, "weight");
  a.bias = to_ref(bias, fn, "bias");
  a.target = to_ref(target, fn, "target");
  a.lse = to_ref(lse, fn, "lse");
  a.dloss = to_ref(dloss, fn, "dloss");
  a.dx = to_ref(dx, fn, "dx");
  a.dweight = to_ref(dweight, fn, "dweight");
  a.dbias = to_ref(dbias, fn, "dbias");
  a.accumulate = accumulate;
  a.ignore_index = ignore_index;
  a.label_smoothing = static_cast<float>(eps);
  a.z_loss_scale = static_cast<float>(zs);
  a.logit_softcap = static_cast<float>(cap);
  a.mode = to_mode(low_memory);
  a.vocab_chunk_size = vocab_chunk_size;
  return a;
}

constexpr const char* kRaises =
    "Raises ValueError for a bad argument (the message names it), RuntimeError for a CUDA\n"
    "error.";

}  // namespace

void bind_linear_cross_entropy(nb::module_& m) {
  m.def(
      "linear_cross_entropy_chunk_size",
      [](int64_t T, int64_t D, int64_t V, int x_dtype, bool low_memory, bool need_dweight,
         size_t free_bytes) {
        return quack::linear_cross_entropy_chunk_size(T, D, V, static_cast<quack::DType>(x_dtype),
                                                      to_mode(low_memory), need_dweight,
                                                      free_bytes);
      },
      nb::arg("T"), nb::arg("D"), nb::arg("V"), nb::arg("x_dtype") = 2,
      nb::arg("low_memory") = false, nb::arg("need_dweight") = true, nb::arg("free_bytes") = 0,
      "Tokens per chunk of linear_cross_entropy_fwd for chunk_size = 0\n"
      "(quack::linear_cross_entropy_chunk_size): from T, D, V, x's dtype code, the mode, whether\n"
      "dweight is computed and the free device memory (0: unknown).");

  m.def(
      "linear_cross_entropy_fwd_workspace_size",
      [](const OptTensor& x, const OptTensor& weight, const OptTensor& bias,
         const OptTensor& target, const OptTensor& loss, const OptTensor& lse,
         const OptTensor& z_loss, const OptTensor& dx, const OptTensor& dweight,
         const OptTensor& dbias, bool accumulate, int64_t ignore_index,
         const std::string& reduction, double eps, double zs, double cap, bool low_memory,
         int64_t chunk_size, int64_t vocab_chunk_size) {
        const char* fn = "linear_cross_entropy_fwd_workspace_size";
        return quack::linear_cross_entropy_fwd_workspace_size(fwd_args(
            fn, FwdIn{x, weight, bias, target, loss, lse, z_loss, dx, dweight, dbias}, accumulate,
            ignore_index, reduction, eps, zs, cap, low_memory, chunk_size, vocab_chunk_size));
      },
      nb::arg("x"), nb::arg("weight"), nb::arg("bias").none(), nb::arg("target"), nb::arg("loss"),
      nb::arg("lse").none() = nb::none(), nb::arg("z_loss").none() = nb::none(),
      nb::arg("dx").none() = nb::none(), nb::arg("dweight").none() = nb::none(),
      nb::arg("dbias").none() = nb::none(), nb::arg("accumulate") = false,
      nb::arg("ignore_index") = -100, nb::arg("reduction") = "mean",
      nb::arg("label_smoothing") = 0.0, nb::arg("z_loss_scale") = 0.0,
      nb::arg("logit_softcap") = 0.0, nb::arg("low_memory") = false, nb::arg("chunk_size") = 0,
      nb::arg("vocab_chunk_size") = 0,
      "Bytes of device workspace linear_cross_entropy_fwd needs for these arguments\n"
      "(quack::linear_cross_entropy_fwd_workspace_size; validates them as the call does).");

  m.def(
      "linear_cross_entropy_fwd",
      [](const OptTensor& x, const OptTensor& weight, const OptTensor& bias,
         const OptTensor& target, const OptTensor& loss, const OptTensor& lse,
         const OptTensor& z_loss, const OptTensor& dx, const OptTensor& dweight,
         const OptTensor& dbias, bool accumulate, int64_t ignore_index,
         const std::string& reduction, double eps, double zs, double cap, bool low_memory,
         int64_t chunk_size, int64_t vocab_chunk_size, uintptr_t workspace_ptr,
         size_t workspace_bytes, uintptr_t stream) {
        const char* fn = "linear_cross_entropy_fwd";
        quack::LinearCrossEntropyFwdArgs a = fwd_args(
            fn, FwdIn{x, weight, bias, target, loss, lse, z_loss, dx, dweight, dbias}, accumulate,
            ignore_index, reduction, eps, zs, cap, low_memory, chunk_size, vocab_chunk_size);
        a.workspace = reinterpret_cast<void*>(workspace_ptr);
        a.workspace_bytes = workspace_bytes;
        nb::gil_scoped_release release;
        quack::linear_cross_entropy_fwd(a, to_stream(stream));
      },
      nb::arg("x"), nb::arg("weight"), nb::arg("bias").none(), nb::arg("target"), nb::arg("loss"),
      nb::arg("lse").none() = nb::none(), nb::arg("z_loss").none() = nb::none(),
      nb::arg("dx").none() = nb::none(), nb::arg("dweight").none() = nb::none(),
      nb::arg("dbias").none() = nb::none(), nb::arg("accumulate") = false,
      nb::arg("ignore_index") = -100, nb::arg("reduction") = "mean",
      nb::arg("label_smoothing") = 0.0, nb::arg("z_loss_scale") = 0.0,
      nb::arg("logit_softcap") = 0.0, nb::arg("low_memory") = false, nb::arg("chunk_size") = 0,
      nb::arg("vocab_chunk_size") = 0, nb::arg("workspace_ptr") = 0, nb::arg("workspace_bytes") = 0,
      nb::arg("stream") = 0,
      (std::string(
           "Linear + cross-entropy forward (quack::linear_cross_entropy_fwd): z = x W^T + bias,\n"
           "loss = cross_entropy(z, target) with cross_entropy_fwd's options (no class weights),\n"
           "chunk by chunk without the (T, V) logits; lse (T), z_loss optional; dx (T, D),\n"
           "dweight (V, D), dbias (V) optional: the gradients for grad_output 1 (accumulate: "
           "added\n"
           "into dweight and dbias). x bfloat16 (T, D) and weight (V, D) row-major with 16-byte\n"
           "rows. low_memory: no fp32 accumulator spans the weight. chunk_size tokens per chunk,\n"
           "vocab_chunk_size columns per slice (0: the rules).\n") +
       quack_py::kTensorDoc + kRaises)
          .c_str());

  m.def(
      "linear_cross_entropy_bwd_workspace_size",
      [](const OptTensor& x, const OptTensor& weight, const OptTensor& bias,
         const OptTensor& target, const OptTensor& lse, const OptTensor& dloss, const OptTensor& dx,
         const OptTensor& dweight, const OptTensor& dbias, bool accumulate, int64_t ignore_index,
         double eps, double zs, double cap, bool low_memory, int64_t vocab_chunk_size) {
        return quack::linear_cross_entropy_bwd_workspace_size(bwd_args(
            "linear_cross_entropy_bwd_workspace_size", x, weight, bias, target, lse, dloss, dx,
            dweight, dbias, accumulate, ignore_index, eps, zs, cap, low_memory, vocab_chunk_size));
      },
      nb::arg("x"), nb::arg("weight"), nb::arg("bias").none(), nb::arg("target"), nb::arg("lse"),
      nb::arg("dloss"), nb::arg("dx").none() = nb::none(), nb::arg("dweight").none() = nb::none(),
      nb::arg("dbias").none() = nb::none(), nb::arg("accumulate") = false,
      nb::arg("ignore_index") = -100, nb::arg("label_smoothing") = 0.0,
      nb::arg("z_loss_scale") = 0.0, nb::arg("logit_softcap") = 0.0, nb::arg("low_memory") = false,
      nb::arg("vocab_chunk_size") = 0,
      "Bytes of device workspace linear_cross_entropy_bwd needs\n"
      "(quack::linear_cross_entropy_bwd_workspace_size; validates as the call does).");

  m.def(
      "linear_cross_entropy_bwd",
      [](const OptTensor& x, const OptTensor& weight, const OptTensor& bias,
         const OptTensor& target, const OptTensor& lse, const OptTensor& dloss, const OptTensor& dx,
         const OptTensor& dweight, const OptTensor& dbias, bool accumulate, int64_t ignore_index,
         double eps, double zs, double cap, bool low_memory, int64_t vocab_chunk_size,
         uintptr_t workspace_ptr, size_t workspace_bytes, uintptr_t stream) {
        const char* fn = "linear_cross_entropy_bwd";
        quack::LinearCrossEntropyBwdArgs a =
            bwd_args(fn, x, weight, bias, target, lse, dloss, dx, dweight, dbias, accumulate,
                     ignore_index, eps, zs, cap, low_memory, vocab_chunk_size);
        a.workspace = reinterpret_cast<void*>(workspace_ptr);
        a.workspace_bytes = workspace_bytes;
        nb::gil_scoped_release release;
        quack::linear_cross_entropy_bwd(a, to_stream(stream));
      },
      nb::arg("x"), nb::arg("weight"), nb::arg("bias").none(), nb::arg("target"), nb::arg("lse"),
      nb::arg("dloss"), nb::arg("dx").none() = nb::none(), nb::arg("dweight").none() = nb::none(),
      nb::arg("dbias").none() = nb::none(), nb::arg("accumulate") = false,
      nb::arg("ignore_index") = -100, nb::arg("label_smoothing") = 0.0,
      nb::arg("z_loss_scale") = 0.0, nb::arg("logit_softcap") = 0.0, nb::arg("low_memory") = false,
      nb::arg("vocab_chunk_size") = 0, nb::arg("workspace_ptr") = 0, nb::arg("workspace_bytes") = 0,
      nb::arg("stream") = 0,
      (std::string("Linear + cross-entropy backward from lse (quack::linear_cross_entropy_bwd):\n"
                   "R = dloss_i * d loss_i / d z_i, dx = R W, dweight (+)= R^T x, dbias (+)=\n"
                   "sum_i R_i, by vocabulary slices (the logits recomputed). dloss (T) or (1).\n") +
       quack_py::kTensorDoc + kRaises)
          .c_str());

  m.def(
      "linear_cross_entropy_scale_grad",
      [](const OptTensor& dx, const OptTensor& dweight, const OptTensor& dbias,
         const OptTensor& grad_output, uintptr_t stream) {
        const char* fn = "linear_cross_entropy_scale_grad";
        quack::LinearCrossEntropyScaleGradArgs a;
        a.dx = to_ref(dx, fn, "dx");
        a.dweight = to_ref(dweight, fn, "dweight");
        a.dbias = to_ref(dbias, fn, "dbias");
        a.grad_output = to_ref(grad_output, fn, "grad_output");
        nb::gil_scoped_release release;
        quack::linear_cross_entropy_scale_grad(a, to_stream(stream));
      },
      nb::arg("dx").none(), nb::arg("dweight").none(), nb::arg("dbias").none(),
      nb::arg("grad_output"), nb::arg("stream") = 0,
      (std::string("dx, dweight, dbias *= grad_output[0] in place\n"
                   "(quack::linear_cross_entropy_scale_grad), unless grad_output[0] == 1 (decided\n"
                   "on the device). Absent tensors (None) are skipped.\n") +
       quack_py::kTensorDoc + kRaises)
          .c_str());
}
