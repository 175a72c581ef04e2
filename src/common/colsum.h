// Deterministic column sums of a (P, N) fp32 matrix of per-CTA partials (dweight, dbias):
// out[n] = sum_{p < P} part[p, n], always in the same order, so the result has identical bits
// run to run. P = 0 writes zeros. Shared by every backward that reduces over rows.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/row_io.h"

namespace quack::detail {

/// Launches the column sum on `stream` (current device). N ≥ 1.
void launch_colsum(const float* part, int64_t P, int64_t N, RowIO out, cudaStream_t stream,
                   const char* where);

}  // namespace quack::detail
