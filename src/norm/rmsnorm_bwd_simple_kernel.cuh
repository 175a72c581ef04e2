// RMSNorm backward, simple path: each CTA walks `rows_per_cta` consecutive rows, one row at a
// time, the row in registers, geometry fixed at compile time (the backward twin of
// rmsnorm_fwd_simple_kernel.cuh). Not persistent, no clusters, no copy engine.
//
// Thread -> data: thread t of the CTA (kTpr threads, one row) owns the 16-byte vectors
// j = v·kTpr + t (v < kVecs) of the row; consecutive threads read consecutive vectors
// (coalesced). Vector indices are 32-bit, row offsets 64-bit.
//
// Per row: x and dy (packed, x's dtype) and rstd are loaded into registers; pass 1 sums
// dy·w·x per thread -> StaticRowReduce -> mean = rstd·Σ/N; pass 2 recomputes xhat = x·rstd
// from the registers and stores dx = rstd·(dy·w − xhat·mean) (+ dresidual_out) to dx (and
// dresidual). With kPrefetch the next row's x, dy and rstd are loaded before this row's
// reduction (a register double buffer: two rows in flight per CTA).
//
// dweight / dbias: each thread adds dy·xhat and dy of its own columns into its own fp32
// slots in shared memory (thread-major float4 layout [v][quad][t]: conflict-free, no barrier,
// any row length the registers take), over the CTA's rows in row order; at the end it writes
// them as row blockIdx.x of the (P, N) partials, P = gridDim.x; colsum adds the P rows in a
// fixed order. The grid, and so every sum's order, depends only on (M, config, resident
// CTAs of the device): identical bits run to run.
//
// Weight: loaded once per CTA into registers when they fit the budget of the CTA size
// (kWeightRegs), else re-read per use through the read-only path (L1). Streams: x, dy,
// dresidual_out are read once (evict-first), dx / dresidual stored evict-first.
// Host-checked (rmsnorm.cpp): x, dout, dresidual_out, dx, dresidual in x's dtype, column
// stride 1, 16-byte aligned bases and row strides, N a multiple of the vector; weight absent,
// in x's dtype or fp32, contiguous and 16-byte aligned; N ≤ kTpr·kVecs vectors; the shared
// memory of the accumulators fits.
//
//   T        x, dout, dresidual_out, dx, dresidual
//   TW       weight (T or fp32; unused when !kWeight: w = 1)
//   kTpr     threads per row = per CTA (power of two), kVecs vectors per thread
#pragma once

#include "common/reduce.cuh"
#include "common/vec.cuh"
#include "norm/rmsnorm_params.h"

namespace quack::detail {

/// Dynamic shared memory of a simple-backward instance: one fp32 slot per column of the
/// instance's capacity and accumulator (dweight, dbias).
constexpr size_t rmsnorm_bwd_simple_smem(int tpr, int vecs, int elt_bytes, int accumulators) {
  return static_cast<size_t>(accumulators) * tpr * vecs * (16 / elt_bytes) * sizeof(float);
}

// Hides the value of v from the optimizer (no instruction): pass 2 then unpacks the packed
// registers again instead of keeping pass 1's fp32 copies alive across the reduction (which
// would double or triple the registers of the row).
template <typename U, int K>
__device__ __forceinline__ void opaque(Packed<U, K>& v) {
  uint32_t* w = reinterpret_cast<uint32_t*>(&v);
#pragma unroll
  for (int i = 0; i < K * int{sizeof(U)} / 4; ++i) asm("" : "+r"(w[i]));
}

template <typename T, typename TW, bool kWeight, int kTpr, int kVecs, bool kPrefetch>
__global__ void __launch_bounds__(kTpr)
    rmsnorm_bwd_simple_kernel(const __grid_constant__ RmsNormBwdParams p, int rows_per_cta) {
  constexpr int kVec = 16 / sizeof(T);  // elements per 16-byte vector
  constexpr int kQuads = kVec / 4;      // float4 column-sum slots per vector
  using XV = Packed<T, kVec>;           // 16 bytes
  using WV = Packed<TW, kVec>;          // 16 or 32 bytes
  using Reduce = StaticRowReduce<kTpr, 1>;
  // Registers: x and dy packed (8 per vector, twice with the prefetch), the weight when kept,
  // ~40 for unpacked temporaries, addresses and scalars, under 65536 / kTpr (≤ 255).
  constexpr int kRegCap = 65536 / kTpr < 255 ? 65536 / kTpr : 255;
  constexpr int kValueRegs = kVecs * 8 * (kPrefetch ? 2 : 1);
  constexpr bool kWeightRegs = kWeight && kValueRegs + kVecs * int{sizeof(WV)} / 4 + 40 <= kRegCap;
  // dresidual_out: all vectors of the row loaded at once (one latency per row) when they fit.
  constexpr bool kResBatch = kValueRegs + (kWeightRegs ? kVecs * int{sizeof(WV)} / 4 : 0) +
                                 kVecs * 4 + 40 <= kRegCap;
  __shared__ float slots[2][Reduce::kSlots];  // alternate per row: one barrier per reduction
  extern __shared__ float4 colsums[];         // [dweight?][dbias?] x [kVecs][kQuads][kTpr]

  const int t = threadIdx.x;
  // Vectors of the row from this thread's first one on: vector v·kTpr of its pointers exists
  // when v·kTpr < n.
  const int n = static_cast<int>(p.g.cols / kVec) - t;
  const int64_t row0 = int64_t{blockIdx.x} * rows_per_cta;
  const int rows = static_cast<int>(min(int64_t{rows_per_cta}, p.g.rows - row0));  // ≥ 1
  const bool has_dw = p.dweight_part != nullptr, has_db = p.dbias_part != nullptr;
  float4* dw_acc = colsums;
  float4* db_acc = colsums + (has_dw ? kVecs * kQuads * kTpr : 0);
  auto slot = [&](int v, int q) { return (v * kQuads + q) * kTpr + t; };
#pragma unroll
  for (int v = 0; v < kVecs; ++v)
#pragma unroll
    for (int q = 0; q < kQuads; ++q) {
      if (has_dw) dw_acc[slot(v, q)] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (has_db) db_acc[slot(v, q)] = make_float4(0.f, 0.f, 0.f, 0.f);
    }

  auto ptr = [](auto* base, int o) { return reinterpret_cast<decltype(&base->elt[0])>(base + o); };
  // This thread's first vector of row `row` of an (M, N) operand of dtype T.
  auto row_vec = [&](const RowIO& io, int64_t row) {
    return reinterpret_cast<const XV*>(static_cast<const T*>(io.ptr) + row * io.row_stride) + t;
  };
  auto row_vec_out = [&](const RowIO& io, int64_t row) {
    return reinterpret_cast<XV*>(static_cast<T*>(io.ptr) + row * io.row_stride) + t;
  };
  auto load_row = [&](int64_t row, XV (&xv)[kVecs], XV (&dv)[kVecs], float& rstd) {
    const XV* x = row_vec(p.x, row);
    const XV* dy = row_vec(p.dout, row);
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      if (v * kTpr < n) {
        load_packed<Cache::kStream>(ptr(x, v * kTpr), xv[v]);
        load_packed<Cache::kStream>(ptr(dy, v * kTpr), dv[v]);
      }
    }
    rstd = p.rstd[row * p.rstd_stride];
  };

  const WV* w = reinterpret_cast<const WV*>(p.weight.ptr) + t;
  WV wv[kVecs];
  if constexpr (kWeightRegs) {
#pragma unroll
    for (int v = 0; v < kVecs; ++v)
      if (v * kTpr < n) load_packed<Cache::kReadOnly>(ptr(w, v * kTpr), wv[v]);
  }
  // w of vector v, fp32 (ones without a weight).
  auto weight_of = [&](int v, float (&wf)[kVec]) {
    if constexpr (!kWeight) {
#pragma unroll
      for (int i = 0; i < kVec; ++i) wf[i] = 1.f;
    } else if constexpr (kWeightRegs) {
      unpack(wv[v], wf);
    } else {
      WV u;
      load_packed<Cache::kReadOnly>(ptr(w, v * kTpr), u);
      unpack(u, wf);
    }
  };

  XV xv[kVecs], dv[kVecs];
  float rstd;
  load_row(row0, xv, dv, rstd);
#pragma unroll 1
  for (int k = 0; k < rows; ++k) {
    const int64_t row = row0 + k;
    XV xn[kVecs], dn[kVecs];
    float rstd_n = 0.f;
    if constexpr (kPrefetch)
      if (k + 1 < rows) load_row(row + 1, xn, dn, rstd_n);

    // ---- pass 1: Σ dy·w·x of this thread's columns ----
    float dot = 0.f;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      if (v * kTpr < n) {
        float xf[kVec], df[kVec], wf[kVec];
        unpack(xv[v], xf);
        unpack(dv[v], df);
        weight_of(v, wf);
#pragma unroll
        for (int i = 0; i < kVec; ++i) dot = fmaf(df[i] * wf[i], xf[i], dot);
      }
    }
    const float mean = Reduce::allreduce(dot, slots[k & 1], SumOp{}) * rstd * p.inv_n;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      opaque(xv[v]);
      opaque(dv[v]);
      if constexpr (kWeightRegs) opaque(wv[v]);
    }

    // ---- pass 2: dx (+ dresidual_out), the column sums ----
    const XV* dres = p.dresidual_out.ptr ? row_vec(p.dresidual_out, row) : nullptr;
    XV* dx = row_vec_out(p.dx, row);
    XV* dres_in = p.dresidual.ptr ? row_vec_out(p.dresidual, row) : nullptr;
    XV rv[kResBatch ? kVecs : 1];
    if constexpr (kResBatch) {
      if (dres) {
#pragma unroll
        for (int v = 0; v < kVecs; ++v)
          if (v * kTpr < n) load_packed<Cache::kStream>(ptr(dres, v * kTpr), rv[v]);
      }
    }
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      if (v * kTpr < n) {
        float xf[kVec], df[kVec], wf[kVec], d[kVec];
        unpack(xv[v], xf);
        unpack(dv[v], df);
        weight_of(v, wf);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          xf[i] *= rstd;  // xhat
          d[i] = (df[i] * wf[i] - xf[i] * mean) * rstd;
        }
        if (dres) {
          float r[kVec];
          if constexpr (kResBatch) {
            unpack(rv[kResBatch ? v : 0], r);
          } else {
            XV u;
            load_packed<Cache::kStream>(ptr(dres, v * kTpr), u);
            unpack(u, r);
          }
#pragma unroll
          for (int i = 0; i < kVec; ++i) d[i] += r[i];
        }
        XV o;
#pragma unroll
        for (int i = 0; i < kVec; ++i) o.elt[i] = from_float<T>(d[i]);
        store_packed(ptr(dx, v * kTpr), o);
        if (dres_in) store_packed(ptr(dres_in, v * kTpr), o);
      }
    }
    // Column sums, after the stores (xhat and dy unpacked again from the registers); one
    // loop per sum, so each issues its shared-memory loads together.
    if (has_dw) {
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        if (v * kTpr < n) {
          float xf[kVec], df[kVec];
          unpack(xv[v], xf);
          unpack(dv[v], df);
#pragma unroll
          for (int q = 0; q < kQuads; ++q) {
            float4& a = dw_acc[slot(v, q)];
            a.x = fmaf(df[4 * q], xf[4 * q] * rstd, a.x);
            a.y = fmaf(df[4 * q + 1], xf[4 * q + 1] * rstd, a.y);
            a.z = fmaf(df[4 * q + 2], xf[4 * q + 2] * rstd, a.z);
            a.w = fmaf(df[4 * q + 3], xf[4 * q + 3] * rstd, a.w);
          }
        }
      }
    }
    if (has_db) {
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        if (v * kTpr < n) {
          float df[kVec];
          unpack(dv[v], df);
#pragma unroll
          for (int q = 0; q < kQuads; ++q) {
            float4& a = db_acc[slot(v, q)];
            a.x += df[4 * q];
            a.y += df[4 * q + 1];
            a.z += df[4 * q + 2];
            a.w += df[4 * q + 3];
          }
        }
      }
    }

    if constexpr (kPrefetch) {
      if (k + 1 < rows) {
#pragma unroll
        for (int v = 0; v < kVecs; ++v) {
          xv[v] = xn[v];
          dv[v] = dn[v];
        }
        rstd = rstd_n;
      }
    } else {
      if (k + 1 < rows) load_row(row + 1, xv, dv, rstd);
    }
  }

  // This CTA's column sums -> row blockIdx.x of the partials (columns (v·kTpr + t)·kVec ...).
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    if (v * kTpr < n) {
      const int64_t col = int64_t{v * kTpr + t} * kVec;
#pragma unroll
      for (int q = 0; q < kQuads; ++q) {
        if (has_dw)
          reinterpret_cast<float4*>(p.dweight_part + int64_t{blockIdx.x} * p.g.cols + col)[q] =
              dw_acc[slot(v, q)];
        if (has_db)
          reinterpret_cast<float4*>(p.dbias_part + int64_t{blockIdx.x} * p.g.cols + col)[q] =
              db_acc[slot(v, q)];
      }
    }
  }
}

}  // namespace quack::detail
