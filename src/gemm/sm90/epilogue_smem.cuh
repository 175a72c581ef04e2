// Register <-> shared-memory traffic of the GEMM epilogue, one (EpiM, EpiN) subtile at a time,
// written against WGMMA's accumulator layout and TMA's swizzle directly.
//
// Why not CuTe's tiled copies (make_tiled_copy_C_atom / make_tiled_copy_S and their partitions,
// as CUTLASS's sm90 epilogue): their layout algebra cost cicc's front end about 1 GB per GEMM TU
// (docs/performance.md "Compile budget"), which put TUs over the 3 GB budget of DESIGN.md §4.
// The instructions are the same: STSM / LDSM (x4) for 16-bit data, 8-byte accesses for fp32.
//
// Fragment layout (PTX ISA "Register fragment of wgmma D"; CuTe's CLayout_64xN): in a subtile,
// epilogue thread t (0 ≤ t < kEpiThreads; warp t / 32 owns rows 16·(t / 32) ..) holds kFrg
// values; value i = c + 2·h + 4·j (c, h ∈ {0, 1}, 0 ≤ j < EpiN / 8) sits at
//   row 16·(t / 32) + 8·h + (t % 32) / 4,   column 8·j + 2·(t % 4) + c.
// A thread's accumulator holds the subtiles (epi_m, epi_n) of its tile as the slices
// [epi_n·kFrg, (epi_n + 1)·kFrg) of its first mode at MMA_M = epi_m, in that order
// (tests/cpp/host/test_gemm_epilogue_layout.cu checks both against CuTe).
// Buffer layout: a subtile buffer is row-major, RowBytes = EpiN·sizeof(T) ∈ {64, 128} per row,
// with TMA's 64B / 128B swizzle (CuTe's GMMA::Layout_K_SW64/SW128 atoms: 16-byte chunk bits
// [4, 4 + log2(RowBytes / 16)) of the byte offset XOR bits [7, ..)); buffers are 1024-byte aligned.
// Rows of 256 bytes (16-bit subtiles of 128 columns, tile suffix e128): a TMA box's swizzled row
// spans at most 128 bytes, so the buffer is two column blocks of EpiM rows x 128 bytes, each
// SW128 (CuTe's tile_to_shape of the SW128 atom, M first); the TMA store writes one box per block.
// Unswizzled rows of 256 bytes (tile suffix e128u): row-major, one TMA box per subtile without
// swizzle (SWIZZLE_NONE allows a box row of up to 256 elements); the 16-bit accesses then rotate
// each thread's column blocks by its row (rotate_blocks) to stay free of bank conflicts.
#pragma once

#include <cute/arch/copy_sm75.hpp>
#include <cute/arch/copy_sm90.hpp>
#include <cute/arch/util.hpp>
#include <cute/config.hpp>
#include <cutlass/array.h>

#include <cstdint>

namespace quack::detail::sm90 {

/// Byte offset of byte `byte_in_row` of row `row` in a swizzled subtile buffer of RowBytes rows
/// (Rows of them: needed only for rows of 256 bytes, whose second 128-byte column block starts
/// after the first block's Rows rows).
template <int RowBytes, int Rows = 0>
CUTE_HOST_DEVICE constexpr uint32_t swizzled_offset(uint32_t row, uint32_t byte_in_row) {
  static_assert(RowBytes == 64 || RowBytes == 128 || (RowBytes == 256 && Rows > 0 && Rows % 8 == 0),
                "subtile rows of 64 or 128 bytes (SW64 / SW128), or of 256 (two SW128 column blocks of Rows rows)");
  if constexpr (RowBytes == 256) {
    return (byte_in_row / 128u) * uint32_t(Rows * 128) + swizzled_offset<128>(row, byte_in_row % 128u);
  } else {
    uint32_t const off = row * RowBytes + byte_in_row;
    constexpr uint32_t kMask = RowBytes == 128 ? 7u : 3u;
    return off ^ (((off >> 7) & kMask) << 4);
  }
}

/// Byte offset of (row, byte_in_row) in a subtile buffer: swizzled_offset<RowBytes, Rows>, or,
/// Unswizzled (rows of 256 bytes, e128u), row-major.
template <int RowBytes, int Rows, bool Unswizzled>
CUTE_HOST_DEVICE constexpr uint32_t buffer_offset(uint32_t row, uint32_t byte_in_row) {
  static_assert(!Unswizzled || RowBytes == 256, "unswizzled buffers: rows of 256 bytes");
  if constexpr (Unswizzled)
    return row * uint32_t(RowBytes) + byte_in_row;
  else
    return swizzled_offset<RowBytes, Rows>(row, byte_in_row);
}

/// Row of values with h (value i = c + 2·h + 4·j) of epilogue thread t in its subtile.
CUTE_HOST_DEVICE constexpr int frag_row(int t, int h) { return 16 * (t / 32) + 8 * h + (t % 32) / 4; }
/// Column of value i of epilogue thread t in its subtile.
CUTE_HOST_DEVICE constexpr int frag_col(int t, int i) { return 8 * (i / 4) + 2 * (t % 4) + i % 2; }

/// Row and 16-byte chunk that lane `t % 32` addresses in STSM / LDSM x4 number jj (matrices
/// q = 0..3 of 8 x 8 16-bit values: rows 8·(q % 2).., columns 8·(2·jj + q / 2)..); register q
/// of that instruction holds the values 2q, 2q + 1 of the thread's 8-value group jj, i.e. values
/// i = 8·jj + 2q + c — the pair (h = q % 2, j = 2·jj + q / 2) of the fragment layout above.
CUTE_HOST_DEVICE constexpr int matrix_row(int t) {
  int const lane = t % 32, q = lane / 8;
  return 16 * (t / 32) + 8 * (q % 2) + lane % 8;
}
CUTE_HOST_DEVICE constexpr int matrix_chunk(int t, int jj) { return 2 * jj + (t % 32) / 16; }

/// Unswizzled rows of 256 bytes (e128u): STSM / LDSM x4 number jj as above would put the 8 rows
/// of each 8 x 8 matrix at one 16-byte chunk 256 bytes apart, one bank group (8-way conflicts).
/// Instead the lane that gives row r = lane % 8 of a matrix gives chunk matrix_chunk ^ r
/// (rotated_chunk), so a matrix's 8 rows fall in 8 bank groups, and the threads that hold that
/// row's data (r = (t % 32) / 4) hold, in STSM jj's registers, their fragment's column blocks
/// j ^ r in place of j (rotate_blocks over packed pairs r[h + 2·j]: three conditional swaps, an
/// involution, so the same call puts LDSM's registers back in fragment order).
CUTE_HOST_DEVICE constexpr int rotated_chunk(int t, int jj) { return matrix_chunk(t, jj) ^ (t % 8); }
CUTE_HOST_DEVICE constexpr uint32_t rotation(int t) { return uint32_t((t % 32) / 4); }
template <int Regs>
CUTE_HOST_DEVICE void rotate_blocks(uint32_t (&r)[Regs], uint32_t rot) {
  static_assert(Regs % 16 == 0, "column blocks in groups of 8 (two packed pairs each)");
  CUTE_UNROLL
  for (int b = 1; b < 8; b <<= 1) {
    bool const swap = (rot & uint32_t(b)) != 0u;
    CUTE_UNROLL
    for (int j = 0; j < Regs / 2; ++j) {
      if (j & b) continue;
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        uint32_t const x = r[h + 2 * j], y = r[h + 2 * (j ^ b)];
        r[h + 2 * j] = swap ? y : x;
        r[h + 2 * (j ^ b)] = swap ? x : y;
      }
    }
  }
}

/// Byte offset, in a subtile buffer of kRowBytes rows (EpiM of them: rows of 256 bytes only),
/// of the 16-byte row chunk thread t addresses in STSM / LDSM x4 number jj: the swizzled
/// buffer's matrix_chunk, or, Unswizzled (e128u), the row-major buffer's rotated_chunk.
template <int kRowBytes, int EpiM, bool Unswizzled>
CUTE_HOST_DEVICE constexpr uint32_t matrix_offset(int t, int jj) {
  if constexpr (Unswizzled)
    return buffer_offset<kRowBytes, EpiM, true>(uint32_t(matrix_row(t)), 16u * uint32_t(rotated_chunk(t, jj)));
  else
    return swizzled_offset<kRowBytes, EpiM>(uint32_t(matrix_row(t)), 16u * uint32_t(matrix_chunk(t, jj)));
}

// Shared-memory accesses through 32-bit shared addresses (as the STSM / LDSM atoms), so they stay
// LDS / STS whatever the compiler can prove about the buffer pointer's address space.
CUTE_DEVICE void st_shared_f32x2(uint32_t addr, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(x), "f"(y));
}
CUTE_DEVICE float2 ld_shared_f32x2(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr));
  return v;
}

/// Stores a thread's kFrg values of one subtile into the swizzled buffer `buf` (one stage).
/// EpiM: the subtile's rows (needed only for rows of 256 bytes). Unswizzled: e128u's buffer.
/// Half: -1 (the default) the whole subtile; H = 0 or 1 (swizzled rows of 64 or 128 bytes) half H
/// of the thread's kFrg values, values [H·N, (H + 1)·N) (N = kFrg / 2) in v, the fragment's column
/// blocks j ∈ [H·EpiN / 16, (H + 1)·EpiN / 16): 16-bit, STSM x4 numbers jj of that half; fp32, the
/// pairs (h, j) of those blocks. The same addresses and instructions as the whole subtile's, half
/// of them: a caller that runs its subtile in two halves holds half the values at a time.
template <int EpiN, int EpiM = 0, bool Unswizzled = false, int Half = -1, class T, int N>
CUTE_DEVICE void store_subtile(cutlass::Array<T, N> const& v, T* buf, int t) {
  static_assert(Half >= -1 && Half <= 1, "the whole subtile (-1) or one of its two halves");
  constexpr int kParts = Half < 0 ? 1 : 2, kPart = Half < 0 ? 0 : Half;  // v: part kPart of kParts
  constexpr int kRowBytes = EpiN * int(sizeof(T));
  static_assert(Half < 0 || ((kRowBytes == 64 || kRowBytes == 128) && !Unswizzled),
                "halves: swizzled rows of 64 or 128 bytes");
  char* const base = reinterpret_cast<char*>(buf);
  if constexpr (sizeof(T) == 2) {
    static_assert(N == EpiN / 2 / kParts && EpiN % (16 * kParts) == 0,
                  "16-bit subtile: EpiN / 8 column blocks of 4 values (a half: EpiN / 32 STSM x4)");
    static_assert(!Unswizzled || kRowBytes == 256, "e128u: 16-bit rows of 256 bytes");
    uint32_t r[N / 2];  // value pairs (c = 0, 1); e128u: column blocks rotated by row
    CUTE_UNROLL
    for (int i = 0; i < N / 2; ++i) r[i] = reinterpret_cast<uint32_t const*>(v.data())[i];
    if constexpr (Unswizzled) rotate_blocks(r, rotation(t));
    constexpr int kStsm = EpiN / 16 / kParts;  // STSM x4 of this part
    CUTE_UNROLL
    for (int k = 0; k < kStsm; ++k) {
      uint32_t const off = matrix_offset<kRowBytes, EpiM, Unswizzled>(t, kPart * kStsm + k);
      cute::SM90_U32x4_STSM_N::copy(r[4 * k], r[4 * k + 1], r[4 * k + 2], r[4 * k + 3],
                                    *reinterpret_cast<cute::uint128_t*>(base + off));
    }
  } else {
    static_assert(sizeof(T) == 4 && N == EpiN / 2 / kParts && !Unswizzled, "fp32 subtile (swizzled)");
    uint32_t const sbase = cute::cast_smem_ptr_to_uint(base);
    CUTE_UNROLL
    for (int q = 0; q < N / 2; ++q) {
      int const p = kPart * (N / 2) + q;  // the whole subtile's value pair p = (h, j) = (p % 2, p / 2)
      uint32_t const off = swizzled_offset<kRowBytes, EpiM>(frag_row(t, p % 2), 4 * frag_col(t, 2 * p));
      st_shared_f32x2(sbase + off, float(v[2 * q]), float(v[2 * q + 1]));
    }
  }
}

/// Loads a thread's kFrg values of one subtile from the swizzled buffer `buf` (one stage).
/// EpiM, Unswizzled, Half: as store_subtile's.
template <int EpiN, int EpiM = 0, bool Unswizzled = false, int Half = -1, class T, int N>
CUTE_DEVICE void load_subtile(cutlass::Array<T, N>& v, T const* buf, int t) {
  static_assert(Half >= -1 && Half <= 1, "the whole subtile (-1) or one of its two halves");
  constexpr int kParts = Half < 0 ? 1 : 2, kPart = Half < 0 ? 0 : Half;  // v: part kPart of kParts
  constexpr int kRowBytes = EpiN * int(sizeof(T));
  static_assert(Half < 0 || ((kRowBytes == 64 || kRowBytes == 128) && !Unswizzled),
                "halves: swizzled rows of 64 or 128 bytes");
  char const* const base = reinterpret_cast<char const*>(buf);
  if constexpr (sizeof(T) == 2) {
    static_assert(N == EpiN / 2 / kParts && EpiN % (16 * kParts) == 0, "16-bit subtile");
    static_assert(!Unswizzled || kRowBytes == 256, "e128u: 16-bit rows of 256 bytes");
    uint32_t r[N / 2];
    constexpr int kLdsm = EpiN / 16 / kParts;  // LDSM x4 of this part
    CUTE_UNROLL
    for (int k = 0; k < kLdsm; ++k) {
      uint32_t const off = matrix_offset<kRowBytes, EpiM, Unswizzled>(t, kPart * kLdsm + k);
      cute::SM75_U32x4_LDSM_N::copy(*reinterpret_cast<cute::uint128_t const*>(base + off), r[4 * k],
                                    r[4 * k + 1], r[4 * k + 2], r[4 * k + 3]);
    }
    if constexpr (Unswizzled) rotate_blocks(r, rotation(t));  // an involution: fragment order again
    CUTE_UNROLL
    for (int i = 0; i < N / 2; ++i) reinterpret_cast<uint32_t*>(v.data())[i] = r[i];
  } else {
    static_assert(sizeof(T) == 4 && N == EpiN / 2 / kParts && !Unswizzled, "fp32 subtile (swizzled)");
    uint32_t const sbase = cute::cast_smem_ptr_to_uint(base);
    CUTE_UNROLL
    for (int q = 0; q < N / 2; ++q) {
      int const p = kPart * (N / 2) + q;  // the whole subtile's value pair
      uint32_t const off = swizzled_offset<kRowBytes, EpiM>(frag_row(t, p % 2), 4 * frag_col(t, 2 * p));
      float2 const x = ld_shared_f32x2(sbase + off);
      v[2 * q] = T(x.x);
      v[2 * q + 1] = T(x.y);
    }
  }
}

/// The bank-conflict-free order of a thread's fp32 pairs (tile suffix "cf", EpiCf in epilogue_variants.cuh;
/// 32-bit C and D in subtiles of 32 columns: rows of 128 bytes, SW128). In the fragment order
/// above, pair p = (h, j) of a warp's lanes is one ld / st.shared.v2 at rows lane / 4 (+ 8h, + 16
/// per warp) and bytes 32j + 8(lane % 4) of each row; SW128 XORs the 16-byte chunk index with the
/// row's low 3 bits, so rows 2k and 2k + 1 put their 32 bytes in the same two chunks (one chunk
/// pair per row pair) and each half-warp (rows 0-3 or 4-7: an 8-byte access is served half a warp
/// at a time) hits every bank it touches twice: 4 wavefronts per instruction instead of 2
/// (scripts/dgated_smem_banks.py). Here lanes of odd lane / 4 take column block j ^ 2 at slot
/// (h, j): the 4 rows of a half-warp then cover 4 distinct chunk pairs (2 wavefronts). Slot p of
/// such a thread holds fragment pair p ^ 4 (values 2p ^ 8, 2p ^ 8 + 1): the caller permutes the
/// accumulator values to match (cf_flip), so every value meets its own C and lands at its own
/// address; the results are bit-identical to the fragment order's.
CUTE_HOST_DEVICE constexpr uint32_t cf_flip(int t) { return ((t % 32) / 4) & 1 ? 1u : 0u; }
/// Byte offset of slot p (pair (p % 2, (p / 2) ^ 2·flip)) of thread t in a 128-byte-row SW128 buffer.
CUTE_HOST_DEVICE constexpr uint32_t cf_offset(int t, int p, uint32_t flip) {
  uint32_t const row = uint32_t(frag_row(t, p % 2));
  uint32_t const k = uint32_t(8 * (t % 4)) ^ (64u * flip) ^ ((row & 7u) << 4);  // same for both h
  return row * 128u + ((32u * uint32_t(p / 2)) ^ k);
}
// cf_offset is the fragment layout's address of pair p ^ 4·flip (checked for every thread and slot).
CUTE_HOST_DEVICE constexpr bool cf_offset_ok() {
  for (int t = 0; t < 128; ++t)
    for (int p = 0; p < 8; ++p)
      for (uint32_t f = 0; f < 2; ++f) {
        int const q = p ^ int(4 * f);
        if (cf_offset(t, p, f) != swizzled_offset<128>(uint32_t(frag_row(t, q % 2)), uint32_t(4 * frag_col(t, 2 * q))))
          return false;
      }
  return true;
}
static_assert(cf_offset_ok(), "cf_offset: the SW128 address of fragment pair p ^ 4·flip");

/// load_subtile's fp32 path in the cf order (thread t's slot p: fragment pair p ^ 4·cf_flip(t)).
template <int EpiN, class T, int N>
CUTE_DEVICE void load_subtile_cf(cutlass::Array<T, N>& v, T const* buf, int t) {
  static_assert(sizeof(T) == 4 && EpiN == 32 && N == 16, "32-bit subtiles of 64 x 32: 16 values per thread");
  uint32_t const sbase = cute::cast_smem_ptr_to_uint(buf);
  uint32_t const flip = cf_flip(t);
  CUTE_UNROLL
  for (int p = 0; p < N / 2; ++p) {
    float2 const x = ld_shared_f32x2(sbase + cf_offset(t, p, flip));
    v[2 * p] = T(x.x);
    v[2 * p + 1] = T(x.y);
  }
}

/// store_subtile in the cf order: the 32-bit path (dpreact) as load_subtile_cf; the 16-bit path
/// (postact of gemm_dgated: one value per pair, the same 64 x 32 subtile in rows of 64 bytes,
/// SW64) by STSM as store_subtile, where STSM jj of a thread of odd lane / 4 holds its fragment's
/// column blocks 2(jj ^ 1), 2(jj ^ 1) + 1: the lane that gives row r of each 8 x 8 matrix (lane %
/// 8 = r) gives chunk matrix_chunk(t, jj ^ (r & 1)) (each matrix's 8 rows still fill the 8 bank
/// groups: conflict-free as the fragment order).
template <int EpiN, class T, int N>
CUTE_DEVICE void store_subtile_cf(cutlass::Array<T, N> const& v, T* buf, int t) {
  static_assert((sizeof(T) == 4 || sizeof(T) == 2) && EpiN == 32 && N == 16, "subtiles of 64 x 32: 16 values per thread");
  if constexpr (sizeof(T) == 4) {
    uint32_t const sbase = cute::cast_smem_ptr_to_uint(buf);
    uint32_t const flip = cf_flip(t);
    CUTE_UNROLL
    for (int p = 0; p < N / 2; ++p) st_shared_f32x2(sbase + cf_offset(t, p, flip), float(v[2 * p]), float(v[2 * p + 1]));
  } else {
    constexpr int kRowBytes = EpiN * int(sizeof(T));
    char* const base = reinterpret_cast<char*>(buf);
    uint32_t const* r = reinterpret_cast<uint32_t const*>(v.data());
    int const rflip = t & 1;  // this lane's address row (lane % 8) is odd
    CUTE_UNROLL
    for (int jj = 0; jj < EpiN / 16; ++jj) {
      uint32_t const off = swizzled_offset<kRowBytes>(matrix_row(t), 16 * matrix_chunk(t, jj ^ rflip));
      cute::SM90_U32x4_STSM_N::copy(r[4 * jj], r[4 * jj + 1], r[4 * jj + 2], r[4 * jj + 3],
                                    *reinterpret_cast<cute::uint128_t*>(base + off));
    }
  }
}

/// The bits of elements (r, c) and (r, c + 1) (c even) of a swizzled subtile buffer (one stage),
/// column c in the low half: one 4-byte (16-bit T) or 8-byte (fp32) shared-memory load, as both
/// sit in one 16-byte chunk. For the plain stores of the epilogue.
template <int EpiN, int EpiM = 0, bool Unswizzled = false, class T>
CUTE_DEVICE uint64_t subtile_pair_bits(T const* buf, int r, int c) {
  constexpr int kRowBytes = EpiN * int(sizeof(T));
  uint32_t const a = cute::cast_smem_ptr_to_uint(buf) + buffer_offset<kRowBytes, EpiM, Unswizzled>(r, c * int(sizeof(T)));
  if constexpr (sizeof(T) == 2) {
    uint32_t bits;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(bits) : "r"(a));
    return bits;
  } else {
    static_assert(sizeof(T) == 4, "16-bit or fp32 elements");
    uint32_t lo, hi;
    asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(lo), "=r"(hi) : "r"(a));
    return uint64_t(lo) | (uint64_t(hi) << 32);
  }
}

}  // namespace quack::detail::sm90
