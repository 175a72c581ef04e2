// Linear + cross-entropy public API (quack/linear_cross_entropy.h): validation at the boundary,
// the plan (lce_plan.h), and the passes over token chunks and vocabulary slices on one stream:
// our GEMM (quack/gemm.h), the cross-entropy row kernels (src/cross_entropy/, driven through
// their internal call builders so that one prep kernel counts the targets of all chunks), and
// the small kernels of lce_aux.cu. Host only.
#include "quack/linear_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/check.h"
#include "common/launch.h"
#include "cross_entropy/cross_entropy_aux.h"
#include "cross_entropy/cross_entropy_internal.h"
#include "cross_entropy/cross_entropy_params.h"
#include "linear_cross_entropy/lce_aux.h"
#include "linear_cross_entropy/lce_plan.h"
#include "quack/gemm.h"
#include "row/row_op.h"

namespace quack {

namespace detail {

namespace {

constexpr const char* kFwd = "linear_cross_entropy_fwd";
constexpr const char* kBwd = "linear_cross_entropy_bwd";
constexpr const char* kScale = "linear_cross_entropy_scale_grad";
constexpr size_t kBudget = size_t{1} << 30;       // logits bytes per chunk or slice
constexpr size_t kBudgetLow = size_t{512} << 20;  // kLowMemory's
constexpr size_t kBudgetMin = size_t{64} << 20;   // floor of free_bytes / 4
constexpr int64_t kAlignRows = 128;               // chunk and slice granularity (GEMM tiles)
constexpr DType kBF16 = DType::kBFloat16, kF16 = DType::kFloat16, kF32 = DType::kFloat32;

std::string str(int64_t v) { return std::to_string(v); }
int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }
int64_t ceil_div(int64_t x, int64_t a) { return (x + a - 1) / a; }
size_t align256(size_t x) { return (x + 255) / 256 * 256; }

// ---- validation ------------------------------------------------------------------------------

// A row-major operand of the GEMMs: unit column stride, row stride ≥ cols and a multiple of 16
// bytes, 16-byte aligned base (the TMA rules, checked here so the message names this function).
void check_rowmajor(const ArgCheck& chk, const TensorRef& t, const char* name, int64_t rows,
                    int64_t cols, std::initializer_list<DType> dtypes, int device, bool output) {
  chk.matrix(t, name, rows, cols);
  chk.dtype_in(t, name, dtypes);
  chk.same_device(t, name, device);
  chk.no_negative_strides(t, name);
  if (output) chk.non_overlapping(t, name);
  if (t.numel() == 0) return;
  const int64_t align = 16 / dtype_size(t.dtype);
  const std::string n(name);
  if (t.shape[1] > 1 && t.stride[1] != 1)
    chk.fail(n + " " + describe_full(t) + " has column stride " + str(t.stride[1]) +
             ", expected 1 (row-major rows for the GEMM)");
  if (t.shape[0] > 1 && (t.stride[0] < t.shape[1] || t.stride[0] % align != 0))
    chk.fail(n + " " + describe_full(t) + " has row stride " + str(t.stride[0]) +
             ", expected a multiple of " + str(align) + " elements (16 bytes, the GEMM's TMA) " +
             "and at least " + str(t.shape[1]) + "; pad the rows");
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    chk.fail(n + " " + describe_full(t) +
             " is not 16-byte aligned, expected a 16-byte aligned "
             "base (the GEMM's TMA)");
}

void check_vec(const ArgCheck& chk, const TensorRef& t, const char* name, int64_t n,
               std::initializer_list<DType> dtypes, int device, bool output) {
  chk.vector(t, name, n);
  chk.dtype_in(t, name, dtypes);
  chk.same_device(t, name, device);
  chk.no_negative_strides(t, name);
  if (output) chk.non_overlapping(t, name);
}

struct Shapes {
  int64_t T = 0, D = 0, V = 0;
  int device = 0;
};

Shapes check_common(const ArgCheck& chk, const TensorRef& x, const TensorRef& weight,
                    const TensorRef& bias, const TensorRef& target, const TensorRef& dx,
                    const TensorRef& dweight, const TensorRef& dbias) {
  chk.required(x, "x");
  if (x.ndim != 2)
    chk.fail("x has " + str(x.ndim) + " dimensions " + describe(x) + ", expected 2 (T, D)");
  Shapes s;
  s.T = x.shape[0];
  s.D = x.shape[1];
  s.device = x.device;
  check_rowmajor(chk, x, "x", s.T, s.D, {kBF16, kF16}, s.device, false);
  chk.required(weight, "weight");
  if (weight.ndim != 2)
    chk.fail("weight has " + str(weight.ndim) + " dimensions " + describe(weight) +
             ", expected 2 (V, D)");
  check_rowmajor(chk, weight, "weight", -1, s.D, {x.dtype}, s.device, false);
  s.V = weight.shape[0];
  if (s.T > 0 && s.V < 1)
    chk.fail("weight has shape " + describe(weight) +
             ", expected V ≥ 1 classes (every non-ignored target must be a class)");
  if (s.V >= (int64_t{1} << 31))
    chk.fail("weight has V = " + str(s.V) + " classes, expected < 2^31");
  if (bias.present()) check_vec(chk, bias, "bias", s.V, {x.dtype}, s.device, false);
  chk.required(target, "target");
  check_vec(chk, target, "target", s.T, {DType::kInt32, DType::kInt64}, s.device, false);
  if (dx.present()) check_rowmajor(chk, dx, "dx", s.T, s.D, {x.dtype, kF32}, s.device, true);
  if (dweight.present())
    check_rowmajor(chk, dweight, "dweight", s.V, s.D, {x.dtype, kF32}, s.device, true);
  if (dbias.present()) {
    if (!bias.present()) chk.fail("dbias is given without bias, expected no dbias");
    check_vec(chk, dbias, "dbias", s.V, {x.dtype, kF32}, s.device, true);
  }
  return s;
}

void check_options(const ArgCheck& chk, float eps, float zs, float cap,
                   LinearCrossEntropyMode mode) {
  if (!(eps >= 0.f && eps <= 1.f))
    chk.fail("label_smoothing is " + format_float(eps) + ", expected a value in [0, 1]");
  if (!(zs >= 0.f && std::isfinite(zs)))
    chk.fail("z_loss_scale (Python: z_loss) is " + format_float(zs) +
             ", expected a finite value ≥ 0");
  if (!(cap >= 0.f && std::isfinite(cap)))
    chk.fail("logit_softcap is " + format_float(cap) +
             ", expected a finite value > 0 (or 0: no softcap)");
  const int m = static_cast<int>(mode);
  if (m != 0 && m != 1)
    chk.fail("mode has value " + str(m) + ", expected kDefault (0) or kLowMemory (1)");
}

void check_workspace(const ArgCheck& chk, const LcePlan& p, const void* ws, size_t bytes,
                     const char* query) {
  if (p.total == 0) return;
  if (ws == nullptr || bytes < p.total)
    chk.fail("workspace has " + std::to_string(ws == nullptr ? 0 : bytes) + " bytes, expected ≥ " +
             std::to_string(p.total) + " (" + query + ")");
  if (reinterpret_cast<uintptr_t>(ws) % 256 != 0)
    chk.fail("workspace is not 256-byte aligned, expected a 256-byte aligned device pointer");
}

// ---- layout helpers ----------------------------------------------------------------------------

struct Region {
  size_t off = 0;
  void add(size_t& at, size_t& bytes, size_t n) {
    at = off;
    bytes = n;
    off += align256(n);
  }
};

// Columns per vocabulary slice (kept in step with the budget and the buffer's row stride).
int64_t vocab_slice(int64_t T, int64_t v_begin, int64_t V, int elt, LinearCrossEntropyMode mode,
                    int64_t asked) {
  const int64_t range = V - v_begin;
  if (range <= 0) return 0;
  if (asked > 0) return std::min(round_up(asked, 8), range);
  return lce_vocab_slice(T, v_begin, V, elt, lce_logits_budget(mode, 0));
}

}  // namespace

size_t lce_logits_budget(LinearCrossEntropyMode mode, size_t free_bytes) {
  size_t b = mode == LinearCrossEntropyMode::kLowMemory ? kBudgetLow : kBudget;
  if (free_bytes > 0) b = std::min(b, std::max(free_bytes / 4, kBudgetMin));
  return b;
}

int64_t lce_vocab_slice(int64_t T, int64_t v_begin, int64_t V, int elt, size_t budget) {
  const int64_t range = V - v_begin;
  if (range <= 0) return 0;
  const double col = static_cast<double>(std::max<int64_t>(T, 1)) * elt;  // bytes per column
  if (col * static_cast<double>(round_up(range, 8)) <= static_cast<double>(budget)) return range;
  const int64_t smax =
      std::max<int64_t>(kAlignRows, static_cast<int64_t>(static_cast<double>(budget) / col) /
                                        kAlignRows * kAlignRows);
  const int64_t k = ceil_div(range, smax);
  const int64_t s = std::min(smax, round_up(ceil_div(range, k), kAlignRows));
  return s >= range ? range : s;
}

LcePlan lce_plan_fwd(const LinearCrossEntropyFwdArgs& a) {
  const ArgCheck chk(kFwd);
  const Shapes s = check_common(chk, a.x, a.weight, a.bias, a.target, a.dx, a.dweight, a.dbias);
  const int r = static_cast<int>(a.reduction);
  if (r < 0 || r > 2) chk.fail("reduction has value " + str(r) + ", expected kNone, kSum or kMean");
  const bool none = a.reduction == Reduction::kNone;
  check_vec(chk, a.loss, "loss", none ? s.T : 1, {kF32, DType::kFloat16, kBF16}, s.device, true);
  if (a.lse.present())
    check_vec(chk, a.lse, "lse", s.T, {kF32, DType::kFloat16, kBF16}, s.device, true);
  if (a.z_loss.present())
    check_vec(chk, a.z_loss, "z_loss", none ? s.T : 1, {kF32, DType::kFloat16, kBF16}, s.device,
              true);
  check_options(chk, a.label_smoothing, a.z_loss_scale, a.logit_softcap, a.mode);
  if (a.chunk_size < 0)
    chk.fail("chunk_size is " + str(a.chunk_size) + ", expected ≥ 1 tokens (or 0: the rule)");
  if (a.vocab_chunk_size < 0)
    chk.fail("vocab_chunk_size is " + str(a.vocab_chunk_size) +
             ", expected ≥ 1 columns (or 0: the rule)");

  LcePlan p;
  p.T = s.T;
  p.D = s.D;
  p.V = s.V;
  p.ld = round_up(std::max<int64_t>(s.V, 1), 8);
  p.elt = dtype_size(a.x.dtype);
  p.grads = a.dx.present() || a.dweight.present() || a.dbias.present();
  p.v_begin = s.V;
  if (s.T > 0) {
    p.chunk = a.chunk_size > 0 ? std::min(a.chunk_size, s.T)
                               : linear_cross_entropy_chunk_size(s.T, s.D, s.V, a.x.dtype, a.mode,
                                                                 a.dweight.present(), 0);
    p.n_chunks = ceil_div(s.T, p.chunk);
  }
  if (a.dweight.present() && s.T > 0 && s.D > 0) {
    if (a.dweight.dtype == kF32 || p.n_chunks == 1) {
      p.dw = LceDw::kDirect;
      p.dw_rows = s.V;
    } else {
      p.dw = LceDw::kAcc;
      const bool in_dw = !a.accumulate && a.dweight.stride[0] == s.D && s.D % 8 == 0;
      if (a.mode == LinearCrossEntropyMode::kLowMemory) {
        p.dw_rows = lce_low_memory_rows(s.V);
        p.acc_in_dw = in_dw ? p.dw_rows : 0;
        p.v_begin = p.dw_rows;
      } else {
        p.dw_rows = s.V;
        p.acc_in_dw = in_dw ? lce_split_rows(s.V) : 0;
      }
      p.dw_ws_last_direct = !a.accumulate && p.dw_rows > p.acc_in_dw;
    }
  }
  if (p.v_begin < s.V) {
    p.vslice = vocab_slice(s.T, p.v_begin, s.V, p.elt, a.mode, a.vocab_chunk_size);
    p.vslice_ld = round_up(p.vslice, 8);
    p.n_slices = ceil_div(s.V - p.v_begin, p.vslice);
  }

  Region w;
  size_t scalars_bytes = 0;
  w.add(p.off_scalars, scalars_bytes, 256);
  w.add(p.off_ce, p.ce_bytes, ce::workspace_bytes(s.T, true, a.z_loss_scale != 0.f));
  w.add(p.off_lse, p.lse_bytes, static_cast<size_t>(s.T) * 4);
  if (p.v_begin < s.V) w.add(p.off_target, p.target_bytes, static_cast<size_t>(s.T) * 4);
  const size_t chunk_elems = static_cast<size_t>(p.chunk) * static_cast<size_t>(p.ld);
  const size_t slice_elems = p.v_begin < s.V ? static_cast<size_t>(s.T) * p.vslice_ld : 0;
  w.add(p.off_logits, p.logits_bytes, std::max(chunk_elems, slice_elems) * p.elt);
  if (p.dw == LceDw::kAcc)
    w.add(p.off_acc, p.acc_bytes,
          static_cast<size_t>(p.dw_rows - p.acc_in_dw) * round_up(s.D, 8) * 4);
  if (a.dbias.present() && s.T > 0) w.add(p.off_dbias, p.dbias_bytes, static_cast<size_t>(s.V) * 4);
  p.total = w.off;
  return p;
}

LcePlan lce_plan_bwd(const LinearCrossEntropyBwdArgs& a) {
  const ArgCheck chk(kBwd);
  const Shapes s = check_common(chk, a.x, a.weight, a.bias, a.target, a.dx, a.dweight, a.dbias);
  check_vec(chk, a.lse, "lse", s.T, {kF32, DType::kFloat16, kBF16}, s.device, false);
  chk.required(a.dloss, "dloss");
  const bool one = a.dloss.ndim == 1 && a.dloss.shape[0] == 1 && s.T != 1;
  check_vec(chk, a.dloss, "dloss", one ? 1 : s.T, {kF32, DType::kFloat16, kBF16}, s.device, false);
  check_options(chk, a.label_smoothing, a.z_loss_scale, a.logit_softcap, a.mode);
  if (a.vocab_chunk_size < 0)
    chk.fail("vocab_chunk_size is " + str(a.vocab_chunk_size) +
             ", expected ≥ 1 columns (or 0: the rule)");

  LcePlan p;
  p.T = s.T;
  p.D = s.D;
  p.V = s.V;
  p.elt = dtype_size(a.x.dtype);
  p.ld = round_up(std::max<int64_t>(s.V, 1), 8);
  p.grads = true;
  p.v_begin = s.T > 0 ? 0 : s.V;
  if (p.v_begin < s.V) {
    p.vslice = vocab_slice(s.T, 0, s.V, p.elt, a.mode, a.vocab_chunk_size);
    p.vslice_ld = round_up(p.vslice, 8);
    p.n_slices = ceil_div(s.V, p.vslice);
  }
  p.dx_acc = a.dx.present() && a.dx.dtype != kF32 && p.n_slices > 1 && s.D > 0;
  Region w;
  size_t scalars_bytes = 0;
  w.add(p.off_scalars, scalars_bytes, 256);
  if (p.v_begin < s.V) {
    w.add(p.off_target, p.target_bytes, static_cast<size_t>(s.T) * 4);
    w.add(p.off_logits, p.logits_bytes,
          static_cast<size_t>(s.T) * static_cast<size_t>(p.vslice_ld) * p.elt);
  }
  if (p.dx_acc) w.add(p.off_acc, p.acc_bytes, static_cast<size_t>(s.T) * round_up(s.D, 8) * 4);
  p.total = w.off;
  return p;
}

namespace {

// ---- the passes ----------------------------------------------------------------------------

TensorRef rows_of(const TensorRef& t, int64_t r0, int64_t n) {
  TensorRef r = t;
  r.data = static_cast<char*>(t.data) + r0 * t.stride[0] * dtype_size(t.dtype);
  r.shape[0] = n;
  return r;
}

TensorRef elems_of(const TensorRef& t, int64_t i0, int64_t n) { return rows_of(t, i0, n); }

void zero_fill(const TensorRef& t, cudaStream_t s, const char* where) {
  if (!t.present() || t.numel() == 0) return;
  const size_t es = dtype_size(t.dtype);
  const size_t width = t.ndim == 1 ? es : static_cast<size_t>(t.shape[1]) * es;
  const size_t height = static_cast<size_t>(t.shape[0]);
  const size_t pitch = std::max(width, static_cast<size_t>(t.stride[0]) * es);
  check_cuda(cudaMemset2DAsync(t.data, pitch, 0, width, height, s), where, "cudaMemset2DAsync");
}

void run_gemm(const TensorRef& a, const TensorRef& b, const TensorRef& d, bool add,
              cudaStream_t s) {
  GemmArgs g;
  g.a = a;
  g.b = b;
  g.d = d;
  if (add) {
    g.c = d;
    g.beta = 1.f;
  }
  gemm(g, s);
}

// What both passes share: the inputs, the options, the workspace and the stream.
struct Ctx {
  const LcePlan& p;
  const TensorRef &x, &weight, &bias, &target;
  int64_t ignore_index;
  float eps, zs, cap;
  char* ws;
  int device;
  cudaStream_t s;
  const char* fn;

  void* logits_buf() const { return ws + p.off_logits; }
  float* lse() const { return reinterpret_cast<float*>(ws + p.off_lse); }
  float* scalars() const { return reinterpret_cast<float*>(ws + p.off_scalars); }

  /// (rn, vn) logits of tokens [r0, r0 + rn) and classes [v0, v0 + vn) into buf (row stride ld):
  /// bias (or 0) filled first when there is one, then x·Wᵀ added by the GEMM (C = D).
  TensorRef logits(int64_t r0, int64_t rn, int64_t v0, int64_t vn, void* buf, int64_t ld) const {
    const TensorRef L = TensorRef::matrix(buf, x.dtype, rn, vn, device, ld, 1);
    const bool with_bias = bias.present();
    if (with_bias || p.D == 0) {
      LceFillParams q;
      q.dst = buf;
      q.dtype = x.dtype;
      q.rows = rn;
      q.cols = vn;
      q.ld = ld;
      if (with_bias) q.bias = row_io(elems_of(bias, v0, vn));
      launch_lce_fill(q, s, fn);
    }
    if (p.D > 0) {
      const TensorRef wt = TensorRef::matrix(
          static_cast<char*>(weight.data) + v0 * weight.stride[0] * dtype_size(weight.dtype),
          weight.dtype, p.D, vn, device, 1, weight.stride[0]);
      run_gemm(rows_of(x, r0, rn), wt, L, with_bias, s);
    }
    return L;
  }

  /// dbias (+)= Σ_rows of the (rows, cols) gradient chunk L.
  void colsum(const TensorRef& L, const TensorRef& out, bool add) const {
    LceColsumParams q;
    q.src = L.data;
    q.dtype = L.dtype;
    q.rows = L.shape[0];
    q.cols = L.shape[1];
    q.ld = L.stride[0];
    q.out = row_io(out);
    q.add = add;
    launch_lce_colsum(q, s, fn);
  }

  /// dst (rows, cols) (+)= the fp32 matrix at src (row stride ld_src).
  void cast(const float* src, int64_t ld_src, const TensorRef& dst, bool add) const {
    LceCastParams q;
    q.src = src;
    q.ld_src = ld_src;
    q.dst = row_io(dst);
    q.add = add;
    if (dst.ndim == 1) {
      q.rows = 1;
      q.cols = dst.shape[0];
    } else {
      q.rows = dst.shape[0];
      q.cols = dst.shape[1];
      q.vec = q.cols % 8 == 0 && ld_src % 8 == 0 && dst.stride[1] == 1 &&
              (q.rows == 1 || dst.stride[0] % 8 == 0) &&
              reinterpret_cast<uintptr_t>(dst.data) % 16 == 0 &&
              reinterpret_cast<uintptr_t>(src) % 16 == 0;
    }
    launch_lce_cast(q, device, s, fn);
  }

  /// The vocabulary pass over [p.v_begin, V): per slice the logits of all T tokens, the CE
  /// backward from lse with `dloss` in place, then dweight rows (GEMM, K = T), dbias entries
  /// (column sums) and dx (accumulated across slices).
  void vocab_pass(const TensorRef& lse_ref, const TensorRef& dloss, const TensorRef& dx,
                  const TensorRef& dweight, const TensorRef& dbias, bool accumulate) const {
    int32_t* shifted = reinterpret_cast<int32_t*>(ws + p.off_target);
    const TensorRef dx_acc =
        p.dx_acc ? TensorRef::matrix(ws + p.off_acc, kF32, p.T, p.D, device, round_up(p.D, 8), 1)
                 : dx;
    for (int64_t v0 = p.v_begin; v0 < p.V; v0 += p.vslice) {
      const int64_t vn = std::min(p.vslice, p.V - v0);
      LceShiftParams q;
      q.target = row_vector_io(target);
      q.out = shifted;
      q.T = p.T;
      q.v0 = v0;
      q.V = p.V;
      q.ignore_index = ignore_index;
      launch_lce_shift(q, s, fn);
      const TensorRef L = logits(0, p.T, v0, vn, logits_buf(), p.vslice_ld);
      CrossEntropyBwdArgs b;
      b.x = L;
      b.dx = L;
      b.target = TensorRef::vector(shifted, DType::kInt32, p.T, device);
      b.lse = lse_ref;
      b.dloss = dloss;
      b.ignore_index = -1;  // the shifted ignore_index (lce_aux.h)
      b.label_smoothing = eps;
      b.z_loss_scale = zs;
      b.logit_softcap = cap;
      RowCall rc = cross_entropy_bwd_call(b);
      ce::set_classes(rc.p, p.V);  // the slice is columns [0, vn) of a V-class row
      run_row_call(rc, s);
      if (p.D > 0 && dweight.present()) {
        const TensorRef lt = TensorRef::matrix(L.data, L.dtype, vn, p.T, device, 1, p.vslice_ld);
        run_gemm(lt, x, rows_of(dweight, v0, vn), accumulate, s);
      }
      if (dbias.present()) colsum(L, elems_of(dbias, v0, vn), accumulate);
      if (p.D > 0 && dx.present()) run_gemm(L, rows_of(weight, v0, vn), dx_acc, v0 > p.v_begin, s);
    }
    if (p.dx_acc) cast(static_cast<const float*>(dx_acc.data), dx_acc.stride[0], dx, false);
  }
};

void run_fwd(const LinearCrossEntropyFwdArgs& a, const LcePlan& p, cudaStream_t s) {
  const bool none = a.reduction == Reduction::kNone, mean = a.reduction == Reduction::kMean;
  const int device = a.x.device;
  const DeviceGuard guard(device, kFwd);
  char* ws = static_cast<char*>(a.workspace);
  const Ctx c{p,
              a.x,
              a.weight,
              a.bias,
              a.target,
              a.ignore_index,
              a.label_smoothing,
              a.z_loss_scale,
              a.logit_softcap,
              ws,
              device,
              s,
              kFwd};
  float* dev = reinterpret_cast<float*>(ws + p.off_ce);  // the CE prep kernel's scalars
  float* ce_rows = reinterpret_cast<float*>(ws + p.off_ce + ce::kScalarBytes);
  const size_t row_bytes = (static_cast<size_t>(p.T) * 4 + 15) / 16 * 16;
  float* z_rows = a.z_loss_scale != 0.f
                      ? reinterpret_cast<float*>(ws + p.off_ce + ce::kScalarBytes + row_bytes)
                      : nullptr;
  if (mean) {
    CePrepParams q;
    q.target = row_vector_io(a.target);
    q.dev = dev;
    q.M = p.T;
    q.V = p.V;
    q.ignore_index = a.ignore_index;
    launch_ce_prep(q, s, kFwd);  // the denominators of all T rows, before any chunk
  }

  // ---- token-chunk pass
  const TensorRef dw_in =
      p.acc_in_dw > 0 ? TensorRef::matrix(a.dweight.data, kF32, p.acc_in_dw, p.D, device, p.D, 1)
                      : TensorRef();
  const TensorRef dw_ws = p.dw == LceDw::kAcc && p.dw_rows > p.acc_in_dw
                              ? TensorRef::matrix(ws + p.off_acc, kF32, p.dw_rows - p.acc_in_dw,
                                                  p.D, device, round_up(p.D, 8), 1)
                              : TensorRef();
  const TensorRef db_acc = a.dbias.present() && p.T > 0
                               ? TensorRef::vector(ws + p.off_dbias, kF32, p.V, device)
                               : TensorRef();
  for (int64_t k = 0; k < p.n_chunks; ++k) {
    const int64_t c0 = k * p.chunk, cn = std::min(p.chunk, p.T - c0);
    const TensorRef L = c.logits(c0, cn, 0, p.V, c.logits_buf(), p.ld);
    CrossEntropyFwdArgs ca;
    ca.x = L;
    ca.target = elems_of(a.target, c0, cn);
    ca.loss = none ? elems_of(a.loss, c0, cn) : a.loss;
    if (none && a.z_loss.present()) ca.z_loss = elems_of(a.z_loss, c0, cn);
    ca.lse = TensorRef::vector(c.lse() + c0, kF32, cn, device);
    if (p.grads) ca.dx = L;  // the gradient in place of the logits
    ca.ignore_index = a.ignore_index;
    ca.reduction = a.reduction;
    ca.label_smoothing = a.label_smoothing;
    ca.z_loss_scale = a.z_loss_scale;
    ca.logit_softcap = a.logit_softcap;
    ca.workspace = dev;
    ca.workspace_bytes = p.ce_bytes;
    CeFwdCall call = cross_entropy_fwd_call(ca);
    if (!none) {  // per-row parts of all T rows for one finish (and the prep's scales for mean)
      RowIO rows;
      rows.ptr = ce_rows + c0;
      rows.row_stride = 1;
      call.row.p.row_out[ce::kLoss] = rows;
      if (z_rows) {
        rows.ptr = z_rows + c0;
        call.row.p.row_out[ce::kZ] = rows;
      }
    }
    run_row_call(call.row, plan_row_call(call.row), s);
    if (!p.grads) continue;
    const TensorRef xc = rows_of(a.x, c0, cn);
    if (a.dx.present() && p.D > 0) run_gemm(L, a.weight, rows_of(a.dx, c0, cn), false, s);
    const auto lt = [&](int64_t r0, int64_t rn) {  // L[:, r0:r0+rn]ᵀ, (rn, cn) column-major
      return TensorRef::matrix(static_cast<char*>(L.data) + r0 * p.elt, L.dtype, rn, cn, device, 1,
                               p.ld);
    };
    if (p.dw == LceDw::kDirect) {
      run_gemm(lt(0, p.V), xc, a.dweight, a.accumulate || k > 0, s);
    } else if (p.dw == LceDw::kAcc) {
      const bool last = k + 1 == p.n_chunks;
      if (dw_in.present()) run_gemm(lt(0, p.acc_in_dw), xc, dw_in, k > 0, s);
      if (dw_ws.present() && last && p.dw_ws_last_direct) {
        // Rows [0, acc_in_dw) are final: their 16-bit rows free the bytes that rows
        // [acc_in_dw, dw_rows) take in dweight; those are then stored by their last GEMM,
        // dweight rows = acc + their fp32 accumulator (the _cf32 instance: the same fp32 sum,
        // rounded once, as the cast at the end).
        if (p.acc_in_dw > 0)
          launch_lce_compact(a.dweight.data, p.acc_in_dw * p.D, a.dweight.dtype, device, s, kFwd);
        GemmArgs g;
        g.a = lt(p.acc_in_dw, p.dw_rows - p.acc_in_dw);
        g.b = xc;
        g.d = rows_of(a.dweight, p.acc_in_dw, p.dw_rows - p.acc_in_dw);
        g.c = dw_ws;
        g.beta = 1.f;
        gemm(g, s);
      } else if (dw_ws.present()) {
        run_gemm(lt(p.acc_in_dw, p.dw_rows - p.acc_in_dw), xc, dw_ws, k > 0, s);
      }
    }
    if (db_acc.present()) c.colsum(L, db_acc, k > 0);
  }

  // ---- reductions, lse, the accumulators into the outputs
  if (!none) {
    CeFinishParams f;
    f.ce_rows = ce_rows;
    f.z_rows = z_rows;
    f.dev = dev;
    f.loss = row_vector_io(a.loss);
    f.z = row_vector_io(a.z_loss);
    f.M = p.T;
    f.mean = mean;
    launch_ce_finish(f, s, kFwd);
  }
  if (a.lse.present() && p.T > 0) c.cast(c.lse(), p.T, a.lse, false);
  if (p.dw == LceDw::kAcc && !p.dw_ws_last_direct) {
    if (p.acc_in_dw > 0)
      launch_lce_compact(a.dweight.data, p.acc_in_dw * p.D, a.dweight.dtype, device, s, kFwd);
    if (dw_ws.present())
      c.cast(static_cast<const float*>(dw_ws.data), dw_ws.stride[0],
             rows_of(a.dweight, p.acc_in_dw, p.dw_rows - p.acc_in_dw), a.accumulate);
  }
  if (db_acc.present()) c.cast(static_cast<const float*>(db_acc.data), p.V, a.dbias, a.accumulate);
  if (p.T == 0 || p.D == 0) {  // no GEMM wrote dweight
    if (!a.accumulate) zero_fill(a.dweight, s, kFwd);
  }
  if (p.T == 0 && !a.accumulate) zero_fill(a.dbias, s, kFwd);

  // ---- vocabulary pass (kLowMemory): dweight rows [v_begin, V) from the lse of all rows
  if (p.v_begin < p.V) {
    TensorRef dloss;
    if (mean) {
      dloss = TensorRef::vector(dev + ce::kScaleCe, kF32, 1, device);
    } else {
      launch_lce_set(c.scalars(), 1.f, s, kFwd);
      dloss = TensorRef::vector(c.scalars(), kF32, 1, device);
    }
    c.vocab_pass(TensorRef::vector(c.lse(), kF32, p.T, device), dloss, TensorRef(), a.dweight,
                 TensorRef(), a.accumulate);
  }
}

void run_bwd(const LinearCrossEntropyBwdArgs& a, const LcePlan& p, cudaStream_t s) {
  const int device = a.x.device;
  const DeviceGuard guard(device, kBwd);
  const Ctx c{p,
              a.x,
              a.weight,
              a.bias,
              a.target,
              a.ignore_index,
              a.label_smoothing,
              a.z_loss_scale,
              a.logit_softcap,
              static_cast<char*>(a.workspace),
              device,
              s,
              kBwd};
  if (p.T == 0 || p.D == 0) {
    if (!a.accumulate) zero_fill(a.dweight, s, kBwd);
  }
  if (p.T == 0) {
    if (!a.accumulate) zero_fill(a.dbias, s, kBwd);
    return;
  }
  c.vocab_pass(a.lse, a.dloss, a.dx, a.dweight, a.dbias, a.accumulate);
}

}  // namespace

}  // namespace detail

int64_t linear_cross_entropy_chunk_size(int64_t T, int64_t D, int64_t V, DType x_dtype,
                                        LinearCrossEntropyMode mode, bool need_dweight,
                                        size_t free_bytes) {
  using detail::kAlignRows;
  if (T <= 0) return 0;
  const int elt = std::max(dtype_size(x_dtype), 1);
  const double row = static_cast<double>(detail::round_up(std::max<int64_t>(V, 1), 8)) * elt;
  const double budget = static_cast<double>(detail::lce_logits_budget(mode, free_bytes));
  const double single = static_cast<double>(T) * row;
  if (single <= budget) return T;
  const int64_t cmax =
      std::max<int64_t>(kAlignRows, static_cast<int64_t>(budget / row) / kAlignRows * kAlignRows);
  const int64_t k = detail::ceil_div(T, cmax);
  const int64_t c = std::min(cmax, detail::round_up(detail::ceil_div(T, k), kAlignRows));
  if (c >= T) return T;
  if (mode == LinearCrossEntropyMode::kDefault && need_dweight) {
    // Chunks add the fp32 accumulator's workspace half (the other half is inside dweight);
    // one chunk of all T tokens needs none.
    const double multi =
        static_cast<double>(c) * row + 4.0 * static_cast<double>(V - detail::lce_split_rows(V)) *
                                           static_cast<double>(std::max<int64_t>(D, 0));
    const bool fits = free_bytes == 0 || single <= static_cast<double>(free_bytes) / 2;
    if (single <= multi && fits) return T;
  }
  return c;
}

size_t linear_cross_entropy_fwd_workspace_size(const LinearCrossEntropyFwdArgs& args) {
  return detail::lce_plan_fwd(args).total;
}

void linear_cross_entropy_fwd(const LinearCrossEntropyFwdArgs& args, cudaStream_t stream) {
  const detail::LcePlan p = detail::lce_plan_fwd(args);
  detail::check_workspace(detail::ArgCheck(detail::kFwd), p, args.workspace, args.workspace_bytes,
                          "linear_cross_entropy_fwd_workspace_size");
  detail::run_fwd(args, p, stream);
}

size_t linear_cross_entropy_bwd_workspace_size(const LinearCrossEntropyBwdArgs& args) {
  return detail::lce_plan_bwd(args).total;
}

void linear_cross_entropy_bwd(const LinearCrossEntropyBwdArgs& args, cudaStream_t stream) {
  const detail::LcePlan p = detail::lce_plan_bwd(args);
  detail::check_workspace(detail::ArgCheck(detail::kBwd), p, args.workspace, args.workspace_bytes,
                          "linear_cross_entropy_bwd_workspace_size");
  detail::run_bwd(args, p, stream);
}

void linear_cross_entropy_scale_grad(const LinearCrossEntropyScaleGradArgs& a,
                                     cudaStream_t stream) {
  using namespace detail;
  const ArgCheck chk(kScale, "grad_output");
  chk.required(a.grad_output, "grad_output");
  const int device = a.grad_output.device;
  check_vec(chk, a.grad_output, "grad_output", 1, {kF32, DType::kFloat16, kBF16}, device, false);
  const TensorRef* mats[] = {&a.dx, &a.dweight, &a.dbias};
  const char* names[] = {"dx", "dweight", "dbias"};
  TensorRef views[3];
  for (int i = 0; i < 3; ++i) {
    const TensorRef& t = *mats[i];
    if (!t.present()) continue;
    if (i == 2) {
      chk.required(t, "dbias");  // its rank before describe reads its extents
      if (t.ndim != 1)
        chk.fail("dbias has " + str(t.ndim) + " dimensions " + describe(t) + ", expected 1 (V)");
      check_vec(chk, t, names[i], t.shape[0], {kF32, DType::kFloat16, kBF16}, device, true);
      views[i] = TensorRef::matrix(t.data, t.dtype, 1, t.shape[0], device,
                                   std::max<int64_t>(t.shape[0] * t.stride[0], 1), t.stride[0]);
    } else {
      chk.matrix(t, names[i], -1, -1);
      chk.float_dtype(t, names[i]);
      chk.same_device(t, names[i], device);
      chk.non_overlapping(t, names[i]);
      views[i] = t;
    }
  }
  for (const TensorRef& v : views) {
    if (!v.present()) continue;
    CrossEntropyScaleGradArgs c;
    c.dx = v;
    c.grad_output = a.grad_output;
    cross_entropy_scale_grad(c, stream);
  }
}

}  // namespace quack
