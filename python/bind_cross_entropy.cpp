// quack_cpp._C: cross-entropy (quack/cross_entropy.h): the forward (loss, lse, z-loss part,
// optionally dx), its workspace size, the backward from lse and the device-side rescale of dx.
// Conversion only (bind_util.h); every check is the C++ API's.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>

#include "bind_util.h"
#include "quack/cross_entropy.h"

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

constexpr const char* kRaises =
    "Raises ValueError for a bad argument (the message names it), RuntimeError for a CUDA\n"
    "error.";

}  // namespace

void bind_cross_entropy(nb::module_& m) {
  m.def(
      "cross_entropy_fwd_workspace_size",
      [](const OptTensor& target, const std::string& reduction, double label_smoothing,
         double z_loss_scale, const OptTensor& weight) {
        const char* fn = "cross_entropy_fwd_workspace_size";
        quack::CrossEntropyFwdArgs a;
        a.target = to_ref(target, fn, "target");
        a.weight = to_ref(weight, fn, "weight");
        a.reduction = to_reduction(reduction, fn);
        a.label_smoothing = static_cast<float>(label_smoothing);
        a.z_loss_scale = static_cast<float>(z_loss_scale);
        return quack::cross_entropy_fwd_workspace_size(a);
      },
      nb::arg("target"), nb::arg("reduction"), nb::arg("label_smoothing") = 0.0,
      nb::arg("z_loss_scale") = 0.0, nb::arg("weight").none() = nb::none(),
      "Bytes of device workspace cross_entropy_fwd needs\n"
      "(quack::cross_entropy_fwd_workspace_size):\n"
      "0 for 'none' without class weights and label smoothing; else 64 + 4·M (+ 4·M with a\n"
      "z-loss) for 'sum'/'mean'. 16-byte aligned, contents irrelevant.");

  m.def(
      "cross_entropy_fwd",
      [](const OptTensor& x, const OptTensor& target, const OptTensor& loss,
         const OptTensor& weight, const OptTensor& lse_partial, const OptTensor& target_logit,
         const OptTensor& lse, const OptTensor& z_loss, const OptTensor& dx, int64_t ignore_index,
         const std::string& reduction, double label_smoothing, double z_loss_scale,
         double logit_softcap, int64_t num_classes, uintptr_t workspace_ptr,
         size_t workspace_bytes, uintptr_t stream, const OptTensor& dx_state,
         const OptTensor& dx_predict) {
        const char* fn = "cross_entropy_fwd";
        quack::CrossEntropyFwdArgs a;
        a.x = to_ref(x, fn, "x");
        a.target = to_ref(target, fn, "target");
        a.loss = to_ref(loss, fn, "loss");
        a.weight = to_ref(weight, fn, "weight");
        a.lse_partial = to_ref(lse_partial, fn, "lse_partial");
        a.target_logit = to_ref(target_logit, fn, "target_logit");
        a.lse = to_ref(lse, fn, "lse");
        a.z_loss = to_ref(z_loss, fn, "z_loss");
        a.dx = to_ref(dx, fn, "dx");
        a.dx_state = to_ref(dx_state, fn, "dx_state");
        a.dx_predict = to_ref(dx_predict, fn, "dx_predict");
        a.ignore_index = ignore_index;
        a.reduction = to_reduction(reduction, fn);
        a.label_smoothing = static_cast<float>(label_smoothing);
        a.z_loss_scale = static_cast<float>(z_loss_scale);
        a.logit_softcap = static_cast<float>(logit_softcap);
        a.num_classes = num_classes;
        a.workspace = reinterpret_cast<void*>(workspace_ptr);
        a.workspace_bytes = workspace_bytes;
        nb::gil_scoped_release release;
        quack::cross_entropy_fwd(a, to_stream(stream));
      },
      nb::arg("x").none(), nb::arg("target"), nb::arg("loss"),
      nb::arg("weight").none() = nb::none(),
      nb::arg("lse_partial").none() = nb::none(), nb::arg("target_logit").none() = nb::none(),
      nb::arg("lse").none() = nb::none(), nb::arg("z_loss").none() = nb::none(),
      nb::arg("dx").none() = nb::none(), nb::arg("ignore_index") = -100,
      nb::arg("reduction") = "mean", nb::arg("label_smoothing") = 0.0,
      nb::arg("z_loss_scale") = 0.0, nb::arg("logit_softcap") = 0.0,
      nb::arg("num_classes") = -1, nb::arg("workspace_ptr") = 0, nb::arg("workspace_bytes") = 0,
      nb::arg("stream") = 0, nb::arg("dx_state").none() = nb::none(),
      nb::arg("dx_predict").none() = nb::none(),
      (std::string(
           "Cross-entropy forward (quack::cross_entropy_fwd) over the rows of x (M, V):\n"
           "  y = c*tanh(x/c) (softcap c > 0), lse = log sum_j exp(y_j),\n"
           "  loss_i = (1-eps)*w[t]*(lse - y_t) + eps/V * sum_j w_j*(lse - y_j) + zs*lse^2\n"
           "ignored rows 0; a target outside [0, V) that is not ignore_index: NaN row.\n"
           "reduction 'none' writes loss (M); 'sum'/'mean' write loss (1) (mean: the CE part over\n"
           "the summed class weights of the counted rows, the z part over their count; on the\n"
           "device). lse (M), z_loss ((M) or (1)) optional. dx (M, V) optional: the gradient for\n"
           "grad_output 1 (may be x itself: in place). lse_partial (M, K) fp32/fp16/bf16 and\n"
           "target_logit (M): see the C++ header. Workspace: cross_entropy_fwd_workspace_size bytes.\n"
           "dx_state (16) fp32 (with dx, 'sum'/'mean'): what cross_entropy_train_bwd needs;\n"
           "dx_predict (1) int32 (with dx_state): 0 on the device: dx is not written.\n") +
       quack_py::kTensorDoc + kRaises)
          .c_str());

  m.def(
      "cross_entropy_bwd",
      [](const OptTensor& x, const OptTensor& target, const OptTensor& lse,
         const OptTensor& dloss, const OptTensor& dx, const OptTensor& weight,
         int64_t ignore_index, double label_smoothing, double z_loss_scale, double logit_softcap,
         uintptr_t stream) {
        const char* fn = "cross_entropy_bwd";
        quack::CrossEntropyBwdArgs a;
        a.x = to_ref(x, fn, "x");
        a.target = to_ref(target, fn, "target");
        a.lse = to_ref(lse, fn, "lse");
        a.dloss = to_ref(dloss, fn, "dloss");
        a.dx = to_ref(dx, fn, "dx");
        a.weight = to_ref(weight, fn, "weight");
        a.ignore_index = ignore_index;
        a.label_smoothing = static_cast<float>(label_smoothing);
        a.z_loss_scale = static_cast<float>(z_loss_scale);
        a.logit_softcap = static_cast<float>(logit_softcap);
        nb::gil_scoped_release release;
        quack::cross_entropy_bwd(a, to_stream(stream));
      },
      nb::arg("x"), nb::arg("target"), nb::arg("lse"), nb::arg("dloss"), nb::arg("dx"),
      nb::arg("weight").none() = nb::none(), nb::arg("ignore_index") = -100,
      nb::arg("label_smoothing") = 0.0, nb::arg("z_loss_scale") = 0.0,
      nb::arg("logit_softcap") = 0.0, nb::arg("stream") = 0,
      (std::string("Cross-entropy backward from lse (quack::cross_entropy_bwd) into dx (M, V):\n"
                   "dx_ij = dloss_i * d loss_i / d x_ij with the forward's options; dloss\n"
                   "(M), any stride including 0, or (1) for every row; dx may be x itself.\n") +
       quack_py::kTensorDoc + kRaises)
          .c_str());

  m.def(
      "cross_entropy_scale_grad",
      [](const OptTensor& dx, const OptTensor& grad_output, uintptr_t stream) {
        const char* fn = "cross_entropy_scale_grad";
        quack::CrossEntropyScaleGradArgs a;
        a.dx = to_ref(dx, fn, "dx");
        a.grad_output = to_ref(grad_output, fn, "grad_output");
        nb::gil_scoped_release release;
        quack::cross_entropy_scale_grad(a, to_stream(stream));
      },
      nb::arg("dx"), nb::arg("grad_output"), nb::arg("stream") = 0,
      (std::string("dx *= grad_output[0] in place (quack::cross_entropy_scale_grad), unless\n"
                   "grad_output[0] == 1, decided on the device (then dx is not touched).\n"
                   "dx (M, V), grad_output (1).\n") +
       quack_py::kTensorDoc + kRaises)
          .c_str());

  m.def(
      "cross_entropy_train_bwd",
      [](const OptTensor& x, const OptTensor& target, const OptTensor& lse,
         const OptTensor& grad_output, const OptTensor& dx, const OptTensor& dx_state,
         const OptTensor& dx_out, const OptTensor& dx_predict, const OptTensor& weight,
         int64_t ignore_index, double label_smoothing, double z_loss_scale, double logit_softcap,
         uintptr_t stream) {
        const char* fn = "cross_entropy_train_bwd";
        quack::CrossEntropyTrainBwdArgs a;
        a.x = to_ref(x, fn, "x");
        a.target = to_ref(target, fn, "target");
        a.lse = to_ref(lse, fn, "lse");
        a.grad_output = to_ref(grad_output, fn, "grad_output");
        a.dx = to_ref(dx, fn, "dx");
        a.dx_state = to_ref(dx_state, fn, "dx_state");
        a.dx_out = to_ref(dx_out, fn, "dx_out");
        a.dx_predict = to_ref(dx_predict, fn, "dx_predict");
        a.weight = to_ref(weight, fn, "weight");
        a.ignore_index = ignore_index;
        a.label_smoothing = static_cast<float>(label_smoothing);
        a.z_loss_scale = static_cast<float>(z_loss_scale);
        a.logit_softcap = static_cast<float>(logit_softcap);
        nb::gil_scoped_release release;
        quack::cross_entropy_train_bwd(a, to_stream(stream));
      },
      nb::arg("x"), nb::arg("target"), nb::arg("lse"), nb::arg("grad_output"), nb::arg("dx"),
      nb::arg("dx_state"), nb::arg("dx_out").none() = nb::none(),
      nb::arg("dx_predict").none() = nb::none(), nb::arg("weight").none() = nb::none(),
      nb::arg("ignore_index") = -100, nb::arg("label_smoothing") = 0.0,
      nb::arg("z_loss_scale") = 0.0, nb::arg("logit_softcap") = 0.0, nb::arg("stream") = 0,
      (std::string("Training backward of a forward given dx and dx_state\n"
                   "(quack::cross_entropy_train_bwd): dx_out = grad_output*dx where the forward\n"
                   "wrote dx, else dx recomputed from x, target, lse; decided on the device.\n"
                   "dx_out None: dx in place. dx_predict (1) int32: set to (grad_output == 1).\n") +
       quack_py::kTensorDoc + kRaises)
          .c_str());
}
