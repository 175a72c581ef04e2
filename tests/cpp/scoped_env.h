// An environment variable set for a scope (host and GPU tests): the library's switches that are
// read per call (QUACK_PDL, QUACK_GEMM_TILE, ...).
#pragma once

#include <cstdlib>
#include <string>

namespace quack::test {

/// Sets an environment variable for its scope and restores the earlier value (or its absence).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace quack::test
