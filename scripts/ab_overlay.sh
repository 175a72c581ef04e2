#!/usr/bin/env bash
# A/B of source overlays in one build tree (device side). Builds quack-bench (and the GPU tests
# when --tests is given), runs each benchmark line for the base tree, then for each overlay
# (.dev/ov/NAME/{src,tests} copied over the tree: only the dependent TUs rebuild, ~15 s), then the base
# again, and restores src/. Prints one line per (variant, benchmark): "N:TB/s ...".
#   scripts/ab_overlay.sh [--tests GTEST_FILTER] NAME... -- 'BENCH ARGS' ['BENCH ARGS'...]
# e.g. scripts/ab_overlay.sh --tests '*SimpleConfigs*' v8 -- \
#        'rmsnorm --dir fwd --dtype fp32 --shapes 16384x32768 --ms 30'
# The tests run once per variant, in their own process, under a 120 s timeout. Env: OUT (logs;
# default results/), AB_BUILD_DIR (default build/gpu).
set -uo pipefail
cd "$(dirname "$0")/.."
FILTER=""; VARS=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in --tests) FILTER="$2"; shift 2 ;; *) VARS+=("$1"); shift ;; esac
done
shift || true
BENCHES=("$@")
R="${OUT:-results}"; B="${AB_BUILD_DIR:-build/gpu}"; mkdir -p "$R"
[ -d .deps/cutlass/include ] && export QUACK_CUTLASS_INCLUDE="${QUACK_CUTLASS_INCLUDE:-$PWD/.deps/cutlass/include}"
t0=$(date +%s); el() { echo "[ab $(( $(date +%s) - t0 ))s] $*"; }
TARGETS="quack-bench"; [ -n "$FILTER" ] && TARGETS="quack-bench quack_gpu_tests"
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DQUACK_BUILD_PYTHON=OFF > "$R/ab_cmake.txt" 2>&1 \
  && ninja -C $B $TARGETS > "$R/ab_build.txt" 2>&1 || { tail -20 "$R/ab_build.txt"; exit 1; }
el "built base"
ORIG=$(mktemp -d); cp -r src tests "$ORIG/"
restore() {  # copy back every file an overlay replaces (new mtimes: dependents rebuild)
  local v
  for v in "${VARS[@]}"; do
    (cd .dev/ov/$v && find . -type f | cut -c3-) | while read -r f; do cp "$ORIG/$f" "$f"; done
  done
}
trap restore EXIT
run() {  # run LABEL
  for b in "${BENCHES[@]}"; do
    # shellcheck disable=SC2086
    $B/bench/quack-bench $b | python3 -c "
import json, sys
r = [json.loads(l) for l in sys.stdin if l.startswith('{')]
print('$1'.ljust(10), '${b//\'/}'[:48].ljust(48), ' '.join(x.get('op', '')[-12:] + f\":{x['N']}:{x['tbps']:.3f}\" + ('/' + x['config'] if 'config' in x else '') for x in r if 'tbps' in x))"
  done
  if [ -n "$FILTER" ]; then
    ninja -C $B quack_gpu_tests > "$R/ab_build_t_$1.txt" 2>&1
    timeout 120 $B/tests/cpp/quack_gpu_tests --gtest_filter="$FILTER" > "$R/ab_tests_$1.txt" 2>&1
    echo "$1 tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$R/ab_tests_$1.txt" | tr '\n' ' ')"
  fi
}
run base
for v in "${VARS[@]}"; do
  restore; cp -r .dev/ov/$v/. .
  ninja -C $B quack-bench > "$R/ab_build_$v.txt" 2>&1 || { el "build $v FAILED"; tail -5 "$R/ab_build_$v.txt"; continue; }
  run "$v"
done
restore; ninja -C $B quack-bench > /dev/null 2>&1; run base2
el done
