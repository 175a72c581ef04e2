// Host side of programmatic dependent launch (common/pdl.cuh has the device side): launching a
// kernel that may start before the kernel ahead of it on the stream has finished.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/launch.h"

namespace quack::detail {

/// Whether launch_dependent launches programmatically: yes unless QUACK_PDL=0 in the
/// environment (read at each launch: tests switch it; a CUDA graph keeps the value read at its
/// capture). The serial launch is the control: run AV (H100, 16384 x 4096 bf16) read RMSNorm /
/// LayerNorm bwd 0.4 / 0.9 % faster a call with the column sums launched programmatically.
bool pdl_enabled();

/// launch_kernel without clusters, with cudaLaunchAttributeProgrammaticStreamSerialization
/// where pdl_enabled(): the kernel must pdl_wait() before it reads what the kernel ahead of it
/// on the stream writes.
void launch_kernel_dependent(const void* kernel, void** args, int64_t grid, int block,
                             size_t smem, cudaStream_t stream, const char* where);

/// launch() for a kernel that reads the outputs of the kernel ahead of it on the stream only
/// after pdl_wait(): a programmatic dependent launch where pdl_enabled().
template <typename... Args>
void launch_dependent(void (*kernel)(Args...), int64_t grid, int block, size_t smem,
                      cudaStream_t stream, const char* where,
                      typename NoDeduce<Args>::type... args) {
  void* ptrs[] = {static_cast<void*>(&args)...};
  launch_kernel_dependent(reinterpret_cast<const void*>(kernel), ptrs, grid, block, smem, stream,
                          where);
}

}  // namespace quack::detail
