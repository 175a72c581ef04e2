// Launcher template of the simple forward path (rmsnorm_fwd_simple_kernel.cuh), instantiated
// once per x dtype and residual flag in rmsnorm_fwd_simple_{bf16,f16,f32}{,_res}.cu so the
// instances compile in parallel TUs: weight dtype (T or fp32) x every config of
// kSimpleFwdConfigs; _res: with a residual (in T, with an optional residual_out).
#pragma once

#include <algorithm>
#include <utility>

#include "common/dispatch.h"
#include "common/launch.h"
#include "norm/norm_config.h"
#include "norm/rmsnorm_fwd_prefetch_kernel.cuh"
#include "norm/rmsnorm_fwd_simple_kernel.cuh"

namespace quack::detail {

// Persistent grid of the prefetch kernel: as many clusters of ceil(N / slice) CTAs as fit the
// device at once (at most one per row).
template <typename T, typename TW, size_t kConfig>
void launch_rmsnorm_fwd_prefetch(const RmsNormFwdParams& p, int device, cudaStream_t stream) {
  constexpr SimpleFwdConfig c = kSimpleFwdConfigs[kConfig];
  constexpr auto kernel = rmsnorm_fwd_prefetch_kernel<T, TW, c.tpr, c.vecs>;
  constexpr size_t smem = PrefetchFwdSmem<c.tpr, c.vecs>::kBytes;
  const int64_t slice = c.slice_bytes() / sizeof(T);  // elements
  RmsNormFwdParams q = p;
  q.g.cluster_n = static_cast<int>((p.g.cols + slice - 1) / slice);  // ≤ 8: host-checked
  const int64_t clusters = std::min<int64_t>(
      p.g.rows, max_resident(reinterpret_cast<const void*>(kernel), c.tpr, smem, q.g.cluster_n,
                             device, "rmsnorm_fwd"));
  launch(kernel, clusters * q.g.cluster_n, c.tpr, smem, q.g.cluster_n, stream, "rmsnorm_fwd", q);
}

template <typename T, typename TW, bool kResidual, size_t kConfig>
void launch_rmsnorm_fwd_simple_config(const RmsNormFwdParams& p, int device,
                                      cudaStream_t stream) {
  constexpr SimpleFwdConfig c = kSimpleFwdConfigs[kConfig];
  if constexpr (c.no_residual && kResidual) {
    // never chosen (simple_fwd_config_fits): not compiled
  } else if constexpr (c.prefetch) {
    launch_rmsnorm_fwd_prefetch<T, TW, kConfig>(p, device, stream);
  } else {
    launch(rmsnorm_fwd_simple_kernel<T, TW, kResidual, c.tpr, c.rows, c.vecs, c.looped>,
           (p.g.rows + c.rows - 1) / c.rows, c.threads(), 0, 1, stream, "rmsnorm_fwd", p);
  }
}

template <typename T, typename TW, bool kResidual, size_t... kConfigs>
void launch_rmsnorm_fwd_simple_configs(const RmsNormFwdParams& p, int config, int device,
                                       cudaStream_t stream, std::index_sequence<kConfigs...>) {
  ((config == static_cast<int>(kConfigs)
        ? launch_rmsnorm_fwd_simple_config<T, TW, kResidual, kConfigs>(p, device, stream)
        : void()),
   ...);
}

/// The instance for x dtype T, residual present (kResidual), p's weight dtype and `config`
/// (host-checked: rmsnorm.cpp's simple_path_config).
template <typename T, bool kResidual>
void launch_rmsnorm_fwd_simple_t(const RmsNormFwdParams& p, int config, int device,
                                 cudaStream_t stream) {
  auto go = [&](auto tw) {
    launch_rmsnorm_fwd_simple_configs<T, typename decltype(tw)::type, kResidual>(
        p, config, device, stream, std::make_index_sequence<kSimpleFwdConfigCount>{});
  };
  if constexpr (sizeof(T) == 4) go(Tag<float>{});
  else if (p.weight.dtype == DType::kFloat32) go(Tag<float>{});
  else go(Tag<T>{});
}

}  // namespace quack::detail
