// Tile parameters of the fused-epilogue GPU tests (test_gemm_act.cpp, test_gemm_gated.cpp): the
// QUACK_GEMM_TILE_N value each instantiation forces, its name, and whether an instance of that
// tile is compiled for the epilogues under test (a tile not compiled would silently rerun the
// group's default, so those cases would skip instead; every bf16 group under test has all three).
#pragma once

#include <initializer_list>
#include <string>

#include "gemm/gemm_instances.h"

namespace quack::test {

/// The QUACK_GEMM_TILE_N values of the tile instantiations: cooperative 128x256, pingpong
/// 128x128, pingpong 128x192.
inline constexpr const char* kFusedTiles[] = {"256", "128", "192"};

/// The instantiation's name of a QUACK_GEMM_TILE_N value.
inline std::string fused_tile_name(const char* key) {
  const std::string k(key);
  return k == "256" ? "Coop128x256" : k == "128" ? "Pingpong128x128" : "Pingpong128x192";
}

/// Whether the bf16 instance of tile key `key` (QUACK_GEMM_TILE_N) is compiled for any of
/// `epilogues` (the default 128x256 always is): the tile's fields, any epilogue buffer split;
/// A/B candidates (instances_ab.txt) do not count, since a key never selects one (gemm.cpp).
inline bool fused_tile_compiled(const char* key, std::initializer_list<detail::GemmEpilogue> epilogues) {
  const std::string k(key);
  const int bn = k == "256" ? 256 : k == "128" ? 128 : 192;
  const bool pingpong = k != "256";
  for (const detail::GemmInstance& i : detail::kGemmInstances)
    for (detail::GemmEpilogue e : epilogues)
      if (i.epilogue == e && i.ab == DType::kBFloat16 && !i.candidate && i.bm == 128 && i.bn == bn &&
          i.pingpong == pingpong && i.cluster_m == 2 && i.cluster_n == 1)
        return true;
  return false;
}

}  // namespace quack::test
