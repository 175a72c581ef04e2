// Activation functions of the fused GEMM epilogues (device code, plain CUDA; fp32 in and out):
// the formulas of QuACK's quack/activation.py (0.2.0 forms: silu through tanh, one MUFU.TANH),
// used by the epilogue visitors (sm90/epilogue_ops.cuh) and the K = 0 fill (gemm_fill.cu).
// The table of formulas is in include/quack/gemm_act.h (Activation).
#pragma once

#include "quack/gemm_act.h"

namespace quack::detail {

/// tanh.approx.f32 (MUFU.TANH; max relative error about 2^-11), as QuACK's tanh.
__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// gelu_tanh_approx constants: sqrt(2/pi), 0.044715·sqrt(2/pi), 3·0.044715·sqrt(2/pi).
constexpr float kGeluC1 = 0.7978845608028654f, kGeluC2 = 0.035677408136300125f, kGeluC3 = 0.10703222440890037f;

/// act(x). NaN propagates through relu and relu_sq (x < 0 ? 0 : x), as torch.relu.
__device__ __forceinline__ float act_fwd(Activation a, float x) {
  switch (a) {
    case Activation::kRelu: return x < 0.f ? 0.f : x;
    case Activation::kReluSq: return (x < 0.f ? 0.f : x) * x;
    case Activation::kGeluTanhApprox: {
      float const z = x * (kGeluC1 + kGeluC2 * (x * x));
      return 0.5f * (x * tanh_approx(z) + x);
    }
    case Activation::kSilu: {  // x·sigmoid(x) = h·tanh(h) + h, h = x / 2
      float const h = 0.5f * x;
      return h * tanh_approx(h) + h;
    }
    case Activation::kTanh: return tanh_approx(x);
    default: return x;  // kIdentity
  }
}

/// dx = dout · act'(x) and the recomputed post = act(x) (QuACK's d<act>(x, dout)).
__device__ __forceinline__ void act_bwd(Activation a, float x, float dout, float& dx, float& post) {
  switch (a) {
    case Activation::kRelu:
      dx = x > 0.f ? dout : 0.f;
      post = x < 0.f ? 0.f : x;
      return;
    case Activation::kReluSq: {
      float const r = x < 0.f ? 0.f : x;
      post = r * x;
      dx = 2.f * (dout * r);
      return;
    }
    case Activation::kGeluTanhApprox: {
      float const x_sq = x * x;
      float const t = tanh_approx(x * (kGeluC1 + kGeluC2 * x_sq));
      float const half_1pt = 0.5f + 0.5f * t;
      post = x * half_1pt;
      float const sech2 = t * (-t) + 1.f;
      float const dz = kGeluC1 + kGeluC3 * x_sq;
      dx = dout * ((x * (sech2 * dz)) * 0.5f + half_1pt);
      return;
    }
    case Activation::kSilu: {
      float const h = 0.5f * x;
      float const t = tanh_approx(h);
      float const sig = 0.5f * t + 0.5f;
      post = h * t + h;
      dx = (sig + post * (1.f - sig)) * dout;
      return;
    }
    case Activation::kTanh: {
      float const t = tanh_approx(x);
      post = t;
      dx = dout * (t * (-t) + 1.f);
      return;
    }
    default:  // kIdentity
      dx = dout;
      post = x;
      return;
  }
}

}  // namespace quack::detail
