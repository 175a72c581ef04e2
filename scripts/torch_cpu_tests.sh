#!/usr/bin/env bash
# The Python tests on a machine without a GPU, against torch itself: a virtual environment
# .venv-torch/ (git-ignored) with torch (PyPI's wheel, the GPU machine's version; it imports
# without a GPU), the package built into it with the C++ eager fast paths (quack_cpp._torch, the
# only TU that includes torch headers), then tests/python twice: as is (the *_cpu.py files run,
# GPU tests skip) and with QUACK_TEST_DEVICE=cpu (the GPU test files against the CPU stand-in
# kernels of tests/python/cpu_stand_in.py: a check of the torch layer and of the tests, not of
# the kernels). .ci/run runs it (CI's machine has no torch of its own: PyPI's goes into the venv);
# run it here after a change to python/ or its tests.
#   scripts/torch_cpu_tests.sh [pytest args]      e.g. -x tests/python/test_cross_entropy.py
# First run: ~3 GB of wheels (~1 min), the package's build (the binding and quack_cpp._torch,
# ~2 min; the library in build/ first where it is missing or stale).
# Environment: TORCH_VERSION (default 2.11.0), VENV (default .venv-torch). Exit 3: torch could
# not be installed or imported (no registry, no disk): nothing was tested (.ci/run skips then).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-torch}
TORCH_VERSION=${TORCH_VERSION:-2.11.0}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  # The system's cmake and ninja build the package; the venv brings torch, and setup_deps.sh
  # below the Python build tools.
  { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q "torch==$TORCH_VERSION"; } \
    || { echo "torch_cpu_tests: torch $TORCH_VERSION could not be installed into $VENV"; exit 3; }
fi
"$VENV/bin/python" -c "import torch; print('torch', torch.__version__)" \
  || { echo "torch_cpu_tests: torch does not import in $VENV"; exit 3; }
# The package links build/'s library (scripts/install_package.sh: its tree build/py-torch; where
# it installs, the build tools and the CUTLASS headers go into the venv first: its CMake finds the
# headers through it).
bash scripts/install_package.sh "$VENV/bin/python" py-torch
"$VENV/bin/python" -c "import quack_cpp._torch" \
  || { echo "torch_cpu_tests: quack_cpp._torch did not build"; exit 1; }
# Without arguments the second pass takes the modules with STAND_IN = True only (the others,
# the *_cpu.py files among them, run the same in both passes).
args=("$@"); args2=("$@")
if [ $# = 0 ]; then
  args=(tests/python)
  mapfile -t args2 < <(grep -l '^STAND_IN = True' tests/python/test_*.py)
  [ ${#args2[@]} -gt 0 ] || { echo "torch_cpu_tests: no module sets STAND_IN = True"; exit 1; }
fi
rc=0
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "${args[@]}" || rc=1
QUACK_TEST_DEVICE=cpu "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${args2[@]}" || rc=1
exit $rc
