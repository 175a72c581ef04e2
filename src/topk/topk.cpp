// Top-k public API (quack/topk.h): validation at the boundary, the plan, the launch (host).
#include "quack/topk.h"

#include <cstdint>
#include <limits>
#include <string>

#include "common/check.h"
#include "common/launch.h"
#include "quack/errors.h"
#include "topk/topk_internal.h"

namespace quack {

namespace detail {

namespace {

constexpr int64_t kMaxN = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxGrid = std::numeric_limits<int32_t>::max();

const char* softmax_name(TopkSoftmax s) {
  switch (s) {
    case TopkSoftmax::kNone: return "kNone";
    case TopkSoftmax::kSelected: return "kSelected";
    case TopkSoftmax::kRow: return "kRow";
  }
  return "unknown";
}

void check_softmax(const ArgCheck& chk, TopkSoftmax s) {
  const int v = static_cast<int>(s);
  if (v < 0 || v > 2)
    chk.fail("softmax is " + std::to_string(v) +
             ", expected TopkSoftmax::kNone (0), kSelected "
             "(1) or kRow (2)");
}

/// A present (M, ·) matrix on `device`: returns its column count.
int64_t check_rows(const ArgCheck& chk, const TensorRef& t, const char* name, int64_t M,
                   int device) {
  chk.required(t, name);
  if (t.ndim != 2 || t.shape[0] != M)
    chk.fail(std::string(name) + " has shape " + describe(t) + ", expected (M, k) = (" +
             std::to_string(M) + ", k)");
  chk.no_negative_strides(t, name);
  chk.same_device(t, name, device);
  return t.shape[1];
}

/// x can be read with 16-byte loads from vector-aligned columns: unit column stride (or one
/// column), 16-byte aligned base, row stride a multiple of 16 bytes (or one row).
bool topk_vec_ok(const TensorRef& x) {
  const int64_t es = dtype_size(x.dtype);
  const int64_t M = x.shape[0], N = x.shape[1];
  if (N > 1 && x.stride[1] != 1) return false;
  if (reinterpret_cast<uintptr_t>(x.data) % 16 != 0) return false;
  if (M > 1 && (x.stride[0] * es) % 16 != 0) return false;
  return true;
}

int device_sm_count(int device, const char* fn) {
  try {
    return sm_count(device);
  } catch (const CudaError& e) {  // e.g. no driver: say which call met it
    throw CudaError(std::string(fn) + ": " + e.what());
  }
}

}  // namespace

TopkCall topk_fwd_call(const TopkFwdArgs& a, int sm_count_override) {
  const char* fn = "topk_fwd";
  const ArgCheck chk(fn);
  chk.matrix(a.x, "x", -1, -1);
  chk.float_dtype(a.x, "x");
  const int64_t M = a.x.shape[0], N = a.x.shape[1];
  const int dev = a.x.device;
  const int64_t k = check_rows(chk, a.values, "values", M, dev);
  chk.float_dtype(a.values, "values");
  chk.non_overlapping(a.values, "values");
  chk.matrix(a.indices, "indices", M, k);
  chk.dtype_in(a.indices, "indices", {DType::kInt64, DType::kInt32});
  chk.same_device(a.indices, "indices", dev);
  chk.non_overlapping(a.indices, "indices");
  if (k > N)
    chk.fail("values has k = " + std::to_string(k) +
             " columns, expected k ≤ N = " + std::to_string(N) + " (the columns of x)");
  if (N > kMaxN)
    chk.fail("x has N = " + std::to_string(N) + " columns, expected N ≤ " + std::to_string(kMaxN));
  check_softmax(chk, a.softmax);
  if (a.lse.present()) {
    if (a.softmax != TopkSoftmax::kRow)
      chk.fail(std::string("lse is given with softmax = ") + softmax_name(a.softmax) +
               ", expected lse only with TopkSoftmax::kRow");
    chk.vector(a.lse, "lse", M);
    chk.dtype_in(a.lse, "lse", {DType::kFloat32});
    chk.same_device(a.lse, "lse", dev);
    chk.non_overlapping(a.lse, "lse");
  }
  chk.disjoint(a.values, "values", a.x, "x");
  chk.disjoint(a.indices, "indices", a.x, "x");
  chk.disjoint(a.values, "values", a.indices, "indices");
  chk.disjoint(a.lse, "lse", a.x, "x");
  chk.disjoint(a.lse, "lse", a.values, "values");
  chk.disjoint(a.lse, "lse", a.indices, "indices");
  if (M > kMaxGrid)
    chk.fail("x has M = " + std::to_string(M) + " rows, expected M ≤ " + std::to_string(kMaxGrid));

  TopkCall c;
  c.device = dev;
  c.x_dtype = a.x.dtype;
  TopkParams& p = c.p;
  p.x = row_io(a.x);
  p.values = row_io(a.values);
  p.indices = row_io(a.indices);
  p.lse = row_io(a.lse);
  p.M = M;
  p.N = N;
  p.k = static_cast<int>(k);
  p.softmax = static_cast<int>(a.softmax);
  p.largest = a.largest;
  TopkProblem& pr = c.problem;
  pr.M = M;
  pr.N = N;
  pr.k = k;
  pr.x = a.x.dtype;
  pr.vec_ok = topk_vec_ok(a.x);
  if (M > 0 && k > 0)
    pr.sm_count = sm_count_override >= 0 ? sm_count_override : device_sm_count(dev, fn);
  c.plan = plan_topk(pr);
  return c;
}

void topk_run_call(const TopkCall& c, void* workspace, size_t workspace_bytes,
                   cudaStream_t stream) {
  const char* fn = "topk_fwd";
  if (c.plan.path == TopkPath::kNone) return;
  TopkParams p = c.p;
  p.warps_per_row = c.plan.warps_per_row;
  p.rows_per_cta = c.plan.rows_per_cta;
  p.slice = c.plan.slice;
  p.vec_io = c.plan.vec_io;
  p.prefix_iters = c.plan.prefix_iters;
  p.prefix_narrow = c.plan.prefix_narrow;
  const DeviceGuard guard(c.device, fn);
  if (c.plan.path == TopkPath::kSort) {
    topk_sort_run(p, c.x_dtype, workspace, workspace_bytes, stream, fn);
    return;
  }
  if (c.plan.path == TopkPath::kBitonic) {
    p.threads_per_row = c.plan.threads_per_row;
    if (c.x_dtype == DType::kBFloat16)
      return (c.plan.fit ? topk_bitonic_fit_bf16 : topk_bitonic_bf16)(c.plan, p, stream, fn);
    if (c.x_dtype == DType::kFloat16)
      return (c.plan.fit ? topk_bitonic_fit_f16 : topk_bitonic_f16)(c.plan, p, stream, fn);
    if (c.x_dtype == DType::kFloat32)
      return (c.plan.fit ? topk_bitonic_fit_f32 : topk_bitonic_f32)(c.plan, p, stream, fn);
    throw InvalidArgument(std::string(fn) + ": internal error: a bitonic plan for x " +
                          dtype_name(c.x_dtype) + ", expected bf16, fp16 or fp32");
  }
  if (c.plan.path == TopkPath::kRadix) {
    p.threads_per_row = c.plan.threads_per_row;
    if (c.x_dtype == DType::kBFloat16) return topk_radix_bf16(c.plan, p, stream, fn);
    if (c.x_dtype == DType::kFloat16) return topk_radix_f16(c.plan, p, stream, fn);
    return topk_radix_f32(c.plan, p, stream, fn);
  }
  const bool p32 = c.plan.packed_bits == 32;
  TopkQueueLaunch run = topk_queue_f32_p64;
  if (c.x_dtype == DType::kBFloat16) run = p32 ? topk_queue_bf16_p32 : topk_queue_bf16_p64;
  if (c.x_dtype == DType::kFloat16) run = p32 ? topk_queue_f16_p32 : topk_queue_f16_p64;
  run(c.plan, p, stream, fn);
}

namespace {

size_t call_workspace_size(const TopkCall& c) {
  if (c.plan.path != TopkPath::kSort) return 0;
  const DeviceGuard guard(c.device, "topk_fwd_workspace_size");
  return topk_sort_workspace_size(c.p.M, c.p.N, c.x_dtype, "topk_fwd_workspace_size");
}

}  // namespace

}  // namespace detail

size_t topk_fwd_workspace_size(const TopkFwdArgs& args) {
  // The path (bitonic, radix, queue or sort) does not depend on the device's SM count: no query
  // for it.
  return detail::call_workspace_size(detail::topk_fwd_call(args, /*sm_count=*/1));
}

void topk_fwd(const TopkFwdArgs& args, void* workspace, size_t workspace_bytes,
              cudaStream_t stream) {
  const detail::TopkCall c = detail::topk_fwd_call(args);
  if (c.plan.path == detail::TopkPath::kSort) {
    const size_t need = detail::call_workspace_size(c);
    const detail::ArgCheck chk("topk_fwd");
    if (workspace_bytes < need || (need > 0 && workspace == nullptr))
      chk.fail("workspace has " + std::to_string(workspace == nullptr ? 0 : workspace_bytes) +
               " bytes, expected at least topk_fwd_workspace_size(args) = " + std::to_string(need) +
               " (k = " + std::to_string(c.p.k) + " > " + std::to_string(detail::kTopkQueueMaxK) +
               " sorts each row)");
    if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0)
      chk.fail("workspace is not 256-byte aligned, expected a cudaMalloc-style allocation");
  }
  detail::topk_run_call(c, workspace, workspace_bytes, stream);
}

void topk_fwd(const TopkFwdArgs& args, cudaStream_t stream) { topk_fwd(args, nullptr, 0, stream); }

void topk_bwd(const TopkBwdArgs& a, cudaStream_t stream) {
  namespace d = detail;
  const char* fn = "topk_bwd";
  const d::ArgCheck chk(fn, "dx");
  chk.matrix(a.dx, "dx", -1, -1);
  chk.float_dtype(a.dx, "dx");
  chk.non_overlapping(a.dx, "dx");
  const int64_t M = a.dx.shape[0], N = a.dx.shape[1];
  const int dev = a.dx.device;
  const int64_t k = d::check_rows(chk, a.dvalues, "dvalues", M, dev);
  chk.float_dtype(a.dvalues, "dvalues");
  chk.matrix(a.indices, "indices", M, k);
  chk.dtype_in(a.indices, "indices", {DType::kInt64, DType::kInt32});
  chk.same_device(a.indices, "indices", dev);
  if (k > N)
    chk.fail("dvalues has k = " + std::to_string(k) +
             " columns, expected k ≤ N = " + std::to_string(N) + " (the columns of dx)");
  if (N > d::kMaxN)
    chk.fail("dx has N = " + std::to_string(N) + " columns, expected N ≤ " +
             std::to_string(d::kMaxN));
  d::check_softmax(chk, a.softmax);
  const std::string with = std::string(" (softmax = ") + d::softmax_name(a.softmax) + ")";
  if (a.softmax == TopkSoftmax::kSelected) {
    if (!a.values.present())
      chk.fail("values is absent, expected the forward's values (M, k)" + with);
    chk.matrix(a.values, "values", M, k);
    chk.float_dtype(a.values, "values");
    chk.same_device(a.values, "values", dev);
  }
  if (a.softmax == TopkSoftmax::kRow) {
    if (!a.x.present()) chk.fail("x is absent, expected the forward's x (M, N)" + with);
    if (!a.lse.present()) chk.fail("lse is absent, expected the forward's lse (M)" + with);
    chk.matrix(a.x, "x", M, N);
    chk.float_dtype(a.x, "x");
    chk.same_device(a.x, "x", dev);
    chk.vector(a.lse, "lse", M);
    chk.dtype_in(a.lse, "lse", {DType::kFloat32});
    chk.same_device(a.lse, "lse", dev);
  }
  chk.disjoint(a.dx, "dx", a.dvalues, "dvalues");
  chk.disjoint(a.dx, "dx", a.indices, "indices");
  if (a.softmax == TopkSoftmax::kSelected) chk.disjoint(a.dx, "dx", a.values, "values");
  if (a.softmax == TopkSoftmax::kRow) {
    chk.disjoint(a.dx, "dx", a.x, "x");
    chk.disjoint(a.dx, "dx", a.lse, "lse");
  }
  if (M == 0 || N == 0) return;

  d::TopkBwdParams p;
  p.dvalues = d::row_io(a.dvalues);
  p.indices = d::row_io(a.indices);
  p.dx = d::row_io(a.dx);
  if (a.softmax == TopkSoftmax::kSelected) p.values = d::row_io(a.values);
  if (a.softmax == TopkSoftmax::kRow) {
    p.x = d::row_io(a.x);
    p.lse = d::row_io(a.lse);
  }
  p.M = M;
  p.N = N;
  p.k = static_cast<int>(k);
  p.softmax = static_cast<int>(a.softmax);
  p.tpr = d::topk_bwd_threads_per_row(N);
  const int64_t rows_per_cta = 256 / p.tpr;
  const int64_t grid = (M + rows_per_cta - 1) / rows_per_cta;
  if (grid > d::kMaxGrid)
    chk.fail("dx has M = " + std::to_string(M) + " rows, expected at most " +
             std::to_string(d::kMaxGrid * rows_per_cta) + " for N = " + std::to_string(N));
  const d::DeviceGuard guard(dev, fn);
  d::topk_bwd_launch(p, grid, stream, fn);
}

}  // namespace quack
