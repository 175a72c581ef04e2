#!/usr/bin/env bash
# GPU check: on a Hopper machine (offline is fine), build everything, run every GPU test (C++
# and Python), run the benchmarks and print a short table last.
#
#   scripts/gpu_check.sh [--quick|--full] [--demo] [--no-bench] [--no-tests] [--pip]
#
# Env: QUACK_GTEST_FILTER (C++ tests to run, default all), QUACK_GTEST_TIMEOUT (s per shard, default
# 300), QUACK_GTEST_SHARDS (GPU test processes at once, default 8),
# QUACK_PY_JOBS (Python test files at a time, default 3), QUACK_PY_BENCH=0 (no Python bench).
# --quick (default): one dtype (bf16), a few shapes. --full: every benchmark shape and dtype
# (acceptance). --demo also runs the LM demo (demo/train_lm.py). Results (logs, JSON, plots)
# go to $OUT when set (the device tool's output folder), else results/.
# Order: C++ build, C++ tests, C++ benchmarks (RMSNorm, GEMM beside cuBLAS), then the Python
# extension, Python tests, the Python side-by-side bench (QUACK_PY_BENCH=0 skips it) and the demo.
# Offline dependencies: .whl/ (wheels, e.g. liger-kernel), .data/ (demo corpus),
# QUACK_CUTLASS_INCLUDE or .deps/cutlass/include (GEMM headers, when needed).
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=quick; DEMO=0; BENCH=1; TESTS=1; PIP=0
for a in "$@"; do
  case "$a" in
    --quick) MODE=quick ;; --full) MODE=full ;; --demo) DEMO=1 ;;
    --no-bench) BENCH=0 ;; --no-tests) TESTS=0 ;; --pip) PIP=1 ;;
    *) echo "gpu_check: unknown option $a" >&2; exit 2 ;;
  esac
done
RES="${OUT:-results}"; RAW="$RES/raw"; mkdir -p "$RES" "$RAW"  # raw/ is packed into raw.tgz at the end (the device returns ≤ 8 files)
LOG="$RES/gpu_check.log"; : > "$LOG"
JOBS=$(nproc)
export PYTHONUNBUFFERED=1
say() { echo "[gpu_check $(date +%T)] $*" | tee -a "$LOG"; }
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null \
  || { echo "gpu_check: needs a CUDA GPU and torch"; exit 2; }
# .peers/ (git-ignored; ../shared/peers/README.md): the CUTLASS headers packed small, and QuACK
# 0.2.0 with its CuTe-DSL, the benchmarks' peer.
if [ ! -d .deps/cutlass/include ] && [ -f .peers/cutlass-include.tar.xz ]; then
  mkdir -p .deps && tar -xJf .peers/cutlass-include.tar.xz -C .deps
fi
[ -d .deps/cutlass/include ] && export QUACK_CUTLASS_INCLUDE="${QUACK_CUTLASS_INCLUDE:-$PWD/.deps/cutlass/include}"
if [ -f .peers/quack-0.2.0-site.tar.xz ]; then
  say "unpacking QuACK 0.2.0 (peer)"
  mkdir -p /tmp/quack_peer && tar -xJf .peers/quack-0.2.0-site.tar.xz -C /tmp/quack_peer \
    && export PYTHONPATH=/tmp/quack_peer:/tmp/quack_peer/nvidia_cutlass_dsl/python_packages${PYTHONPATH:+:$PYTHONPATH}
fi

if ls .whl/*.whl >/dev/null 2>&1; then
  say "installing carried wheels"
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/quack_site .whl/*.whl >>"$LOG" 2>&1
  export PYTHONPATH=/tmp/quack_site${PYTHONPATH:+:$PYTHONPATH}
fi

say "build (C++ library, tests, bench; $JOBS jobs)"
t0=$(date +%s)
# The extension is built in the same tree (one compile of every kernel, not two) unless --pip
# asks for the user's path (pip install ., a second CMake build).
PYEXT=OFF; [ "$PIP" = 0 ] && python3 -m nanobind --cmake_dir >/dev/null 2>&1 && PYEXT=ON
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DQUACK_BUILD_PYTHON=$PYEXT >>"$LOG" 2>&1 \
  && ninja -C build/gpu -j "$JOBS" >>"$LOG" 2>&1 || { tail -30 "$LOG"; echo "gpu_check: build FAILED"; exit 1; }
BUILD_S=$(( $(date +%s) - t0 ))
# The Python extension is built after the C++ tests and benchmarks, so a short device slot
# still returns the C++ results.
PY_OK=0
build_python() {
  local t1; t1=$(date +%s)
  if [ "$PYEXT" = ON ]; then
    # Stage the package: python/quack_cpp sources + the extensions from build/gpu (_torch, the
    # C++ fast paths, where the build found torch).
    say "python extension (from build/gpu, staged in build/gpu/pystage)"
    rm -rf build/gpu/pystage && mkdir -p build/gpu/pystage/quack_cpp \
      && cp python/quack_cpp/*.py build/gpu/pystage/quack_cpp/ \
      && cp build/gpu/python/_C*.so build/gpu/pystage/quack_cpp/ && PY_OK=1 \
      && export PYTHONPATH=$PWD/build/gpu/pystage${PYTHONPATH:+:$PYTHONPATH}
    cp build/gpu/python/_torch*.so build/gpu/pystage/quack_cpp/ 2>/dev/null \
      || say "quack_cpp._torch not built (torch not found by CMake): Python fast paths only"
  else
    say "python extension (pip install --no-build-isolation --no-deps .)"
    if python3 -m pip install -q --no-build-isolation --no-deps . >>"$LOG" 2>&1; then PY_OK=1
    else tail -30 "$LOG"; echo "gpu_check: pip install FAILED"; fi
  fi
  PY_BUILD_S=$(( $(date +%s) - t1 ))
}
SPILL_RC=0
[ "${QUACK_RESOURCE_REPORT:-0}" = 1 ] && { python3 scripts/resource_report.py build/gpu > "$RAW/resource_report.txt" 2>&1; SPILL_RC=$?; }
# SASS rules (scripts/check_sass.py, as CI reads them, with the row kernels' 16-byte loads): the
# stack frames within the known spills, HGMMA in every GEMM kernel.
python3 scripts/check_sass.py build/gpu --rows 2>&1 | tail -20 > "$RAW/sass_summary.txt"

declare -A PASS FAIL
count_gtest() {  # family binary: under a timeout (a kernel that hangs fails the family, not the run)
  local out; out=$(timeout "${QUACK_GTEST_TIMEOUT:-300}" "$2" --gtest_brief=1 --gtest_filter="${QUACK_GTEST_FILTER:-*}" 2>&1)
  [ $? = 124 ] && out="$out
[  FAILED  ] 1 test, listed below: timed out after ${QUACK_GTEST_TIMEOUT:-300} s"
  echo "$out" >> "$LOG"
  PASS[$1]=$(echo "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  FAIL[$1]=$(echo "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\?, listed below.*/\1/p' | tail -1)
  echo "$out" | grep -E "^\[  FAILED  \]" | head -20
}
if [ "$TESTS" = 1 ]; then
  say "C++ host tests";  count_gtest cpp_host build/gpu/tests/cpp/quack_host_tests
  # The C++ examples against this build's library (scripts/run_examples.sh; CI builds them
  # through the installed package but has no GPU), with the CUDA compiler CMake found.
  say "C++ examples"
  NVCC=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' build/gpu/CMakeCache.txt); [ -x "$NVCC" ] || NVCC=nvcc
  EX_OUT=$(NVCC=$NVCC bash scripts/run_examples.sh build/gpu/libquack.a "$RAW")
  echo "$EX_OUT" >> "$LOG"
  PASS[examples]=$(echo "$EX_OUT" | grep -c ' rc=0$'); FAIL[examples]=$(echo "$EX_OUT" | grep -cE ' rc=[1-9][0-9]*$')
  echo "$EX_OUT" | grep -E ' rc=[1-9][0-9]*$' | sed 's/^/example FAILED: /'
  # The GPU tests in QUACK_GTEST_SHARDS processes at once (gtest sharding, default 8: the
  # whole binary takes ~10 min in one process), Large tests alone afterwards (memory). A
  # sticky CUDA error (an illegal instruction, a fault) poisons only the rest of its shard; a
  # shard past its timeout names the test it was in (the last "[ RUN" line of its log).
  G=build/gpu/tests/cpp/quack_gpu_tests
  NSH=${QUACK_GTEST_SHARDS:-8}; F=${QUACK_GTEST_FILTER:-*}
  say "C++ GPU tests ($F, $NSH shards, then Large)"
  # RmsNormBwdConfigs (host-bound: float64 references over ~500 M elements) runs in shards of
  # its own beside the rest, so no shard of the rest waits behind it.
  for i in $(seq 0 $((NSH - 1))); do
    ( GTEST_TOTAL_SHARDS=$NSH GTEST_SHARD_INDEX=$i timeout "${QUACK_GTEST_TIMEOUT:-300}" $G \
        --gtest_filter="$F:-*Large*:*RmsNormBwdConfigs*" > "$RAW/gtest_shard$i.log" 2>&1
      echo "rc=$?" >> "$RAW/gtest_shard$i.log" ) &
    case "$F" in *RmsNorm*|\*) ( GTEST_TOTAL_SHARDS=$NSH GTEST_SHARD_INDEX=$i \
        timeout "${QUACK_GTEST_TIMEOUT:-300}" $G --gtest_filter="*RmsNormBwdConfigs*" \
        > "$RAW/gtest_cfgshard$i.log" 2>&1; echo "rc=$?" >> "$RAW/gtest_cfgshard$i.log" ) & ;; esac
  done
  wait
  ( timeout "${QUACK_GTEST_TIMEOUT:-300}" $G --gtest_filter="*Large*" > "$RAW/gtest_large.log" 2>&1
    echo "rc=$?" >> "$RAW/gtest_large.log" )
  for f in "$RAW"/gtest_shard*.log "$RAW"/gtest_large.log; do
    grep -q "^rc=124" "$f" && echo "[  FAILED  ] timed out in: $(grep '^\[ RUN' "$f" | tail -1 | cut -c14-)" >> "$f"
  done
  PASS[cpp_gpu]=$(cat "$RAW"/gtest_*.log | grep -c '^\[       OK \]')
  FAIL[cpp_gpu]=$(cat "$RAW"/gtest_*.log | grep -E '^\[  FAILED  \] ([A-Za-z]|timed)' | sort -u | wc -l)
  cat "$RAW"/gtest_*.log | grep -E '^\[  FAILED  \] ([A-Za-z]|timed)' | sort -u | head -20 | tee -a "$LOG"
fi

if [ "$BENCH" = 1 ]; then
  say "C++ bench (quack-bench)"
  B=build/gpu/bench/quack-bench
  if [ "$MODE" = quick ]; then
    { $B copy; $B rmsnorm --dtype bf16 --shapes 16384x4096,16384x32768,8192x262144; } \
      > "$RAW/quack_bench.jsonl" 2>>"$LOG"
  else  # the issue's benchmark shapes (bench_rmsnorm.py's SHAPES_FULL)
    { $B copy
      $B rmsnorm --dtype bf16 --shapes 16384x1024,16384x4096,16384x8192,16384x32768,16384x65536,16384x131072,8192x262144
      $B rmsnorm --dtype fp32 --shapes 16384x1024,16384x8192,16384x32768,16384x65536,16384x131072
    } > "$RAW/quack_bench.jsonl" 2>>"$LOG"
  fi
  say "GEMM bench beside cuBLAS (quack-bench gemm, A B A B)"
  $B gemm --ms "$([ "$MODE" = quick ] && echo 100 || echo 200)" > "$RAW/quack_bench_gemm.jsonl" 2>>"$LOG" || echo "gemm bench FAILED (see log)"
fi
{ [ "$TESTS" = 1 ] || [ "$BENCH" = 1 ] || [ "$DEMO" = 1 ]; } && build_python
if [ "$TESTS" = 1 ] && [ "$PY_OK" = 1 ]; then
  # One process per file (a crash in one hides no other), QUACK_PY_JOBS files at a time (default
  # 3: the files are small GPU jobs and torch.compile is CPU-bound; the device has 16 cores).
  say "Python tests (one process per file, ${QUACK_PY_JOBS:-3} at a time)"
  PASS[python]=0; FAIL[python]=0; SKIP_PY=0
  PYLOG=$(mktemp -d)
  ls tests/python/test_*.py | xargs -P "${QUACK_PY_JOBS:-3}" -I{} sh -c \
    'f={}; python3 -m pytest "$f" -q -p no:cacheprovider > '"$PYLOG"'/$(basename "$f").log 2>&1; echo $? > '"$PYLOG"'/$(basename "$f").rc'
  for f in tests/python/test_*.py; do
    b=$(basename "$f"); pyout=$(cat "$PYLOG/$b.log"); prc=$(cat "$PYLOG/$b.rc")
    echo "$pyout" >> "$LOG"; echo "$pyout" | grep -E "^(FAILED|ERROR)|Fatal Python error" | head -10
    summary=$(echo "$pyout" | tail -1)
    p=$(echo "$summary" | grep -oE "[0-9]+ passed" | grep -oE "[0-9]+"); p=${p:-0}
    fl=$(echo "$summary" | grep -oE "[0-9]+ (failed|errors?)" | awk '{s+=$1} END {print s+0}')
    sk=$(echo "$summary" | grep -oE "[0-9]+ skipped" | grep -oE "[0-9]+"); sk=${sk:-0}
    if [ "$prc" != 0 ] && [ "$prc" != 5 ] && [ "$fl" = 0 ]; then fl=1; echo "$f: exit $prc"; fi
    PASS[python]=$((PASS[python] + p)); FAIL[python]=$((FAIL[python] + fl)); SKIP_PY=$((SKIP_PY + sk))
  done
  rm -rf "$PYLOG"
fi
if [ "$BENCH" = 1 ] && [ "$PY_OK" = 1 ] && [ "${QUACK_PY_BENCH:-1}" = 1 ]; then
  # The acceptance method (DESIGN §8): do_bench on the public calls, every peer in one process.
  say "row ops beside their peers (bench_rows.py, $MODE)"
  python3 bench/bench_rows.py $([ "$MODE" = quick ] && echo --quick) --out "$RAW/bench_rows.jsonl" \
    --plot "$RES/rows_bw.png" > "$RAW/bench_table.txt" 2>>"$LOG" || echo "bench_rows FAILED (see log)"
  say "GEMM beside cuBLAS and QuACK (bench_gemm.py, burst and sustained)"
  python3 bench/bench_gemm.py $([ "$MODE" = quick ] && echo --quick) --out "$RAW/bench_gemm.jsonl" \
    > "$RAW/bench_gemm_table.txt" 2>>"$LOG" || echo "bench_gemm FAILED (see log)"
fi
if [ "$DEMO" = 1 ] && [ "$PY_OK" = 1 ]; then
  say "demo"
  # The device returns at most 8 files: keep the demo's JSON and profiles aside, bring the
  # printed report (it includes the profile tables) and the loss plot.
  python3 demo/train_lm.py --out /tmp/quack_demo --profile 3 > "$RES/demo.txt" 2>&1
  echo "demo exit $?" >> "$RES/demo.txt"; cp /tmp/quack_demo/train_lm.png "$RES/" 2>/dev/null
fi

echo
echo "================ QuACK-C++ GPU check ($MODE) commit ${QUACK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} ================"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null | head -1
echo "build ${BUILD_S}s (C++), ${PY_BUILD_S:-0}s (Python extension); resource report: $([ $SPILL_RC = 0 ] && echo 'no spills' || echo 'SPILLS, see resource_report.txt')"
[ -f "$RAW/sass_summary.txt" ] && cat "$RAW/sass_summary.txt"
if [ "$TESTS" = 1 ]; then
  printf "%-10s %7s %7s\n" family passed failed
  for f in cpp_host examples cpp_gpu python; do printf "%-10s %7s %7s\n" $f "${PASS[$f]:-0}" "${FAIL[$f]:-0}"; done
  echo "python skipped: ${SKIP_PY:-0}"
fi
[ "$BENCH" = 1 ] && { echo "--- quack-bench (C++)"; cat "$RAW/quack_bench.jsonl"; echo "--- row ops beside their peers (TB/s, do_bench)"; sed -n "/^copy/,\$p" "$RAW/bench_table.txt" 2>/dev/null;
  echo "--- GEMM bf16 (TFLOP/s, ours vs cuBLAS, same run)"; python3 scripts/gemm_table.py "$RAW/quack_bench_gemm.jsonl" --plot "$RES/gemm_tflops.png";
  [ -f "$RAW/bench_gemm_table.txt" ] && { echo "--- GEMM bf16 beside cuBLAS and QuACK (TFLOP/s)"; sed -n '/^| M x N x K/,$p' "$RAW/bench_gemm_table.txt"; }; }
[ "$DEMO" = 1 ] && { echo "--- demo"; tail -15 "$RES/demo.txt"; }
[ -n "${OUT:-}" ] && tar -czf "$RES/raw.tgz" -C "$RES" raw && rm -rf "$RAW"  # device: one file for all raw outputs
