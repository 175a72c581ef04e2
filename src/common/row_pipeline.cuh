// Row staging for persistent row kernels (the staged policy): the CTA's slice of each of its
// rows is copied global -> shared by the bulk-copy engine (cp.async.bulk, completing on an
// mbarrier) while the threads work on the previous row block: kStages stages (two: double
// buffering; one, for rows whose two blocks do not fit: the block after the next is fetched
// into L2 meanwhile, prefetch()). Values live in shared memory, not in
// registers, so a thread's register count does not grow with N and every SM keeps a whole
// row block of loads in flight during the reduction and the stores.
//
// Layout of one stage: for each stream s, rows_per_cta rows of `slice` elements of s's dtype
// (the CTA's contiguous part of a row: vector index rank·vpt·tpr ... +vpt·tpr). Threads read
// their vector v at element (v·tpr + lane_in_row)·vec of their row: consecutive 16-byte words
// across a warp, so shared loads are conflict-free.
// Protocol per stage: each row's leader thread (lane_in_row == 0) arrives on the stage's
// mbarrier with the bytes it will copy and issues the copies (a row beyond M arrives with
// none); all threads wait on the stage parity; after the last read of a stage the CTA
// synchronises before the stage is issued again (write-after-read across proxies).
// Per-column vectors (weight, bias) are staged once per CTA the same way (the CTA's columns
// never change in a persistent loop), so the row loops read them from shared memory too.
// Requirements (the vector path guarantees them): 16-byte aligned row starts and vectors,
// slices a multiple of 16 bytes.
#pragma once

#include <cuda/ptx>

#include <cstdint>

#include "common/row_geometry.h"
#include "common/row_io.h"
#include "common/vec.cuh"

namespace quack::detail {

template <int kStreams, int kVectors = 2, int kStageCount = 2>
struct RowPipeline {
  static constexpr int kStages = kStageCount;
  static_assert(kStages == 1 || kStages == 2, "one or two stages");
  uint64_t* full;                     // [kStages] mbarriers, then the one-shot vector barrier
  unsigned char* base;                // stage 0, stream 0
  int64_t stream_offset[kStreams];    // bytes from a stage's start to stream s
  int64_t stage_bytes;
  int slice;                          // elements of the CTA's slice of one row

  // kStages + 1 mbarriers, alone in a 128-byte line (not beside stage 0's first bytes).
  static constexpr int kBarrierBytes = 128;

  /// Shared-memory bytes for `elt_bytes[s]` per stream and `vec_bytes[v]` per staged vector
  /// (0: absent), excluding the caller's own areas.
  __host__ __device__ static int64_t bytes(const RowGeometry& g, const int (&elt_bytes)[kStreams],
                                           const int (&vec_bytes)[kVectors]) {
    const int64_t slice = int64_t(g.vpt) * g.tpr * g.vec;
    int64_t per_row = 0, vectors = 0;
#pragma unroll
    for (int s = 0; s < kStreams; ++s) per_row += align16(slice * elt_bytes[s]);
#pragma unroll
    for (int v = 0; v < kVectors; ++v) vectors += align16(slice * vec_bytes[v]);
    return kBarrierBytes + kStages * per_row * g.rows_per_cta() + vectors;
  }
  __host__ __device__ static int64_t align16(int64_t b) { return (b + 15) / 16 * 16; }

  /// `smem` 16-byte aligned, bytes(g, elt_bytes) long. Thread 0 initialises the barriers; the
  /// caller's __syncthreads() (before the first issue) publishes them.
  __device__ void init(unsigned char* smem, const RowGeometry& g, const int (&elt_bytes)[kStreams]) {
    full = reinterpret_cast<uint64_t*>(smem);
    base = smem + kBarrierBytes;
    slice = g.vpt * g.tpr * g.vec;
    int64_t off = 0;
#pragma unroll
    for (int s = 0; s < kStreams; ++s) {
      stream_offset[s] = off;
      off += align16(int64_t(slice) * elt_bytes[s]) * g.rows_per_cta();
    }
    stage_bytes = off;
    if (threadIdx.x == 0) {
      for (int i = 0; i < kStages; ++i) cuda::ptx::mbarrier_init(&full[i], g.rows_per_cta());
      cuda::ptx::mbarrier_init(&full[kStages], 1);
      cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
    }
  }

  /// Start of staged vector v (after the stages); vec_bytes as given to bytes().
  __device__ unsigned char* vector_ptr(int v, const int (&vec_bytes)[kVectors]) const {
    unsigned char* p = base + kStages * stage_bytes;
#pragma unroll
    for (int i = 0; i + 1 < kVectors; ++i)
      if (i < v) p += align16(int64_t(slice) * vec_bytes[i]);
    return p;
  }

  /// Thread 0 copies this CTA's column slice of each present vector (src[v].ptr, contiguous)
  /// into shared memory; every thread then waits for them. Call once, after the barrier that
  /// publishes init().
  __device__ void stage_vectors(const RowGeometry& g, const RowCtx& c, const RowIO (&src)[kVectors],
                                const int (&vec_bytes)[kVectors]) const {
    if (threadIdx.x == 0) {
      const int64_t col0 = int64_t(c.rank) * slice;
      const int64_t n = max(int64_t(0), min(int64_t(slice), g.cols - col0));
      uint32_t total = 0;
#pragma unroll
      for (int v = 0; v < kVectors; ++v) total += src[v].ptr ? uint32_t(n * vec_bytes[v]) : 0;
      if (total == 0) {
        cuda::ptx::mbarrier_arrive(&full[kStages]);
      } else {
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                             cuda::ptx::space_shared, &full[kStages], total);
#pragma unroll
        for (int v = 0; v < kVectors; ++v)
          if (src[v].ptr)
            cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                     vector_ptr(v, vec_bytes),
                                     static_cast<const unsigned char*>(src[v].ptr) + col0 * vec_bytes[v],
                                     uint32_t(n * vec_bytes[v]), &full[kStages]);
      }
    }
    wait(kStages, 0);
  }

  /// Row `row_in_cta`'s data of stream s in stage `stage` (elements of s's dtype).
  __device__ unsigned char* row_ptr(int stage, int s, int row_in_cta, int elt_bytes) const {
    return base + stage * stage_bytes + stream_offset[s] +
           align16(int64_t(slice) * elt_bytes) * row_in_cta;
  }

  /// Issues row block rb into `stage`: called by every thread; row leaders act.
  __device__ void issue(int stage, int64_t rb, const RowGeometry& g, const RowCtx& c,
                        const RowIO (&src)[kStreams], const int (&elt_bytes)[kStreams]) const {
    if (c.lane_in_row != 0) return;
    const int64_t row = rb * g.rows_per_cta() + c.row_in_cta;
    const int64_t col0 = int64_t(c.rank) * slice;
    const int64_t n = row < g.rows ? min(int64_t(slice), g.cols - col0) : 0;
    if (n <= 0) {
      cuda::ptx::mbarrier_arrive(&full[stage]);
      return;
    }
    // The stage's earlier reads (generic proxy, every thread's, before the caller's barrier)
    // ordered before the copy engine's writes (async proxy): PTX ISA, "Proxies".
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
    uint32_t total = 0;  // a stream with elt_bytes 0 is absent
#pragma unroll
    for (int s = 0; s < kStreams; ++s) total += uint32_t(n * elt_bytes[s]);
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                         cuda::ptx::space_shared, &full[stage], total);
#pragma unroll
    for (int s = 0; s < kStreams; ++s) {
      if (elt_bytes[s] == 0) continue;
      const unsigned char* g_row = static_cast<const unsigned char*>(src[s].ptr) +
                                   (row * src[s].row_stride + col0) * elt_bytes[s];
      cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global,
                               row_ptr(stage, s, c.row_in_cta, elt_bytes[s]), g_row,
                               uint32_t(n * elt_bytes[s]), &full[stage]);
    }
  }

  /// Row leaders fetch their rows of row block rb into L2 only (no completion to wait for).
  __device__ void prefetch(int64_t rb, const RowGeometry& g, const RowCtx& c,
                           const RowIO (&src)[kStreams], const int (&elt_bytes)[kStreams]) const {
    if (c.lane_in_row != 0) return;
    const int64_t row = rb * g.rows_per_cta() + c.row_in_cta;
    const int64_t col0 = int64_t(c.rank) * slice;
    const int64_t n = row < g.rows ? min(int64_t(slice), g.cols - col0) : 0;
    if (n <= 0) return;
#pragma unroll
    for (int s = 0; s < kStreams; ++s) {
      if (elt_bytes[s] == 0) continue;
      prefetch_l2_bulk(static_cast<const unsigned char*>(src[s].ptr) +
                           (row * src[s].row_stride + col0) * elt_bytes[s],
                       uint32_t(n * elt_bytes[s]));
    }
  }

  /// Prologue of a persistent staged kernel: issues the CTA's first kStages row blocks (rb0,
  /// rb0 + clusters; one stage: rb0, and rb0 + clusters into L2), then stages the per-column
  /// vectors and waits for them.
  __device__ void start(int64_t rb0, int64_t clusters, const RowGeometry& g, const RowCtx& c,
                        const RowIO (&src)[kStreams], const int (&elt_bytes)[kStreams],
                        const RowIO (&vsrc)[kVectors], const int (&vec_bytes)[kVectors]) const {
    issue(0, rb0, g, c, src, elt_bytes);
    if (rb0 + clusters < g.row_blocks) {
      if constexpr (kStages == 2) issue(1, rb0 + clusters, g, c, src, elt_bytes);
      else prefetch(rb0 + clusters, g, c, src, elt_bytes);
    }
    stage_vectors(g, c, vsrc, vec_bytes);
  }

  /// Blocks until `stage` holds its rows; `parity` flips each time a stage is reused.
  __device__ void wait(int stage, uint32_t parity) const {
    while (!cuda::ptx::mbarrier_try_wait_parity(&full[stage], parity)) {
    }
  }
};

}  // namespace quack::detail
