// Row policies with the row in registers and compile-time geometry (RowPolicy::kRegister,
// kLooped, and kMap: the register policy's row code over independent column tiles for ops
// without a reduction, row_map_kernel): the design of RMSNorm's simple forward
// (docs/performance.md), the op's math from its traits.
//
// Thread -> data: row r of the CTA is threads kTpr·r .. kTpr·r + kTpr-1; thread t of a row owns
// the 16-byte vectors j·kTpr + t (j < kVecs) of each chunk of kTpr·kVecs vectors of every input
// stream, so consecutive threads read consecutive vectors (coalesced). Vector indices are
// 32-bit (a row has < 2^31 vectors); row offsets are 64-bit (M·N may pass 2^31). Grid: one CTA
// per kRows rows (kLooped: per row), 1-D, not persistent, no clusters; for ops with
// kGate == RowGate::kKernel at most the resident CTAs, each looping over row blocks (a closed
// gate then costs one wave of CTAs, not one per row block).
//
// kRegister (the row fits one chunk): every load of every input stream is issued first
// (RowInRegs::kRowCache), kept packed (16-bit types: half the registers of fp32); the traits'
// fold -> StaticRowReducer (shuffles, plus one shared-memory exchange when a row spans warps) ->
// finish; then the outputs from the registers (evict-first 16-byte stores).
// kLooped (any N): pass 1 folds chunk by chunk (plain loads, so the row stays in L2; two chunks
// in flight when the registers allow), combining the chunks' partial values in the thread;
// pass 2 walks the chunks backwards (the most recently read first, still in L2), re-reads them
// (evict-first) and stores. Each element is read and written by the same thread in the output
// pass, so an output may alias an input of the same layout.
//
// Per-column vectors (kCols): 16-byte read-only loads (L1-cached: every row of an SM re-reads
// them), issued with the row's loads (kRegister) or with each pass-2 chunk (kLooped) when they
// fit the registers beside it (row_cols_early), else one vector at a time right before its use
// (RMSNorm's simple forward; the plan takes the register policy for such ops only when their
// traits allow it, kLateCols: row_config_usable). Ops that ask for them at apply (kColsAtApply:
// LayerNorm's forward) get them one 16-byte word at a time inside a per-stream output step
// (apply_store_by_stream, register policy; the looped policy one vector at a time), and launch
// bounds from the row's registers alone (row_register_at_apply_min_ctas).
// Absent optional input streams hold zeros and are not read; absent vectors read as 0.
//
// Registers only; shared memory holds the reduction's partials (one slot per warp).
// Host-checked (plan_row): N a multiple of the vector, every (M, N) stream with unit column
// stride and 16-byte aligned base and row stride, vectors contiguous and 16-byte aligned; every
// stream in its instance dtype (D). No column accumulations (not persistent).
#pragma once

#include "common/vec.cuh"
#include "row/op_traits.cuh"
#include "row/row_config.h"
#include "row/row_params.h"
#include "row/row_reduce.cuh"
#include "row/row_views.cuh"

namespace quack::detail {

/// Whether a register or looped instance loads the per-column vectors with the row (before the
/// reduction): when the fold reads them, or when they fit the CTA's register cap beside the
/// row's packed values (row_register_cols_fit) and the op does not ask for them at apply
/// (kColsAtApply). Otherwise they are loaded one vector at a time where used (the register
/// policy takes ops whose vectors do not fit only with kLateCols: row_config_usable).
template <class Op, class D, int kThreads, int kVecs>
__host__ __device__ constexpr bool row_cols_early() {
  constexpr int kVec = row_vec_elems<D, Op::kIn>();
  constexpr int kRegCap = 65536 / kThreads < 255 ? 65536 / kThreads : 255;
  constexpr int kColRegs = Op::kCols * kVecs * kVec * int{sizeof(typename D::Vec)} / 4;
  return Op::kCols > 0 &&
         (Op::kReduceCols ||
          (!Op::kColsAtApply &&
           row_register_cols_fit(kVecs * 4 * row_in_words<D, Op::kIn>(), kColRegs, kRegCap,
                                 Op::kCols, row_in_words<D, Op::kIn>() - Op::kIn)));
}

/// Vector j's per-column values, in fp32, for apply: from the registers loaded with the row
/// (kEarly), else loaded now (one vector at a time; the empty asm keeps the next vector's loads
/// below this point, where the registers row_cols_early found missing are free again).
template <class Op, class D, bool kEarly, int kVec, class CV, int kCv>
__device__ __forceinline__ void row_cols_for_apply(const RowParams& p, const CV (&cv)[row_dim(
                                                       Op::kCols)][kCv],
                                                   int j, int64_t col,
                                                   float (&v)[row_dim(Op::kCols)][kVec]) {
  if constexpr (Op::kCols > 0) {
#pragma unroll
    for (int c = 0; c < Op::kCols; ++c) {
      if constexpr (kEarly) {
        unpack(cv[c][j], v[c]);
      } else {
        CV w;
        load_col_packed<typename D::Vec, kVec>(p.vec[c], col, w);
        unpack(w, v[c]);
      }
    }
    if constexpr (!kEarly) asm volatile("" ::: "memory");
  }
}

/// Vector j's outputs for ops whose per-column vectors load at apply (kColsAtApply: LayerNorm's
/// forward), one output stream at a time, the last first (an optional residual_out before y),
/// so that no fp32 value lives from one stream to the next: each stream unpacks the row's packed
/// words again (opaque: the unpacked values of an earlier stream or of the fold are not reused),
/// and loads the vectors' values one 16-byte word of each at a time right before the elements
/// that use them (a vector's word of fp32 values: 4 registers per vector instead of its 8);
/// streams whose apply does not read them load nothing (the loads are dead code there). Each
/// element's outputs come from the traits' apply as in apply_store (the same math, so the same
/// bits); absent optional streams are not computed.
template <class Op, class D, int kVec, int kVecs>
__device__ __forceinline__ void apply_store_by_stream(const RowParams& p,
                                                      const typename Op::Row& rr,
                                                      RowInRegs<Op, D, kVecs>& xv, int j,
                                                      int64_t col,
                                                      void* const (&dst)[row_dim(Op::kOut)],
                                                      int64_t off) {
  static_assert(Op::kAcc == 0 && Op::kGate != RowGate::kOutputs,
                "no column accumulations, no output gate");
  using TVec = typename D::Vec;
  constexpr int kC = row_dim(Op::kCols);
  // Elements per 16-byte word of the vectors (fp32: 4; 16-bit: 8), at most the input vector's.
  constexpr int kGroup = 16 / int{sizeof(TVec)} < kVec ? 16 / int{sizeof(TVec)} : kVec;
  row_for<Op::kOut>([&](auto S) {
    constexpr int s = Op::kOut - 1 - decltype(S)::value;
    using TO = row_out_t<D, s>;
    if (row_out_optional<Op>(s) && dst[s] == nullptr) return;
    row_for<Op::kIn>([&](auto I) {
      constexpr int i = decltype(I)::value;
#pragma unroll
      for (int k = 0; k < row_in_words_of<D, Op::kIn, i>(); ++k) {
        asm volatile("" : "+r"(xv.w[i][j][k].x), "+r"(xv.w[i][j][k].y), "+r"(xv.w[i][j][k].z),
                     "+r"(xv.w[i][j][k].w));
      }
    });
    float x[Op::kIn][kVec];
    xv.unpack_all(j, x);
    Packed<TO, kVec> y;
#pragma unroll
    for (int g = 0; g < kVec; g += kGroup) {
      float v[kC][kVec];
      if constexpr (Op::kCols > 0) {
#pragma unroll
        for (int c = 0; c < Op::kCols; ++c) {
          Packed<TVec, kGroup> w;
          load_col_packed<TVec, kGroup>(p.vec[c], col + g, w);
          float wf[kGroup];
          unpack(w, wf);
#pragma unroll
          for (int e = 0; e < kGroup; ++e) v[c][g + e] = wf[e];
        }
        asm volatile("" ::: "memory");  // the next word's loads stay below this point
      }
#pragma unroll
      for (int e = g; e < g + kGroup; ++e) {
        RowElem<Op::kIn, Op::kCols> el;
        fill_elem<Op, kVec>(el, x, v, e, col + e);
        float o[row_dim(Op::kOut)];
        Op::apply(p, rr, el, o);
        y.elt[e] = from_float<TO>(o[s]);
      }
    }
    store_packed(static_cast<TO*>(dst[s]) + off, y);
  });
}

/// Vector j of a row held in registers, its outputs stored at element `off` of dst (first
/// column col): for ops whose per-column vectors load at apply one output stream at a time
/// (apply_store_by_stream), else from the unpacked values and the per-column values that
/// cols(v) fills (row_cols_for_apply; nothing for ops without vectors) through apply_store.
/// The register and cluster register policies' store step; fix: apply_store's (false: the
/// vector is outside the op's fix_mask).
template <class Op, class D, int kVec, int kVecs, class ColsF>
__device__ __forceinline__ void register_store_vector(const RowParams& p,
                                                      const typename Op::Row& rr,
                                                      RowInRegs<Op, D, kVecs>& xv, int j,
                                                      int64_t col,
                                                      void* const (&dst)[row_dim(Op::kOut)],
                                                      int64_t off, ColsF&& cols,
                                                      bool fix = true) {
  if constexpr (Op::kColsAtApply) {
    apply_store_by_stream<Op, D, kVec>(p, rr, xv, j, col, dst, off);
  } else {
    float x[Op::kIn][kVec], v[row_dim(Op::kCols)][kVec];
    xv.unpack_all(j, x);
    cols(v);
    apply_store<Op, D, kVec>(p, rr, x, v, col, dst, off, NoAcc{}, fix);
  }
}

/// CTAs per SM ptxas is held to for ops whose vectors load at apply (kColsAtApply: LayerNorm's
/// forward, apply_store_by_stream), by the registers of the row's packed words: ≤ 8 (2 words:
/// r16t16v2, r16t16v1, r8t32v1 at one stream) 2048 threads per SM (32 registers), ≤ 16
/// (r32t8v4, r4t32v4, t256v4 of 16-bit or fp32 x; r16t16v2 of x and a residual) 1536 (40);
/// more (r4t32v8, two streams at 4 vectors), or fewer than 2 CTAs, ptxas's choice. No instance
/// spills there (scripts/resource_report.py; at 32, 4-vector one-stream instances spilled 40-60
/// bytes, and one-vector instances with an fp32 residual beside 16-bit x 12).
template <class Op, class D, int kThreads, int kVecs>
__host__ __device__ constexpr int row_register_at_apply_min_ctas() {
  constexpr int kRowRegs = row_in_words<D, Op::kIn>() * kVecs * 4;
  constexpr int kSmThreads = kRowRegs <= 8 ? 2048 : kRowRegs <= 16 ? 1536 : 0;
  return kSmThreads / kThreads >= 2 ? kSmThreads / kThreads : 0;
}

/// Rows of ≤ 4 packed 16-byte words per thread (16 registers) keep a full SM (2048 threads: 32
/// registers) when ptxas is held to it; left free, its schedule of the fold (FFMAs hoisted ahead
/// of the MUFU) took 36-42 registers: one 1024-thread CTA per SM instead of two. CTAs of
/// several rows with reductions of more than 2 floats are held to 1536 threads per SM (≤ 40
/// registers) instead (cross-entropy's forward spilled 8 bytes at 32 and took 48 when free), and
/// so are kernels with a kernel gate (their row-block loop: the gated loss-only cross-entropy
/// instances spilled 4 bytes at 32). Ops
/// with per-column vectors, accumulations or optional streams keep ptxas's choice, and so do
/// ops whose per-element math spills at 32 (Op::kFullSm, op_traits.cuh): 0, no minimum (a
/// minimum of 1 is not the same: ptxas then took 4-16 registers more, e.g. softmax's backward
/// 48 -> 64 and RMSNorm's forward 64 -> 70). Ops whose vectors load at apply: by the row's
/// registers alone (row_register_at_apply_min_ctas).
template <class Op, class D, int kThreads, int kRows, int kVecs>
__host__ __device__ constexpr int row_register_min_ctas() {
  if constexpr (Op::kColsAtApply) return row_register_at_apply_min_ctas<Op, D, kThreads, kVecs>();
  return row_in_words<D, Op::kIn>() * kVecs <= 4 && Op::kCols == 0 && Op::kAcc == 0 &&
                 Op::kOptIn == 0 && Op::kOptOut == 0 && Op::kFullSm
             ? (Op::kGate == RowGate::kKernel              ? 1536
                : kRows == 1 || Op::Red::kFloats <= 2 ? 2048
                                                      : 1536) /
                   kThreads
             : 0;
}

/// One row block (kRows rows) of row_register_kernel: block blk's rows blk·kRows ..
/// blk·kRows + kRows-1 (those < M). slots: the reducer's shared memory. kMap: a tile of
/// row_map_kernel (kRows = 1, ops without a reduction): row blk's vectors from v0 on (at most
/// kTpr·kVecs of them), no fold and no all-reduce (finish gets Red::identity()), the writer
/// of per-row outputs thread 0 of the row's tile at v0 = 0.
template <class Op, class D, int kTpr, int kRows, int kVecs, bool kMap = false>
__device__ __forceinline__ void row_register_block(const RowParams& p, int64_t blk,
                                                   float* slots, int v0 = 0) {
  static_assert(!kMap || (Op::kNoReduce && kRows == 1), "a map tile: one row, no reduction");
  constexpr int kIn = Op::kIn, kOut = Op::kOut, kC = row_dim(Op::kCols);
  constexpr int kVec = row_vec_elems<D, kIn>();  // elements per vector
  using TVec = typename D::Vec;
  using CV = Packed<TVec, kVec>;
  constexpr bool kEarly = row_cols_early<Op, D, kTpr * kRows, kVecs>();
  static_assert(Op::kCols == 0 || kEarly || Op::kLateCols || Op::kColsAtApply,
                "row_config_usable compiles only instances whose vectors fit beside the row, "
                "or ops that take them late");
  using Reducer = StaticRowReducer<kTpr, kRows, typename Op::Red>;

  const int t = kRows == 1 ? static_cast<int>(threadIdx.x) : threadIdx.x % kTpr;
  const int64_t row = blk * kRows + (kRows == 1 ? 0 : threadIdx.x / kTpr);
  const bool row_ok = row < p.g.rows;
  // Vectors of this row still ahead of this thread's first one: vector j·kTpr of the thread's
  // pointers exists when j·kTpr < n.
  const int n = row_ok ? static_cast<int>(p.g.cols / kVec) - v0 - t : 0;
  const int64_t r = row_ok ? row : 0;
  const int64_t col_t = int64_t{v0 + t} * kVec;  // the thread's first column

  RowInRegs<Op, D, kVecs> xv;
  xv.template load_row<kTpr>(p, r, col_t, n);
  CV cv[kC][kEarly ? kVecs : 1];
  if constexpr (kEarly) {
#pragma unroll
    for (int c = 0; c < Op::kCols; ++c)
#pragma unroll
      for (int j = 0; j < kVecs; ++j)
        if (j * kTpr < n) load_col_packed<TVec, kVec>(p.vec[c], col_t + j * kTpr * kVec, cv[c][j]);
  }
  const typename Op::RowIn rin = row_ok ? Op::load_row(p, row) : typename Op::RowIn{};
  typename Op::Red::Val part;
  if constexpr (kMap) {
    part = Op::Red::identity();
  } else if constexpr (Op::kReduceCols) {
    using Cols = PackedCols<TVec, kC, kVecs, kVec>;
    const RegisterView<Op, D, kVecs, kTpr, Cols> view{xv, n, col_t, Cols{cv}};
    part = Op::reduce(p, rin, view);
  } else {
    const RegisterView<Op, D, kVecs, kTpr> view{xv, n, col_t, NoCols{}};
    part = Op::reduce(p, rin, view);
  }
  typename Op::Red::Val total = part;
  if constexpr (!kMap) total = Reducer::allreduce(part, slots);
  const typename Op::Row rr = Op::finish(p, rin, total, row, row_ok && t == 0 && v0 == 0);
  if constexpr (kOut > 0) {
    void* dst[row_dim(kOut)];
    out_ptrs<Op, D>(p, r, col_t, dst);
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      if (j * kTpr < n) {
        const int64_t off = int64_t{j} * kTpr * kVec;
        register_store_vector<Op, D, kVec>(p, rr, xv, j, col_t + off, dst, off, [&](auto& v) {
          row_cols_for_apply<Op, D, kEarly, kVec>(p, cv, j, col_t + off, v);
        });
      }
    }
  }
}

/// Grid: one CTA per row block, or, for ops with kGate == RowGate::kKernel, at most the
/// resident CTAs (launch_row_config), each looping over the row blocks blockIdx.x + k·gridDim.x,
/// so that a closed gate costs one wave of CTAs that return at once instead of ⌈M / kRows⌉.
/// The barrier between a CTA's row blocks keeps a warp's next store into the reducer's slots
/// behind every warp's loads of the previous row block's.
template <class Op, class D, int kTpr, int kRows, int kVecs>
__global__ void __launch_bounds__(kTpr * kRows,
                                  row_register_min_ctas<Op, D, kTpr * kRows, kRows, kVecs>())
    row_register_kernel(const __grid_constant__ RowParams p) {
  if (row_gate_skips_kernel<Op>(p)) return;  // kGate == kKernel, closed (op_traits.cuh)
  static_assert(!Op::kColShift, "vector shifts: the staged and general policies only");
  static_assert(Op::kAcc == 0, "column accumulations need a persistent policy (staged)");
  using Reducer = StaticRowReducer<kTpr, kRows, typename Op::Red>;
  __shared__ float slots[Reducer::kSlotFloats];
  if constexpr (Op::kGate == RowGate::kKernel) {
    const int64_t blocks = (p.g.rows + kRows - 1) / kRows;
    for (int64_t blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
      if (blk != blockIdx.x) __syncthreads();  // the previous row block's slot loads are done
      row_register_block<Op, D, kTpr, kRows, kVecs>(p, blk, slots);
    }
  } else {
    row_register_block<Op, D, kTpr, kRows, kVecs>(p, blockIdx.x, slots);
  }
}

/// The map policy (RowPolicy::kMap; ops without a reduction, Op::kNoReduce): tile k is row
/// k / chunks, its vectors from v0 = (k % chunks)·kTpr·kVecs on (chunks = ⌈row vectors /
/// (kTpr·kVecs)⌉), run as a one-row register block at v0 (row_register_block): the 16-byte
/// loads of every input stream, the per-row inputs, finish, the stores; no reduction, no
/// barrier, no cluster: a row's tiles are independent CTAs. Grid: one CTA per tile (M·chunks
/// < 2^31, host-checked: 32-bit tile indices), or for ops with kGate == RowGate::kKernel at
/// most the resident CTAs, each looping over the tiles blockIdx.x + k·gridDim.x
/// (row_gated_grid). 1024 threads per SM (row_map_ctas_per_sm: 64 registers).
template <class Op, class D, int kTpr, int kVecs>
__global__ void __launch_bounds__(kTpr, row_map_ctas_per_sm(kTpr))
    row_map_kernel(const __grid_constant__ RowParams p) {
  if (row_gate_skips_kernel<Op>(p)) return;  // kGate == kKernel, closed (op_traits.cuh)
  static_assert(Op::kNoReduce && Op::kCols == 0 && Op::kAcc == 0,
                "ops without a reduction, per-column vectors or accumulations (row_config.h)");
  constexpr unsigned kChunk = kTpr * kVecs;  // vectors per tile
  constexpr int kVec = row_vec_elems<D, Op::kIn>();
  const unsigned chunks = (static_cast<unsigned>(p.g.cols / kVec) + kChunk - 1) / kChunk;
  const unsigned tiles = static_cast<unsigned>(p.g.rows) * chunks;
#pragma unroll 1
  for (unsigned k = blockIdx.x; k < tiles; k += gridDim.x) {
    const unsigned row = k / chunks;
    row_register_block<Op, D, kTpr, 1, kVecs, true>(p, row, nullptr,
                                                    static_cast<int>((k - row * chunks) * kChunk));
  }
}

/// One row of row_looped_kernel. slots: the reducer's shared memory.
template <class Op, class D, int kTpr, int kVecs>
__device__ __forceinline__ void row_looped_block(const RowParams& p, int64_t row, float* slots) {
  constexpr int kIn = Op::kIn, kOut = Op::kOut, kC = row_dim(Op::kCols);
  constexpr int kVec = row_vec_elems<D, kIn>();
  constexpr int kChunk = kTpr * kVecs;  // vectors per row and pass (chunk)
  using TVec = typename D::Vec;
  using CV = Packed<TVec, kVec>;
  using R = typename Op::Red;
  using Reducer = StaticRowReducer<kTpr, 1, R>;
  using Regs = RowInRegs<Op, D, kVecs>;
  // Pass 1: two chunks in flight when their registers fit the CTA's cap with room for the
  // fold's temporaries (two-stream ops at 1024 threads spilled with the plain slack).
  constexpr int kRegCap = 65536 / kTpr < 255 ? 65536 / kTpr : 255;
  constexpr int kWords = row_in_words<D, kIn>();
  constexpr int kPass1Unroll =
      2 * kVecs * 4 * kWords + 2 * kRowRegisterBudgetSlack <= kRegCap ? 2 : 1;
  // Pass 2 loads a chunk's vector slices with the chunk when they fit beside it.
  constexpr bool kEarly = row_cols_early<Op, D, kTpr, kVecs>();

  const int t = threadIdx.x;
  const int n = static_cast<int>(p.g.cols / kVec) - t;
  const int chunks = n > 0 ? (n + kChunk - 1) / kChunk : 0;
  const int64_t col_t = int64_t{t} * kVec;
  const void* src[kIn];
  bool present[kIn];
  row_for<kIn>([&](auto S) {
    constexpr int s = decltype(S)::value;
    using T = row_in_t<D, s>;
    present[s] = !row_in_optional<Op>(s) || p.in[s].ptr != nullptr;
    src[s] = present[s] ? static_cast<const T*>(p.in[s].ptr) + row * p.in[s].row_stride + col_t
                        : nullptr;
  });
  const typename Op::RowIn rin = Op::load_row(p, row);

  // The chunk at vector offset o: every stream's vectors (zeros for absent streams), with
  // plain loads (pass 1: the row stays in L2) or evict-first ones (pass 2; a constant after
  // inlining).
  auto load_chunk = [&](int o, Regs& xv, bool evict_first) {
    row_for<kIn>([&](auto S) {
      constexpr int s = decltype(S)::value;
      using T = row_in_t<D, s>;
      const T* base = static_cast<const T*>(src[s]);
#pragma unroll
      for (int j = 0; j < kVecs; ++j)
        if (o + j * kTpr < n) {
          if (!present[s]) xv.template zero<s>(j);
          else if (evict_first)
            xv.template load<s, Cache::kStream>(j, base + int64_t{o + j * kTpr} * kVec);
          else xv.template load<s, Cache::kNormal>(j, base + int64_t{o + j * kTpr} * kVec);
        }
    });
  };
  auto load_cols = [&](int o, CV (&cv)[kC][kVecs]) {
#pragma unroll
    for (int c = 0; c < Op::kCols; ++c)
#pragma unroll
      for (int j = 0; j < kVecs; ++j)
        if (o + j * kTpr < n)
          load_col_packed<TVec, kVec>(p.vec[c], col_t + int64_t{o + j * kTpr} * kVec, cv[c][j]);
  };

  auto total = R::identity();
#pragma unroll kPass1Unroll
  for (int c = 0; c < chunks; ++c) {
    const int o = c * kChunk;
    Regs xv;
    load_chunk(o, xv, false);
    if constexpr (Op::kReduceCols) {
      CV cv[kC][kVecs];
      load_cols(o, cv);
      using Cols = PackedCols<TVec, kC, kVecs, kVec>;
      const RegisterView<Op, D, kVecs, kTpr, Cols> view{xv, n - o, int64_t{o + t} * kVec,
                                                        Cols{cv}};
      total = R::combine(total, Op::reduce(p, rin, view));
    } else {
      const RegisterView<Op, D, kVecs, kTpr> view{xv, n - o, int64_t{o + t} * kVec, NoCols{}};
      total = R::combine(total, Op::reduce(p, rin, view));
    }
  }
  total = Reducer::allreduce(total, slots);
  const typename Op::Row rr = Op::finish(p, rin, total, row, t == 0);
  if constexpr (kOut > 0) {
    void* dst[row_dim(kOut)];
    out_ptrs<Op, D>(p, row, col_t, dst);
#pragma unroll 1
    for (int c = chunks - 1; c >= 0; --c) {
      const int o = c * kChunk;
      Regs xv;
      load_chunk(o, xv, true);
      CV cv[kC][kEarly ? kVecs : 1];
      if constexpr (kEarly) load_cols(o, cv);
#pragma unroll
      for (int j = 0; j < kVecs; ++j) {
        if (o + j * kTpr < n) {
          const int64_t off = int64_t{o + j * kTpr} * kVec;
          float x[kIn][kVec], v[kC][kVec];
          xv.unpack_all(j, x);
          row_cols_for_apply<Op, D, kEarly, kVec>(p, cv, j, col_t + off, v);
          apply_store<Op, D, kVec>(p, rr, x, v, col_t + off, dst, off);
        }
      }
    }
  }
}

// Two CTAs per SM for one input stream, a reduction of ≤ 2 floats and no per-column vectors
// (32 registers at 1024 threads: the chunk's packed values and the fold fit), one for more
// (without the bound ptxas kept the two-stream fp32 instance, cross-entropy's 4-float one and
// LayerNorm's weight and bias at 32 and spilled).
/// Grid: one CTA per row (M), or, for ops with kGate == RowGate::kKernel, at most the resident
/// CTAs, each looping over the rows blockIdx.x + k·gridDim.x with a barrier between rows (as
/// row_register_kernel).
template <class Op, class D, int kTpr, int kVecs>
__global__ void __launch_bounds__(kTpr, Op::kIn == 1 && Op::Red::kFloats <= 2 &&
                                                Op::kCols == 0
                                            ? 2048 / kTpr
                                            : 1)
    row_looped_kernel(const __grid_constant__ RowParams p) {
  if (row_gate_skips_kernel<Op>(p)) return;  // kGate == kKernel, closed (op_traits.cuh)
  static_assert(!Op::kColShift, "vector shifts: the staged and general policies only");
  static_assert(Op::kAcc == 0, "column accumulations need a persistent policy (staged)");
  using Reducer = StaticRowReducer<kTpr, 1, typename Op::Red>;
  __shared__ float slots[Reducer::kSlotFloats];
  if constexpr (Op::kGate == RowGate::kKernel) {
    // 32-bit rows (the plan takes the looped policy for M ≤ kMaxGrid < 2^31; a 64-bit counter
    // spilled 8 bytes in cross-entropy's softcap backward).
    const unsigned rows = static_cast<unsigned>(p.g.rows);
#pragma unroll 1
    for (unsigned row = blockIdx.x; row < rows; row += gridDim.x) {
      if (row != blockIdx.x) __syncthreads();  // the previous row's slot loads are done
      row_looped_block<Op, D, kTpr, kVecs>(p, row, slots);
    }
  } else {
    row_looped_block<Op, D, kTpr, kVecs>(p, blockIdx.x, slots);  // grid = M
  }
}

}  // namespace quack::detail
