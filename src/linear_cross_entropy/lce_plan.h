// Linear + cross-entropy: the plan of one call (host, no CUDA call): chunk sizes, where the
// fp32 dweight accumulator lives, the passes, and the workspace layout. Built by the API file
// (linear_cross_entropy.cpp) after validation; the host tests check it. Not public.
//
// Passes of the forward (include/quack/linear_cross_entropy.h has the method):
//   token-chunk pass   chunks of `chunk` tokens over the full vocabulary: logits chunk, the CE
//                      forward with the gradient in place, dx rows, dbias partials, and dweight
//                      rows [0, dw_rows) accumulated (kDirect: into dweight itself; kAcc: fp32;
//                      the last chunk stores the workspace rows into dweight: dw_ws_last_direct)
//   vocabulary pass    (kLowMemory with dw_rows < V) slices of `vslice` columns of [dw_rows, V)
//                      over all T tokens: the logits slice again, the CE backward from lse in
//                      place, and that slice's dweight rows by one GEMM with K = T
// The backward (linear_cross_entropy_bwd) is the vocabulary pass over [0, V) with dx as well.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quack/linear_cross_entropy.h"

namespace quack::detail {

/// How the token-chunk pass writes dweight rows [0, dw_rows).
enum class LceDw : int {
  kNone = 0,    // no dweight
  kDirect = 1,  // the GEMM writes dweight in its own dtype: one chunk, or an fp32 dweight
                // (beta = 1 after the first chunk, and for the first one with accumulate)
  kAcc = 2,     // an fp32 accumulator: rows [0, acc_in_dw) in dweight's own memory (read as
                // fp32 rows of D; compacted in place into 16-bit rows at the end), rows
                // [acc_in_dw, dw_rows) in the workspace; then cast into dweight (added to it
                // with accumulate, where acc_in_dw = 0)
};

struct LcePlan {
  int64_t T = 0, D = 0, V = 0;
  int64_t ld = 0;  // row stride (elements) of a logits chunk: round_up(V, 8)
  int elt = 2;     // bytes per element of x (and of the logits buffer)
  // token-chunk pass
  int64_t chunk = 0;  // tokens per chunk (≥ 1 when T > 0)
  int64_t n_chunks = 0;
  bool grads = false;  // the CE forward writes the gradient (dx, dweight or dbias asked)
  LceDw dw = LceDw::kNone;
  int64_t dw_rows = 0;    // dweight rows of the token-chunk pass (V, or the low-memory V0)
  int64_t acc_in_dw = 0;  // kAcc: fp32 rows living inside dweight's memory
  // kAcc, dweight written (not accumulated into): the last chunk's GEMM of the workspace rows
  // [acc_in_dw, dw_rows) stores them straight into dweight's 16-bit rows (D = acc + C, C their
  // fp32 accumulator: no cast of them at the end); rows [0, acc_in_dw) are compacted in place
  // before it (their 16-bit rows free the bytes it writes), inside the last chunk (run AK2:
  // 83.09 ms against 85.44 with the cast after the chunks and the cooperative dweight tile).
  bool dw_ws_last_direct = false;
  // vocabulary pass (forward: [dw_rows, V) with kLowMemory; backward: [0, V))
  int64_t v_begin = 0;    // first column; V: no vocabulary pass
  int64_t vslice = 0;     // columns per slice (multiple of 8 unless it is the whole range)
  int64_t vslice_ld = 0;  // row stride of a slice buffer: round_up(vslice, 8)
  int64_t n_slices = 0;
  bool dx_acc = false;  // backward: dx accumulated in an fp32 workspace across slices
  // workspace layout (byte offsets, 256-byte aligned regions; size 0: absent)
  size_t off_scalars = 0;                   // 256 bytes: the vocabulary pass's dloss scalar 1.0
  size_t off_ce = 0, ce_bytes = 0;          // cross_entropy_fwd's workspace for all T rows
  size_t off_lse = 0, lse_bytes = 0;        // (T) fp32 lse
  size_t off_target = 0, target_bytes = 0;  // (T) int32 targets of a vocabulary slice
  size_t off_logits = 0, logits_bytes = 0;  // a logits chunk or slice
  size_t off_acc = 0, acc_bytes = 0;        // fp32 dweight rows [acc_in_dw, dw_rows), or dx (T, D)
  size_t off_dbias = 0, dbias_bytes = 0;    // (V) fp32 dbias accumulator
  size_t total = 0;
};

/// Validates `a` (throws as linear_cross_entropy_fwd, except the workspace) and plans it.
LcePlan lce_plan_fwd(const LinearCrossEntropyFwdArgs& a);
/// Validates `a` (throws as linear_cross_entropy_bwd, except the workspace) and plans it.
LcePlan lce_plan_bwd(const LinearCrossEntropyBwdArgs& a);

/// Logits budget (bytes) of a chunk or slice for `mode` and free_bytes (0: unknown).
size_t lce_logits_budget(LinearCrossEntropyMode mode, size_t free_bytes);
/// Columns per vocabulary slice of [v_begin, V) over T tokens within `budget` bytes of
/// elements of `elt` bytes (balanced; a multiple of 128 unless one slice holds the range).
int64_t lce_vocab_slice(int64_t T, int64_t v_begin, int64_t V, int elt, size_t budget);
/// Low-memory mode: dweight rows of the token-chunk pass (⌊V/3⌋ rounded down to 8).
inline int64_t lce_low_memory_rows(int64_t V) { return V / 3 / 8 * 8; }
/// Default mode, kAcc: fp32 rows inside dweight's memory (⌊V/2⌋ rounded down to 8).
inline int64_t lce_split_rows(int64_t V) { return V / 2 / 8 * 8; }

}  // namespace quack::detail
