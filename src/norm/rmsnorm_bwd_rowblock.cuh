// Launcher templates of the row-block backward (rmsnorm_bwd_rowblock_kernel.cuh), instantiated
// once per (x dtype, weight: absent / x's dtype / fp32) in rmsnorm_bwd_rowblock_<x>_<w>.cu, so
// each TU holds ≤ 2 x kRowBlockBwdConfigCount kernels (dbias or not, every config whose
// registers fit: rowblock_bwd_compiles).
#pragma once

#include <string>
#include <utility>

#include "common/launch.h"
#include "norm/norm_config.h"
#include "norm/rmsnorm_bwd_rowblock_kernel.cuh"
#include "quack/errors.h"

namespace quack::detail {

template <typename T, typename TW, bool kWeight, bool kDb, size_t kConfig>
void launch_rmsnorm_bwd_rowblock_config(const RmsNormBwdParams& p, const RowBlockBwdGrid& g,
                                        cudaStream_t stream) {
  constexpr RowBlockBwdConfig c = kRowBlockBwdConfigs[kConfig];
  using Traits = RowBlockBwdTraits<T, TW, kWeight, kDb, c.tpr, c.vecs, c.prefetch>;
  if constexpr (!Traits::kCompiles) {
    // rmsnorm.cpp checks rowblock_bwd_config_fits first: reaching this is a bug.
    throw InvalidArgument(std::string("rmsnorm_bwd: row-block instance ") + c.name +
                          " is not compiled for this x dtype and accumulators");
  } else {
    const int parts = (p.dweight_part ? 1 : 0) + (p.dbias_part ? 1 : 0);
    // cluster > 1: the CTAs meet in shared memory, (partials written, N) fp32.
    const size_t smem = g.cluster > 1 ? static_cast<size_t>(parts) * p.g.cols * sizeof(float) : 0;
    launch(rmsnorm_bwd_rowblock_kernel<T, TW, kWeight, kDb, c.tpr, c.vecs, c.prefetch>, g.ctas,
           c.tpr, smem, g.cluster, stream, "rmsnorm_bwd", p, g.rows_per_cta, g.cluster);
  }
}

template <typename T, typename TW, bool kWeight, bool kDb, size_t... kConfigs>
void launch_rmsnorm_bwd_rowblock_configs(const RmsNormBwdParams& p, int config,
                                         const RowBlockBwdGrid& g, cudaStream_t stream,
                                         std::index_sequence<kConfigs...>) {
  ((config == static_cast<int>(kConfigs)
        ? launch_rmsnorm_bwd_rowblock_config<T, TW, kWeight, kDb, kConfigs>(p, g, stream)
        : void()),
   ...);
}

/// Launches instance `config` of kRowBlockBwdConfigs for x dtype T and weight (TW, kWeight),
/// with dbias sums when p.dbias_part is set; grid g (rowblock_bwd_grid).
template <typename T, typename TW, bool kWeight>
void launch_rmsnorm_bwd_rowblock_w(const RmsNormBwdParams& p, int config,
                                   const RowBlockBwdGrid& g, cudaStream_t stream) {
  constexpr auto kAll = std::make_index_sequence<kRowBlockBwdConfigCount>{};
  if (p.dbias_part)
    launch_rmsnorm_bwd_rowblock_configs<T, TW, kWeight, true>(p, config, g, stream, kAll);
  else
    launch_rmsnorm_bwd_rowblock_configs<T, TW, kWeight, false>(p, config, g, stream, kAll);
}

}  // namespace quack::detail
