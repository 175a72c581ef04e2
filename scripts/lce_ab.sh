#!/usr/bin/env bash
# Linear + cross-entropy on the H200 in one device call (issue 20): the dweight GEMM's A/B tiles
# (src/gemm/sm90/instances_ab.txt: the fp32-accumulating 128x256 with its C ring, the 128x128
# pingpong variants) and a trace of one call's GPU idle. Builds the library with the A/B
# instances, the GPU tests and the Python extension; runs the GPU tests that force every tile of
# the dweight's group (Gemm.EveryTileConfig's fp32 in-place cases, LcePaths.DweightTilesForced)
# and the LCE suites; then bench_linear_ce.py --quick with ours per tile spec beside our three
# GEMMs; then --trace of one call on the rule's tiles and on each spec of QUACK_LCE_TRACE.
#
#   scripts/lce_ab.sh
#   QUACK_LCE_TESTS=0 scripts/lce_ab.sh                     # bench and trace only
#   QUACK_LCE_TILES=auto,f32_mm:128x128ppa1d2 scripts/lce_ab.sh
#
# Device call: carry [".peers"] where the CUTLASS headers come from there (as scripts/gemm_ab.sh).
# Env: QUACK_LCE_TILES (bench --tiles; default: auto and every f32_mm variant),
# QUACK_LCE_TRACE (extra --trace specs, comma list; default none), QUACK_LCE_TESTS=0 (no tests),
# QUACK_GTEST_TIMEOUT (s, default 300). Results go to $OUT, else results/: lce_ab.log (all),
# lce_ab.jsonl (bench records), lce_trace_<n>.json (chrome traces).
set -uo pipefail
cd "$(dirname "$0")/.."
RES="${OUT:-results}"; mkdir -p "$RES"
LOG="$RES/lce_ab.log"; : > "$LOG"
export PYTHONUNBUFFERED=1
say() { echo "[lce_ab $(date +%T)] $*" | tee -a "$LOG"; }
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null \
  || { echo "lce_ab: needs a CUDA GPU and torch"; exit 2; }
if [ ! -d .deps/cutlass/include ] && [ -f .peers/cutlass-include.tar.xz ]; then
  mkdir -p .deps && tar -xJf .peers/cutlass-include.tar.xz -C .deps
fi
[ -d .deps/cutlass/include ] && export QUACK_CUTLASS_INCLUDE="${QUACK_CUTLASS_INCLUDE:-$PWD/.deps/cutlass/include}"

say "build (library with the A/B instances, GPU tests, Python extension; $(nproc) jobs)"
t0=$(date +%s)
B=build/lce-ab
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DQUACK_BUILD_PYTHON=ON \
  -DQUACK_GEMM_AB_INSTANCES=ON >>"$LOG" 2>&1 \
  && ninja -C $B -j "$(nproc)" quack_gpu_tests _C >>"$LOG" 2>&1 \
  || { tail -40 "$LOG"; echo "lce_ab: build FAILED"; exit 1; }
say "built in $(( $(date +%s) - t0 )) s"
rm -rf $B/pystage && mkdir -p $B/pystage/quack_cpp && cp python/quack_cpp/*.py $B/pystage/quack_cpp/ \
  && cp $B/python/_C*.so $B/pystage/quack_cpp/ && export PYTHONPATH=$PWD/$B/pystage${PYTHONPATH:+:$PYTHONPATH}

RC=0
if [ "${QUACK_LCE_TESTS:-1}" = 1 ]; then
  say "C++ GPU tests: Gemm.EveryTileConfig (every lincomb tile, the fp32 in-place cases), *Lce* but Large"
  NS=4  # shards in parallel: the float64 references are CPU work
  for i in $(seq 0 $((NS - 1))); do
    ( GTEST_TOTAL_SHARDS=$NS GTEST_SHARD_INDEX=$i timeout "${QUACK_GTEST_TIMEOUT:-300}" \
        $B/tests/cpp/quack_gpu_tests --gtest_brief=1 --gtest_filter='Gemm.EveryTileConfig:*Lce*-*Large*' \
        > "$RES/lce_ab_gtest_$i.log" 2>&1; echo $? > "$RES/lce_ab_gtest_$i.rc" ) &
  done
  wait
  for i in $(seq 0 $((NS - 1))); do
    cat "$RES/lce_ab_gtest_$i.log" >> "$LOG"
    grep -E "^\[  (PASSED|FAILED)  \]" "$RES/lce_ab_gtest_$i.log" | sed "s/^/  shard $i: /"
    trc=$(cat "$RES/lce_ab_gtest_$i.rc")
    [ "$trc" = 0 ] || { RC=1; say "GPU tests shard $i FAILED (exit $trc; 124 = timeout)"; }
    rm -f "$RES/lce_ab_gtest_$i.log" "$RES/lce_ab_gtest_$i.rc"
  done
  say "pytest tests/python/test_linear_cross_entropy.py"
  python3 -m pytest tests/python/test_linear_cross_entropy.py -q -p no:cacheprovider >>"$LOG" 2>&1 \
    || { RC=1; say "pytest FAILED"; }
  tail -1 "$LOG"
fi

ALL="auto"
for t in 128x256a0d2 128x256a1d2 128x256a2d2 128x256a3d2 128x128ppa1d2 128x128ppa2d2 128x128ppa0d4; do
  ALL="$ALL,f32_mm:$t"
done
TILES="${QUACK_LCE_TILES:-$ALL}"
say "bench: ours per tile spec ($TILES) beside our three GEMMs"
python3 bench/bench_linear_ce.py --quick --impls ours,gemms --tiles "$TILES" \
  --out "$RES/lce_ab.jsonl" 2>&1 | tee -a "$LOG" | sed -n '/^ms (GiB/,$p' || { RC=1; say "bench FAILED"; }
n=0
for spec in auto ${QUACK_LCE_TRACE//,/ }; do
  say "trace: one call of ours, tiles $spec"
  python3 bench/bench_linear_ce.py --quick --trace "$RES/lce_trace_$n.json" --tiles "$spec" 2>&1 \
    | grep -v "^\(STAGE\|WARNING\|INFO\|ERROR\):" | tee -a "$LOG" || { RC=1; say "trace FAILED"; }
  n=$((n + 1))
done
say "done in $(( $(date +%s) - t0 )) s (exit $RC)"
exit $RC
