#!/usr/bin/env bash
# The C++ examples (examples/*.cpp) compiled against this call's library and run, ~40 s: the
# machine's build where there is one, else .prebuilt-lib's archive (no build). Any card; put it
# in front of a call's other commands. Prints "<example> rc=N" (0: its checks passed).
cd "$(dirname "$0")/../.."; source scripts/device/common.sh
if [ ! -f build/d/libquack.a ] && [ ! -f build/lib/libquack.a ]; then
  mkdir -p build/lib && xz -dc .prebuilt-lib/libquack.a.xz > build/lib/libquack.a
fi
nvidia-smi --query-gpu=name --format=csv,noheader
run_examples
