// The rotary epilogue visitor of the Hopper GEMM (gemm_rotary, quack/gemm_rotary.h): D = alpha ·
// acc + beta · C, then rotary position embedding (RoPE, interleaved pair layout) of the columns
// n < rotary_cols, before the values are rounded and stored (epilogue_ops.cuh describes the
// visitor protocol). The fused qkv projection of an attention layer writes q and k rotated this
// way (columns [0, 2·H·D) of its (B·T, 3·H·D) output), so no separate rotary pass reads and
// writes them again.
//
// Fragment -> pairs: a thread's values i and i + 1 (i even) of a subtile are the output columns
// col(i) and col(i) + 1 of row row(i) (epilogue_smem.cuh's layout: value i = cc + 2·h + 4·j at
// column col(0) + 8·j + cc of row row(2·h), col(0) even), so each rotated pair (2p, 2p + 1) of a
// head lies in one thread: no exchange between threads. Per subtile a thread reads, for each of
// its N / 4 column pairs and 2 rows, one cos and one sin value (fp32, through the read-only
// cache: the tables, T · head_dim / 2 · 8 bytes, are shared by every CTA and stay in L2).
// Positions: row m of the kernel's output is token m of a (B, T) batch flattened row-major, so
// its position is m % T. Rows past M read valid table rows (m % T < T) and are never stored;
// columns past rotary_cols (v, or N) pass through without a read.
//
// In its own header, included only by the rotary instances' TUs (instance.cu.in's QG_HEADER):
// the other GEMM TUs do not see it.
#pragma once

#include "gemm/sm90/epilogue_ops.cuh"
#include "gemm/sm90/launch.cuh"

namespace quack::detail::sm90 {

/// gemm_rotary: out[0] = rot(alpha · acc + beta · C) with, for a column pair (n, n + 1), n even,
/// n < cols, at row m: p = (n % head_dim) / 2, t = m % seqlen, c = cos[t·ld + p], s = sin[t·ld
/// + p]:  out(m, n) = y(m, n)·c − y(m, n + 1)·s,  out(m, n + 1) = y(m, n + 1)·c + y(m, n)·s
/// (fp32, one fma each, as src/rotary/rotary.cu). kLinFirst as LinCombBias.
struct RotaryEpilogue {
  static constexpr int kOutputs = 1;
  static constexpr bool kNeedsC = false;
  static constexpr bool kLinFirst = true;
  LinearCombination lin;
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t ld = 0;       // table row stride (elements)
  int cols = 0;         // rotated columns [0, cols): a multiple of head_dim
  int head_dim = 2;     // even
  int seqlen = 1;       // T: row m is position m % T

  static RotaryEpilogue make(const GemmProblem& p, bool load_c) {
    RotaryEpilogue e;
    e.lin = LinearCombination::make(p, load_c);
    e.cos = p.rotary_cos;
    e.sin = p.rotary_sin;
    e.ld = p.rotary_ld;
    e.cols = p.rotary_cols;
    e.head_dim = p.rotary_head_dim;
    e.seqlen = p.rotary_seqlen;
    return e;
  }
  CUTE_HOST_DEVICE bool reads_c() const { return lin.reads_c(); }
  CUTE_DEVICE void load_scalars(const float* alpha_dev, const float* beta_dev) {
    lin.load_scalars(alpha_dev, beta_dev);
  }

  template <int N>
  CUTE_DEVICE void operator()(cutlass::Array<float, N> (&out)[kOutputs], cutlass::Array<float, N> const& acc,
                              cutlass::Array<float, N> const* c, SubtileCoord const& coord) const {
    cutlass::Array<float, N> y;
    lin.apply(y, acc, c);
    finish(out, y, coord);
  }

  /// Everything after y = alpha · acc + beta · C (kLinFirst).
  template <int N>
  CUTE_DEVICE void finish(cutlass::Array<float, N> (&out)[kOutputs], cutlass::Array<float, N> const& y,
                          SubtileCoord const& coord) const {
    static_assert(N % 4 == 0, "value i = cc + 2·h + 4·j");
    out[0] = y;
    int const c0 = coord.col(0);
    if (c0 >= cols) return;  // the whole subtile row of this thread is past the rotated columns
    const float* crow[2];
    const float* srow[2];
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      int64_t const t = coord.row(2 * h) % seqlen;
      crow[h] = cos + t * ld;
      srow[h] = sin + t * ld;
    }
    // x: the pair's first column within its head, stepped by 8 per j (one subtraction per step
    // where head_dim ≥ 8; the loop covers smaller heads).
    int x = c0 % head_dim;
    CUTE_UNROLL
    for (int j = 0; j < N / 4; ++j) {
      if (j > 0) {
        x += 8;
        while (x >= head_dim) x -= head_dim;
      }
      if (c0 + 8 * j >= cols) continue;
      int const p = x >> 1;
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        float const cv = __ldg(crow[h] + p);
        float const sv = __ldg(srow[h] + p);
        float const y0 = y[4 * j + 2 * h], y1 = y[4 * j + 2 * h + 1];
        out[0][4 * j + 2 * h] = fmaf(y0, cv, -y1 * sv);
        out[0][4 * j + 2 * h + 1] = fmaf(y1, cv, y0 * sv);
      }
    }
  }
};

}  // namespace quack::detail::sm90
