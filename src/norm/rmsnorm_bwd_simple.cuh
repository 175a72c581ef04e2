// Launcher template of the simple backward path (rmsnorm_bwd_simple_kernel.cuh), instantiated
// once per x dtype in rmsnorm_bwd_simple_{bf16,f16,f32}.cu so the instances compile in parallel
// TUs: weight (absent, T or fp32) x every config of kSimpleBwdConfigs.
#pragma once

#include <utility>

#include "common/dispatch.h"
#include "common/launch.h"
#include "norm/norm_config.h"
#include "norm/rmsnorm_bwd_simple_kernel.cuh"

namespace quack::detail {

// Calls f(kernel, config) with the instance for (T, TW, kWeight) and config kConfig.
template <typename T, typename TW, bool kWeight, size_t... kConfigs, typename F>
void with_bwd_simple_config(int config, std::index_sequence<kConfigs...>, F&& f) {
  ((config == static_cast<int>(kConfigs)
        ? f(rmsnorm_bwd_simple_kernel<T, TW, kWeight, kSimpleBwdConfigs[kConfigs].tpr,
                                      kSimpleBwdConfigs[kConfigs].vecs,
                                      kSimpleBwdConfigs[kConfigs].prefetch>)
        : void()),
   ...);
}

// Calls f(kernel) with the instance for x dtype T, p's weight (absent, T or fp32) and config.
template <typename T, typename F>
void with_bwd_simple_kernel(const RmsNormBwdParams& p, int config, F&& f) {
  const auto seq = std::make_index_sequence<kSimpleBwdConfigCount>{};
  if (!p.weight.ptr)
    with_bwd_simple_config<T, T, false>(config, seq, f);
  else if (sizeof(T) == 4 || p.weight.dtype == DType::kFloat32)
    with_bwd_simple_config<T, float, true>(config, seq, f);
  else
    with_bwd_simple_config<T, T, true>(config, seq, f);
}

inline size_t bwd_simple_smem(const RmsNormBwdParams& p, int config, int elt_bytes) {
  const SimpleBwdConfig& c = kSimpleBwdConfigs[config];
  const int acc = (p.dweight_part ? 1 : 0) + (p.dbias_part ? 1 : 0);
  return rmsnorm_bwd_simple_smem(c.tpr, c.vecs, elt_bytes, acc);
}

template <typename T>
int64_t rmsnorm_bwd_simple_resident_t(const RmsNormBwdParams& p, int config, int accumulators,
                                      int device) {
  const SimpleBwdConfig& c = kSimpleBwdConfigs[config];
  const size_t smem = rmsnorm_bwd_simple_smem(c.tpr, c.vecs, sizeof(T), accumulators);
  int64_t resident = 0;
  with_bwd_simple_kernel<T>(p, config, [&](auto kernel) {
    resident = max_resident(reinterpret_cast<const void*>(kernel), c.tpr, smem, 1, device,
                            "rmsnorm_bwd");
  });
  return resident;
}

template <typename T>
void launch_rmsnorm_bwd_simple_t(const RmsNormBwdParams& p, int config, int rows_per_cta,
                                 int64_t grid, cudaStream_t stream) {
  const SimpleBwdConfig& c = kSimpleBwdConfigs[config];
  with_bwd_simple_kernel<T>(p, config, [&](auto kernel) {
    launch(kernel, grid, c.tpr, bwd_simple_smem(p, config, sizeof(T)), 1, stream, "rmsnorm_bwd",
           p, rows_per_cta);
  });
}

}  // namespace quack::detail
