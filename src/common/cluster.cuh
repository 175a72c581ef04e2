// Cluster primitives (sm_90).
//
// Barrier halves: a kernel that writes into a peer CTA's shared memory must know the peer has
// started (and initialised its mbarriers): every thread arrives (relaxed) once its CTA's
// mbarriers are initialised and fenced, and waits right before its first remote store, so the
// barrier's latency overlaps the first loads.
//
// cluster_exchange: the per-row exchange of reduction partials (after QuACK's scheme): one
// warp copies the CTA's partials into every other CTA with st.async, which completes bytes on
// that CTA's mbarrier; a CTA's thread 0 expects the bytes the others will write; every thread
// then waits on its own CTA's mbarrier. No cluster barrier per row: the
// barrier's arrive has release semantics, compiled to MEMBAR.ALL.GPU, which makes each thread
// wait until every global store it issued before (the previous row's outputs) is visible
// GPU-wide — in a persistent row kernel that serialises the stores with the reduction.
#pragma once

#include <cuda/ptx>

#include <cstdint>

namespace quack::detail {

__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}

/// One thread, before the cluster arrive that publishes them: n mbarriers of one arrival each.
__device__ __forceinline__ void init_exchange_barriers(uint64_t* bars, int n) {
  for (int i = 0; i < n; ++i) cuda::ptx::mbarrier_init(&bars[i], 1);
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
}

/// Thread 0: this CTA's mbarrier `bar` expects `bytes` from its peers. CTA scope: thread 0
/// publishes nothing (a cluster-scope release compiles to MEMBAR.ALL.GPU).
__device__ __forceinline__ void exchange_expect(uint64_t* bar, uint32_t bytes) {
  if (threadIdx.x == 0)
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                         cuda::ptx::space_shared, bar, bytes);
}

/// Every thread: exchange step k's bytes are in this CTA's shared memory. Default (CTA-scope
/// acquire) wait, as CUTLASS's cluster barriers; a cluster-scope acquire would add an L1
/// invalidation (CCTL.IVALL).
__device__ __forceinline__ void exchange_wait(uint64_t* bar, int k) {
  const uint32_t parity = static_cast<uint32_t>((k >> 1) & 1);
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

/// st.async of the 16 bytes v (from 32-bit shared address s) into the same offset of CTA `dst`
/// of the cluster, completing them on that CTA's mbarrier at this CTA's offset b.
__device__ __forceinline__ void st_async_to(uint32_t s, uint32_t b, const float4& v, int dst) {
  uint32_t rs, rb;  // 32-bit shared::cluster addresses of the peer's block and mbarrier
  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rs) : "r"(s), "r"(dst));
  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(b), "r"(dst));
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];"
      :: "r"(rs), "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)),
         "r"(__float_as_uint(v.z)), "r"(__float_as_uint(v.w)), "r"(rb) : "memory");
}

/// Exchange step k (0, 1, ...) of reduction partials between the CTAs of a cluster. Each CTA's
/// partials are `rows` blocks of W floats (row r's block at blocks + r·row_stride, the same
/// offsets in every CTA's slots; W a power of two ≥ 4, rows·W/4 ≤ 32, blocks 16-byte aligned),
/// already written to its own slots and published by the caller's __syncthreads. Lanes of warp
/// 0 copy them, 16 bytes each, into every other CTA with st.async, completing bytes on the
/// receiver's `bar` (bars[k & 1] of two alternating mbarriers); thread 0 expects what the
/// others send. Every thread returns once this CTA holds every CTA's blocks.
/// Few wide messages from one warp: QuACK's one 4-byte message per warp and CTA measured 0-6 %
/// slower in the backward (most at 512 KB rows: 3.21 vs 3.42 TB/s; H200); each
/// message is a transaction on the receiver's mbarrier.
__device__ __forceinline__ void cluster_exchange(float* blocks, int row_stride, int W, int rows,
                                                 int cluster_n, int rank, uint64_t* bar, int k) {
  exchange_expect(bar, static_cast<uint32_t>((cluster_n - 1) * rows * W * 4));
  const int per_row_log2 = __ffs(W) - 3;  // log2(W / 4): 16-byte chunks per row block
  const int c = threadIdx.x;              // this lane's chunk
  if (c < (rows << per_row_log2)) {
    const float* src =
        blocks + (c >> per_row_log2) * row_stride + (c & ((1 << per_row_log2) - 1)) * 4;
    const float4 v = *reinterpret_cast<const float4*>(src);
    const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(src));
    const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
    for (int d = 1; d < cluster_n; ++d)
      st_async_to(s, b, v, rank + d < cluster_n ? rank + d : rank + d - cluster_n);
  }
  exchange_wait(bar, k);
}

/// Exchange step k gathered on rank 0 only (cluster_exchange's layout and mbarrier): ranks ≠ 0
/// copy their `rows` blocks of W floats into rank 0 with st.async and return at once (the
/// values travel from registers, and rank 0 waits for them, so the sender may exit); rank 0's
/// threads return once every peer's blocks are in its shared memory.
__device__ __forceinline__ void cluster_gather(float* blocks, int row_stride, int W, int rows,
                                               int cluster_n, int rank, uint64_t* bar, int k) {
  if (rank == 0) {
    exchange_expect(bar, static_cast<uint32_t>((cluster_n - 1) * rows * W * 4));
    exchange_wait(bar, k);
    return;
  }
  const int per_row_log2 = __ffs(W) - 3;  // log2(W / 4): 16-byte chunks per row block
  const int c = threadIdx.x;              // this lane's chunk
  if (c < (rows << per_row_log2)) {
    const float* src =
        blocks + (c >> per_row_log2) * row_stride + (c & ((1 << per_row_log2) - 1)) * 4;
    const float4 v = *reinterpret_cast<const float4*>(src);
    const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(src));
    const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
    st_async_to(s, b, v, 0);
  }
}

}  // namespace quack::detail
