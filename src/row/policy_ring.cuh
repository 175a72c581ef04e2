// Row policy for long rows, read once from DRAM (RowPolicy::kRing): the design of RMSNorm's
// prefetch forward (docs/performance.md), for several input streams (each in its dtype), the
// op's math from its traits.
//
// Why: a row that does not fit one CTA's registers is either read twice (the looped policy:
// the second time from L2) or split over a cluster whose CTAs keep their slices on chip. Here
// the copy engine fetches each CTA's slices of its next kStages rows into shared memory and
// the row after those into L2, so the DRAM read stream does not wait on the reduction or the
// stores (RMSNorm bf16 65536-262144: 3.8-4.0 TB/s against the looped kernel's 3.0-3.7).
//
// Persistent: clusters of cluster_n CTAs (runtime, ≤ kRowMaxCluster, from the row length;
// 1 = no cluster) take rows cl, cl + clusters, ... The row's R 16-byte vectors are split into
// cluster_n slices of S = ceil(R / cluster_n) ≤ kTpr·kVecs vectors; CTA `rank` owns vectors
// [rank·S, min(R, rank·S + S)) of every input stream, and thread t the vectors j·kTpr + t
// (j < kVecs) of that slice. Per row:
//   0. the op's per-row inputs of the next row are read (load_row, one row ahead);
//   1. wait for the stage's slices (one bulk copy per stream into one of kStages buffers,
//      completing on the stage's mbarrier);
//   2. the traits' fold over the slice in shared memory (LDS.128, conflict-free);
//   3. all-reduce (ClusterRowReducer, row_reduce.cuh: one slot per warp; a cluster exchanges
//      them by st.async and mbarriers, no cluster barrier per row; two-stage kinds exchange
//      one total per CTA) and the traits' finish;
//   4. outputs from the slice in shared memory, evict-first 16-byte stores;
//   5. __syncthreads (every read of the stage done), then thread 0 issues the copies of the row
//      kStages rows ahead into that stage and the L2 prefetch of the row after it.
// Shared memory (RingSmem): [kStages x (each input stream's kTpr·kVecs vectors, in its dtype)]
// [reduction slots and mbarriers] [kStages copy mbarriers].
// Per-column vectors (kCols): the CTA's slices, loaded once into registers (packed, TVec) for
// the whole kernel: re-read from L2 every row, a bf16 row's fp32 weight slice (twice its x
// bytes) held RMSNorm's bf16 262144 forward at 3.70 TB/s; in registers it read 4.02 (H200).
// Absent optional input streams are not copied and read as 0.
// Host-checked (plan_row): every stream in its instance dtype (D), input streams with unit
// column stride, 16-byte aligned base and row stride (the bulk copies), N a multiple of the
// vector; cluster_n = ceil(row vectors / slice vectors) ≤ kRowMaxCluster; outputs aligned for
// vector stores; vectors contiguous and 16-byte aligned, within kRowRingColRegs registers. No
// column accumulations.
#pragma once

#include <cuda/ptx>

#include <type_traits>

#include "common/cluster.cuh"
#include "common/vec.cuh"
#include "row/op_traits.cuh"
#include "row/row_config.h"
#include "row/row_params.h"
#include "row/row_reduce.cuh"
#include "row/row_views.cuh"

namespace quack::detail {

// Rows fetched into L2 beyond the shared-memory stages: one (RMSNorm's prefetch kernel: one row
// ahead lifted bf16 65536-262144 by 4-5 %; two or three rows ahead fell 15-25 %).
inline constexpr int kRingL2Ahead = 1;

/// Dynamic shared memory of a ring instance, and of the persistent cluster register entries
/// (the same layout), offsets in bytes (row_ring_smem_bytes): [kStages stages of a CTA's slice
/// of every input stream (kInWords 16-byte words per vector)] [the reducer's slots and
/// mbarriers] [kStages stage mbarriers].
template <int kInWords, int kTpr, int kVecs, int kStages, int kRedFloats>
struct RingSmem {
  static constexpr size_t kStageBytes = size_t{kInWords} * kTpr * kVecs * 16;
  static constexpr size_t kReduce = kStages * kStageBytes;
  static constexpr size_t kFull = kReduce + size_t(row_ring_reduce_bytes(kTpr, kRedFloats));
  static constexpr size_t kBytes = kFull + (kStages * 8 + 15) / 16 * 16;
};

/// Words (16 bytes per vector) of the input streams before stream s: its offset in a stage,
/// in units of the stage's slice of one word.
template <class D, int kIn, int s>
__host__ __device__ constexpr int row_ring_words_before() {
  if constexpr (s == 0) return 0;
  else return row_ring_words_before<D, kIn, s - 1>() + row_in_words_of<D, kIn, s - 1>();
}

/// Stream S's slice in a stage at `stage` of slices of kChunk vectors (the ring's and the
/// cluster register kernel's stage layout: the input streams one after another).
template <class D, int kIn, int kChunk, class S>
__device__ __forceinline__ unsigned char* row_stage_stream(unsigned char* stage, S) {
  return stage + size_t{row_ring_words_before<D, kIn, S::value>()} * kChunk * 16;
}

/// Thread 0: the bulk copies of a CTA's slice of `row` (slice_vecs vectors from column col0)
/// of the present input streams into the stage at `stage`, completing on mbarrier `full`
/// (present_words 16-byte words per vector over the present streams); an empty slice arrives
/// without bytes. Called after a CTA barrier that follows every thread's reads of the stage:
/// the proxy fence orders those generic-proxy reads before the copy engine's writes (the
/// async proxy; PTX ISA, "Proxies": ordering across proxies needs a proxy fence).
/// hinted: every copy with the L2 cache policy copy_policy (createpolicy's value); else none.
template <class D, int kIn, int kChunk>
__device__ __forceinline__ void row_stage_issue(const RowParams& p, unsigned char* stage,
                                                uint64_t* full, int64_t row, int64_t col0,
                                                int slice_vecs, const bool (&present)[kIn],
                                                uint32_t present_words, bool hinted = false,
                                                uint64_t copy_policy = 0) {
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
  if (slice_vecs == 0) {  // ≥ 0
    cuda::ptx::mbarrier_arrive(full);
    return;
  }
  cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                       cuda::ptx::space_shared, full,
                                       present_words * uint32_t(slice_vecs) * 16);
  row_for<kIn>([&](auto S) {
    constexpr int s = decltype(S)::value;
    using T = row_in_t<D, s>;
    if (!present[s]) return;
    const T* src = static_cast<const T*>(p.in[s].ptr) + row * p.in[s].row_stride + col0;
    const uint32_t bytes = uint32_t(slice_vecs) * 16 * row_in_words_of<D, kIn, s>();
    if (hinted)
      copy_bulk_g2s(row_stage_stream<D, kIn, kChunk>(stage, S), src, bytes, full, copy_policy);
    else
      cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global,
                               row_stage_stream<D, kIn, kChunk>(stage, S), src, bytes, full);
  });
}

// One 1024-thread CTA per SM, or 1024 / kTpr smaller ones (row_ring_ctas_per_sm).
// kEarlyRefill (ops without per-element outputs, RowConfig::early_refill): steps 4-5 become
// "thread 0 issues the refill right after the all-reduce's barrier that follows the fold"
// (every read of the stage is the fold's), so the copy engine gets the row's cluster exchange
// and finish as extra lead time, and no barrier ends the row (the reducer's double-buffered
// slots need none, row_reduce.cuh).
template <class Op, class D, int kTpr, int kVecs, int kStages, bool kEarlyRefill = false>
__global__ void __launch_bounds__(kTpr, kTpr >= 1024 ? 1 : 1024 / kTpr)
    row_ring_kernel(const __grid_constant__ RowParams p) {
  if (row_gate_skips_kernel<Op>(p)) return;  // kGate == kKernel, closed (op_traits.cuh)
  static_assert(!kEarlyRefill || Op::kOut == 0,
                "an early refill would overwrite the stage that the outputs read");
  static_assert(!Op::kColShift, "vector shifts: the staged and general policies only");
  static_assert(Op::kAcc == 0, "column accumulations: not in the ring policy (staged)");
  constexpr int kIn = Op::kIn, kOut = Op::kOut, kC = row_dim(Op::kCols);
  constexpr int kVec = row_vec_elems<D, kIn>();  // elements per vector
  constexpr int kChunk = kTpr * kVecs;           // vectors of a CTA's largest slice
  constexpr int kWarps = kTpr / 32;
  using TVec = typename D::Vec;
  using CV = Packed<TVec, kVec>;
  using R = typename Op::Red;
  using Reducer = ClusterRowReducer<kWarps, kRowMaxCluster, R>;
  using Layout = RingSmem<row_in_words<D, kIn>(), kTpr, kVecs, kStages, R::kFloats>;
  static_assert(Layout::kBytes <= size_t(kRowMaxSmem), "ring stages exceed shared memory");
  extern __shared__ __align__(128) unsigned char smem[];
  const Reducer reducer(smem + Layout::kReduce);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + Layout::kFull);  // [kStages]

  const int cluster_n = p.g.cluster_n;
  const int rank = cluster_n > 1 ? static_cast<int>(blockIdx.x % cluster_n) : 0;
  const int64_t clusters = gridDim.x / cluster_n;
  const int t = threadIdx.x;
  const int64_t M = p.g.rows;
  const int row_vecs = static_cast<int>(p.g.cols / kVec);
  const int per_cta = (row_vecs + cluster_n - 1) / cluster_n;  // S ≤ kChunk (host-checked)
  const int slice_vecs = max(0, min(per_cta, row_vecs - rank * per_cta));
  const int n = slice_vecs - t;  // vector j·kTpr of this thread exists when j·kTpr < n
  const int64_t col0 = int64_t{rank} * per_cta * kVec;  // the slice's first column
  const int64_t col_t = col0 + int64_t{t} * kVec;  // the thread's first column
  bool present[kIn];
  uint32_t present_words = 0;  // 16-byte words per vector over the present streams
  row_for<kIn>([&](auto S) {
    constexpr int s = decltype(S)::value;
    present[s] = !row_in_optional<Op>(s) || p.in[s].ptr != nullptr;
    present_words += present[s] ? row_in_words_of<D, kIn, s>() : 0;
  });
  // Stream s of stage st: its slice of kChunk vectors of row_in_words_of<s> words each.
  auto stage_ptr = [&](int st, auto S) {
    return row_stage_stream<D, kIn, kChunk>(smem + st * Layout::kStageBytes, S);
  };

  if (t == 0) {
    for (int i = 0; i < kStages; ++i) cuda::ptx::mbarrier_init(&full[i], 1);
    reducer.init();  // fences the mbarrier inits for the cluster
  }
  __syncthreads();
  if (cluster_n > 1) cluster_arrive_relaxed();  // waited on before the first remote store
  // The L2 use (RingL2, row_params.h), read from the parameter space where it is needed and
  // the cache policies made there (one instruction each, thread 0): no register held across
  // rows (the 64-register entries have none to spare).
  // Thread 0: this CTA's slices of `row` into stage `st`.
  auto issue = [&](int64_t row, int st) {
    const bool first = ring_l2_use(p.ring_l2).copy_evict_first;
    row_stage_issue<D, kIn, kChunk>(p, smem + st * Layout::kStageBytes, &full[st], row, col0,
                                    slice_vecs, present, present_words, first,
                                    first ? l2_policy_evict_first() : 0);
  };
  // Thread 0: this CTA's slices of `row` into L2 only.
  auto prefetch = [&](int64_t row) {
    const RingL2Use use = ring_l2_use(p.ring_l2);
    if (slice_vecs == 0 || !use.prefetch) return;
    const bool last = use.prefetch_evict_last;
    row_for<kIn>([&](auto S) {
      constexpr int s = decltype(S)::value;
      using T = row_in_t<D, s>;
      if (!present[s]) return;
      const T* src = static_cast<const T*>(p.in[s].ptr) + row * p.in[s].row_stride + col0;
      const uint32_t bytes = uint32_t(slice_vecs) * 16 * row_in_words_of<D, kIn, s>();
      if (last) prefetch_l2_bulk(src, bytes, l2_policy_evict_last());
      else prefetch_l2_bulk(src, bytes);
    });
  };
  // This thread's vector slices, j·kTpr + t of the CTA's slice, for the whole kernel.
  CV cv[kC][Op::kCols > 0 ? kVecs : 1];
  if constexpr (Op::kCols > 0) {
#pragma unroll
    for (int c = 0; c < Op::kCols; ++c)
#pragma unroll
      for (int j = 0; j < kVecs; ++j)
        if (j * kTpr < n) load_col_packed<TVec, kVec>(p.vec[c], col_t + j * kTpr * kVec, cv[c][j]);
  }
  int64_t row = blockIdx.x / cluster_n;
  if (t == 0) {
    for (int st = 0; st < kStages && row + st * clusters < M; ++st) issue(row + st * clusters, st);
    for (int a = 0; a < kRingL2Ahead && row + (kStages + a) * clusters < M; ++a)
      prefetch(row + (kStages + a) * clusters);
  }
  bool waited = false;
  // Per-row inputs (Op::load_row) are read one row ahead, so their latency overlaps the
  // previous row's work instead of adding to each row's (a persistent CTA has no other rows
  // in flight to hide it).
  typename Op::RowIn rin_next = row < M ? Op::load_row(p, row) : typename Op::RowIn{};
  for (int k = 0; row < M; row += clusters, ++k) {
    const int st = k % kStages;
    const void* buf[kIn];
    row_for<kIn>([&](auto S) {
      constexpr int s = decltype(S)::value;
      buf[s] = stage_ptr(st, S) + static_cast<size_t>(t) * 16 * row_in_words_of<D, kIn, s>();
    });
    const typename Op::RowIn rin = rin_next;
    if (row + clusters < M) rin_next = Op::load_row(p, row + clusters);
    if constexpr (Op::kCols > 0) {
#pragma unroll
      for (int c = 0; c < Op::kCols; ++c)
#pragma unroll
        for (int j = 0; j < kVecs; ++j) opaque(cv[c][j]);  // no unpacked copies across rows
    }
    while (!cuda::ptx::mbarrier_try_wait_parity(
        &full[st], static_cast<uint32_t>((k / kStages) & 1))) {
    }
    using Cols = std::conditional_t<Op::kReduceCols, PackedCols<TVec, kC, kVecs, kVec>, NoCols>;
    Cols cols_src = [&] {
      if constexpr (Op::kReduceCols) return Cols{cv};
      else return NoCols{};
    }();
    const SharedView<Op, D, kVecs, kTpr, Cols> view{buf, present, n, kTpr * kVec, col_t,
                                                    cols_src};
    auto part = Op::reduce(p, rin, view);
    if (cluster_n > 1 && !waited) {
      cluster_wait();
      waited = true;
    }
    // The refill of this stage (row kStages rows ahead) and the L2 prefetch after it: by
    // thread 0, once every thread's reads of the stage are done.
    auto refill = [&] {
      if (t == 0 && row + kStages * clusters < M) issue(row + kStages * clusters, st);
      if (t == 0 && row + (kStages + kRingL2Ahead) * clusters < M)
        prefetch(row + (kStages + kRingL2Ahead) * clusters);
    };
    const auto total = [&] {
      if constexpr (kEarlyRefill) return reducer.allreduce(part, k, cluster_n, rank, refill);
      else return reducer.allreduce(part, k, cluster_n, rank);
    }();
    const typename Op::Row rr = Op::finish(p, rin, total, row, rank == 0 && t == 0);
    if constexpr (kOut > 0) {
      void* dst[row_dim(kOut)];
      out_ptrs<Op, D>(p, row, col_t, dst);
#pragma unroll
      for (int j = 0; j < kVecs; ++j) {
        if (j * kTpr < n) {
          float x[kIn][kVec], v[kC][kVec];
          view.load(j, x);
          if constexpr (Op::kCols > 0) {
#pragma unroll
            for (int c = 0; c < Op::kCols; ++c) unpack(cv[c][j], v[c]);
          }
          const int64_t off = int64_t{j} * kTpr * kVec;
          apply_store<Op, D, kVec>(p, rr, x, v, col_t + off, dst, off);
        }
      }
    }
    if constexpr (!kEarlyRefill) {
      __syncthreads();  // every read of the stage is done before the copy engine refills it
      refill();
    }
  }
  if (cluster_n > 1 && !waited) cluster_wait();
}

}  // namespace quack::detail
