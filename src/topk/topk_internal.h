// Top-k's internal entry points (host): validation + call building (topk.cpp), the kernels'
// launchers (one TU per x dtype and path). Not part of the public API; the tests and
// quack-bench use them to see the plan.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "quack/topk.h"
#include "topk/topk_plan.h"

namespace quack::detail {

/// A validated topk_fwd call: kernel parameters, the problem and its plan.
struct TopkCall {
  TopkParams p;
  TopkProblem problem;
  TopkPlan plan;
  DType x_dtype = DType::kFloat32;
  int device = 0;
};

/// Validates `args` (throws as topk_fwd) and plans the call. sm_count < 0: the device's (a
/// CUDA query, only when the call launches something); else the given value (host tests).
TopkCall topk_fwd_call(const TopkFwdArgs& args, int sm_count = -1);

/// Runs a call with its plan (c.plan may be replaced by another plan of c.problem, e.g.
/// plan_topk(problem, forced_warps), or with problem.vec_ok = false: the element path).
/// The sort path needs `workspace` (topk_fwd_workspace_size); nothing runs for kNone.
void topk_run_call(const TopkCall& c, void* workspace, size_t workspace_bytes, cudaStream_t stream);

/// Launchers of the warp-queue kernel, one TU per x dtype and entry width
/// (topk_queue_<dtype>_p<bits>.cu; fp32 keys need 64-bit entries).
using TopkQueueLaunch = void (*)(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);
void topk_queue_bf16_p32(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);
void topk_queue_bf16_p64(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);
void topk_queue_f16_p32(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);
void topk_queue_f16_p64(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);
void topk_queue_f32_p64(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);

/// Launchers of the register (bitonic) kernel (topk_bitonic_<dtype>.cu).
void topk_bitonic_bf16(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);
void topk_bitonic_f16(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);
void topk_bitonic_f32(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);
/// The same kernel for plans with `fit` (N = T·E; topk_bitonic_fit_<dtype>.cu).
void topk_bitonic_fit_bf16(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);
void topk_bitonic_fit_f16(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);
void topk_bitonic_fit_f32(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);
/// fp32 lists of 32 (their own TUs, topk_bitonic_{,fit_}f32_l32.cu; the two above call them).
void topk_bitonic_f32_l32(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);
void topk_bitonic_fit_f32_l32(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);

/// Launchers of the radix-select kernel (topk_radix_<dtype>.cu), 16-byte rows only.
void topk_radix_bf16(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);
void topk_radix_f16(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);
void topk_radix_f32(const TopkPlan&, const TopkParams&, cudaStream_t, const char*);

/// The sort path (topk_sort.cu): workspace bytes for (M, N) rows of `x` dtype, and the run.
size_t topk_sort_workspace_size(int64_t M, int64_t N, DType x, const char* where);
void topk_sort_run(const TopkParams& p, DType x, void* workspace, size_t workspace_bytes,
                   cudaStream_t stream, const char* where);

/// CUB's segmented radix sort of `rows` rows of N (key, column) pairs on the low `bits` key bits
/// (topk_sort_cub.cu, CUB's TU alone): the temporary bytes, and the sort of (k0, c0) with
/// (k1, c1) as the alternate buffers; *keys / *cols receive where the sorted pairs are.
size_t topk_cub_sort_temp_bytes(int64_t rows, int64_t N, int bits, const char* where);
void topk_cub_sort(void* temp, size_t temp_bytes, uint32_t* k0, uint32_t* k1, int32_t* c0,
                   int32_t* c1, int64_t rows, int64_t N, int bits, cudaStream_t stream,
                   const char* where, uint32_t** keys, int32_t** cols);

/// The backward's kernel (topk_bwd.cu).
struct TopkBwdParams {
  RowIO dvalues, indices, values, x, lse, dx;
  int64_t M = 0, N = 0;
  int k = 0;
  int softmax = 0;
  int tpr = 32;  // threads per row (32..256, a power of 2); 256 / tpr rows per CTA
};
void topk_bwd_launch(const TopkBwdParams& p, int64_t grid, cudaStream_t stream, const char* where);

/// The backward's threads per row: about 8 columns per thread, 32 to 256 (a power of 2).
inline int topk_bwd_threads_per_row(int64_t N) {
  int t = 32;
  while (t < 256 && static_cast<int64_t>(t) * 8 < N) t *= 2;
  return t;
}

}  // namespace quack::detail
