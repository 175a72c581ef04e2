// Run time -> compile time, once per family: calls f(Tag<T>{}) with T the C++ element type of
// a floating DType. No macro families.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "quack/errors.h"
#include "quack/tensor.h"

namespace quack::detail {

template <typename T> struct Tag { using type = T; };

template <typename F>
decltype(auto) dispatch_float(DType t, const char* where, F&& f) {
  switch (t) {
    case DType::kFloat32: return f(Tag<float>{});
    case DType::kFloat16: return f(Tag<__half>{});
    case DType::kBFloat16: return f(Tag<__nv_bfloat16>{});
    default:
      throw InvalidArgument(std::string(where) + ": unsupported dtype " + dtype_name(t) +
                            "; expected float32, float16 or bfloat16");
  }
}

template <typename F>
decltype(auto) dispatch_bool(bool b, F&& f) {
  if (b) return f(std::true_type{});
  return f(std::false_type{});
}

}  // namespace quack::detail
