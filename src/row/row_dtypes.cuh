// The element types of one vector-path instance of a row op (device code): one type per input
// stream, one per output stream, one for the per-column vectors. The instance list
// (row_ops.cmake) names them per line, e.g. `bf16,f32:bf16,f32:f32` for RMSNorm's forward with
// an fp32 residual stream (x bf16, residual fp32 : out bf16, residual_out fp32 : weight fp32).
//
// Stream s of a list takes the list's type s, or its last type when the list is shorter (a
// one-type list gives every stream that type). The vector width of the instance follows the
// narrowest input stream: a 16-byte vector of it, so every input stream's vector is a whole
// number of 16-byte words (a bf16 stream 1 word of 8 elements, an fp32 stream beside it 2).
// Outputs narrower than that (bf16 out of fp32 x) are stored 8 bytes at a time.
//
// Kernels visit the streams with row_for<kIn>(f): f(std::integral_constant<int, s>) for each s,
// so each stream's type is a compile-time type (typed 16-byte loads and stores, no run-time
// dtype switch on the vector path).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

namespace quack::detail {

/// Per-stream element types; stream s ≥ the count takes the last.
template <typename... Ts>
struct RowStreams {
  static_assert(sizeof...(Ts) >= 1, "at least one type");
  static constexpr int kCount = sizeof...(Ts);
  template <int s>
  using At = std::tuple_element_t<(s < kCount ? s : kCount - 1), std::tuple<Ts...>>;
};

/// The element types of one instance: input streams, output streams, per-column vectors.
template <class In, class Out, typename TVec>
struct RowDtypes {
  using InStreams = In;
  using OutStreams = Out;
  using Vec = TVec;
};

template <class D, int s>
using row_in_t = typename D::InStreams::template At<s>;
template <class D, int s>
using row_out_t = typename D::OutStreams::template At<s>;

namespace row_dtypes_detail {
template <class D, int... S>
__host__ __device__ constexpr int min_in_bytes(std::integer_sequence<int, S...>) {
  int m = 16;
  ((m = int{sizeof(row_in_t<D, S>)} < m ? int{sizeof(row_in_t<D, S>)} : m), ...);
  return m;
}
template <class D, int kElt, int... S>
__host__ __device__ constexpr int in_words(std::integer_sequence<int, S...>) {
  return (0 + ... + (int{sizeof(row_in_t<D, S>)} / kElt));
}
template <class D, int kElt, int... S>
__host__ __device__ constexpr int max_words(std::integer_sequence<int, S...>) {
  int m = 1;
  ((m = int{sizeof(row_in_t<D, S>)} / kElt > m ? int{sizeof(row_in_t<D, S>)} / kElt : m), ...);
  return m;
}
}  // namespace row_dtypes_detail

/// Bytes of an element of the narrowest of the first kIn input streams.
template <class D, int kIn>
__host__ __device__ constexpr int row_in_elt() {
  return row_dtypes_detail::min_in_bytes<D>(std::make_integer_sequence<int, kIn>{});
}
/// Elements per vector of the instance: 16 bytes of its narrowest input stream.
template <class D, int kIn>
__host__ __device__ constexpr int row_vec_elems() {
  return 16 / row_in_elt<D, kIn>();
}
/// 16-byte words of one vector of input stream s.
template <class D, int kIn, int s>
__host__ __device__ constexpr int row_in_words_of() {
  return int{sizeof(row_in_t<D, s>)} / row_in_elt<D, kIn>();
}
/// 16-byte words of one vector over all kIn input streams (kIn for one dtype).
template <class D, int kIn>
__host__ __device__ constexpr int row_in_words() {
  return row_dtypes_detail::in_words<D, row_in_elt<D, kIn>()>(
      std::make_integer_sequence<int, kIn>{});
}
/// The most 16-byte words one input stream's vector takes.
template <class D, int kIn>
__host__ __device__ constexpr int row_in_max_words() {
  return row_dtypes_detail::max_words<D, row_in_elt<D, kIn>()>(
      std::make_integer_sequence<int, kIn>{});
}

template <class F, int... I>
void row_for_host_impl(F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
/// row_for in host code (launchers).
template <int N, class F>
void row_for_host(F&& f) {
  row_for_host_impl(f, std::make_integer_sequence<int, N>{});
}

#ifdef __CUDACC__
template <class F, int... I>
__device__ __forceinline__ void row_for_impl(F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
/// f(std::integral_constant<int, s>{}) for s = 0 .. N-1 (compile-time stream indices).
template <int N, class F>
__device__ __forceinline__ void row_for(F&& f) {
  row_for_impl(f, std::make_integer_sequence<int, N>{});
}
#endif

}  // namespace quack::detail
