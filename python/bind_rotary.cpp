// quack_cpp._C: rotary position embedding (quack/rotary.h). Conversion only (bind_util.h);
// every check is the C++ API's.
#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>

#include "bind_util.h"
#include "quack/rotary.h"

namespace nb = nanobind;

void bind_rotary(nb::module_& m) {
  using quack_py::OptTensor;
  using quack_py::to_ref;
  m.def(
      "apply_rotary",
      [](const OptTensor& q, const OptTensor& q_out, const OptTensor& k, const OptTensor& k_out,
         const OptTensor& v, const OptTensor& v_out, const OptTensor& cos, const OptTensor& sin,
         int64_t seqlen_offset, bool conjugate, uintptr_t stream, bool interleaved) {
        constexpr const char* fn = "apply_rotary";
        quack::RotaryArgs a;
        a.q = to_ref(q, fn, "q");
        a.q_out = to_ref(q_out, fn, "q_out");
        a.k = to_ref(k, fn, "k");
        a.k_out = to_ref(k_out, fn, "k_out");
        a.v = to_ref(v, fn, "v");
        a.v_out = to_ref(v_out, fn, "v_out");
        a.cos = to_ref(cos, fn, "cos");
        a.sin = to_ref(sin, fn, "sin");
        a.seqlen_offset = seqlen_offset;
        a.conjugate = conjugate;
        a.interleaved = interleaved;
        nb::gil_scoped_release release;
        quack::apply_rotary(a, quack_py::to_stream(stream));
      },
      nb::arg("q"), nb::arg("q_out"), nb::arg("k").none(), nb::arg("k_out").none(),
      nb::arg("v").none(), nb::arg("v_out").none(), nb::arg("cos"), nb::arg("sin"),
      nb::arg("seqlen_offset") = 0, nb::arg("conjugate") = false, nb::arg("stream") = 0,
      nb::arg("interleaved") = false,
      (std::string(
           "Rotary position embedding (quack::apply_rotary) on q and k, v copied, one launch.\n"
           "For each head vector x (D) at position p = s + seqlen_offset, R = 2 * cos.shape[1],\n"
           "x1 = x[:R/2], x2 = x[R/2:R], c = cos[p], s = sin[p] (-sin when conjugate):\n"
           "  out[:R/2] = x1 * c - x2 * s;  out[R/2:R] = x2 * c + x1 * s;  out[R:] = x[R:]\n"
           "or, interleaved (adjacent pairs), for i < R/2:\n"
           "  out[2i] = x[2i] * c[i] - x[2i+1] * s[i];  out[2i+1] = x[2i+1] * c[i] + x[2i] * s[i]\n"
           "q, q_out: (B, S, H, D) fp32/fp16/bf16, D stride 1; k, k_out: (B, S, Hk, D) and v,\n"
           "v_out: (B, S, Hv, D) in q's dtype, optional (both of a pair or neither); an output\n"
           "may be its input (in place). cos, sin: (S_ro, R/2) fp32, S + seqlen_offset <= S_ro.\n") +
       quack_py::kTensorDoc +
       "B * S = 0 launches nothing. Raises ValueError for a bad argument (the message names\n"
       "it), RuntimeError for a CUDA error.")
          .c_str());
  m.def(
      "rotary_qkv_pack",
      [](const OptTensor& dq, const OptTensor& dk, const OptTensor& dv, const OptTensor& dqkv,
         const OptTensor& cos, const OptTensor& sin, int64_t seqlen_offset, bool conjugate,
         uintptr_t stream, bool interleaved) {
        constexpr const char* fn = "rotary_qkv_pack";
        quack::RotaryPackArgs a;
        a.dq = to_ref(dq, fn, "dq");
        a.dk = to_ref(dk, fn, "dk");
        a.dv = to_ref(dv, fn, "dv");
        a.dqkv = to_ref(dqkv, fn, "dqkv");
        a.cos = to_ref(cos, fn, "cos");
        a.sin = to_ref(sin, fn, "sin");
        a.seqlen_offset = seqlen_offset;
        a.conjugate = conjugate;
        a.interleaved = interleaved;
        nb::gil_scoped_release release;
        quack::rotary_qkv_pack(a, quack_py::to_stream(stream));
      },
      nb::arg("dq").none(), nb::arg("dk").none(), nb::arg("dv").none(), nb::arg("dqkv"),
      nb::arg("cos"), nb::arg("sin"), nb::arg("seqlen_offset") = 0, nb::arg("conjugate") = true,
      nb::arg("stream") = 0, nb::arg("interleaved") = false,
      (std::string(
           "The packed gradient of a split rotary (quack::rotary_qkv_pack), one launch:\n"
           "dqkv[:, :, 0] = rot(dq), dqkv[:, :, 1] = rot(dk) (apply_rotary's formula, -sin when\n"
           "conjugate; interleaved: apply_rotary's pair layout), dqkv[:, :, 2] = dv; an absent\n"
           "(None) dq, dk or dv gives zeros.\n"
           "dq, dk, dv: (B, S, H, D) in dqkv's dtype, D stride 1; dqkv: (B, S, 3 * H, D) (the\n"
           "packed (B, S, 3, H, D) with (3, H) merged) fp32/fp16/bf16, D stride 1. cos, sin:\n"
           "(S_ro, R/2) fp32, S + seqlen_offset <= S_ro.\n") +
       quack_py::kTensorDoc +
       "B * S = 0 launches nothing. Raises ValueError for a bad argument (the message names\n"
       "it), RuntimeError for a CUDA error.")
          .c_str());
}
