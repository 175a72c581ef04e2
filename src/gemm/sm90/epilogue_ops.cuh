// Epilogue visitors of the Hopper GEMM (device code): what the collective epilogue (epilogue.cuh)
// computes from the fp32 accumulator, per thread and per (EpiM, EpiN) subtile, before the values
// are rounded and stored through shared memory by TMA.
//
// A visitor is a small trivially copyable struct (it travels in the kernel's __grid_constant__
// parameters) with:
//   static constexpr int kOutputs;   1 or 2 tiles written per subtile (outputs 0 and 1, each its
//                                    own shared-memory buffers and TMA store)
//   static constexpr bool kNeedsC;   the input tile ("C": C of alpha·acc + beta·C, or the preact
//                                    of an activation gradient) is always read
//   static constexpr bool kLinFirst; the visitor starts with y = alpha·acc + beta·C (its member
//                                    `lin`, a LinearCombination) and reads C nowhere else: the
//                                    epilogue forms y in the accumulator's registers as C arrives
//                                    (C's values dead at once, whichever way C arrives: TMA and
//                                    smem, or plain loads) and calls
//                                    finish(out, y, coord) once instead of operator(). Beside the
//                                    192 accumulators of the 128x192 pingpong tile the 16 fp32 C
//                                    values that operator() kept live to the call spilled.
//                                    LinFirstVisitor<V> is such a visitor's base (lin, kNeedsC,
//                                    kLinFirst, reads_c, load_scalars, operator()).
//                                    A kNeedsC visitor is called once too, whichever way C arrives.
//   static Visitor make(const GemmProblem& p, bool load_c);     host: from the problem
//   bool reads_c() const;            C is read (uniform over the grid)
//   void load_scalars(const float* alpha_dev, const float* beta_dev);   once per CTA
//   void operator()(Array<float, N> (&out)[kOutputs], Array<float, N> const& acc,
//                   Array<float, N> const* c, SubtileCoord const& coord) const;
// where acc holds a thread's N = kFrg accumulator values of the subtile, c (null when C is not
// read) C's values at the same positions converted to fp32, and coord gives each value's (m, n)
// in the kernel's output (row(i), col(i)) and the batch l. A visitor writes out[0] (and out[1]);
// the epilogue rounds them to their outputs' dtypes. Optional:
//   static constexpr bool kCAhead;   C is loaded ahead of its subtiles into a ring of C buffers of
//                                    its own (epilogue.cuh, kCAhead) where they fit beside the
//                                    mainloop's stages. Default false.
//   static constexpr int kCAheadStagesD;  with kCAhead: output buffers per output (default: as
//                                    without the ring).
//   static constexpr bool kPrefetch; the visitor reads global memory per subtile (gemm_rotary's
//                                    tables) and has template <int N> prefetch(SubtileCoord
//                                    const&) const (N = kFrg), which
//                                    store_tile calls for the tile's first subtile when its
//                                    epilogue starts and at each subtile for the next one, before
//                                    the subtile's visitor call, barriers and stores: it asks for
//                                    the next subtile's lines in L1 (no registers held across the
//                                    barriers). Default false.
//   template <class F> bool specialize(F&& f) const;  where the run-time choice (the
//                                    activation) has a specialised copy: calls f(v) once, v a copy
//                                    of the visitor (lean(): without its optional inputs, such as
//                                    a bias) whose choice is a constant in f's body, and returns
//                                    true; else false (specialize_elementwise_act,
//                                    specialize_gated_act). Called only where bool
//                                    specializable() const holds (the I/O-warp path calls it
//                                    unchecked: its visitors, DActEpilogue and DGatedEpilogue,
//                                    are always specializable). store_tile runs its whole
//                                    subtile loop inside it: that activation's epilogue is one
//                                    stretch of code. Without it: the generic path.
//   static constexpr bool kSplitWide; with specialize: on the wide pingpong tile (BN = 192:
//                                    192 accumulators of a consumer's 232 registers) the
//                                    specialised copies and the generic path are two kernels,
//                                    the host choosing one per launch (epilogue_variants.cuh, EpiPaths;
//                                    launch.cuh, run_gemm), each subtile run in two halves. The
//                                    visitor then has bool specialized() const (host and
//                                    device: specialize takes a copy) and template <class F>
//                                    void specialize_each(F&& f) const (calls f(v) once, v a
//                                    copy whose choice is a constant, for every choice: the
//                                    generic kernel's per-subtile dispatch), and its operator()
//                                    treats each value on its own (coord unused), so it may be
//                                    called on half a fragment (N = kFrg / 2). Default false:
//                                    one kernel with both paths.
//   static constexpr int kD1Div;     2: output 1 has N / 2 columns (gated activations): out[1][i]
//                                    for even i is the value of output column col(i) / 2 (odd
//                                    entries are ignored); the epilogue stores it through a
//                                    half-width subtile (epilogue_gated.cuh). Default 1.
//
// The visitors: LinearCombination (gemm), LinCombBias (gemm with a bias), ActEpilogue
// (gemm_act, bias included), DActEpilogue (gemm_dact), GatedEpilogue (gemm_gated: values i and
// i + 1, i even, of a thread are columns 2j and 2j + 1 of one row, so gate and up sit in one
// thread), DGatedEpilogue<T16> (gemm_dgated: C and output 0 are 32-bit words holding a (gate,
// up) pair of 16-bit values of A's dtype, QuACK's packed_cd_b16x2; the epilogue moves them as
// fp32 bit patterns).
// A bias (BiasVec) is read from global memory at coord.row(i) / coord.col(i).
//
// Where a later epilogue fits without a new kernel: a column sum of an output (a bias gradient):
// a visitor that accumulates per column across the subtiles of a tile and a hook at the end of
// the tile that reduces over the rows of the epilogue group (warp shuffles, then shared memory)
// and writes per-tile partials for a deterministic second pass.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cutlass/array.h>
#include <cutlass/numeric_types.h>
#include <cute/config.hpp>

#include <cstdint>
#include <type_traits>

#include "gemm/gemm_problem.h"
#include "gemm/sm90/epilogue_smem.cuh"
#include "gemm/activation.cuh"

namespace quack::detail::sm90 {

/// Where a thread's fragment values of one subtile sit in the kernel's (row-major) output: value
/// i at (row(i), col(i)); the subtile starts at (m0, n0); etid is the thread in its epilogue group
/// (the fragment layout of epilogue_smem.cuh).
/// l: the batch.
struct SubtileCoord {
  int m0, n0, etid;
  int l = 0;
  CUTE_DEVICE int row(int i) const { return m0 + frag_row(etid, (i / 2) % 2); }
  CUTE_DEVICE int col(int i) const { return n0 + frag_col(etid, i); }
};

/// Output 1's columns per output 0's columns: Op::kD1Div where the visitor defines it, else 1.
template <class Op, class = void>
struct D1ColsDiv {
  static constexpr int value = 1;
};
template <class Op>
struct D1ColsDiv<Op, std::void_t<decltype(Op::kD1Div)>> {
  static constexpr int value = Op::kD1Div;
};

/// Element i of a bias vector of element type T, as fp32 (read-only cache).
template <class T>
CUTE_DEVICE float bias_at(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, float>) {
    return __ldg(p + i);
  } else {
    const unsigned short bits = __ldg(reinterpret_cast<const unsigned short*>(p) + i);
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
      return __uint_as_float(uint32_t(bits) << 16);
    else
      return __half2float(__ushort_as_half(bits));
  }
}

/// The bias of an epilogue (GemmProblem::row_bias / col_bias): out(m, n) += row[n] + col[m] in
/// the kernel's terms, for values inside (M, N) (0 outside: those are never stored). Each value
/// is read from global memory through the read-only cache (a vector is shared by every CTA, so
/// after the first tile it is an L1/L2 hit); a thread reads its kFrg / 2 columns and 2 rows per
/// subtile. The dtype (fp32, bf16, fp16) is a runtime value: one uniform branch per subtile.
/// concat: the row vector is [bias_gate; bias_up] of a gated GEMM whose columns interleave gate
/// and up (column n reads element (n % 2)·half + n / 2).
struct BiasVec {
  const void* row = nullptr;
  const void* col = nullptr;
  int64_t row_batch = 0, col_batch = 0;
  int m = 0, n = 0;
  int half = 0;                      // > 0: the concat reading of the row vector
  uint8_t row_dt = 0, col_dt = 0;    // 0 fp32, 1 bf16, 2 fp16

  static uint8_t code(DType t) { return t == DType::kFloat32 ? 0 : t == DType::kBFloat16 ? 1 : 2; }
  static BiasVec make(const GemmProblem& p) {
    BiasVec b;
    b.row = p.row_bias;
    b.col = p.col_bias;
    b.row_batch = p.batch_row_bias;
    b.col_batch = p.batch_col_bias;
    b.m = p.m;
    b.n = p.n;
    b.half = p.concat ? p.n / 2 : 0;
    b.row_dt = code(p.row_bias_dtype);
    b.col_dt = code(p.col_bias_dtype);
    return b;
  }

  template <class T, int N>
  CUTE_DEVICE void add_row(cutlass::Array<float, N>& y, SubtileCoord const& c) const {
    // Value i = cc + 2·h + 4·j sits at column col(0) + 8·j + cc for both h: one pointer and
    // constant offsets (the concat reading maps each column on its own).
    int const c0 = c.col(0);
    if (half == 0) {
      const T* const p = static_cast<const T*>(row) + (int64_t(c.l) * row_batch + c0);
      int const lim = n - c0;  // offsets below lim are inside N
      CUTE_UNROLL
      for (int j = 0; j < N / 4; ++j)
        CUTE_UNROLL
        for (int cc = 0; cc < 2; ++cc) {
          int const off = 8 * j + cc;
          float const v = off < lim ? bias_at<T>(p, off) : 0.f;
          y[cc + 4 * j] += v;
          y[cc + 4 * j + 2] += v;
        }
    } else {
      const T* const p = static_cast<const T*>(row) + int64_t(c.l) * row_batch;
      CUTE_UNROLL
      for (int j = 0; j < N / 4; ++j)
        CUTE_UNROLL
        for (int cc = 0; cc < 2; ++cc) {
          int const nn = c0 + 8 * j + cc;
          float const v = nn < n ? bias_at<T>(p, int64_t(nn & 1) * half + (nn >> 1)) : 0.f;
          y[cc + 4 * j] += v;
          y[cc + 4 * j + 2] += v;
        }
    }
  }

  template <class T, int N>
  CUTE_DEVICE void add_col(cutlass::Array<float, N>& y, SubtileCoord const& c) const {
    const T* const p = static_cast<const T*>(col) + int64_t(c.l) * col_batch;
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      int const mm = c.row(2 * h);
      float const v = mm < m ? bias_at<T>(p, mm) : 0.f;
      CUTE_UNROLL
      for (int j = 0; j < N / 4; ++j) {
        y[2 * h + 4 * j] += v;
        y[2 * h + 4 * j + 1] += v;
      }
    }
  }

  CUTE_HOST_DEVICE bool present() const { return row != nullptr || col != nullptr; }

  /// y += the bias at the subtile's values (nothing when there is none).
  template <int N>
  CUTE_DEVICE void add(cutlass::Array<float, N>& y, SubtileCoord const& c) const {
    if (row != nullptr) {
      if (row_dt == 0)
        add_row<float>(y, c);
      else if (row_dt == 1)
        add_row<__nv_bfloat16>(y, c);
      else
        add_row<__half>(y, c);
    }
    if (col != nullptr) {
      if (col_dt == 0)
        add_col<float>(y, c);
      else if (col_dt == 1)
        add_col<__nv_bfloat16>(y, c);
      else
        add_col<__half>(y, c);
    }
  }
};

/// D = alpha · acc + beta · C (CUTLASS's LinearCombination). C is read only when beta ≠ 0.
struct LinearCombination {
  static constexpr int kOutputs = 1;
  static constexpr bool kNeedsC = false;
  static constexpr bool kLinFirst = false;
  float alpha = 1.f;
  float beta = 0.f;

  static LinearCombination make(const GemmProblem& p, bool load_c) { return {p.alpha, load_c ? p.beta : 0.f}; }

  CUTE_HOST_DEVICE bool reads_c() const { return beta != 0.f; }

  /// Device scalars (GemmArgs::alpha_device / beta_device) replace the host values when given.
  CUTE_DEVICE void load_scalars(const float* alpha_dev, const float* beta_dev) {
    if (alpha_dev) alpha = *alpha_dev;
    if (beta_dev) beta = *beta_dev;
  }

  /// y = alpha · acc (+ beta · c when c is given).
  template <int N>
  CUTE_DEVICE void apply(cutlass::Array<float, N>& y, cutlass::Array<float, N> const& acc,
                         cutlass::Array<float, N> const* c) const {
    if (c != nullptr) {
      CUTE_UNROLL
      for (int i = 0; i < N; ++i) y[i] = alpha * acc[i] + beta * (*c)[i];
    } else {
      CUTE_UNROLL
      for (int i = 0; i < N; ++i) y[i] = alpha * acc[i];
    }
  }

  template <int N>
  CUTE_DEVICE void operator()(cutlass::Array<float, N> (&out)[kOutputs], cutlass::Array<float, N> const& acc,
                              cutlass::Array<float, N> const* c, SubtileCoord const&) const {
    apply(out[0], acc, c);
  }
};

/// What the kLinFirst visitors (ActEpilogue, LinCombBias, GatedEpilogue, RotaryEpilogue) share:
/// y = alpha · acc + beta · C by `lin` (C not otherwise read), then Derived's
/// finish(out, y, coord) (everything after y). The epilogue forms y itself and calls finish;
/// operator() is the visitor protocol's call, y formed here.
template <class Derived>
struct LinFirstVisitor {
  static constexpr bool kNeedsC = false;
  static constexpr bool kLinFirst = true;
  LinearCombination lin;

  CUTE_HOST_DEVICE bool reads_c() const { return lin.reads_c(); }
  CUTE_DEVICE void load_scalars(const float* alpha_dev, const float* beta_dev) { lin.load_scalars(alpha_dev, beta_dev); }

  template <int N, int K>
  CUTE_DEVICE void operator()(cutlass::Array<float, N> (&out)[K], cutlass::Array<float, N> const& acc,
                              cutlass::Array<float, N> const* c, SubtileCoord const& coord) const {
    cutlass::Array<float, N> y;
    lin.apply(y, acc, c);
    static_cast<Derived const&>(*this).finish(out, y, coord);
  }
};

/// Where op.act is in List (QUACK_SPECIALIZED_ELEMENTWISE_ACTS or QUACK_SPECIALIZED_GATED_ACTS,
/// activation_list.h): calls f(v), v = op.lean() (op without its bias) with `act` assigned that
/// constant, and returns true; inlined into f's body, the visitor's own switch on act folds to
/// one loop. Otherwise returns false (the caller runs its generic path). Why at the tile: with
/// that switch run per subtile, the unrolled subtiles each held every activation's loop and one
/// activation's code lay in pieces across the kernel (the 128x192 gemm_act kernel: 24,080
/// instructions): warps waited on instruction fetch (ncu, run AQ3: "no instruction" the second
/// stall reason; tensor pipe 83 % active for relu, 49 % for gelu_erf, against plain's 97 %). Why
/// a subset: each copy costs compile time (DESIGN §4's 60 s a GEMM TU).
#define QUACK_SPECIALIZE_ACT_CASE(A, name) \
  case Activation::A: {                    \
    V v = op.lean();                       \
    v.act = Activation::A;                 \
    f(v);                                  \
    return true;                           \
  }
template <class V, class F>
CUTE_DEVICE bool specialize_elementwise_act(V const& op, F&& f) {
  switch (op.act) {
    QUACK_SPECIALIZED_ELEMENTWISE_ACTS(QUACK_SPECIALIZE_ACT_CASE)
    default:
      return false;
  }
}
template <class V, class F>
CUTE_DEVICE bool specialize_gated_act(V const& op, F&& f) {
  switch (op.act) {
    QUACK_SPECIALIZED_GATED_ACTS(QUACK_SPECIALIZE_ACT_CASE)
    default:
      return false;
  }
}
#undef QUACK_SPECIALIZE_ACT_CASE

/// Whether specialize_gated_act has a copy for activation a (host and device).
CUTE_HOST_DEVICE constexpr bool specialized_gated_act(Activation a) {
  switch (a) {
#define QUACK_SPECIALIZED_ACT_CASE(A, name) case Activation::A:
    QUACK_SPECIALIZED_GATED_ACTS(QUACK_SPECIALIZED_ACT_CASE)
#undef QUACK_SPECIALIZED_ACT_CASE
    return true;
    default:
      return false;
  }
}

/// The gradient visitors' common part (DActEpilogue, DGatedEpilogue): acc is the gradient of
/// the postact, C the stored preact (always read), two outputs (dpreact, the recomputed
/// postact); alpha, beta and bias do not apply; the activation from the problem.
template <class Derived, Activation kDefault>
struct PreactGradVisitor {
  static constexpr int kOutputs = 2;
  static constexpr bool kNeedsC = true;
  static constexpr bool kLinFirst = false;
  Activation act = kDefault;

  static Derived make(const GemmProblem& p, bool) {
    Derived d;
    d.act = static_cast<Activation>(p.activation);
    return d;
  }
  /// specialize: no optional input to leave out.
  CUTE_DEVICE bool specializable() const { return true; }
  CUTE_DEVICE Derived lean() const { return static_cast<Derived const&>(*this); }
  CUTE_HOST_DEVICE bool reads_c() const { return true; }
  CUTE_DEVICE void load_scalars(const float*, const float*) {}
};

/// gemm_act: out[0] = preact = alpha · acc + beta · C + bias, out[1] = postact = act(preact)
/// (QuACK's GemmActSm90). The activation is a runtime value: a constant inside specialize for the
/// listed activations without a bias, else one branch per subtile.
/// kLinFirst: the epilogue forms alpha · acc + beta · C and calls finish.
struct ActEpilogue : LinFirstVisitor<ActEpilogue> {
  static constexpr int kOutputs = 2;
  Activation act = Activation::kIdentity;
  BiasVec bias;

  static ActEpilogue make(const GemmProblem& p, bool load_c) {
    return {{LinearCombination::make(p, load_c)}, static_cast<Activation>(p.activation), BiasVec::make(p)};
  }
  /// specialize: without a bias (the bias's code, per dtype and layout, would fill every copy).
  CUTE_DEVICE bool specializable() const { return !bias.present(); }
  CUTE_DEVICE ActEpilogue lean() const { return {{lin}, act, BiasVec{}}; }
  template <class F>
  CUTE_DEVICE bool specialize(F&& f) const { return specialize_elementwise_act(*this, f); }

  /// Everything after y = alpha · acc + beta · C (kLinFirst).
  template <int N>
  CUTE_DEVICE void finish(cutlass::Array<float, N> (&out)[kOutputs], cutlass::Array<float, N> const& y,
                          SubtileCoord const& coord) const {
    out[0] = y;
    bias.add(out[0], coord);
    switch (act) {  // a constant inside specialize: one loop
#define QUACK_ACT_CASE(A, name)                                                         \
  case Activation::A: {                                                                 \
    CUTE_UNROLL                                                                         \
    for (int i = 0; i < N; ++i) out[1][i] = act_fwd(Activation::A, out[0][i]);          \
    break;                                                                              \
  }
      QUACK_FOR_ELEMENTWISE_ACTS(QUACK_ACT_CASE)
#undef QUACK_ACT_CASE
      default:
        out[1] = out[0];
        break;
    }
  }
};

/// gemm_dact: acc = dpostact (e.g. dout · W), c = preact; out[0] = dpreact = acc ⊙ act'(preact),
/// out[1] = postact = act(preact), recomputed (QuACK's GemmDActSm90). alpha and beta do not apply.
struct DActEpilogue : PreactGradVisitor<DActEpilogue, Activation::kIdentity> {
  template <class F>
  CUTE_DEVICE bool specialize(F&& f) const { return specialize_elementwise_act(*this, f); }
  template <int N>
  CUTE_DEVICE void operator()(cutlass::Array<float, N> (&out)[kOutputs], cutlass::Array<float, N> const& acc,
                              cutlass::Array<float, N> const* c, SubtileCoord const&) const {
    switch (act) {
#define QUACK_DACT_CASE(A, name)                                                        \
  case Activation::A: {                                                                 \
    CUTE_UNROLL                                                                         \
    for (int i = 0; i < N; ++i) act_bwd(Activation::A, (*c)[i], acc[i], out[0][i], out[1][i]); \
    break;                                                                              \
  }
      QUACK_FOR_ELEMENTWISE_ACTS(QUACK_DACT_CASE)
#undef QUACK_DACT_CASE
      default:
        out[0] = acc;
        out[1] = *c;
        break;
    }
  }
};

/// gemm with a bias: out[0] = alpha · acc + beta · C + bias (LinearCombination, then BiasVec).
/// kLinFirst as ActEpilogue: finish is called once, so the bias reads appear once instead of once
/// per C source (three copies took a 56-byte stack frame on the pingpong 128x128 tile).
struct LinCombBias : LinFirstVisitor<LinCombBias> {
  static constexpr int kOutputs = 1;
  BiasVec bias;

  static LinCombBias make(const GemmProblem& p, bool load_c) { return {{LinearCombination::make(p, load_c)}, BiasVec::make(p)}; }

  /// Everything after y = alpha · acc + beta · C (kLinFirst).
  template <int N>
  CUTE_DEVICE void finish(cutlass::Array<float, N> (&out)[kOutputs], cutlass::Array<float, N> const& y,
                          SubtileCoord const& coord) const {
    out[0] = y;
    bias.add(out[0], coord);
  }
};

/// gemm_gated: out[0] = preact = alpha · acc + beta · C + bias (N columns), out[1][i] (i even) =
/// postact = glu(preact[i], preact[i + 1]) of the column pair (col(i), col(i) + 1) = (gate, up),
/// stored at column col(i) / 2 of the (M, N / 2) output (kD1Div = 2; odd entries unused).
/// kLinFirst as ActEpilogue; the activation a runtime value, as ActEpilogue's.
struct GatedEpilogue : LinFirstVisitor<GatedEpilogue> {
  static constexpr int kOutputs = 2;
  static constexpr int kD1Div = 2;
  Activation act = Activation::kSwiglu;
  BiasVec bias;

  static GatedEpilogue make(const GemmProblem& p, bool load_c) {
    return {{LinearCombination::make(p, load_c)}, static_cast<Activation>(p.activation), BiasVec::make(p)};
  }
  /// specialize: without a bias, as ActEpilogue.
  CUTE_DEVICE bool specializable() const { return !bias.present(); }
  CUTE_DEVICE GatedEpilogue lean() const { return {{lin}, act, BiasVec{}}; }
  template <class F>
  CUTE_DEVICE bool specialize(F&& f) const { return specialize_gated_act(*this, f); }

  /// Everything after y = alpha · acc + beta · C (kLinFirst).
  template <int N>
  CUTE_DEVICE void finish(cutlass::Array<float, N> (&out)[kOutputs], cutlass::Array<float, N> const& y,
                          SubtileCoord const& coord) const {
    static_assert(N % 2 == 0, "column pairs");
    out[0] = y;
    bias.add(out[0], coord);
    switch (act) {
#define QUACK_GATED_CASE(A, name)                                                       \
  case Activation::A: {                                                                 \
    CUTE_UNROLL                                                                         \
    for (int i = 0; i < N; i += 2) {                                                    \
      out[1][i] = gated_fwd(Activation::A, out[0][i], out[0][i + 1]);                   \
      out[1][i + 1] = 0.f;                                                              \
    }                                                                                   \
    break;                                                                              \
  }
      QUACK_FOR_GATED_ACTS(QUACK_GATED_CASE)
#undef QUACK_GATED_CASE
      default:
        CUTE_UNROLL
        for (int i = 0; i < N; i += 2) {
          out[1][i] = out[0][i] * out[0][i + 1];
          out[1][i + 1] = 0.f;
        }
        break;
    }
  }
};

/// A 32-bit word of two 16-bit values of type T16 (cutlass::bfloat16_t or cutlass::half_t; the
/// lower address, the gate, in the low half) <-> two floats.
template <class T16>
CUTE_DEVICE void unpack_pair16(float w, float& lo, float& hi) {
  uint32_t const bits = __float_as_uint(w);
  if constexpr (std::is_same_v<T16, cutlass::half_t>) {
    lo = __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xFFFFu)));
    hi = __half2float(__ushort_as_half(static_cast<unsigned short>(bits >> 16)));
  } else {
    static_assert(std::is_same_v<T16, cutlass::bfloat16_t>, "bf16 or fp16 pairs");
    lo = __uint_as_float(bits << 16);
    hi = __uint_as_float(bits & 0xFFFF0000u);
  }
}
template <class T16>
CUTE_DEVICE float pack_pair16(float lo, float hi) {
  uint32_t l, h;
  if constexpr (std::is_same_v<T16, cutlass::half_t>) {
    l = __half_as_ushort(__float2half_rn(lo));
    h = __half_as_ushort(__float2half_rn(hi));
  } else {
    static_assert(std::is_same_v<T16, cutlass::bfloat16_t>, "bf16 or fp16 pairs");
    l = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
    h = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
  }
  return __uint_as_float(l | (h << 16));
}

/// gemm_dgated: acc = dpostact (e.g. dout · W2), c = the preact pair (gate, up) packed in one
/// 32-bit word per value (two T16 halves: A's dtype, bf16 or fp16); out[0] = the packed pair
/// (dgate, dup) = acc · ∂glu/∂(gate, up), each rounded once to T16; out[1] = postact = glu(gate,
/// up), recomputed (QuACK's gemm_dgated, packed_cd_b16x2). C and output 0 travel as fp32 bit
/// patterns (the instance's ElementC and ElementD are float: copies, never arithmetic, so every
/// bit survives).
template <class T16>
struct DGatedEpilogue : PreactGradVisitor<DGatedEpilogue<T16>, Activation::kSwiglu> {
  // kOutputs from the base, which name lookup in a template does not search by itself.
  using PreactGradVisitor<DGatedEpilogue<T16>, Activation::kSwiglu>::kOutputs;
  // The preact tile (fp32 words) is read in full: its loads run ahead of the subtiles
  // (epilogue.cuh, kCAhead), in the smem of all but 2 output buffers per output (dpreact and
  // postact). Expected: C's round trip, in series with every subtile otherwise, matters more
  // than more stores in flight; the device A/B variants of instances_ab.txt measure it.
  static constexpr bool kCAhead = true;
  static constexpr int kCAheadStagesD = 2;
  template <class F>
  CUTE_DEVICE bool specialize(F&& f) const { return specialize_gated_act(*this, f); }
  // On 128x192 pingpong one kernel with both paths spilled 1048 / 756 bytes (the generic path's
  // per-subtile switch beside 192 accumulators, and the copies' values reloaded once per tile);
  // two kernels, each subtile in halves, spill nothing (epilogue_variants.cuh, EpiPaths).
  static constexpr bool kSplitWide = true;
  CUTE_HOST_DEVICE bool specialized() const { return specialized_gated_act(this->act); }
  template <class F>
  CUTE_DEVICE void specialize_each(F&& f) const {
    DGatedEpilogue v = *this;
    switch (this->act) {
#define QUACK_DGATED_EACH_CASE(A, name) \
  case Activation::A:                   \
    v.act = Activation::A;              \
    f(v);                               \
    return;
      QUACK_FOR_GATED_ACTS(QUACK_DGATED_EACH_CASE)
#undef QUACK_DGATED_EACH_CASE
      default:  // never taken (validation admits gated activations only): operator()'s default
        v.act = Activation::kIdentity;
        f(v);
        return;
    }
  }

  template <int N>
  CUTE_DEVICE void operator()(cutlass::Array<float, N> (&out)[kOutputs], cutlass::Array<float, N> const& acc,
                              cutlass::Array<float, N> const* c, SubtileCoord const&) const {
    switch (this->act) {
#define QUACK_DGATED_CASE(A, name)                                                      \
  case Activation::A: {                                                                 \
    CUTE_UNROLL                                                                         \
    for (int i = 0; i < N; ++i) {                                                       \
      float g, u, dg, du;                                                               \
      unpack_pair16<T16>((*c)[i], g, u);                                                \
      gated_bwd(Activation::A, g, u, acc[i], dg, du, out[1][i]);                        \
      out[0][i] = pack_pair16<T16>(dg, du);                                             \
    }                                                                                   \
    break;                                                                              \
  }
      QUACK_FOR_GATED_ACTS(QUACK_DGATED_CASE)
#undef QUACK_DGATED_CASE
      default:  // never taken (validation admits gated activations only)
        CUTE_UNROLL
        for (int i = 0; i < N; ++i) {
          out[0][i] = 0.f;
          out[1][i] = 0.f;
        }
        break;
    }
  }
};

}  // namespace quack::detail::sm90
