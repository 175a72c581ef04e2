// Element-at-a-time helpers of the general (any stride, any dtype, any N) row-kernel path.
//
// Thread -> data: CTA rank r of a row covers columns [r·span, (r+1)·span), span = ceil(N /
// cluster_n); thread `lane_in_row` takes columns lane, lane + tpr, ... of that range.
#pragma once

#include "common/row_geometry.h"
#include "common/row_io.h"
#include "common/vec.cuh"

namespace quack::detail {

struct ColumnRange {
  int64_t begin, end;
  int step;
  __device__ ColumnRange(const RowGeometry& g, const RowCtx& c) {
    const int64_t span = (g.cols + g.cluster_n - 1) / g.cluster_n;
    begin = c.rank * span + c.lane_in_row;
    end = min(g.cols, (c.rank + 1) * span);
    step = g.tpr;
  }
};

__device__ __forceinline__ float load1(const RowIO& t, int64_t row, int64_t col) {
  float v[1];
  load_any<1>(t.ptr, t.dtype, t.offset<false>(row, col), v);
  return v[0];
}
__device__ __forceinline__ void store1(const RowIO& t, int64_t row, int64_t col, float x) {
  float v[1] = {x};
  store_any<1>(t.ptr, t.dtype, t.offset<false>(row, col), v);
}

}  // namespace quack::detail
