#!/usr/bin/env bash
# Builds libquack.a here (no GPU needed: the device machine has the same CUDA 13.0 toolkit and
# gcc 13.3) and packs it into .prebuilt-lib/ (git-ignored) with the tree's library stamp
# (`stamp.sh lib`, and the A/B switch) and the CUTLASS headers. A device call with
# PREBUILT_LIB=1 and `carry` naming .prebuilt-lib links it (cmake -DQUACK_PREBUILT_LIBRARY)
# where the stamps match, and compiles only the tests, the benchmark and the Python extension:
# the library's GEMM TUs are most of a cold device build (~280 s of a call). The 64 MiB a call
# carries counts the tree's tracked files (~5 MB) too: .prebuilt-lib (~19 MB: the library
# without debug sections, xz -9e) fits beside .peers/quack-0.2.0-site.tar.xz alone (42.4 MB
# when packed with a 256 MiB dictionary: `tar -cf - -C <unpacked> . | xz
# --lzma2=preset=9e,dict=256MiB`; 42.8 MB as ../shared/peers gives it), not beside .whl or
# .data as well: carry [".prebuilt-lib", ".peers/quack-0.2.0-site.tar.xz"] for a cold call with
# QuACK (run AU4), [".prebuilt-lib", ".whl", ".data"] for one with Liger and the demo.
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
strip --strip-debug -o .prebuilt-lib/libquack.a.tmp "$B/libquack.a"
xz -T0 -9e -c .prebuilt-lib/libquack.a.tmp > .prebuilt-lib/libquack.a.xz.tmp
rm .prebuilt-lib/libquack.a.tmp
mv .prebuilt-lib/libquack.a.xz.tmp .prebuilt-lib/libquack.a.xz
tar -cJf .prebuilt-lib/cutlass-include.tar.xz -C .deps cutlass/include
echo "$(bash scripts/device/stamp.sh lib) ab=$AB" > .prebuilt-lib/stamp
ls -la .prebuilt-lib; cat .prebuilt-lib/stamp
