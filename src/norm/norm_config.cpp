#include "norm/norm_config.h"

#include <algorithm>

namespace quack::detail {

static int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

int64_t max_row_length(const RowConfigKnobs& k) {
  return static_cast<int64_t>(k.values_per_thread) * k.max_cta_threads * kMaxClusterSize;
}

bool make_row_geometry(int64_t M, int64_t N, int vec, const RowConfigKnobs& k, RowGeometry* g) {
  if (N < 1 || vec < 1 || N > max_row_length(k)) return false;
  const int max_vpt = k.values_per_thread / vec;
  const int64_t nvec = (N + vec - 1) / vec;
  const int64_t threads = next_pow2((nvec + max_vpt - 1) / max_vpt);  // per row, all CTAs
  int tpr, cluster_n;
  if (threads <= k.max_cta_row_threads) {
    tpr = static_cast<int>(threads);
    cluster_n = 1;
  } else {
    // Split into a cluster of max_cta_row_threads-wide CTAs; past 16 CTAs, widen the CTAs
    // (up to max_cta_threads) instead.
    tpr = k.max_cta_row_threads;
    cluster_n = static_cast<int>(threads / tpr);
    if (cluster_n > kMaxClusterSize) {
      cluster_n = kMaxClusterSize;
      tpr = static_cast<int>(threads / kMaxClusterSize);
      if (tpr > k.max_cta_threads) return false;
    }
  }
  g->rows = M;
  g->cols = N;
  g->vec = vec;
  g->tpr = tpr;
  g->cluster_n = cluster_n;
  g->vpt = static_cast<int>((nvec + static_cast<int64_t>(tpr) * cluster_n - 1) /
                            (static_cast<int64_t>(tpr) * cluster_n));
  g->cta_threads = std::max(tpr, k.min_cta_threads);
  const int rows_per_cta = g->cta_threads / tpr;
  g->row_blocks = (M + rows_per_cta - 1) / rows_per_cta;
  return true;
}

RowGeometry make_general_geometry(int64_t M, int64_t N) {
  RowGeometry g;
  const int64_t threads =
      next_pow2((std::max<int64_t>(N, 1) + kNormGeneralValuesPerThread - 1) /
                kNormGeneralValuesPerThread);
  g.rows = M;
  g.cols = N;
  g.vec = 1;
  g.vpt = 0;
  g.tpr = static_cast<int>(std::min<int64_t>(threads, 256));
  g.cluster_n = static_cast<int>(std::min<int64_t>(kMaxClusterSize, threads / g.tpr));
  g.cta_threads = std::max(g.tpr, 128);
  const int rows_per_cta = g.cta_threads / g.tpr;
  g.row_blocks = (M + rows_per_cta - 1) / rows_per_cta;
  return g;
}

bool simple_fwd_config_fits(int config, int64_t rows, int64_t row_bytes, bool residual) {
  if (config < 0 || config >= kSimpleFwdConfigCount) return false;
  const SimpleFwdConfig& c = kSimpleFwdConfigs[config];
  if (c.no_residual && residual) return false;
  if (c.prefetch) return row_bytes <= c.capacity_bytes();  // persistent grid
  const int64_t grid = (rows + c.rows - 1) / c.rows;
  if (grid > 0x7fffffff) return false;  // gridDim.x
  if (row_bytes / 16 > 0x7fffffff) return false;  // vector indices are 32-bit
  return c.looped || row_bytes <= c.capacity_bytes();
}

int simple_fwd_config(int64_t row_bytes, int elt_bytes, bool residual) {
  // Single pass while the row fits the registers of one CTA of up to 1024 threads x 4 vectors
  // (64 KB); longer rows: below (prefetch or t1024v8 without a residual; with one, or beyond
  // 512 KB, a loop of two passes, the second from L2). From the H200 A/B at c493320
  // (quack-bench rmsnorm --fwd-path simple-all, bf16 16384 x N; docs/performance.md v3):
  // 1024 r4t32v4 2.76 TB/s, 4096 t256v2 3.69, 8192 t256v4 3.92, 32768 t1024v4 4.10. Rows of
  // 16-32 KB (bf16 16384, fp32 8192): t512v4 (session 6, 9b38c55: 4.17 / 4.17 against the
  // staged kernel's 3.67 / 3.68).
  if (row_bytes <= 2 * 1024) return 0;   // r4t32v4
  if (row_bytes <= 8 * 1024) return 2;   // t256v2
  if (row_bytes <= 16 * 1024) return 4;  // t256v4
  if (row_bytes <= 32 * 1024) return 9;  // t512v4
  if (row_bytes <= 64 * 1024) return 5;  // t1024v4
  // Longer rows without a residual: fp32 rows of up to 128 KB in one pass (t1024v8), the rest
  // t1024v4-prefetch (session 7, H200, TB/s, M = 16384; 262144: M = 8192). t512v4-prefetch (2 CTAs per SM) measured 3.74-3.77 at bf16 131072 / 3.89 at fp32
  // 65536 in one run (c36a54a) but 3.61 / 3.77 in the next (71f64dd); t1024v4-prefetch held
  // 3.70-3.72 / 3.81-3.82 in both, so the table takes it:
  //   bf16 65536  t1024v4-prefetch 3.79-3.80, t1024v2-looped 3.66
  //   bf16 131072 t1024v4-prefetch 3.70-3.72, looped 3.14
  //   bf16 262144 t1024v4-prefetch 3.58-3.70, looped 2.99
  //   fp32 32768  t1024v2-looped 4.01, t1024v4-prefetch 3.87
  //   fp32 65536  t1024v4-prefetch 3.81, looped 3.31
  //   fp32 131072 t1024v4-prefetch 3.86-3.87, looped 3.12
  //   fp32 32768  t1024v8 4.18 (single pass, no residual; session 9 A/B: 4.176 vs looped 4.01)
  if (!residual && elt_bytes == 4 && row_bytes <= kSimpleFwdConfigs[12].capacity_bytes())
    return 12;  // t1024v8
  if (!residual && row_bytes <= kSimpleFwdConfigs[10].capacity_bytes())
    return 10;  // t1024v4-prefetch
  return 8;  // t1024v2-looped
}

}  // namespace quack::detail
