// Top-k's device building blocks: order keys of the input floats, (key, index) entries packed
// into one unsigned integer, and bitonic networks over a warp's registers.
//
// Keys. The kernels work on x' = x for largest and x' = −x for smallest (exact; NaN stays
// NaN), so "better" is always "larger". key(x') is the W-bit unsigned image of x' in x's
// format (W = 16 for fp16/bf16, 32 for fp32) that orders like the numbers: positive values
// get their sign bit set, negative values all bits flipped (so −0 < +0). NaN is the largest
// value in both modes (as torch.topk), so it maps to all ones for largest and to 0 for
// smallest (there it is the worst; every other key is ≥ 1).
//
// Entries. pack(key, col) = key << B | (2^B − 1 − col), B = 16 (P = uint32_t: 16-bit x and
// N < 2^16) or 32 (P = uint64_t): one unsigned compare orders entries by key, then by the
// lower column first (the documented tie rule). Every entry of a real element is ≥ 1 (the
// column part is ≥ 1 since col < 2^B − 1), so 0 is the empty slot and sorts below everything.
//
// Networks. A warp holds 32·R entries as v[r] in lane l, entry e = 32·r + l. Strides ≥ 32 of
// a bitonic network compare registers of one lane; strides < 32 exchange with lane l ^ stride
// by one shuffle (two 32-bit shuffles for P = uint64_t).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace quack::detail {

template <typename T>
struct TopkKey {
  static constexpr int kBits = sizeof(T) * 8;  // 16 or 32
  static constexpr uint32_t kTop = 1u << (kBits - 1);
  static constexpr uint32_t kMask = kBits == 32 ? 0xffffffffu : (1u << kBits) - 1;

  /// x's bits in its own format (exact: x' is a value of T converted to fp32).
  __device__ __forceinline__ static uint32_t bits(float xp) {
    if constexpr (std::is_same_v<T, float>) return __float_as_uint(xp);
    else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float_as_uint(xp) >> 16;
    else return __half_as_ushort(__float2half_rn(xp));
  }

  /// The order key of x' (larger = better); NaN: all ones when largest, 0 when smallest.
  __device__ __forceinline__ static uint32_t key(float xp, bool largest) {
    if (xp != xp) return largest ? kMask : 0u;
    const uint32_t b = bits(xp);
    return (b & kTop) ? (~b & kMask) : (b | kTop);
  }

  /// The x' value of a key (NaN for the NaN keys; the empty key 0 decodes to NaN too).
  __device__ __forceinline__ static float value(uint32_t key) {
    const uint32_t b = (key & kTop) ? (key ^ kTop) : (~key & kMask);
    if constexpr (std::is_same_v<T, float>) return __uint_as_float(b);
    else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __uint_as_float(b << 16);
    else return __half2float(__ushort_as_half(static_cast<unsigned short>(b)));
  }
};

template <typename P>
struct TopkPack {
  static_assert(std::is_same_v<P, uint32_t> || std::is_same_v<P, uint64_t>);
  static constexpr int kIdxBits = sizeof(P) * 4;  // 16 or 32
  static constexpr uint32_t kIdxMax = sizeof(P) == 4 ? 0xffffu : 0xffffffffu;

  __device__ __forceinline__ static P pack(uint32_t key, int64_t col) {
    return (static_cast<P>(key) << kIdxBits) | static_cast<P>(kIdxMax - static_cast<uint32_t>(col));
  }
  /// Entry that beats exactly the entries with a key > `key` (and none with an equal key is
  /// excluded): pack(key, ·) > floor(key) for every column.
  __device__ __forceinline__ static P floor(uint32_t key) {
    return static_cast<P>(key) << kIdxBits;
  }
  __device__ __forceinline__ static uint32_t key(P e) {
    return static_cast<uint32_t>(e >> kIdxBits);
  }
  __device__ __forceinline__ static int64_t col(P e) {
    return static_cast<int64_t>(kIdxMax - static_cast<uint32_t>(e & kIdxMax));
  }
};

template <typename P>
__device__ __forceinline__ P topk_max(P a, P b) {
  return a > b ? a : b;
}
template <typename P>
__device__ __forceinline__ P topk_min(P a, P b) {
  return a < b ? a : b;
}

/// Bitonic sort of the warp's 32·R entries (entry e = 32·r + lane), descending when kDesc.
template <bool kDesc, int R, typename P>
__device__ __forceinline__ void warp_bitonic_sort(P (&v)[R], int lane) {
#pragma unroll
  for (int size = 2; size <= 32 * R; size *= 2) {
#pragma unroll
    for (int stride = size / 2; stride >= 1; stride /= 2) {
      if (stride >= 32) {
        // Pairs (r, r + rs) in one lane; size ≥ 64, so the block's direction is bit `size` of
        // 32·r (the lane's bits are below it).
        const int rs = stride / 32;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r & rs) continue;
          const bool asc = ((r * 32) & size) == 0;
          const P a = v[r], b = v[r + rs];
          const bool lower_min = asc != kDesc;
          v[r] = lower_min ? topk_min(a, b) : topk_max(a, b);
          v[r + rs] = lower_min ? topk_max(a, b) : topk_min(a, b);
        }
      } else {
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const P o = __shfl_xor_sync(0xffffffffu, v[r], stride);
          const bool asc = ((r * 32 + lane) & size) == 0;
          const bool lower = (lane & stride) == 0;
          v[r] = ((lower == asc) != kDesc) ? topk_min(v[r], o) : topk_max(v[r], o);
        }
      }
    }
  }
}

/// Sorts a bitonic sequence of 32·R entries descending (the half-cleaners of a bitonic merge).
template <int R, typename P>
__device__ __forceinline__ void warp_bitonic_merge_desc(P (&v)[R], int lane) {
#pragma unroll
  for (int stride = 16 * R; stride >= 1; stride /= 2) {
    if (stride >= 32) {
      const int rs = stride / 32;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r & rs) continue;
        const P a = v[r], b = v[r + rs];
        v[r] = topk_max(a, b);
        v[r + rs] = topk_min(a, b);
      }
    } else {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const P o = __shfl_xor_sync(0xffffffffu, v[r], stride);
        v[r] = (lane & stride) == 0 ? topk_max(v[r], o) : topk_min(v[r], o);
      }
    }
  }
}

/// q (32·R entries, sorted descending) := the best 32·R of q ∪ {b of every lane} (32 entries,
/// any order), sorted descending. b is sorted ascending, then q's last 32 entries take the
/// elementwise max with it: with b padded by empty entries in front to 32·R (ascending), the
/// elementwise max of a descending and an ascending sequence holds the best 32·R of both as a
/// bitonic sequence (Batcher), which the merge sorts.
template <int R, typename P>
__device__ __forceinline__ void warp_queue_merge(P (&q)[R], P b, int lane) {
  P t[1] = {b};
  warp_bitonic_sort<false, 1>(t, lane);
  q[R - 1] = topk_max(q[R - 1], t[0]);
  warp_bitonic_merge_desc<R>(q, lane);
}

/// Entry e of the warp's queue, in every lane (e < 32·R, warp-uniform). The register is picked
/// by masks, not by a select chain: NVVM turns `r == e / 32 ? q[r] : t` into an indexed load
/// from a local-memory copy of q.
template <int R, typename P>
__device__ __forceinline__ P warp_queue_at(const P (&q)[R], int e) {
  const int re = e / 32;
  P t = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) t |= q[r] & (P{0} - static_cast<P>(r == re));
  return __shfl_sync(0xffffffffu, t, e % 32);
}

}  // namespace quack::detail
