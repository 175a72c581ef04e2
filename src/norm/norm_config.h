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

/// Compile-time geometry of one instance of the simple forward kernel
/// (rmsnorm_fwd_simple_kernel.cuh): `rows` rows per CTA of `tpr` threads each, every thread
/// holding `vecs` 16-byte vectors of x per pass. Single pass (the row in registers) takes rows
/// of at most capacity_bytes(); looped instances take any row, in chunks of capacity_bytes().
struct SimpleFwdConfig {
  int tpr, rows, vecs;
  bool looped;
  const char* name;
  // Persistent prefetch kernel (rmsnorm_fwd_prefetch_kernel.cuh): a CTA's slice of tpr·vecs
  // vectors per row, rows split over clusters of up to kPrefetchMaxCluster CTAs (no residual).
  bool prefetch = false;
  // Takes no residual: the prefetch instances, and t1024v8 (x and a residual would take 8·vecs
  // registers). Never chosen, nor compiled, for calls with one.
  bool no_residual = false;
  static constexpr int kPrefetchMaxCluster = 8;
  constexpr int threads() const { return tpr * rows; }
  constexpr int64_t slice_bytes() const { return int64_t{tpr} * vecs * 16; }
  constexpr int64_t capacity_bytes() const {
    return slice_bytes() * (prefetch ? kPrefetchMaxCluster : 1);
  }
};

/// Every compiled instance (per x dtype, weight dtype and residual flag); indices are stable
/// within a build. The table below picks one per row length; quack-bench can time them all.
inline constexpr SimpleFwdConfig kSimpleFwdConfigs[] = {
    {32, 4, 4, false, "r4t32v4"},          // 0: row ≤ 2 KB (bf16 N ≤ 1024), one warp per row
    {128, 1, 4, false, "t128v4"},          // 1: ≤ 8 KB
    {256, 1, 2, false, "t256v2"},          // 2: ≤ 8 KB (bf16 4096: Liger's 8 warps x 16 values)
    {512, 1, 2, false, "t512v2"},          // 3: ≤ 16 KB
    {256, 1, 4, false, "t256v4"},          // 4: ≤ 16 KB
    {1024, 1, 4, false, "t1024v4"},        // 5: ≤ 64 KB
    {256, 1, 2, true, "t256v2-looped"},    // 6: any row, 8 KB chunks, small CTAs (Inductor-like)
    {512, 1, 4, true, "t512v4-looped"},    // 7: any row, 32 KB chunks
    {1024, 1, 2, true, "t1024v2-looped"},  // 8: any row, 32 KB chunks (pass 1: two in flight)
    {512, 1, 4, false, "t512v4"},          // 9: ≤ 32 KB (fp32 8192: 4.08 vs staged 3.62, v4)
    // Prefetch instances (no residual), up to 8 CTAs per row. 128 KB slices (t1024v8, t512v8
    // at 2 CTAs per SM) measured 3.2-3.5 TB/s against t1024v4's 3.70-3.78 on bf16 rows of
    // 128-512 KB (H200, 413046a), and spill under the 64-register cap: not kept.
    {1024, 1, 4, false, "t1024v4-prefetch", true, true},  // 10: 64 KB slices, 1 CTA per SM
    {512, 1, 4, false, "t512v4-prefetch", true, true},    // 11: 32 KB slices, 2 CTAs per SM
    // 12: ≤ 128 KB in one pass, one CTA per SM (63 registers); fp32 32768: 4.18 against
    // t1024v2-looped's 3.99 and t1024v4-prefetch's 3.98 (H200, session 8, simple-all;
    // session 9's A/B against main: 4.176 against 4.01-4.02).
    {1024, 1, 8, false, "t1024v8", false, true},
    // No t1024v4-looped: with a residual it spills under the 64-register cap of 1024 threads.
};
inline constexpr int kSimpleFwdConfigCount =
    static_cast<int>(sizeof(kSimpleFwdConfigs) / sizeof(kSimpleFwdConfigs[0]));

/// Whether instance `config` takes rows of row_bytes (= N · sizeof(x)) and `rows` rows (the
/// grid, rows / config rows, fits a 1-D launch), with or without a residual.
bool simple_fwd_config_fits(int config, int64_t rows, int64_t row_bytes, bool residual = false);

/// The table: the instance the simple forward runs for rows of row_bytes (= N · elt_bytes,
/// x's element size), with or without a residual (prefetch instances take none).
int simple_fwd_config(int64_t row_bytes, int elt_bytes, bool residual);

}  // namespace quack::detail
