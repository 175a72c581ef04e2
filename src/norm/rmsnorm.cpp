// RMSNorm public API: validation at the boundary, geometry, launch (host only).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "common/check.h"
#include "common/colsum.h"
#include "common/launch.h"
#include "norm/norm_config.h"
#include "norm/rmsnorm_params.h"
#include "norm/rmsnorm_tuning.h"
#include "quack/norm.h"

namespace quack {

using detail::ArgCheck;

namespace {

int vec_elems(DType x) { return 16 / dtype_size(x); }

// Checks a present (M, N) operand that must match x's device.
void check_mn(const ArgCheck& chk, const TensorRef& t, const char* name, int64_t M, int64_t N,
              int device, bool output) {
  chk.matrix(t, name, M, N);
  chk.float_dtype(t, name);
  chk.same_device(t, name, device);
  if (output) chk.non_overlapping(t, name);
}

void check_n(const ArgCheck& chk, const TensorRef& t, const char* name, int64_t N, int device,
             bool output) {
  chk.vector(t, name, N);
  chk.float_dtype(t, name);
  chk.same_device(t, name, device);
  if (output) chk.non_overlapping(t, name);
}

void check_rstd(const ArgCheck& chk, const TensorRef& t, int64_t M, int device, bool output) {
  chk.vector(t, "rstd", M);
  chk.dtype_in(t, "rstd", {DType::kFloat32});
  chk.same_device(t, "rstd", device);
  if (output) chk.non_overlapping(t, "rstd");  // the forward's rows would race on one address
}

// Vector-path geometry when the layout allows it and N fits; else the general path. Returns
// whether the vector path was taken.
bool choose_geometry(int64_t M, int64_t N, int vec, bool layout_ok,
                     const detail::RowConfigKnobs& knobs, detail::RowGeometry* g) {
  if (layout_ok && detail::make_row_geometry(M, N, vec, knobs, g)) return true;
  *g = detail::make_general_geometry(M, N);
  return false;
}

// Fits the staged slices in shared memory: first fewer rows per CTA (halving the CTA), then
// fewer values per thread (a longer cluster, so a smaller slice per CTA). Returns false when
// nothing fits; the caller then takes the general path. smem() reads *g.
template <typename SmemFn>
bool fit_shared_memory(int64_t M, int64_t N, detail::RowConfigKnobs knobs,
                       detail::RowGeometry* g, SmemFn smem) {
  for (;;) {
    while (smem() > detail::kMaxSmemPerCta && g->cta_threads > g->tpr && g->cta_threads > 32) {
      g->cta_threads /= 2;
      g->row_blocks = (g->rows + g->rows_per_cta() - 1) / g->rows_per_cta();
    }
    if (smem() <= detail::kMaxSmemPerCta) return true;
    if (knobs.values_per_thread <= g->vec) return false;
    knobs.values_per_thread /= 2;
    if (!detail::make_row_geometry(M, N, g->vec, knobs, g)) return false;
  }
}

struct FwdPlan {
  detail::RmsNormFwdParams p;
  bool vec_path = false;
  int simple = -1;  // kSimpleFwdConfigs entry of the simple path; -1: staged (or general)
};

// The simple path's instance for these (validated) arguments, or -1 when it does not take
// them (rmsnorm_tuning.h lists what it takes). forced ≥ 0: that instance, if it fits.
int simple_path_config(const RmsNormFwdArgs& a, int forced) {
  const DType xt = a.x.dtype;
  const int64_t M = a.x.shape[0], N = a.x.shape[1];
  if (!a.weight.present() || a.bias.present() || a.out.dtype != xt) return -1;
  if (a.weight.dtype != xt && a.weight.dtype != DType::kFloat32) return -1;
  if (a.residual.present() && a.residual.dtype != xt) return -1;
  if (a.residual_out.present() && (!a.residual.present() || a.residual_out.dtype != xt))
    return -1;
  const int vec = vec_elems(xt);  // vector_ok: N % vec == 0, column stride 1, 16-byte rows
  if (!detail::vector_ok(a.x, vec) || !detail::vector_ok(a.residual, vec) ||
      !detail::vector_ok(a.out, vec) || !detail::vector_ok(a.residual_out, vec) ||
      !detail::vector_ok(a.weight, vec))
    return -1;
  const int elt = dtype_size(xt);
  const int64_t row_bytes = N * elt;
  const bool residual = a.residual.present();
  const int config = forced >= 0 ? forced : detail::simple_fwd_config(row_bytes, elt, residual);
  return detail::simple_fwd_config_fits(config, M, row_bytes, residual) ? config : -1;
}

// Validation and path/geometry choice of the forward (no CUDA call). simple_config: -2 keeps
// the staged path, -1 takes the simple path's table, ≥ 0 forces a simple instance.
FwdPlan plan_fwd(const RmsNormFwdArgs& a, const detail::RowConfigKnobs& knobs,
                 int simple_config = -2) {
  ArgCheck chk("rmsnorm_fwd");
  chk.matrix(a.x, "x", -1, -1);
  chk.float_dtype(a.x, "x");
  const int64_t M = a.x.shape[0], N = a.x.shape[1];
  const int dev = a.x.device;
  if (a.weight.present()) check_n(chk, a.weight, "weight", N, dev, false);
  if (a.bias.present()) check_n(chk, a.bias, "bias", N, dev, false);
  if (a.residual.present()) check_mn(chk, a.residual, "residual", M, N, dev, false);
  check_mn(chk, a.out, "out", M, N, dev, true);
  if (a.residual_out.present()) check_mn(chk, a.residual_out, "residual_out", M, N, dev, true);
  if (a.rstd.present()) check_rstd(chk, a.rstd, M, dev, /*output=*/true);
  if (!(a.eps >= 0.f)) chk.fail("eps is " + std::to_string(a.eps) + ", expected eps ≥ 0");
  FwdPlan plan;
  if (M == 0) return plan;

  if (N == 0) chk.fail("x has N = 0 columns, expected N ≥ 1");
  const int vec = vec_elems(a.x.dtype);
  const bool layout_ok = detail::vector_ok(a.x, vec) && detail::vector_ok(a.residual, vec) &&
                         detail::vector_ok(a.out, vec) && detail::vector_ok(a.residual_out, vec) &&
                         detail::vector_ok(a.weight, vec) && detail::vector_ok(a.bias, vec);
  detail::RmsNormFwdParams& p = plan.p;
  plan.vec_path = choose_geometry(M, N, vec, layout_ok, knobs, &p.g);
  p.x = detail::row_io(a.x);
  p.residual = detail::row_io(a.residual);
  p.out = detail::row_io(a.out);
  p.residual_out = detail::row_io(a.residual_out);
  p.weight = detail::row_io(a.weight);
  p.bias = detail::row_io(a.bias);
  p.rstd = static_cast<float*>(a.rstd.data);
  p.rstd_stride = a.rstd.present() ? a.rstd.stride[0] : 1;
  p.eps = a.eps;
  p.inv_n = 1.f / static_cast<float>(N);
  const int64_t slice = int64_t(p.g.vpt) * p.g.tpr * p.g.vec;  // staged by the copy engine
  if (plan.vec_path &&
      (!detail::staged_ok(a.x, slice) || !detail::staged_ok(a.residual, slice) ||
       !detail::staged_ok(a.weight, slice) || !detail::staged_ok(a.bias, slice) ||
       !fit_shared_memory(M, N, knobs, &p.g, [&] { return detail::rmsnorm_fwd_smem(p); }))) {
    plan.vec_path = false;  // not stageable: the general path streams the rows
    p.g = detail::make_general_geometry(M, N);
  }
  if (simple_config >= -1) plan.simple = simple_path_config(a, simple_config);
  return plan;
}

detail::RmsNormFwdPath path_from_env() {
  const char* v = std::getenv("QUACK_RMSNORM_FWD");
  const std::string s = v ? v : "";
  if (s.empty() || s == "simple") return detail::RmsNormFwdPath::kSimple;  // default since c493320's A/B
  if (s == "staged") return detail::RmsNormFwdPath::kStaged;
  throw InvalidArgument("rmsnorm_fwd: environment variable QUACK_RMSNORM_FWD is '" + s +
                        "', expected simple or staged");
}

// -1: not set (read the environment on first use), else an RmsNormFwdPath.
std::atomic<int> g_fwd_path{-1};

}  // namespace

namespace detail {

RowConfigKnobs rmsnorm_fwd_knobs(DType x) {
  RowConfigKnobs k;
  k.values_per_thread = kNormFwdVectorsPerThread * vec_elems(x);
  k.max_cta_threads = kNormMaxCtaThreads;
  k.max_cta_row_threads = 256;
  k.min_cta_threads = 512;  // sweep 2026-11-30: bf16 N=32768 2.09 -> 3.23 TB/s, N=4096 3.13 -> 3.16
  return k;
}

RowConfigKnobs rmsnorm_bwd_knobs(DType x) {
  RowConfigKnobs k;
  k.values_per_thread = kNormBwdVectorsPerThread * vec_elems(x);
  k.max_cta_threads = kNormBwdMaxCtaThreads;
  k.max_cta_row_threads = 512;
  k.min_cta_threads = 256;  // sweep 2026-11-30: bf16 N=4096 2.77 -> 2.99, N=32768 3.12 -> 3.18
  // Two row blocks in flight (RowPipeline's kStages). 4 stages leave one CTA per SM (bf16
  // 16384 x 4096: -17 %) and move long rows by ±0.5 % (9b38c55, session 6); a runtime stage
  // count (a4545bb, reverted) cost 8-35 % by itself.
  return k;
}

void rmsnorm_fwd_with_knobs(const RmsNormFwdArgs& a, const RowConfigKnobs& knobs,
                            cudaStream_t stream) {
  const FwdPlan plan = plan_fwd(a, knobs);
  if (a.x.shape[0] == 0) return;
  DeviceGuard guard(a.x.device);
  launch_rmsnorm_fwd(plan.p, plan.vec_path, a.x.device, stream);
}

RmsNormFwdPath rmsnorm_fwd_path() {
  int v = g_fwd_path.load(std::memory_order_relaxed);
  if (v < 0) {
    v = static_cast<int>(path_from_env());  // throws on a bad value (and again next call)
    int expected = -1;
    if (!g_fwd_path.compare_exchange_strong(expected, v)) v = expected;  // a setter won
  }
  return static_cast<RmsNormFwdPath>(v);
}

void set_rmsnorm_fwd_path(RmsNormFwdPath path) { g_fwd_path.store(static_cast<int>(path)); }

void rmsnorm_fwd_with_path(const RmsNormFwdArgs& a, RmsNormFwdPath path, int simple_config,
                           cudaStream_t stream) {
  const FwdPlan plan = plan_fwd(a, rmsnorm_fwd_knobs(a.x.dtype),
                                path == RmsNormFwdPath::kSimple ? simple_config : -2);
  if (a.x.shape[0] == 0) return;
  DeviceGuard guard(a.x.device);
  if (plan.simple >= 0)
    launch_rmsnorm_fwd_simple(plan.p, plan.simple, a.x.device, stream);
  else
    launch_rmsnorm_fwd(plan.p, plan.vec_path, a.x.device, stream);
}

int rmsnorm_fwd_simple_config(const RmsNormFwdArgs& a, int simple_config) {
  return plan_fwd(a, rmsnorm_fwd_knobs(a.x.dtype), simple_config < 0 ? -1 : simple_config)
      .simple;
}

bool rmsnorm_fwd_vector_path(const RmsNormFwdArgs& a) {
  return plan_fwd(a, rmsnorm_fwd_knobs(a.x.dtype)).vec_path;
}

}  // namespace detail

void rmsnorm_fwd(const RmsNormFwdArgs& a, cudaStream_t stream) {
  detail::rmsnorm_fwd_with_path(a, detail::rmsnorm_fwd_path(), -1, stream);
}

namespace {

struct BwdPlan {
  detail::RmsNormBwdParams p;
  bool vec_path = false;
  int64_t grid = 0;  // persistent clusters; P of the partial sums
  size_t workspace = 0;
};

// Validation and path/geometry choice of the backward (no CUDA call); plan_bwd adds the grid.
BwdPlan plan_bwd_path(const RmsNormBwdArgs& a, const detail::RowConfigKnobs& knobs,
                      const char* fn) {
  ArgCheck chk(fn);
  chk.matrix(a.x, "x", -1, -1);
  chk.float_dtype(a.x, "x");
  const int64_t M = a.x.shape[0], N = a.x.shape[1];
  const int dev = a.x.device;
  if (a.weight.present()) check_n(chk, a.weight, "weight", N, dev, false);
  check_mn(chk, a.dout, "dout", M, N, dev, false);
  check_rstd(chk, a.rstd, M, dev, /*output=*/false);
  if (a.dresidual_out.present()) check_mn(chk, a.dresidual_out, "dresidual_out", M, N, dev, false);
  check_mn(chk, a.dx, "dx", M, N, dev, true);
  if (a.dresidual.present()) check_mn(chk, a.dresidual, "dresidual", M, N, dev, true);
  if (a.dweight.present()) {
    if (!a.weight.present()) chk.fail("dweight is given but weight is absent, expected both");
    check_n(chk, a.dweight, "dweight", N, dev, true);
  }
  if (a.dbias.present()) check_n(chk, a.dbias, "dbias", N, dev, true);
  if (N == 0 && M > 0) chk.fail("x has N = 0 columns, expected N ≥ 1");

  BwdPlan plan;
  if (M == 0 || N == 0) return plan;
  const int vec = vec_elems(a.x.dtype);
  const bool layout_ok = detail::vector_ok(a.x, vec) &&
                         detail::vector_ok(a.dout, vec) && detail::vector_ok(a.dresidual_out, vec) &&
                         detail::vector_ok(a.dx, vec) && detail::vector_ok(a.dresidual, vec) &&
                         detail::vector_ok(a.weight, vec);
  auto& p = plan.p;
  plan.vec_path = choose_geometry(M, N, vec, layout_ok, knobs, &p.g);
  p.x = detail::row_io(a.x);
  p.dout = detail::row_io(a.dout);
  p.dresidual_out = detail::row_io(a.dresidual_out);
  p.dx = detail::row_io(a.dx);
  p.dresidual = detail::row_io(a.dresidual);
  p.weight = detail::row_io(a.weight);
  p.rstd = static_cast<const float*>(a.rstd.data);
  p.rstd_stride = a.rstd.stride[0];
  p.inv_n = 1.f / static_cast<float>(N);
  const int64_t slice = int64_t(p.g.vpt) * p.g.tpr * p.g.vec;  // staged by the copy engine
  if (plan.vec_path &&
      (!detail::staged_ok(a.x, slice) || !detail::staged_ok(a.dout, slice) ||
       !detail::staged_ok(a.weight, slice) ||
       !fit_shared_memory(M, N, knobs, &p.g, [&] { return detail::rmsnorm_bwd_smem(p); }))) {
    plan.vec_path = false;
    p.g = detail::make_general_geometry(M, N);
  }
  return plan;
}

BwdPlan plan_bwd(const RmsNormBwdArgs& a, const detail::RowConfigKnobs& knobs, const char* fn) {
  BwdPlan plan = plan_bwd_path(a, knobs, fn);
  const int64_t M = a.x.shape[0], N = a.x.shape[1];
  if (M == 0 || N == 0) return plan;
  auto& p = plan.p;
  const int partials = (a.dweight.present() ? 1 : 0) + (a.dbias.present() ? 1 : 0);
  plan.grid = detail::rmsnorm_bwd_grid(p, plan.vec_path, a.dweight.present(), a.dbias.present(),
                                       a.x.device);
  plan.workspace = static_cast<size_t>(partials) * plan.grid * N * sizeof(float);
  return plan;
}

}  // namespace

size_t rmsnorm_bwd_workspace_size(const RmsNormBwdArgs& args) {
  return plan_bwd(args, detail::rmsnorm_bwd_knobs(args.x.dtype), "rmsnorm_bwd_workspace_size")
      .workspace;
}

void rmsnorm_bwd(const RmsNormBwdArgs& a, void* workspace, size_t workspace_bytes,
                 cudaStream_t stream) {
  detail::rmsnorm_bwd_with_knobs(a, detail::rmsnorm_bwd_knobs(a.x.dtype), workspace,
                                 workspace_bytes, stream);
}

namespace detail {

size_t rmsnorm_bwd_workspace_size_with_knobs(const RmsNormBwdArgs& a, const RowConfigKnobs& k) {
  return plan_bwd(a, k, "rmsnorm_bwd_workspace_size").workspace;
}

bool rmsnorm_bwd_vector_path(const RmsNormBwdArgs& a) {
  return plan_bwd_path(a, rmsnorm_bwd_knobs(a.x.dtype), "rmsnorm_bwd").vec_path;
}

void rmsnorm_bwd_with_knobs(const RmsNormBwdArgs& a, const RowConfigKnobs& knobs,
                            void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  BwdPlan plan = plan_bwd(a, knobs, "rmsnorm_bwd");
  ArgCheck chk("rmsnorm_bwd");
  if (workspace_bytes < plan.workspace)
    chk.fail("workspace has " + std::to_string(workspace_bytes) + " bytes, expected at least " +
             std::to_string(plan.workspace) + " (rmsnorm_bwd_workspace_size)");
  if (plan.workspace > 0 && reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
    chk.fail("workspace is not 16-byte aligned");
  const int64_t M = a.x.shape[0], N = a.x.shape[1];
  if (N == 0) return;
  detail::DeviceGuard guard(a.x.device);
  auto& p = plan.p;
  float* ws = static_cast<float*>(workspace);
  if (M > 0) {
    p.dweight_part = a.dweight.present() ? ws : nullptr;
    p.dbias_part = a.dbias.present() ? ws + (a.dweight.present() ? plan.grid * N : 0) : nullptr;
    detail::launch_rmsnorm_bwd(p, plan.vec_path, plan.grid, stream);
  }
  // P = 0 rows of partials (M == 0) makes colsum write zeros.
  const int64_t P = M > 0 ? plan.grid : 0;
  if (a.dweight.present())
    detail::launch_colsum(p.dweight_part, P, N, detail::row_io(a.dweight), stream, "rmsnorm_bwd");
  if (a.dbias.present())
    detail::launch_colsum(p.dbias_part, P, N, detail::row_io(a.dbias), stream, "rmsnorm_bwd");
}

}  // namespace detail

}  // namespace quack
