// Launcher templates of the simple backward path (rmsnorm_bwd_simple_kernel.cuh), instantiated
// once per (x dtype, weight: x's dtype / fp32 / absent) in rmsnorm_bwd_simple_<x>[_<w>].cu so
// the instances compile in parallel TUs of ≤ 8 kernels: every config of kSimpleBwdConfigs.
#pragma once

#include <utility>

#include "common/launch.h"
#include "norm/norm_config.h"
#include "norm/rmsnorm_bwd_simple_kernel.cuh"

namespace quack::detail {

// Calls f(kernel) with the instance of (T, TW, kWeight) for entry `config` of kSimpleBwdConfigs.
template <typename T, typename TW, bool kWeight, size_t... kConfigs, typename F>
void with_bwd_simple_config(int config, std::index_sequence<kConfigs...>, F&& f) {
  ((config == static_cast<int>(kConfigs)
        ? f(rmsnorm_bwd_simple_kernel<T, TW, kWeight, kSimpleBwdConfigs[kConfigs].tpr,
                                      kSimpleBwdConfigs[kConfigs].vecs,
                                      kSimpleBwdConfigs[kConfigs].prefetch>)
        : void()),
   ...);
}

inline size_t bwd_simple_smem(const RmsNormBwdParams& p, int config, int elt_bytes) {
  const SimpleBwdConfig& c = kSimpleBwdConfigs[config];
  const int acc = (p.dweight_part ? 1 : 0) + (p.dbias_part ? 1 : 0);
  return rmsnorm_bwd_simple_smem(c.tpr, c.vecs, elt_bytes, acc);
}

template <typename T, typename TW, bool kWeight>
int64_t rmsnorm_bwd_simple_resident_w(const RmsNormBwdParams& p, int config, int accumulators,
                                      int device) {
  (void)p;
  const SimpleBwdConfig& c = kSimpleBwdConfigs[config];
  const size_t smem = rmsnorm_bwd_simple_smem(c.tpr, c.vecs, sizeof(T), accumulators);
  int64_t resident = 0;
  with_bwd_simple_config<T, TW, kWeight>(
      config, std::make_index_sequence<kSimpleBwdConfigCount>{}, [&](auto kernel) {
        resident = max_resident(reinterpret_cast<const void*>(kernel), c.tpr, smem, 1, device,
                                "rmsnorm_bwd");
      });
  return resident;
}

template <typename T, typename TW, bool kWeight>
void launch_rmsnorm_bwd_simple_w(const RmsNormBwdParams& p, int config, int rows_per_cta,
                                 int64_t grid, cudaStream_t stream) {
  const SimpleBwdConfig& c = kSimpleBwdConfigs[config];
  with_bwd_simple_config<T, TW, kWeight>(
      config, std::make_index_sequence<kSimpleBwdConfigCount>{}, [&](auto kernel) {
        launch(kernel, grid, c.tpr, bwd_simple_smem(p, config, sizeof(T)), 1, stream,
               "rmsnorm_bwd", p, rows_per_cta);
      });
}

}  // namespace quack::detail
