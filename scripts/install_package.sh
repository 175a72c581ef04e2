#!/usr/bin/env bash
# Installs the Python package (quack_cpp) into PYTHON, linking the library of the CMake tree
# build/ (QUACK_BUILD_DIR), which it first brings up to date (`ninja quack`: a no-op after
# scripts/run_tests.sh). The package's own CMake tree, build/<TREE>, then compiles only the
# binding (and quack_cpp._torch where PYTHON imports torch), so the library's TUs compile once
# for the test command, the demo and the torch CPU tests (DESIGN §4). A plain `pip install .`
# builds the library itself, in build-py/.
#   scripts/install_package.sh [PYTHON [TREE]]     defaults: python3, py
# One tree per interpreter (another interpreter reconfigures it): scripts/torch_cpu_tests.sh
# names its venv's py-torch. The settings travel as scikit-build-core's environment variables
# (SKBUILD_BUILD_DIR, SKBUILD_CMAKE_DEFINE), which any pip version passes on (pip's -C needs
# pip >= 23.1).
# Nothing is done where the installed package imports and was built by this script from these
# sources, this build tree and its A/B switch into this interpreter (a hash in
# build/<TREE>/.installed; QUACK_REINSTALL=1 installs anyway). Exit status: pip's, or the library build's.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-python3}
TREE=${2:-py}
BUILD=${QUACK_BUILD_DIR:-build}
stamp="$( { "$PY" -c 'import sys; print(sys.prefix)'
            echo "$BUILD $(sed -n 's/^QUACK_GEMM_AB_INSTANCES:BOOL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)"
            find src include python cmake CMakeLists.txt pyproject.toml -type f \
              ! -name '*.pyc' -print0 | sort -z | xargs -0 sha1sum; } | sha1sum | cut -d' ' -f1)"
if [ "${QUACK_REINSTALL:-0}" != 1 ] && [ "$(cat "$BUILD/$TREE/.installed" 2>/dev/null)" = "$stamp" ] &&
   "$PY" -c 'import quack_cpp' 2>/dev/null; then
  echo "install_package: quack_cpp is installed from these sources ($BUILD/$TREE)"
  exit 0
fi
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$BUILD" --target quack
b=$(cd "$BUILD" && pwd)
ab=$(sed -n 's/^QUACK_GEMM_AB_INSTANCES:BOOL=//p' "$b/CMakeCache.txt")
rm -f "$b/$TREE/.installed"
SKBUILD_BUILD_DIR="$b/$TREE" \
SKBUILD_CMAKE_DEFINE="QUACK_PREBUILT_LIBRARY=$b/libquack.a;QUACK_GEMM_AB_INSTANCES=${ab:-OFF}" \
  "$PY" -m pip install -q --no-build-isolation --no-deps .
echo "$stamp" > "$b/$TREE/.installed"
