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

}  // namespace quack::detail
