#!/usr/bin/env bash
# Builds libquack.a here (no GPU needed: the device machine has the same CUDA 13.0 toolkit and
# gcc 13.3) and packs it into .prebuilt-lib/ (git-ignored) with the tree's library stamp
# (`stamp.sh lib`, and the A/B switch) and the CUTLASS headers. A device call with
# PREBUILT_LIB=1 and `carry` naming .prebuilt-lib links it (cmake -DQUACK_PREBUILT_LIBRARY)
# where the stamps match, and compiles only the tests, the benchmark and the Python extension:
# the library's GEMM TUs are most of a cold device build (~280 s of a call). .peers (43 MB)
# and .prebuilt-lib do not fit one call's 64 MiB together: carry .prebuilt-lib, .whl and .data
# in the cold call (no QuACK peer there) and .peers in a warm one (the build stays).
#   AB_INSTANCES=OFF scripts/device/prebuild_lib.sh [BUILD_DIR]   (default: build, the test
#   command's tree, whose library TUs it shares; ccache serves the GEMM TUs only where the
#   build directory's path relative to the tree is the one they were compiled in, so another
#   directory name recompiles every one: ~80 min on 2 cores. The library target alone)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
AB=${AB_INSTANCES:-OFF}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQUACK_PREBUILT_LIBRARY= \
  -DQUACK_GEMM_AB_INSTANCES="$AB" > /dev/null
ninja -C "$B" quack
mkdir -p .prebuilt-lib
xz -T0 -6 -c "$B/libquack.a" > .prebuilt-lib/libquack.a.xz.tmp
mv .prebuilt-lib/libquack.a.xz.tmp .prebuilt-lib/libquack.a.xz
tar -cJf .prebuilt-lib/cutlass-include.tar.xz -C .deps cutlass/include
echo "$(bash scripts/device/stamp.sh lib) ab=$AB" > .prebuilt-lib/stamp
ls -la .prebuilt-lib; cat .prebuilt-lib/stamp
