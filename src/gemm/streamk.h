// Stream-K schedule of the persistent GEMM (host and device; no CUDA call): the "data-parallel +
// stream-K" hybrid of the Stream-K paper (Osama et al., PPoPP 2023) and CUTLASS's
// PersistentTileSchedulerSm90StreamK, per cluster (a unit of work is a cluster tile; both CTAs of a
// cluster run the same k-blocks of their tile pair).
//
// T cluster tiles (work indices of TileScheduler) of KB k-blocks each on G persistent clusters.
// With T = W·G + R (0 < R < G), data-parallel waves alone leave (G − R)/G of the last wave idle.
// Here the first S work indices (S = R + G when W ≥ 1, else S = T) are stream-K tiles: their
// S·KB (tile, k-block) iterations, in order (tile-major), are cut into `units` ≤ G contiguous,
// equal ranges (within one k-block: unit u gets [u·I/U, (u+1)·I/U)), one per cluster c < units
// (unit units − 1 − c: unit_of_cluster); the other T − S tiles (a multiple of G) are
// data-parallel: cluster c takes S + c, S + c + G, ... after its stream-K range. A cluster's range cut at tile boundaries gives its pieces (tile,
// [k_begin, k_end)), run in order.
//
// Reduction of a tile split between clusters: only the piece with k-block 0 of the tile (its
// "finisher") runs the epilogue. A piece without k-block 0 can only be the first piece of its
// cluster's range (every later piece starts a tile), so each cluster stores at most one partial,
// in slot = its unit, and releases its flag; the finisher (the last piece of a lower unit's
// range: it runs last in time, the other pieces of the tile being the first piece, or the whole
// range, of the units after it) waits for the flags of units u + 1 .. unit_of(last k-block), adds
// their partials in that order (deterministic) to its accumulators and runs the epilogue.
// Partial pieces never wait on another cluster, so the waits form no cycle; a finisher waits
// only on clusters of lower index (kernel.cuh).
//
// Tested on the host (tests/cpp/host/test_gemm_streamk.cpp): every (tile, k-block) exactly once,
// ranges balanced within one k-block, one finisher per tile, at most one partial per unit.
#pragma once

#include <cstdint>

#include "gemm/tile_scheduler.h"  // QUACK_HD

namespace quack::detail {

/// One piece of work of a cluster: k-blocks [k_begin, k_end) of work index `tile`.
struct StreamKPiece {
  int64_t tile = 0;
  int k_begin = 0, k_end = 0;
  int64_t k_before = 0;  // k-blocks the cluster ran before this piece (its place in the pipeline)
};

struct StreamKSchedule {
  int64_t tiles = 0;     // T: cluster tiles (work indices)
  int64_t clusters = 1;  // persistent clusters launched
  int64_t k_tiles = 1;   // KB: k-blocks per tile
  int64_t sk_tiles = 0;  // S: work indices [0, S) are split along K
  int64_t units = 0;     // clusters [0, units) run the stream-K ranges; 0: data-parallel only

  // The stream-K schedule's cost beyond its k-blocks, in k-blocks of 128x256 (the split tiles'
  // partial stores, the finisher's wait and loads, each piece's pipeline refill), fitted to run
  // AA3 (H200, bf16, quack-bench gemm, QUACK_GEMM_STREAMK 0 / 1, ours / cuBLAS in one process):
  // forced stream-K gained 9 % at 11264 x 2048 x 16384 (model with 4: 10.8 %) and 5 % at
  // 2048 x 5632 x 16384, and lost 3 % at 16384 x 2048 x 5632 (model: +2.4 %) and 8 % at
  // 2048 x 2048 x 16384 (model: +1.2 %): 20-40 k-blocks more than the 4 first assumed. 32
  // keeps the rule on at the two gains and off at the losses (and at 16384 x 2048 x 11264,
  // within the noise either way).
  static constexpr int64_t kFixupKBlocks = 32;
  // Fewest k-blocks per stream-K unit (fewer units when the split iterations are fewer).
  static constexpr int64_t kMinUnitKBlocks = 4;
  // The rule turns stream-K on when its estimated time is at most (1 − kMinGain) of the
  // data-parallel schedule's. Under 5 % the estimate was optimistic where it was read:
  // 16384 x 4096 x 14336 (1024 cluster tiles, 15.5 waves, 224 k-blocks; estimate 2.1 %) ran
  // 0.975 x data-parallel at the power limit (bench_gemm.py sustained; runs BP1 / BQ1, H100).
  // The gains measured have estimates above it: 11264 x 2048 x 16384 (9.0 %; +7 % sustained,
  // BP1 / BQ1), 2048 x 5632 x 16384 (6.9 %; AA3 +5 % kernel-only on the H200, BP1 / BQ1 -2 to
  // -4 % on the H100).
  static constexpr double kMinGain = 0.05;
  // Most k-blocks per tile where the rule may build stream-K. The estimate counts k-blocks as
  // compute, but the units run their k-ranges at different depths of K, so tiles that share an
  // A or B panel no longer read it from L2 together: at long K the split tiles stream their
  // operands from DRAM. Run BD (H100, bench_gemm.py burst, the rule against QUACK_GEMM_STREAMK=0,
  // the rule's tiles): 4096 x 4096 x 32768 / 128256, 8192 x 4096 x 65536, 2048 x 4096 x 128256 and
  // 1024 x 1024 x 131072 read 510 / 507 / 565 / 446 / 231 TFLOP/s against 717 / 755 / 640 / 757 /
  // 493. The gains measured (run AA3, H200: +9 % at 11264 x 2048 x 16384, +5 % at 2048 x 5632 x
  // 16384) are at 256 k-blocks.
  static constexpr int64_t kMaxRuleKBlocks = 256;

  /// The data-parallel schedule: T tiles on min(T, fit) clusters.
  QUACK_HD static StreamKSchedule data_parallel(int64_t tiles, int64_t k_tiles, int64_t fit) {
    StreamKSchedule s;
    s.tiles = tiles;
    s.k_tiles = k_tiles < 1 ? 1 : k_tiles;
    s.clusters = tiles < fit ? tiles : fit;
    if (s.clusters < 1) s.clusters = 1;
    return s;
  }

  /// The hybrid schedule of T tiles of KB k-blocks with at most `fit` clusters resident (fit ≥ 1).
  /// force: build it even where the estimate says data-parallel is as fast (tests, A/B), and
  /// even without a tail wave (then S = G tiles: one wave, cut into equal ranges).
  QUACK_HD static StreamKSchedule make(int64_t tiles, int64_t k_tiles, int64_t fit, bool force) {
    StreamKSchedule dp = data_parallel(tiles, k_tiles, fit);
    if (tiles < 1 || fit < 1) return dp;
    if (!force && dp.k_tiles > kMaxRuleKBlocks) return dp;
    const int64_t KB = dp.k_tiles, G = fit;
    const int64_t W = tiles / G, R = tiles % G;
    if (R == 0 && !force) return dp;
    StreamKSchedule s;
    s.tiles = tiles;
    s.k_tiles = KB;
    s.sk_tiles = W >= 1 ? R + G : tiles;  // R = 0 (forced): one wave
    const int64_t iters = s.sk_tiles * KB;
    int64_t units = iters / kMinUnitKBlocks;
    if (units > G) units = G;
    if (units < 1) units = 1;
    s.units = units;
    // Clusters: G where data-parallel tiles remain (each cluster takes (T − S) / G of them),
    // else the stream-K units.
    s.clusters = s.sk_tiles < tiles ? G : units;
    if (force) return s;
    // Estimated time in k-blocks of the slowest cluster: data-parallel waves ceil(T / G) · KB;
    // stream-K (T − S) / G · KB + ceil(I / U) + kFixupKBlocks (when a tile is split).
    const int64_t t_dp = (tiles + G - 1) / G * KB;
    const int64_t per_unit = (iters + units - 1) / units;
    const bool split = iters % units != 0 || per_unit % KB != 0;
    const int64_t t_sk = (tiles - s.sk_tiles) / G * KB + per_unit + (split ? kFixupKBlocks : 0);
    return double(t_sk) <= (1.0 - kMinGain) * double(t_dp) ? s : dp;
  }

  QUACK_HD bool active() const { return units > 0; }
  QUACK_HD int64_t iters() const { return sk_tiles * k_tiles; }
  /// First iteration of unit u (u ≤ units; begin(units) = iters()).
  QUACK_HD int64_t begin(int64_t u) const { return u * iters() / units; }
  /// The unit whose range holds iteration i (0 ≤ i < iters()).
  QUACK_HD int64_t unit_of(int64_t i) const { return ((i + 1) * units - 1) / iters(); }

  /// The stream-K unit of cluster c < units: units − 1 − c (its own inverse), so that the units
  /// a finisher waits for (after its own) run on clusters of lower index, which the hardware
  /// dispatches first: a grid that is not all resident at once (a GPU shared with other work)
  /// still makes progress when blocks start in index order (kernel.cuh).
  QUACK_HD int64_t unit_of_cluster(int64_t c) const { return units - 1 - c; }

  /// Piece `seq` of cluster c (its stream-K pieces, then its data-parallel tiles); false past
  /// the cluster's last one.
  QUACK_HD bool piece(int64_t c, int64_t seq, StreamKPiece& out) const {
    int64_t done = 0;  // k-blocks of the cluster's stream-K range
    if (c < units) {
      const int64_t u = unit_of_cluster(c);
      const int64_t b = begin(u), e = begin(u + 1);
      const int64_t t0 = b / k_tiles, n = (e - 1) / k_tiles - t0 + 1;  // b < e: units ≤ iters
      if (seq < n) {
        const int64_t t = t0 + seq;
        const int64_t kb = seq == 0 ? b - t0 * k_tiles : 0;
        const int64_t ke = e - t * k_tiles < k_tiles ? e - t * k_tiles : k_tiles;
        out.tile = t;
        out.k_begin = int(kb);
        out.k_end = int(ke);
        out.k_before = t * k_tiles + kb - b;
        return true;
      }
      seq -= n;
      done = e - b;
    }
    const int64_t w = sk_tiles + c + seq * clusters;
    if (w >= tiles) return false;
    out.tile = w;
    out.k_begin = 0;
    out.k_end = int(k_tiles);
    out.k_before = done + seq * k_tiles;
    return true;
  }

  /// Whether piece x (of a stream-K tile) ends before the tile's last k-block: its finisher then
  /// waits for units (its own unit) + 1 .. last_unit(x).
  QUACK_HD bool split(const StreamKPiece& x) const { return x.k_end < k_tiles; }
  QUACK_HD int64_t last_unit(const StreamKPiece& x) const { return unit_of(x.tile * k_tiles + k_tiles - 1); }

  /// Workspace bytes: the flags (one uint32 per CTA of a unit, 256-byte aligned), then one partial
  /// slot of `slot_bytes` (BM·BN·4) per CTA of a unit.
  QUACK_HD static int64_t flag_bytes(int64_t ctas) { return (ctas * 4 + 255) / 256 * 256; }
  QUACK_HD static int64_t workspace_bytes(int64_t ctas, int64_t slot_bytes) {
    return flag_bytes(ctas) + ctas * slot_bytes;
  }
};

}  // namespace quack::detail
