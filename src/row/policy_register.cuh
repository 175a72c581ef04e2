// Row policies with the row in registers and compile-time geometry (RowPolicy::kRegister,
// kLooped): RMSNorm's simple forward kernel (rmsnorm_fwd_simple_kernel.cuh) with the op's math
// taken from its traits.
//
// Thread -> data: row r of the CTA is threads kTpr·r .. kTpr·r + kTpr-1; thread t of a row owns
// the 16-byte vectors j·kTpr + t (j < kVecs) of each chunk of kTpr·kVecs vectors of every input
// stream, so consecutive threads read consecutive vectors (coalesced). Vector indices are
// 32-bit (a row has < 2^31 vectors); row offsets are 64-bit (M·N may pass 2^31). Grid: one CTA
// per kRows rows (kLooped: per row), 1-D, not persistent, no clusters.
//
// kRegister (the row fits one chunk): every load of every input stream is issued first
// (evict-first), kept packed (16-bit types: half the registers of fp32); the traits' fold ->
// StaticRowReducer (shuffles, plus one shared-memory exchange when a row spans warps) ->
// finish; then the outputs from the registers (evict-first 16-byte stores).
// kLooped (any N): pass 1 folds chunk by chunk (plain loads, so the row stays in L2; two chunks
// in flight when the registers allow), combining the chunks' partial values in the thread;
// pass 2 walks the chunks backwards (the most recently read first, still in L2), re-reads them
// (evict-first) and stores. Each element is read and written by the same thread in the output
// pass, so an output may alias an input of the same layout.
//
// Registers only; shared memory holds the reduction's partials (one slot per warp).
// Host-checked (plan_row): N a multiple of the vector, every (M, N) stream with unit column
// stride and 16-byte aligned base and row stride; every input in TIn, every output in TOut.
#pragma once

#include "common/vec.cuh"
#include "row/op_traits.cuh"
#include "row/row_params.h"
#include "row/row_reduce.cuh"
#include "row/row_views.cuh"

namespace quack::detail {

template <class Op, typename TIn, typename TOut, int kTpr, int kRows, int kVecs>
__global__ void __launch_bounds__(kTpr * kRows)
    row_register_kernel(const __grid_constant__ RowParams p) {
  static_assert(Op::kCols == 0, "per-column vectors: not yet in the register policy");
  constexpr int kIn = Op::kIn, kOut = Op::kOut;
  constexpr int kVec = 16 / sizeof(TIn);  // elements per 16-byte vector
  using V = Packed<TIn, kVec>;
  using Reducer = StaticRowReducer<kTpr, kRows, typename Op::Red>;
  __shared__ float slots[Reducer::kSlotFloats];

  const int t = kRows == 1 ? static_cast<int>(threadIdx.x) : threadIdx.x % kTpr;
  const int64_t row = int64_t{blockIdx.x} * kRows + (kRows == 1 ? 0 : threadIdx.x / kTpr);
  const bool row_ok = row < p.g.rows;
  // Vectors of this row still ahead of this thread's first one: vector j·kTpr of the thread's
  // pointers exists when j·kTpr < n.
  const int n = row_ok ? static_cast<int>(p.g.cols / kVec) - t : 0;
  const int64_t r = row_ok ? row : 0;

  V xv[kIn][kVecs];
#pragma unroll
  for (int s = 0; s < kIn; ++s) {
    const V* src = reinterpret_cast<const V*>(static_cast<const TIn*>(p.in[s].ptr) +
                                              r * p.in[s].row_stride) + t;
#pragma unroll
    for (int j = 0; j < kVecs; ++j)
      if (j * kTpr < n) load_packed<Cache::kStream>(src[j * kTpr].elt, xv[s][j]);
  }
  const typename Op::RowIn rin = row_ok ? Op::load_row(p, row) : typename Op::RowIn{};
  const RegisterView<Op, TIn, kVecs, kTpr> view{xv, n, int64_t{t} * kVec};
  const auto total = Reducer::allreduce(Op::reduce(p, rin, view), slots);
  const typename Op::Row rr = Op::finish(p, rin, total, row, row_ok && t == 0);
  if constexpr (kOut > 0) {
    TOut* dst[kOut];
#pragma unroll
    for (int s = 0; s < kOut; ++s)
      dst[s] = static_cast<TOut*>(p.out[s].ptr) + r * p.out[s].row_stride + int64_t{t} * kVec;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      if (j * kTpr < n) {
        float x[kIn][kVec];
#pragma unroll
        for (int s = 0; s < kIn; ++s) unpack(xv[s][j], x[s]);
        const int64_t off = int64_t{j} * kTpr * kVec;
        apply_store<Op, TOut, kVec>(p, rr, x, int64_t{t} * kVec + off, dst, off);
      }
    }
  }
}

// Two CTAs per SM for one input stream (32 registers at 1024 threads: the chunk's packed
// values and the fold fit), one for more (without the bound ptxas kept the two-stream fp32
// instance at 32 registers and spilled).
template <class Op, typename TIn, typename TOut, int kTpr, int kVecs>
__global__ void __launch_bounds__(kTpr, Op::kIn == 1 ? 2048 / kTpr : 1)
    row_looped_kernel(const __grid_constant__ RowParams p) {
  static_assert(Op::kCols == 0, "per-column vectors: not yet in the looped policy");
  constexpr int kIn = Op::kIn, kOut = Op::kOut;
  constexpr int kVec = 16 / sizeof(TIn);
  constexpr int kChunk = kTpr * kVecs;  // vectors per row and pass (chunk)
  using V = Packed<TIn, kVec>;
  using R = typename Op::Red;
  using Reducer = StaticRowReducer<kTpr, 1, R>;
  // Pass 1: two chunks in flight when their registers fit the CTA's cap with room for the
  // fold's temporaries (two-stream ops at 1024 threads spilled with the plain slack).
  constexpr int kRegCap = 65536 / kTpr < 255 ? 65536 / kTpr : 255;
  constexpr int kPass1Unroll =
      2 * kVecs * 4 * kIn + 2 * kRowRegisterBudgetSlack <= kRegCap ? 2 : 1;
  __shared__ float slots[Reducer::kSlotFloats];

  const int t = threadIdx.x;
  const int64_t row = blockIdx.x;  // grid = M
  const int n = static_cast<int>(p.g.cols / kVec) - t;
  const int chunks = n > 0 ? (n + kChunk - 1) / kChunk : 0;
  const V* src[kIn];
#pragma unroll
  for (int s = 0; s < kIn; ++s)
    src[s] = reinterpret_cast<const V*>(static_cast<const TIn*>(p.in[s].ptr) +
                                        row * p.in[s].row_stride) + t;
  const typename Op::RowIn rin = Op::load_row(p, row);

  auto total = R::identity();
#pragma unroll kPass1Unroll
  for (int c = 0; c < chunks; ++c) {
    const int o = c * kChunk;
    V xv[kIn][kVecs];
#pragma unroll
    for (int s = 0; s < kIn; ++s)
#pragma unroll
      for (int j = 0; j < kVecs; ++j)
        if (o + j * kTpr < n) load_packed<Cache::kNormal>(src[s][o + j * kTpr].elt, xv[s][j]);
    const RegisterView<Op, TIn, kVecs, kTpr> view{xv, n - o, int64_t{o + t} * kVec};
    total = R::combine(total, Op::reduce(p, rin, view));
  }
  total = Reducer::allreduce(total, slots);
  const typename Op::Row rr = Op::finish(p, rin, total, row, t == 0);
  if constexpr (kOut > 0) {
    TOut* dst[kOut];
#pragma unroll
    for (int s = 0; s < kOut; ++s)
      dst[s] = static_cast<TOut*>(p.out[s].ptr) + row * p.out[s].row_stride + int64_t{t} * kVec;
#pragma unroll 1
    for (int c = chunks - 1; c >= 0; --c) {
      const int o = c * kChunk;
      V xv[kIn][kVecs];
#pragma unroll
      for (int s = 0; s < kIn; ++s)
#pragma unroll
        for (int j = 0; j < kVecs; ++j)
          if (o + j * kTpr < n) load_packed<Cache::kStream>(src[s][o + j * kTpr].elt, xv[s][j]);
#pragma unroll
      for (int j = 0; j < kVecs; ++j) {
        if (o + j * kTpr < n) {
          float x[kIn][kVec];
#pragma unroll
          for (int s = 0; s < kIn; ++s) unpack(xv[s][j], x[s]);
          const int64_t off = int64_t{o + j * kTpr} * kVec;
          apply_store<Op, TOut, kVec>(p, rr, x, int64_t{t} * kVec + off, dst, off);
        }
      }
    }
  }
}

}  // namespace quack::detail
