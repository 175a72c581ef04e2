#!/usr/bin/env bash
# Installs the Python package (quack_cpp) into PYTHON, linking the library of the CMake tree
# build/ (QUACK_BUILD_DIR), which it first brings up to date (`cmake --build --target quack`: a
# no-op after scripts/run_tests.sh; a build/ configured with QUACK_PREBUILT_LIBRARY links that
# archive instead). The package's own CMake tree, build/<TREE>, then compiles only the binding
# (and quack_cpp._torch where PYTHON imports torch), so the library's TUs compile once for the
# test command, the demo and the torch CPU tests (DESIGN §4). A plain `pip install .` builds the
# library itself, in build-py/.
#   scripts/install_package.sh [PYTHON [TREE]]     defaults: python3, py
# One tree per interpreter (another interpreter reconfigures it): scripts/torch_cpu_tests.sh
# names its venv's py-torch. The settings travel as scikit-build-core's environment variables
# (SKBUILD_BUILD_DIR, SKBUILD_CMAKE_DEFINE), which any pip version passes on (pip's -C needs
# pip >= 23.1).
# Nothing is installed where the package PYTHON imports carries this install's stamp (a hash of
# the interpreter, its torch version, the package's sources, the linked archive and the A/B
# switch, kept beside the installed package as .install_stamp with its _C module's sha1) and,
# where torch imports, quack_cpp._torch imports too; QUACK_REINSTALL=1 installs anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-python3}
TREE=${2:-py}
BUILD=${QUACK_BUILD_DIR:-build}
# A build/ configured here builds the library only (no GoogleTest needed: the demo's machine may
# lack it); scripts/run_tests.sh turns the tests and the bench on in the same tree.
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  PYTHON="$PY" bash scripts/setup_deps.sh
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQUACK_BUILD_TESTS=OFF \
    -DQUACK_BUILD_BENCH=OFF > /dev/null
fi
b=$(cd "$BUILD" && pwd)
cache() { sed -n "s/^$1:[A-Z]*=//p" "$b/CMakeCache.txt"; }
lib=$(cache QUACK_PREBUILT_LIBRARY)
if [ -z "$lib" ]; then
  cmake --build "$b" --target quack
  lib=$b/libquack.a
fi
ab=$(cache QUACK_GEMM_AB_INSTANCES)
stamp="$( { "$PY" -c 'import sys; print(sys.prefix)'
            "$PY" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null || echo "no torch"
            echo "ab=${ab:-OFF}"; sha1sum < "$lib"
            find src include python cmake CMakeLists.txt pyproject.toml -type f \
              ! -name '*.pyc' -print0 | sort -z | xargs -0 sha1sum; } | sha1sum | cut -d' ' -f1)"
# The stamp file beside the installed package holds the stamp and the sha1 of the _C module it
# was written for, so that another install into this interpreter (a plain `pip install .`,
# another tree) invalidates it. With an argument: writes it; without: prints the installed
# package's stamp, empty where none holds (or where torch imports and quack_cpp._torch does not).
stamp_py='import hashlib, os, sys, quack_cpp, quack_cpp._C as C
f = os.path.join(os.path.dirname(quack_cpp.__file__), ".install_stamp")
so = hashlib.sha1(open(C.__file__, "rb").read()).hexdigest()
if len(sys.argv) > 1:
    open(f, "w").write(f"{sys.argv[1]} {so}\n")
    sys.exit(0)
try:
    import torch  # noqa: F401
except ImportError:
    pass
else:
    import quack_cpp._torch  # noqa: F401
stamp, written_for = open(f).read().split()
print(stamp if written_for == so else "")'
if [ "${QUACK_REINSTALL:-0}" != 1 ] && [ "$("$PY" -c "$stamp_py" 2>/dev/null || true)" = "$stamp" ]; then
  echo "install_package: quack_cpp is installed from these sources and this library"
  exit 0
fi
PYTHON="$PY" bash scripts/setup_deps.sh
SKBUILD_BUILD_DIR="$b/$TREE" \
SKBUILD_CMAKE_DEFINE="QUACK_PREBUILT_LIBRARY=$lib;QUACK_GEMM_AB_INSTANCES=${ab:-OFF}" \
  "$PY" -m pip install -q --no-build-isolation --no-deps .
"$PY" -c "$stamp_py" "$stamp"
