// Launcher template of the simple forward path (rmsnorm_fwd_simple_kernel.cuh), instantiated
// once per x dtype and residual flag in rmsnorm_fwd_simple_{bf16,f16,f32}{,_res}.cu so the
// instances compile in parallel TUs (each under the 20 s budget): weight dtype (T or fp32) x
// every config of kSimpleFwdConfigs; _res: with a residual (in T, optional residual_out) (cluster configs launch (cluster, 1, 1) clusters).
#pragma once

#include <cstdio>
#include <mutex>
#include <utility>

#include "common/dispatch.h"
#include "common/launch.h"
#include "norm/norm_config.h"
#include "norm/rmsnorm_fwd_simple_kernel.cuh"

namespace quack::detail {

template <typename T, typename TW, bool kResidual, size_t kConfig>
void launch_rmsnorm_fwd_simple_config(const RmsNormFwdParams& p, cudaStream_t stream) {
  constexpr SimpleFwdConfig c = kSimpleFwdConfigs[kConfig];
  auto* const kernel =
      &rmsnorm_fwd_simple_kernel<T, TW, kResidual, c.tpr, c.rows, c.vecs, c.looped, c.cluster>;
  if constexpr (c.cluster > 1) {
    // A cluster the device cannot place at all (16 CTAs that each fill an SM need 16 SMs of
    // one GPC) would fail at launch: run the looped instance (same result) in its place.
    if (!cluster_fits(reinterpret_cast<const void*>(kernel), c.threads(), 0, c.cluster,
                      "rmsnorm_fwd")) {
      static std::once_flag note;  // say so once: benchmarks label the time with c.name
      std::call_once(note, [&] {
        std::fprintf(stderr, "quack: rmsnorm_fwd %s: the device cannot place a cluster of %d "
                     "CTAs; running %s instead\n", c.name, c.cluster,
                     kSimpleFwdConfigs[kSimpleFwdLoopedFallback].name);
      });
      launch_rmsnorm_fwd_simple_config<T, TW, kResidual, kSimpleFwdLoopedFallback>(p, stream);
      return;
    }
  }
  // Grid: one CTA per c.rows rows, times c.cluster CTAs per row ((c.cluster, 1, 1) clusters).
  launch(kernel, (p.g.rows + c.rows - 1) / c.rows * c.cluster, c.threads(), 0, c.cluster, stream,
         "rmsnorm_fwd", p);
}

template <typename T, typename TW, bool kResidual, size_t... kConfigs>
void launch_rmsnorm_fwd_simple_configs(const RmsNormFwdParams& p, int config, cudaStream_t stream,
                                       std::index_sequence<kConfigs...>) {
  ((config == static_cast<int>(kConfigs)
        ? launch_rmsnorm_fwd_simple_config<T, TW, kResidual, kConfigs>(p, stream)
        : void()),
   ...);
}

/// The instance for x dtype T, p's weight dtype, residual kResidual and `config` (host-checked:
/// rmsnorm.cpp's simple_path_config).
template <typename T, bool kResidual>
void launch_rmsnorm_fwd_simple_t(const RmsNormFwdParams& p, int config, cudaStream_t stream) {
  auto go = [&](auto tw) {
    using TW = typename decltype(tw)::type;
    launch_rmsnorm_fwd_simple_configs<T, TW, kResidual>(
        p, config, stream, std::make_index_sequence<kSimpleFwdConfigCount>{});
  };
  if constexpr (sizeof(T) == 4) go(Tag<float>{});
  else if (p.weight.dtype == DType::kFloat32) go(Tag<float>{});
  else go(Tag<T>{});
}

}  // namespace quack::detail
