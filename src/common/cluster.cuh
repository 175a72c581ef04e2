// Cluster primitives (sm_90).
//
// Barrier halves: a kernel that writes into a peer CTA's shared memory must know the peer has
// started (and initialised its mbarriers): every thread arrives (relaxed) once its CTA's
// mbarriers are initialised and fenced, and waits right before its first remote store, so the
// barrier's latency overlaps the first loads.
//
// cluster_exchange: the per-row exchange of reduction partials (QuACK's scheme). Each sender
// writes its value into a slot of every CTA of the cluster with st.async, which completes its
// bytes on that CTA's mbarrier; a CTA's thread 0 expects the bytes all senders will write;
// every thread then waits on its own CTA's mbarrier. No cluster barrier per row: the
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

/// Exchange step k (0, 1, ...) on `bar` (one of two alternating mbarriers: the caller passes
/// bars[k & 1]): threads with `send` store v into `slot` (a local shared address) of every CTA
/// of the cluster; thread 0 expects `bytes` (all senders' stores into this CTA); every thread
/// returns once this CTA's slots are complete. Senders must be lanes 0..cluster_n-1 of warps
/// (lane i writes CTA i), as the callers arrange.
__device__ __forceinline__ void cluster_exchange(float v, float* slot, bool send, int cluster_n,
                                                 uint64_t* bar, uint32_t bytes, int k) {
  // CTA scope: thread 0 publishes nothing (a cluster-scope release compiles to MEMBAR.ALL.GPU).
  if (threadIdx.x == 0)
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                         cuda::ptx::space_shared, bar, bytes);
  const int lane = threadIdx.x & 31;
  if (send && lane < cluster_n) {
    // 32-bit shared::cluster addresses (mapa), not generic pointers: fewer registers.
    const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(slot));
    const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
    uint32_t rs, rb;
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rs) : "r"(s), "r"(lane));
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(b), "r"(lane));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];"
                 :: "r"(rs), "r"(__float_as_uint(v)), "r"(rb) : "memory");
  }
  const uint32_t parity = static_cast<uint32_t>((k >> 1) & 1);
  while (!cuda::ptx::mbarrier_try_wait_parity(cuda::ptx::sem_acquire, cuda::ptx::scope_cluster,
                                              bar, parity)) {
  }
}

}  // namespace quack::detail
