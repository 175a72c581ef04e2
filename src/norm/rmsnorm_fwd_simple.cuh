// Launcher template of the simple forward path (rmsnorm_fwd_simple_kernel.cuh), instantiated
// once per x dtype in rmsnorm_fwd_simple_{bf16,f16,f32}.cu so the instances compile in parallel
// TUs: weight dtype (T or fp32) x residual (absent, or T with an optional residual_out) x every
// config of kSimpleFwdConfigs.
#pragma once

#include <utility>

#include "common/dispatch.h"
#include "common/launch.h"
#include "norm/norm_config.h"
#include "norm/rmsnorm_fwd_simple_kernel.cuh"

namespace quack::detail {

template <typename T, typename TW, bool kResidual, size_t kConfig>
void launch_rmsnorm_fwd_simple_config(const RmsNormFwdParams& p, cudaStream_t stream) {
  constexpr SimpleFwdConfig c = kSimpleFwdConfigs[kConfig];
  launch(rmsnorm_fwd_simple_kernel<T, TW, kResidual, c.tpr, c.rows, c.vecs, c.looped>,
         (p.g.rows + c.rows - 1) / c.rows, c.threads(), 0, 1, stream, "rmsnorm_fwd", p);
}

template <typename T, typename TW, bool kResidual, size_t... kConfigs>
void launch_rmsnorm_fwd_simple_configs(const RmsNormFwdParams& p, int config, cudaStream_t stream,
                                       std::index_sequence<kConfigs...>) {
  ((config == static_cast<int>(kConfigs)
        ? launch_rmsnorm_fwd_simple_config<T, TW, kResidual, kConfigs>(p, stream)
        : void()),
   ...);
}

/// The instance for x dtype T, p's weight dtype and residual, and `config` (host-checked:
/// rmsnorm.cpp's simple_path_config).
template <typename T>
void launch_rmsnorm_fwd_simple_t(const RmsNormFwdParams& p, int config, cudaStream_t stream) {
  const bool w32 = p.weight.dtype == DType::kFloat32;
  auto go = [&](auto tw, auto residual) {
    using TW = typename decltype(tw)::type;
    launch_rmsnorm_fwd_simple_configs<T, TW, decltype(residual)::value>(
        p, config, stream, std::make_index_sequence<kSimpleFwdConfigCount>{});
  };
  dispatch_bool(p.residual.ptr != nullptr, [&](auto residual) {
    if constexpr (sizeof(T) == 4) go(Tag<float>{}, residual);
    else if (w32) go(Tag<float>{}, residual);
    else go(Tag<T>{}, residual);
  });
}

}  // namespace quack::detail
