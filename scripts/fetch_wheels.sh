#!/usr/bin/env bash
# Download into .whl/ (git-ignored) the Python wheels that the offline GPU
# machine lacks, for CPython 3.12 on manylinux x86_64. Idempotent: a wheel that
# is already there is not fetched again.
#
# The GPU machine already has: torch, triton, numpy, nanobind,
# scikit-build-core, pytest, matplotlib, tokenizers (and packaging, which they
# pull in). Install there with:
#   python3 -m pip install --no-index --find-links .whl liger-kernel
#
# Current list:
#   liger-kernel 0.8.5  pure Python (py3-none-any); benchmark peer.
#     Requires-Dist: torch>=2.1.2, triton>=2.3.1 (both present there); it also
#     imports `packaging` (undeclared), which the GPU machine has. All other
#     requirements are optional extras (cutile, cutedsl, lck, dev): not fetched.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/.whl"
mkdir -p "$DEST"

# NAME==VERSION, and the wheel file-name prefix that shows it is already here.
WHEELS=(
  "liger-kernel==0.8.5 liger_kernel-0.8.5-"
)

PIP_ARGS=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
          --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
          --platform manylinux2014_x86_64 -d "$DEST")

for entry in "${WHEELS[@]}"; do
  spec="${entry%% *}"
  prefix="${entry#* }"
  if compgen -G "$DEST/${prefix}*.whl" > /dev/null; then
    echo "fetch_wheels: $spec already in .whl/"
    continue
  fi
  echo "fetch_wheels: downloading $spec"
  python3 -m pip download -q "${PIP_ARGS[@]}" "$spec"
done

echo "fetch_wheels: .whl/ now holds:"
ls -l "$DEST"/*.whl | awk '{printf "  %s (%s bytes)\n", $NF, $5}' | sed "s#$DEST/##"
