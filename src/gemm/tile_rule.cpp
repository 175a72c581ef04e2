#include "gemm/tile_rule.h"

namespace quack::detail {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int find(const TileOption* o, int count, int bm, int bn, int cm, int cn, bool pingpong) {
  for (int i = 0; i < count; ++i)
    if (o[i].bm == bm && o[i].bn == bn && o[i].cluster_m == cm && o[i].cluster_n == cn && o[i].pingpong == pingpong)
      return i;
  return -1;
}

// Tiles of o over the problem (CTA tiles, not clusters).
int64_t tiles(const TileQuery& q, const TileOption& o) { return ceil_div(q.m, o.bm) * ceil_div(q.n, o.bn) * q.l; }

// Estimated time of o, in units of 128x128-pingpong tile-steps per K element: waves of cluster
// tiles times the cluster tile's area (padding included) over the tile's relative rate.
double cost(const TileQuery& q, const TileOption& o, double rate) {
  const int64_t cluster = int64_t(o.cluster_m) * o.cluster_n;
  const int64_t cm = int64_t(o.bm) * o.cluster_m, cn = int64_t(o.bn) * o.cluster_n;
  const int64_t work = ceil_div(q.m, cm) * ceil_div(q.n, cn) * q.l;
  const int64_t resident = q.sms / cluster > 0 ? q.sms / cluster : 1;
  return double(ceil_div(work, resident)) * double(cm * cn) / rate;
}

}  // namespace

int choose_tile_index(const TileQuery& q, const TileOption* o, int count, double rate192, double rate256_long_k,
                      double rate256_mid_k, double rate256_short_k) {
  const int64_t sms = q.sms > 0 ? q.sms : 1;
  // 1. Small M·N.
  const int i64 = find(o, count, 128, 64, 1, 1, false);
  const int64_t mt = ceil_div(q.m, 128);
  const int64_t busy256 = mt * ceil_div(q.n, 256) * q.l, ctas64 = mt * ceil_div(q.n, 64) * q.l;
  if (i64 >= 0 && 4 * busy256 < 3 * sms && ctas64 > busy256) {
    const int i64m = find(o, count, 64, 128, 2, 1, false);
    const int64_t busy64m = ceil_div(q.m, 64) * ceil_div(q.n, 128) * q.l;
    return i64m >= 0 && busy64m >= ctas64 ? i64m : i64;
  }
  // 2. Pingpong with ≥ 4 tiles per SM; the cheaper of those that qualify, and from kShortK of
  // those and the cooperative 128x256 (no tile-count condition: it is the default). Below kLongK
  // 128x256 competes only where 128x192 pingpong qualifies, at the rate measured against it
  // (tile_rule.h, kRateCooperative256MidK / ShortK).
  const int i192 = q.k >= 1024 && rate192 > 0.0 ? find(o, count, 128, 192, 2, 1, true) : -1;
  const bool qualifies192 = i192 >= 0 && tiles(q, o[i192]) >= 4 * sms;
  const double rate256 = q.k >= kLongK                   ? rate256_long_k
                         : q.k >= kMidK && qualifies192   ? rate256_mid_k
                         : q.k >= kShortK && qualifies192 ? rate256_short_k
                                                          : 0.0;
  struct Candidate {
    int index;
    double rate;
    bool pingpong;
  };
  const Candidate cand[] = {{find(o, count, 128, 128, 2, 1, true), 1.0, true},
                            {i192, rate192, true},
                            {rate256 > 0.0 ? find(o, count, 128, 256, 2, 1, false) : -1, rate256, false}};
  int best = -1;
  double best_cost = 0.0;
  bool pingpong_qualifies = false;
  for (const Candidate& c : cand) {
    if (c.index < 0 || (c.pingpong && tiles(q, o[c.index]) < 4 * sms)) continue;
    pingpong_qualifies = pingpong_qualifies || c.pingpong;
    const double t = cost(q, o[c.index], c.rate);
    if (best < 0 || t < best_cost) best = c.index, best_cost = t;
  }
  if (pingpong_qualifies) return best;
  // 3. The default.
  return 0;
}

}  // namespace quack::detail
