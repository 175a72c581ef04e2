#!/usr/bin/env bash
# The C++ examples (examples/*.cpp) compiled against a built libquack.a and run, on a GPU
# machine (CI builds them through the installed CMake package instead, with no GPU to run them).
#   scripts/run_examples.sh LIBQUACK_A [LOG_DIR]     (NVCC: the compiler, default nvcc)
# Prints "<example> rc=N" per example (0: its checks passed; 3: no CUDA device) and the tail of
# its output; each log in LOG_DIR/ex_<example>.log (default /tmp). Exit status: the number of
# examples that failed to build or run.
set -uo pipefail
cd "$(dirname "$0")/.."
lib=$1; logs=${2:-/tmp}; failed=0
for f in examples/*.cpp; do
  e=$(basename "$f" .cpp)
  "${NVCC:-nvcc}" -std=c++17 -O2 -I include "$f" "$lib" -o "/tmp/$e" > "$logs/ex_$e.log" 2>&1 \
    && "/tmp/$e" >> "$logs/ex_$e.log" 2>&1
  rc=$?
  echo "$e rc=$rc"; tail -8 "$logs/ex_$e.log"
  [ $rc = 0 ] || failed=$((failed + 1))
done
exit $failed
