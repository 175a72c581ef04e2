// Launcher template of the simple forward path (rmsnorm_fwd_simple_kernel.cuh), instantiated
// once per x dtype and residual flag in rmsnorm_fwd_simple_{bf16,f16,f32}{,_res}.cu so the
// instances compile in parallel TUs: weight dtype (T or fp32) x every config of
// kSimpleFwdConfigs; _res: with a residual (in T, with an optional residual_out).
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

/// The instance for x dtype T, residual present (kResidual), p's weight dtype and `config`
/// (host-checked: rmsnorm.cpp's simple_path_config).
template <typename T, bool kResidual>
void launch_rmsnorm_fwd_simple_t(const RmsNormFwdParams& p, int config, cudaStream_t stream) {
  auto go = [&](auto tw) {
    launch_rmsnorm_fwd_simple_configs<T, typename decltype(tw)::type, kResidual>(
        p, config, stream, std::make_index_sequence<kSimpleFwdConfigCount>{});
  };
  if constexpr (sizeof(T) == 4) go(Tag<float>{});
  else if (p.weight.dtype == DType::kFloat32) go(Tag<float>{});
  else go(Tag<T>{});
}

}  // namespace quack::detail
