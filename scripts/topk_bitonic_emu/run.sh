#!/bin/bash
# Host emulation of the top-k register (bitonic) kernel (src/topk/topk_bitonic_kernel.cuh), for
# checking it on a machine without a GPU, above all the fp32 path's truncated entries and its
# exactness fix-up: the kernel's own code (every fp32 instance: lists 8 / 16 / 32, E = 16..128,
# fit and generic; a few 16-bit ones beside), compiled by g++ against the CUDA mock of
# scripts/topk_radix_emu (cuda_mock.h, launch_mock.h: each CTA's threads as fibers switching at
# warp collectives; a group-masked shuffle meets the group's lanes only), checked against the
# float64 reference of the tests (tests/cpp/reference/topk_ref.h). PRMT and HSET2 by their
# definitions, the empty register barriers removed, MUFU math by libm. Says nothing about speed.
#
# Usage: scripts/topk_bitonic_emu/run.sh [level]   (0: every case; 1: fewer; 2: the fp32 T 16
# instance, N = 1024, over more rows and seeds)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
MOCK=$(cd "$HERE/../topk_radix_emu" && pwd)
W=$(cd "$HERE/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 "$MOCK/prepare_tree.py" "$W" "$T" "$HERE/fixup_counters.py"
g++ -std=c++17 -O1 -w -I "$MOCK" -I "$T/include" -I "$T/src" -I "$W/src" -I "$W/include" -I "$W/tests/cpp" \
  "$HERE/harness.cpp" "$W/src/topk/topk_plan.cpp" -o "$T/harness"
"$T/harness" "${1:-0}"
