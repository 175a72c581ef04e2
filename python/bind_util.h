// Shared by the binding TUs of quack_cpp._C (binding.cpp, bind_<family>.cpp): a tensor arrives
// from Python as a plain tuple
//
//   (data_ptr: int, dtype_code: int, shape: tuple[int, ...], strides: tuple[int, ...], device: int)
//
// or None, and becomes a quack::TensorRef; streams are cudaStream_t handles as ints. No logic:
// every semantic check is the C++ API's.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "quack/errors.h"
#include "quack/tensor.h"

namespace quack_py {

using TensorTuple =
    std::tuple<uintptr_t, int, std::vector<int64_t>, std::vector<int64_t>, int>;
using OptTensor = std::optional<TensorTuple>;

// Tuple -> TensorRef; None -> an absent TensorRef. Only the conversion is checked here (the
// tuple's own consistency); every semantic check is the C++ API's.
inline quack::TensorRef to_ref(const OptTensor& t, const char* fn, const char* name) {
  quack::TensorRef r;
  if (!t) return r;
  const auto& [ptr, code, shape, stride, device] = *t;
  const std::string where = std::string(fn) + ": " + name;
  if (code < 0 || code > static_cast<int>(quack::DType::kInt64))
    throw quack::InvalidArgument(where + " has dtype code " + std::to_string(code) +
                                 ", expected 0..4 (float32, float16, bfloat16, int32, int64)");
  if (shape.size() != stride.size())
    throw quack::InvalidArgument(where + " has " + std::to_string(shape.size()) +
                                 " sizes but " + std::to_string(stride.size()) + " strides");
  if (shape.empty() || shape.size() > static_cast<size_t>(quack::TensorRef::kMaxDims))
    throw quack::InvalidArgument(where + " has " + std::to_string(shape.size()) +
                                 " dimensions, expected 1 to " +
                                 std::to_string(quack::TensorRef::kMaxDims));
  r.data = reinterpret_cast<void*>(ptr);
  r.dtype = static_cast<quack::DType>(code);
  r.ndim = static_cast<int>(shape.size());
  for (int i = 0; i < r.ndim; ++i) {
    r.shape[i] = shape[i];
    r.stride[i] = stride[i];
  }
  r.device = device;
  return r;
}

inline cudaStream_t to_stream(uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

/// The GEMM args' caller-given buffers (GemmArgs::workspace / streamk_workspace and the fused
/// ops' same fields) from Python's integer pointers and byte counts (0: none).
template <class Args>
void set_gemm_workspaces(Args& g, uintptr_t workspace, size_t workspace_bytes, uintptr_t streamk_workspace,
                         size_t streamk_workspace_bytes) {
  g.workspace = reinterpret_cast<void*>(workspace);
  g.workspace_bytes = workspace_bytes;
  g.streamk_workspace = reinterpret_cast<void*>(streamk_workspace);
  g.streamk_workspace_bytes = streamk_workspace_bytes;
}

inline constexpr const char* kTensorDoc =
    "Each tensor is a tuple (data_ptr, dtype_code, shape, strides, device) or None; strides in\n"
    "elements; dtype_code 0 float32, 1 float16, 2 bfloat16, 3 int32, 4 int64; device is the\n"
    "CUDA ordinal (-1: host memory, always rejected).\n";

}  // namespace quack_py
