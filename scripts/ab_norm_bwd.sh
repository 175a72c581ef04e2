#!/usr/bin/env bash
# A/B of the RMSNorm backward across source trees in one device call (same GPU, same minutes).
#   scripts/ab_norm_bwd.sh TREE... (each a checkout, e.g. `git worktree add .dev/a <ref>` here,
#   then carry .dev with the call; "." is the working tree itself)
# Builds quack-bench in /tmp/ab_<n> for each tree (in parallel), then times the bwd twice per tree,
# alternating trees. Env: SHAPES (default 16384x4096,16384x65536,8192x262144), DTYPE (bf16).
set -uo pipefail
cd "$(dirname "$0")/.."
export QUACK_CUTLASS_INCLUDE="${QUACK_CUTLASS_INCLUDE:-$PWD/.deps/cutlass/include}"
SHAPES="${SHAPES:-16384x4096,16384x65536,8192x262144}"; DTYPE="${DTYPE:-bf16}"
i=0
for t in "$@"; do
  ( cmake -S "$t" -B /tmp/ab_$i -G Ninja -DCMAKE_BUILD_TYPE=Release -DQUACK_BUILD_PYTHON=OFF >/dev/null \
    && ninja -C /tmp/ab_$i quack-bench >/tmp/ab_$i.log 2>&1 || echo "build of $t FAILED" ) &
  i=$((i + 1))
done
wait
for round in 1 2; do
  i=0
  for t in "$@"; do
    /tmp/ab_$i/bench/quack-bench rmsnorm --dir bwd --dtype "$DTYPE" --shapes "$SHAPES" | python3 -c "
import json, sys
print('round $round', '$t'.ljust(24), ' '.join(f\"{l['N']}: {l['tbps']:.3f}\" for l in map(json.loads, sys.stdin)))"
    i=$((i + 1))
  done
done
