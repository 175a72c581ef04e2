// quack_cpp._C: Python -> C++ API conversion for QuACK-C++ (nanobind). No logic, no CUDA code,
// no torch headers: each tensor arrives as a plain tuple
//
//   (data_ptr: int, dtype_code: int, shape: tuple[int, ...], strides: tuple[int, ...], device: int)
//
// (strides in elements; device = CUDA ordinal, -1 for host memory) or None when absent, and
// becomes a quack::TensorRef. dtype codes are quack::DType: 0 float32, 1 float16, 2 bfloat16,
// 3 int32, 4 int64. Streams are cudaStream_t handles as ints (0: the legacy default stream).
//
// GEMM (quack/gemm.h) is bound the same way: gemm_can_implement and
// gemm take a, b, c (or None), d as tuples plus alpha and beta. One file per further family:
// softmax (quack/softmax.h) bind_softmax.cpp, cross-entropy bind_cross_entropy.cpp, LayerNorm
// bind_layernorm.cpp, gemm_act / gemm_dact (quack/gemm_act.h) bind_gemm_act.cpp, top-k
// (quack/topk.h) bind_topk.cpp, linear + cross-entropy (quack/linear_cross_entropy.h)
// bind_linear_cross_entropy.cpp, rotary (quack/rotary.h) bind_rotary.cpp. The tuple conversion
// is bind_util.h's.
//
// weight_offset (RMSNorm) comes last, after the stream, so positional calls written before it
// keep their meaning.
//
// Errors: quack::InvalidArgument (a std::invalid_argument) -> ValueError, quack::CudaError
// (a std::runtime_error) -> RuntimeError, by nanobind's standard translation.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "bind_util.h"
#include "quack/gemm.h"
#include "quack/quack.h"

namespace nb = nanobind;

using quack_py::kTensorDoc;

void bind_softmax(nb::module_& m);        // bind_softmax.cpp
void bind_cross_entropy(nb::module_& m);  // bind_cross_entropy.cpp
void bind_layernorm(nb::module_& m);      // bind_layernorm.cpp
void bind_linear_cross_entropy(nb::module_& m);  // bind_linear_cross_entropy.cpp
void bind_gemm_act(nb::module_& m);       // bind_gemm_act.cpp
void bind_topk(nb::module_& m);           // bind_topk.cpp
void bind_rotary(nb::module_& m);         // bind_rotary.cpp

namespace {

using quack_py::OptTensor;
using quack_py::to_ref;
using quack_py::set_gemm_workspaces;
using quack_py::to_stream;

quack::RmsNormBwdArgs bwd_args(const OptTensor& x, const OptTensor& weight, const OptTensor& dout,
                               const OptTensor& rstd, const OptTensor& dresidual_out,
                               const OptTensor& dx, const OptTensor& dresidual,
                               const OptTensor& dweight, const OptTensor& dbias,
                               double weight_offset) {
  const char* fn = "rmsnorm_bwd";
  quack::RmsNormBwdArgs a;
  a.weight_offset = static_cast<float>(weight_offset);
  a.x = to_ref(x, fn, "x");
  a.weight = to_ref(weight, fn, "weight");
  a.dout = to_ref(dout, fn, "dout");
  a.rstd = to_ref(rstd, fn, "rstd");
  a.dresidual_out = to_ref(dresidual_out, fn, "dresidual_out");
  a.dx = to_ref(dx, fn, "dx");
  a.dresidual = to_ref(dresidual, fn, "dresidual");
  a.dweight = to_ref(dweight, fn, "dweight");
  a.dbias = to_ref(dbias, fn, "dbias");
  return a;
}

quack::GemmArgs gemm_args(const OptTensor& a, const OptTensor& b, const OptTensor& c,
                          const OptTensor& d, double alpha, double beta,
                          const OptTensor& bias_row = std::nullopt, const OptTensor& bias_col = std::nullopt) {
  const char* fn = "gemm";
  quack::GemmArgs g;
  g.a = to_ref(a, fn, "a");
  g.b = to_ref(b, fn, "b");
  g.c = to_ref(c, fn, "c");
  g.d = to_ref(d, fn, "d");
  g.bias.row = to_ref(bias_row, fn, "bias.row");
  g.bias.col = to_ref(bias_col, fn, "bias.col");
  g.alpha = static_cast<float>(alpha);
  g.beta = static_cast<float>(beta);
  return g;
}

constexpr const char* kGemmDoc =
    "  D[l] = alpha * (A[l] @ B[l]) + beta * C[l]   for each batch l < L\n"
    "fp32 accumulation (WGMMA), one rounding to d's dtype; with beta = 0 or c None, c is never\n"
    "read (NaN in c does not reach d). a: (M, K) or (L, M, K) bf16/fp16; b: (K, N) or (L, K, N),\n"
    "a's dtype; c, d: (M, N) or (L, M, N), d in a's dtype or fp32, c in d's dtype (or fp32 into a bf16 d); all 2-D or all\n"
    "3-D. Layouts, alignment (TMA: 16-byte base, leading and batch strides multiples of 16\n"
    "bytes) and what is not yet supported: see quack/gemm.h, which decides (can_implement).\n"
    "c may be d itself (same pointer, dtype and strides: in place). bias_row: (N,) or (L, N)\n"
    "added to every row (an nn.Linear bias), bias_col: (M,) or (L, M) added to every column;\n"
    "fp32, bf16 or fp16, contiguous, or None (quack::GemmBias). Method: QuACK 0.2.0's\n"
    "GemmSm90 / CUTLASS 3.x sm90 warp-specialised TMA + WGMMA GEMM.\n";

}  // namespace

NB_MODULE(_C, m) {
  m.doc() =
      "QuACK-C++ extension: thin conversion from Python values to the C++ API (quack/norm.h,\n"
      "quack/softmax.h, quack/cross_entropy.h, quack/topk.h, quack/gemm.h).\n"
      "Use quack_cpp.rmsnorm / quack_cpp.ops for torch tensors; these functions take raw\n"
      "pointers and launch on the given stream without synchronising.";

  m.def("version", []() { return std::string(quack::version()); },
        "The C++ library's version, e.g. '0.1.0'.");

  bind_softmax(m);
  bind_cross_entropy(m);
  bind_layernorm(m);
  bind_gemm_act(m);
  bind_topk(m);
  bind_rotary(m);
  bind_linear_cross_entropy(m);

  m.def(
      "rmsnorm_fwd",
      [](const OptTensor& x, const OptTensor& weight, const OptTensor& bias,
         const OptTensor& residual, const OptTensor& out, const OptTensor& residual_out,
         const OptTensor& rstd, double eps, uintptr_t stream, double weight_offset) {
        const char* fn = "rmsnorm_fwd";
        quack::RmsNormFwdArgs a;
        a.weight_offset = static_cast<float>(weight_offset);
        a.x = to_ref(x, fn, "x");
        a.weight = to_ref(weight, fn, "weight");
        a.bias = to_ref(bias, fn, "bias");
        a.residual = to_ref(residual, fn, "residual");
        a.out = to_ref(out, fn, "out");
        a.residual_out = to_ref(residual_out, fn, "residual_out");
        a.rstd = to_ref(rstd, fn, "rstd");
        a.eps = static_cast<float>(eps);
        nb::gil_scoped_release release;
        quack::rmsnorm_fwd(a, to_stream(stream));
      },
      nb::arg("x"), nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("residual").none(),
      nb::arg("out"), nb::arg("residual_out").none(), nb::arg("rstd").none(),
      nb::arg("eps") = 1e-6, nb::arg("stream") = 0, nb::arg("weight_offset") = 0.0,
      (std::string(
           "RMSNorm forward (quack::rmsnorm_fwd; method of QuACK 0.2.0), written into out,\n"
           "residual_out and rstd:\n"
           "  h = x + residual (fp32 sum; x when residual is None)\n"
           "  rstd = 1 / sqrt(mean_j(h_j^2) + eps)\n"
           "  out = h * rstd * (weight + weight_offset) + bias;  residual_out = h\n"
           "(weight None: the factor is 1; weight_offset 1.0: Gemma's zero-centred weights)\n"
           "x, residual, out, residual_out: (M, N) fp32/fp16/bf16, any non-negative strides;\n"
           "weight, bias: (N,); rstd: (M,) float32. M = 0 launches nothing.\n") +
       kTensorDoc +
       "Raises ValueError for a bad argument (the message names it), RuntimeError for a CUDA\n"
       "error.")
          .c_str());

  m.def(
      "rmsnorm_bwd_workspace_size",
      [](const OptTensor& x, const OptTensor& weight, const OptTensor& dout, const OptTensor& rstd,
         const OptTensor& dresidual_out, const OptTensor& dx, const OptTensor& dresidual,
         const OptTensor& dweight, const OptTensor& dbias, double weight_offset) {
        quack::RmsNormBwdArgs a = bwd_args(x, weight, dout, rstd, dresidual_out, dx, dresidual,
                                           dweight, dbias, weight_offset);
        nb::gil_scoped_release release;
        return quack::rmsnorm_bwd_workspace_size(a);
      },
      nb::arg("x"), nb::arg("weight").none(), nb::arg("dout"), nb::arg("rstd"),
      nb::arg("dresidual_out").none(), nb::arg("dx"), nb::arg("dresidual").none(),
      nb::arg("dweight").none(), nb::arg("dbias").none(), nb::arg("weight_offset") = 0.0,
      (std::string("Bytes of device workspace rmsnorm_bwd needs for these arguments (fp32\n"
                   "per-CTA partial sums of dweight and dbias; 0 when neither is asked for).\n"
                   "Queries the device (occupancy) but does not synchronise or allocate.\n") +
       kTensorDoc + "Raises like rmsnorm_bwd.")
          .c_str());

  m.def(
      "rmsnorm_bwd",
      [](const OptTensor& x, const OptTensor& weight, const OptTensor& dout, const OptTensor& rstd,
         const OptTensor& dresidual_out, const OptTensor& dx, const OptTensor& dresidual,
         const OptTensor& dweight, const OptTensor& dbias, uintptr_t workspace_ptr,
         size_t workspace_bytes, uintptr_t stream, double weight_offset) {
        quack::RmsNormBwdArgs a = bwd_args(x, weight, dout, rstd, dresidual_out, dx, dresidual,
                                           dweight, dbias, weight_offset);
        nb::gil_scoped_release release;
        quack::rmsnorm_bwd(a, reinterpret_cast<void*>(workspace_ptr), workspace_bytes,
                           to_stream(stream));
      },
      nb::arg("x"), nb::arg("weight").none(), nb::arg("dout"), nb::arg("rstd"),
      nb::arg("dresidual_out").none(), nb::arg("dx"), nb::arg("dresidual").none(),
      nb::arg("dweight").none(), nb::arg("dbias").none(), nb::arg("workspace_ptr") = 0,
      nb::arg("workspace_bytes") = 0, nb::arg("stream") = 0, nb::arg("weight_offset") = 0.0,
      (std::string(
           "RMSNorm backward (quack::rmsnorm_bwd; QuACK 0.2.0's kernel with the prenorm\n"
           "residual gradient of QuACK >= 0.2.3). x is the norm's input h, rstd the forward's:\n"
           "  xhat = x * rstd;  g = dout * (weight + weight_offset)\n"
           "  dh = rstd * (g - xhat * mean_j(g_j * xhat_j)) + dresidual_out\n"
           "  dx = dresidual = dh;  dweight = sum_rows dout * xhat;  dbias = sum_rows dout\n"
           "(fp32 accumulation in a fixed order: identical bits run to run). dout may have any\n"
           "strides, 0 included. The workspace (rmsnorm_bwd_workspace_size bytes, 16-byte\n"
           "aligned, on the tensors' device) is overwritten. M = 0 writes dweight = dbias = 0.\n") +
       kTensorDoc +
       "Raises ValueError for a bad argument (a too-small workspace too), RuntimeError for a\n"
       "CUDA error.")
          .c_str());

  m.def(
      "gemm_can_implement",
      [](const OptTensor& a, const OptTensor& b, const OptTensor& c, const OptTensor& d,
         double alpha, double beta, const OptTensor& bias_row, const OptTensor& bias_col) {
        quack::GemmArgs g = gemm_args(a, b, c, d, alpha, beta, bias_row, bias_col);
        nb::gil_scoped_release release;
        quack::can_implement(g);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("c").none(), nb::arg("d"), nb::arg("alpha") = 1.0,
      nb::arg("beta") = 0.0, nb::arg("bias_row").none() = nb::none(), nb::arg("bias_col").none() = nb::none(),
      (std::string("Validates GEMM arguments (quack::can_implement) without any CUDA call;\n"
                   "returns None or raises ValueError whose message starts with 'gemm: ' and\n"
                   "names the argument. The problem:\n") +
       kGemmDoc + kTensorDoc)
          .c_str());

  m.def(
      "gemm_workspace_size",
      [](const OptTensor& a, const OptTensor& b, const OptTensor& c, const OptTensor& d,
         double alpha, double beta, const OptTensor& bias_row, const OptTensor& bias_col) {
        quack::GemmArgs g = gemm_args(a, b, c, d, alpha, beta, bias_row, bias_col);
        nb::gil_scoped_release release;
        return quack::gemm_workspace_size(g);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("c").none(), nb::arg("d"), nb::arg("alpha") = 1.0,
      nb::arg("beta") = 0.0, nb::arg("bias_row").none() = nb::none(), nb::arg("bias_col").none() = nb::none(),
      "Bytes of workspace gemm needs for these arguments (quack::gemm_workspace_size): the\n"
      "padded copies of a and b where TMA cannot address them (base, leading or batch stride\n"
      "not a multiple of 16 bytes), 0 otherwise. Validates like gemm_can_implement (ValueError).");

  m.def(
      "gemm_streamk_workspace_size",
      [](int device) {
        nb::gil_scoped_release release;
        return quack::gemm_streamk_workspace_size(device);
      },
      nb::arg("device"),
      "Bytes of gemm's streamk_workspace on CUDA device `device` "
      "(quack::gemm_streamk_workspace_size): one flag and one fp32 tile per SM.");

  m.def(
      "gemm",
      [](const OptTensor& a, const OptTensor& b, const OptTensor& c, const OptTensor& d,
         double alpha, double beta, uintptr_t stream, bool tuned, uintptr_t alpha_device,
         uintptr_t beta_device, uintptr_t workspace, size_t workspace_bytes, const OptTensor& bias_row,
         const OptTensor& bias_col, uintptr_t streamk_workspace, size_t streamk_workspace_bytes,
         uintptr_t tile_counter) {
        quack::GemmArgs g = gemm_args(a, b, c, d, alpha, beta, bias_row, bias_col);
        g.tuned = tuned;
        g.tile_counter = reinterpret_cast<uint32_t*>(tile_counter);
        g.alpha_device = reinterpret_cast<const float*>(alpha_device);
        g.beta_device = reinterpret_cast<const float*>(beta_device);
        set_gemm_workspaces(g, workspace, workspace_bytes, streamk_workspace, streamk_workspace_bytes);
        nb::gil_scoped_release release;
        quack::gemm(g, to_stream(stream));
      },
      nb::arg("a"), nb::arg("b"), nb::arg("c").none(), nb::arg("d"), nb::arg("alpha") = 1.0,
      nb::arg("beta") = 0.0, nb::arg("stream") = 0, nb::arg("tuned") = false,
      nb::arg("alpha_device") = 0, nb::arg("beta_device") = 0, nb::arg("workspace") = 0,
      nb::arg("workspace_bytes") = 0, nb::arg("bias_row").none() = nb::none(),
      nb::arg("bias_col").none() = nb::none(), nb::arg("streamk_workspace") = 0,
      nb::arg("streamk_workspace_bytes") = 0, nb::arg("tile_counter") = 0,
      (std::string("GEMM (quack::gemm), written into d on the given stream:\n") + kGemmDoc +
       "M = 0, N = 0 or L = 0: validation only, nothing launched. K = 0: d = beta * c (zeros\n"
       "without c). tuned: autotune the tile configuration on first use per shape class and\n"
       "cache it on disk (GemmArgs::tuned). alpha_device / beta_device: addresses of one fp32\n"
       "each on d's device (0: none), read by the kernel instead of alpha / beta (a device\n"
       "beta of 0 means c is not read; GemmArgs::alpha_device / beta_device). workspace /\n"
       "workspace_bytes: a device buffer of at least gemm_workspace_size bytes (0: gemm\n"
       "allocates it on the stream when needed; GemmArgs::workspace). streamk_workspace /\n"
       "streamk_workspace_bytes: a device buffer of gemm_streamk_workspace_size(device) bytes,\n"
       "zeroed once and kept per stream (0: none; GemmArgs::streamk_workspace): stream-K where\n"
       "it pays (QUACK_GEMM_STREAMK=0 off, 1 forced). tile_counter: the address of one uint32\n"
       "on d's device, zero before its first use, one per stream (0: the static schedule;\n"
       "GemmArgs::tile_counter): the dynamic tile scheduler. " +
       kTensorDoc +
       "Raises ValueError for a bad or not yet supported argument (the C++ message, e.g.\n"
       "'gemm: b has shape (64, 128) bfloat16, expected (K, N) = (63, N)'), RuntimeError for a\n"
       "CUDA error.")
          .c_str());
}
