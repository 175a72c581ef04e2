// Tile order of the persistent GEMM (host and device): maps a linear work index to an output
// tile (m, n, batch). Grouped ("swizzled") rasterisation: consecutive indices walk down a
// band of `group` tile rows (raster along M) or columns (raster along N) before moving on,
// so the CTAs running at one time share A and B tiles in L2 (Triton's GROUP_SIZE_M, CUTLASS's
// swizzle). With clusters, the unit is a cluster of (cluster_m, cluster_n) tiles: work index ->
// cluster tile, and each CTA adds its rank inside the cluster.
//
// Serpentine (QuACK 0.2.0's tile_scheduler.py): odd bands walk the minor dimension backwards,
// so the tiles at a band boundary share the operand tiles just read.
//
// The map is a bijection from [0, tiles()) onto the tile grid, tested on the host
// (tests/cpp/host/test_gemm_host.cpp). Persistent CTAs take indices blockIdx, blockIdx + grid...
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define QUACK_HD __host__ __device__ __forceinline__
#else
#define QUACK_HD inline
#endif

namespace quack::detail {

struct TileCoord {
  int64_t m, n, batch;  // tile indices (multiply by the tile shape for elements)
};

struct TileScheduler {
  int64_t tiles_m = 0, tiles_n = 0, batches = 1;  // in cluster units
  int group = 8;                                  // band width of the swizzle, ≥ 1
  bool raster_n = false;                          // band along N instead of M
  bool serpentine = false;                        // odd bands walk the minor dimension backwards

  /// Scheduler for an M x N x batches output of tile_m x tile_n tiles in clusters of
  /// cluster_m x cluster_n tiles (the grid of cluster tiles is rounded up).
  QUACK_HD static TileScheduler make(int64_t M, int64_t N, int64_t batches, int tile_m, int tile_n,
                                     int cluster_m, int cluster_n, int group, bool raster_n,
                                     bool serpentine = false) {
    TileScheduler s;
    const int64_t cm = int64_t(tile_m) * cluster_m, cn = int64_t(tile_n) * cluster_n;
    s.tiles_m = (M + cm - 1) / cm;
    s.tiles_n = (N + cn - 1) / cn;
    s.batches = batches;
    s.group = group < 1 ? 1 : group;
    s.raster_n = raster_n;
    s.serpentine = serpentine;
    return s;
  }

  /// QuACK 0.2.0's raster heuristic (RasterOrderOption.Heuristic): bands along M (raster_n =
  /// false) when the cluster-tile count along N, rounded up to the band width, exceeds M's,
  /// else along N.
  QUACK_HD static bool heuristic_raster_n(int64_t M, int64_t N, int tile_m, int tile_n, int cluster_m,
                                          int cluster_n, int group) {
    const int64_t cm = int64_t(tile_m) * cluster_m, cn = int64_t(tile_n) * cluster_n;
    const int64_t g = group < 1 ? 1 : group;
    const int64_t bm = ((M + cm - 1) / cm + g - 1) / g * g, bn = ((N + cn - 1) / cn + g - 1) / g * g;
    return !(bn > bm);
  }

  QUACK_HD int64_t tiles() const { return tiles_m * tiles_n * batches; }

  /// Cluster tile of work index `idx` (0 ≤ idx < tiles()).
  QUACK_HD TileCoord tile(int64_t idx) const {
    const int64_t per_batch = tiles_m * tiles_n;
    const int64_t batch = idx / per_batch;
    int64_t r = idx - batch * per_batch;
    // "major" = the rasterised dimension walked inside a band, "minor" = the other one.
    const int64_t major = raster_n ? tiles_n : tiles_m;
    const int64_t minor = raster_n ? tiles_m : tiles_n;
    const int64_t band_tiles = int64_t(group) * minor;
    const int64_t band = r / band_tiles;
    const int64_t first = band * group;
    const int64_t width = (major - first) < group ? (major - first) : group;  // last band
    r -= band * band_tiles;
    const int64_t a = first + r % width;  // along the band's width
    int64_t b = r / width;                // along the minor dimension
    if (serpentine && (band & 1)) b = minor - 1 - b;
    return raster_n ? TileCoord{b, a, batch} : TileCoord{a, b, batch};
  }
};

}  // namespace quack::detail
