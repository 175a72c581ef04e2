// Internal description of one validated GEMM problem (host only; no CUTLASS): what the public
// API (src/gemm/gemm.cpp) hands to the kernel launchers of src/gemm/sm90/ and to the K = 0 fill.
//
//   acc[l] = A[l] · B[l]      l < L, fp32 accumulation, then per epilogue (GemmEpilogue):
//   kLinComb: D = alpha · acc + beta · C
//   kAct:     D = preact = alpha · acc + beta · C (stored when d is non-null), D1 = act(preact)
//   kDAct:    C = preact (read), D = acc ⊙ act'(C), D1 = act(C) (stored when d1 is non-null)
//   kBias:    kLinComb plus the bias (row_bias[n] + col_bias[m])
//   kGated:   D = preact = alpha · acc + beta · C + bias (N columns, stored when d is non-null),
//             D1 = glu(D's column pairs) (N / 2 columns)
//   kGatedConcat: kGated with B's columns the halves [gate | up] (read through an interleaving
//             view: instances whose Tile has kConcatB) and the row bias [bias_gate; bias_up]
//   kDGated:  C = preact and D = dpreact as packed 16-bit pairs (the problem's n = the number of
//             pairs; c_dtype / d_dtype = kFloat32 stand for the 32-bit pairs, packed_dtype for
//             their halves), D1 = glu(C's pairs)
//   kRotary:  D = alpha · acc + beta · C, then the columns n < rotary_cols (heads of
//             rotary_head_dim columns) rotated in pairs (2j, 2j + 1) of a head by the angle of
//             pair j at position m % rotary_seqlen (the interleaved RoPE layout): with
//             c = rotary_cos[pos][j], s = rotary_sin[pos][j],
//             D(m, 2j) = y0·c − y1·s, D(m, 2j + 1) = y1·c + y0·s (the gemm_rotary API)
// kAct also adds the bias. A bias is read at its element (row_bias[l][n], col_bias[l][m]) in
// the kernel's terms (a column-major user D swaps the two).
//
// Layouts (elements), in the kernel's terms:
//   A[l](m, k) at a + l·batch_a + m·lda + k   a_major = kK  (row-major, K contiguous)
//                              + m + k·lda   a_major = kMN (column-major, M contiguous)
//   B[l](k, n) at b + l·batch_b + n·ldb + k   b_major = kK  (column-major, K contiguous)
//                              + n + k·ldb   b_major = kMN (row-major, N contiguous)
//   C[l](m, n) at c + l·batch_c + m·ldc + n   (row-major, always); D and D1 likewise.
// The public API maps a column-major D (and C) onto this by computing Dᵀ = Bᵀ·Aᵀ: the kernel's A
// is the user's Bᵀ and its B the user's Aᵀ, M and N trade places, and each operand keeps its
// memory (a K-major B is a K-major Bᵀ-as-A; an N-major B is an MN-major Bᵀ-as-A).
// All leading and batch strides are multiples of 16 bytes and the bases 16-byte aligned (TMA).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "quack/tensor.h"

namespace quack::detail {

/// Whether TMA can address rows at ptr: a 16-byte aligned base, and leading and (batched)
/// batch strides, in elements of elem_bytes, that are whole multiples of 16 bytes. The one test
/// behind the API's record of an operand (gemm.cpp), the epilogue's choice between TMA and its
/// plain loads and stores (sm90/epilogue.cuh) and the autotuning key's " io:plain"
/// (gemm_tune.cpp): they must agree.
inline bool tma_rows_addressable(const void* ptr, int64_t elem_bytes, int64_t ld, int64_t batch, bool batched) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && (ld * elem_bytes) % 16 == 0 &&
         (!batched || (batch * elem_bytes) % 16 == 0);
}

/// Which dimension of a GEMM operand is contiguous in memory (CuTe's GMMA::Major): K, or the
/// other one (M for A, N for B).
enum class GemmMajor { kK, kMN };

/// The epilogue visitor (src/gemm/sm90/epilogue_ops.cuh) of an instance: LinearCombination,
/// ActEpilogue, DActEpilogue, LinCombBias, GatedEpilogue (twice: with and without the concat
/// view of B), DGatedEpilogue, RotaryEpilogue.
/// A new epilogue is appended (the last value, which kGemmEpilogueCount then names) with one row
/// in kGemmEpilogues.
enum class GemmEpilogue { kLinComb, kAct, kDAct, kBias, kGated, kGatedConcat, kDGated, kRotary };

/// Per epilogue, in the enum's order: its name (the epilogue column of instances.txt, the kernel
/// name's part after "gemm_" but for lincomb's "gemm", and the "epi:" field of the autotune key,
/// which keys the disk cache: never renamed) and its outputs (1: D; 2: D and D1, whose dtype
/// then tells instances and tune keys apart).
struct GemmEpilogueInfo {
  GemmEpilogue epilogue;
  const char* name;
  int outputs;
};
inline constexpr GemmEpilogueInfo kGemmEpilogues[] = {
    {GemmEpilogue::kLinComb, "lincomb", 1},   {GemmEpilogue::kAct, "act", 2},
    {GemmEpilogue::kDAct, "dact", 2},         {GemmEpilogue::kBias, "bias", 1},
    {GemmEpilogue::kGated, "gated", 2},       {GemmEpilogue::kGatedConcat, "gatedcat", 2},
    {GemmEpilogue::kDGated, "dgated", 2},     {GemmEpilogue::kRotary, "rotary", 1},
};
constexpr int kGemmEpilogueCount = static_cast<int>(GemmEpilogue::kRotary) + 1;
static_assert(sizeof(kGemmEpilogues) / sizeof(kGemmEpilogues[0]) == kGemmEpilogueCount,
              "kGemmEpilogues: one row per GemmEpilogue (update kGemmEpilogueCount to the last value)");
constexpr bool gemm_epilogues_in_order() {
  for (int i = 0; i < kGemmEpilogueCount; ++i)
    if (static_cast<int>(kGemmEpilogues[i].epilogue) != i) return false;
  return true;
}
static_assert(gemm_epilogues_in_order(), "kGemmEpilogues: rows in the enum's order");

constexpr const char* gemm_epilogue_name(GemmEpilogue e) { return kGemmEpilogues[static_cast<int>(e)].name; }
constexpr int gemm_epilogue_outputs(GemmEpilogue e) { return kGemmEpilogues[static_cast<int>(e)].outputs; }

inline constexpr int kStreamKOff = 0, kStreamKForce = 1, kStreamKRule = 2;

struct GemmProblem {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;  // null when C is not read (absent, or beta = 0)
  void* d = nullptr;        // output 0; null for gemm_act without preact (not stored)
  void* d1 = nullptr;       // output 1 (kAct, kDAct: postact); null: not stored
  int m = 0, n = 0, k = 0, l = 1;
  int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0, ldd1 = 0;
  int64_t batch_a = 0, batch_b = 0, batch_c = 0, batch_d = 0, batch_d1 = 0;
  GemmMajor a_major = GemmMajor::kK, b_major = GemmMajor::kK;
  DType ab_dtype = DType::kBFloat16;  // A and B
  DType d_dtype = DType::kBFloat16;   // D
  DType c_dtype = DType::kBFloat16;   // C (d_dtype, or float32 with a 16-bit D where an instance has it)
  DType d1_dtype = DType::kBFloat16;  // D1
  GemmEpilogue epilogue = GemmEpilogue::kLinComb;
  int activation = 0;                 // quack::Activation (kAct, kDAct)
  float alpha = 1.f, beta = 0.f;      // beta is ignored when c is null
  // Device fp32 scalars read by the kernel instead of alpha / beta when non-null; with
  // beta_dev, c is non-null and the kernel reads C only when *beta_dev != 0.
  const float* alpha_dev = nullptr;
  const float* beta_dev = nullptr;
  uint32_t* tile_counter = nullptr;  // dynamic tile scheduler (GemmArgs::tile_counter) when non-null
  // Stream-K (src/gemm/streamk.h; cooperative instances): kStreamKOff, kStreamKForce (the
  // schedule wherever it can be built) or kStreamKRule (where StreamKSchedule::make estimates a
  // gain). streamk_ws: the workspace (flags zero; streamk_flag_bytes of flags, then the
  // partials), streamk_ws_bytes its size; null with streamk off. gemm.cpp sets them.
  int streamk = 0;
  void* streamk_ws = nullptr;
  int64_t streamk_ws_bytes = 0, streamk_flag_bytes = 0;
  // Bias vectors (kBias, kAct, kGated; null: absent), contiguous, in the kernel's terms:
  // row_bias[l·batch_row_bias + n], col_bias[l·batch_col_bias + m]; dtypes fp32, bf16 or fp16.
  const void* row_bias = nullptr;
  const void* col_bias = nullptr;
  int64_t batch_row_bias = 0, batch_col_bias = 0;
  DType row_bias_dtype = DType::kFloat32, col_bias_dtype = DType::kFloat32;
  // kGatedConcat: the row bias is [bias_gate; bias_up] (element n read at (n % 2)·N/2 + n / 2).
  bool concat = false;
  DType packed_dtype = DType::kBFloat16;  // kDGated: the 16-bit halves of C's and D's pairs
  // kRotary: fp32 tables (rotary_seqlen, rotary_head_dim / 2), row stride rotary_ld, unit column
  // stride, or paired (rotary_paired: the columns of one (rows, rotary_head_dim / 2, 2) tensor,
  // rotary_sin = rotary_cos + 1, column stride 2, rotary_ld even, 8-byte aligned); the rotated
  // columns [0, rotary_cols) in the kernel's terms (a row-major D).
  const float* rotary_cos = nullptr;
  const float* rotary_sin = nullptr;
  int64_t rotary_ld = 0;
  bool rotary_paired = false;
  int rotary_cols = 0, rotary_head_dim = 0, rotary_seqlen = 0;
  // Tile order (src/gemm/tile_scheduler.h): bands of raster_group cluster tiles (0: the tile
  // configuration's default, 8) along M (raster 0), along N (1) or as QuACK's heuristic picks
  // (2); odd bands walked backwards when serpentine. gemm.cpp sets them (QUACK_GEMM_RASTER).
  int raster = 0, raster_group = 0;
  bool serpentine = false;
  int device = 0;
};

// Kernel launchers: one per instance, generated from src/gemm/sm90/instances.txt
// (cmake/QuackGemmInstances.cmake): their declarations and the dispatch table are in the
// generated header gemm/gemm_instances.h. Require m, n, k ≥ 1 and the problem's a_major /
// b_major to be the instance's.
using GemmLauncher = void (*)(const GemmProblem&, cudaStream_t);

// K = 0: acc = 0, then the epilogue (D = beta · C or zeros; gemm_act: preact and postact;
// gemm_dact: dpreact = 0, postact = act(C)). src/gemm/gemm_fill.cu. Requires m, n ≥ 1. fn: the
// public function, for launch errors.
void gemm_fill_k0(const GemmProblem& p, const char* fn, cudaStream_t stream);

}  // namespace quack::detail
