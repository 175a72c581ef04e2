#!/usr/bin/env bash
# The Python tests on a machine without a GPU, against torch itself: a virtual environment
# .venv-torch/ (git-ignored) with torch (PyPI's wheel, the GPU machine's version; it imports
# without a GPU), the package built into it with the C++ eager fast paths (quack_cpp._torch, the
# only TU that includes torch headers), then tests/python twice: as is (the *_cpu.py files run,
# GPU tests skip) and with QUACK_TEST_DEVICE=cpu (the GPU test files against the CPU stand-in
# kernels of tests/python/cpu_stand_in.py: a check of the torch layer and of the tests, not of
# the kernels). CI has no torch; run this here after a change to python/ or its tests.
#   scripts/torch_cpu_tests.sh [pytest args]      e.g. -x tests/python/test_cross_entropy.py
# First run: ~3 GB of wheels (~1 min), the package's build (the library from ccache, minutes).
# Environment: TORCH_VERSION (default 2.11.0), VENV (default .venv-torch). Exit 3: torch could
# not be installed or imported (no registry, no disk): nothing was tested (.ci/run skips then).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-torch}
TORCH_VERSION=${TORCH_VERSION:-2.11.0}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  # The system's cmake and ninja build the package (the tree's build-py/ was configured with
  # them); the venv brings torch and the Python build tools.
  { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" numpy \
      nanobind scikit-build-core pytest; } \
    || { echo "torch_cpu_tests: torch $TORCH_VERSION could not be installed into $VENV"; exit 3; }
fi
"$VENV/bin/python" -c "import torch; print('torch', torch.__version__)" \
  || { echo "torch_cpu_tests: torch does not import in $VENV"; exit 3; }
bash scripts/setup_deps.sh
# setup_deps.sh puts the CUTLASS headers into the system Python (nvidia-cutlass), which the venv
# cannot see: name them for the package's CMake (unless set, or .deps/cutlass is there).
if [ -z "${QUACK_CUTLASS_INCLUDE:-}" ] && [ ! -f .deps/cutlass/include/cute/tensor.hpp ]; then
  QUACK_CUTLASS_INCLUDE=$(python3 -c "import cutlass_library, os
print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))" 2>/dev/null || true)
  [ -f "$QUACK_CUTLASS_INCLUDE/cute/tensor.hpp" ] \
    || { echo "torch_cpu_tests: no CUTLASS headers (scripts/setup_deps.sh installs them)"; exit 1; }
  export QUACK_CUTLASS_INCLUDE
fi
# The define as well: a build-py/ configured before keeps its cached (empty) value otherwise.
"$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps \
  ${QUACK_CUTLASS_INCLUDE:+-C cmake.define.QUACK_CUTLASS_INCLUDE="$QUACK_CUTLASS_INCLUDE"} .
"$VENV/bin/python" -c "import quack_cpp._torch" \
  || { echo "torch_cpu_tests: quack_cpp._torch did not build"; exit 1; }
args=("$@"); [ ${#args[@]} = 0 ] && args=(tests/python)
rc=0
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "${args[@]}" || rc=1
QUACK_TEST_DEVICE=cpu "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${args[@]}" || rc=1
exit $rc
