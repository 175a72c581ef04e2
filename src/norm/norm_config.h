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
  constexpr int threads() const { return tpr * rows; }
  constexpr int64_t capacity_bytes() const { return int64_t{tpr} * vecs * 16; }
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
    // No t1024v4-looped: with a residual it spills under the 64-register cap of 1024 threads.
};
inline constexpr int kSimpleFwdConfigCount =
    static_cast<int>(sizeof(kSimpleFwdConfigs) / sizeof(kSimpleFwdConfigs[0]));

/// Whether instance `config` takes rows of row_bytes (= N · sizeof(x)) and `rows` rows (the
/// grid, rows / config rows, fits a 1-D launch).
bool simple_fwd_config_fits(int config, int64_t rows, int64_t row_bytes);

/// The table: the instance the simple forward runs for rows of row_bytes (= N · sizeof(x)).
int simple_fwd_config(int64_t row_bytes);

/// Compile-time geometry of one instance of the row-block backward kernel
/// (rmsnorm_bwd_rowblock_kernel.cuh, "bwd v2"): a CTA of `tpr` threads walks rows_per_cta
/// consecutive rows one at a time, each thread holding `vecs` 16-byte vectors of x and of dy
/// per row (rows of at most capacity_bytes()), its dweight/dbias column sums in fp32
/// registers; `prefetch` loads the next row before reducing the current one.
struct RowBlockBwdConfig {
  int tpr, vecs;
  bool prefetch;
  const char* name;
  constexpr int64_t capacity_bytes() const { return int64_t{tpr} * vecs * 16; }
};

/// Every instance (per x dtype, weight kind and dbias; some do not compile for some of them:
/// rowblock_bwd_compiles). Indices are stable within a build; quack-bench can time them all.
inline constexpr RowBlockBwdConfig kRowBlockBwdConfigs[] = {
    {128, 2, false, "t128v2"},    // 0: row ≤ 4 KB
    {256, 2, false, "t256v2"},    // 1: ≤ 8 KB (bf16 4096)
    {256, 2, true, "t256v2p"},    // 2: ≤ 8 KB, next row prefetched
    {128, 4, false, "t128v4"},    // 3: ≤ 8 KB, 32 columns per thread
    {512, 2, false, "t512v2"},    // 4: ≤ 16 KB (bf16 8192, fp32 4096)
    {512, 2, true, "t512v2p"},    // 5: ≤ 16 KB, prefetched
    {256, 4, false, "t256v4"},    // 6: ≤ 16 KB
    {256, 4, true, "t256v4p"},    // 7: ≤ 16 KB, prefetched (fp32 rows)
    {1024, 2, false, "t1024v2"},  // 8: ≤ 32 KB (bf16 16384, fp32 8192)
    {512, 4, false, "t512v4"},    // 9: ≤ 32 KB
    // No 1024 x 4-vector instance: 32 columns per thread (16-bit) or 16 plus their sums
    // (fp32) do not fit the 64 registers of 1024 threads; longer rows run staged.
};
inline constexpr int kRowBlockBwdConfigCount =
    static_cast<int>(sizeof(kRowBlockBwdConfigs) / sizeof(kRowBlockBwdConfigs[0]));

/// Register estimate per thread of an instance: ~32 for addresses, scalars and one unpacked
/// vector (with its weight), 8 per 16-byte vector of x and dy held (twice with the prefetch),
/// one fp32 per column and accumulator (dweight when the weight is present, dbias), and what
/// ptxas was seen to need beyond that (bf16 TU, 2026-11-30: 16 more with the prefetch, 4 per
/// vector and accumulator past 2 vectors). ptxas is held to it through __launch_bounds__
/// (rowblock_bwd_min_ctas); -warn-spills checks it (scripts/resource_report.py).
constexpr int rowblock_bwd_regs(const RowBlockBwdConfig& c, int elt_bytes, int accumulators) {
  return 32 + 8 * c.vecs * (c.prefetch ? 2 : 1) + accumulators * c.vecs * (16 / elt_bytes) +
         (c.prefetch ? 16 : 0) + (c.vecs > 2 ? 4 * c.vecs * (1 + accumulators) / 2 : 0);
}
/// Whether the instance is compiled for x of elt_bytes with `accumulators` (0-2) column sums:
/// its register estimate fits one CTA (65536 / tpr, at most 255).
constexpr bool rowblock_bwd_compiles(const RowBlockBwdConfig& c, int elt_bytes, int accumulators) {
  return rowblock_bwd_regs(c, elt_bytes, accumulators) <= (65536 / c.tpr < 255 ? 65536 / c.tpr : 255);
}
/// CTAs per SM the instance is compiled for (the second __launch_bounds__ argument): as many
/// as the register estimate (rounded up to 8) allows, at most 2048 threads per SM.
constexpr int rowblock_bwd_min_ctas(const RowBlockBwdConfig& c, int elt_bytes, int accumulators) {
  const int regs = (rowblock_bwd_regs(c, elt_bytes, accumulators) + 7) / 8 * 8;
  const int by_regs = 65536 / (c.tpr * regs);
  const int by_threads = 2048 / c.tpr;
  const int n = by_regs < by_threads ? by_regs : by_threads;
  return n < 1 ? 1 : n;
}

/// Whether instance `config` takes rows of row_bytes (= N · elt_bytes) with x of elt_bytes and
/// `accumulators` register column sums (1 for dweight — accumulated whenever the weight is
/// present —, 1 for dbias).
bool rowblock_bwd_config_fits(int config, int64_t row_bytes, int elt_bytes, int accumulators);

/// The table: the instance the row-block backward runs for these rows, or -1 (the staged
/// kernel) when none fits: rows over 32 KB, and 16-bit rows of 16-32 KB with dweight and dbias.
int rowblock_bwd_config(int64_t row_bytes, int elt_bytes, int accumulators);

/// Rows per CTA (R) and CTAs per cluster (C) of the row-block backward. The C CTAs of a
/// cluster add their column sums through distributed shared memory, so one partial row covers
/// R·C rows: P = ceil(ceil(M / R) / C) partial rows, whose write and colsum read cost
/// partials·P·N·8 bytes beside the 3·M·N·elt of the rows. Rule: R = 8 (fewer when M < 8192,
/// so the grid keeps ≥ 1024 CTAs), C the power of two ≤ 8 that keeps that extra traffic
/// ≤ 5 % (bf16 dweight: R·C = 32; fp32 dweight: 16), C = 1 without partials or for tiny M.
/// rows_per_cta / cluster > 0 override the rule (cluster: a power of two ≤ 8).
struct RowBlockBwdGrid {
  int rows_per_cta = 1;
  int cluster = 1;
  int64_t ctas = 0;      // grid: ceil(M / R) rounded up to a multiple of C
  int64_t partials = 0;  // P = ctas / C
};
RowBlockBwdGrid rowblock_bwd_grid(int64_t M, int elt_bytes, int partial_rows, int rows_per_cta = 0,
                                  int cluster = 0);

}  // namespace quack::detail
