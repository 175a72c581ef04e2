// Launch geometry for the norm kernels (host only, unit-tested without a GPU).
//
// Each vector-path kernel instance holds at most kMaxVecs vectors per thread in registers. The row is
// split over the fewest threads that fit, rounded to a power of two; rows longer than one CTA
// of max_cta_row_threads take a cluster of up to 16 CTAs (distributed shared memory reduce).
#pragma once

#include <cstdint>

#include "common/row_geometry.h"

namespace quack::detail {

constexpr int kNormMaxCtaThreads = 512;     // __launch_bounds__ of the forward kernels
constexpr int kNormBwdMaxCtaThreads = 512;  // backward (x, dout staged in shared memory)
// Vector path: values a thread keeps in registers. Forward: 8 vectors (64 values for 16-bit
// types, 32 for fp32) as fp32 h, 512-thread CTAs (128 registers): 128 bytes of loads in
// flight per thread whatever the dtype (32 values of bf16 ran at 0.63x copy, 2026-11-30). Backward: 8 packed 16-byte vectors each of x and dout (64 values for 16-bit
// types, 32 for fp32) plus their fp32 dweight/dbias sums, in 256-thread CTAs (255 registers).
// Longest vector-path rows: forward 524288 (16-bit), 262144 (fp32); backward 262144 (16-bit),
// 131072 (fp32).
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
