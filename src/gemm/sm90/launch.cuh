// Host launcher of the Hopper GEMM kernel (compiled in the instance TUs, which see CuTe): the
// collectives' parameters (TMA descriptors) from the GemmProblem, the persistent grid, the launch
// with 2x1 / 1x2 clusters, and the stream-K schedule where the problem asks for it (cooperative
// tiles). Each instance TU (generated from src/gemm/sm90/instances.txt) calls run_gemm with its
// tile configuration, visitor and dtypes.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/launch.h"
#include "gemm/gemm_problem.h"
#include "gemm/sm90/kernel.cuh"
#include "gemm/streamk.h"
#include "gemm/tile_scheduler.h"

namespace quack::detail::sm90 {

/// Runs the GEMM of tile configuration Tile with visitor Op (output dtypes ElementD and, for a
/// second output, ElementD1; C's dtype ElementC, void: D's) for a validated problem (m, n, k ≥ 1)
/// on `stream` (current device = p.device). p.a_major / p.b_major must be the instance's
/// (Tile::kMajorA / kMajorB; the dispatch in gemm.cpp picks the instance by them).
template <class Tile, class Op, class ElementD, class ElementC = void, class ElementD1 = void>
void run_gemm(const GemmProblem& p, cudaStream_t stream, const char* where) {
  using Epilogue = CollectiveEpilogue<Tile, Op, ElementD, ElementC, ElementD1>;
  using Kernel = GemmKernel<Tile, Epilogue>;
  using Mainloop = typename Kernel::Mainloop;
  constexpr GemmMajor kA = Tile::kMajorA == GMMA::Major::K ? GemmMajor::kK : GemmMajor::kMN;
  constexpr GemmMajor kB = Tile::kMajorB == GMMA::Major::K ? GemmMajor::kK : GemmMajor::kMN;
  if (p.a_major != kA || p.b_major != kB)
    throw std::logic_error(std::string(where) + ": internal error: the problem's operand majors do not match the instance");
  const int M = p.m, N = p.n, K = p.k, L = p.l;

  auto mainloop = Mainloop::make_params(p);
  auto epilogue = Epilogue::make_params(p);
  using P = KernelParams<decltype(mainloop), decltype(epilogue)>;
  const int group = p.raster_group > 0 ? p.raster_group : Tile::kGroup;
  const bool raster_n =
      p.raster == 1 || (p.raster == 2 && TileScheduler::heuristic_raster_n(M, N, Tile::BM, Tile::BN, Tile::kClusterM,
                                                                           Tile::kClusterN, group));
  P params{mainloop, epilogue, M, N, K, L,
           TileScheduler::make(M, N, L, Tile::BM, Tile::BN, Tile::kClusterM, Tile::kClusterN, group, raster_n,
                               p.serpentine),
           p.tile_counter, 0, StreamKParams{}};
  params.num_work = params.sched.tiles();
  // The dynamic scheduler counts work in 32-bit atomics: beyond 2^31 - 1 cluster tiles (far past
  // any real problem) the static schedule runs instead. It also needs a cluster launch: its
  // st.async / mapa exchange raises "illegal instruction" in a launch without clusters (H200,
  // 128x64c1), so the cluster-less instances run the static schedule.
  if (params.sched.tiles() > int64_t(INT32_MAX) || Tile::kClusterSize == 1) params.tile_counter = nullptr;

  // The visitor's specialised copies and its generic path as two kernels (Epilogue::kSplitPaths,
  // epilogue_variants.cuh EpiPaths): the one this launch runs; else the kernel with both.
  auto kernel = [&] {
    if constexpr (Epilogue::kSplitPaths) {
      using KernelCopies = GemmKernel<EpiPaths<Tile, 1>, CollectiveEpilogue<EpiPaths<Tile, 1>, Op, ElementD, ElementC, ElementD1>>;
      using KernelGeneric = GemmKernel<EpiPaths<Tile, 2>, CollectiveEpilogue<EpiPaths<Tile, 2>, Op, ElementD, ElementC, ElementD1>>;
      static_assert(sizeof(typename KernelCopies::SharedStorage) == sizeof(typename Kernel::SharedStorage) &&
                        sizeof(typename KernelGeneric::SharedStorage) == sizeof(typename Kernel::SharedStorage) &&
                        KernelCopies::Stages == Kernel::Stages && KernelGeneric::Stages == Kernel::Stages,
                    "the two kernels keep the instance's shared memory and mainloop stages");
      return Epilogue::specialized_launch(params.epilogue) ? &gemm_kernel<KernelCopies, P> : &gemm_kernel<KernelGeneric, P>;
    } else {
      return &gemm_kernel<Kernel, P>;
    }
  }();
  const size_t smem = sizeof(typename Kernel::SharedStorage);
  // Persistent grid: one cluster per work tile, at most as many clusters as fit at once.
  const int64_t fit = max_resident(reinterpret_cast<const void*>(kernel), Tile::kThreads, smem, Tile::kClusterSize,
                                   p.device, where);
  int64_t clusters = std::max<int64_t>(1, std::min<int64_t>(params.sched.tiles(), fit));
  // Stream-K (cooperative tiles): the hybrid schedule over the same clusters (fewer when the split
  // tiles are all there is and they give fewer units), the static order for its data-parallel
  // tiles (the tile counter is left out).
  if (Tile::kStreamK && p.streamk != kStreamKOff && p.streamk_ws != nullptr) {
    const int64_t k_tiles = (int64_t(K) + Tile::BK - 1) / Tile::BK;
    const StreamKSchedule s = StreamKSchedule::make(params.sched.tiles(), k_tiles, std::max<int64_t>(fit, 1),
                                                    p.streamk == kStreamKForce);
    if (s.active()) {
      const int64_t ctas = s.units * Tile::kClusterSize;
      const int64_t slot = int64_t(Tile::BM) * Tile::BN * 4;
      if (ctas * 4 > p.streamk_flag_bytes || p.streamk_flag_bytes + ctas * slot > p.streamk_ws_bytes)
        throw std::logic_error(std::string(where) + ": internal error: the stream-K workspace (" +
                               std::to_string(p.streamk_ws_bytes) + " bytes) is too small for " +
                               std::to_string(ctas) + " CTAs of " + std::to_string(slot) + " bytes");
      params.sk.sched = s;
      params.sk.flags = static_cast<uint32_t*>(p.streamk_ws);
      params.sk.partials = reinterpret_cast<float4*>(static_cast<char*>(p.streamk_ws) + p.streamk_flag_bytes);
      params.tile_counter = nullptr;
      clusters = s.clusters;
    }
  }
  void* args[] = {&params};
  launch_kernel(reinterpret_cast<const void*>(kernel), args, clusters * Tile::kClusterSize, Tile::kThreads, smem,
                Tile::kClusterSize, stream, where);
}

}  // namespace quack::detail::sm90
