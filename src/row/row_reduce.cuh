// Row reductions of the row skeleton: the reduction kinds an op's traits pick (sum, K sums,
// max, online max + sum, count/mean/M2; several floats reduced together in one exchange), each thread's fold over
// its elements, and the all-reduce over a row: warp shuffles, then one slot per warp in shared
// memory, then (clusters) the CTAs' slots exchanged through distributed shared memory.
//
// The all-reduces (RMSNorm's scheme, QuACK's) take a value of K ≤ 4 floats combined by the
// kind's combine:
//  1. each thread folds its own elements (Kind::fold, called by the op's traits);
//  2. butterfly shuffles over the min(tpr, 32) lanes of a row;
//  3. rows wider than a warp: lane 0 of each warp writes its value into its slot
//     (row_slot_floats(K) floats), one __syncthreads; in a cluster, warp 0 copies the CTA's
//     slots into every other CTA by st.async completing on that CTA's mbarrier
//     (cluster_exchange, common/cluster.cuh), with no cluster barrier per row;
//  4. every warp of the row re-combines all slots in the same order.
// A kind's combine must be commutative bit for bit (the butterfly combines (a, b) in one lane
// and (b, a) in its partner): written with __fadd_rn / __fmul_rn where a compiler contraction
// into an FMA would break the symmetry. Then every thread of every CTA of the row holds the
// same bits, run to run (deterministic). A two-stage kind (RedMeanM2) all-reduces as two sum
// kinds in two exchange calls instead, the second using the first's result; on
// ClusterRowReducer each call sums the CTA's slots first and exchanges one 16-byte total per
// CTA (allreduce_cta_first).
// Online kinds (kOnline: v[0] a max m, v[1] a sum of e^(x − m), v[2..K) plain sums; the online
// softmax pair and cross-entropy's) skip the combine's two exponentials per butterfly step: a
// step set takes the max first (shuffles + FMNMX), rescales each lane's v[1] once to it, then
// sums (shuffles + FADD), as QuACK's online_softmax_reduce; a lane combining many slots takes
// their max, then one exponential per slot.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/cluster.cuh"
#include "common/row_geometry.h"
#include "row/row_config.h"
#include "row/row_math.cuh"

namespace quack::detail {

/// K floats reduced together.
template <int K>
struct RedVal {
  float v[K];
};

// ---------------------------------------------------------------------- reduction kinds
//
// A kind: kFloats, Val, identity(), combine(a, b) (bitwise commutative) and a thread fold
// fold(view, value) over the elements of a view (the policy's; see op_traits.cuh), where
// value(e) picks the float to reduce from an element.

/// Σ value.
struct RedSum {
  static constexpr int kFloats = 1;
  using Val = RedVal<1>;
  __device__ __forceinline__ static Val identity() { return {{0.f}}; }
  __device__ __forceinline__ static Val combine(const Val& a, const Val& b) {
    return {{a.v[0] + b.v[0]}};
  }
  template <class View, class F>
  __device__ __forceinline__ static Val fold(const View& view, F value) {
    float s = 0.f;
    view.for_each([&](const auto& e) { s += value(e); });
    return {{s}};
  }
};

/// K sums reduced together (one exchange): value(e) returns a RedVal<K>.
template <int K>
struct RedSums {
  static constexpr int kFloats = K;
  using Val = RedVal<K>;
  __device__ __forceinline__ static Val identity() {
    Val v;
#pragma unroll
    for (int i = 0; i < K; ++i) v.v[i] = 0.f;
    return v;
  }
  __device__ __forceinline__ static Val combine(const Val& a, const Val& b) {
    Val v;
#pragma unroll
    for (int i = 0; i < K; ++i) v.v[i] = a.v[i] + b.v[i];
    return v;
  }
  template <class View, class F>
  __device__ __forceinline__ static Val fold(const View& view, F value) {
    Val s = identity();
    view.for_each([&](const auto& e) {
      const Val t = value(e);
#pragma unroll
      for (int i = 0; i < K; ++i) s.v[i] += t.v[i];
    });
    return s;
  }
};

/// Count, mean and sum of squared deviations (n, μ, M2 = Σ (x − μ)²) of a row: the stable
/// variance (never E[x²] − E[x]²). A thread folds its own elements into (n_t, s_t = Σ x,
/// M2_t = Σ (x − μ_t)²) about its own mean μ_t = s_t / n_t: over on-chip views one sweep,
/// each 16-byte vector's M2 about its own mean from registers, the vectors merged by Chan's
/// formula; Welford's update over global memory; chunks of one thread merge by Chan's formula
/// (Chan, Golub & LeVeque 1983). Across threads, warps, CTAs and clusters the all-reduce takes
/// two plain sum stages (kTwoStage) rather than a tree of Chan merges (a reciprocal each, up to
/// 26 per row and thread in a 16-CTA cluster):
///   stage 1  (N, S) = Σ (n_t, s_t);            μ = S / N
///   stage 2  M2 = Σ [M2_t + n_t·(μ_t − μ)²]    (every term ≥ 0: no cancellation)
/// Sums are bitwise commutative, so every thread of a row gets the same bits. Only elements a
/// thread holds enter its fold, so padding lanes never reach the variance. A NaN or inf
/// element makes μ and M2 NaN. Counts are floats: exact up to 2^24 elements per row.
/// The thread-local Val is (n_t, s_t, M2_t); the all-reduced one (N, μ, M2).
struct RedMeanM2 {
  static constexpr int kFloats = 3;
  static constexpr bool kTwoStage = true;
  using Val = RedVal<3>;
  using Stage1 = RedSums<2>;  // (n, s)
  using Stage2 = RedSums<1>;  // M2
  __device__ __forceinline__ static Val identity() { return {{0.f, 0.f, 0.f}}; }
  __device__ __forceinline__ static float mean_of(const Val& a) { return __fdividef(a.v[1], a.v[0]); }
  /// Thread-local merge (the looped policy's chunks): Chan's formula.
  __device__ __forceinline__ static Val combine(const Val& a, const Val& b) {
    if (a.v[0] == 0.f) return b;
    if (b.v[0] == 0.f) return a;
    const float n = a.v[0] + b.v[0];
    const float d = mean_of(b) - mean_of(a);
    return {{n, a.v[1] + b.v[1], a.v[2] + b.v[2] + d * d * __fdividef(a.v[0] * b.v[0], n)}};
  }
  template <class View, class F>
  __device__ __forceinline__ static Val fold(const View& view, F value) {
    if constexpr (View::kOnChip) {
      // One sweep, vector by vector (kV elements held as fp32 in registers): the vector's sum
      // s_j (a pairwise tree), its mean μ_j = s_j / kV (exact: kV is a power of two) and
      // Σ (x − μ_j)² from the same registers; vector j then merges into the thread's
      // (mean, M2) of vectors 0..j−1 by Chan's formula with counts kV·j and kV (constants:
      // the vectors present are a prefix), s_t = Σ s_j.
      constexpr int kV = View::kVec;
      static_assert((kV & (kV - 1)) == 0, "μ_j = s_j · (1 / kV) exactly");
      int cnt = 0;
      float s = 0.f, mean = 0.f, m2 = 0.f;
      float x[kV];
      view.for_each_at([&](const auto& e, int j, int i) {
        x[i] = value(e);
        if (i == kV - 1) {
          float t[kV];
#pragma unroll
          for (int k = 0; k < kV; ++k) t[k] = x[k];
#pragma unroll
          for (int w = 1; w < kV; w *= 2)
#pragma unroll
            for (int k = 0; k + w < kV; k += 2 * w) t[k] += t[k + w];
          const float sj = t[0];
          const float mu = sj * (1.f / kV);
#pragma unroll
          for (int k = 0; k < kV; ++k) {
            const float d = x[k] - mu;
            m2 = fmaf(d, d, m2);
          }
          cnt += kV;
          if (j == 0) {
            s = sj;
            mean = mu;
          } else {
            // Chan, n_a = kV·j and n_b = kV: mean += δ·n_b / (n_a + n_b),
            // M2 += δ²·n_a·n_b / (n_a + n_b).
            s += sj;
            const float delta = mu - mean;
            mean = fmaf(delta, 1.f / float(j + 1), mean);
            m2 = fmaf(delta * (float(kV) * float(j) / float(j + 1)), delta, m2);
          }
        }
      });
      if (cnt == 0) return identity();
      return {{static_cast<float>(cnt), s, m2}};
    } else {
      float n = 0.f, mean = 0.f, m2 = 0.f;
      view.for_each([&](const auto& e) {
        const float x = value(e);
        n += 1.f;
        const float d = x - mean;
        mean += d / n;
        m2 = fmaf(d, x - mean, m2);
      });
      return {{n, n * mean, m2}};
    }
  }
  __device__ __forceinline__ static Stage1::Val stage1(const Val& v) { return {{v.v[0], v.v[1]}}; }
  /// μ = S / N, correctly rounded (a row of one repeated value gets exactly that value, so
  /// h − μ = 0 there, as PyTorch's).
  __device__ __forceinline__ static float mid(const Stage1::Val& t) { return __fdiv_rn(t.v[1], t.v[0]); }
  __device__ __forceinline__ static Stage2::Val stage2(const Val& v, float mu) {
    if (v.v[0] == 0.f) return {{0.f}};
    const float d = mean_of(v) - mu;
    return {{fmaf(v.v[0] * d, d, v.v[2])}};
  }
  __device__ __forceinline__ static Val result(const Stage1::Val& t1, float mu,
                                               const Stage2::Val& t2) {
    return {{t1.v[0], mu, t2.v[0]}};
  }
};

/// Whether a kind all-reduces in two sum stages (RedMeanM2) rather than by its combine.
template <class R, class = void>
struct RedTwoStage : std::false_type {};
template <class R>
struct RedTwoStage<R, std::void_t<decltype(R::kTwoStage)>>
    : std::integral_constant<bool, R::kTwoStage> {};

/// Reduction calls (exchanges) per all-reduce of kind R: 2 for two-stage kinds.
template <class R>
__host__ __device__ constexpr int red_calls() {
  return RedTwoStage<R>::value ? 2 : 1;
}

/// max value (NaN is ignored by fmaxf; ops that must propagate NaN sum it elsewhere).
struct RedMax {
  static constexpr int kFloats = 1;
  using Val = RedVal<1>;
  __device__ __forceinline__ static Val identity() { return {{kNegInf}}; }
  __device__ __forceinline__ static Val combine(const Val& a, const Val& b) {
    return {{fmaxf(a.v[0], b.v[0])}};
  }
  template <class View, class F>
  __device__ __forceinline__ static Val fold(const View& view, F value) {
    float m = kNegInf;
    view.for_each([&](const auto& e) { m = fmaxf(m, value(e)); });
    return {{m}};
  }
};

/// Online softmax statistics (m, s) = (max x, Σ e^(x − m)) in one pass and one exchange
/// (Milakov & Gimelshein 2018; QuACK's online softmax):
///   (m1, s1) ⊕ (m2, s2) = (m, s1·e^(m1 − m) + s2·e^(m2 − m)),  m = max(m1, m2).
/// −inf: where m = −inf (both sides all −inf, or empty) the exponents are taken against 0, so
/// −inf − (−inf) never appears and s stays 0; a row of all −inf ends with (−inf, 0), which the
/// ops turn into NaN as PyTorch does (e^(x − m) = e^NaN). A NaN element makes s NaN.
struct OnlineMaxSum {
  static constexpr int kFloats = 2;
  static constexpr bool kOnline = true;
  using Val = RedVal<2>;  // v[0] = m, v[1] = s
  __device__ __forceinline__ static Val identity() { return {{kNegInf, 0.f}}; }
  __device__ __forceinline__ static Val combine(const Val& a, const Val& b) {
    const float m = fmaxf(a.v[0], b.v[0]);
    const float mr = m == kNegInf ? 0.f : m;
    return {{m, __fadd_rn(__fmul_rn(a.v[1], exp_diff(a.v[0], mr)),
                          __fmul_rn(b.v[1], exp_diff(b.v[0], mr)))}};
  }
  /// On-chip views (registers, shared memory) are swept twice: the thread's max, then the sum
  /// of e^(x − max) (one exponential per element). Views over global memory are swept once,
  /// online per element (a rescale only when the max grows).
  template <class View, class F>
  __device__ __forceinline__ static Val fold(const View& view, F value) {
    if constexpr (View::kOnChip) {
      float m = kNegInf;
      view.for_each([&](const auto& e) { m = fmaxf(m, value(e)); });
      return sum_terms(view, value, m);
    } else {
      float m = kNegInf, s = 0.f;
      view.for_each([&](const auto& e) {
        const float x = value(e);
        if (x > m) {
          s = s * exp_diff(m, x) + exp_diff(x, x);  // e^0 = 1; NaN for x = +inf, as on chip
          m = x;
        } else if (x != kNegInf) {
          s += exp_diff(x, m);
        }
      });
      return {{m, s}};
    }
  }
  /// fold(view, x of stream 0): on-chip, the max over the packed values (16-bit pairs: one
  /// max.bf16x2 / max.f16x2 per two elements, View::max_in0).
  template <class View>
  __device__ __forceinline__ static Val fold_in0(const View& view) {
    const auto x0 = [](const auto& e) { return e.in[0]; };
    if constexpr (View::kOnChip) return sum_terms(view, x0, view.max_in0());
    else return fold(view, x0);
  }
  /// fold_in0 over a register view (RegisterView::for_each_at) that also keeps each term:
  /// h[j][i] = e^(x − m_t) of element i of the thread's vector j (m_t: the thread's max, 0 where
  /// it is −inf), the value the held-fold ops' apply rescales (op_traits.cuh, kHeldFold).
  /// Entries of vectors the thread does not hold are left unset.
  template <class View, int kVecs, int kVec>
  __device__ __forceinline__ static Val fold_in0_held(const View& view,
                                                      float (&h)[kVecs][kVec]) {
    const float m = view.max_in0();
    const float mr = m == kNegInf ? 0.f : m;
    float s = 0.f;
    view.for_each_at([&](const auto& e, int j, int i) {
      h[j][i] = exp_diff(e.in[0], mr);
      s += h[j][i];
    });
    return {{m, s}};
  }
  /// (m, Σ e^(value − m)) over an on-chip view whose max of value is m. The difference first
  /// (exp_diff), so every element at the max adds exactly 1: a row of equal values sums to
  /// exactly N and softmax gives exactly 1/N, as torch (ExpShift's FFMA form does not).
  template <class View, class F>
  __device__ __forceinline__ static Val sum_terms(const View& view, F value, float m) {
    const float mr = m == kNegInf ? 0.f : m;
    float s = 0.f;
    view.for_each([&](const auto& e) { s += exp_diff(value(e), mr); });
    return {{m, s}};
  }
};

/// Whether reduction kind R is online (R::kOnline; see the head comment).
template <class R, class = void>
struct RedIsOnline : std::false_type {};
template <class R>
struct RedIsOnline<R, std::void_t<decltype(R::kOnline)>> : std::bool_constant<R::kOnline> {};

// ---------------------------------------------------------------------- all-reduces

/// The butterfly over groups of `width` lanes (a power of two ≤ 32; groups never mix). Online
/// kinds: max, one rescale per lane, then sums (every lane of a group ends with the same bits:
/// the same max, and sums of the same operands in either order).
template <class R>
__device__ __forceinline__ typename R::Val warp_allreduce_red(typename R::Val v, int width) {
  if constexpr (RedIsOnline<R>::value) {
    float m = v.v[0];
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1)
      if (off < width) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    v.v[1] = __fmul_rn(v.v[1], exp_diff(v.v[0], m == kNegInf ? 0.f : m));
    v.v[0] = m;
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1) {
      if (off < width) {
        float o[R::kFloats];
#pragma unroll
        for (int i = 1; i < R::kFloats; ++i) o[i] = __shfl_xor_sync(0xffffffffu, v.v[i], off);
#pragma unroll
        for (int i = 1; i < R::kFloats; ++i) v.v[i] = __fadd_rn(v.v[i], o[i]);
      }
    }
    return v;
  } else {
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1) {
      if (off < width) {
        typename R::Val o;
#pragma unroll
        for (int i = 0; i < R::kFloats; ++i) o.v[i] = __shfl_xor_sync(0xffffffffu, v.v[i], off);
        v = R::combine(v, o);
      }
    }
    return v;
  }
}

template <class R>
__device__ __forceinline__ void store_slot(float* slot, const typename R::Val& v) {
#pragma unroll
  for (int i = 0; i < R::kFloats; ++i) slot[i] = v.v[i];
}
template <class R>
__device__ __forceinline__ typename R::Val load_slot(const float* slot) {
  typename R::Val v;
#pragma unroll
  for (int i = 0; i < R::kFloats; ++i) v.v[i] = slot[i];
  return v;
}

/// This lane's combination of slots i = lane, lane + 32, ... < n (slot i at slots + i·kSlot), in
/// a fixed order; identity for none. Online kinds: the max over the slots first, then one
/// exponential per slot.
template <class R, int kSlot>
__device__ __forceinline__ typename R::Val combine_slots(const float* slots, int lane, int n) {
  typename R::Val r = R::identity();
  if constexpr (RedIsOnline<R>::value) {
#pragma unroll 4
    for (int i = lane; i < n; i += 32) r.v[0] = fmaxf(r.v[0], slots[i * kSlot]);
    const float mr = r.v[0] == kNegInf ? 0.f : r.v[0];
#pragma unroll 4
    for (int i = lane; i < n; i += 32) {
      const typename R::Val o = load_slot<R>(slots + i * kSlot);
      r.v[1] = fmaf(o.v[1], exp_diff(o.v[0], mr), r.v[1]);
#pragma unroll
      for (int k = 2; k < R::kFloats; ++k) r.v[k] += o.v[k];
    }
  } else {
    for (int i = lane; i < n; i += 32) r = R::combine(r, load_slot<R>(slots + i * kSlot));
  }
  return r;
}

/// All-reduce over rows of kTpr consecutive threads, kRows rows per CTA, geometry fixed at
/// compile time (no clusters). The slots (kSlotFloats floats of
/// static shared memory; a region per stage of two-stage kinds) serve one call.
template <int kTpr, int kRows, class R>
struct StaticRowReducer {
  static_assert(kTpr >= 1 && (kTpr & (kTpr - 1)) == 0 && kTpr <= 1024,
                "kTpr: power of two ≤ 1024");
  static_assert(kTpr * kRows % 32 == 0, "whole warps: the shuffles use the full mask");
  static constexpr int kWarpsPerRow = kTpr > 32 ? kTpr / 32 : 1;
  static constexpr int kSlot = row_slot_floats(R::kFloats);
  static constexpr int kRegion = kRows * kWarpsPerRow * kSlot;
  static constexpr int kSlotFloats = kTpr > 32 ? red_calls<R>() * kRegion : 1;
  using Val = typename R::Val;

  template <class K>
  __device__ __forceinline__ static typename K::Val allreduce_as(typename K::Val v, float* slots) {
    v = warp_allreduce_red<K>(v, kTpr < 32 ? kTpr : 32);
    if constexpr (kTpr <= 32) {
      return v;
    } else {
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
      if (lane == 0) store_slot<K>(slots + warp * kSlot, v);
      __syncthreads();
      // Lane i < kWarpsPerRow of every warp of the row reads partial i; the butterfly over
      // those lanes runs the same operations in every warp; lane 0's result is broadcast.
      const float* row_slots = slots + (warp / kWarpsPerRow) * kWarpsPerRow * kSlot;
      typename K::Val r = lane < kWarpsPerRow ? load_slot<K>(row_slots + lane * kSlot) : K::identity();
      r = warp_allreduce_red<K>(r, kWarpsPerRow);
#pragma unroll
      for (int i = 0; i < K::kFloats; ++i) r.v[i] = __shfl_sync(0xffffffffu, r.v[i], 0);
      return r;
    }
  }

  __device__ __forceinline__ static Val allreduce(Val v, float* slots) {
    if constexpr (RedTwoStage<R>::value) {
      const auto t1 = allreduce_as<typename R::Stage1>(R::stage1(v), slots);
      const float mu = R::mid(t1);
      const auto t2 = allreduce_as<typename R::Stage2>(R::stage2(v, mu), slots + kRegion);
      return R::result(t1, mu, t2);
    } else {
      return allreduce_as<R>(v, slots);
    }
  }
};

/// The default after_sync of ClusterRowReducer's all-reduce: nothing.
struct RowNoHook {
  __device__ __forceinline__ void operator()() const {}
};

/// All-reduce of a one-row-per-CTA kernel with compile-time warps (kWarps) whose rows span a
/// cluster of cluster_n ≤ kMaxCluster CTAs (runtime; 1: no cluster): the scheme above,
/// warp w of CTA `rank` in slot rank·kWarps + w. Shared memory: kBytes at `smem` (16-byte
/// aligned): two stages of slots (call k uses stage k & 1), then cluster_exchange's two
/// mbarriers. Calls may follow each other without a barrier between them: call k + 2 rewrites
/// call k's stage after call k + 1's __syncthreads, which every thread reaches only once it has
/// read call k's slots and waited on its exchange; a peer writes that stage only in its call
/// k + 2, after this CTA's call k + 1 partials, which it sends after that same barrier.
template <int kWarps, int kMaxCluster, class R>
struct ClusterRowReducer {
  static constexpr int kSlot = row_slot_floats(R::kFloats);
  static_assert(kWarps * kSlot >= 4 && (kWarps & (kWarps - 1)) == 0 && kWarps * kSlot <= 128,
                "cluster_exchange moves whole 16-byte chunks, at most 32 per CTA");
  static constexpr int kStageFloats = kWarps * kMaxCluster * kSlot;
  static constexpr size_t kBytes = 2 * kStageFloats * 4 + 16;
  static_assert(static_cast<int64_t>(kBytes) == row_ring_reduce_bytes(kWarps * 32, R::kFloats),
                "row_config.h's size");
  using Val = typename R::Val;
  float* slots;
  uint64_t* bars;

  __device__ explicit ClusterRowReducer(unsigned char* smem)
      : slots(reinterpret_cast<float*>(smem)),
        bars(reinterpret_cast<uint64_t*>(smem + 2 * kStageFloats * 4)) {}

  /// Thread 0, before the kernel's cluster arrive.
  __device__ void init() const { init_exchange_barriers(bars, 2); }

  /// Exchange call k (0, 1, ...) of kind K (slots of R's size). `after_sync()` runs in every
  /// thread right after the CTA's barrier that follows the fold (every thread's fold, and so
  /// its reads of the row, done), before the cluster exchange.
  template <class K, class Hook = RowNoHook>
  __device__ typename K::Val allreduce_as(typename K::Val v, int k, int cluster_n, int rank,
                                          const Hook& after_sync = {}) const {
    v = warp_allreduce_red<K>(v, 32);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float* s = slots + (k & 1) * kStageFloats;
    if (lane == 0) store_slot<K>(s + (rank * kWarps + warp) * kSlot, v);
    __syncthreads();
    after_sync();
    if (cluster_n > 1)
      cluster_exchange(s + rank * kWarps * kSlot, kWarps * kSlot, kWarps * kSlot, 1, cluster_n,
                       rank, bars + (k & 1), k);
    return warp_allreduce_red<K>(combine_slots<K, kSlot>(s, lane, kWarps * cluster_n), 32);
  }

  /// Exchange call k of a two-stage kind's sum stage K (K::kFloats ≤ 4): the CTA's total
  /// first (every warp the same butterfly over its kWarps slots), then one 16-byte message per
  /// peer (lanes 1..cluster_n − 1 of warp 0 send the total, from registers, into the first slot
  /// of this CTA's block in each peer's stage, which the peer itself never writes), then lane
  /// r < cluster_n takes rank r's total (its own from registers) and a butterfly sums them:
  /// every CTA adds the same totals in the same order. The reuse argument of the stages is
  /// allreduce_as's: a peer writes this stage again only in its call k + 2, after this CTA's
  /// call k + 1 message, which follows this CTA's reads of call k.
  template <class K, class Hook = RowNoHook>
  __device__ typename K::Val allreduce_cta_first(typename K::Val v, int k, int cluster_n, int rank,
                                                 const Hook& after_sync = {}) const {
    static_assert(K::kFloats <= 4 && kSlot == 4, "a CTA's total is one 16-byte message");
    v = warp_allreduce_red<K>(v, 32);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float* s = slots + (k & 1) * kStageFloats;
    float* mine = s + rank * kWarps * kSlot;  // this CTA's warps' slots; block `rank` in peers
    if (lane == 0) store_slot<K>(mine + warp * kSlot, v);
    __syncthreads();
    after_sync();
    typename K::Val c = lane < kWarps ? load_slot<K>(mine + lane * kSlot) : K::identity();
    c = warp_allreduce_red<K>(c, 32);
    if (cluster_n == 1) return c;
    uint64_t* bar = bars + (k & 1);
    exchange_expect(bar, static_cast<uint32_t>((cluster_n - 1) * kSlot * 4));
    if (warp == 0 && lane >= 1 && lane < cluster_n) {
      float m[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int i = 0; i < K::kFloats; ++i) m[i] = c.v[i];
      st_async_to(static_cast<uint32_t>(__cvta_generic_to_shared(mine)),
                  static_cast<uint32_t>(__cvta_generic_to_shared(bar)),
                  make_float4(m[0], m[1], m[2], m[3]),
                  rank + lane < cluster_n ? rank + lane : rank + lane - cluster_n);
    }
    exchange_wait(bar, k);
    typename K::Val r = K::identity();
    if (lane < cluster_n) r = lane == rank ? c : load_slot<K>(s + lane * kWarps * kSlot);
    return warp_allreduce_red<K>(r, 32);
  }

  /// Row 0's reduction on rank 0 only (single-stage kinds; ops without per-element outputs,
  /// where only rank 0's thread 0 uses the row's total): ranks ≠ 0 send their warps' partials
  /// to rank 0 and return at once (the value they return is their warp's partial, not for
  /// use); rank 0 returns the cluster's total once every peer's partials arrived.
  __device__ Val reduce_to_rank0(Val v, int cluster_n, int rank) const {
    static_assert(!RedTwoStage<R>::value, "two-stage kinds need the total in every CTA");
    v = warp_allreduce_red<R>(v, 32);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) store_slot<R>(slots + (rank * kWarps + warp) * kSlot, v);
    __syncthreads();
    if (cluster_n > 1) {
      cluster_gather(slots + rank * kWarps * kSlot, kWarps * kSlot, kWarps * kSlot, 1, cluster_n,
                     rank, bars, 0);
      if (rank != 0) return v;
    }
    return warp_allreduce_red<R>(combine_slots<R, kSlot>(slots, lane, kWarps * cluster_n), 32);
  }

  /// Row k (0, 1, ...) of the kernel: every thread of every CTA of the cluster calls. Two-stage
  /// kinds make exchange calls 2k and 2k + 1 (after_sync in the first), each a CTA total first
  /// (allreduce_cta_first).
  template <class Hook = RowNoHook>
  __device__ Val allreduce(Val v, int k, int cluster_n, int rank,
                           const Hook& after_sync = {}) const {
    if constexpr (RedTwoStage<R>::value) {
      const auto t1 = allreduce_cta_first<typename R::Stage1>(R::stage1(v), 2 * k, cluster_n,
                                                              rank, after_sync);
      const float mu = R::mid(t1);
      const auto t2 =
          allreduce_cta_first<typename R::Stage2>(R::stage2(v, mu), 2 * k + 1, cluster_n, rank);
      return R::result(t1, mu, t2);
    } else {
      return allreduce_as<R>(v, k, cluster_n, rank, after_sync);
    }
  }
};

/// The runtime-geometry all-reduce (row_allreduce's scheme; the general policy). `slots`:
/// row_general_smem_bytes(g, R::kFloats) of shared memory; k: the call's index (stage k & 1).
/// Clusters: row_allreduce_red_start at kernel start, and its cluster barrier waited on
/// (cluster_wait) before the first call.
template <class R>
__device__ __forceinline__ uint64_t* row_reduce_red_bars(const RowGeometry& g, float* slots) {
  return reinterpret_cast<uint64_t*>(slots + 2 * g.reduce_slots() * row_slot_floats(R::kFloats));
}

template <class R>
__device__ __forceinline__ void row_allreduce_red_start(const RowGeometry& g, const RowCtx& c,
                                                        float* slots) {
  if (g.cluster_n == 1) return;
  if (c.tid == 0) init_exchange_barriers(row_reduce_red_bars<R>(g, slots), 2);
  cluster_arrive_relaxed();
}

/// One exchange call k of kind K with R's slot size (row_allreduce_red's body).
template <class R, class K>
__device__ __forceinline__ typename K::Val row_allreduce_red_as(typename K::Val v,
                                                                const RowGeometry& g,
                                                                const RowCtx& c, float* slots,
                                                                int k) {
  constexpr int kSlot = row_slot_floats(R::kFloats);
  v = warp_allreduce_red<K>(v, g.tpr);
  if (g.tpr <= 32 && g.cluster_n == 1) return v;
  // Here tpr ≥ 32: rows narrower than a warp never span a cluster (row_general_geometry).
  const int stage = k & 1;
  const int warps_per_row = g.tpr / 32;
  const int nslots = warps_per_row * g.cluster_n;
  float* stage_slots = slots + stage * g.reduce_slots() * kSlot;
  float* row_slots = stage_slots + c.row_in_cta * nslots * kSlot;
  const int my_slot = c.rank * warps_per_row + c.lane_in_row / 32;
  if (c.lane == 0) store_slot<K>(row_slots + my_slot * kSlot, v);
  __syncthreads();
  if (g.cluster_n > 1)
    cluster_exchange(stage_slots + c.rank * warps_per_row * kSlot, nslots * kSlot,
                     warps_per_row * kSlot, g.rows_per_cta(), g.cluster_n, c.rank,
                     row_reduce_red_bars<R>(g, slots) + stage, k);
  return warp_allreduce_red<K>(combine_slots<K, kSlot>(row_slots, c.lane, nslots), 32);
}

/// All-reduce number k (0, 1, ...) of the kernel; two-stage kinds make exchange calls 2k and
/// 2k + 1.
template <class R>
__device__ __forceinline__ typename R::Val row_allreduce_red(typename R::Val v,
                                                             const RowGeometry& g,
                                                             const RowCtx& c, float* slots,
                                                             int k) {
  if constexpr (RedTwoStage<R>::value) {
    const auto t1 =
        row_allreduce_red_as<R, typename R::Stage1>(R::stage1(v), g, c, slots, 2 * k);
    const float mu = R::mid(t1);
    const auto t2 =
        row_allreduce_red_as<R, typename R::Stage2>(R::stage2(v, mu), g, c, slots, 2 * k + 1);
    return R::result(t1, mu, t2);
  } else {
    return row_allreduce_red_as<R, R>(v, g, c, slots, k);
  }
}

}  // namespace quack::detail
