// QuACK-C++ GEMM (Hopper, sm_90a). Host-only header.
//
// Speed against cuBLAS and QuACK: docs/performance.md, "Current figures" ("Issue 16: GEMM");
// GPU tests: tests/cpp/gpu/test_gemm.cpp.
//
// Tile configurations (BK = 64), the instances of src/gemm/sm90/instances.txt: 128x256
// cooperative with a 2x1 cluster for every dtype and layout (bf16 -> bf16 as 128x256e64, D stored
// in 128 x 64 subtiles); for bf16 -> bf16 with the kernel's A K-major (kk, km in the kernel's
// terms, src/gemm/gemm_problem.h) also 128x128 and 128x192 pingpong with 2x1 clusters, 128x64
// cooperative without a cluster, 64x128 (one consumer warpgroup) with a 2x1 cluster and 128x64
// with a 1x2 cluster (A multicast; forced only); for the weight gradient accumulated in fp32 (mm,
// C fp32) 128x192 pingpong with a C ring (128x192ppa1d2, taken only when C is read). Other tiles
// (256x128, 256x192, further epilogue variants) are A/B candidates of instances_ab.txt, built
// only with -DQUACK_GEMM_AB_INSTANCES=ON. Which one runs (src/gemm/gemm.cpp, choose_instance):
// GemmArgs::tuned (timed once per shape class, cached), else the environment variable
// QUACK_GEMM_TILE (the kernel name's tile part, e.g. 128x192pp, or "<name part>:<tile>" for some
// groups only) or QUACK_GEMM_TILE_N = 256 | 192 | 128 | 64 | 64x128 | 64x2 (forces one where it
// exists), else the shape rule of src/gemm/tile_rule.h and tile_rule.cpp (64x128 or 128x64 when
// 128x256 tiles would leave more than a quarter of the SMs idle; pingpong 128x128 or 128x192 with
// ≥ 4 of its tiles per SM, the one of least estimated time, from K = kShortK against 128x256
// too, though not for the fused epilogues of quack/gemm_act.h; else 128x256). Scheduling: static persistent
// (tile order: QUACK_GEMM_RASTER, for measurements), or dynamic (an atomic tile counter) with
// GemmArgs::tile_counter; stream-K (the last wave of tiles split along K over all SMs,
// src/gemm/streamk.h) on the cooperative tiles with GemmArgs::streamk_workspace where the rule
// estimates a gain. QUACK_GEMM_STREAMK: 0 off, 1 forced (a workspace allocated per call when
// none is given), auto / unset: the rule when a workspace is given.
// Hardware: sm_90a (H100/H200) only; on another GPU the launch fails with CudaError.
// The same kernel with an activation fused into the epilogue: quack/gemm_act.h (gemm_act, gemm_dact).
//
// Method: a persistent, warp-specialised TMA + WGMMA kernel written with CuTe atoms
// (src/gemm/sm90/kernel.cuh and the collectives beside it; design (b) of docs/gemm-spike.md), following CUTLASS 3.x's
// sm90 warp-specialised cooperative GEMM (sm90_mma_tma_gmma_ss_warpspecialized.hpp,
// sm90_epilogue_tma_warpspecialized.hpp) and QuACK's gemm: one producer warp loads A and B tiles
// with TMA into a shared-memory ring (B multicast across a 2x1 cluster, A across a 1x2 one), two
// consumer warpgroups (cooperative on one tile, or pingpong on alternate tiles) run WGMMA with
// fp32 accumulators, and the epilogue stages D through shared memory to a TMA store. Host protocol after CUTLASS: arguments → can_implement → launch.
#pragma once

#include <cuda_runtime_api.h>

#include "quack/tensor.h"

namespace quack {

/// A bias added in the epilogue (gemm, and gemm_act / gemm_gated of quack/gemm_act.h), after alpha·A·B + beta·C and
/// before the activation:
///
///   out[l][m][n] += row[l][n] + col[l][m]
///
/// | tensor | shape         | dtype                | layout                         | meaning                                   |
/// |--------|---------------|----------------------|--------------------------------|-------------------------------------------|
/// | row    | (N,) or (L, N) | fp32, bf16 or fp16  | stride 1 along N; any batch stride (0: shared) | a row vector added to every row (an nn.Linear bias; QuACK's rowvec_bias "bias") |
/// | col    | (M,) or (L, M) | fp32, bf16 or fp16  | stride 1 along M; any batch stride (0: shared) | a column vector added to every column (QuACK's colvec_bias) |
///
/// Either or both may be given. A (N,) / (M,) vector with L > 1 is shared by every batch.
/// Values are read once per output element from global memory (L1/L2-cached) and converted to
/// fp32; base addresses need the element's natural alignment only. Its gradient (a column sum of
/// the output gradient over M, and over L for a shared bias) is not computed by these functions:
/// the layers of quack_cpp.nn take it with a deterministic torch reduction.
struct GemmBias {
  TensorRef row;
  TensorRef col;
  bool present() const { return row.present() || col.present(); }
};

/// Arguments of gemm.
///
///   D[l] = alpha · (A[l] · B[l]) + beta · C[l] (+ bias)      for each batch l < L
///
/// products and sums in fp32 (WGMMA, fp32 accumulation), the result rounded once to D's dtype.
/// With beta = 0 or without C, C is never read (NaN in C does not reach D).
///
/// | tensor | shape                | dtype                          | layout (each either one)                  | required |
/// |--------|----------------------|--------------------------------|-------------------------------------------|----------|
/// | a      | (M, K) or (L, M, K)  | bf16, fp16                     | row-major (stride 1 along K) or column-major (along M) | yes |
/// | b      | (K, N) or (L, K, N)  | a's dtype                      | column-major (stride 1 along K) or row-major (along N) | yes |
/// | c      | (M, N) or (L, M, N)  | d's dtype                      | d's layout                                | if beta ≠ 0 |
/// | d      | (M, N) or (L, M, N)  | a's dtype or fp32              | row-major (stride 1 along N) or column-major (along M) | yes |
///
/// Supported (a, b, d) layout combinations (row / column-major); the kernel's view in brackets:
///
/// | a      | b      | d      | every dtype pair (bf16 → bf16, bf16 → fp32, fp16 → fp16, fp16 → fp32) | typical use |
/// |--------|--------|--------|---------------------------------------------------------|----------------------|
/// | row    | column | row    | yes [A K-major, B K-major]                              | y = x·Wᵀ (forward)   |
/// | row    | row    | row    | yes [A K-major, B N-major]                              | dx = dy·W (dgrad)    |
/// | column | row    | row    | yes [A M-major, B N-major]                              | dW = dyᵀ·x (wgrad)   |
/// | row    | column | column | yes [as row, column, row on Dᵀ = Bᵀ·Aᵀ]                 |                      |
/// | column | column | column | yes [as row, row, row on Dᵀ]                            |                      |
/// | column | row    | column | yes [as column, row, row on Dᵀ]                         |                      |
/// | column | column | row    | bf16 → bf16 only [A M-major, B K-major]; others not yet |                      |
/// | row    | row    | column | bf16 → bf16 only [the same kernel on Dᵀ]; others not yet |                     |
///
/// A column-major d is computed as its transpose: Dᵀ (N, M) = Bᵀ·Aᵀ + beta·Cᵀ, row-major, in the
/// same memory (the operands trade places; no copy).
///
/// b column-major is the transpose of a row-major (N, K) matrix, e.g. an nn.Linear weight W:
/// y = x · Wᵀ is gemm with a = x and b = Wᵀ (strides (1, K)).
///
/// All tensors are 2-D, or all 3-D with the same batch extent L. Strides are in elements. A
/// tensor's layout is read from its strides: row-major when the last dimension has stride 1,
/// column-major when the one before has; a dimension of extent 1 has no stride that matters, so
/// an (M, 1) tensor with strides (1, 1) (as torch makes it) is column-major and a (1, N) one with
/// strides (N, 1) row-major. Alignment: each tensor's elements at their natural alignment (2
/// bytes for bf16/fp16, 4 for fp32), nothing more. The leading stride
/// (between rows of a row-major tensor, between columns of a column-major one) is at least the
/// contiguous extent. Where TMA can address a tensor (16-byte aligned base; leading stride and,
/// for L > 1, batch stride multiples of 16 bytes: 8 elements of bf16/fp16, 4 of fp32) the kernel
/// loads and stores it with TMA; otherwise (N = 50257, K = 1001, a view at an odd offset) a and
/// b are copied once per call into a workspace with padded rows (GemmArgs::workspace; one read
/// and one write of the operand) and c and d are read and written by plain loads and stores in
/// the epilogue (any alignment; the TMA path stays the faster one). M, N, K, L ≤ 2^31 − 1.
/// c may be the same tensor as d (identical pointer, dtype and strides); other overlaps between
/// d and an input are undefined.
///
/// Not yet supported (InvalidArgument "... not yet supported"): the two layout combinations
/// marked "not yet" above for every dtype pair but bf16 → bf16; a c whose layout differs
/// from d's (when c is read); a tensor with no dimension of stride 1; a batch stride of 0
/// (broadcast) with L > 1; fp32 or other input dtypes; c of another dtype than d, except an
/// fp32 c with bf16 a, b and d (supported for (a, b, d) = (row, column, row), (row, row, row),
/// (column, row, row), (row, column, column), (column, column, column), (column, row,
/// column), c like d) and with fp16 a, b and d (for (column, row, row) and (column, row,
/// column): the wgrad's layout); a per-row/column
/// alpha (activations: quack/gemm_act.h).
///
/// bias (GemmBias: a row vector (N,) added to every row and/or a column vector (M,) added to
/// every column, fp32, bf16 or fp16; in the user's (M, N) terms whatever d's layout): compiled for
/// bf16 → bf16 and fp16 → fp16 (d of a's dtype; no c of another dtype) with (a, b, d) = (row,
/// column, row) — y = x·Wᵀ + b, an nn.Linear forward — and (row, column, column). An fp32 d with
/// a bias throws InvalidArgument "gemm: d float32 is not compiled for bfloat16 inputs (no kernel
/// instance), expected d = bfloat16 (with a bias)"; other layouts with a bias "... not yet
/// supported".
struct GemmArgs {
  TensorRef a;
  TensorRef b;
  TensorRef c;  // optional
  TensorRef d;
  GemmBias bias;  // optional (see above)
  float alpha = 1.f;
  float beta = 0.f;
  /// Optional device pointers to one fp32 value each, used instead of alpha / beta and read by
  /// the kernel when it runs (a CUDA graph replays with the values of the moment). With
  /// beta_device, c is required, and C is read only when *beta_device ≠ 0 at run time (so NaN
  /// in C never reaches D when it is 0). 4-byte aligned device (or managed) memory on d's
  /// device; not checked beyond alignment (a host pointer is undefined behaviour).
  const float* alpha_device = nullptr;
  const float* beta_device = nullptr;
  /// Autotuning (QuACK's tuned=True): false runs the default tile configuration (or
  /// QUACK_GEMM_TILE_N's); true picks, per (device: compute capability and SM count; M, N, K
  /// rounded up to powers of two, L, dtypes, majors, C's dtype when read), the fastest compiled
  /// configuration of the problem's dtypes and majors (the default one unless another times
  /// more than 1 % faster), timed on the first call on `stream` with
  /// a scratch D (the caller's D is written once, by the chosen kernel) and cached on disk
  /// ($QUACK_CACHE_DIR/gemm_autotune.tsv, else $XDG_CACHE_HOME or ~/.cache /quack_cpp/; safe
  /// under concurrent processes). During CUDA-graph capture nothing is timed: the cached choice,
  /// else the tile rule's (as tuned = false). The first tuned call synchronises the stream and
  /// allocates; only bf16 -> bf16 with a row-major or column-major b (and row-major a), and
  /// bf16 -> fp32 with both MN-major (the weight gradient), have more than one configuration
  /// today.
  bool tuned = false;
  /// Dynamic tile scheduler (QuACK's tile_count_semaphore): null runs the static persistent
  /// schedule; else a pointer to one uint32 in device memory on d's device, zero before the
  /// first use, that persistent clusters take output tiles from with atomicInc. Every completed
  /// launch leaves it at 0 again (the increments wrap at the tile count), so it needs no reset
  /// between calls or graph replays; it must not be shared by launches that may run at the
  /// same time (keep one per stream). 4-byte aligned (InvalidArgument otherwise); not checked
  /// beyond alignment. The cluster-less 128x64 configuration ignores it (static schedule). Its
  /// GPU tests pass on an H200 on every tile configuration.
  uint32_t* tile_counter = nullptr;
  /// Workspace for the padded copies of a and b when TMA cannot address them (see Alignment
  /// above; gemm_workspace_size gives the bytes, 0 for aligned operands): device memory on d's
  /// device, 16-byte aligned, workspace_bytes ≥ gemm_workspace_size(args), not in use by
  /// anything else until the call's work on `stream` is done (InvalidArgument for too few bytes
  /// or a misaligned pointer: checked whenever one is given, also when no copy is needed). Null: the call allocates it on `stream` (cudaMallocAsync) and
  /// frees it after the launch (cudaFreeAsync), stream-ordered and graph-capturable.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  /// Stream-K workspace (QUACK_GEMM_STREAMK, below): device memory on d's device, 16-byte
  /// aligned, of gemm_streamk_workspace_size(device) bytes (or more), ZEROED ONCE before its first
  /// use; every completed launch leaves its flags zero again, so it needs no reset between calls
  /// or graph replays; like tile_counter it must not be shared by launches that may run at the
  /// same time (keep one per stream). With it, the cooperative tile configurations split the
  /// last wave of output tiles along K over all SMs where the rule of src/gemm/streamk.h
  /// estimates a gain, up to 256 k-blocks (K ≤ 16384) a tile (fp32 partials reduced in a fixed
  /// order: deterministic for a given device).
  /// Null: stream-K off, unless QUACK_GEMM_STREAMK=1 forces it (then the call allocates, zeroes
  /// and frees one on `stream`). InvalidArgument when misaligned (can_implement) or smaller than
  /// gemm_streamk_workspace_size (at the call). The dynamic tile counter is not used by a
  /// stream-K launch.
  void* streamk_workspace = nullptr;
  size_t streamk_workspace_bytes = 0;
};

/// Validates `args` for gemm without touching the device (no CUDA call). Throws InvalidArgument,
/// whose message starts with "gemm: " and names the argument, what came and what was expected
/// (e.g. "gemm: b has shape (64, 128) bfloat16, expected (K, N) = (63, N)"), for: an absent a, b
/// or d; a tensor in host memory (device < 0), on another device than a, or with a null pointer; mixed 2-D/3-D
/// tensors or other ranks; mismatched M, N, K or L; a dtype outside the table; beta ≠ 0 without
/// c; a size above 2^31 − 1; negative strides; overlapping elements of d; a leading stride below
/// the contiguous extent; a workspace too small or misaligned; the layouts and layout
/// combinations listed as not yet supported above (the message lists the (a, b, d) combinations
/// supported for the dtypes).
void can_implement(const GemmArgs& args);

/// Bytes of GemmArgs::workspace that gemm needs for `args`: the padded copies of a and b where
/// TMA cannot address them (each operand's rows rounded up to 16 bytes, 256-byte aligned), 0 when
/// both are TMA-addressable or K = 0. Validates `args` as can_implement (no CUDA call; throws
/// InvalidArgument likewise); a workspace already in args is ignored.
size_t gemm_workspace_size(const GemmArgs& args);

/// Bytes of GemmArgs::streamk_workspace (and of the fused GEMMs' streamk_workspace) for device
/// `device`: one uint32 flag and one fp32 partial tile (largest cooperative tile compiled) per
/// SM; e.g. 17 MB on a 132-SM H200 with 128x256 tiles. Reads the device's SM count (one CUDA
/// call per device, cached); throws CudaError if that fails.
size_t gemm_streamk_workspace_size(int device);

/// D = alpha · A·B + beta · C on `stream`, on the tensors' device. Runs can_implement first.
/// M = 0, N = 0 or L = 0: nothing is launched. K = 0: D = beta · C (zeros without c or with
/// beta = 0) by a small elementwise kernel. Throws InvalidArgument as can_implement, CudaError
/// when a CUDA call or the launch fails. Asynchronous: errors inside the kernel surface later on
/// the stream.
void gemm(const GemmArgs& args, cudaStream_t stream);

}  // namespace quack
