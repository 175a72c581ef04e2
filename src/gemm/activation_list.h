// The activations of quack/gemm_act.h by kind, as X-macro lists of (enumerator, name), each in
// value order (a kind's values need not be contiguous: gelu_erf came after the gated ones). Host and device code expand the same lists: gemm.cpp's kActivations (names, is_gated,
// checked against the enum's values) and the epilogue visitors' switches (sm90/epilogue_ops.cuh:
// one loop per entry, the activation a constant). A new activation is the enum's next value,
// one entry here and its formulas (activation.cuh). Plain header: no CUDA.
#pragma once

#define QUACK_FOR_ELEMENTWISE_ACTS(X)                                                           \
  X(kRelu, "relu") X(kReluSq, "relu_sq") X(kGeluTanhApprox, "gelu_tanh_approx")                 \
  X(kSilu, "silu") X(kTanh, "tanh") X(kGeluErf, "gelu_erf") X(kQuickGelu, "quick_gelu")
#define QUACK_FOR_GATED_ACTS(X)                                                                 \
  X(kSwiglu, "swiglu") X(kSwigluOai, "swiglu_oai") X(kReglu, "reglu") X(kGeglu, "geglu")         \
  X(kGlu, "glu")
