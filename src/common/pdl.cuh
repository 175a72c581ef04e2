// Programmatic dependent launch (PDL, Hopper): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization (common/pdl.h, launch_dependent) may start
// before the kernel ahead of it on the stream has finished: once every CTA of that kernel has
// called pdl_launch_dependents() or exited. Its pdl_wait() then blocks until that kernel has
// completed and its writes are visible, so everything the dependent reads of it comes after
// the wait. Without such a launch both are no-ops. Source: CUDA C++ Programming Guide,
// "Programmatic Dependent Launch and Synchronization"; PTX ISA `griddepcontrol` (sm_90).
#pragma once

namespace quack::detail {

/// Lets the next kernel on the stream start, if it was launched as a programmatic dependent
/// (it still waits in pdl_wait for this kernel's completion).
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Blocks until the kernel this one depends on programmatically has completed and its memory
/// operations are visible; returns at once for a kernel launched without the attribute.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace quack::detail
