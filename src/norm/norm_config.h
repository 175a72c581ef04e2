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
/// holding `vecs` 16-byte vectors of x per pass, and `cluster` CTAs per row (1, or 2..16: the
/// row split over a thread-block cluster, single pass). Single pass (the row in registers)
/// takes rows of at most capacity_bytes(); looped instances take any row, in chunks of
/// capacity_bytes().
struct SimpleFwdConfig {
  int tpr, rows, vecs;
  bool looped;
  int cluster;
  const char* name;
  constexpr int threads() const { return tpr * rows; }
  constexpr int64_t capacity_bytes() const { return int64_t{tpr} * vecs * 16 * cluster; }
};

/// Every compiled instance (per x dtype, weight dtype and residual flag); indices are stable
/// within a build. The table below picks one per row length; quack-bench can time them all.
/// Names: r<rows per CTA> t<threads per row> v<vectors per thread> c<CTAs per row>.
inline constexpr SimpleFwdConfig kSimpleFwdConfigs[] = {
    {32, 4, 4, false, 1, "r4t32v4"},          // 0: row ≤ 2 KB (bf16 N ≤ 1024), one warp per row
    {128, 1, 4, false, 1, "t128v4"},          // 1: ≤ 8 KB
    {256, 1, 2, false, 1, "t256v2"},          // 2: ≤ 8 KB (bf16 4096: Liger's 8 warps x 16 values)
    {512, 1, 2, false, 1, "t512v2"},          // 3: ≤ 16 KB
    {256, 1, 4, false, 1, "t256v4"},          // 4: ≤ 16 KB
    {1024, 1, 4, false, 1, "t1024v4"},        // 5: ≤ 64 KB
    {256, 1, 2, true, 1, "t256v2-looped"},    // 6: any row, 8 KB chunks, small CTAs (Inductor-like)
    {512, 1, 4, true, 1, "t512v4-looped"},    // 7: any row, 32 KB chunks
    {1024, 1, 2, true, 1, "t1024v2-looped"},  // 8: any row, 32 KB chunks (pass 1: two in flight)
    // No t1024v4-looped: with a residual it spills under the 64-register cap of 1024 threads.
    // v4 (prepared at fbf36d8's successor, not measured yet: docs/performance.md v4):
    {128, 2, 4, false, 1, "r2t128v4"},   // 9: ≤ 8 KB, 2 rows per CTA (bf16 4096 candidate)
    {256, 2, 2, false, 1, "r2t256v2"},   // 10: ≤ 8 KB, 2 rows per CTA (bf16 4096 candidate)
    {512, 1, 4, false, 1, "t512v4"},     // 11: ≤ 32 KB without idle threads (bf16 16384, fp32 8192)
    {1024, 1, 2, false, 1, "t1024v2"},   // 12: ≤ 32 KB, 1024 threads (candidate)
    {512, 1, 4, false, 4, "t512v4c4"},   // 13: ≤ 128 KB over 4 CTAs (bf16 65536, fp32 32768)
    {512, 1, 4, false, 8, "t512v4c8"},   // 14: ≤ 256 KB over 8 CTAs (bf16 131072, fp32 65536)
    {512, 1, 4, false, 16, "t512v4c16"}, // 15: ≤ 512 KB over 16 CTAs (bf16 262144; non-portable)
    {1024, 1, 4, false, 8, "t1024v4c8"}, // 16: ≤ 512 KB over 8 CTAs of 1024 (candidate)
    {1024, 1, 4, false, 16, "t1024v4c16"},  // 17: ≤ 1 MB over 16 CTAs (fp32 262144, bf16 524288)
    // Cluster CTAs of 512 threads run under a 64-register cap (2 resident per SM:
    // kSimpleFwdMinBlocks), those of 1024 threads one per SM.
};
inline constexpr int kSimpleFwdConfigCount =
    static_cast<int>(sizeof(kSimpleFwdConfigs) / sizeof(kSimpleFwdConfigs[0]));
/// The looped instance the table falls back to when its cluster pick does not fit the grid.
inline constexpr int kSimpleFwdLoopedFallback = 8;  // t1024v2-looped

/// Whether instance `config` takes rows of row_bytes (= N · sizeof(x)) and `rows` rows (the
/// grid, rows / config rows · cluster CTAs, fits a 1-D launch).
bool simple_fwd_config_fits(int config, int64_t rows, int64_t row_bytes);

/// The table: the instance the simple forward runs for rows of row_bytes (= N · sizeof(x)),
/// or -1 (the staged kernel).
int simple_fwd_config(int64_t row_bytes);

/// The table's instance for `rows` rows of row_bytes when it fits the grid, else its looped
/// fallback (kSimpleFwdLoopedFallback) when that fits, else -1.
int simple_fwd_config(int64_t rows, int64_t row_bytes);

/// Compile-time geometry of one instance of the simple backward kernel
/// (rmsnorm_bwd_simple_kernel.cuh): one row at a time per CTA of `tpr` threads, each holding
/// `vecs` 16-byte vectors of x and of dy (the row in registers: rows of at most
/// capacity_bytes()); `prefetch` loads the next row before reducing the current one.
struct SimpleBwdConfig {
  int tpr, vecs;
  bool prefetch;
  const char* name;
  constexpr int threads() const { return tpr; }
  constexpr int64_t capacity_bytes() const { return int64_t{tpr} * vecs * 16; }
};

/// Every compiled instance (per x dtype and weight: absent, x's dtype or fp32); indices are
/// stable within a build. simple_bwd_config picks one per row length; quack-bench can time all.
inline constexpr SimpleBwdConfig kSimpleBwdConfigs[] = {
    {128, 2, true, "t128v2p"},    // 0: row ≤ 4 KB (bf16 N ≤ 2048)
    {256, 2, true, "t256v2p"},    // 1: ≤ 8 KB (bf16 4096)
    {256, 2, false, "t256v2"},    // 2: ≤ 8 KB, one row in flight per CTA
    {256, 4, false, "t256v4"},    // 3: ≤ 16 KB
    {512, 2, true, "t512v2p"},    // 4: ≤ 16 KB (bf16 8192, fp32 4096)
    {512, 4, false, "t512v4"},    // 5: ≤ 32 KB
    {1024, 2, false, "t1024v2"},  // 6: ≤ 32 KB (bf16 16384, fp32 8192)
    {1024, 4, false, "t1024v4"},  // 7: ≤ 64 KB (bf16 32768, fp32 16384)
};
inline constexpr int kSimpleBwdConfigCount =
    static_cast<int>(sizeof(kSimpleBwdConfigs) / sizeof(kSimpleBwdConfigs[0]));

/// Whether instance `config` takes rows of row_bytes (= N · elt_bytes, elt_bytes the size of
/// x's dtype) with `accumulators` column sums (dweight, dbias: 0-2) in shared memory (one fp32
/// per column of capacity each, at most 227 KB).
bool simple_bwd_config_fits(int config, int64_t row_bytes, int elt_bytes, int accumulators);

/// The table: the instance the simple backward runs for rows of row_bytes, or -1 (the staged
/// kernel) for rows longer than 64 KB.
int simple_bwd_config(int64_t row_bytes);

/// Waves of resident CTAs the simple backward's grid spans by default: 1, so P (the partial
/// rows colsum adds, P·N·8 bytes of extra traffic) stays at the resident CTAs, as for the
/// staged kernel; every CTA then walks ~M / resident rows.
constexpr int kSimpleBwdWaves = 1;

/// Rows per CTA of the simple backward: M rows over `waves` x `resident` CTAs (at least one
/// row each). The grid is ceil(M / rows_per_cta) CTAs, P of the partial sums.
int64_t simple_bwd_rows_per_cta(int64_t M, int64_t resident, int waves);

}  // namespace quack::detail
