// Vector IO for row kernels: K consecutive elements of one row, converted to and from fp32.
//
// The main tensor of a kernel has a compile-time element type T; secondary tensors (weight,
// bias, residual, outputs) carry a runtime DType and go through load_any / store_any, a
// uniform switch per access. All accesses are aligned: K·sizeof(U) bytes for K consecutive
// elements (16 bytes for the main tensor on the vector path, split into 16-byte pieces when
// wider), and the host guarantees base and row-stride alignment before choosing that path.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <type_traits>

#include "quack/tensor.h"

namespace quack::detail {

template <typename T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// Bytes per element of a runtime dtype (device twin of quack::dtype_size).
__device__ __forceinline__ int elt_bytes(DType t) {
  return t == DType::kFloat32 || t == DType::kInt32 ? 4 : t == DType::kInt64 ? 8 : 2;
}

// Raw storage of kBytes bytes, as wide as one aligned access allows (16, 8, 4 or 2 bytes).
template <int kBytes> struct RawWord;
template <> struct RawWord<16> { using type = uint4; };
template <> struct RawWord<8> { using type = uint2; };
template <> struct RawWord<4> { using type = uint32_t; };
template <> struct RawWord<2> { using type = uint16_t; };

// K elements of U in registers, viewed as 16-byte words (or one narrower word).
template <typename U, int K>
struct alignas(K * sizeof(U) >= 16 ? 16 : K * sizeof(U)) Packed {
  static constexpr int kBytes = K * sizeof(U);
  static constexpr int kWordBytes = kBytes >= 16 ? 16 : kBytes;
  static constexpr int kWords = kBytes / kWordBytes;
  using Word = typename RawWord<kWordBytes>::type;
  union {
    U elt[K];
    Word word[kWords];
  };
};

// Where a load goes: kStream is evict-first (ld.global.cs: rows read once beside L1-resident
// vectors, the looped policy's second pass); kShared reads staged rows and vectors from shared
// memory; kNormal is a plain global load (default L1/L2 policy: data a kernel re-reads from L2,
// and rows read once where nothing in L1 needs protecting: the evict-first hint costs 4-6 %
// behind an L2 of dirty lines, run AK3); kReadOnly goes through the read-only path and stays in
// L1 (weights every row of an SM re-reads); kNoL1 skips L1 and keeps L2's normal policy
// (ld.global.L1::no_allocate.L2::cache_hint with an evict_normal policy): rows read once beside
// L1-resident vectors, where a plain load would push the vectors out of L1 and the evict-first
// one pays behind dirty L2 lines (scripts/diag_cache_hints.cu's scale32k: 3.99 TB/s against
// ld.cs's 3.89 and plain's 3.93 after a dirty flush, run AL).
enum class Cache { kStream, kShared, kNormal, kReadOnly, kNoL1 };

// QUACK_DIAG_PLAIN_CACHE (a diagnostic build flag, off by default): the streaming loads and the
// stores without the evict-first hint (plain ld / st, as QuACK's kernels issue them), to measure
// what the hint costs behind a dirty L2 (scripts/diag_cache_hints.cu).
#ifdef QUACK_DIAG_PLAIN_CACHE
inline constexpr bool kEvictFirstHints = false;
#else
inline constexpr bool kEvictFirstHints = true;
#endif

/// An L2 cache policy of evict_normal for the whole access (createpolicy; not volatile, so
/// the compiler creates it once per kernel).
__device__ __forceinline__ uint64_t l2_evict_normal_policy() {
  uint64_t pol;
  asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

/// Cache::kNoL1's load of one 4-, 8- or 16-byte word.
template <typename W>
__device__ __forceinline__ W load_word_no_l1(const W* p) {
  const uint64_t pol = l2_evict_normal_policy();
  W v;
  if constexpr (sizeof(W) == 16) {
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p), "l"(pol));
  } else if constexpr (sizeof(W) == 8) {
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;"
                 : "=r"(v.x), "=r"(v.y)
                 : "l"(p), "l"(pol));
  } else {
    static_assert(sizeof(W) == 4, "kNoL1 loads 4-, 8- or 16-byte words");
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.u32 %0, [%1], %2;"
                 : "=r"(v)
                 : "l"(p), "l"(pol));
  }
  return v;
}

template <Cache kCache, typename W>
__device__ __forceinline__ W load_word(const W* p) {
  if constexpr (kCache == Cache::kNoL1 && kEvictFirstHints && sizeof(W) >= 4)
    return load_word_no_l1(p);
  else if constexpr (kCache == Cache::kStream && kEvictFirstHints) return __ldcs(p);
  else if constexpr (kCache == Cache::kReadOnly) return __ldg(p);
  else return *p;
}
template <typename W>
__device__ __forceinline__ void store_word(W* p, W v) {
  if constexpr (kEvictFirstHints) __stcs(p, v);
  else *p = v;
}

// Specialisations for the scalar words __ldcs/__ldg lack.
template <>
__device__ __forceinline__ uint16_t load_word<Cache::kStream, uint16_t>(const uint16_t* p) {
  if constexpr (!kEvictFirstHints) return *p;
  return __ldcs(reinterpret_cast<const unsigned short*>(p));
}
template <>
__device__ __forceinline__ uint16_t load_word<Cache::kShared, uint16_t>(const uint16_t* p) {
  return *p;
}

/// Asks the copy engine to bring `bytes` (a multiple of 16) from global address p (16-byte
/// aligned) into L2, without a destination or completion (cp.async.bulk.prefetch.L2, sm_90).
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

/// prefetch_l2_bulk with an L2 cache policy (createpolicy's 64-bit value: l2_policy_*).
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, uint32_t bytes, uint64_t policy) {
  asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(p),
               "r"(bytes), "l"(policy)
               : "memory");
}

/// L2 cache policies for the `.L2::cache_hint` operand of bulk copies (createpolicy, sm_80+):
/// every line the access touches at evict-last / evict-first priority.
__device__ __forceinline__ uint64_t l2_policy_evict_last() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint64_t l2_policy_evict_first() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

/// A bulk copy of `bytes` (a multiple of 16) from global src into shared::cluster dst,
/// completing on mbarrier `bar` (complete_tx), with an L2 cache policy (cp.async.bulk, sm_90).
__device__ __forceinline__ void copy_bulk_g2s(void* dst, const void* src, uint32_t bytes,
                                              uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
      "l"(src), "r"(bytes), "r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))),
      "l"(policy)
      : "memory");
}

/// Loads K consecutive elements of type U starting at p into a Packed, unconverted (kernels
/// that keep values in registers across a reduction hold them packed: half the registers of
/// fp32 for 16-bit types).
template <Cache kCache, typename U, int K>
__device__ __forceinline__ void load_packed(const U* p, Packed<U, K>& v) {
  const auto* src = reinterpret_cast<const typename Packed<U, K>::Word*>(p);
#pragma unroll
  for (int w = 0; w < Packed<U, K>::kWords; ++w) v.word[w] = load_word<kCache>(src + w);
}

/// Stores a Packed at p (streaming: outputs are not re-read by the kernel).
template <typename U, int K>
__device__ __forceinline__ void store_packed(U* p, const Packed<U, K>& v) {
  auto* dst = reinterpret_cast<typename Packed<U, K>::Word*>(p);
#pragma unroll
  for (int w = 0; w < Packed<U, K>::kWords; ++w) store_word(dst + w, v.word[w]);
}

/// The K elements of a Packed in fp32. bf16 pairs convert by bit operations on each 32-bit
/// word (lo << 16, hi & 0xffff0000), so the packed registers stay packed until their use (the
/// per-element path extracts high halves into extra registers right after the load).
template <typename U, int K>
__device__ __forceinline__ void unpack(const Packed<U, K>& v, float (&out)[K]) {
  if constexpr (std::is_same_v<U, __nv_bfloat16> && Packed<U, K>::kWordBytes == 16) {
#pragma unroll
    for (int w = 0; w < Packed<U, K>::kWords; ++w) {
      const uint32_t u[4] = {v.word[w].x, v.word[w].y, v.word[w].z, v.word[w].w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        out[w * 8 + 2 * k] = __uint_as_float(u[k] << 16);
        out[w * 8 + 2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < K; ++i) out[i] = to_float(v.elt[i]);
  }
}

/// Loads K consecutive elements of type U starting at p (aligned to K·sizeof(U), max 16).
template <typename U, int K, Cache kCache = Cache::kStream>
__device__ __forceinline__ void load_vec(const U* p, float (&out)[K]) {
  Packed<U, K> v;
  load_packed<kCache>(p, v);
  unpack(v, out);  // bf16: 2 bit operations per pair instead of PRMT + 2 shifts (SASS)
}

/// Stores K consecutive elements of type U at p (aligned as for load_vec).
template <typename U, int K>
__device__ __forceinline__ void store_vec(U* p, const float (&in)[K]) {
  Packed<U, K> v;
#pragma unroll
  for (int i = 0; i < K; ++i) v.elt[i] = from_float<U>(in[i]);
  store_packed(p, v);
}

/// load_vec for an element type known only at run time (uniform across the grid).
template <int K, Cache kCache = Cache::kStream>
__device__ __forceinline__ void load_any(const void* base, DType t, int64_t offset,
                                         float (&out)[K]) {
  switch (t) {
    case DType::kBFloat16:
      load_vec<__nv_bfloat16, K, kCache>(static_cast<const __nv_bfloat16*>(base) + offset, out);
      break;
    case DType::kFloat16:
      load_vec<__half, K, kCache>(static_cast<const __half*>(base) + offset, out);
      break;
    default:
      load_vec<float, K, kCache>(static_cast<const float*>(base) + offset, out);
      break;
  }
}

/// store_vec for an element type known only at run time.
template <int K>
__device__ __forceinline__ void store_any(void* base, DType t, int64_t offset,
                                          const float (&in)[K]) {
  switch (t) {
    case DType::kBFloat16:
      store_vec<__nv_bfloat16, K>(static_cast<__nv_bfloat16*>(base) + offset, in);
      break;
    case DType::kFloat16:
      store_vec<__half, K>(static_cast<__half*>(base) + offset, in);
      break;
    default:
      store_vec<float, K>(static_cast<float*>(base) + offset, in);
      break;
  }
}

}  // namespace quack::detail
