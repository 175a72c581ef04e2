// Cross-entropy forward (with or without the gradient) and backward from lse as row-op traits
// (the skeleton: src/row/op_traits.cuh; the slots they read: cross_entropy_params.h).
//
// Row i, target t, V classes, label smoothing ε, class weights w (1 without), softcap c, z-loss
// scale zs (PyTorch's cross_entropy with label_smoothing and weight; z-loss and softcap as
// Liger-Kernel's lse_square_scale and softcap):
//
//   y_j  = c·tanh(x_j / c)        (y_j = x_j without a softcap)
//   lse  = m + ln s,  (m, s) = (max_j y_j, Σ_j e^(y_j − m))           online, one exchange
//   CE_i = (1−ε)·w_t·(lse − y_t) + (ε/V)·Σ_j w_j·(lse − y_j)
//   z_i  = zs·lse²
//   dx_j = (A·p_j − B·w_j − C·[j = t])·(1 − (y_j/c)²),   p_j = e^(y_j − lse)
//          A = ((1−ε)·w_t + (ε/V)·W)·σ_ce + 2·zs·lse·σ_z,  B = (ε/V)·σ_ce,  C = (1−ε)·w_t·σ_ce,
//          W = Σ_j w_j; σ_ce, σ_z: the row's scales (forward: 1, or for 'mean' 1 / Σ w_t and
//          1 / count from the prep kernel; backward: dloss_i for both)
//   t = ignore_index: CE, z, dx = 0 exactly (also with NaN or inf logits in the row);
//   t outside [0, V) otherwise: CE, z and the dx row NaN (never read or written out of bounds).
//
// The forward's reduction, CeRed, carries 4 floats through one exchange: (m, s) as the online
// softmax (OnlineMaxSum), Σ_j y_j (Σ_j w_j·y_j with weights and ε > 0) for the smoothing term,
// and y_t, which the one thread holding column t contributes (the others add 0). The target
// logit is thus never gathered from global memory, so dx may overwrite x (in place). Where the
// target logit comes from elsewhere (target_logit given, or lse_partial: the row is K partial
// lse's and y_t is gathered from the full logits), load_row reads it.
//
// Method: QuACK 0.2.0 (quack/cross_entropy.py: online lse in one pass, dx = softmax − one-hot
// in the forward for dloss = 1) with Liger-Kernel's options (liger_kernel/ops/cross_entropy.py:
// weights, smoothing, z-loss, softcap). fp32 math; e^x, ln x and tanh on the MUFU.
#pragma once

#include <cstdint>

#include "common/row_general.cuh"
#include "common/vec.cuh"
#include "cross_entropy/cross_entropy_params.h"
#include "row/op_traits.cuh"
#include "row/row_math.cuh"
#include "row/row_reduce.cuh"

namespace quack::detail {

inline constexpr float kCeNaN = __builtin_nanf("");

/// tanh(u) = 1 − 2 / (e^(2u) + 1) on the MUFU (ex2, rcp): absolute error ~2^-23, exactly ±1
/// for |u| > 44 (tanh.approx.f32's relative 2^-11 is too coarse for fp32 losses).
__device__ __forceinline__ float tanh_mufu(float u) {
  const float e = exp2_approx(u * (2.f * kLog2e));
  return fmaf(-2.f, rcp_approx(e + 1.f), 1.f);
}

/// The class index of `row` ((M) int32/int64 operand, any stride).
__device__ __forceinline__ int64_t ce_load_index(const RowIO& io, int64_t row) {
  const int64_t off = row * io.row_stride;
  return io.dtype == DType::kInt64 ? static_cast<const int64_t*>(io.ptr)[off]
                                   : int64_t{static_cast<const int32_t*>(io.ptr)[off]};
}

/// The row's target as the traits carry it: the class (≥ 0) of a counted row, kCeIgnored, or
/// kCeOutOfRange (a target outside [0, V) that is not ignore_index). The host rejects V ≥ 2^31,
/// so a class fits an int.
inline constexpr int kCeIgnored = -1;
inline constexpr int kCeOutOfRange = -2;
__device__ __forceinline__ int ce_target(const RowParams& p, int64_t row) {
  const int64_t t = ce_load_index(p.row_in[ce::kTarget], row);
  if (t == p.iscalar[ce::kIgnore]) return kCeIgnored;
  if (t < 0 || t >= p.iscalar[ce::kClasses]) return kCeOutOfRange;
  return static_cast<int>(t);
}

/// (m, s, Σ y, y_t): the online softmax pair, a sum and the target logit (one contributor),
/// combined in one exchange. Bitwise commutative (__fadd_rn / __fmul_rn, see row_reduce.cuh).
struct CeRed {
  static constexpr int kFloats = 4;
  static constexpr bool kOnline = true;  // all-reduces: max first, then sums (row_reduce.cuh)
  using Val = RedVal<4>;
  __device__ __forceinline__ static Val identity() { return {{kNegInf, 0.f, 0.f, 0.f}}; }
  __device__ __forceinline__ static Val combine(const Val& a, const Val& b) {
    const float m = fmaxf(a.v[0], b.v[0]);
    const float mr = m == kNegInf ? 0.f : m;
    return {{m,
             __fadd_rn(__fmul_rn(a.v[1], exp_diff(a.v[0], mr)),
                       __fmul_rn(b.v[1], exp_diff(b.v[0], mr))),
             __fadd_rn(a.v[2], b.v[2]), __fadd_rn(a.v[3], b.v[3])}};
  }
};

/// w[j] (the (V) fp32 class weights, any stride).
__device__ __forceinline__ float ce_weight(const RowParams& p, int64_t j) {
  const RowIO& w = p.vec[ce::kWeight];
  return static_cast<const float*>(w.ptr)[j * w.col_stride];
}

/// y = c·tanh(x / c) (kCap) or x.
template <bool kCap>
__device__ __forceinline__ float ce_y(const RowParams& p, float x) {
  if constexpr (kCap) return p.scalar[ce::kCap] * tanh_mufu(x * p.scalar[ce::kInvCap]);
  else return x;
}

/// The thread's CeRed value over the elements of `view`; `pick` is the target column whose y
/// goes to v[3] (−1: none). v[2]: with `smooth` (label smoothing), Σ_j w_j·y_j (kWeighted: w
/// read per element from the (V) weight vector) or Σ_j y_j; without, 0. On-chip views: the max
/// of x first from the packed values (the softcap is increasing, so max y = y(max x): one tanh
/// per element less), then one sweep for the rest (per element: one FFMA and the MUFU for the
/// exponential (ExpShift), one FADD; the softcap's tanh; Σ y only with `smooth`), and y_t
/// from the one thread holding column t (View::value_at, once per row, no per-element compare);
/// global views: one online sweep (OnlineMaxSum's).
template <bool kCap, bool kWeighted, class View>
__device__ __forceinline__ CeRed::Val ce_fold(const RowParams& p, int pick, bool smooth,
                                              const View& view) {
  const auto wy = [&](const auto& e, float y) {
    if constexpr (kWeighted) return ce_weight(p, e.col) * y;
    else return y;
  };
  float s = 0.f, sy = 0.f, yt = 0.f;
  if constexpr (View::kOnChip) {
    // With a softcap a thread without elements gets (−c, 0, 0, 0): s = 0 makes it neutral.
    const float m = ce_y<kCap>(p, view.max_in0());
    const ExpShift es = ExpShift::make(m == kNegInf ? 0.f : m);
    if (kWeighted || smooth) {
      view.for_each([&](const auto& e) {
        const float y = ce_y<kCap>(p, e.in[0]);
        s += es.term(y);
        sy += wy(e, y);
      });
    } else {
      view.for_each([&](const auto& e) { s += es.term(ce_y<kCap>(p, e.in[0])); });
    }
    float xt;
    if (pick >= 0 && view.value_at(pick, xt)) yt = ce_y<kCap>(p, xt);
    return {{m, es.normalize(s), sy, yt}};
  } else {
    float m = kNegInf;
    view.for_each([&](const auto& e) {
      const float y = ce_y<kCap>(p, e.in[0]);
      if (y > m) {
        s = s * exp_diff(m, y) + exp_diff(y, y);  // e^0 = 1; NaN for y = +inf, as on chip
        m = y;
      } else if (y != kNegInf) {
        s += exp_diff(y, m);
      }
      sy += wy(e, y);
      if (static_cast<int>(e.col) == pick) yt = y;  // columns < V < 2^31
    });
    return {{m, s, sy, yt}};
  }
}

/// What every element of a row needs for its gradient. p_j = e^(y_j − lse) takes the
/// difference first (exp_diff), so p_j = 1 exactly where y_j = lse (V = 1, or one finite
/// logit: dx exactly 0).
struct CeGradRow {
  float lse = 0.f, a = 0.f, b = 0.f, c = 0.f;
  int t = kCeIgnored;  // the one-hot column; kCeIgnored: dx = 0 exactly; kCeOutOfRange: a = NaN
};

/// The device scalar k of the prep kernel (cross_entropy_params.h), read by every thread of
/// every row: after the first row of an SM an L1 hit.
__device__ __forceinline__ float ce_dev_scalar(const RowParams& p, int k) {
  return load1(p.row_in[ce::kDevScalars], 0, k);
}

/// w[t] (1 without weights or for a row not counted).
__device__ __forceinline__ float ce_target_weight(const RowParams& p, int t) {
  return (p.iscalar[ce::kFlags] & ce::kHasWeight) && t >= 0 ? ce_weight(p, t) : 1.f;
}

/// ε/V, the host's quotient (ce::set_classes: the same fp32 division's bits). Divided here,
/// the persistent kernels hoisted the quotient out of their row loop and held it (twice: ptxas
/// did not merge the loss's and the gradient's divisions), which spilled at 64 registers
/// (cl-t256v8-s1 fwd+dx).
__device__ __forceinline__ float ce_eps_v(const RowParams& p) { return p.scalar[ce::kEpsV]; }

/// The coefficients of the row's gradient (header formula). wt = w[t], wsum = W, eps_v(): ε/V
/// (called for a counted row only), sigma_*: the row's scales; kWS: weights with ε > 0.
template <bool kWS, class EpsV>
__device__ __forceinline__ CeGradRow ce_grad_row(const RowParams& p, int t, float lse, float wt,
                                                 float wsum, EpsV&& eps_v, float sigma_ce,
                                                 float sigma_z) {
  CeGradRow r;
  r.lse = lse;
  r.t = t;
  if (t < 0) {
    r.a = t == kCeIgnored ? 0.f : kCeNaN;  // out of range: the whole row NaN
    return r;
  }
  const float eps = p.scalar[ce::kEps], zs = p.scalar[ce::kZScale];
  const float ev = eps_v();
  const float smooth = kWS ? ev * wsum : eps;  // (ε/V)·W; W = V without weights
  r.c = (1.f - eps) * wt * sigma_ce;
  r.b = ev * sigma_ce;
  r.a = ((1.f - eps) * wt + smooth) * sigma_ce;
  if (zs != 0.f) r.a += 2.f * zs * lse * sigma_z;
  return r;
}

/// dx of one element (header formula). The vector policies' part (kFixVector): kOneHot false
/// leaves out the one-hot term, kIgnore false the ignored row's zeros (ce_fix_vector's).
template <bool kCap, bool kWS, bool kOneHot = true, bool kIgnore = true>
__device__ __forceinline__ float ce_grad(const RowParams& p, const CeGradRow& r, float x,
                                         int64_t col) {
  float y = x, th = 0.f;
  if constexpr (kCap) {
    th = tanh_mufu(x * p.scalar[ce::kInvCap]);
    y = p.scalar[ce::kCap] * th;  // the fold's y (same expression)
  }
  float g = fmaf(r.a, exp_diff(y, r.lse), kWS ? -r.b * ce_weight(p, col) : -r.b);
  if constexpr (kOneHot) {
    if (r.t - static_cast<int>(col) == 0) g -= r.c;  // columns < V < 2^31
  }
  if constexpr (kCap) g *= fmaf(-th, th, 1.f);
  if constexpr (kIgnore) return r.t == kCeIgnored ? 0.f : g;
  else return g;
}

/// The vector step's fix-up (kFixVector, op_traits.cuh; instances without the softcap: with
/// it, the fix-up spilled in the 32-register kernels): out[0][i] holds
/// ce_grad<false, kWS, false, false> of column col0 + i; an ignored row's become 0 and the
/// target column's, where the vector holds it, get the one-hot (out − c: ce_grad's operations
/// in its order, so its bits; the column picked by compile-time indices, no local memory). The
/// common vector (a counted row, the target elsewhere) takes no branch; an out-of-range
/// target's row is NaN already (a = NaN).
template <int kVec>
__device__ __forceinline__ void ce_fix_vector(const CeGradRow& r, int64_t col0,
                                              float (&out)[1][kVec]) {
  const bool ignored = r.t == kCeIgnored;
  const int d = r.t - static_cast<int>(col0);  // columns < V < 2^31
  if (ignored || static_cast<unsigned>(d) < static_cast<unsigned>(kVec)) {
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      if (ignored || i == d) out[0][i] = ignored ? 0.f : out[0][i] - r.c;
  }
}

/// The vectors whose fix-up may change them (fix_mask, op_traits.cuh): a thread's vector j at
/// columns col_t + j·kStride .. + kVec − 1 (kStride a power of two): every vector of an ignored
/// row, the one holding the target column, none else (an out-of-range target's row is NaN
/// already). Once per row, so the common vector tests one bit rather than recompute its column
/// and compare twice (7 instructions a vector at cl-t256v8-s1).
template <int kVecs, int kVec, int kStride>
__device__ __forceinline__ uint32_t ce_fix_mask(const CeGradRow& r, int64_t col_t) {
  static_assert((kStride & (kStride - 1)) == 0 && kVecs <= 32, "one bit per vector");
  if (r.t == kCeIgnored) return ~0u;
  const unsigned d = static_cast<unsigned>(r.t - static_cast<int>(col_t));  // < V < 2^31
  return d < unsigned{kVecs * kStride} && d % kStride < unsigned{kVec} ? 1u << (d / kStride)
                                                                        : 0u;
}

/// What the forward with dx and the backward share: one input stream (x), the row state
/// CeGradRow and dx per element (header formula); without the softcap the one-hot and an
/// ignored row's zeros per vector (kFixVector: apply_bulk per element, then fix_vector).
template <bool kCap, bool kWS>
struct CeDxTraits : RowOpBase {
  static constexpr int kIn = 1;  // x (or, for the forward, lse_partial)
  using Row = CeGradRow;
  static constexpr bool kFixVector = !kCap;  // the softcap's instances spilled with it

  __device__ __forceinline__ static void apply(const RowParams& p, const Row& r,
                                               const RowElem<kIn, kCols>& e, float (&out)[1]) {
    out[0] = ce_grad<kCap, kWS>(p, r, e.in[0], e.col);
  }
  __device__ __forceinline__ static void apply_bulk(const RowParams& p, const Row& r,
                                                    const RowElem<kIn, kCols>& e,
                                                    float (&out)[1]) {
    out[0] = ce_grad<kCap, kWS, false, false>(p, r, e.in[0], e.col);
  }
  template <int kVec>
  __device__ __forceinline__ static void fix_vector(const RowParams&, const Row& r,
                                                    const float (&)[1][kVec],
                                                    const float (&)[1][kVec], int64_t col0,
                                                    float (&out)[1][kVec]) {
    ce_fix_vector(r, col0, out);
  }
  template <int kVecs, int kVec, int kStride>
  __device__ __forceinline__ static uint32_t fix_mask(const Row& r, int64_t col_t) {
    return ce_fix_mask<kVecs, kVec, kStride>(r, col_t);
  }
};

/// Forward: loss, lse and z parts per row (row_out), and with kGrad dx for dloss = 1 (times
/// the mean's scales when kDeviceScale). Input stream: the logits (M, V), or with lse_partial
/// the (M, K) partial lse's (their lse is the row's: log Σ_k e^(lse_k)).
///
/// Registers: the per-row input is the target alone (one register, read early); the device
/// scalars, w[t] and a given target logit are read in finish (t1024 rows at 32 registers keep
/// two CTAs per SM).
///
/// kSplit: one of the two kernels of the predicted training forward (flag kDxGated, a dx
/// state): the loss-only instance (kGrad false) runs where the state's kDxOn is 0, the dx
/// instance (kGrad true) where it is not; the other returns at its first instruction
/// (RowGate::kKernel). Both are launched, each on its own plan (the loss-only instance's and
/// the fwd+dx's), so the forward that writes no dx keeps the loss-only occupancy. Without
/// kSplit the dx instance gates only its stores (RowGate::kOutputs): one kernel, dx-capable
/// occupancy either way (quack-bench's QUACK_BENCH_CE_FWD=single).
template <bool kGrad, bool kCap, bool kWS, bool kSplit = false>
struct CrossEntropyFwd : CeDxTraits<kCap, kWS> {
  using Base = CeDxTraits<kCap, kWS>;
  using Base::kIn;
  static constexpr int kOut = kGrad ? 1 : 0; // dx
  static constexpr bool kFullSm = !kGrad;    // dx's coefficients spill at 32 registers
  // The cluster register kernels at 64 registers (4 CTAs of 256 per SM; cl-t256v8-s1 fwd+dx
  // took 80 at 3) where they fit with dx: without the softcap (its instances spilled 4 bytes
  // at cl-t256v8-s1).
  static constexpr bool kClusterFullSm = !kGrad || !kCap;
  // The long-row candidates under trial (row_config.h: early-refill rings for the loss alone,
  // the cluster register policy for both) are compiled for the forwards.
  static constexpr bool kTrialConfigs = true;
  static constexpr bool kTrialPlanned = true;  // row_plan.cpp's rules were measured on it
  using Red = CeRed;
  // kDxGated: dx is stored (kSplit: the kernel runs) only where the prep kernel's copy of the
  // prediction, kDxOn, says so; kSplit's loss-only instance runs only where it does not.
  static constexpr RowGate kGate =
      kSplit ? RowGate::kKernel : (kGrad ? RowGate::kOutputs : RowGate::kNone);
  struct RowIn {
    int t = kCeIgnored;
  };
  using Row = CeGradRow;
  static constexpr bool kFixVector = kGrad && Base::kFixVector;

  __device__ __forceinline__ static bool gate_open(const RowParams& p) {
    if (!(p.iscalar[ce::kFlags] & ce::kDxGated)) return true;
    return (ce_dev_scalar(p, ce::kDxOn) != 0.f) == kGrad;  // loss-only: open where kDxOn is 0
  }

  __device__ __forceinline__ static RowIn load_row(const RowParams& p, int64_t row) {
    return {ce_target(p, row)};
  }

  template <class View>
  __device__ __forceinline__ static Red::Val reduce(const RowParams& p, const RowIn& in,
                                                    const View& v) {
    const int64_t flags = p.iscalar[ce::kFlags];
    const int pick = (flags & (ce::kTargetGiven | ce::kTargetGather)) ? kCeIgnored : in.t;
    return ce_fold<kCap, kWS>(p, pick, p.scalar[ce::kEps] != 0.f, v);
  }

  __device__ __forceinline__ static Row finish(const RowParams& p, const RowIn& in,
                                               const Red::Val& tot, int64_t row, bool writer) {
    const int64_t flags = p.iscalar[ce::kFlags];
    const float m = tot.v[0];
    // s = 1 (one finite logit, or V = 1): ln s = 0 exactly, so that row's loss and dx are
    // exactly 0 (lg2.approx(1) is not).
    const float ln_s = tot.v[1] == 1.f ? 0.f : log2_approx(tot.v[1]) * kLn2;
    const float lse = m + ln_s;
    const float wt = ce_target_weight(p, in.t);
    const float wsum =
        kWS ? ce_dev_scalar(p, ce::kWeightSum) : static_cast<float>(p.iscalar[ce::kClasses]);
    if (writer) {
      float ce_part = 0.f, z_part = 0.f;
      if (in.t >= 0) {
        const float eps = p.scalar[ce::kEps], zs = p.scalar[ce::kZScale];
        float yt = tot.v[3];
        if (flags & ce::kTargetGiven) yt = load1(p.row_in[ce::kTargetLogit], row, 0);
        else if (flags & ce::kTargetGather) yt = load1(p.row_in[ce::kTargetLogit], row, in.t);
        ce_part = (1.f - eps) * wt * ((m - yt) + ln_s);  // lse − y_t, m first (shifted logits)
        if (eps > 0.f)  // Σ_j w_j·(lse − y_j) = (W·m − Σ_j w_j·y_j) + W·ln s
          ce_part += ce_eps_v(p) * ((wsum * m - tot.v[2]) + wsum * ln_s);
        if (zs != 0.f) z_part = zs * lse * lse;
      } else if (in.t == kCeOutOfRange) {
        ce_part = z_part = kCeNaN;
      }
      if (p.row_out[ce::kLoss].ptr)
        store1(p.row_out[ce::kLoss], row, 0,
               (flags & ce::kSplitLoss) ? ce_part : ce_part + z_part);
      if (p.row_out[ce::kZ].ptr) store1(p.row_out[ce::kZ], row, 0, z_part);
      if (p.row_out[ce::kLseOut].ptr) store1(p.row_out[ce::kLseOut], row, 0, lse);
    }
    if constexpr (kGrad) {
      const bool dev = (flags & ce::kDeviceScale) != 0;
      return ce_grad_row<kWS>(p, in.t, lse, wt, wsum, [&] { return ce_eps_v(p); },
                              dev ? ce_dev_scalar(p, ce::kScaleCe) : 1.f,
                              dev ? ce_dev_scalar(p, ce::kScaleZ) : 1.f);
    } else {
      return Row{};
    }
  }

};

/// Backward from lse: dx = the forward's gradient with σ_ce = σ_z = dloss_i, from x, lse and
/// dloss. No reduction is needed but Σ_j w_j (weights and ε > 0: W, summed per row); without
/// it the op has none (kNoReduce): its vector instances run long rows as independent tiles
/// (RowPolicy::kMap).
/// The training backward's recompute (flag kTrainBwd, cross_entropy_train_bwd): the same with
/// σ_ce = g·s_ce, σ_z = g·s_z (g = dloss, one value; s_*: the forward's scales from its dx
/// state), and the whole kernel skipped (RowGate::kKernel) where the forward wrote dx.
template <bool kCap, bool kWS>
struct CrossEntropyBwd : CeDxTraits<kCap, kWS> {
  using CeDxTraits<kCap, kWS>::kIn;
  static constexpr int kOut = 1;  // dx
  static constexpr bool kFullSm = false;  // spills at 32 registers
  using Red = RedSum;             // W (weighted smoothing), else 0
  // Without weighted smoothing nothing is reduced (reduce returns 0, RedSum's identity): the
  // register policy skips the fold and the all-reduce, and the map entries take the op.
  static constexpr bool kNoReduce = !kWS;
  // kTrainBwd: the kernel runs only where the forward did not write dx (the state's kDxOn 0).
  static constexpr RowGate kGate = RowGate::kKernel;
  struct RowIn {
    int t = kCeIgnored;
    float lse = 0.f, dloss = 0.f;
  };
  using Row = CeGradRow;

  /// Scalar k of the forward's dx state (kTrainBwd).
  __device__ __forceinline__ static float state(const RowParams& p, int k) {
    return load1(p.row_in[ce::kBwdState], 0, k);
  }

  __device__ __forceinline__ static bool gate_open(const RowParams& p) {
    return !(p.iscalar[ce::kFlags] & ce::kTrainBwd) || state(p, ce::kDxOn) == 0.f;
  }

  __device__ __forceinline__ static RowIn load_row(const RowParams& p, int64_t row) {
    RowIn r;
    r.t = ce_target(p, row);
    r.lse = load1(p.row_in[ce::kLseIn], row, 0);
    r.dloss = load1(p.row_in[ce::kDloss], row, 0);
    return r;
  }

  template <class View>
  __device__ __forceinline__ static Red::Val reduce(const RowParams& p, const RowIn&,
                                                    const View& v) {
    if constexpr (kWS) return Red::fold(v, [&](const auto& e) { return ce_weight(p, e.col); });
    else return {{0.f}};
  }

  __device__ __forceinline__ static Row finish(const RowParams& p, const RowIn& in,
                                               const Red::Val& tot, int64_t, bool) {
    float s_ce = in.dloss, s_z = in.dloss;
    if (p.iscalar[ce::kFlags] & ce::kTrainBwd) {  // the forward's scales (mean: 1 / denom.)
      s_ce *= state(p, ce::kScaleCe);
      s_z *= state(p, ce::kScaleZ);
    }
    // ε/V divided here rather than read (ce_eps_v; the same bits): with the read, ptxas spilled
    // 4 bytes in the fp32 t1024v4 register kernel (a store and reload before its row loop), and
    // divided before ce_grad_row's early return for ignored rows, in the fp32 r4t32v8 one.
    const auto eps_v = [&] {
      return p.scalar[ce::kEps] / static_cast<float>(p.iscalar[ce::kClasses]);
    };
    return ce_grad_row<kWS>(p, in.t, in.lse, ce_target_weight(p, in.t), tot.v[0], eps_v, s_ce,
                            s_z);
  }

};

// The instances of the list (row_ops.cmake): one name per (direction, gradient, softcap,
// weighted smoothing). The weighted-smoothing ones (a weight read per element) run on the
// general policy only: compiled into the vector kernels, their loads cost 8-10 registers there
// (t1024 rows: two CTAs per SM lost) even when the option is off.
using CrossEntropyFwdLoss = CrossEntropyFwd<false, false, false>;
using CrossEntropyFwdLossCap = CrossEntropyFwd<false, true, false>;
using CrossEntropyFwdGrad = CrossEntropyFwd<true, false, false>;
using CrossEntropyFwdGradCap = CrossEntropyFwd<true, true, false>;
using CrossEntropyFwdLossWS = CrossEntropyFwd<false, false, true>;
using CrossEntropyFwdLossCapWS = CrossEntropyFwd<false, true, true>;
using CrossEntropyFwdGradWS = CrossEntropyFwd<true, false, true>;
using CrossEntropyFwdGradCapWS = CrossEntropyFwd<true, true, true>;
// The predicted training forward's two kernels (kSplit; weighted smoothing keeps the single
// kernel: general policy only, where both instances have the same occupancy).
using CrossEntropyFwdSplitLoss = CrossEntropyFwd<false, false, false, true>;
using CrossEntropyFwdSplitLossCap = CrossEntropyFwd<false, true, false, true>;
using CrossEntropyFwdSplitGrad = CrossEntropyFwd<true, false, false, true>;
using CrossEntropyFwdSplitGradCap = CrossEntropyFwd<true, true, false, true>;
using CrossEntropyBwdPlain = CrossEntropyBwd<false, false>;
using CrossEntropyBwdCap = CrossEntropyBwd<true, false>;
using CrossEntropyBwdWS = CrossEntropyBwd<false, true>;
using CrossEntropyBwdCapWS = CrossEntropyBwd<true, true>;

}  // namespace quack::detail
