// Kernel parameters of RMSNorm (plain data, host and device). Built by rmsnorm.cpp after
// validation; optional operands have ptr == nullptr.
#pragma once

#include <cuda_runtime_api.h>

#include "common/row_geometry.h"
#include "common/row_io.h"

namespace quack::detail {

struct RmsNormFwdParams {
  RowGeometry g;
  RowIO x, residual, out, residual_out;  // (M, N)
  RowIO weight, bias;                    // (N): row_stride 0
  float* rstd = nullptr;                 // (M)
  int64_t rstd_stride = 1;
  float eps = 1e-6f;
  float inv_n = 1.f;
};

struct RmsNormBwdParams {
  RowGeometry g;
  RowIO x, dout, dresidual_out, dx, dresidual;  // (M, N)
  RowIO weight;                                 // (N)
  const float* rstd = nullptr;                  // (M)
  int64_t rstd_stride = 1;
  float* dweight_part = nullptr;  // (P, N) per-cluster partial sums, P = clusters in the grid
  float* dbias_part = nullptr;    // (P, N)
  float inv_n = 1.f;
};

/// Dynamic shared memory of the vector-path kernels for p (the host falls back to the general
/// path when it passes kMaxSmemPerCta).
constexpr size_t kMaxSmemPerCta = 227 * 1024;
size_t rmsnorm_fwd_smem(const RmsNormFwdParams& p);
size_t rmsnorm_bwd_smem(const RmsNormBwdParams& p);

/// Launchers, one per direction; pick the instance for (x dtype, vector path, accumulators).
void launch_rmsnorm_fwd(const RmsNormFwdParams& p, bool vec_path, int device,
                        cudaStream_t stream);

/// Simple path (rmsnorm_fwd_simple_kernel.cuh): instance `config` of kSimpleFwdConfigs for
/// x's dtype, the weight's dtype and the residual (host-checked by rmsnorm.cpp). Defined per x
/// dtype T and residual flag in rmsnorm_fwd_simple_<dtype>{,_res}.cu; launch_rmsnorm_fwd_simple
/// dispatches on both.
/// `device`: x's device (current; the prefetch instances size their persistent grid for it).
template <typename T, bool kResidual>
void launch_rmsnorm_fwd_simple_t(const RmsNormFwdParams& p, int config, int device,
                                 cudaStream_t stream);
void launch_rmsnorm_fwd_simple(const RmsNormFwdParams& p, int config, int device,
                               cudaStream_t stream);

/// Every backward kernel's type; the vector-path instances for x dtype T without and with dbias
/// (defined per dtype in rmsnorm_bwd_{bf16,f16,f32}{,_dbias}.cu; rmsnorm_bwd_vec.cuh).
using RmsNormBwdKernel = void (*)(RmsNormBwdParams);
template <typename T>
RmsNormBwdKernel rmsnorm_bwd_vec_kernel_t(bool has_dw, bool plain);
template <typename T>
RmsNormBwdKernel rmsnorm_bwd_vec_dbias_kernel_t(bool has_dw);

/// Whether the backward takes a "plain" instance for p (dout and dx in x's dtype, no residual
/// gradients, no dbias; QUACK_RMSNORM_BWD_PLAIN=0 turns them off).
bool rmsnorm_bwd_plain(const RmsNormBwdParams& p, bool has_db);

/// Persistent CTAs (or clusters) the backward launches for this geometry; P of the partials.
int64_t rmsnorm_bwd_grid(const RmsNormBwdParams& p, bool vec_path, bool has_dw, bool has_db,
                         int device);
void launch_rmsnorm_bwd(const RmsNormBwdParams& p, bool vec_path, int64_t grid,
                        cudaStream_t stream);

}  // namespace quack::detail
