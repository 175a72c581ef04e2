#!/usr/bin/env bash
# Installs the build and test dependencies when missing (idempotent; quiet when present).
#   Debian packages: cmake, ninja-build, ccache, libgtest-dev (needs root + apt); cmake older
#     than 3.25 (CMakeLists.txt's minimum; Ubuntu 22.04 has 3.22): pip's cmake wheel instead
#   Python: nanobind, scikit-build-core, pytest, numpy; CUTLASS 4.2 headers (nvidia-cutlass)
# Offline (the GPU machine): wheels in .whl/ are used with --no-index; CUTLASS headers can be
# named with QUACK_CUTLASS_INCLUDE instead.
set -euo pipefail
cd "$(dirname "$0")/.."
need_apt=()
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v ccache >/dev/null || need_apt+=(ccache)
command -v cmake >/dev/null || need_apt+=(cmake)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
if [ ${#need_apt[@]} -gt 0 ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "setup_deps: apt-get install ${need_apt[*]}"
  # Offline (the GPU machine has no network): carry on with what is installed; only a missing
  # required tool is an error (ccache is optional: CMake uses it where present).
  { apt-get update -qq >/dev/null 2>&1 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null; } ||
    echo "setup_deps: apt-get failed (offline?); continuing with what is installed"
fi
# CMake: CMakeLists.txt needs >= 3.25 (cmake_minimum_required; pyproject's cmake.version), and
# Ubuntu 22.04's apt cmake is 3.22: an older or missing cmake falls back to the PyPI wheel
# (.whl/ first, then the index, as the Python packages below).
CMAKE_MIN=3.25
cmake_version() {  # "3.22.1", or empty without a cmake on PATH
  { cmake --version 2>/dev/null || true; } | sed -n '1s/^cmake version \([0-9][0-9.]*\).*/\1/p'
}
cmake_new_enough() {
  local v
  v=$(cmake_version)
  [ -n "$v" ] && python3 -c 'import sys
f = lambda s: tuple(int(x) for x in s.split(".")[:2] if x)
sys.exit(f(sys.argv[1]) < f(sys.argv[2]))' "$v" "$CMAKE_MIN"
}
if ! cmake_new_enough; then
  have=$(cmake_version)
  echo "setup_deps: cmake ${have:-not found}, CMakeLists.txt needs >= $CMAKE_MIN" \
       "(Ubuntu 22.04's apt cmake is 3.22): pip install 'cmake>=$CMAKE_MIN'"
  { ls .whl/*.whl >/dev/null 2>&1 &&
      python3 -m pip install -q --no-index --find-links .whl "cmake>=$CMAKE_MIN" 2>/dev/null; } ||
    python3 -m pip install -q "cmake>=$CMAKE_MIN" ||
    echo "setup_deps: pip install 'cmake>=$CMAKE_MIN' failed (offline?)"
  hash -r
  if ! cmake_new_enough; then
    have=$(cmake_version)
    bin=$(python3 -c 'import cmake; print(cmake.CMAKE_BIN_DIR)' 2>/dev/null || true)
    echo "setup_deps: cmake >= $CMAKE_MIN is required; the cmake on PATH is ${have:-missing}" \
         "${bin:+(the pip cmake is in $bin: put that first on PATH)}"
    exit 1
  fi
  echo "setup_deps: using cmake $(cmake_version) ($(command -v cmake))"
fi
for tool in cmake ninja; do
  command -v "$tool" >/dev/null || { echo "setup_deps: $tool is required and missing (install it, e.g. apt-get install ${tool/ninja/ninja-build})"; exit 1; }
done
# The Python packages go to $PYTHON (default python3; scripts/torch_cpu_tests.sh names its venv's,
# whose CMake looks for the CUTLASS headers through that interpreter: cmake/QuackCutlass.cmake).
PY=${PYTHON:-python3}
py_missing=()
$PY -c 'import nanobind' 2>/dev/null || py_missing+=(nanobind)
$PY -c 'import scikit_build_core' 2>/dev/null || py_missing+=(scikit-build-core)
$PY -c 'import pytest' 2>/dev/null || py_missing+=(pytest)
$PY -c 'import numpy' 2>/dev/null || py_missing+=(numpy)
if [ ${#py_missing[@]} -gt 0 ]; then
  echo "setup_deps: pip install ${py_missing[*]}"
  # The carried wheels first (offline GPU machine), then the package index (a machine where
  # .whl/ holds only the benchmark peers).
  { ls .whl/*.whl >/dev/null 2>&1 &&
      $PY -m pip install -q --no-index --find-links .whl "${py_missing[@]}" 2>/dev/null; } ||
    $PY -m pip install -q "${py_missing[@]}"
fi
if [ -z "${QUACK_CUTLASS_INCLUDE:-}" ] && [ ! -f .deps/cutlass/include/cute/tensor.hpp ] &&
   ! $PY -c 'import cutlass_library' 2>/dev/null; then
  echo "setup_deps: pip install --no-deps nvidia-cutlass==4.2.0.0 (CuTe headers)"
  $PY -m pip install -q --no-deps nvidia-cutlass==4.2.0.0 || echo "setup_deps: CUTLASS headers unavailable (GEMM needs them)"
fi
