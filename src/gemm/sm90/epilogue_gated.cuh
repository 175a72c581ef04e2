// The half-width output of a gated epilogue (GatedEpilogue, kD1Div = 2; epilogue_ops.cuh): postact
// has N / 2 columns, so per (EpiM, EpiN) subtile of the accumulator its subtile is (EpiM, EpiN1 =
// EpiN / 2), 16-bit or fp32 values in rows of RowBytes = EpiN1 · sizeof(T) (32 or 64 bytes for
// EpiN = 32; 64 or 128 for EpiN = 64), stored through shared memory by TMA (box (EpiM, EpiN1))
// like every other output.
//
// Thread -> data: epilogue thread t holds, for each value pair p = h + 2·j of its accumulator
// fragment (epilogue_smem.cuh: values 2p, 2p + 1 are the adjacent columns 8j + 2(t % 4) + {0, 1}
// of row frag_row(t, h)), one postact value, of column 4j + t % 4 of that row in the half-width
// subtile. Those are not the STSM fragment layout (a thread's values are 4 columns apart), so
// they go to shared memory as single stores (st.shared.b16 / .b32): kFrg / 2 per thread and
// subtile. Buffer layout: row-major, RowBytes per row, TMA's swizzle of that width (32 B:
// Swizzle<1,4,3>, 64 B: Swizzle<2,4,3>, 128 B: Swizzle<3,4,3> on byte offsets; CuTe's
// GMMA::Layout_K_SW32/SW64/SW128 atoms of T). A warp's 32 lanes cover 8 rows (frag_row) x 4
// consecutive columns (t % 4) per store: 16-bit rows of 32 B: rows r and r + 4 land in different
// 16-byte chunks, 2 lanes per 32-bit word; fp32 rows of 64 B: the 8 rows hit 8 distinct 16-byte
// chunks of a 128-byte line, one lane per bank.
#pragma once

#include <cute/arch/util.hpp>
#include <cute/config.hpp>
#include <cutlass/array.h>

#include <cstdint>
#include <type_traits>

#include "gemm/sm90/epilogue_smem.cuh"

namespace quack::detail::sm90 {

/// Byte offset of byte `byte_in_row` of row `row` in a subtile buffer of RowBytes ∈ {32, 64, 128}
/// rows under TMA's swizzle of that width (16-byte chunk bits [4, 4 + log2(RowBytes / 16)) XOR
/// bits [7, ..) of the offset).
template <int RowBytes>
CUTE_HOST_DEVICE constexpr uint32_t swizzled_offset_w(uint32_t row, uint32_t byte_in_row) {
  static_assert(RowBytes == 32 || RowBytes == 64 || RowBytes == 128, "rows of 32, 64 or 128 bytes");
  uint32_t const off = row * RowBytes + byte_in_row;
  constexpr uint32_t kMask = RowBytes / 16 - 1;
  return off ^ (((off >> 7) & kMask) << 4);
}

/// Column of thread t's pair p (values 2p, 2p + 1 of its fragment) in the half-width subtile.
CUTE_HOST_DEVICE constexpr int half_col(int t, int p) { return frag_col(t, 2 * p) / 2; }

/// Stores thread t's postact values (entries 2p of v: one per column pair) of one subtile into the
/// half-width swizzled buffer `buf` (one stage, EpiN1 columns of 16-bit or fp32 T).
template <int EpiN1, class T, int N>
CUTE_DEVICE void store_half_subtile(cutlass::Array<T, N> const& v, T* buf, int t) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "16-bit or fp32 postact");
  static_assert(N == EpiN1, "a thread's kFrg values are EpiN / 2 = EpiN1 (two rows of EpiN1 / 2 pairs)");
  constexpr int kEs = int(sizeof(T));
  constexpr int kRowBytes = EpiN1 * kEs;
  uint32_t const sbase = cute::cast_smem_ptr_to_uint(buf);
  CUTE_UNROLL
  for (int p = 0; p < N / 2; ++p) {
    uint32_t const off = swizzled_offset_w<kRowBytes>(frag_row(t, p % 2), kEs * half_col(t, p));
    if constexpr (kEs == 2) {
      uint16_t const bits = reinterpret_cast<uint16_t const*>(v.data())[2 * p];  // the value's bits
      asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(sbase + off), "h"(bits));
    } else {
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sbase + off), "f"(float(v[2 * p])));
    }
  }
}

/// Stores the (EpiM, EpiN1) half-width subtile staged in `buf` at out(m0.., n0h..) of batch l of
/// the (M, N1) output with plain predicated stores by the epilogue group's threads (consecutive
/// threads, consecutive columns): the subtile that crosses column N1 when the output's rows are
/// not 16-byte multiples (CollectiveEpilogue::store_subtile_clipped's twin). The caller's next
/// barrier orders these smem reads before the buffer is rewritten.
template <int EpiM, int EpiN1, int kThreads, class T>
CUTE_DEVICE void store_half_subtile_clipped(T const* buf, void* ptr, int64_t ld, int64_t batch, int M, int N1, int l,
                                            int m0, int n0h, int etid) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "16-bit or fp32 postact");
  constexpr int kEs = int(sizeof(T));
  constexpr int kRowBytes = EpiN1 * kEs;
  using Bits = std::conditional_t<kEs == 2, uint16_t, uint32_t>;
  Bits* d = static_cast<Bits*>(ptr) + int64_t(l) * batch;  // the elements' bits
  uint32_t const sbase = cute::cast_smem_ptr_to_uint(buf);
  for (int i = etid; i < EpiM * EpiN1; i += kThreads) {
    int const r = i / EpiN1, c = i % EpiN1;
    if (m0 + r < M && n0h + c < N1) {
      uint32_t const a = sbase + swizzled_offset_w<kRowBytes>(r, kEs * c);
      Bits bits;
      if constexpr (kEs == 2)
        asm volatile("ld.shared.b16 %0, [%1];\n" : "=h"(bits) : "r"(a));
      else
        asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(bits) : "r"(a));
      d[int64_t(m0 + r) * ld + n0h + c] = bits;
    }
  }
}

}  // namespace quack::detail::sm90
