// Cluster barrier halves (sm_90). A kernel that writes into a peer CTA's shared memory must
// know the peer has started: every thread arrives (relaxed) at kernel entry and waits right
// before its first remote store, so the barrier's latency overlaps the first loads.
#pragma once

namespace quack::detail {

__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}

}  // namespace quack::detail
