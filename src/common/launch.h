// Launch helper for row kernels (host side): device guard, cluster dims, large dynamic shared
// memory, non-portable cluster sizes, error check with CUDA's text kept.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "quack/errors.h"

namespace quack::detail {

/// Throws CudaError("<where>: <call> failed: <CUDA text>") when `err` is not cudaSuccess.
void check_cuda(cudaError_t err, const char* where, const char* call);

/// Sets the current device to `device` for the guard's lifetime and makes its primary context
/// current on the calling thread (needed by driver calls on threads new to CUDA). Throws, naming
/// `fn` (the public function): InvalidArgument for an index at or past the count of devices this
/// process sees, CudaError for another failure (e.g. no driver).
class DeviceGuard {
 public:
  DeviceGuard(int device, const char* fn);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

/// Multiprocessor count of `device` (cached).
int sm_count(int device);

/// Raises the kernel's dynamic shared memory limit and allows cluster sizes > 8 when needed
/// (once per kernel and value), then launches grid x block with (cluster_n, 1, 1) clusters.
void launch_kernel(const void* kernel, void** args, int64_t grid, int block, size_t smem,
                   int cluster_n, cudaStream_t stream, const char* where);

/// Resident CTAs (cluster_n == 1) or clusters per device for a persistent launch.
int64_t max_resident(const void* kernel, int block, size_t smem, int cluster_n, int device,
                     const char* where);

template <typename T> struct NoDeduce { using type = T; };

/// Typed front of launch_kernel: arguments convert to the kernel's parameter types.
template <typename... Args>
void launch(void (*kernel)(Args...), int64_t grid, int block, size_t smem, int cluster_n,
            cudaStream_t stream, const char* where, typename NoDeduce<Args>::type... args) {
  void* ptrs[] = {static_cast<void*>(&args)...};
  launch_kernel(reinterpret_cast<const void*>(kernel), ptrs, grid, block, smem, cluster_n,
                stream, where);
}

}  // namespace quack::detail
