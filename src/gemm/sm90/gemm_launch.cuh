// Host launcher of the Hopper GEMM kernel (compiled in the instance TUs, which see CuTe):
// TMA descriptors from the GemmProblem, the persistent grid, the launch with 2x1 / 1x2 clusters.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/launch.h"
#include "gemm/gemm_problem.h"
#include "gemm/sm90/gemm_kernel.cuh"
#include "gemm/tile_scheduler.h"

namespace quack::detail::sm90 {

/// Runs D = epi(A·B, C) for a validated problem (m, n, k ≥ 1) on `stream` (current device =
/// p.device). Epilogue: LinearCombination{alpha, beta}. p.a_major / p.b_major must be the
/// instance's (Cfg::kMajorA / kMajorB; the dispatch in gemm.cpp picks the instance by them).
template <class Cfg>
void run_gemm(const GemmProblem& p, cudaStream_t stream, const char* where) {
  using TA = typename Cfg::ElementAB;
  using TD = typename Cfg::ElementD;
  using TC = typename Cfg::ElementC;
  const int M = p.m, N = p.n, K = p.k, L = p.l;
  constexpr GemmMajor kA = Cfg::kMajorA == GMMA::Major::K ? GemmMajor::kK : GemmMajor::kMN;
  constexpr GemmMajor kB = Cfg::kMajorB == GMMA::Major::K ? GemmMajor::kK : GemmMajor::kMN;
  if (p.a_major != kA || p.b_major != kB)
    throw std::logic_error(std::string(where) + ": internal error: the problem's operand majors do not match the instance");
  // Global tensors; strides in elements (64-bit), unit strides static.
  // A and B: stride 1 along K (K-major) or along M / N (MN-major), as the instance was built.
  auto operand_stride = [](auto major, int64_t ld, int64_t batch) {
    if constexpr (decltype(major)::value == GMMA::Major::K)
      return make_stride(ld, _1{}, batch);
    else
      return make_stride(_1{}, ld, batch);
  };
  auto gA = make_tensor(make_gmem_ptr(static_cast<TA const*>(p.a)),
                        make_layout(make_shape(M, K, L), operand_stride(std::integral_constant<GMMA::Major, Cfg::kMajorA>{},
                                                                        p.lda, p.batch_a)));  // (M,K,L)
  auto gB = make_tensor(make_gmem_ptr(static_cast<TA const*>(p.b)),
                        make_layout(make_shape(N, K, L), operand_stride(std::integral_constant<GMMA::Major, Cfg::kMajorB>{},
                                                                        p.ldb, p.batch_b)));  // (N,K,L)
  // Without C the C descriptor points at D (never read: the kernel branches on load_c), with
  // D's byte strides in C elements (16-byte multiples either way: a valid descriptor).
  const bool load_c = p.c != nullptr && (p.beta != 0.f || p.beta_dev != nullptr);
  const int64_t d_as_c = int64_t(sizeof(TD)), c_size = int64_t(sizeof(TC));
  auto gC = make_tensor(make_gmem_ptr(static_cast<TC const*>(load_c ? p.c : p.d)),
                        make_layout(make_shape(M, N, L),
                                    make_stride(load_c ? p.ldc : p.ldd * d_as_c / c_size, _1{},
                                                load_c ? p.batch_c : p.batch_d * d_as_c / c_size)));  // (M,N,L)
  auto gD = make_tensor(make_gmem_ptr(static_cast<TD*>(p.d)),
                        make_layout(make_shape(M, N, L), make_stride(p.ldd, _1{}, p.batch_d)));  // (M,N,L)
  // A: multicast to both CTAs of a 1x2 cluster, B to both of a 2x1 cluster (each CTA loads half
  // of the box); a plain load otherwise.
  using TmaLoadA = conditional_t<Cfg::kClusterN == 1, SM90_TMA_LOAD, SM90_TMA_LOAD_MULTICAST>;
  auto tma_a = make_tma_copy(TmaLoadA{}, gA, typename Cfg::SmemLayoutA{}(_, _, 0),
                             make_shape(Int<Cfg::BM>{}, Int<Cfg::BK>{}), Int<Cfg::kClusterN>{});
  using TmaLoadB = conditional_t<Cfg::kClusterM == 1, SM90_TMA_LOAD, SM90_TMA_LOAD_MULTICAST>;
  auto tma_b = make_tma_copy(TmaLoadB{}, gB, typename Cfg::SmemLayoutB{}(_, _, 0),
                             make_shape(Int<Cfg::BN>{}, Int<Cfg::BK>{}), Int<Cfg::kClusterM>{});
  auto tma_c = make_tma_copy(SM90_TMA_LOAD{}, gC, typename Cfg::SmemLayoutC{}(_, _, 0), typename Cfg::EpiTile{}, _1{});
  auto tma_d = make_tma_copy(SM90_TMA_STORE{}, gD, typename Cfg::SmemLayoutD{}(_, _, 0), typename Cfg::EpiTile{}, _1{});

  using P = Params<decltype(tma_a), decltype(tma_b), decltype(tma_c), decltype(tma_d), LinearCombination>;
  const bool d_tail_manual = (int64_t(N) * int64_t(sizeof(TD))) % 16 != 0;
  P params{tma_a, tma_b, tma_c, tma_d, M, N, K, L, p.d, p.ldd, p.batch_d, d_tail_manual,
           LinearCombination{p.alpha, load_c ? p.beta : 0.f}, load_c, p.alpha_dev, p.beta_dev,
           TileScheduler::make(M, N, L, Cfg::BM, Cfg::BN, Cfg::kClusterM, Cfg::kClusterN, Cfg::kGroup, false),
           p.tile_counter};
  // The dynamic scheduler counts work in 32-bit atomics: beyond 2^31 - 1 cluster tiles (far past
  // any real problem) the static schedule runs instead. It also needs a cluster launch: its
  // st.async / mapa exchange raised "illegal instruction" in a launch without clusters (H200,
  // 1d1e1ff, 128x64c1), so the cluster-less instances run the static schedule.
  if (params.sched.tiles() > int64_t(INT32_MAX) || Cfg::kClusterSize == 1) params.tile_counter = nullptr;

  auto kernel = &gemm_kernel<Cfg, P>;
  const size_t smem = sizeof(typename Cfg::SharedStorage);
  // Persistent grid: one cluster per work tile, at most as many clusters as fit at once.
  const int64_t fit = max_resident(reinterpret_cast<const void*>(kernel), Cfg::kThreads, smem, Cfg::kClusterSize,
                                   p.device, where);
  const int64_t clusters = std::max<int64_t>(1, std::min<int64_t>(params.sched.tiles(), fit));
  void* args[] = {&params};
  launch_kernel(reinterpret_cast<const void*>(kernel), args, clusters * Cfg::kClusterSize, Cfg::kThreads, smem,
                Cfg::kClusterSize, stream, where);
}

}  // namespace quack::detail::sm90
