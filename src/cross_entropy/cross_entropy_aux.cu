// The cross-entropy forward's prep and finish kernels and the gradient rescale
// (cross_entropy_aux.h).
//
// prep, finish: one CTA of 1024 threads; thread k takes elements k, k + 1024, ... in order
// (8 loads in flight per thread) and accumulates in fp64, then a fixed-order block sum (warp
// tree, then warp 0 over the warp partials): the same bits on every run. One CTA reads M
// targets or M per-row parts (128 KB at M = 16384: a few µs); no counters, so the workspace
// needs no zeroing and a CUDA graph replays them as they are.
// scale: reads g first and returns when g == 1 (every CTA; nothing else is read or written);
// otherwise CTAs take rows b, b + grid, ... and their threads 16-byte vectors (or elements) of
// the row.
#include "cross_entropy/cross_entropy_aux.h"

#include <algorithm>

#include "common/launch.h"
#include "common/row_general.cuh"
#include "common/vec.cuh"
#include "cross_entropy/cross_entropy_params.h"

namespace quack::detail {

namespace {

constexpr int kAuxThreads = 1024;

/// Sum of v over the CTA in a fixed order; the result is valid in thread 0. `smem`: 32 doubles.
/// Ends with a barrier, so the slots may be reused by the next call.
__device__ double block_sum(double v, double* smem) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  double r = 0.0;
  if (warp == 0) {
    r = lane < kAuxThreads / 32 ? smem[lane] : 0.0;
    for (int off = 16; off > 0; off >>= 1) r += __shfl_down_sync(0xffffffffu, r, off);
  }
  __syncthreads();
  return r;
}

__device__ __forceinline__ int64_t load_index(const RowIO& io, int64_t i) {
  const int64_t off = i * io.row_stride;
  return io.dtype == DType::kInt64 ? static_cast<const int64_t*>(io.ptr)[off]
                                   : int64_t{static_cast<const int32_t*>(io.ptr)[off]};
}

__device__ __forceinline__ float load_weight(const RowIO& w, int64_t j) {
  return static_cast<const float*>(w.ptr)[j * w.col_stride];
}

__global__ void __launch_bounds__(kAuxThreads) ce_prep_kernel(const CePrepParams q) {
  __shared__ double red[32];
  double count = 0.0, wsum = 0.0, wall = 0.0;
#pragma unroll 8
  for (int64_t i = threadIdx.x; i < q.M; i += kAuxThreads) {
    const int64_t t = load_index(q.target, i);
    if (t != q.ignore_index && t >= 0 && t < q.V) {
      count += 1.0;
      wsum += q.weight.ptr ? double(load_weight(q.weight, t)) : 1.0;
    }
  }
  if (q.weight_sum) {
#pragma unroll 8
    for (int64_t j = threadIdx.x; j < q.V; j += kAuxThreads) wall += load_weight(q.weight, j);
  }
  count = block_sum(count, red);
  wsum = block_sum(wsum, red);
  wall = block_sum(wall, red);
  if (threadIdx.x == 0) {
    q.dev[ce::kDenomLoss] = static_cast<float>(wsum);
    q.dev[ce::kDenomZ] = static_cast<float>(count);
    // 'mean': inf when nothing is counted; 'sum' (read by a training backward only): 1.
    q.dev[ce::kScaleCe] = q.mean ? static_cast<float>(1.0 / wsum) : 1.f;
    q.dev[ce::kScaleZ] = q.mean ? static_cast<float>(1.0 / count) : 1.f;
    q.dev[ce::kWeightSum] = q.weight_sum ? static_cast<float>(wall) : static_cast<float>(q.V);
    if (q.dx_on) q.dev[ce::kDxOn] = q.predict == nullptr || *q.predict != 0 ? 1.f : 0.f;
    // The unused slots too: with dx_state they are an output the caller sees (one call's
    // outputs equal another's for the same inputs).
    for (int i = ce::kDxOn + 1; i < ce::kDevScalarCount; ++i) q.dev[i] = 0.f;
  }
}

__global__ void __launch_bounds__(kAuxThreads) ce_finish_kernel(const CeFinishParams q) {
  __shared__ double red[32];
  double ce = 0.0, z = 0.0;
#pragma unroll 8
  for (int64_t i = threadIdx.x; i < q.M; i += kAuxThreads) {
    ce += q.ce_rows[i];
    if (q.z_rows) z += q.z_rows[i];
  }
  ce = block_sum(ce, red);
  z = block_sum(z, red);
  if (threadIdx.x == 0) {
    if (q.mean) {  // 0/0 = NaN when no row is counted (PyTorch's mean)
      ce /= double(q.dev[ce::kDenomLoss]);
      z /= double(q.dev[ce::kDenomZ]);
    }
    store1(q.loss, 0, 0, static_cast<float>(ce + z));
    if (q.z.ptr) store1(q.z, 0, 0, static_cast<float>(z));
  }
}

template <typename T>
__global__ void __launch_bounds__(256) ce_scale_grad_kernel(const CeScaleParams q) {
  const float g = load1(q.grad, 0, 0);
  if (q.predict != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *q.predict = g == 1.f;
  if (q.state != nullptr && q.state[ce::kDxOn] == 0.f) return;  // dx not written: recompute
  const T* base = static_cast<const T*>(q.dx.ptr);
  const bool in_place = q.out.ptr == nullptr;
  if (in_place && g == 1.f) return;
  T* obase = in_place ? static_cast<T*>(q.dx.ptr) : static_cast<T*>(q.out.ptr);
  const RowIO& o = in_place ? q.dx : q.out;
  if (q.vec) {
    constexpr int kVec = 16 / sizeof(T);
    const int64_t row_vecs = q.V / kVec;
    for (int64_t row = blockIdx.x; row < q.M; row += gridDim.x) {
      const T* r = base + row * q.dx.row_stride;
      T* w = obase + row * o.row_stride;
#pragma unroll 4
      for (int64_t v = threadIdx.x; v < row_vecs; v += blockDim.x) {
        float x[kVec];
        load_vec<T, kVec, Cache::kNormal>(r + v * kVec, x);  // plain: see Cache in vec.cuh
#pragma unroll
        for (int i = 0; i < kVec; ++i) x[i] *= g;
        store_vec<T, kVec>(w + v * kVec, x);
      }
    }
  } else {
    for (int64_t row = blockIdx.x; row < q.M; row += gridDim.x) {
      const T* r = base + row * q.dx.row_stride;
      T* w = obase + row * o.row_stride;
#pragma unroll 4
      for (int64_t c = threadIdx.x; c < q.V; c += blockDim.x)
        w[c * o.col_stride] = from_float<T>(to_float(r[c * q.dx.col_stride]) * g);
    }
  }
}

}  // namespace

void launch_ce_prep(const CePrepParams& q, cudaStream_t stream, const char* where) {
  launch(ce_prep_kernel, 1, kAuxThreads, 0, 1, stream, where, q);
}

void launch_ce_finish(const CeFinishParams& q, cudaStream_t stream, const char* where) {
  launch(ce_finish_kernel, 1, kAuxThreads, 0, 1, stream, where, q);
}

void launch_ce_scale_grad(const CeScaleParams& q, int device, cudaStream_t stream,
                          const char* where) {
  if (q.M <= 0 || q.V <= 0) return;
  const int64_t grid = std::min<int64_t>(q.M, int64_t{sm_count(device)} * 8);
  switch (q.dx.dtype) {
    case DType::kBFloat16:
      launch(ce_scale_grad_kernel<__nv_bfloat16>, grid, 256, 0, 1, stream, where, q);
      break;
    case DType::kFloat16:
      launch(ce_scale_grad_kernel<__half>, grid, 256, 0, 1, stream, where, q);
      break;
    default:
      launch(ce_scale_grad_kernel<float>, grid, 256, 0, 1, stream, where, q);
      break;
  }
}

}  // namespace quack::detail
