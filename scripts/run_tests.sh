#!/usr/bin/env bash
# The test command: installs missing dependencies, builds the library, the C++ tests and the
# Python extension, runs the C++ host and GPU tests (GPU tests skip without a GPU) and the
# Python tests (skip without torch/CUDA), and prints one closing line:
#   tests: N passed, N failed, N skipped
# Build tree: build/ (QUACK_BUILD_DIR overrides). Exit code non-zero on any failure.
# GPU tests: where `nvidia-smi -L` lists a GPU, in QUACK_GTEST_SHARDS gtest shards at once
# (default 8), each under QUACK_GTEST_TIMEOUT seconds (default 300), the *Large* tests alone
# afterwards; without a GPU one process (every test skips).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_deps.sh || exit 1
BUILD=${QUACK_BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
t0=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQUACK_BUILD_TESTS=ON -DQUACK_BUILD_BENCH=ON \
  && cmake --build "$BUILD" -j "$JOBS" || { echo "run_tests: build FAILED"; echo "tests: 0 passed, 1 failed, 0 skipped"; exit 1; }
python3 scripts/compile_times.py "$BUILD" --top 12
# The Python package links the library just built (scripts/install_package.sh: build/py).
bash scripts/install_package.sh python3 py \
  || { echo "run_tests: pip install FAILED"; echo "tests: 0 passed, 1 failed, 0 skipped"; exit 1; }
echo "run_tests: build took $(( $(date +%s) - t0 )) s"

passed=0; failed=0; skipped=0
run_gtest() {
  local out rc
  out=$(timeout "${QUACK_GTEST_TIMEOUT:-300}" "$1" --gtest_brief=1 2>&1); rc=$?
  echo "$out" | grep -E '^\[  FAILED  \] [A-Za-z]' | sort -u | head -30  # every failed test
  echo "$out" | tail -5
  [ "$rc" = 124 ] && echo "[  FAILED  ] $1 timed out after ${QUACK_GTEST_TIMEOUT:-300} s"
  local p f s n
  p=$(echo "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  f=$(echo "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  s=$(echo "$out" | sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' | tail -1)
  n=$(echo "$out" | sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' | tail -1)
  p=${p:-0}; f=${f:-0}; s=${s:-0}
  # --gtest_brief prints no "N tests, listed below" line: the failures are the ran tests that
  # neither passed nor skipped.
  [ "$f" = 0 ] && [ -n "$n" ] && [ $((n - p - s)) -gt 0 ] && f=$((n - p - s))
  [ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))  # gtest counts skips apart
}
# The GPU binary in $2 gtest shards at once (one process takes ~10 min), then the *Large* tests
# alone (memory); each process under the timeout. A shard without gtest's closing summary (timed
# out, crashed) counts the tests it finished, plus one failure naming the test it was in (its
# last "[ RUN" line); a sticky CUDA error poisons only the rest of its shard.
run_gtest_sharded() {
  local bin=$1 nsh=$2 tmo=${QUACK_GTEST_TIMEOUT:-300} dir i f rc p fl s pids=()
  dir=$(mktemp -d)
  # RmsNormBwdConfigs (host-bound: float64 references over ~500 M elements) in shards of its
  # own beside the rest, so no shard of the rest waits behind it.
  for i in $(seq 0 $((nsh - 1))); do
    ( GTEST_TOTAL_SHARDS=$nsh GTEST_SHARD_INDEX=$i timeout "$tmo" "$bin" \
        --gtest_filter='-*Large*:*RmsNormBwdConfigs*' > "$dir/shard$i.log" 2>&1
      echo "rc=$?" >> "$dir/shard$i.log" ) &
    pids+=($!)
    ( GTEST_TOTAL_SHARDS=$nsh GTEST_SHARD_INDEX=$i timeout "$tmo" "$bin" \
        --gtest_filter='*RmsNormBwdConfigs*' > "$dir/cfg$i.log" 2>&1
      echo "rc=$?" >> "$dir/cfg$i.log" ) &
    pids+=($!)
  done
  wait "${pids[@]}"
  ( timeout "$tmo" "$bin" --gtest_filter='*Large*' > "$dir/large.log" 2>&1; echo "rc=$?" >> "$dir/large.log" )
  for i in $(seq 0 $((nsh - 1))) $(seq -f "cfg%g" 0 $((nsh - 1))) large; do
    case $i in large|cfg*) f=$dir/$i.log ;; *) f=$dir/shard$i.log ;; esac
    rc=$(sed -n 's/^rc=//p' "$f" | tail -1)
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$f" | tail -1)
    if [ -n "$p" ]; then
      fl=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$f" | tail -1)
      s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$f" | tail -1)
      fl=${fl:-0}; s=${s:-0}
      [ "$rc" != 0 ] && [ "$fl" = 0 ] && fl=1
    else
      p=$(grep -c '^\[       OK \]' "$f"); s=$(grep -c '^\[  SKIPPED \] [A-Za-z]' "$f")
      fl=$(( $(grep -c '^\[  FAILED  \] [A-Za-z]' "$f") + 1 ))
      echo "[  FAILED  ] $([ "$rc" = 124 ] && echo "timed out after $tmo s" || echo "exit $rc") in: $(grep '^\[ RUN' "$f" | tail -1 | cut -c14-)"
    fi
    case $i in large) echo -n "Large tests" ;; cfg*) echo -n "RmsNormBwdConfigs shard ${i#cfg}/$nsh" ;;
      *) echo -n "shard $i/$nsh" ;; esac
    echo ": $p passed, $fl failed, $s skipped"
    passed=$((passed + p)); failed=$((failed + fl)); skipped=$((skipped + s))
  done
  cat "$dir"/*.log | grep -E '^\[  FAILED  \] [A-Za-z]' | sed 's/ ([0-9]* ms)$//' | sort -u | head -20
  rm -rf "$dir"
}
echo "== C++ host tests"; run_gtest "$BUILD/tests/cpp/quack_host_tests"
# QUACK_GTEST_SHARDS set (> 1) shards without a GPU too.
NSH=${QUACK_GTEST_SHARDS:-$(nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && echo 8 || echo 1)}
if nvidia-smi -L 2>/dev/null | grep -q '^GPU ' || [ "$NSH" -gt 1 ]; then
  echo "== C++ GPU tests ($NSH shards, then Large)"; run_gtest_sharded "$BUILD/tests/cpp/quack_gpu_tests" "$NSH"
else
  echo "== C++ GPU tests";  run_gtest "$BUILD/tests/cpp/quack_gpu_tests"
fi

echo "== Python tests"
out=$(python3 -m pytest tests/python -q -p no:cacheprovider 2>&1); rc=$?
echo "$out" | tail -3
last=$(echo "$out" | tail -1)
p=$(echo "$last" | grep -oE "[0-9]+ passed" | grep -oE "[0-9]+"); p=${p:-0}
f=$(echo "$last" | grep -oE "[0-9]+ (failed|errors?)" | awk '{s+=$1} END {print s+0}')
s=$(echo "$last" | grep -oE "[0-9]+ skipped" | grep -oE "[0-9]+"); s=${s:-0}
# pytest exit 5 = nothing collected: not a failure here (every test may skip without a GPU).
[ "$rc" != 0 ] && [ "$rc" != 5 ] && [ "$f" = 0 ] && f=1
passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))

echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
