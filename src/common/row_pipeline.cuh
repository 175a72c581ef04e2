// Double-buffered row staging for persistent row kernels: the CTA's slice of each of its rows
// is copied global -> shared by the bulk-copy engine (cp.async.bulk, completing on an mbarrier)
// while the threads work on the previous row block. Values live in shared memory, not in
// registers, so a thread's register count no longer grows with N and every SM keeps a whole
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
// Requirements (the vector path guarantees them): 16-byte aligned row starts, slices a
// multiple of 16 bytes.
#pragma once

#include <cuda/ptx>

#include <cstdint>

#include "common/reduce.cuh"
#include "common/row_geometry.h"
#include "common/row_io.h"

namespace quack::detail {

template <int kStreams>
struct RowPipeline {
  static constexpr int kStages = 2;
  uint64_t* full;                     // [kStages] mbarriers
  unsigned char* base;                // stage 0, stream 0
  int64_t stream_offset[kStreams];    // bytes from a stage's start to stream s
  int64_t stage_bytes;
  int slice;                          // elements of the CTA's slice of one row

  /// Shared-memory bytes for `elt_bytes[s]` per stream (excluding the caller's own areas).
  __host__ __device__ static int64_t bytes(const RowGeometry& g, const int (&elt_bytes)[kStreams]) {
    int64_t per_row = 0;
#pragma unroll
    for (int s = 0; s < kStreams; ++s) per_row += align16(int64_t(g.vpt) * g.tpr * g.vec * elt_bytes[s]);
    return 16 + kStages * per_row * g.rows_per_cta();
  }
  __host__ __device__ static int64_t align16(int64_t b) { return (b + 15) / 16 * 16; }

  /// `smem` 16-byte aligned, bytes(g, elt_bytes) long. Thread 0 initialises the barriers; the
  /// caller's __syncthreads() (before the first issue) publishes them.
  __device__ void init(unsigned char* smem, const RowGeometry& g, const int (&elt_bytes)[kStreams]) {
    full = reinterpret_cast<uint64_t*>(smem);
    base = smem + 16;
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
      cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
    }
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

  /// Blocks until `stage` holds its rows; `parity` flips each time a stage is reused.
  __device__ void wait(int stage, uint32_t parity) const {
    while (!cuda::ptx::mbarrier_try_wait_parity(&full[stage], parity)) {
    }
  }
};

}  // namespace quack::detail
