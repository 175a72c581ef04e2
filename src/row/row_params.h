// Kernel parameters of every row op (plain data, host and device): the geometry and the
// operands, by role. An op's traits (op_traits.cuh) say which slots they use; the API file
// fills them after validation. Absent operands have ptr == nullptr.
//
//   in[s]       per-element input streams, (M, N)       e.g. softmax fwd: x; bwd: y, dy
//   out[s]      per-element output streams, (M, N)      e.g. y; dx
//   vec[v]      per-column vectors, (N): row_stride 0   e.g. weight, bias
//   row_in[r]   per-row inputs, (M): row_stride = the   e.g. rstd, target, lse   (traits'
//   row_out[r]  per-row outputs, (M)   element stride   e.g. rstd, mean, loss     load_row /
//                                                                                  finish)
//   part[a]     column accumulation a's fp32 partials   e.g. dweight, dbias
//               (P, N), row stride N: one row per persistent cluster; run_row_call adds them
//               (colsum) into the accumulation's output; nullptr: not asked for
//   scalar[i]   op scalars                              e.g. eps, weight offset
//   iscalar[i]  op integer scalars                      e.g. ignore_index, classes, flags
//   ring_l2     the ring policy's L2 use (RingL2), from the plan
//
// A (M) vector is read as an (M, 1) operand: RowIO::offset(row, 0) (row_vector_io, row_op.h).
// Absent operands (optional streams, vectors, per-row tensors) have ptr == nullptr.
#pragma once

#include <cstdint>

#include "common/row_geometry.h"
#include "common/row_io.h"

namespace quack::detail {

inline constexpr int kRowMaxIn = 3;
inline constexpr int kRowMaxOut = 2;
inline constexpr int kRowMaxVec = 2;
inline constexpr int kRowMaxRowIO = 4;  // cross-entropy: target, target logit, lse, dloss
inline constexpr int kRowMaxScalars = 5;  // cross-entropy: ε, z scale, c, 1/c, ε/V
inline constexpr int kRowMaxAcc = 2;
inline constexpr int kRowMaxIScalars = 4;

/// The ring policy's use of L2 (RowPlan::ring_l2): its prefetch of the row kStages + 1 rows ahead
/// (cp.async.bulk.prefetch.L2, policy_ring.cuh) and the cache policy of its stage copies. The
/// plan takes kHinted: the prefetched lines at evict-last, so they outlive the output stream until
/// the row's bulk copy, which reads them at evict-first. Run AZ (H200, kernel-only; bf16 unless
/// named): against kPlain RMSNorm fwd 16384 x 65536 / 131072 and 8192 x 262144 -2.1 / -2.4 /
/// -2.2 %, LayerNorm fwd 16384 x 65536 -4.2 % (fp32 -3.4 %), softmax bwd 65536 -0.3 %,
/// LayerNorm fwd 8192 x 262144 +0.3-0.6 % (bf16, fp32); DRAM reads (ncu) at 65536 within 0.5 %
/// of x once, kPlain's 4-8 % above. kPlain and kNoPrefetch are quack-bench's --ring-l2 controls.
enum class RingL2 : int {
  kHinted = 0,  // prefetch at evict-last, stage copies at evict-first
  kPlain,       // prefetch and stage copies without cache hints
  kNoPrefetch,  // no prefetch, no hints
};
inline constexpr int kRingL2Count = 3;

/// What a RingL2 mode does: whether the prefetch runs and which cache hints the prefetch and
/// the stage copies carry.
struct RingL2Use {
  bool prefetch, prefetch_evict_last, copy_evict_first;
};
QUACK_HOST_DEVICE constexpr RingL2Use ring_l2_use(RingL2 m) {
  return m == RingL2::kHinted ? RingL2Use{true, true, true}
       : m == RingL2::kPlain  ? RingL2Use{true, false, false}
                              : RingL2Use{false, false, false};
}

struct RowParams {
  RowGeometry g;  // rows = M, cols = N; cluster_n of the ring and general policies
  RowIO in[kRowMaxIn];
  RowIO out[kRowMaxOut];
  RowIO vec[kRowMaxVec];
  RowIO row_in[kRowMaxRowIO];
  RowIO row_out[kRowMaxRowIO];
  float* part[kRowMaxAcc] = {nullptr, nullptr};
  float scalar[kRowMaxScalars] = {};
  int64_t iscalar[kRowMaxIScalars] = {0, 0, 0, 0};
  RingL2 ring_l2 = RingL2::kHinted;
};

}  // namespace quack::detail
