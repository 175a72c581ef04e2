// The cross-entropy forward's small kernels around the row kernel, and the gradient rescale
// (cross_entropy_aux.cu). Host-visible declarations; plain-data parameters.
//
//   prep     one CTA: the denominators of 'mean' from the targets (Σ_counted w[t], #counted),
//            their reciprocals, and Σ_j w_j (class weights with label smoothing), written into
//            the workspace's device scalars (cross_entropy_params.h) for the row kernel and the
//            finish kernel to read.
//   finish   one CTA: Σ_i of the row kernel's per-row CE and z parts (fixed order, fp64), each
//            divided by its denominator for 'mean', into the (1) loss and z_loss outputs.
//   scale    dx *= g (a device scalar), returning at once when g == 1; or out = g·dx; with a
//            dx state, only where the forward wrote dx; optionally records (g == 1) in the
//            caller's prediction word (cross_entropy_train_bwd).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/row_io.h"

namespace quack::detail {

struct CePrepParams {
  RowIO target;     // (M) int32/int64: ptr, row_stride = element stride, dtype
  RowIO weight;     // (V) fp32, col_stride; ptr == nullptr: no class weights
  float* dev = nullptr;  // the workspace's device scalars
  int64_t M = 0, V = 0, ignore_index = -100;
  bool weight_sum = false;  // compute Σ_j w_j
  bool mean = true;         // kScaleCe / kScaleZ = 1 / denominators; false: 1 ('sum')
  bool dx_on = false;       // write kDxOn (a forward with dx and a dx state)
  const int32_t* predict = nullptr;  // kDxOn = (predict[0] != 0); nullptr: kDxOn = 1
};

struct CeFinishParams {
  const float* ce_rows = nullptr;  // (M) per-row CE parts (workspace)
  const float* z_rows = nullptr;   // (M) per-row z parts, or nullptr (no z-loss)
  const float* dev = nullptr;      // the device scalars ('mean')
  RowIO loss, z;                   // (1) outputs (z: ptr == nullptr when not asked)
  int64_t M = 0;
  bool mean = false;
};

struct CeScaleParams {
  RowIO dx;             // (M, V)
  RowIO grad;           // (1): element 0
  RowIO out;            // (M, V) in dx's dtype: out = g·dx; ptr == nullptr: dx in place
  const float* state = nullptr;  // a forward's dx state: nothing is done where its kDxOn is 0
  int32_t* predict = nullptr;    // set to (g == 1) by one thread; nullptr: not written
  int64_t M = 0, V = 0;
  bool vec = false;     // rows of 16-byte vectors: unit column stride, aligned base and rows
                        // (dx and out)
};

void launch_ce_prep(const CePrepParams& q, cudaStream_t stream, const char* where);
void launch_ce_finish(const CeFinishParams& q, cudaStream_t stream, const char* where);
/// Current device = dx's (the grid is sized from its SM count).
void launch_ce_scale_grad(const CeScaleParams& q, int device, cudaStream_t stream,
                          const char* where);

}  // namespace quack::detail
