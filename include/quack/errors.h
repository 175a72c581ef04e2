// QuACK-C++ error types.
//
// Host-visible bad input throws before any launch. Messages name the function, the argument,
// what was expected and what came, e.g.
//   "rmsnorm_fwd: weight has shape (4095,) float32, expected (4096,)".
// The types derive from the standard ones so bindings map them without glue
// (nanobind: std::invalid_argument -> ValueError, std::runtime_error -> RuntimeError).
#pragma once

#include <stdexcept>
#include <string>

namespace quack {

/// A bad argument: shape, dtype, stride, alignment, device (another tensor's, or an index at or
/// past the count of devices the process sees) or an unsupported combination.
class InvalidArgument : public std::invalid_argument {
 public:
  explicit InvalidArgument(const std::string& what) : std::invalid_argument(what) {}
};

/// A CUDA runtime error (launch failure, bad stream, out of memory). Keeps CUDA's text.
class CudaError : public std::runtime_error {
 public:
  explicit CudaError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace quack
