#!/bin/bash
# Host emulation of the top-k radix-select kernel (src/topk/topk_radix_kernel.cuh), for checking
# it on a machine without a GPU: the kernel's own code, compiled by g++ with the CUDA device API
# mocked (cuda_mock.h: each CTA's threads as ucontext fibers that switch only at barriers and
# warp collectives, in a random order between them; shared memory poisoned per CTA; a barrier
# mismatch aborts as a deadlock), against the float64 reference of the tests
# (tests/cpp/reference/topk_ref.h). The device-only inline asm is replaced: PRMT by its
# definition, the empty register barriers (topk_opaque) removed, MUFU math by libm. Says
# nothing about speed, and its arithmetic of the softmax is libm's, not the MUFU's.
#
# Usage: scripts/topk_radix_emu/run.sh [level]   (0: every case, ~1 min on 2 cores; 2: a few)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(cd "$HERE/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 "$HERE/prepare_tree.py" "$W" "$T"
g++ -std=c++17 -O1 -w -I "$HERE" -I "$T/include" -I "$T/src" -I "$W/src" -I "$W/include" -I "$W/tests/cpp" \
  "$HERE/harness.cpp" "$W/src/topk/topk_plan.cpp" -o "$T/harness"
"$T/harness" "${1:-0}"
