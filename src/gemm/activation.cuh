// Activation functions of the fused GEMM epilogues (device code, plain CUDA; fp32 in and out):
// the formulas of QuACK's quack/activation.py (elementwise: 0.2.0 forms, silu through tanh, one
// MUFU.TANH, and 0.6.3's gelu_erf, quick_gelu; gated: 0.6 forms, sigmoid by ex2 + rcp, their
// FFMA-friendly gradients), used by the epilogue visitors (sm90/epilogue_ops.cuh) and the K = 0
// fill (gemm_fill.cu). The tables of formulas are in include/quack/gemm_act.h (Activation).
#pragma once

#include "gemm/activation_list.h"
#include "quack/gemm_act.h"
#include "row/row_math.cuh"  // exp2_approx, rcp_approx, kLog2e

namespace quack::detail {

/// tanh.approx.f32 (MUFU.TANH; max relative error about 2^-11), as QuACK's tanh.
__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// gelu_tanh_approx constants: sqrt(2/pi), 0.044715·sqrt(2/pi), 3·0.044715·sqrt(2/pi).
constexpr float kGeluC1 = 0.7978845608028654f, kGeluC2 = 0.035677408136300125f, kGeluC3 = 0.10703222440890037f;

/// sigmoid(x) = 1 / (1 + 2^(−x·log2 e)): MUFU.EX2 and MUFU.RCP (QuACK 0.6's sigmoid; relative
/// error about 2^-22). Saturates to 0 and 1; NaN stays NaN.
__device__ __forceinline__ float sigmoid_approx(float x) {
  return rcp_approx(exp2_approx(x * -kLog2e) + 1.f);
}

// gelu_erf: 1/√2, 1/√(2π), and −log2(e)/2 (φ's exponent in base 2).
constexpr float kRsqrt2 = 0.7071067811865476f, kRsqrt2Pi = 0.3989422804014327f,
                kMinusHalfLog2e = -0.7213475204444817f;
// quick_gelu's sigmoid scale (CLIP's), also gpt-oss's swiglu scale (QuACK's default alpha).
constexpr float kSigmoidAlpha = 1.702f;
constexpr float kSwigluOaiAlpha = kSigmoidAlpha;

/// Φ(x) = erfc(−x/√2) / 2, the normal CDF of gelu_erf, through erfc(|x|/√2): the fit's
/// fractional error is below 1.2e-7 for every z (float64); in fp32 the exponent's rounding
/// brings it to ~7e-7 for |x| < 3 and ~5e-6 at |x| = 10. Both tails keep that relative
/// precision, where 1 + erff(x/√2) cancels (57 % off at x = −5.5, 0 below −8). One MUFU.RCP, one
/// MUFU.EX2 and ten FFMA, against erff's longer sequence (run AP: gelu_erf's act epilogue 1.48 ×
/// plain through erff). Φ(±inf) = 1 / 0, NaN stays NaN; Φ flushes to 0 below x ≈ −13.2.
__device__ __forceinline__ float normal_cdf(float x) {
  float const z = fabsf(x) * kRsqrt2;
  float const t = rcp_approx(0.5f * z + 1.f);
  // P(t): Numerical Recipes' erfcc coefficients (Chebyshev fit; Press et al., Numerical
  // Recipes in C, 2nd ed., §6.2): erfc(z) = t·exp(−z² + P(t)), t = 1 / (1 + z/2), z ≥ 0.
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  // −z² + P(t) with −z² = −x²/2 inside one fma (half the error of rounding z first).
  float const half_erfc = 0.5f * t * exp2_approx(fmaf(-0.5f * x, x, p) * kLog2e);  // Φ(−|x|)
  return x >= 0.f ? 1.f - half_erfc : half_erfc;
}

/// act(x). NaN propagates through relu and relu_sq (x < 0 ? 0 : x), as torch.relu; relu_sq
/// squares the relu (relu(x)·x would give NaN at x = −inf, where relu(x)² is 0).
__device__ __forceinline__ float act_fwd(Activation a, float x) {
  switch (a) {
    case Activation::kRelu: return x < 0.f ? 0.f : x;
    case Activation::kReluSq: {
      float const r = x < 0.f ? 0.f : x;
      return r * r;
    }
    case Activation::kGeluTanhApprox: {
      float const z = x * (kGeluC1 + kGeluC2 * (x * x));
      return 0.5f * (x * tanh_approx(z) + x);
    }
    case Activation::kSilu: {  // x·sigmoid(x) = h·tanh(h) + h, h = x / 2
      float const h = 0.5f * x;
      return h * tanh_approx(h) + h;
    }
    case Activation::kTanh: return tanh_approx(x);
    case Activation::kGeluErf: return x * normal_cdf(x);
    case Activation::kQuickGelu: return x * sigmoid_approx(kSigmoidAlpha * x);
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
      post = r * r;
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
    case Activation::kGeluErf: {  // Φ(x) = (1 + erf(x/√2)) / 2, φ(x) = e^(−x²/2) / √(2π)
      float const cdf = normal_cdf(x);
      float const pdf = kRsqrt2Pi * exp2_approx(kMinusHalfLog2e * (x * x));
      post = x * cdf;
      dx = dout * (x * pdf + cdf);
      return;
    }
    case Activation::kQuickGelu: {
      float const sig = sigmoid_approx(kSigmoidAlpha * x);
      post = x * sig;
      dx = dout * ((post * (-sig) + post) * kSigmoidAlpha + sig);
      return;
    }
    default:  // kIdentity
      dx = dout;
      post = x;
      return;
  }
}


/// glu(g, u) of a gated activation (the table of quack/gemm_act.h); kIdentity-like fallback g·u
/// never runs (validation admits gated activations only).
__device__ __forceinline__ float gated_fwd(Activation a, float g, float u) {
  switch (a) {
    case Activation::kSwiglu: return g * sigmoid_approx(g) * u;
    case Activation::kSwigluOai: {
      // silu·(u + 1), not silu·u + silu: at g = +inf and u < 0 the latter is inf − inf = NaN.
      float const silu = g * sigmoid_approx(kSwigluOaiAlpha * g);
      return silu * (u + 1.f);
    }
    case Activation::kReglu: return (g < 0.f ? 0.f : g) * u;
    case Activation::kGeglu: return act_fwd(Activation::kGeluTanhApprox, g) * u;
    case Activation::kGlu: return sigmoid_approx(g) * u;
    default: return g * u;
  }
}

/// The gradients of glu(g, u) for the incoming gradient dout, and the recomputed glu(g, u)
/// (QuACK 0.6's dswiglu, dswiglu_oai, dreglu, dgeglu, dglu).
__device__ __forceinline__ void gated_bwd(Activation a, float g, float u, float dout, float& dg, float& du,
                                          float& post) {
  switch (a) {
    case Activation::kSwiglu: {
      float const sig = sigmoid_approx(g);
      float const silu = g * sig;
      float const silu_dout = silu * dout;
      // d silu(g)·dout = (σ − silu·σ)·dout + silu·dout
      float const dsilu_dout = (sig + (-silu) * sig) * dout + silu_dout;
      dg = dsilu_dout * u;
      du = silu_dout;
      post = silu * u;
      return;
    }
    case Activation::kSwigluOai: {
      float const sig = sigmoid_approx(kSwigluOaiAlpha * g);
      float const silu = g * sig;
      float const silu_dout = silu * dout;
      float const d = ((silu * (-sig) + silu) * kSwigluOaiAlpha + sig) * dout;
      dg = d * (u + 1.f);
      du = silu_dout;
      post = silu * (u + 1.f);
      return;
    }
    case Activation::kReglu: {
      float const r = g < 0.f ? 0.f : g;
      dg = g > 0.f ? dout * u : 0.f;
      du = dout * r;
      post = r * u;
      return;
    }
    case Activation::kGeglu: {
      float dgelu_dout, gelu;
      act_bwd(Activation::kGeluTanhApprox, g, dout, dgelu_dout, gelu);
      dg = dgelu_dout * u;
      du = gelu * dout;
      post = gelu * u;
      return;
    }
    case Activation::kGlu: {
      float const sig = sigmoid_approx(g);
      float const sig_dout = sig * dout;
      post = sig * u;
      dg = (u - post) * sig_dout;
      du = sig_dout;
      return;
    }
    default:
      dg = dout * u;
      du = dout * g;
      post = g * u;
      return;
  }
}

}  // namespace quack::detail
