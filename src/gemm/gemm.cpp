// GEMM public API: validation at the boundary (no CUDA call), problem description, dispatch to
// the kernel instance of the dtypes (host only; the kernels are in src/gemm/sm90/instances/).
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <string>

#include "common/check.h"
#include "common/launch.h"
#include "gemm/gemm_problem.h"
#include "quack/errors.h"
#include "quack/gemm.h"

namespace quack {

using detail::ArgCheck;
using detail::GemmProblem;

namespace {

constexpr int64_t kMaxExtent = std::numeric_limits<int32_t>::max();

std::string str(int64_t v) { return std::to_string(v); }

// "(M, K) = (128, 63)"-style expectation text for a 2-D or 3-D operand.
std::string expect_shape(int ndim, const char* names, int64_t L, int64_t r, int64_t c) {
  std::string n(names), v;
  auto put = [](int64_t x) { return x < 0 ? std::string("*") : str(x); };
  if (ndim == 3) {
    n = "(L, " + n.substr(1);
    v = "(" + put(L) + ", " + put(r) + ", " + put(c) + ")";
  } else {
    v = "(" + put(r) + ", " + put(c) + ")";
  }
  return n + " = " + v;
}

// One matrix operand of the batched problem, in the kernel's terms: `inner` is the contiguous
// extent, `outer` the other one; ld the stride between inner runs; batch the stride between
// batches (0 when L == 1).
struct Operand {
  const TensorRef* t = nullptr;
  const char* name = "";
  int64_t ld = 0, batch = 0;
};

// Shape of an operand: 2-D (rows, cols) or 3-D (L, rows, cols), same rank as a.
void check_shape(const ArgCheck& chk, const TensorRef& t, const char* name, int ndim, int64_t L,
                 int64_t rows, int64_t cols, const char* names) {
  chk.required(t, name);
  if (t.ndim != ndim)
    chk.fail(std::string(name) + " has " + str(t.ndim) + " dimensions " + describe(t) +
             ", expected " + str(ndim) + " like a (all 2-D, or all 3-D with a batch dimension)");
  const int o = ndim - 2;
  if ((ndim == 3 && t.shape[0] != L) || (rows >= 0 && t.shape[o] != rows) ||
      (cols >= 0 && t.shape[o + 1] != cols))
    chk.fail(std::string(name) + " has shape " + describe(t) + ", expected " +
             expect_shape(ndim, names, L, rows, cols));
  chk.no_negative_strides(t, name);
}

// TMA layout of an operand whose contiguous dimension is `inner_dim` (the last or the one before):
// stride 1 there (unless that extent is 1), 16-byte base, leading and batch strides multiples of
// 16 bytes, leading stride ≥ the contiguous extent. `major_msg` names the expected layout for
// the "not yet supported" message. Strides along extents of 1 are replaced by valid ones.
Operand check_layout(const ArgCheck& chk, const TensorRef& t, const char* name, int inner_dim,
                     const char* layout, const char* other_layout) {
  const int o = t.ndim - 2;
  const int inner = o + inner_dim, outer = o + (1 - inner_dim);
  const int64_t n_in = t.shape[inner], n_out = t.shape[outer];
  const int64_t L = t.ndim == 3 ? t.shape[0] : 1;
  const int es = dtype_size(t.dtype);
  const int64_t align = 16 / es;  // elements per 16 bytes
  if (n_in > 1 && t.stride[inner] != 1) {
    if (n_out == 1 || t.stride[outer] == 1)
      chk.fail(std::string(name) + " is " + other_layout + " (" + detail::describe_full(t) +
               "): not yet supported, expected " + layout);
    chk.fail(std::string(name) + " has stride " + str(t.stride[inner]) + " along its contiguous dimension (" +
             detail::describe_full(t) + "): not yet supported, expected " + layout);
  }
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    chk.fail(std::string(name) + " has a base address that is not 16-byte aligned (" +
             detail::describe_full(t) + "), expected 16-byte alignment for TMA");
  const int64_t n_in_padded = (n_in + align - 1) / align * align;
  Operand op;
  op.t = &t;
  op.name = name;
  op.ld = n_out > 1 ? t.stride[outer] : n_in_padded;
  if (op.ld < n_in)
    chk.fail(std::string(name) + " has leading stride " + str(op.ld) + " < " + str(n_in) +
             " contiguous elements (" + detail::describe_full(t) + "), expected a stride ≥ " + str(n_in));
  if (op.ld % align != 0)
    chk.fail(std::string(name) + " has leading stride " + str(op.ld) + " elements = " + str(op.ld * es) +
             " bytes (" + detail::describe_full(t) + "), expected a multiple of 16 bytes (" + str(align) +
             " elements) for TMA; pad the rows to " + str(n_in_padded));
  if (L > 1) {
    op.batch = t.stride[0];
    if (op.batch == 0)
      chk.fail(std::string(name) + " has batch stride 0 (" + detail::describe_full(t) +
               "): broadcasting over the batch is not yet supported");
    if (op.batch % align != 0)
      chk.fail(std::string(name) + " has batch stride " + str(op.batch) + " elements (" +
               detail::describe_full(t) + "), expected a multiple of 16 bytes (" + str(align) + " elements) for TMA");
  } else {
    op.batch = op.ld * n_out;  // never stepped; any valid TMA stride
  }
  return op;
}

struct Plan {
  GemmProblem p;
  bool empty = false;  // M, N or L is 0: nothing to launch
};

Plan plan_gemm(const GemmArgs& g) {
  ArgCheck chk("gemm");
  chk.required(g.a, "a");
  if (g.a.ndim != 2 && g.a.ndim != 3)
    chk.fail("a has " + str(g.a.ndim) + " dimensions " + describe(g.a) + ", expected 2 (M, K) or 3 (L, M, K)");
  const int nd = g.a.ndim, o = nd - 2;
  const int64_t L = nd == 3 ? g.a.shape[0] : 1, M = g.a.shape[o], K = g.a.shape[o + 1];
  chk.no_negative_strides(g.a, "a");
  check_shape(chk, g.b, "b", nd, L, K, -1, "(K, N)");
  const int64_t N = g.b.shape[o + 1];
  check_shape(chk, g.d, "d", nd, L, M, N, "(M, N)");
  if (g.c.present()) check_shape(chk, g.c, "c", nd, L, M, N, "(M, N)");

  chk.dtype_in(g.a, "a", {DType::kBFloat16, DType::kFloat16});
  if (g.b.dtype != g.a.dtype)
    chk.fail(std::string("b has dtype ") + dtype_name(g.b.dtype) + ", expected " + dtype_name(g.a.dtype) +
             " (a's dtype; mixed input dtypes are not supported)");
  chk.dtype_in(g.d, "d", {g.a.dtype, DType::kFloat32});
  if (g.c.present() && g.c.dtype != g.d.dtype)
    chk.fail(std::string("c has dtype ") + dtype_name(g.c.dtype) + ", expected " + dtype_name(g.d.dtype) +
             " (d's dtype; c of another dtype is not yet supported)");

  const int dev = g.a.device;
  chk.same_device(g.b, "b", dev);
  chk.same_device(g.d, "d", dev);
  if (g.c.present()) chk.same_device(g.c, "c", dev);
  if (g.beta != 0.f && !g.c.present())
    chk.fail("beta is " + std::to_string(g.beta) + " but c is absent, expected c when beta ≠ 0");

  const int64_t ext[] = {M, N, K, L};
  const char* ext_name[] = {"M", "N", "K", "L"};
  for (int i = 0; i < 4; ++i)
    if (ext[i] > kMaxExtent)
      chk.fail(std::string(ext_name[i]) + " = " + str(ext[i]) + " is too large, expected ≤ 2^31 − 1");

  Plan plan;
  GemmProblem& p = plan.p;
  p.m = int(M);
  p.n = int(N);
  p.k = int(K);
  p.l = int(L);
  p.ab_dtype = g.a.dtype;
  p.d_dtype = g.d.dtype;
  p.alpha = g.alpha;
  p.beta = g.beta;
  p.device = dev;
  if (M == 0 || N == 0 || L == 0) {
    plan.empty = true;
    return plan;
  }
  const char* kRowMajorMN = "row-major (M, N): stride 1 along N";
  const Operand d = check_layout(chk, g.d, "d", 1, kRowMajorMN, "column-major");
  chk.non_overlapping(g.d, "d");
  p.d = g.d.data;
  p.ldd = d.ld;
  p.batch_d = d.batch;
  if (g.c.present() && g.beta != 0.f) {
    const Operand c = check_layout(chk, g.c, "c", 1, kRowMajorMN, "column-major");
    p.c = g.c.data;
    p.ldc = c.ld;
    p.batch_c = c.batch;
  }
  if (K > 0) {
    const Operand a = check_layout(chk, g.a, "a", 1, "row-major (M, K): stride 1 along K", "column-major");
    const Operand b = check_layout(chk, g.b, "b", 0,
                                   "column-major (K, N): stride 1 along K (the transpose of a row-major (N, K))",
                                   "row-major");
    p.a = g.a.data;
    p.lda = a.ld;
    p.batch_a = a.batch;
    p.b = g.b.data;
    p.ldb = b.ld;
    p.batch_b = b.batch;
  }
  return plan;
}

}  // namespace

void can_implement(const GemmArgs& args) { (void)plan_gemm(args); }

void gemm(const GemmArgs& args, cudaStream_t stream) {
  const Plan plan = plan_gemm(args);
  if (plan.empty) return;
  const GemmProblem& p = plan.p;
  detail::DeviceGuard guard(p.device);
  if (p.k == 0) {
    detail::gemm_fill_k0(p, stream);
    return;
  }
  const bool f32_out = p.d_dtype == DType::kFloat32;
  if (p.ab_dtype == DType::kBFloat16) {
    if (f32_out)
      detail::gemm_sm90_128x256_bf16_f32(p, stream);
    else
      detail::gemm_sm90_128x256_bf16_bf16(p, stream);
  } else {
    if (f32_out)
      detail::gemm_sm90_128x256_f16_f32(p, stream);
    else
      detail::gemm_sm90_128x256_f16_f16(p, stream);
  }
}

}  // namespace quack
