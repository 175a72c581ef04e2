#!/usr/bin/env bash
# Nsight Compute on the GEMM shapes where we trail cuBLAS (device only; clocks left alone):
# the first launch of ours and of cuBLAS per shape (quack-bench's agreement check), with the
# kernel names (cuBLAS's name carries its tile and cluster), duration, SOL throughputs and
# warp stall reasons.   scripts/ncu_gemm.sh [shapes, default the issue-3 laggards]
set -uo pipefail
cd "$(dirname "$0")/.."
SHAPES="${1:-2048x2048x2048,128x8192x8192,8192x8192x128,4096x4096x4096}"
B=build/gpu/bench/quack-bench
for s in ${SHAPES//,/ }; do
  echo "=== $s"
  timeout 120 ncu --clock-control none -k 'regex:gemm|nvjet|xmma' -c 2 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section MemoryWorkloadAnalysis "$B" gemm --shapes "$s" --ms 1 2>&1 \
    | grep -vE '^==PROF==|^\{' | grep -E 'gemm|nvjet|xmma|Duration|Throughput|Registers|Shared Memory Config|Grid Size|Block Size|Cluster|Stall|Warp Cycles|Achieved Occupancy|Mem Busy|Max Bandwidth|L2 Hit|Waves' | cut -c1-160
done
