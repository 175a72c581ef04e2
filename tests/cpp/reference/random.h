// Deterministic random test data (same numbers on every platform: splitmix64 + Box-Muller,
// no std::*_distribution, whose output is implementation-defined).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "half_host.h"

namespace quack::test {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in (0, 1).
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Standard normal (Box-Muller; the second value of each pair is kept for the next call).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = uniform(), u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1)), t = 6.283185307179586 * u2;
    spare_ = r * std::sin(t);
    has_spare_ = true;
    return r * std::cos(t);
  }

 private:
  uint64_t s_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

/// n values ~ N(mean, stddev^2), rounded to dtype `t`; never exactly 0 (resampled).
inline std::vector<double> random_values(Rng& rng, int64_t n, DType t, double mean = 0.0,
                                         double stddev = 1.0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& e : v) {
    do e = round_to(t, static_cast<float>(mean + stddev * rng.normal()));
    while (e == 0.0);
  }
  return v;
}

/// n values uniform in [lo, hi] rounded to `t`, never 0 (weights: e.g. [0.5, 1.5]).
inline std::vector<double> random_uniform(Rng& rng, int64_t n, DType t, double lo, double hi) {
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& e : v) {
    do e = round_to(t, static_cast<float>(rng.uniform(lo, hi)));
    while (e == 0.0);
  }
  return v;
}

/// Rounds every value to dtype `t` in place.
inline void round_all(DType t, std::vector<double>& v) {
  for (auto& e : v) e = round_to(t, e);
}

}  // namespace quack::test
