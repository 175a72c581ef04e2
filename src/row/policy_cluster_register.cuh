// Row policy for long rows with each CTA's slice in registers (RowPolicy::kClusterRegister):
// QuACK 0.2.0's cross-entropy geometry (quack/cross_entropy.py, quack/reduce.py
// online_softmax_reduce), the op's math from its traits. Not persistent
// (row_cluster_register_kernel), except the one-stage entries (RowConfig::stages == 1, ops
// with per-element outputs: row_cluster_register_prefetch_kernel, described at its kernel),
// whose persistent clusters fetch each CTA's next row into shared memory while the current
// one is reduced and written from the registers.
//
// Why: the ring policy (policy_ring.cuh) runs one persistent 1024-thread CTA per SM through
// each row in lockstep (wait for the stage, fold, cluster all-reduce, barrier, refill), so an
// SM's memory requests follow its row loop: for an op that only reads (cross-entropy's loss)
// the read rate stays where a read + write op's is (H200 bf16 16384 x 131072: 2.05 TB/s).
// Here every CTA is one (row, cluster rank) pair with 16-byte loads straight into registers
// (no bulk copies, no L2 prefetch), and up to 1024 / kTpr CTAs per SM (64 registers; ops
// that spill there 768 / kTpr) are at different phases of their rows, so one CTA's reduction
// and exchange overlap the others' loads, as in QuACK's kernel (3.81 TB/s on the same shape).
//
// Thread -> data: grid = M x cluster_n (cluster_n: runtime, ≤ kRowMaxCluster, from the row
// length; 1 = no cluster); CTA b works on row b / cluster_n as rank b % cluster_n. The row's R
// 16-byte vectors are split into cluster_n slices of S = ceil(R / cluster_n) ≤ kTpr·kVecs
// vectors (the ring's balanced split); CTA `rank` owns vectors [rank·S, min(R, rank·S + S)) of
// every input stream, thread t the vectors j·kTpr + t (j < kVecs) of that slice. Per CTA: every
// load issued first (RowInRegs::kRowCache, packed), the per-row inputs, the traits' fold, the
// all-reduce (ClusterRowReducer: warps, then one st.async exchange between the cluster's CTAs),
// finish, then the outputs from the registers (evict-first 16-byte stores). Held entries
// (RowConfig::held, ops with Op::kHeldFold: softmax's forward): the fold keeps one fp32 value
// per element (h, kVecs x kVec registers; the packed row dies in the fold) and the outputs come
// from those (Op::apply_held); 64 of them (cl-t256v8-h) hold the kernel to 768 threads per SM.
// Exit: a CTA leaves once every peer's partials are in its shared memory; its own st.async
// writes go to peers that are still waiting for them, so no CTA's shared memory is accessed
// after it exits (no trailing cluster barrier, as QuACK's). Ops without per-element outputs
// (the loss-only cross-entropy forwards) gather on rank 0 alone (reduce_to_rank0): the other
// CTAs send their partials and leave without waiting (run AA's ncu: the exchange wait and the
// redundant finish were ~35 % of the CTAs' stall samples at 16384 x 65536 bf16).
// Shared memory: the reducer's slots and mbarriers (static, row_cluster_register_smem_bytes).
// Host-checked (plan_row): every stream in its instance dtype (D), unit column stride, 16-byte
// aligned base and row stride, N a multiple of the vector; M·cluster_n < 2^31 CTAs; no
// per-column vectors, no column accumulations.
#pragma once

#include <type_traits>

#include <cuda/ptx>

#include "common/cluster.cuh"
#include "common/vec.cuh"
#include "row/op_traits.cuh"
#include "row/row_config.h"
#include "row/row_params.h"
#include "row/policy_register.cuh"  // register_store_vector
#include "row/policy_ring.cuh"  // row_stage_issue, row_stage_stream
#include "row/row_reduce.cuh"
#include "row/row_views.cuh"

namespace quack::detail {

/// Whether Op's cluster register kernels are held to 1024 threads per SM (64 registers):
/// Op::kClusterFullSm where the op sets it, else Op::kFullSm.
template <class Op, class = void>
struct RowClusterFullSm : std::bool_constant<Op::kFullSm> {};
template <class Op>
struct RowClusterFullSm<Op, std::void_t<decltype(Op::kClusterFullSm)>>
    : std::bool_constant<Op::kClusterFullSm> {};

/// CTAs per SM of the kernel's __launch_bounds__: 1024 threads (64 registers), or 768 for ops
/// whose per-element math spills there (RowClusterFullSm false: cross-entropy's softcapped
/// fwd+dx).
template <class Op>
__host__ __device__ constexpr int row_cluster_register_min_ctas(int tpr) {
  return row_cluster_register_ctas_per_sm(tpr, RowClusterFullSm<Op>::value);
}

/// A CTA's slice of every row it works on (header, "Thread -> data"): its rank in the cluster,
/// n (vector j·kTpr of this thread exists when j·kTpr < n), col_t (the thread's first column)
/// and cluster (blockIdx.x / cluster_n: the row).
/// The rank and the cluster come from the cluster registers (a launch without clusters is one
/// of size 1 per CTA) and the slice length S from the host (RowGeometry::slice_vecs): integer
/// divisions by the runtime cluster_n took ~40 instructions on the path to the first load
/// (run AA's ncu).
struct ClusterSlice {
  int rank, n;
  int64_t col_t, cluster;
};

template <int kTpr, int kVec>
__device__ __forceinline__ ClusterSlice cluster_slice(const RowParams& p) {
  uint32_t rank, cluster;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm("mov.u32 %0, %%clusterid.x;" : "=r"(cluster));
  const int t = threadIdx.x;
  const int row_vecs = static_cast<int>(p.g.cols / kVec);
  const int per_cta = p.g.slice_vecs;  // S = ceil(row_vecs / cluster_n) ≤ kTpr·kVecs (host-checked)
  const int r = static_cast<int>(rank);
  const int slice_vecs = max(0, min(per_cta, row_vecs - r * per_cta));
  // col_t < kRowMaxCluster·kTpr·kVecs·kVec < 2^31, zero-extended: no register for its high
  // word (the 64-register fwd+dx, cl-t256v8-s1, took 31 instructions more with it).
  const uint32_t col_t = (static_cast<uint32_t>(r) * per_cta + t) * kVec;
  return {r, slice_vecs - t, int64_t{col_t}, int64_t{cluster}};
}

/// The reducer's mbarriers initialised and the cluster barrier arrived on (its wait comes
/// before the first exchange: every peer's mbarriers exist then).
template <class Reducer>
__device__ __forceinline__ void cluster_reducer_start(const Reducer& reducer, int cluster_n) {
  if (cluster_n > 1) {
    if (threadIdx.x == 0) reducer.init();  // fences the mbarrier inits for the cluster
    __syncthreads();
    cluster_arrive_relaxed();
  }
}

/// The row's per-element outputs from the registers: vector j of this thread (j·kTpr < n) at
/// column col_t + j·kTpr·kVec, through Op::apply (the finish's row state rr); ops whose
/// per-column vectors load at apply (kColsAtApply: LayerNorm's forward) store one output
/// stream at a time, loading the vectors' words right before use (register_store_vector, the
/// register policy's step). Ops with kFixVector: fix_vector only on the vectors of the op's
/// fix_mask, computed once here.
template <class Op, class D, int kTpr, int kVecs>
__device__ __forceinline__ void cluster_register_store(const RowParams& p,
                                                       const typename Op::Row& rr,
                                                       RowInRegs<Op, D, kVecs>& xv,
                                                       int64_t row, int64_t col_t, int n) {
  constexpr int kVec = row_vec_elems<D, Op::kIn>();
  void* dst[row_dim(Op::kOut)];
  out_ptrs<Op, D>(p, row, col_t, dst);
  if constexpr (Op::kFixVector || Op::kCols == 0) {
    // Opaque from here on: otherwise the compiler recomputes the pointer in each vector rather
    // than hold it (with a fix-up's branch in every vector, row·row_stride + col_t: 7
    // instructions; softmax's forward, base + 2·offset: 3 per 8 elements). The kernel has the
    // registers to hold it, unlike the 32-40-register kernels of other policies; ops with
    // per-column vectors at apply (LayerNorm's forward) need them for the vectors' words.
#pragma unroll
    for (int s = 0; s < row_dim(Op::kOut); ++s) asm volatile("" : "+l"(dst[s]));
  }
  [[maybe_unused]] uint32_t fix = ~0u;
  if constexpr (Op::kFixVector) fix = Op::template fix_mask<kVecs, kVec, kTpr * kVec>(rr, col_t);
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    if (j * kTpr < n) {
      const int64_t off = int64_t{j} * kTpr * kVec;
      register_store_vector<Op, D, kVec>(p, rr, xv, j, col_t + off, dst, off, [](auto&) {},
                                         ((fix >> j) & 1u) != 0);
    }
  }
}

/// The held-fold output step: vector j of this thread (j·kTpr < n) from its held values
/// h[j][·] through Op::apply_held, stored at dst[s] + j·kTpr·kVec (dst: the thread's first
/// output column of each stream, out_ptrs).
template <class Op, class D, int kTpr, int kVecs, int kVec>
__device__ __forceinline__ void cluster_register_store_held(
    const RowParams& p, const typename Op::Row& rr, const float (&h)[kVecs][kVec],
    void* const (&dst)[row_dim(Op::kOut)], int n) {
  static_assert(Op::kOut > 0 && Op::kCols == 0 && Op::kAcc == 0 && !Op::kFixVector &&
                    Op::kGate == RowGate::kNone,
                "held folds: per-element outputs, no vectors, accumulations, fix-up or gate");
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    if (j * kTpr < n) {
      float o[row_dim(Op::kOut)][kVec];
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        float oi[row_dim(Op::kOut)];
        Op::apply_held(p, rr, h[j][i], oi);
#pragma unroll
        for (int s = 0; s < Op::kOut; ++s) o[s][i] = oi[s];
      }
      store_vector_outputs<Op, D, kVec>(o, dst, int64_t{j} * kTpr * kVec);
    }
  }
}

/// CTAs per SM of row_cluster_register_kernel's __launch_bounds__: held entries by their fp32
/// values per thread (row_cluster_register_held_ctas_per_sm), the others by the op.
template <class Op, class D, int kTpr, int kVecs, bool kHeld>
__host__ __device__ constexpr int row_cluster_register_kernel_ctas() {
  return kHeld ? row_cluster_register_held_ctas_per_sm(kTpr, kVecs * row_vec_elems<D, Op::kIn>())
               : row_cluster_register_min_ctas<Op>(kTpr);
}

/// kHeld: a held entry (RowConfig::held; ops with Op::kHeldFold, op_traits.cuh).
template <class Op, class D, int kTpr, int kVecs, bool kHeld = false>
__global__ void __launch_bounds__(kTpr, row_cluster_register_kernel_ctas<Op, D, kTpr, kVecs, kHeld>())
    row_cluster_register_kernel(const __grid_constant__ RowParams p) {
  if (row_gate_skips_kernel<Op>(p)) return;  // kGate == kKernel, closed (op_traits.cuh)
  static_assert(!Op::kColShift && !Op::kReduceCols && (Op::kCols == 0 || Op::kColsAtApply),
                "per-column vectors only at apply (the fold holds the row alone)");
  static_assert(Op::kAcc == 0, "column accumulations need a persistent policy (staged)");
  constexpr int kIn = Op::kIn, kOut = Op::kOut;
  constexpr int kVec = row_vec_elems<D, kIn>();  // elements per vector
  constexpr int kWarps = kTpr / 32;
  using R = typename Op::Red;
  using Reducer = ClusterRowReducer<kWarps, kRowMaxCluster, R>;
  static_assert(static_cast<int64_t>(Reducer::kBytes) ==
                    row_cluster_register_smem_bytes(kTpr, R::kFloats),
                "row_config.h's size");
  __shared__ __align__(16) unsigned char red_smem[Reducer::kBytes];
  const Reducer reducer(red_smem);

  const int cluster_n = p.g.cluster_n;
  const int t = threadIdx.x;
  const auto [rank, n, col_t, row] = cluster_slice<kTpr, kVec>(p);  // row < M: grid = M x cluster_n
  cluster_reducer_start(reducer, cluster_n);

  RowInRegs<Op, D, kVecs> xv;
  xv.template load_row<kTpr>(p, row, col_t, n);
  const typename Op::RowIn rin = Op::load_row(p, row);
  const RegisterView<Op, D, kVecs, kTpr> view{xv, n, col_t, NoCols{}};
  if constexpr (kHeld) {
    // The fold keeps each element's fp32 value (h); the packed row is dead after it. The
    // output pointer is taken first and held (opaque: not recomputed per vector), so row and
    // col_t are dead across the fold (at cl-t256v8-h, bf16 -> fp32, keeping them spilled 4
    // bytes at 80 registers).
    void* dst[row_dim(kOut)];
    out_ptrs<Op, D>(p, row, col_t, dst);
#pragma unroll
    for (int s = 0; s < row_dim(kOut); ++s) asm volatile("" : "+l"(dst[s]));
    float h[kVecs][kVec];
    const auto part = Op::reduce_held(p, rin, view, h);
    if (cluster_n > 1) cluster_wait();  // every peer's mbarriers are initialised
    const auto total = reducer.allreduce(part, 0, cluster_n, rank);
    const typename Op::Row rr = Op::finish_held(p, rin, total, part, row, rank == 0 && t == 0);
    cluster_register_store_held<Op, D, kTpr, kVecs>(p, rr, h, dst, n);
    return;
  }
  const auto part = Op::reduce(p, rin, view);
  if (cluster_n > 1) cluster_wait();  // every peer's mbarriers are initialised
  if constexpr (kOut == 0 && !RedTwoStage<R>::value) {
    // Only rank 0's thread 0 writes (the row's results): the other CTAs send their partials to
    // rank 0 and leave, freeing their SM slot for the next rows' loads.
    const auto total = reducer.reduce_to_rank0(part, cluster_n, rank);
    if (rank == 0) Op::finish(p, rin, total, row, t == 0);
    return;
  }
  const auto total = reducer.allreduce(part, 0, cluster_n, rank);
  const typename Op::Row rr = Op::finish(p, rin, total, row, rank == 0 && t == 0);
  if constexpr (kOut > 0) cluster_register_store<Op, D, kTpr, kVecs>(p, rr, xv, row, col_t, n);
}



/// CTAs per SM of row_cluster_register_prefetch_kernel's __launch_bounds__ (kSmemBytes: its
/// shared memory): row_cluster_register_min_ctas where that many CTAs' stages fit an SM's
/// shared memory, else the op's kFullSm bound (-s2, 64 KB a CTA, fits 3 of 256 threads: an op
/// raised to 64 registers by kClusterFullSm keeps 768 threads there, so ptxas is not held to
/// registers that buy no CTA; cross-entropy's fwd+dx -s2 spilled 4 bytes at 64).
template <class Op, int kTpr, size_t kSmemBytes>
__host__ __device__ constexpr int row_cluster_register_prefetch_min_ctas() {
  constexpr int kCtas = row_cluster_register_min_ctas<Op>(kTpr);
  return int64_t{kCtas} * (int64_t(kSmemBytes) + kRowCtaSmemReserve) <= kRowSmSmem
             ? kCtas
             : row_cluster_register_ctas_per_sm(kTpr, Op::kFullSm);
}

/// The persistent variant with kStages shared-memory stages (a kClusterRegister entry with
/// RowConfig::stages ≥ 1; cross-entropy's forward with dx, and the loss-only kernel of its
/// predicted training forward, whose gate is closed in training).
/// Why: the kernel above reads its row, then exchanges, then writes dx; per CTA nothing is
/// read during the exchange and the stores, and a new cluster's loads start only when one
/// ends; and its grid is M x cluster_n CTAs even where a closed kernel gate makes each return
/// at once (a wave of returning CTAs per resident set: ~0.45 µs each, ~70 µs at 16384 rows of
/// 4 CTAs). Here a CTA's next rows are already in flight then: grid = min(M, resident) clusters
/// of cluster_n CTAs (the slices above per row); cluster c works on rows c, c + C, c + 2C, ...
/// (C: the grid's clusters). Per row k: the fold over the registers, the all-reduce (exchange
/// k: the reducer's stage k & 1, mbarrier k & 1), finish, dx from the registers; then the next
/// row's slice comes from stage k % kStages (thread 0 issued its bulk copy, one per input
/// stream, completing on the stage's mbarrier, kStages rows earlier) into the same registers
/// (LDS.128, conflict-free), a __syncthreads (every read of the stage done), and thread 0
/// issues the copy of the row kStages rows after that one into the stage. The first row is
/// loaded straight into the registers while the next kStages rows' copies are in flight. The
/// per-row inputs (Op::load_row) are read one row ahead. Each row's registers, view,
/// reduction, finish and stores are the kernel above's, so loss, lse and dx are bitwise its
/// results.
/// Synchronisation across rows: as the ring's (row k is the reducer's all-reduce k; every CTA
/// of a cluster runs the same rows, so no cluster barrier between rows); the cluster
/// barrier's wait (peers' mbarriers initialised) is taken once, before the first exchange; a
/// CTA exits after its last exchange, when no peer writes to it any more, and after its last
/// copy completed (every copy issued is waited on).
template <class Op, class D, int kTpr, int kVecs, int kStages>
__global__ void __launch_bounds__(
    kTpr, row_cluster_register_prefetch_min_ctas<
              Op, kTpr, RingSmem<row_in_words<D, Op::kIn>(), kTpr, kVecs, kStages,
                                 Op::Red::kFloats>::kBytes>())
    row_cluster_register_prefetch_kernel(const __grid_constant__ RowParams p) {
  if (row_gate_skips_kernel<Op>(p)) return;  // kGate == kKernel, closed (op_traits.cuh)
  static_assert(!Op::kColShift && !Op::kReduceCols && (Op::kCols == 0 || Op::kColsAtApply),
                "per-column vectors only at apply (the fold holds the row alone)");
  static_assert(Op::kAcc == 0, "column accumulations need a persistent policy (staged)");
  static_assert(Op::kOptIn == 0, "every input stream present (one bulk copy each)");
  static_assert(kStages >= 1, "at least one stage");
  constexpr int kIn = Op::kIn;
  constexpr int kVec = row_vec_elems<D, kIn>();  // elements per vector
  constexpr int kChunk = kTpr * kVecs;           // vectors of a CTA's largest slice
  constexpr int kWarps = kTpr / 32;
  constexpr int kWords = row_in_words<D, kIn>();  // 16-byte words per vector, all streams
  using R = typename Op::Red;
  using Reducer = ClusterRowReducer<kWarps, kRowMaxCluster, R>;
  static_assert(static_cast<int64_t>(Reducer::kBytes) ==
                    row_cluster_register_smem_bytes(kTpr, R::kFloats),
                "row_config.h's size");
  using Layout = RingSmem<kWords, kTpr, kVecs, kStages, R::kFloats>;  // the ring's layout
  static_assert(Layout::kBytes <= size_t(kRowMaxSmem), "stages exceed shared memory");
  extern __shared__ __align__(128) unsigned char smem[];
  const Reducer reducer(smem + Layout::kReduce);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + Layout::kFull);  // [kStages]

  const int cluster_n = p.g.cluster_n;
  const int t = threadIdx.x;
  const int64_t M = p.g.rows;
  // The grid's clusters from the cluster register, not gridDim.x / cluster_n: that integer
  // division's result, held across the row loop, spilled at 64 registers (cl-t256v8-s1 fwd+dx).
  uint32_t n_clusters;
  asm("mov.u32 %0, %%nclusterid.x;" : "=r"(n_clusters));
  const int64_t clusters = n_clusters;
  const ClusterSlice sl = cluster_slice<kTpr, kVec>(p);
  const int rank = sl.rank, n = sl.n;
  const int64_t col_t = sl.col_t;
  const int slice_vecs = n + t;                      // this CTA's vectors of the row
  const int64_t col0 = col_t - int64_t{t} * kVec;    // the slice's first column
  // Stream s of stage st.
  auto stage_ptr = [&](int st, auto S) {
    return row_stage_stream<D, kIn, kChunk>(smem + st * Layout::kStageBytes, S);
  };
  bool present[kIn];  // every stream (kOptIn == 0)
  for (bool& b : present) b = true;

  if (t == 0) {
    for (int i = 0; i < kStages; ++i) cuda::ptx::mbarrier_init(&full[i], 1);
    reducer.init();  // fences the mbarrier inits for the cluster
  }
  __syncthreads();
  if (cluster_n > 1) cluster_arrive_relaxed();  // waited on before the first exchange
  // Thread 0: this CTA's slices of `row` into stage `st`.
  auto issue = [&](int64_t row, int st) {
    row_stage_issue<D, kIn, kChunk>(p, smem + st * Layout::kStageBytes, &full[st], row, col0,
                                    slice_vecs, present, uint32_t(kWords));
  };

  int64_t row = sl.cluster;  // < M: at most M clusters
  if (t == 0) {
    for (int st = 0; st < kStages && row + (st + 1) * clusters < M; ++st)
      issue(row + (st + 1) * clusters, st);
  }
  RowInRegs<Op, D, kVecs> xv;
  xv.template load_row<kTpr>(p, row, col_t, n);
  typename Op::RowIn rin = Op::load_row(p, row);
  typename Op::RowIn rin_next =
      row + clusters < M ? Op::load_row(p, row + clusters) : typename Op::RowIn{};
  for (int k = 0;; ++k) {
    const RegisterView<Op, D, kVecs, kTpr> view{xv, n, col_t, NoCols{}};
    const auto part = Op::reduce(p, rin, view);
    if (cluster_n > 1 && k == 0) cluster_wait();  // every peer's mbarriers are initialised
    const auto total = reducer.allreduce(part, k, cluster_n, rank);
    [[maybe_unused]] const typename Op::Row rr =
        Op::finish(p, rin, total, row, rank == 0 && t == 0);
    if constexpr (Op::kOut > 0)
      cluster_register_store<Op, D, kTpr, kVecs>(p, rr, xv, row, col_t, n);
    const int64_t next = row + clusters;  // the same in every CTA of the cluster
    if (next >= M) break;
    // The next row: from stage k % kStages (its fill k / kStages) into the registers.
    const int st = k % kStages;
    while (!cuda::ptx::mbarrier_try_wait_parity(&full[st],
                                                static_cast<uint32_t>((k / kStages) & 1))) {
    }
    row_for<kIn>([&](auto S) {
      constexpr int s = decltype(S)::value;
      constexpr int kW = row_in_words_of<D, kIn, s>();
      const uint4* src = reinterpret_cast<const uint4*>(stage_ptr(st, S));
#pragma unroll
      for (int j = 0; j < kVecs; ++j) {
        if (j * kTpr < n) {
#pragma unroll
          for (int w = 0; w < kW; ++w) xv.w[s][j][w] = src[(j * kTpr + t) * kW + w];
        }
      }
    });
    __syncthreads();  // every read of the stage is done before the copy engine refills it
    if (t == 0 && next + kStages * clusters < M) issue(next + kStages * clusters, st);
    row = next;
    rin = rin_next;
    if (row + clusters < M) rin_next = Op::load_row(p, row + clusters);
  }
}

}  // namespace quack::detail
