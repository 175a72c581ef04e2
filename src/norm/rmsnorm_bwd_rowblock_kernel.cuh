// RMSNorm backward, row-block path ("bwd v2"): a CTA owns R = rows_per_cta consecutive rows
// and walks them one at a time with the row in registers; the grid is ceil(M / R) CTAs
// (rounded up to the cluster size), many waves, not persistent. Geometry fixed at compile time.
//
// Why: the persistent staged kernel and the one-wave simple kernel (bwd v1) keep too few bytes
// in flight per SM (a CTA waits for its row, reduces, stores, then loads the next). Here small
// CTAs (≤ 64-85 registers, 2-4 resident per SM) and many waves keep several rows' loads in
// flight per SM, as the forward's simple path does (0.87-0.96 x copy).
//
// Thread -> data: thread t of the CTA (kTpr threads, one row at a time) owns the 16-byte
// vectors j = v·kTpr + t (v < kVecs) of every row; consecutive threads read consecutive
// vectors (coalesced). Vector indices are 32-bit, row offsets 64-bit.
//
// Per row: x and dy (packed, x's dtype) and rstd are loaded into registers; pass 1 sums
// dy·w·x per thread -> StaticRowReduce (one barrier; slots alternate per row) -> mean =
// rstd·Σ/N; pass 2 unpacks again and stores dx = rstd·(dy·w − xhat·mean) (+ dresidual_out) to dx
// (and dresidual). kPrefetch: the next row's x, dy and rstd are loaded before this row's pass 1
// (two register buffers used in turn: two rows in flight per CTA).
//
// dweight / dbias: each thread keeps fp32 sums of dy·xhat (whenever the weight is present) and
// of dy (kDb) for its own columns in registers across its R rows. At the end:
//  - cluster == 1: the thread writes them (16-byte stores) into row blockIdx.x of the (P, N)
//    partials;
//  - cluster == C > 1 (a (C, 1, 1) thread-block cluster): every CTA writes them into its
//    shared memory ((accumulators, N) fp32), cluster barrier, CTA rank r adds float4 column
//    group f = r·kTpr + t, + C·kTpr, ... of all C CTAs in rank order through distributed
//    shared memory and stores it to partial row blockIdx.x / C; cluster barrier (no CTA leaves
//    while a peer reads its shared memory).
// colsum (common/colsum.cu) then adds the P partial rows in a fixed order. The grid depends
// only on (M, R, C): identical bits run to run, on any device.
//
// Weight: re-read per pass through the read-only path (16-byte __ldg, L1-resident: every row of
// the SM uses it) so its registers go to the accumulators. Streams: x, dy, dresidual_out are
// read once (evict-first), dx / dresidual stored evict-first.
// Host-checked (rmsnorm.cpp): x, dout, dresidual_out, dx, dresidual in x's dtype, column
// stride 1, 16-byte aligned bases and row strides, N a multiple of the vector, N ≤ kTpr·kVecs
// vectors; weight absent, in x's dtype or fp32, contiguous and 16-byte aligned; dynamic shared
// memory = (partials written) · N · 4 bytes when cluster > 1.
//
//   T        x, dout, dresidual_out, dx, dresidual
//   TW       weight (T or fp32; unused when !kWeight: w = 1, no dweight sums)
//   kDb      dbias sums (the host passes dbias_part)
//   kTpr     threads per CTA = per row (power of two), kVecs vectors per thread
#pragma once

#include <cooperative_groups.h>

#include "common/reduce.cuh"
#include "common/vec.cuh"
#include "norm/norm_config.h"
#include "norm/rmsnorm_params.h"

namespace quack::detail {

// Hides the value of v from the optimizer (no instruction): pass 2 then unpacks the packed
// registers again instead of keeping pass 1's fp32 copies alive across the reduction (which
// would double or triple the registers of the row). From bwd v1.
template <typename U, int K>
__device__ __forceinline__ void rowblock_opaque(Packed<U, K>& v) {
  uint32_t* w = reinterpret_cast<uint32_t*>(&v);
#pragma unroll
  for (int i = 0; i < K * int{sizeof(U)} / 4; ++i) asm("" : "+r"(w[i]));
}

template <typename T, typename TW, bool kWeight, bool kDb, int kTpr, int kVecs, bool kPrefetch>
struct RowBlockBwdTraits {
  static constexpr RowBlockBwdConfig kConfig{kTpr, kVecs, kPrefetch, ""};
  static constexpr int kAccumulators = (kWeight ? 1 : 0) + (kDb ? 1 : 0);
  static constexpr bool kCompiles =
      rowblock_bwd_compiles(kConfig, int{sizeof(T)}, kAccumulators);
  static constexpr int kMinCtas = rowblock_bwd_min_ctas(kConfig, int{sizeof(T)}, kAccumulators);
  static constexpr int kRegs = rowblock_bwd_regs(kConfig, int{sizeof(T)}, kAccumulators);
};

template <typename T, typename TW, bool kWeight, bool kDb, int kTpr, int kVecs, bool kPrefetch>
__global__ void __launch_bounds__(
    kTpr, (RowBlockBwdTraits<T, TW, kWeight, kDb, kTpr, kVecs, kPrefetch>::kMinCtas))
    rmsnorm_bwd_rowblock_kernel(const __grid_constant__ RmsNormBwdParams p, int rows_per_cta,
                                int cluster) {
  constexpr int kVec = 16 / sizeof(T);  // elements per 16-byte vector
  constexpr int kQuads = kVec / 4;      // float4 groups per vector
  using XV = Packed<T, kVec>;           // 16 bytes
  using WV = Packed<TW, kVec>;          // 16 or 32 bytes
  using Reduce = StaticRowReduce<kTpr, 1>;
  using Traits = RowBlockBwdTraits<T, TW, kWeight, kDb, kTpr, kVecs, kPrefetch>;
  static_assert(Traits::kCompiles, "register estimate over the CTA's budget: not an instance");
  // Registers per thread ptxas may use (__launch_bounds__), and whether dresidual_out's row
  // (4 registers per vector) fits beside the estimate.
  constexpr int kRegCap = 65536 / (kTpr * Traits::kMinCtas) < 255 ? 65536 / (kTpr * Traits::kMinCtas) : 255;
  constexpr bool kResEarly =
      Traits::kRegs + 4 * kVecs <= kRegCap;
  __shared__ float slots[2][Reduce::kSlots];  // alternate per row: one barrier per reduction
  extern __shared__ float4 stage[];           // cluster > 1: [dweight?][dbias?] x (N / 4)

  const int t = threadIdx.x;
  // Vectors of the row from this thread's first one on: vector v·kTpr of its pointers exists
  // when v·kTpr < n.
  const int n = static_cast<int>(p.g.cols / kVec) - t;
  const int64_t row0 = int64_t{blockIdx.x} * rows_per_cta;
  // Rows of this CTA (0 for the padding CTAs of the last cluster).
  const int rows = static_cast<int>(
      max(int64_t{0}, min(int64_t{rows_per_cta}, p.g.rows - row0)));

  float dw[kWeight ? kVecs : 1][kVec], db[kDb ? kVecs : 1][kVec];  // (vectors, elements)
#pragma unroll
  for (int v = 0; v < kVecs; ++v)
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      if constexpr (kWeight) dw[v][i] = 0.f;
      if constexpr (kDb) db[v][i] = 0.f;
    }

  auto ptr = [](auto* base, int o) { return reinterpret_cast<decltype(&base->elt[0])>(base + o); };
  // This thread's first vector of row `row` of an (M, N) operand of dtype T.
  auto row_in = [&](const RowIO& io, int64_t row) {
    return reinterpret_cast<const XV*>(static_cast<const T*>(io.ptr) + row * io.row_stride) + t;
  };
  auto row_out = [&](const RowIO& io, int64_t row) {
    return reinterpret_cast<XV*>(static_cast<T*>(io.ptr) + row * io.row_stride) + t;
  };
  auto load_row = [&](int64_t row, XV (&xv)[kVecs], XV (&dv)[kVecs], float& rstd) {
    const XV* x = row_in(p.x, row);
    const XV* dy = row_in(p.dout, row);
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
  // w of vector v, fp32 (ones without a weight).
  auto weight_of = [&](int v, float (&wf)[kVec]) {
    if constexpr (kWeight) {
      WV u;
      load_packed<Cache::kReadOnly>(ptr(w, v * kTpr), u);
      unpack(u, wf);
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) wf[i] = 1.f;
    }
  };

  // One row: pass 1, reduction (slots s), pass 2 and the column sums, from xv / dv.
  auto process = [&](int64_t row, XV (&xv)[kVecs], XV (&dv)[kVecs], float rstd, float* s) {
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
    // dresidual_out: issued before the reduction (its latency hides behind the barrier) when
    // its registers fit the budget, else right after it.
    const XV* dres = p.dresidual_out.ptr ? row_in(p.dresidual_out, row) : nullptr;
    XV rv[kVecs];
    auto load_res = [&] {
      if (dres) {
#pragma unroll
        for (int v = 0; v < kVecs; ++v)
          if (v * kTpr < n) load_packed<Cache::kStream>(ptr(dres, v * kTpr), rv[v]);
      }
    };
    if constexpr (kResEarly) load_res();
    const float mean = Reduce::allreduce(dot, s, SumOp{}) * rstd * p.inv_n;
    if constexpr (!kResEarly) load_res();
    const float mr = mean * rstd;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      rowblock_opaque(xv[v]);
      rowblock_opaque(dv[v]);
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
          const float xh = xf[i] * rstd;  // xhat
          d[i] = fmaf(df[i] * wf[i], rstd, -xh * mr);
          if constexpr (kWeight) dw[v][i] = fmaf(df[i], xh, dw[v][i]);
          if constexpr (kDb) db[v][i] += df[i];
        }
        if (dres) {
          float r[kVec];
          unpack(rv[v], r);
#pragma unroll
          for (int i = 0; i < kVec; ++i) d[i] += r[i];
        }
        XV o;
#pragma unroll
        for (int i = 0; i < kVec; ++i) o.elt[i] = from_float<T>(d[i]);
        // Output pointers formed at each store (from the constant bank): held across the
        // vector loop they cost registers the column sums need.
        store_packed(ptr(row_out(p.dx, row), v * kTpr), o);
        if (p.dresidual.ptr) store_packed(ptr(row_out(p.dresidual, row), v * kTpr), o);
        // Keeps the next vector's weight load after these stores: hoisted, the weight of
        // every vector would be live at once (8 registers per fp32 vector) beside the sums.
        asm volatile("" ::: "memory");
      }
    }
  };

  XV xa[kVecs], da[kVecs];
  float ra = 0.f;
  if constexpr (kPrefetch) {
    // Two buffers in turn: row k+1 is in flight while row k is reduced and stored.
    XV xb[kVecs], dbv[kVecs];
    float rb = 0.f;
    if (rows > 0) load_row(row0, xa, da, ra);
#pragma unroll 1
    for (int k = 0; k < rows; k += 2) {
      if (k + 1 < rows) load_row(row0 + k + 1, xb, dbv, rb);
      process(row0 + k, xa, da, ra, slots[0]);
      if (k + 1 >= rows) break;
      if (k + 2 < rows) load_row(row0 + k + 2, xa, da, ra);
      process(row0 + k + 1, xb, dbv, rb, slots[1]);
    }
  } else {
#pragma unroll 1
    for (int k = 0; k < rows; ++k) {
      load_row(row0 + k, xa, da, ra);
      process(row0 + k, xa, da, ra, slots[k & 1]);
    }
  }

  // ---- the CTA's column sums -> its partial row (or its cluster's) ----
  float* const parts[2] = {kWeight ? p.dweight_part : nullptr, kDb ? p.dbias_part : nullptr};
  auto acc_quad = [&](int a, int v, int q) {
    const float(&s)[kVec] = a == 0 ? dw[kWeight ? v : 0] : db[kDb ? v : 0];
    return make_float4(s[4 * q], s[4 * q + 1], s[4 * q + 2], s[4 * q + 3]);
  };
  if (cluster <= 1) {
#pragma unroll
    for (int a = 0; a < 2; ++a) {
      if (!parts[a]) continue;
      float4* dst = reinterpret_cast<float4*>(parts[a] + int64_t{blockIdx.x} * p.g.cols);
#pragma unroll
      for (int v = 0; v < kVecs; ++v)
        if (v * kTpr < n)
#pragma unroll
          for (int q = 0; q < kQuads; ++q) dst[(v * kTpr + t) * kQuads + q] = acc_quad(a, v, q);
    }
    return;
  }
  namespace cg = cooperative_groups;
  cg::cluster_group cl = cg::this_cluster();
  const int quads = static_cast<int>(p.g.cols / 4);  // float4 column groups per row
  float4* region[2] = {stage, stage + (parts[0] ? quads : 0)};
#pragma unroll
  for (int a = 0; a < 2; ++a) {
    if (!parts[a]) continue;
#pragma unroll
    for (int v = 0; v < kVecs; ++v)
      if (v * kTpr < n)
#pragma unroll
        for (int q = 0; q < kQuads; ++q) region[a][(v * kTpr + t) * kQuads + q] = acc_quad(a, v, q);
  }
  cl.sync();  // every CTA's sums are in its shared memory (release / acquire)
  const int rank = static_cast<int>(blockIdx.x % cluster);
  const int64_t prow = blockIdx.x / cluster;
#pragma unroll
  for (int a = 0; a < 2; ++a) {
    if (!parts[a]) continue;
    float4* dst = reinterpret_cast<float4*>(parts[a] + prow * p.g.cols);
    for (int f = rank * kTpr + t; f < quads; f += cluster * kTpr) {
      float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int q = 0; q < cluster; ++q) {  // rank order: the same sum in every run
        const float4 r = *cl.map_shared_rank(region[a] + f, q);
        s.x += r.x;
        s.y += r.y;
        s.z += r.z;
        s.w += r.w;
      }
      dst[f] = s;
    }
  }
  cl.sync();  // no CTA exits while a peer still reads its shared memory
}

}  // namespace quack::detail
