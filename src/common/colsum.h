// Deterministic column sums of (P, N) fp32 matrices of per-CTA partials (dweight, dbias):
// out[n] = sum_{p < P} part[p, n], in an order fixed by (P, N), so the result has identical
// bits run to run. P = 0 writes zeros. Shared by every backward that reduces over rows.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/row_io.h"

namespace quack::detail {

/// The most matrices one launch_colsums call sums.
inline constexpr int kMaxColsums = 2;

/// Launches the column sums of the n (≤ kMaxColsums) matrices parts[m] into outs[m] on
/// `stream` (current device), one kernel for all of them; nothing when n or N is 0.
void launch_colsums(const float* const* parts, const RowIO* outs, int n, int64_t P, int64_t N,
                    cudaStream_t stream, const char* where);

}  // namespace quack::detail
