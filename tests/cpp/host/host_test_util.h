// Helpers shared by the tier-1 host tests (no GPU): fake device pointers, the hidden CUDA
// device, and the checks that bad arguments throw quack::InvalidArgument naming the function and
// the argument while valid ones get past validation.
//
// Pointers are fake, 16-byte aligned and never dereferenced: validation throws first. So that a
// validation regression can never launch a kernel on them when the binary runs on a GPU machine,
// CUDA is hidden from the process (CUDA_VISIBLE_DEVICES="" set during static initialisation,
// before the CUDA runtime starts): a call that gets past validation meets "no device" and throws
// CudaError. Baseline tests use that to show the unmodified arguments are valid, so each negative
// test breaks exactly one thing.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "quack/errors.h"
#include "quack/tensor.h"

namespace quack::test {

// True once CUDA_VISIBLE_DEVICES="" is set; tests read it so that the initialiser is kept.
inline const bool kCudaHidden = [] {
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  return true;
}();

// The k-th fake device pointer: k · unit bytes (unit 64 GiB, so the plan tests' largest
// tensors never overlap one another: the aliasing checks refuse overlapping outputs).
inline void* fake(uintptr_t k, uintptr_t unit = uintptr_t{1} << 36) {
  return reinterpret_cast<void*>(unit * k);
}

// Contiguous (rows, cols) matrices: row-major (row stride cols) or column-major (col stride rows).
inline TensorRef row_major(void* p, DType t, int64_t r, int64_t c) {
  return TensorRef::matrix(p, t, r, c);
}
inline TensorRef col_major(void* p, DType t, int64_t r, int64_t c) {
  return TensorRef::matrix(p, t, r, c, 0, 1, r);
}

// Runs f; expects quack::InvalidArgument, catchable as std::invalid_argument, whose message
// starts with "<fn>: " (fn: one name, or several separated by '|', any of which may start it)
// and contains every string of `parts`.
inline void expect_invalid(const std::function<void()>& f, const std::string& fn,
                           const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(dynamic_cast<const InvalidArgument*>(&e), nullptr)
        << "a std::invalid_argument that is not quack::InvalidArgument: " << e.what();
    const std::string msg = e.what();
    bool prefix = false;
    for (size_t b = 0, end; b <= fn.size(); b = end + 1) {
      end = fn.find('|', b);
      if (end == std::string::npos) end = fn.size();
      prefix = prefix || msg.rfind(fn.substr(b, end - b) + ": ", 0) == 0;
    }
    EXPECT_TRUE(prefix) << "message does not start with '" << fn << ": ': " << msg;
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message lacks '" << p << "': " << msg;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InvalidArgument, got another exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected InvalidArgument, nothing was thrown";
}

// Valid arguments get past validation and only then need CUDA (hidden here): f must throw a
// CudaError saying "no CUDA driver/GPU". Should a device still be visible (CUDA_VISIBLE_DEVICES
// ignored), the call is not made, since the fake pointers would reach a kernel: the test is
// skipped.
inline void expect_reaches_cuda(const std::function<void()>& f, const char* what) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0)
    GTEST_SKIP() << "a CUDA device is visible despite CUDA_VISIBLE_DEVICES=\"\"; " << what
                 << " not called";
  try {
    f();
    ADD_FAILURE() << what << ": returned without CUDA (expected a CudaError: no device)";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA driver/GPU"), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": valid arguments rejected: " << e.what();
  }
}

// can_implement(g) (found by argument-dependent lookup: gemm.h, gemm_act.h) throws
// InvalidArgument whose message starts with "<fn>: " and contains `part`.
template <class Args>
void expect_can_implement_error(const Args& g, const char* fn, const std::string& part) {
  try {
    can_implement(g);
    ADD_FAILURE() << "can_implement: no exception, expected one containing: " << part;
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(std::string(fn) + ": ", 0), 0u) << what;
    EXPECT_NE(what.find(part), std::string::npos) << "message: " << what << "\nexpected part: " << part;
  }
}

}  // namespace quack::test
