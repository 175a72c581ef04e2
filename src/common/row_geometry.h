// Geometry shared by every row kernel (host and device): how rows of N elements are spread
// over threads, CTAs and clusters. Plain data; chosen on the host by a family's config code.
//
//   one row  = cluster_n CTAs x tpr threads x vpt vectors x vec elements   (≥ N)
//   one CTA  = rows_per_cta rows (cta_threads / tpr)
//   grid     = cluster_n x row_blocks CTAs, clusters of (cluster_n, 1, 1) along x
//
// Thread `lane` (0..tpr-1) of CTA rank r owns vectors  r·vpt·tpr + v·tpr + lane, v < vpt:
// consecutive threads read consecutive 16-byte vectors, so every access is coalesced.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define QUACK_HOST_DEVICE __host__ __device__
#else
#define QUACK_HOST_DEVICE
#endif

namespace quack::detail {

struct RowGeometry {
  int64_t rows = 0;       // M
  int64_t cols = 0;       // N
  int vec = 1;            // elements per vector access (16 bytes of the main dtype, or 1)
  int vpt = 1;            // vectors per thread (≤ the kernel's kMaxVecs)
  int tpr = 1;            // threads per row inside a CTA (power of two)
  int cluster_n = 1;      // CTAs per row (power of two ≤ 16)
  int cta_threads = 128;  // threads per CTA (multiple of 32, ≥ tpr)
  int64_t row_blocks = 0; // CTA groups along M (non-persistent) or clusters (persistent)
  int slice_vecs = 0;     // kClusterRegister: vectors per CTA slice, ceil(N / vec / cluster_n)

  QUACK_HOST_DEVICE int rows_per_cta() const { return cta_threads / tpr; }
  QUACK_HOST_DEVICE int warps() const { return cta_threads / 32; }
  // Reduction slots per stage in shared memory: one per warp of a row, per CTA of the cluster.
  QUACK_HOST_DEVICE int reduce_slots() const { return warps() * cluster_n; }
};

#ifdef __CUDACC__
/// Where this thread sits in the row geometry. Built once per kernel.
struct RowCtx {
  int tid, lane, warp;
  int row_in_cta;   // which row of the CTA's rows_per_cta
  int lane_in_row;  // 0..tpr-1
  int rank;         // CTA rank inside the cluster (0 when cluster_n == 1)
  int64_t row_block;

  __device__ explicit RowCtx(const RowGeometry& g) {
    tid = threadIdx.x;
    lane = tid & 31;
    warp = tid >> 5;
    row_in_cta = tid / g.tpr;
    lane_in_row = tid % g.tpr;
    rank = g.cluster_n > 1 ? static_cast<int>(blockIdx.x % g.cluster_n) : 0;
    row_block = blockIdx.x / g.cluster_n;
  }
  /// Index of this thread's v-th vector within the row (in vectors; 32-bit: vector-path rows
  /// are at most a few hundred thousand elements).
  __device__ int vec_index(const RowGeometry& g, int v) const {
    return (rank * g.vpt + v) * g.tpr + lane_in_row;
  }
};
#endif

}  // namespace quack::detail
