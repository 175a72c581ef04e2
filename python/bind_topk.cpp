// quack_cpp._C: top-k forward and backward (quack/topk.h). Conversion only (bind_util.h); every
// check is the C++ API's.
#include <nanobind/nanobind.h>

#include <string>

#include "bind_util.h"
#include "quack/topk.h"

namespace nb = nanobind;

namespace {

using quack_py::OptTensor;
using quack_py::to_ref;
using quack_py::to_stream;

constexpr const char* kFwd = "topk_fwd";

quack::TopkFwdArgs fwd_args(const OptTensor& x, const OptTensor& values, const OptTensor& indices,
                            const OptTensor& lse, bool largest, bool sorted, int softmax,
                            const char* fn) {
  quack::TopkFwdArgs a;
  a.x = to_ref(x, fn, "x");
  a.values = to_ref(values, fn, "values");
  a.indices = to_ref(indices, fn, "indices");
  a.lse = to_ref(lse, fn, "lse");
  a.largest = largest;
  a.sorted = sorted;
  a.softmax = static_cast<quack::TopkSoftmax>(softmax);
  return a;
}

constexpr const char* kFwdDoc =
    "Top-k over the last dimension (quack::topk_fwd), written into values and indices:\n"
    "for each row of x (M, N), the k best elements, k = values.shape[1] (0 <= k <= N).\n"
    "Order: best first (largest: descending; smallest: ascending); NaN is larger than every\n"
    "number (as torch.topk); equal values keep the lower column first; sorted=False allows any\n"
    "order (the kernels return them sorted). softmax: 0 none; 1 the softmax over the k\n"
    "selected values; 2 the softmax over the whole row at the selected columns, with the\n"
    "row's log-sum-exp written into lse (M,) float32 when given (topk_bwd needs it).\n"
    "x: (M, N) fp32/fp16/bf16, any non-negative strides; values: (M, k) fp32/fp16/bf16;\n"
    "indices: (M, k) int64 or int32; outputs must not overlap x or each other. k <= 256 needs\n"
    "no workspace; k > 256 sorts each row in a workspace of topk_fwd_workspace_size bytes\n"
    "(256-byte aligned, on x's device; overwritten). M = 0 or k = 0 launches nothing.\n";

}  // namespace

void bind_topk(nb::module_& m) {
  // topk_ops reads it once at import to skip the workspace-size call for k without a workspace
  // (the eager fast path's host time), rather than keeping a copy of the C++ constant.
  m.attr("topk_max_k_without_workspace") = quack::kTopkMaxKWithoutWorkspace;

  m.def(
      "topk_fwd_workspace_size",
      [](const OptTensor& x, const OptTensor& values, const OptTensor& indices,
         const OptTensor& lse, bool largest, bool sorted, int softmax) {
        const quack::TopkFwdArgs a =
            fwd_args(x, values, indices, lse, largest, sorted, softmax, "topk_fwd_workspace_size");
        nb::gil_scoped_release release;
        return quack::topk_fwd_workspace_size(a);
      },
      nb::arg("x"), nb::arg("values"), nb::arg("indices"), nb::arg("lse").none() = nb::none(),
      nb::arg("largest") = true, nb::arg("sorted") = true, nb::arg("softmax") = 0,
      (std::string("Bytes of device workspace topk_fwd needs for these arguments: 0 for\n"
                   "k <= 256; for k > 256 the segmented sort's buffers (~16 bytes per element of\n"
                   "x) and CUB's temporary storage (asks x's device).\n") +
       quack_py::kTensorDoc + "Raises like topk_fwd.")
          .c_str());

  m.def(
      "topk_fwd",
      [](const OptTensor& x, const OptTensor& values, const OptTensor& indices,
         const OptTensor& lse, bool largest, bool sorted, int softmax, uintptr_t workspace_ptr,
         size_t workspace_bytes, uintptr_t stream) {
        const quack::TopkFwdArgs a =
            fwd_args(x, values, indices, lse, largest, sorted, softmax, kFwd);
        nb::gil_scoped_release release;
        quack::topk_fwd(a, reinterpret_cast<void*>(workspace_ptr), workspace_bytes,
                        to_stream(stream));
      },
      nb::arg("x"), nb::arg("values"), nb::arg("indices"), nb::arg("lse").none() = nb::none(),
      nb::arg("largest") = true, nb::arg("sorted") = true, nb::arg("softmax") = 0,
      nb::arg("workspace_ptr") = 0, nb::arg("workspace_bytes") = 0, nb::arg("stream") = 0,
      (std::string(kFwdDoc) + quack_py::kTensorDoc +
       "Raises ValueError for a bad argument (the message names it; a too-small workspace\n"
       "too), RuntimeError for a CUDA error.")
          .c_str());

  m.def(
      "topk_bwd",
      [](const OptTensor& dvalues, const OptTensor& indices, const OptTensor& values,
         const OptTensor& x, const OptTensor& lse, const OptTensor& dx, int softmax,
         uintptr_t stream) {
        const char* fn = "topk_bwd";
        quack::TopkBwdArgs a;
        a.dvalues = to_ref(dvalues, fn, "dvalues");
        a.indices = to_ref(indices, fn, "indices");
        a.values = to_ref(values, fn, "values");
        a.x = to_ref(x, fn, "x");
        a.lse = to_ref(lse, fn, "lse");
        a.dx = to_ref(dx, fn, "dx");
        a.softmax = static_cast<quack::TopkSoftmax>(softmax);
        nb::gil_scoped_release release;
        quack::topk_bwd(a, to_stream(stream));
      },
      nb::arg("dvalues"), nb::arg("indices"), nb::arg("values").none(), nb::arg("x").none(),
      nb::arg("lse").none(), nb::arg("dx"), nb::arg("softmax") = 0, nb::arg("stream") = 0,
      (std::string("Top-k backward (quack::topk_bwd), written into dx (M, N): every element\n"
                   "of dx is written. softmax 0: dx[i, c_ij] = dvalues[i, j], 0 elsewhere;\n"
                   "1: dx[i, c_ij] = p_ij * (dvalues[i, j] - s_i), s_i = sum_j p_ij *\n"
                   "dvalues[i, j], p = values (the forward's); 2: dx[i, n] = y_in * (g_in -\n"
                   "s_i), y = exp(x - lse), g = dvalues scattered to the selected columns, s_i\n"
                   "= sum_j y_ic_ij * dvalues[i, j] (needs x and lse). Indices outside [0, N)\n"
                   "are skipped. fp32 math, one rounding to dx's dtype.\n") +
       quack_py::kTensorDoc +
       "Raises ValueError for a bad argument (the message names it), RuntimeError for a CUDA\n"
       "error.")
          .c_str());
}
