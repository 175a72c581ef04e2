// RMSNorm forward, prefetch path: rows longer than 64 KB (the table: fp32 longer than 128 KB),
// read once from DRAM and written once.
//
// Why: the looped simple kernel reads such rows twice (the second time from L2, which also
// serves the weight), and the staged kernel keeps the row in shared memory and re-reads it
// there; both fell to 0.70-0.85 x copy at 128-512 KB rows (docs/performance.md). Here the copy
// engine fetches the CTA's next rows into shared memory and the one after those into L2, so
// the DRAM read stream does not wait on the reduction or the stores, and the CTA's weight
// slice sits in registers for the whole kernel: re-read from L2 every row, a bf16 CTA's fp32
// weight slice (twice its x bytes) cost the bf16 262144 forward 9 % (session 9).
//
// Persistent: clusters of cluster_n CTAs (runtime, ≤ kMaxPrefetchCluster, from the row
// length; 1 = no cluster) take rows cl, cl + clusters, ... CTA `rank` owns the row's 16-byte
// vectors [rank·kChunk, rank·kChunk + kChunk) (kChunk = kTpr·kVecs); thread t handles vectors
// v·kTpr + t (v < kVecs) of that slice and holds their weight. Per row:
//   1. wait for the slice in shared memory (one bulk copy per row into one of kPrefetchStages
//      buffers, mbarrier); fold sum(x²) from it (LDS.128, consecutive threads on consecutive
//      vectors: conflict-free);
//   2. all-reduce sum(x²) (ClusterRowSum, common/reduce.cuh: one partial per warp; a cluster
//      exchanges them by st.async and mbarriers, no cluster barrier per row);
//   3. out = x·rstd·w, x read from the buffer again, w from the registers;
//   4. __syncthreads (every read of the buffer done), then thread 0 issues the copy of the row
//      kPrefetchStages rows ahead into that buffer and the L2 prefetch of the row after it.
// Host-checked (rmsnorm.cpp, launcher): no residual, no bias, out in x's dtype, weight in x's
// dtype or fp32, N a multiple of the vector, 16-byte aligned rows and weight, cluster_n =
// ceil(N / (kChunk·vec)) ≤ kMaxPrefetchCluster.
//
//   T   x and out;  TW  weight (T or fp32);  kTpr threads per CTA;  kVecs vectors per thread
#pragma once

#include <cuda/ptx>

#include "common/cluster.cuh"
#include "common/reduce.cuh"
#include "common/vec.cuh"
#include "norm/norm_config.h"
#include "norm/rmsnorm_params.h"

namespace quack::detail {

inline constexpr int kMaxPrefetchCluster = SimpleFwdConfig::kPrefetchMaxCluster;
// Slices in flight: three. A buffer is refilled only after its row's stores (x is read from
// it twice), so three buffers keep two rows in flight while the third is worked on (with x
// in registers, before session 9, two did: the refill followed the copy into registers).
// Two measured the same (±0.3 %, H200, session 10); three keep the margin.
inline constexpr int kPrefetchStages = 3;
// Rows fetched into L2 beyond the shared-memory stages: one. Two slices in shared memory leave
// 128 KB in flight per SM, too few for DRAM; the L2 prefetch of the next row lifted bf16
// 65536-262144 from 3.74 / 3.64 / 3.56 to 3.93 / 3.83 / 3.70-3.76 TB/s (H200, session 8),
// while 2 or 3 rows ahead fell to 3.26 / 2.89 (the prefetches queue before the copies).
inline constexpr int kL2Ahead = 1;

/// Dynamic shared memory of a prefetch instance, offsets in bytes: [kPrefetchStages x-slice
/// buffers: (kPrefetchStages, kTpr·kVecs) 16-byte vectors] [ClusterRowSum's slots and
/// mbarriers] [kPrefetchStages copy mbarriers, padded to 16 bytes]. The kernel and its launcher
/// read it.
template <int kTpr, int kVecs>
struct PrefetchFwdSmem {
  static constexpr size_t kSum = kPrefetchStages * size_t{kTpr} * kVecs * 16;
  static constexpr size_t kFull = kSum + ClusterRowSum<kTpr / 32, kMaxPrefetchCluster>::kBytes;
  static constexpr size_t kBytes = kFull + (kPrefetchStages * 8 + 15) / 16 * 16;
};

template <typename T, typename TW, int kTpr, int kVecs>
__global__ void __launch_bounds__(kTpr, 1024 / kTpr)
    rmsnorm_fwd_prefetch_kernel(const __grid_constant__ RmsNormFwdParams p) {
  constexpr int kVec = 16 / sizeof(T);   // elements per 16-byte vector
  constexpr int kChunk = kTpr * kVecs;   // vectors of a CTA's slice
  constexpr int kWarps = kTpr / 32;
  using XV = Packed<T, kVec>;   // 16 bytes
  using WV = Packed<TW, kVec>;  // 16 or 32 bytes
  // The CTA's weight slice lives in registers for the whole kernel (kVecs vectors: 8·kVecs
  // registers for an fp32 weight of 16-bit x); x is read from shared memory in both passes.
  // A timing-only variant without the weight's loads read bf16 8192 x 262144 at 4.05 TB/s
  // against 3.71 (session 9): the per-row weight reads from L2 were the bf16 long-row limit.
  static_assert(kVecs * int{sizeof(WV)} / 4 + 4 + 24 <= 64, "the weight slice must fit 64 registers");
  using Sum = ClusterRowSum<kWarps, kMaxPrefetchCluster>;
  extern __shared__ __align__(128) unsigned char smem[];
  using Layout = PrefetchFwdSmem<kTpr, kVecs>;
  XV* bufs = reinterpret_cast<XV*>(smem);  // (kPrefetchStages, kChunk) vectors
  const Sum sum(smem + Layout::kSum);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + Layout::kFull);  // [kPrefetchStages]

  const int cluster_n = p.g.cluster_n;
  const int rank = cluster_n > 1 ? static_cast<int>(blockIdx.x % cluster_n) : 0;
  const int64_t clusters = gridDim.x / cluster_n;
  const int t = threadIdx.x;
  const int64_t M = p.g.rows;
  const int row_vecs = static_cast<int>(p.g.cols / kVec);
  const int slice_vecs = max(0, min(kChunk, row_vecs - rank * kChunk));
  const int n = slice_vecs - t;  // vector v·kTpr of this thread exists when v·kTpr < n
  const T* x0 = static_cast<const T*>(p.x.ptr) + int64_t{rank} * kChunk * kVec;
  T* out0 = static_cast<T*>(p.out.ptr) + int64_t{rank} * kChunk * kVec + int64_t{t} * kVec;
  const WV* w = reinterpret_cast<const WV*>(static_cast<const TW*>(p.weight.ptr) +
                                            int64_t{rank} * kChunk * kVec) + t;

  if (t == 0) {
    for (int i = 0; i < kPrefetchStages; ++i) cuda::ptx::mbarrier_init(&full[i], 1);
    sum.init();  // fences the mbarrier inits for the cluster
  }
  __syncthreads();
  if (cluster_n > 1) cluster_arrive_relaxed();  // waited on before the first remote store
  // Thread 0: this CTA's slice of `row` into stage `st`.
  auto issue = [&](int64_t row, int st) {
    const uint32_t bytes = static_cast<uint32_t>(slice_vecs) * 16;
    if (bytes == 0) {
      cuda::ptx::mbarrier_arrive(&full[st]);
      return;
    }
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                         cuda::ptx::space_shared, &full[st], bytes);
    cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global,
                             bufs + st * kChunk, x0 + row * p.x.row_stride, bytes, &full[st]);
  };
  // Thread 0: this CTA's slice of `row` into L2 only.
  auto prefetch = [&](int64_t row) {
    if (slice_vecs > 0)
      prefetch_l2_bulk(x0 + row * p.x.row_stride, static_cast<uint32_t>(slice_vecs) * 16);
  };
  WV wr[kVecs];  // this thread's weight vectors v·kTpr + t of the CTA's slice
#pragma unroll
  for (int v = 0; v < kVecs; ++v)
    if (v * kTpr < n) load_packed<Cache::kReadOnly>(&w[v * kTpr].elt[0], wr[v]);
  int64_t row = blockIdx.x / cluster_n;
  if (t == 0) {
    for (int st = 0; st < kPrefetchStages && row + st * clusters < M; ++st)
      issue(row + st * clusters, st);
    for (int a = 0; a < kL2Ahead && row + (kPrefetchStages + a) * clusters < M; ++a)
      prefetch(row + (kPrefetchStages + a) * clusters);
  }
  bool waited = false;
  for (int k = 0; row < M; row += clusters, ++k) {
    const int st = k % kPrefetchStages;
    const XV* buf = bufs + st * kChunk + t;
    while (!cuda::ptx::mbarrier_try_wait_parity(
        &full[st], static_cast<uint32_t>((k / kPrefetchStages) & 1))) {
    }
    float sumsq = 0.f;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      if (v * kTpr < n) {
        XV xv;
        load_packed<Cache::kShared>(&buf[v * kTpr].elt[0], xv);
        float h[kVec];
        unpack(xv, h);
#pragma unroll
        for (int i = 0; i < kVec; ++i) sumsq = fmaf(h[i], h[i], sumsq);
      }
    }
    if (cluster_n > 1 && !waited) {
      cluster_wait();
      waited = true;
    }
    const float total = sum.sum(sumsq, k, cluster_n, rank);
    const float rstd = rsqrtf(total * p.inv_n + p.eps);
    if (p.rstd && rank == 0 && t == 0) p.rstd[row * p.rstd_stride] = rstd;
    T* out = out0 + row * p.out.row_stride;
    asm volatile("" : "+l"(out));  // per-vector addresses as immediate offsets off one base
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      if (v * kTpr < n) {
        XV xv;
        load_packed<Cache::kShared>(&buf[v * kTpr].elt[0], xv);
        float h[kVec], wf[kVec];
        unpack(xv, h);
        unpack(wr[v], wf);
        XV y;
#pragma unroll
        for (int i = 0; i < kVec; ++i) y.elt[i] = from_float<T>(h[i] * rstd * wf[i]);
        store_packed(out + v * kTpr * kVec, y);
      }
    }
    __syncthreads();  // every read of buf is done before the copy engine refills it
    if (t == 0 && row + kPrefetchStages * clusters < M)
      issue(row + kPrefetchStages * clusters, st);
    if (t == 0 && row + (kPrefetchStages + kL2Ahead) * clusters < M)
      prefetch(row + (kPrefetchStages + kL2Ahead) * clusters);
  }
  if (cluster_n > 1 && !waited) cluster_wait();
}

}  // namespace quack::detail
