#!/usr/bin/env bash
# Builds the C++ test and benchmark binaries here (no GPU needed; the device machine has the
# same CUDA 13.0.88 toolkit, gcc 13.3 and /usr/local/cuda/lib) and packs them, with the tree's
# stamp, into .prebuilt/ (git-ignored; ~31 MB xz). A device call with PREBUILT=1 and
# `carry` naming .prebuilt unpacks them instead of building (common.sh's build: ~250 s saved)
# when its tree has the same stamp; the Python extension is not in it (pytest and the
# acceptance benches need a device build).
#   scripts/device/prebuild.sh [BUILD_DIR]   (default build: Release, tests and benches, no
#   Python, AB_INSTANCES=OFF unless set; a 2-core machine with a warm ccache: ~10-25 min)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQUACK_BUILD_TESTS=ON \
  -DQUACK_BUILD_BENCH=ON -DQUACK_BUILD_PYTHON=OFF \
  -DQUACK_GEMM_AB_INSTANCES="${AB_INSTANCES:-OFF}" > /dev/null
ninja -C "$B" tests/cpp/quack_gpu_tests tests/cpp/quack_host_tests bench/quack-bench
mkdir -p .prebuilt
tar -cf - -C "$B" tests/cpp/quack_gpu_tests tests/cpp/quack_host_tests bench/quack-bench \
  | xz -T0 -6 > .prebuilt/bin.tar.xz.tmp
mv .prebuilt/bin.tar.xz.tmp .prebuilt/bin.tar.xz
echo "$(scripts/device/stamp.sh) ab=${AB_INSTANCES:-OFF}" > .prebuilt/stamp
ls -la .prebuilt; cat .prebuilt/stamp
