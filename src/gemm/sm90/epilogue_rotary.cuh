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
// Table layouts: paired (cos and sin the two columns of one (S_ro, head_dim / 2, 2) fp32
// tensor: sin = cos + 1, column stride 2), one 8-byte load per pair and row; or two separate
// tables with unit column stride, two 4-byte loads. Per warp and load, the 4 threads of a row
// read 4 consecutive pairs: 32 bytes of the paired table (one L2 sector), or 16 bytes of each
// separate table (half of two sectors). The tables' reads add to the mainloop's L2 -> SM
// traffic (on the 128x192 tile, 2 x 896 KB of A and B tiles per 192 KB of separate-table
// sectors, half that paired), hence the paired layout (gemm_rotary_ops builds it).
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
struct RotaryEpilogue : LinFirstVisitor<RotaryEpilogue> {
  static constexpr int kOutputs = 1;
  static constexpr bool kPrefetch = true;  // the next subtile's table lines, into L1 (prefetch)
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t ld = 0;       // table row stride (elements)
  bool paired = false;  // sin == cos + 1, column stride 2: (cos, sin) read as one float2
  int cols = 0;         // rotated columns [0, cols): a multiple of head_dim
  int head_dim = 2;     // even
  int seqlen = 1;       // T: row m is position m % T
  int col_step = 0;     // 8 % head_dim: a thread's next column pair (8 columns on), in its head
  int row_step = 0;     // 8 % seqlen: a thread's second row (8 rows on), as a position

  static RotaryEpilogue make(const GemmProblem& p, bool load_c) {
    RotaryEpilogue e;
    e.lin = LinearCombination::make(p, load_c);
    e.cos = p.rotary_cos;
    e.sin = p.rotary_sin;
    e.ld = p.rotary_ld;
    e.paired = p.rotary_paired;
    e.cols = p.rotary_cols;
    e.head_dim = p.rotary_head_dim;
    e.seqlen = p.rotary_seqlen;
    e.col_step = e.head_dim > 0 ? 8 % e.head_dim : 0;
    e.row_step = e.seqlen > 0 ? 8 % e.seqlen : 0;
    return e;
  }

  /// Asks for the table lines of the subtile at `coord` in L1 (prefetch.global.L1; no registers,
  /// no completion): for each of the thread's two rows, its first pair and the subtile's last
  /// pair of the same head (N pairs per subtile row: N = kFrg, EpiN = 2·N columns), so that the
  /// subtile's loads in rotate() hit L1 instead of waiting on L2 after the previous subtile's
  /// barriers. The 4 threads of a row ask for the same lines (one request per line per warp).
  template <int N>
  CUTE_DEVICE void prefetch(SubtileCoord const& coord) const {
    int const c0 = coord.col(0);
    if (c0 >= cols) return;
    int const t0 = coord.row(0) % seqlen;
    int t1 = t0 + row_step;
    t1 = t1 >= seqlen ? t1 - seqlen : t1;
    int const p0 = (c0 % head_dim) >> 1;
    int const p1 = p0 + N - 1 < head_dim / 2 ? p0 + N - 1 : head_dim / 2 - 1;
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      int64_t const row = int64_t(h == 0 ? t0 : t1) * ld;
      if (paired) {
        prefetch_l1(cos + row + 2 * p0);
        prefetch_l1(cos + row + 2 * p1);
      } else {
        prefetch_l1(cos + row + p0);
        prefetch_l1(cos + row + p1);
        prefetch_l1(sin + row + p0);
        prefetch_l1(sin + row + p1);
      }
    }
  }

  /// Everything after y = alpha · acc + beta · C (kLinFirst).
  template <int N>
  CUTE_DEVICE void finish(cutlass::Array<float, N> (&out)[kOutputs], cutlass::Array<float, N> const& y,
                          SubtileCoord const& coord) const {
    static_assert(N % 4 == 0, "value i = cc + 2·h + 4·j");
    out[0] = y;
    if (coord.col(0) >= cols) return;  // the whole subtile row of this thread is past the rotated columns
    // One loop per table layout (uniform over the grid), so that each has its subtile's loads
    // issued together before the math.
    if (paired)
      rotate<true>(out, y, coord);
    else
      rotate<false>(out, y, coord);
  }

 private:
  CUTE_DEVICE static void prefetch_l1(const float* p) {
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
  }

  // Branch-free: the loop over j has no control flow (the column step and the row step wrap by
  // one conditional subtraction, the columns past `cols` are selected, not skipped). A `while`
  // wrap and a `continue` per j make each j a basic block of its own, whose loads are waited for
  // before the next j's are issued: 4 round trips to L2 per subtile, 48 per 128x192 tile. ptxas
  // still places each j's math right after its loads on the 128x192 pingpong tile (few free
  // registers beside the accumulators), so the latency is hidden by prefetch() instead: the
  // loads find their lines in L1.
  template <bool kPaired, int N>
  CUTE_DEVICE void rotate(cutlass::Array<float, N> (&out)[kOutputs], cutlass::Array<float, N> const& y,
                          SubtileCoord const& coord) const {
    int const c0 = coord.col(0);
    // Positions of the thread's two rows: row(2) = row(0) + 8.
    int const t0 = coord.row(0) % seqlen;
    int t1 = t0 + row_step;
    t1 = t1 >= seqlen ? t1 - seqlen : t1;
    const float* const crow[2] = {cos + int64_t(t0) * ld, cos + int64_t(t1) * ld};
    const float* const srow[2] = {sin + int64_t(t0) * ld, sin + int64_t(t1) * ld};  // separate tables only
    // x: value 4j's column within its head, (c0 + 8·j) % head_dim, stepped by col_step.
    float cv[N / 4][2], sv[N / 4][2];
    int x = c0 % head_dim;
    CUTE_UNROLL
    for (int j = 0; j < N / 4; ++j) {
      if (j > 0) {
        x += col_step;
        x = x >= head_dim ? x - head_dim : x;
      }
      int const p = x >> 1;  // always inside the table row, also for columns past `cols`
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        if constexpr (kPaired) {
          float2 const cs = __ldg(reinterpret_cast<const float2*>(crow[h]) + p);
          cv[j][h] = cs.x, sv[j][h] = cs.y;
        } else {
          cv[j][h] = __ldg(crow[h] + p);
          sv[j][h] = __ldg(srow[h] + p);
        }
      }
    }
    CUTE_UNROLL
    for (int j = 0; j < N / 4; ++j) {
      bool const rot = c0 + 8 * j < cols;
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        float const y0 = y[4 * j + 2 * h], y1 = y[4 * j + 2 * h + 1];
        float const r0 = fmaf(y0, cv[j][h], -y1 * sv[j][h]);
        float const r1 = fmaf(y1, cv[j][h], y0 * sv[j][h]);
        out[0][4 * j + 2 * h] = rot ? r0 : y0;
        out[0][4 * j + 2 * h + 1] = rot ? r1 : y1;
      }
    }
  }
};

}  // namespace quack::detail::sm90
