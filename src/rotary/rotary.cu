// Rotary embedding kernel (quack/rotary.h), non-interleaved and interleaved layouts (a template
// flag of one kernel body).
//
// Thread -> data: one CTA per token (b, s), grid-stride over the B·S tokens (64-bit). The CTA's
// kRotaryThreads threads form a (by, bx) grid with bx = min(chunks, kRotaryThreads), chunks =
// (R/2) / V, V = 16 bytes of the element type on the vector path (8 for fp16/bf16, 4 for fp32)
// or 1. Thread (ty, tx) takes chunk c = tx (then c + bx, ...): it loads the V fp32 values of
// cos[p, c·V ..] and sin[p, c·V ..] once into registers and applies them to heads ty, ty + by,
// ... of q and then k (one head index space of Hq + Hk heads), kUnroll heads' loads issued
// before their math. A head's chunk is two V-element vectors, x1 at column c·V and x2 at
// R/2 + c·V, in both pair layouts (so a warp's accesses are the same 16-byte runs in both):
// non-interleaved, the pairs (x1[i], x2[i]) take angle c·V + i; interleaved (V > 1), the pairs
// (x1[2i], x1[2i + 1]) take angle c·V/2 + i and (x2[2i], x2[2i + 1]) angle R/4 + c·V/2 + i, so
// the thread's V angles are two runs of V/2. (Not the 2V adjacent columns 2·c·V .. as an
// interleaved chunk: each 16-byte access would leave every other 16 bytes of the warp's span to
// the next instruction, twice the L2 sectors per request, and the stores would write half sectors.)
// With V = 1 the interleaved pair is columns (2c, 2c + 1) by angle c. After the rotation, the
// CTA's threads copy, as flat lists of V-element chunks,
// the pass-through columns R..D of q's and k's heads (out of place only) and all of v (when
// v_out is not v).
// Registers only (no shared memory, no barriers). Alignment: on the vector path the host has
// checked 16-byte aligned bases and strides (rotary.cpp, vector_path), so every x access is one
// or more aligned 16-byte words and every cos/sin access V·4 aligned bytes.
// In place: each element is read and written by the same thread, its loads before its stores.
// An absent input (in == nullptr with a written output: rotary_qkv_pack's missing gradients)
// reads as zeros: its rotated chunks and copied chunks are stored as zeros.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/launch.h"
#include "common/vec.cuh"
#include "rotary/rotary_internal.h"

namespace quack::detail {

namespace {

// Heads per thread whose loads are issued before their math, and the CTAs per SM that
// __launch_bounds__ asks for. One head at ≤ 48 registers gives 5 CTAs of 256 per SM; two heads
// took 72 registers, 3 CTAs (768 threads: too few 16-byte loads in flight for DRAM's latency),
// and at 8 × 2048 × 16 × 128 each thread has one head of q or k anyway (bx 8, by 32, 32 heads).
constexpr int kUnroll = 1;
constexpr int kRotaryCtasPerSm = 5;

template <typename X>
__device__ __forceinline__ X pick(int which, X a, X b, X c) {
  return which == 0 ? a : which == 1 ? b : c;
}

// (a0, a1) rotated by (c, s): a0·c − a1·s, a1·c + a0·s (one fma each).
__device__ __forceinline__ void rotate_pair(float a0, float a1, float c, float s, float& y0,
                                            float& y1) {
  y0 = fmaf(a0, c, -a1 * s);
  y1 = fmaf(a1, c, a0 * s);
}

template <typename T, int V, bool kInterleaved>
__global__ void __launch_bounds__(kRotaryThreads, kRotaryCtasPerSm)
    rotary_kernel(const RotaryParams p, int bx) {
  const int tid = static_cast<int>(threadIdx.x);
  const int by = static_cast<int>(blockDim.x) / bx;
  const int tx = tid % bx, ty = tid / bx;
  const int hq = p.t[0].heads;
  const int hrot = hq + p.t[1].heads;
  const int chunks = p.half / V;
  const int tail = (p.D - 2 * p.half) / V;  // pass-through chunks per rotated head
  const int vchunks = p.D / V;
  const int n_q = p.t[0].write ? p.t[0].heads * tail : 0;
  const int n_k = p.t[1].write ? p.t[1].heads * tail : 0;
  const int n_v = p.t[2].write ? p.t[2].heads * vchunks : 0;
  const int n_copy = n_q + n_k + n_v;
  const int64_t ntok = p.B * p.S;
  // Column offsets of a chunk's two vectors (chunk c: x1 at c·V·x1_step, x2 x2_off further):
  // (c·V, R/2 + c·V), or the pair (2c, 2c + 1) in the interleaved element-at-a-time kernel.
  constexpr bool kPairsInVector = kInterleaved && V > 1;
  constexpr bool kPairOfElements = kInterleaved && V == 1;
  const int x1_step = kPairOfElements ? 2 : 1;
  const int x2_off = kPairOfElements ? 1 : p.half;

  for (int64_t tok = blockIdx.x; tok < ntok; tok += gridDim.x) {
    const int64_t b = tok / p.S;
    const int64_t s = tok - b * p.S;
    const int64_t pos = s + p.seqlen_offset;
    const float* crow = p.cos + pos * p.cs_row;
    const float* srow = p.sin + pos * p.cs_row;

    if (ty < hrot) {
      for (int c = tx; c < chunks; c += bx) {
        float cv[V], sv[V];
        if constexpr (kPairsInVector) {
          // Angles c·V/2 .. (x1's pairs) and R/4 + c·V/2 .. (x2's): V/2 each, 8-byte aligned
          // (fp32, V = 4) or 16-byte (16-bit, V = 8), as R/2 is a multiple of V.
          float ca[V / 2], cb[V / 2], sa[V / 2], sb[V / 2];
          load_vec<float, V / 2, Cache::kReadOnly>(crow + c * (V / 2), ca);
          load_vec<float, V / 2, Cache::kReadOnly>(crow + p.half / 2 + c * (V / 2), cb);
          load_vec<float, V / 2, Cache::kReadOnly>(srow + c * (V / 2), sa);
          load_vec<float, V / 2, Cache::kReadOnly>(srow + p.half / 2 + c * (V / 2), sb);
#pragma unroll
          for (int i = 0; i < V / 2; ++i) {
            cv[i] = ca[i], cv[V / 2 + i] = cb[i];
            sv[i] = sa[i], sv[V / 2 + i] = sb[i];
          }
        } else if constexpr (V > 1) {
          load_vec<float, V, Cache::kReadOnly>(crow + c * V, cv);
          load_vec<float, V, Cache::kReadOnly>(srow + c * V, sv);
        } else {
          cv[0] = __ldg(crow + c * p.cs_col);
          sv[0] = __ldg(srow + c * p.cs_col);
        }
        if (p.conjugate) {
#pragma unroll
          for (int i = 0; i < V; ++i) sv[i] = -sv[i];
        }
        for (int h0 = ty; h0 < hrot; h0 += by * kUnroll) {
          float x1[kUnroll][V], x2[kUnroll][V];
          T* dst[kUnroll];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int h = h0 + u * by;
            dst[u] = nullptr;
            if (h < hrot) {
              const bool isq = h < hq;
              const int w = isq ? 0 : 1;
              const int64_t hh = isq ? h : h - hq;
              // Field by field (values, no reference into the parameter block: taking its
              // address would copy it to local memory).
              const T* base = static_cast<const T*>(pick(w, p.t[0].in, p.t[1].in, p.t[1].in));
              const int64_t off = b * pick(w, p.t[0].in_b, p.t[1].in_b, p.t[1].in_b) +
                                  s * pick(w, p.t[0].in_s, p.t[1].in_s, p.t[1].in_s) +
                                  hh * pick(w, p.t[0].in_h, p.t[1].in_h, p.t[1].in_h) +
                                  c * V * x1_step;
              dst[u] = static_cast<T*>(pick(w, p.t[0].out, p.t[1].out, p.t[1].out)) +
                       b * pick(w, p.t[0].out_b, p.t[1].out_b, p.t[1].out_b) +
                       s * pick(w, p.t[0].out_s, p.t[1].out_s, p.t[1].out_s) +
                       hh * pick(w, p.t[0].out_h, p.t[1].out_h, p.t[1].out_h) +
                       c * V * x1_step;
              if (base != nullptr) {  // (no pointer arithmetic on an absent input)
                load_vec<T, V>(base + off, x1[u]);
                load_vec<T, V>(base + off + x2_off, x2[u]);
              } else {
#pragma unroll
                for (int i = 0; i < V; ++i) x1[u][i] = x2[u][i] = 0.f;
              }
            }
          }
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            if (dst[u] == nullptr) continue;
            float y1[V], y2[V];
            if constexpr (kPairsInVector) {
              // Pair i of x1 takes angle cv[i], pair i of x2 cv[V / 2 + i].
#pragma unroll
              for (int i = 0; i < V / 2; ++i) {
                rotate_pair(x1[u][2 * i], x1[u][2 * i + 1], cv[i], sv[i], y1[2 * i],
                            y1[2 * i + 1]);
                rotate_pair(x2[u][2 * i], x2[u][2 * i + 1], cv[V / 2 + i], sv[V / 2 + i],
                            y2[2 * i], y2[2 * i + 1]);
              }
            } else {
#pragma unroll
              for (int i = 0; i < V; ++i)
                rotate_pair(x1[u][i], x2[u][i], cv[i], sv[i], y1[i], y2[i]);
            }
            store_vec<T, V>(dst[u], y1);
            store_vec<T, V>(dst[u] + x2_off, y2);
          }
        }
      }
    }

    // Pass-through columns of q and k (out of place) and the copy of v, raw words.
    for (int i = tid; i < n_copy; i += static_cast<int>(blockDim.x)) {
      int which, j, per, col0;
      if (i < n_q) {
        which = 0, j = i, per = tail, col0 = 2 * p.half;
      } else if (i < n_q + n_k) {
        which = 1, j = i - n_q, per = tail, col0 = 2 * p.half;
      } else {
        which = 2, j = i - n_q - n_k, per = vchunks, col0 = 0;
      }
      const int h = j / per;
      const int col = col0 + (j - h * per) * V;
      const T* base = static_cast<const T*>(pick(which, p.t[0].in, p.t[1].in, p.t[2].in));
      const int64_t off = b * pick(which, p.t[0].in_b, p.t[1].in_b, p.t[2].in_b) +
                          s * pick(which, p.t[0].in_s, p.t[1].in_s, p.t[2].in_s) +
                          h * pick(which, p.t[0].in_h, p.t[1].in_h, p.t[2].in_h) + col;
      T* dst = static_cast<T*>(pick(which, p.t[0].out, p.t[1].out, p.t[2].out)) +
               b * pick(which, p.t[0].out_b, p.t[1].out_b, p.t[2].out_b) +
               s * pick(which, p.t[0].out_s, p.t[1].out_s, p.t[2].out_s) +
               h * pick(which, p.t[0].out_h, p.t[1].out_h, p.t[2].out_h) + col;
      Packed<T, V> w{};  // zeros for an absent input
      if (base != nullptr) load_packed<Cache::kStream>(base + off, w);
      store_packed(dst, w);
    }
  }
}

template <typename T>
void launch_typed(const RotaryParams& p, bool vec, cudaStream_t stream, const char* where) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  const int V = vec ? kVec : 1;
  const int chunks = p.half / V;
  const int bx = chunks < kRotaryThreads ? (chunks > 0 ? chunks : 1) : kRotaryThreads;
  const int block = (kRotaryThreads / bx) * bx;
  const int64_t ntok = p.B * p.S;
  const int64_t grid = ntok < (int64_t{1} << 20) ? ntok : (int64_t{1} << 20);
  if (p.interleaved) {
    if (vec)
      launch(rotary_kernel<T, kVec, true>, grid, block, 0, 1, stream, where, p, bx);
    else
      launch(rotary_kernel<T, 1, true>, grid, block, 0, 1, stream, where, p, bx);
  } else {
    if (vec)
      launch(rotary_kernel<T, kVec, false>, grid, block, 0, 1, stream, where, p, bx);
    else
      launch(rotary_kernel<T, 1, false>, grid, block, 0, 1, stream, where, p, bx);
  }
}

}  // namespace

void launch_rotary(const RotaryParams& p, DType dtype, bool vec, cudaStream_t stream,
                   const char* where) {
  switch (dtype) {
    case DType::kBFloat16: launch_typed<__nv_bfloat16>(p, vec, stream, where); break;
    case DType::kFloat16: launch_typed<__half>(p, vec, stream, where); break;
    default: launch_typed<float>(p, vec, stream, where); break;
  }
}

}  // namespace quack::detail
