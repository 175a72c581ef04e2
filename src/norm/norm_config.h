// Launch geometry for the norm kernels (host only, unit-tested without a GPU).
//
// A thread handles at most values_per_thread / vec vectors of a row. The row is split over the
// fewest threads that fit, rounded to a power of two; rows longer than one CTA of
// max_cta_row_threads take a cluster of up to 16 CTAs (distributed shared memory reduce). Small
// rows pack several rows into a CTA of min_cta_threads. The defaults per kernel are
// rmsnorm_{fwd,bwd}_knobs (rmsnorm.cpp); rmsnorm.cpp also shrinks the geometry until the staged
// slices fit in shared memory.
#pragma once

#include <cstdint>

#include "common/row_geometry.h"

namespace quack::detail {

constexpr int kNormMaxCtaThreads = 512;     // __launch_bounds__ of the forward kernels
constexpr int kNormBwdMaxCtaThreads = 512;  // backward (x, dout staged in shared memory)
// Vectors per thread on the vector path. Forward: 8 (values live in shared memory; this sets
// the slice per thread). Backward: 4, the kernel's kMaxVecs, because each thread keeps fp32
// dweight/dbias sums of its columns in registers (32 values for 16-bit x, 16 for fp32) under the
// 128-register cap of 512-thread CTAs; longest backward rows 262144 (16-bit), 131072 (fp32).
constexpr int kNormFwdVectorsPerThread = 8;
constexpr int kNormBwdVectorsPerThread = 4;
constexpr int kNormGeneralValuesPerThread = 16;  // general path: per pass, any N
constexpr int kMaxClusterSize = 16;

struct RowConfigKnobs {
  int values_per_thread = kNormFwdVectorsPerThread * 8;  // vectors · vec (set per kernel)
  int max_cta_threads = kNormMaxCtaThreads;         // the kernel's __launch_bounds__
  int max_cta_row_threads = 256;  // above this a row is split over a cluster
  int min_cta_threads = 128;      // small rows: pack rows_per_cta rows into one CTA
};

/// Geometry for M rows of N elements with `vec` elements per access. Returns false when N
/// does not fit (longer than 16 CTAs of max_cta_threads threads can hold).
bool make_row_geometry(int64_t M, int64_t N, int vec, const RowConfigKnobs& knobs,
                       RowGeometry* out);

/// Geometry of the general path (any N): about kNormGeneralValuesPerThread values per thread
/// and pass, at most 16 CTAs of 256 threads per row; vpt is unused (threads loop).
RowGeometry make_general_geometry(int64_t M, int64_t N);

/// Largest N make_row_geometry accepts for these knobs.
int64_t max_row_length(const RowConfigKnobs& knobs);

}  // namespace quack::detail
