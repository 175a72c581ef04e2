// QuACK-C++ GEMMs with a fused activation in the epilogue (Hopper, sm_90a). Host-only header.
//
//   gemm_act:    preact = alpha · A·B + beta · C (+ bias),   postact = act(preact)
//   gemm_dact:   D = A·B (the gradient of postact), dpreact = D ⊙ act'(preact), postact = act(preact)
//   gemm_gated:  preact as gemm_act (N columns), postact[:, j] = glu(preact[:, 2j], preact[:, 2j + 1])
//                (N / 2 columns: gate and up in adjacent column pairs)
//   gemm_dgated: D = A·B (the gradient of the N / 2 postact columns), the gradient of both halves
//                of preact (N columns) and the recomputed postact
//
// All run the GEMM of quack/gemm.h (the same kernel, tiles and scheduler) with another epilogue
// visitor (src/gemm/sm90/epilogue_ops.cuh): the activation is applied to the fp32 accumulator
// values before they are rounded, and the outputs leave the epilogue through TMA stores (plain
// stores where TMA cannot address an output, as gemm's). An MLP
// with activation act then runs fc1 as gemm_act (storing preact for the backward) and, in the
// backward, fc2's dgrad as gemm_dact, which gives dpreact for fc1's backward and the recomputed
// postact for fc2's weight gradient (postact is never stored in the forward); a gated MLP
// (SwiGLU, ...) runs gemm_gated and gemm_dgated the same way.
// Method: QuACK 0.2.0's GemmActSm90 / GemmDActSm90 (quack/gemm_act_sm90.py, gemm_dact_sm90.py)
// and activation functions (quack/activation.py); the gated ones and the bias after QuACK 0.6
// (quack/activation.py gate_fn_map / dgate_fn_map; gemm_interface.gemm_gated / gemm_dgated, whose
// dgated epilogue reads preact and writes dpreact as packed 16-bit pairs, "packed_cd_b16x2"), on
// CUTLASS's epilogue-visitor design.
//
// Host protocol as quack/gemm.h: arguments → can_implement → launch.
//
// Compiled dtypes (src/gemm/sm90/instances.txt; each function's table below):
//
// | function    | a, b | outputs (and c; gemm_dact's preact)                          | tiles |
// |-------------|------|--------------------------------------------------------------|-------|
// | gemm_act    | bf16 | preact, postact bf16                                         | 128x256, 128x192 and 128x128 pingpong |
// | gemm_act    | bf16 | preact, postact fp32 (QuACK's out_dtype = float32; c fp32)   | 128x128 pingpong |
// | gemm_act    | fp16 | preact, postact fp16                                         | 128x128 pingpong |
// | gemm_dact   | bf16 / fp16 | preact, dpreact, postact of a's dtype                 | bf16: as gemm_act; fp16: 128x128 pingpong |
// | gemm_gated  | bf16 | preact, postact bf16 (both layouts)                          | 128x256, 128x192 and 128x128 pingpong; concat: 128x256 |
// | gemm_gated  | bf16 | preact, postact fp32 (interleaved layout only)               | 128x128 pingpong |
// | gemm_gated  | fp16 | preact, postact fp16 (both layouts)                          | 128x128 pingpong; concat: 128x256 |
// | gemm_dgated | bf16 / fp16 | preact, dpreact (packed pairs) and postact of a's dtype | 128x256; bf16 also 128x192 and 128x128 pingpong |
//
// Without preact (gemm_act, gemm_gated) the row of its dtype is that of c (when read) or
// postact; without postact (gemm_dact, gemm_dgated) that of preact. Any other combination (e.g.
// a bf16 preact with an fp32 postact, fp32 outputs of fp16 inputs, an fp32 gemm_dact) throws
// InvalidArgument naming the tensors and their dtypes and listing the compiled combinations for
// a's dtype, e.g. "gemm_act: preact bfloat16 and postact float32 are not compiled for bfloat16
// inputs (no kernel instance), expected (preact, postact) = (bfloat16, bfloat16) or (float32,
// float32)"; an output dtype that is neither a's nor fp32 throws "... has dtype ..., expected
// <a's dtype> or float32". The tile rule and the autotuner choose among a row's tiles.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "quack/gemm.h"
#include "quack/tensor.h"

namespace quack {

/// Activations of the fused GEMM epilogues, QuACK's names and formulas (fp32).
///
/// Elementwise (gemm_act, gemm_dact):
///
/// | value             | name               | act(x)                                        | act'(x)                              |
/// |-------------------|--------------------|-----------------------------------------------|--------------------------------------|
/// | kIdentity         | "identity"         | x (QuACK's activation=None)                   | 1                                    |
/// | kRelu             | "relu"             | max(x, 0)                                     | [x > 0]                              |
/// | kReluSq           | "relu_sq"          | max(x, 0)²                                    | 2 · max(x, 0)                        |
/// | kGeluTanhApprox   | "gelu_tanh_approx" | 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))   | its derivative, sech² = 1 − tanh²    |
/// | kSilu             | "silu"             | x·sigmoid(x), computed as h·tanh(h) + h, h = x/2 | sigmoid(x)·(1 + x·(1 − sigmoid(x))) |
/// | kTanh             | "tanh"             | tanh(x)                                       | 1 − tanh²(x)                         |
/// | kGeluErf          | "gelu_erf"         | 0.5·x·(1 + erf(x/√2)) (torch's F.gelu)        | Φ(x) + x·φ(x), φ(x) = e^(−x²/2)/√(2π) |
/// | kQuickGelu        | "quick_gelu"       | x·σ(1.702·x) (CLIP's QuickGELU)               | σ(αx) + α·x·σ(αx)·(1 − σ(αx)), α = 1.702 |
///
/// Gated, of a gate g and an up projection u (gemm_gated, gemm_dgated; QuACK 0.6's gate_fn_map):
///
/// | value       | name         | glu(g, u)                                | d/dg                                                | d/du          |
/// |-------------|--------------|------------------------------------------|-----------------------------------------------------|---------------|
/// | kSwiglu     | "swiglu"     | silu(g)·u = g·σ(g)·u                     | u·σ(g)·(1 + g·(1 − σ(g)))                           | silu(g)       |
/// | kSwigluOai  | "swiglu_oai" | g·σ(1.702·g)·(u + 1) (gpt-oss, no clamp) | (u + 1)·(σ(αg) + α·g·σ(αg)·(1 − σ(αg))), α = 1.702 | g·σ(1.702·g)  |
/// | kReglu      | "reglu"      | max(g, 0)·u                              | u·[g > 0]                                           | max(g, 0)     |
/// | kGeglu      | "geglu"      | gelu_tanh_approx(g)·u                    | u·gelu_tanh_approx'(g)                              | gelu(g)       |
/// | kGlu        | "glu"        | σ(g)·u                                   | u·σ(g)·(1 − σ(g))                                   | σ(g)          |
///
/// tanh is the hardware's tanh.approx.f32 (relative error about 2^-11), as in QuACK; σ (sigmoid)
/// is 1 / (1 + 2^(−x·log2 e)) with ex2.approx and rcp.approx (relative error about 2^-22; QuACK
/// 0.6's sigmoid); Φ is erfc by Numerical Recipes' erfcc with ex2.approx and rcp.approx (fp32
/// relative error ~7e-7 for |x| < 3, ~5e-6 at |x| = 10, in both tails), and φ's exponential
/// ex2.approx. gelu_erf and
/// quick_gelu are QuACK 0.6.3's. NaN in x propagates to act(x) (relu(NaN) = NaN, as torch.relu; reglu alike)
/// and to the gradients, except relu's and reglu's gate gradient (dout·[x > 0] is 0 at a NaN, as
/// QuACK's drelu).
///
/// The values are public and stable, never renumbered: a new activation, elementwise or gated,
/// is appended with the next value and one entry in src/gemm/activation_list.h (name, kind),
/// plus its formulas (src/gemm/activation.cuh) and a table row above; the Python names, torch
/// references and tests too (every place: docs/architecture.md, "Adding an activation").
enum class Activation : int {
  kIdentity = 0,
  kRelu = 1,
  kReluSq = 2,
  kGeluTanhApprox = 3,
  kSilu = 4,
  kTanh = 5,
  kSwiglu = 6,
  kSwigluOai = 7,
  kReglu = 8,
  kGeglu = 9,
  kGlu = 10,
  kGeluErf = 11,
  kQuickGelu = 12,
};

/// Whether `a` is a gated activation (the second table: gemm_gated / gemm_dgated). Never throws.
bool is_gated(Activation a);

/// The name in the tables above ("unknown" for a value outside the enum). Never throws.
const char* activation_name(Activation a);

/// The activation called `name` (the tables' names; "none" is also kIdentity, QuACK's None).
/// False for an unknown name. Never throws.
bool activation_from_name(const char* name, Activation* out);


/// Arguments of gemm_act.
///
///   preact[l]  = alpha · (A[l] · B[l]) + beta · C[l] + bias   for each batch l < L   (fp32)
///   postact[l] = act(preact[l])                           (from the fp32 preact, before rounding)
///
/// each output rounded once to its dtype. With beta = 0 or without c, C is never read. bias:
/// GemmBias of quack/gemm.h (a row vector (N,) and/or a column vector (M,), optional).
///
/// | tensor  | shape               | dtype            | layout                                  | required |
/// |---------|---------------------|------------------|-----------------------------------------|----------|
/// | a       | (M, K) or (L, M, K) | bf16, fp16       | row-major (stride 1 along K)            | yes      |
/// | b       | (K, N) or (L, K, N) | a's dtype        | column-major (stride 1 along K), e.g. Wᵀ of an nn.Linear weight W (N, K) | yes |
/// | c       | (M, N) or (L, M, N) | preact's dtype   | postact's layout                        | if beta ≠ 0 |
/// | preact  | (M, N) or (L, M, N) | a's dtype, or fp32 with bf16 a | postact's layout          | no: stored when given (QuACK's store_preact) |
/// | postact | (M, N) or (L, M, N) | preact's dtype   | row-major (stride 1 along N), or column-major (through Dᵀ) | yes |
///
/// Compiled (src/gemm/sm90/instances.txt; the table at the top of this header): a row-major, b
/// column-major (y = x·Wᵀ, the forward of a Linear layer); bf16 → bf16 with the tiles 128x256
/// (cooperative), 128x192 and 128x128 (pingpong), 2x1 clusters, chosen as gemm's rule but for
/// the cooperative 128x256, which runs only where no pingpong tile qualifies
/// (src/gemm/tile_rule.h, kCooperativeRatesFused); bf16 → fp32 and fp16 → fp16 with 128x128 pingpong. Other dtype combinations throw InvalidArgument
/// "... are not compiled ..." listing the compiled ones, other layouts "... not yet supported".
/// Strides, alignment, batches, M, N, K, L limits: as quack/gemm.h, for each tensor. Any
/// alignment works as in gemm: a and b that TMA cannot address (K or N not a multiple of 8 in
/// memory, a view at an odd offset) are copied into a workspace with padded rows (workspace
/// below), and c, preact and postact that TMA cannot address are read and written by plain loads
/// and stores in the epilogue (both outputs take the plain stores when either needs them).
/// preact and postact must not overlap each other or an input (a, b, the bias, and c where
/// beta ≠ 0; InvalidArgument otherwise). A gated activation throws (gemm_gated computes those).
struct GemmActArgs {
  TensorRef a;
  TensorRef b;
  TensorRef c;        // optional
  TensorRef preact;   // optional output
  TensorRef postact;  // output
  GemmBias bias;      // optional
  Activation activation = Activation::kIdentity;
  float alpha = 1.f;
  float beta = 0.f;
  /// As GemmArgs::tuned (the candidates are the compiled tiles of the same dtypes, majors and
  /// epilogue; the cache key names the epilogue).
  bool tuned = false;
  /// As GemmArgs::tile_counter (the dynamic tile scheduler).
  uint32_t* tile_counter = nullptr;
  /// As GemmArgs::workspace: the padded copies of a and b where TMA cannot address them
  /// (gemm_workspace_size(GemmActArgs) bytes; null: allocated and freed on the stream).
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  /// As GemmArgs::streamk_workspace (stream-K on the cooperative tiles).
  void* streamk_workspace = nullptr;
  size_t streamk_workspace_bytes = 0;
};

/// Validates `args` for gemm_act without touching the device (no CUDA call). Throws
/// InvalidArgument whose message starts with "gemm_act: " and names the argument, what came and
/// what was expected, for everything gemm's can_implement rejects (applied to a, b, c, preact and
/// postact) and: an absent postact; preact and postact of different shapes or layouts; an
/// activation outside the enum or gated; a bias of another shape, dtype or device, or not
/// contiguous; a combination that is not compiled (listed in the message); a workspace too small
/// or misaligned.
void can_implement(const GemmActArgs& args);

/// Bytes of GemmActArgs::workspace that gemm_act needs for `args` (as gemm_workspace_size of
/// quack/gemm.h: 0 when TMA can address a and b, or K = 0). Validates as can_implement; a
/// workspace already in args is ignored.
size_t gemm_workspace_size(const GemmActArgs& args);

/// gemm_act on `stream`, on the tensors' device. Runs can_implement first. M = 0, N = 0 or
/// L = 0: nothing is launched. K = 0: preact = beta · C + bias (zeros without C and bias),
/// postact = act(preact) by a small elementwise kernel. Throws InvalidArgument as can_implement, CudaError when a CUDA
/// call or the launch fails. Asynchronous.
void gemm_act(const GemmActArgs& args, cudaStream_t stream);

/// Arguments of gemm_dact.
///
///   D[l]       = A[l] · B[l]                      (fp32; e.g. dout · W: the gradient of postact)
///   dpreact[l] = D[l] ⊙ act'(preact[l])
///   postact[l] = act(preact[l])                   (recomputed from the stored preact)
///
/// each output rounded once to its dtype.
///
/// | tensor  | shape               | dtype            | layout                                  | required |
/// |---------|---------------------|------------------|-----------------------------------------|----------|
/// | a       | (M, K) or (L, M, K) | bf16, fp16       | row-major (stride 1 along K), e.g. dout; or column-major (below) | yes |
/// | b       | (K, N) or (L, K, N) | a's dtype        | row-major (stride 1 along N), e.g. an nn.Linear weight W (K = out, N = in); or column-major (below) | yes |
/// | preact  | (M, N) or (L, M, N) | dpreact's dtype  | dpreact's layout                        | yes      |
/// | dpreact | (M, N) or (L, M, N) | a's dtype        | row-major (stride 1 along N), or column-major (below) | yes |
/// | postact | (M, N) or (L, M, N) | a's dtype        | dpreact's layout                        | no: stored when given |
///
/// Compiled: a's dtype everywhere (bf16: tiles as gemm_act; fp16: 128x128 pingpong) with the
/// (a, b, outputs) layouts (row, row, row) — the dgrad of the second Linear of an MLP — or
/// (column, column, column), which runs the same kernel on the transposes (Dᵀ = Bᵀ·Aᵀ, the
/// outputs written column-major in place; no copy). Other dtypes throw "... are not compiled
/// ..." (listing the compiled ones), other layouts "not yet supported" (listing the two above).
struct GemmDActArgs {
  TensorRef a;
  TensorRef b;
  TensorRef preact;   // input
  TensorRef dpreact;  // output
  TensorRef postact;  // optional output
  Activation activation = Activation::kIdentity;
  bool tuned = false;                 // as GemmArgs::tuned
  uint32_t* tile_counter = nullptr;   // as GemmArgs::tile_counter
  void* workspace = nullptr;          // as GemmActArgs::workspace
  size_t workspace_bytes = 0;
  void* streamk_workspace = nullptr;  // as GemmArgs::streamk_workspace
  size_t streamk_workspace_bytes = 0;
};

/// Validates `args` for gemm_dact without touching the device. Throws InvalidArgument ("gemm_dact:
/// ...") as can_implement(GemmActArgs), for a, b, preact, dpreact and postact; an absent preact
/// or dpreact; preact of another dtype than dpreact; dpreact or postact overlapping each other,
/// a or b, or preact unless it is preact itself (in place: the same address, dtype, shape and
/// strides).
void can_implement(const GemmDActArgs& args);

/// Bytes of GemmDActArgs::workspace that gemm_dact needs for `args` (as for gemm_act).
size_t gemm_workspace_size(const GemmDActArgs& args);

/// gemm_dact on `stream`. Runs can_implement first. M = 0, N = 0 or L = 0: nothing is launched.
/// K = 0: D = 0, so dpreact = 0 and postact = act(preact), by a small elementwise kernel. Throws
/// as can_implement, CudaError when a CUDA call or the launch fails. Asynchronous.
void gemm_dact(const GemmDActArgs& args, cudaStream_t stream);

/// Arguments of gemm_gated: gemm_act with a gated activation on gate/up column pairs.
///
///   preact[l]            = alpha · (A[l] · B[l]) + beta · C[l] + bias      (fp32, N columns)
///   postact[l][m][j]     = glu(preact[l][m][2j], preact[l][m][2j + 1])     (N / 2 columns)
///
/// glu of Activation's gated table (swiglu, swiglu_oai, reglu, geglu, glu); gate and up are the
/// columns 2j and 2j + 1 of preact (QuACK's interleaved layout: an epilogue thread holds both
/// values of a pair in registers, so postact costs no data movement). Each output rounded once to
/// its dtype, postact from the unrounded fp32 preact.
///
/// concat_layout = false (interleaved): b's columns are (gate_0, up_0, gate_1, up_1, ...), e.g.
/// bᵀ = W (N, K) the weight of a gated MLP's fc1 whose rows interleave gate and up.
/// concat_layout = true: b's columns are the two halves [gate | up] (columns [0, N/2) the gate,
/// [N/2, N) the up projection), e.g. bᵀ = W = [W_gate; W_up], a Llama-style fused gate_up_proj;
/// the kernel reads b through a view that interleaves the halves (a 4-dimensional TMA box: each
/// tile's B columns are gate block j and up block j), so preact and postact come out exactly as
/// with the interleaved weight: preact is always interleaved (a TMA store cannot permute single
/// columns), which is what gemm_dgated reads. bias follows b: interleaved, or [bias_gate;
/// bias_up] with concat_layout. QuACK's concat_layout = ("B", "bias") semantics.
///
/// | tensor  | shape                  | dtype          | layout                                  | required |
/// |---------|------------------------|----------------|-----------------------------------------|----------|
/// | a       | (M, K) or (L, M, K)    | bf16, fp16     | row-major (stride 1 along K)            | yes      |
/// | b       | (K, N) or (L, K, N)    | a's dtype      | column-major (stride 1 along K)         | yes      |
/// | c       | (M, N) or (L, M, N)    | preact's dtype | row-major (interleaved like preact)     | if beta ≠ 0 |
/// | preact  | (M, N) or (L, M, N)    | a's dtype, or fp32 with bf16 a (interleaved only) | row-major | no: stored when given |
/// | postact | (M, N/2) or (L, M, N/2)| preact's dtype | row-major (stride 1 along N/2)          | yes      |
/// | bias    | GemmBias: row (N,) / (L, N), col (M,) / (L, M) | fp32, bf16, fp16 | contiguous | no |
///
/// N must be even. Compiled (the table at the top of this header): bf16 → bf16 (128x256
/// cooperative, 128x192 and 128x128 pingpong, chosen as gemm_act's rule; the concat layout:
/// 128x256 only), fp16 → fp16 (128x128
/// pingpong; concat: 128x256), bf16 → fp32 (interleaved, 128x128 pingpong); postact is stored
/// per value into a half-width subtile (16-bit or fp32), a row-major, b column-major, outputs
/// row-major. Other dtypes throw "... are not compiled ..." listing the compiled ones. Strides,
/// alignment and limits: as quack/gemm.h for each tensor, any alignment as gemm_act: a and b
/// that TMA cannot address (K or N not a multiple of 8 in memory, a view at an odd offset) are
/// read from padded copies in the workspace (with concat_layout the copy keeps b's halves, so the
/// up half starts at N/2 of the copy's rows); c, preact and postact that TMA cannot address are
/// read and written by plain loads and stores in the epilogue (both outputs take the plain stores
/// when either needs them).
struct GemmGatedArgs {
  TensorRef a;
  TensorRef b;
  TensorRef c;        // optional
  TensorRef preact;   // optional output (QuACK's store_preact)
  TensorRef postact;  // output
  GemmBias bias;      // optional
  Activation activation = Activation::kSwiglu;  // a gated one
  float alpha = 1.f;
  float beta = 0.f;
  bool concat_layout = false;
  bool tuned = false;                // as GemmArgs::tuned
  uint32_t* tile_counter = nullptr;  // as GemmArgs::tile_counter
  void* workspace = nullptr;         // as GemmActArgs::workspace
  size_t workspace_bytes = 0;
  void* streamk_workspace = nullptr;  // as GemmArgs::streamk_workspace
  size_t streamk_workspace_bytes = 0;
};

/// Validates `args` for gemm_gated without touching the device. Throws InvalidArgument
/// ("gemm_gated: ...") as can_implement(GemmActArgs), for a, b, c, preact, postact and bias
/// (outputs overlapping an input included), and: an activation that is not gated; an odd N;
/// postact not (M, N/2); column-major outputs; a workspace too small or misaligned.
void can_implement(const GemmGatedArgs& args);

/// Bytes of GemmGatedArgs::workspace that gemm_gated needs for `args` (as for gemm_act).
size_t gemm_workspace_size(const GemmGatedArgs& args);

/// gemm_gated on `stream`. Runs can_implement first. M = 0, N = 0 or L = 0: nothing is launched.
/// K = 0: preact = beta · C + bias, postact = glu of its pairs, by a small elementwise kernel.
/// Throws as can_implement, CudaError when a CUDA call or the launch fails. Asynchronous.
void gemm_gated(const GemmGatedArgs& args, cudaStream_t stream);

/// Arguments of gemm_dgated: the backward of gemm_gated's activation fused into the GEMM that
/// produces its incoming gradient (QuACK's gemm_dgated):
///
///   D[l]                      = A[l] · B[l]     (fp32, (M, H): e.g. dout · W2, the gradient of postact)
///   g, u                      = preact[l][m][2j], preact[l][m][2j + 1]
///   dpreact[l][m][2j]         = D[l][m][j] · ∂glu/∂g (g, u)
///   dpreact[l][m][2j + 1]     = D[l][m][j] · ∂glu/∂u (g, u)
///   postact[l][m][j]          = glu(g, u)       (recomputed, for fc2's weight gradient)
///
/// preact and dpreact (M, 2H) are read and written as H packed pairs per row (QuACK's
/// "packed_cd_b16x2": one 32-bit element per (gate, up) pair), so the epilogue's thread holds a
/// pair where D's value j sits; both are of a's dtype (bf16 or fp16). Each output is rounded once.
///
/// | tensor  | shape                   | dtype           | layout                                | required |
/// |---------|-------------------------|-----------------|---------------------------------------|----------|
/// | a       | (M, K) or (L, M, K)     | bf16, fp16      | row-major, e.g. dout                  | yes      |
/// | b       | (K, H) or (L, K, H)     | a's dtype       | row-major, e.g. fc2's weight W2 (K = out, H = hidden) | yes |
/// | preact  | (M, 2H) or (L, M, 2H)   | a's dtype       | row-major, gate/up interleaved         | yes      |
/// | dpreact | (M, 2H) or (L, M, 2H)   | a's dtype       | row-major, gate/up interleaved         | yes      |
/// | postact | (M, H) or (L, M, H)     | a's dtype       | row-major                              | no: stored when given |
///
/// Compiled: a's dtype everywhere (bf16 or fp16), a and b row-major (an MLP's fc2 dgrad),
/// outputs row-major. Tiles (bf16), as gemm_act's rule: 128x192 or 128x128 pingpong where one
/// qualifies (≥ 4 tiles per SM), the cooperative 128x256 where none does
/// (src/gemm/tile_rule.h, kCooperativeRatesFused); at K ≤ 2048 (kIoWarpMaxK) 128x128 pingpong
/// in its I/O-warp variant 128x128ppa3d2io (I/O warps issue the preact loads and the stores;
/// 128x192 not compared there), above it 128x128ppa1d2; fp16 128x256 cooperative only.
/// Strides and alignment as quack/gemm.h (a and b that TMA cannot address: padded copies in the
/// workspace; postact: plain stores where TMA cannot address it), the packed tensors' in 32-bit
/// units: preact and dpreact need a 4-byte aligned base and even
/// leading and batch strides (in 16-bit elements), else InvalidArgument; where TMA cannot address
/// them (e.g. H not a multiple of 4) they are read and written by plain loads and stores.
struct GemmDGatedArgs {
  TensorRef a;
  TensorRef b;
  TensorRef preact;   // input
  TensorRef dpreact;  // output
  TensorRef postact;  // optional output
  Activation activation = Activation::kSwiglu;  // a gated one
  bool tuned = false;                // as GemmArgs::tuned
  uint32_t* tile_counter = nullptr;  // as GemmArgs::tile_counter
  void* workspace = nullptr;         // as GemmActArgs::workspace
  size_t workspace_bytes = 0;
  void* streamk_workspace = nullptr;  // as GemmArgs::streamk_workspace
  size_t streamk_workspace_bytes = 0;
};

/// Validates `args` for gemm_dgated without touching the device. Throws InvalidArgument
/// ("gemm_dgated: ...") as can_implement(GemmDActArgs) (dpreact may be preact itself), and: an
/// activation that is not gated;
/// preact or dpreact not (M, 2H) or not of a's dtype, or not in 4-byte pairs (odd base, leading or batch
/// stride); postact not (M, H); column-major tensors; a workspace too small or misaligned.
void can_implement(const GemmDGatedArgs& args);

/// Bytes of GemmDGatedArgs::workspace that gemm_dgated needs for `args` (as for gemm_act).
size_t gemm_workspace_size(const GemmDGatedArgs& args);

/// gemm_dgated on `stream`. Runs can_implement first. M = 0, H = 0 or L = 0: nothing is
/// launched. K = 0: D = 0, so dpreact = 0 and postact = glu(preact's pairs), by a small
/// elementwise kernel. Throws as can_implement, CudaError when a CUDA call or the launch fails.
/// Asynchronous.
void gemm_dgated(const GemmDGatedArgs& args, cudaStream_t stream);

}  // namespace quack
