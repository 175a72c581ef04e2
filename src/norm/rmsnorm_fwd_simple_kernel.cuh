// RMSNorm forward, simple path: one row (or kRows short rows) per CTA, geometry fixed at
// compile time, in the style of Liger-Kernel's Triton kernel (single pass) and Inductor's
// looped reduction (two passes).
//
// Thread -> data: row r of the CTA is threads kTpr·r .. kTpr·r + kTpr-1; thread t of a row owns
// the 16-byte vectors j = v·kTpr + t (v < kVecs) of each chunk of kTpr·kVecs vectors, so
// consecutive threads read consecutive vectors (coalesced). Vector indices are 32-bit (a row
// has < 2^31 vectors); the row offset is 64-bit (M·N may pass 2^31). Grid: one CTA per kRows
// rows, 1-D, not persistent, no clusters.
//
// Single pass (!kLooped, the row fits one chunk): every load of x, the residual and the weight
// is issued first; fp32 sum of h² (h = x + residual) per thread -> StaticRowReduce (shuffles,
// plus one shared-memory exchange when a row spans warps) -> rstd; then out = h·rstd·w from
// the registers, which hold x and the residual packed (16-bit: half the registers of fp32).
// residual_out = h is stored before the reduction (it does not need rstd).
// Looped (kLooped, any N): pass 1 sums h² chunk by chunk (plain loads: the row stays in L2);
// pass 2 walks the chunks backwards (the most recently read first, still in L2), re-reads x
// and the residual (evict-first), the weight, and stores residual_out and out. Each element is
// read and written by the same thread in pass 2, so out may alias x (residual_out the
// residual).
//
// Registers only; shared memory holds the reduction's partials (one float per warp).
// Weight: 16-byte read-only loads (__ldg, L1-cached: every row re-reads it), issued with x when
// the registers allow (kWeightEarly), else one vector at a time just before its use.
// Streams: read-once loads and all stores are evict-first (__ldcs / __stcs); the looped pass 1
// loads with the default policy so pass 2 finds the row in L2.
// Host-checked (rmsnorm.cpp): N a multiple of the vector, every (M, N) tensor with column
// stride 1, 16-byte aligned base and row stride; weight contiguous and 16-byte aligned; out and
// residual / residual_out in x's dtype; no bias.
//
//   T        x, out (and residual, residual_out when kResidual)
//   TW       weight (T or fp32)
//   kTpr     threads per row (power of two), kRows rows per CTA, kVecs vectors per thread
#pragma once

#include "common/reduce.cuh"
#include "common/vec.cuh"
#include "norm/rmsnorm_params.h"

namespace quack::detail {

template <typename T, typename TW, bool kResidual, int kTpr, int kRows, int kVecs, bool kLooped>
__global__ void __launch_bounds__(kTpr * kRows)
    rmsnorm_fwd_simple_kernel(const __grid_constant__ RmsNormFwdParams p) {
  constexpr int kVec = 16 / sizeof(T);  // elements per 16-byte vector
  constexpr int kChunk = kTpr * kVecs;  // vectors per row and pass (chunk)
  using XV = Packed<T, kVec>;           // 16 bytes
  using WV = Packed<TW, kVec>;          // 16 or 32 bytes
  using Reduce = StaticRowReduce<kTpr, kRows>;
  // The weight is loaded with x (single pass) or with x in pass 2 (looped) when x, the
  // residual and the weight fit the register budget of the CTA size (65536 / threads, ≤ 255,
  // minus ~24 for addresses and scalars); otherwise one vector at a time just before its use
  // (after the reduction in the single pass).
  constexpr int kRegCap = 65536 / (kTpr * kRows) < 255 ? 65536 / (kTpr * kRows) : 255;
  constexpr int kValueRegs = kVecs * (4 * (kResidual ? 2 : 1) + int{sizeof(WV)} / 4);
  constexpr bool kWeightEarly = kValueRegs + 24 <= kRegCap;
  // Looped pass 1: two chunks of x (and the residual) in flight when their registers fit.
  constexpr int kPass1Unroll = 2 * kVecs * 4 * (kResidual ? 2 : 1) + 24 <= kRegCap ? 2 : 1;
  __shared__ float slots[Reduce::kSlots];

  const int t = kRows == 1 ? static_cast<int>(threadIdx.x) : threadIdx.x % kTpr;
  const int64_t row = int64_t{blockIdx.x} * kRows + (kRows == 1 ? 0 : threadIdx.x / kTpr);
  const bool row_ok = row < p.g.rows;
  // Vectors of this row still ahead of this thread's first one: vector v·kTpr of the
  // thread's pointers (chunk c: c·kChunk + v·kTpr) exists when v·kTpr < n.
  const int n = row_ok ? static_cast<int>(p.g.cols / kVec) - t : 0;
  const int64_t r = row_ok ? row : 0;
  // Per-thread base pointers (vector t of the row): the loops index them with compile-time
  // offsets v·kTpr (immediates in the instruction).
  const XV* x = reinterpret_cast<const XV*>(static_cast<const T*>(p.x.ptr) + r * p.x.row_stride) + t;
  const XV* res = nullptr;
  XV* res_out = nullptr;
  if constexpr (kResidual) {
    res = reinterpret_cast<const XV*>(static_cast<const T*>(p.residual.ptr) +
                                      r * p.residual.row_stride) + t;
    if (p.residual_out.ptr)
      res_out = reinterpret_cast<XV*>(static_cast<T*>(p.residual_out.ptr) +
                                      r * p.residual_out.row_stride) + t;
  }
  XV* out = reinterpret_cast<XV*>(static_cast<T*>(p.out.ptr) + r * p.out.row_stride) + t;
  const WV* w = reinterpret_cast<const WV*>(p.weight.ptr) + t;

  // h = x (+ residual) of one vector, fp32.
  auto h_of = [](const XV& xv, const XV& rv, float (&h)[kVec]) {
    unpack(xv, h);
    if constexpr (kResidual) {
      float hr[kVec];
      unpack(rv, hr);
#pragma unroll
      for (int i = 0; i < kVec; ++i) h[i] += hr[i];
    }
  };
  // out = h·rstd·w of one vector (at offset o of the thread's pointers); residual_out = h too
  // when store_res_out.
  auto finish = [&](int o, const XV& xv, const XV& rv, const WV& wv, float rstd,
                    bool store_res_out) {
    float h[kVec], wf[kVec];
    h_of(xv, rv, h);
    unpack(wv, wf);
    XV y, ro;
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      if constexpr (kResidual) ro.elt[i] = from_float<T>(h[i]);
      y.elt[i] = from_float<T>(h[i] * rstd * wf[i]);
    }
    if (store_res_out) store_packed(reinterpret_cast<T*>(res_out + o), ro);
    store_packed(reinterpret_cast<T*>(out + o), y);
  };
  auto ptr = [](auto* base, int o) { return reinterpret_cast<decltype(&base->elt[0])>(base + o); };
  auto zero = [](XV& v) {
#pragma unroll
    for (int w = 0; w < XV::kWords; ++w) v.word[w] = make_uint4(0, 0, 0, 0);
  };

  float sumsq = 0.f;
  if constexpr (!kLooped) {
    // ---- single pass: the row lives in registers ----
    XV xv[kVecs], rv[kVecs];
    WV wv[kVecs];
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      if (v * kTpr < n) {
        load_packed<Cache::kStream>(ptr(x, v * kTpr), xv[v]);
        if constexpr (kResidual) load_packed<Cache::kStream>(ptr(res, v * kTpr), rv[v]);
      }
    }
    if constexpr (kWeightEarly) {
#pragma unroll
      for (int v = 0; v < kVecs; ++v)
        if (v * kTpr < n) load_packed<Cache::kReadOnly>(ptr(w, v * kTpr), wv[v]);
    }
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      if (v * kTpr < n) {
        float h[kVec];
        h_of(xv[v], rv[v], h);
        XV ro;
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          sumsq = fmaf(h[i], h[i], sumsq);
          if constexpr (kResidual) ro.elt[i] = from_float<T>(h[i]);
        }
        if constexpr (kResidual)
          if (res_out) store_packed(ptr(res_out, v * kTpr), ro);
      }
    }
    const float rstd = rsqrtf(Reduce::allreduce(sumsq, slots, SumOp{}) * p.inv_n + p.eps);
    if (p.rstd && row_ok && t == 0) p.rstd[row * p.rstd_stride] = rstd;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      if (v * kTpr < n) {
        if constexpr (!kWeightEarly) {
          load_packed<Cache::kReadOnly>(ptr(w, v * kTpr), wv[v]);
          // Keeps the next vector's weight load after this store: hoisted, the loads would
          // need the registers the budget above said are not there.
          asm volatile("" ::: "memory");
        }
        finish(v * kTpr, xv[v], rv[v], wv[v], rstd, false);
      }
    }
  } else {
    // ---- looped: pass 1 sums h², pass 2 (chunks in reverse) re-reads from L2 and stores ----
    const int chunks = (n + kChunk - 1) / kChunk;  // n ≥ 1 on every thread with work
#pragma unroll kPass1Unroll
    for (int c = 0; c < chunks; ++c) {
      const int o = c * kChunk;
      XV xv[kVecs], rv[kVecs];
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        zero(xv[v]);  // vectors past the row's end: 0, so the sum needs no branch and the
        zero(rv[v]);  // next chunk's loads can be hoisted above it
        if (o + v * kTpr < n) {
          load_packed<Cache::kNormal>(ptr(x, o + v * kTpr), xv[v]);
          if constexpr (kResidual) load_packed<Cache::kNormal>(ptr(res, o + v * kTpr), rv[v]);
        }
      }
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        float h[kVec];
        h_of(xv[v], rv[v], h);
#pragma unroll
        for (int i = 0; i < kVec; ++i) sumsq = fmaf(h[i], h[i], sumsq);
      }
    }
    const float rstd = rsqrtf(Reduce::allreduce(sumsq, slots, SumOp{}) * p.inv_n + p.eps);
    if (p.rstd && row_ok && t == 0) p.rstd[row * p.rstd_stride] = rstd;
#pragma unroll 1
    for (int c = chunks - 1; c >= 0; --c) {
      const int o = c * kChunk;
      XV xv[kVecs], rv[kVecs];
      WV wv[kVecs];
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        if (o + v * kTpr < n) {
          load_packed<Cache::kStream>(ptr(x, o + v * kTpr), xv[v]);
          if constexpr (kResidual) load_packed<Cache::kStream>(ptr(res, o + v * kTpr), rv[v]);
          if constexpr (kWeightEarly) load_packed<Cache::kReadOnly>(ptr(w, o + v * kTpr), wv[v]);
        }
      }
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        if (o + v * kTpr < n) {
          if constexpr (!kWeightEarly) {
            load_packed<Cache::kReadOnly>(ptr(w, o + v * kTpr), wv[v]);
            asm volatile("" ::: "memory");  // as in the single pass
          }
          finish(o + v * kTpr, xv[v], rv[v], wv[v], rstd, kResidual && res_out != nullptr);
        }
      }
    }
  }
}

}  // namespace quack::detail
