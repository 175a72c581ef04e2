// The norms' shared host pieces that are not inline (norm_check.h).
#include "norm/norm_check.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "common/launch.h"

namespace quack::detail {

void fill_empty_row_stats(const TensorRef& t, int byte, int device, const char* fn,
                          cudaStream_t stream) {
  if (!t.present() || t.numel() == 0) return;
  const DeviceGuard guard(device, fn);
  // One 4-byte column of M rows, t.stride[0] floats apart (≥ 1 element: a 1-row tensor may
  // carry any stride).
  const size_t pitch = static_cast<size_t>(std::max<int64_t>(t.stride[0], 1)) * sizeof(float);
  check_cuda(cudaMemset2DAsync(t.data, pitch, byte, sizeof(float), static_cast<size_t>(t.shape[0]),
                               stream),
             fn, "cudaMemset2DAsync");
}

}  // namespace quack::detail
