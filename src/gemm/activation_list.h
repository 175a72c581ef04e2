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
// The activations whose fused epilogue has a copy of its own in each kernel (the subtile loop
// with the activation a constant: epilogue_ops.cuh, specialize_elementwise_act); copies cost
// compile time (the 128x192 act TU alone: 30 s without, 31 s with relu, relu_sq,
// gelu_tanh_approx and silu, 36 s with tanh and quick_gelu too, 41 s with every activation)
// and registers (with these lists ptxas spills 16 bytes in the 128x192 act TU, 4 in the 128x256
// act TU, 36 in the 128x192 dact TU: a few values reloaded per tile from L1; without the copies
// none). The others (glu, reglu) run the generic
// path (the activation chosen per subtile), as does a bias or any C load or output store not
// through TMA (c_plain, d_plain, tail_manual).
#define QUACK_SPECIALIZED_ELEMENTWISE_ACTS(X)                                                   \
  X(kRelu, "relu") X(kReluSq, "relu_sq") X(kGeluTanhApprox, "gelu_tanh_approx") X(kSilu, "silu") \
  X(kTanh, "tanh") X(kGeluErf, "gelu_erf") X(kQuickGelu, "quick_gelu")
#define QUACK_SPECIALIZED_GATED_ACTS(X) X(kSwiglu, "swiglu") X(kSwigluOai, "swiglu_oai") X(kGeglu, "geglu")
