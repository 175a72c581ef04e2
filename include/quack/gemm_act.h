// QuACK-C++ GEMMs with a fused activation in the epilogue (Hopper, sm_90a). Host-only header.
//
//   gemm_act:  preact = alpha · A·B + beta · C,   postact = act(preact)
//   gemm_dact: D = A·B (the gradient of postact), dpreact = D ⊙ act'(preact), postact = act(preact)
//
// Both run the GEMM of quack/gemm.h (the same kernel, tiles and scheduler) with another epilogue
// visitor (src/gemm/sm90/epilogue_ops.cuh): the activation is applied to the fp32 accumulator
// values before they are rounded, and both outputs leave the epilogue through TMA stores (plain
// stores where TMA cannot address an output, as gemm's). An MLP
// with activation act then runs fc1 as gemm_act (storing preact for the backward) and, in the
// backward, fc2's dgrad as gemm_dact, which gives dpreact for fc1's backward and the recomputed
// postact for fc2's weight gradient (postact is never stored in the forward).
// Method: QuACK 0.2.0's GemmActSm90 / GemmDActSm90 (quack/gemm_act_sm90.py, gemm_dact_sm90.py)
// and activation functions (quack/activation.py), on CUTLASS's epilogue-visitor design.
//
// Host protocol as quack/gemm.h: arguments → can_implement → launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "quack/tensor.h"

namespace quack {

/// Elementwise activations of the fused GEMM epilogues, QuACK's names and formulas (fp32):
///
/// | value             | name               | act(x)                                        | act'(x)                              |
/// |-------------------|--------------------|-----------------------------------------------|--------------------------------------|
/// | kIdentity         | "identity"         | x (QuACK's activation=None)                   | 1                                    |
/// | kRelu             | "relu"             | max(x, 0)                                     | [x > 0]                              |
/// | kReluSq           | "relu_sq"          | max(x, 0) · x                                 | 2 · max(x, 0)                        |
/// | kGeluTanhApprox   | "gelu_tanh_approx" | 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))   | its derivative, sech² = 1 − tanh²    |
/// | kSilu             | "silu"             | x·sigmoid(x), computed as h·tanh(h) + h, h = x/2 | sigmoid(x)·(1 + x·(1 − sigmoid(x))) |
/// | kTanh             | "tanh"             | tanh(x)                                       | 1 − tanh²(x)                         |
///
/// tanh is the hardware's tanh.approx.f32 (relative error about 2^-11), as in QuACK. NaN in x
/// propagates to act(x) (relu(NaN) = NaN, as torch.relu) and to the gradients, except relu's
/// (dout·[x > 0] is 0 at a NaN, as QuACK's drelu).
enum class Activation : int { kIdentity = 0, kRelu = 1, kReluSq = 2, kGeluTanhApprox = 3, kSilu = 4, kTanh = 5 };

/// The name in the table above ("unknown" for a value outside the enum). Never throws.
const char* activation_name(Activation a);

/// The activation called `name` (the table's names; "none" is also kIdentity, QuACK's None).
/// False for an unknown name. Never throws.
bool activation_from_name(const char* name, Activation* out);

/// Arguments of gemm_act.
///
///   preact[l]  = alpha · (A[l] · B[l]) + beta · C[l]      for each batch l < L   (fp32)
///   postact[l] = act(preact[l])                           (from the fp32 preact, before rounding)
///
/// each output rounded once to its dtype. With beta = 0 or without c, C is never read.
///
/// | tensor  | shape               | dtype            | layout                                  | required |
/// |---------|---------------------|------------------|-----------------------------------------|----------|
/// | a       | (M, K) or (L, M, K) | bf16             | row-major (stride 1 along K)            | yes      |
/// | b       | (K, N) or (L, K, N) | a's dtype        | column-major (stride 1 along K), e.g. Wᵀ of an nn.Linear weight W (N, K) | yes |
/// | c       | (M, N) or (L, M, N) | preact's dtype   | postact's layout                        | if beta ≠ 0 |
/// | preact  | (M, N) or (L, M, N) | bf16             | postact's layout                        | no: stored when given (QuACK's store_preact) |
/// | postact | (M, N) or (L, M, N) | bf16             | row-major (stride 1 along N)            | yes      |
///
/// Compiled today (src/gemm/sm90/instances.txt): bf16 a and b, bf16 preact and postact, a
/// row-major, b column-major, outputs row-major (y = x·Wᵀ, the forward of a Linear layer), with
/// the tiles 128x256 (cooperative) and 128x128 (pingpong), 2x1 clusters, chosen as gemm's rule.
/// Other combinations throw InvalidArgument "... not yet supported" listing what is compiled.
/// Strides, alignment, batches, M, N, K, L limits: as quack/gemm.h, for each tensor. Any
/// alignment works as in gemm: a and b that TMA cannot address (K or N not a multiple of 8 in
/// memory, a view at an odd offset) are copied into a workspace with padded rows (workspace
/// below), and c, preact and postact that TMA cannot address are read and written by plain loads
/// and stores in the epilogue (both outputs take the plain stores when either needs them).
/// preact and postact must not overlap each other or an input.
struct GemmActArgs {
  TensorRef a;
  TensorRef b;
  TensorRef c;        // optional
  TensorRef preact;   // optional output
  TensorRef postact;  // output
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
};

/// Validates `args` for gemm_act without touching the device (no CUDA call). Throws
/// InvalidArgument whose message starts with "gemm_act: " and names the argument, what came and
/// what was expected, for everything gemm's can_implement rejects (applied to a, b, c, preact and
/// postact) and: an absent postact; preact and postact of different shapes or layouts; an
/// activation outside the enum; a combination that is not compiled (listed in the message); a
/// workspace too small or misaligned.
void can_implement(const GemmActArgs& args);

/// Bytes of GemmActArgs::workspace that gemm_act needs for `args` (as gemm_workspace_size of
/// quack/gemm.h: 0 when TMA can address a and b, or K = 0). Validates as can_implement; a
/// workspace already in args is ignored.
size_t gemm_workspace_size(const GemmActArgs& args);

/// gemm_act on `stream`, on the tensors' device. Runs can_implement first. M = 0, N = 0 or
/// L = 0: nothing is launched. K = 0: preact = beta · C (zeros without C), postact = act(preact)
/// by a small elementwise kernel. Throws InvalidArgument as can_implement, CudaError when a CUDA
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
/// | a       | (M, K) or (L, M, K) | bf16             | row-major (stride 1 along K), e.g. dout | yes      |
/// | b       | (K, N) or (L, K, N) | a's dtype        | row-major (stride 1 along N), e.g. an nn.Linear weight W (K = out, N = in) | yes |
/// | preact  | (M, N) or (L, M, N) | dpreact's dtype  | dpreact's layout                        | yes      |
/// | dpreact | (M, N) or (L, M, N) | bf16             | row-major (stride 1 along N)            | yes      |
/// | postact | (M, N) or (L, M, N) | bf16             | dpreact's layout                        | no: stored when given |
///
/// Compiled today: bf16 everywhere, a row-major, b row-major, outputs row-major (the dgrad of the
/// second Linear of an MLP), tiles as gemm_act. Other combinations throw "not yet supported".
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
};

/// Validates `args` for gemm_dact without touching the device. Throws InvalidArgument ("gemm_dact:
/// ...") as can_implement(GemmActArgs), for a, b, preact, dpreact and postact; an absent preact
/// or dpreact; preact of another dtype than dpreact.
void can_implement(const GemmDActArgs& args);

/// Bytes of GemmDActArgs::workspace that gemm_dact needs for `args` (as for gemm_act).
size_t gemm_workspace_size(const GemmDActArgs& args);

/// gemm_dact on `stream`. Runs can_implement first. M = 0, N = 0 or L = 0: nothing is launched.
/// K = 0: D = 0, so dpreact = 0 and postact = act(preact), by a small elementwise kernel. Throws
/// as can_implement, CudaError when a CUDA call or the launch fails. Asynchronous.
void gemm_dact(const GemmDActArgs& args, cudaStream_t stream);

}  // namespace quack
