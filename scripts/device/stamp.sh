#!/usr/bin/env bash
# The C++ build's stamp: one sha1 over every file a C++ build of the library, its tests and its
# benchmarks reads (CMake files, sources, headers, instance lists), so prebuilt binaries
# (scripts/device/prebuild.sh) are used only on the tree they were built from. `stamp.sh lib`:
# over what libquack.a alone reads (the top CMakeLists.txt, cmake/, src/, include/), the stamp
# of a prebuilt library (scripts/device/prebuild_lib.sh).
cd "$(dirname "$0")/../.."
if [ "${1:-}" = lib ]; then dirs="CMakeLists.txt cmake src include"
else dirs="CMakeLists.txt cmake src include tests/cpp bench examples"; fi
find $dirs -type f \
  \( -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' -o -name '*.h' -o -name '*.hpp' \
     -o -name '*.txt' -o -name '*.cmake' -o -name '*.in' \) -print0 \
  | LC_ALL=C sort -z | xargs -0 sha1sum | sha1sum | cut -c1-40
