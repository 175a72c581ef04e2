#!/usr/bin/env bash
# GEMM check and tile A/B on the H200 in one device call (issues 16, 17): build the library, the
# GPU tests, quack-bench and the Python extension; run every GEMM GPU test (gemm, gemm_act /
# gemm_dact, the unaligned cases, the full-size N = 50257 one) in parallel gtest shards; then a
# short A/B by both methods of DESIGN §8 (burst, sustained) of ours:128x128pp, ours:128x192pp and
# the rule's choice (ours:auto) beside cuBLAS and QuACK 0.2.0 on 8192³, 16384x14336x4096 and
# 8192x128256x4096 (bench/bench_gemm.py --tiles), and gemm_act / gemm_dact beside our plain gemm
# (quack-bench gemm-act at 16384x14336x4096, gemm-dact at 16384x4096x14336; once with the rule's
# tiles, once with both on 128x128pp: the same tile for the fused and the plain call). The tables are
# printed last. Target: ≤ 6 min on the 16-core H200 host, build included.
#
#   scripts/gemm_ab.sh                       # the whole run
#   QUACK_AB_TESTS=0 scripts/gemm_ab.sh      # bench only
#   QUACK_AB_TILES=auto,128x192pp scripts/gemm_ab.sh
#
# Device call: carry [".peers"] (the CUTLASS headers and QuACK 0.2.0, ../shared/peers/README.md).
# Env: QUACK_AB_TILES (the ours:<spec> list, see bench_gemm.py --tiles; default
# auto,128x128pp,128x192pp), QUACK_AB_TESTS=0 (no tests), QUACK_AB_SHAPES (default: the three
# above), QUACK_AB_METHODS (burst,sustained), QUACK_AB_ROUNDS (sustained rounds, default 8),
# QUACK_AB_INSTANCES=1 (also build the candidate tiles of src/gemm/sm90/instances_ab.txt: add them
# to QUACK_AB_TILES), QUACK_AB_SMALL=1 (a burst pass over 4096³, 2048³, M = 128, K = 128: the rule's
# other branches), QUACK_AB_UNALIGNED=1 (8192x50257x4096 burst beside cuBLAS), QUACK_AB_SHARDS
# (gtest shards, default 8), QUACK_GTEST_TIMEOUT (s per shard, default 150). The tile rule's one
# constant for 128x192 is kRatePingpong192 (src/gemm/tile_rule.h: its comment lists where the
# choice flips). Results (log, JSON lines, tables) go to $OUT, else results/.
set -uo pipefail
cd "$(dirname "$0")/.."
# Back from the device: at most 8 files; this writes 3 to $RES (gemm_ab.log: everything,
# gemm_ab.jsonl: every bench record, gemm_ab_table.txt: the tables printed last); the pieces
# live in $W until then.
RES="${OUT:-results}"; mkdir -p "$RES"
W=$(mktemp -d /tmp/gemm_ab.XXXXXX)
LOG="$RES/gemm_ab.log"; : > "$LOG"
export PYTHONUNBUFFERED=1
say() { echo "[gemm_ab $(date +%T)] $*" | tee -a "$LOG"; }
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null \
  || { echo "gemm_ab: needs a CUDA GPU and torch"; exit 2; }
if [ ! -d .deps/cutlass/include ] && [ -f .peers/cutlass-include.tar.xz ]; then
  mkdir -p .deps && tar -xJf .peers/cutlass-include.tar.xz -C .deps
fi
[ -d .deps/cutlass/include ] && export QUACK_CUTLASS_INCLUDE="${QUACK_CUTLASS_INCLUDE:-$PWD/.deps/cutlass/include}"
if [ -f .peers/quack-0.2.0-site.tar.xz ]; then
  say "unpacking QuACK 0.2.0 (peer)"
  mkdir -p /tmp/quack_peer && tar -xJf .peers/quack-0.2.0-site.tar.xz -C /tmp/quack_peer \
    && export PYTHONPATH=/tmp/quack_peer:/tmp/quack_peer/nvidia_cutlass_dsl/python_packages${PYTHONPATH:+:$PYTHONPATH}
fi

AB_INST=$([ "${QUACK_AB_INSTANCES:-0}" = 1 ] && echo ON || echo OFF)
say "build (library, GPU tests, quack-bench, Python extension; A/B candidate tiles $AB_INST; $(nproc) jobs)"
t0=$(date +%s)
B=build/ab
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DQUACK_BUILD_PYTHON=ON -DQUACK_BUILD_BENCH=ON \
  -DQUACK_GEMM_AB_INSTANCES=$AB_INST >>"$LOG" 2>&1 \
  && ninja -C $B -j "$(nproc)" quack_gpu_tests quack-bench _C >>"$LOG" 2>&1 \
  || { tail -40 "$LOG"; echo "gemm_ab: build FAILED"; exit 1; }
say "built in $(( $(date +%s) - t0 )) s"
rm -rf $B/pystage && mkdir -p $B/pystage/quack_cpp && cp python/quack_cpp/*.py $B/pystage/quack_cpp/ \
  && cp $B/python/_C*.so $B/pystage/quack_cpp/ && export PYTHONPATH=$PWD/$B/pystage${PYTHONPATH:+:$PYTHONPATH}

# Resources of the GEMM kernels (registers, stack frame, spills) and their SASS (HGMMA, local memory).
CUOBJ=$(command -v cuobjdump || true)
if [ -n "$CUOBJ" ]; then
  for o in $(find $B/CMakeFiles/quack.dir -name 'gemm*_sm90_*.cu.o' | sort); do
    $CUOBJ -sass "$o" > /tmp/ab_sass.txt 2>/dev/null
    printf "%-48s %s  LDL/STL %3d  HGMMA %s\n" "$(basename "$o" .cu.o)" \
      "$($CUOBJ -res-usage "$o" 2>/dev/null | grep -o 'REG:[0-9]* STACK:[0-9]*' | head -1)" \
      "$(grep -cE '\b(LDL|STL)\b' /tmp/ab_sass.txt)" \
      "$(grep -oE 'HGMMA\.[0-9x]+' /tmp/ab_sass.txt | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"
  done | tee -a "$LOG" > "$W/gemm_ab_sass.txt"
fi

RC=0
if [ "${QUACK_AB_TESTS:-1}" = 1 ]; then
  # Shards in parallel (the float64 references are CPU work; the host has 16 cores). The host
  # tests are left to CI (no GPU needed).
  NS="${QUACK_AB_SHARDS:-8}"
  say "C++ GPU tests (*Gemm*: gemm on every compiled tile, gemm_act / gemm_dact, unaligned operands, the full-size N = 50257 case; $NS shards)"
  for i in $(seq 0 $((NS - 1))); do
    ( GTEST_TOTAL_SHARDS=$NS GTEST_SHARD_INDEX=$i timeout "${QUACK_GTEST_TIMEOUT:-150}" \
        $B/tests/cpp/quack_gpu_tests --gtest_brief=1 --gtest_filter='*Gemm*' > "$W/gemm_ab_gtest_$i.log" 2>&1
      echo $? > "$W/gemm_ab_gtest_$i.rc" ) &
  done
  wait
  for i in $(seq 0 $((NS - 1))); do
    cat "$W/gemm_ab_gtest_$i.log" >> "$LOG"
    grep -E "^\[  (PASSED|FAILED)  \]|SKIPPED" "$W/gemm_ab_gtest_$i.log" | head -20 | sed "s/^/  shard $i: /"
    trc=$(cat "$W/gemm_ab_gtest_$i.rc")
    [ "$trc" = 0 ] || { RC=1; say "GEMM GPU tests shard $i FAILED (exit $trc; 124 = timeout)"; }
  done
  say "tests done at $(( $(date +%s) - t0 )) s"
fi

TILES="${QUACK_AB_TILES:-auto,128x128pp,128x192pp}"
say "bench: $TILES beside cuBLAS and QuACK (${QUACK_AB_METHODS:-burst,sustained})"
SHAPES="${QUACK_AB_SHAPES:-8192x8192x8192,16384x14336x4096,8192x128256x4096}"
python3 bench/bench_gemm.py --shapes "$SHAPES" --layouts rr --methods "${QUACK_AB_METHODS:-burst,sustained}" \
  --rounds "${QUACK_AB_ROUNDS:-8}" --tiles "$TILES" --out "$W/gemm_ab_llm.jsonl" > "$W/gemm_ab_bench.txt" 2>&1 \
  || { RC=1; say "bench FAILED"; }
say "bench: gemm_act / gemm_dact beside our gemm (quack-bench; the rule's tiles, then both on 128x128pp)"
for tile in auto 128x128pp; do
  for cmd in "gemm-act --shapes 16384x14336x4096" "gemm-dact --shapes 16384x4096x14336"; do
    QUACK_GEMM_TILE=$tile $B/bench/quack-bench $cmd --act gelu_tanh_approx --ms 300 \
      >> "$W/gemm_ab_act.jsonl" 2>> "$W/gemm_ab_act.err" || { RC=1; say "quack-bench $cmd FAILED (tile $tile)"; }
  done
done
if [ "${QUACK_AB_UNALIGNED:-0}" = 1 ]; then
  say "bench: unaligned N = 50257 (b row-major: padded copy; d: plain stores), burst, beside cuBLAS"
  python3 bench/bench_gemm.py --shapes 8192x50257x4096 --layouts rr --methods burst --impls ours,cublas \
    --out "$W/gemm_ab_unaligned.jsonl" > "$W/gemm_ab_unaligned.txt" 2>&1 || { RC=1; say "unaligned bench FAILED"; }
fi
if [ "${QUACK_AB_SMALL:-0}" = 1 ]; then
  say "bench: small and short problems (burst): the tile rule's other branches"
  python3 bench/bench_gemm.py --shapes 4096x4096x4096,2048x2048x2048,128x8192x8192,8192x8192x128 --layouts rr \
    --methods burst --impls ours,cublas,quack --tiles auto,128x128pp,128x192pp,128x256,64x128,128x64c1 \
    --out "$W/gemm_ab_small.jsonl" > "$W/gemm_ab_small.txt" 2>&1 || { RC=1; say "small-shape bench FAILED"; }
fi
cat "$W/gemm_ab_bench.txt" "$W/gemm_ab_act.jsonl" >> "$LOG"
[ -f "$W/gemm_ab_act.err" ] && cat "$W/gemm_ab_act.err" >> "$LOG"
[ -f "$W/gemm_ab_unaligned.txt" ] && cat "$W/gemm_ab_unaligned.txt" >> "$LOG"
[ -f "$W/gemm_ab_small.txt" ] && cat "$W/gemm_ab_small.txt" >> "$LOG"
cat "$W"/*.jsonl > "$RES/gemm_ab.jsonl" 2>/dev/null
say "done in $(( $(date +%s) - t0 )) s (exit $RC)"
{
if [ -f "$W/gemm_ab_unaligned.txt" ]; then
  echo
  echo "== unaligned N = 50257 (ours = default rule) =="
  sed -n '/^| M x N x K/,$p' "$W/gemm_ab_unaligned.txt"
fi
echo
echo "== gemm_act / gemm_dact beside our gemm (ratio = ms_gemm / ms_fused; tile: QUACK_GEMM_TILE) =="
[ -f "$W/gemm_ab_act.jsonl" ] && cat "$W/gemm_ab_act.jsonl"
if [ -f "$W/gemm_ab_small.txt" ]; then
  echo
  echo "== small and short shapes (burst): ours:<tile> / max(cuBLAS, QuACK) =="
  sed -n '/^| M x N x K | method | max/,$p' "$W/gemm_ab_small.txt"
fi
echo
echo "== GEMM kernels: registers at launch, stack, local memory, HGMMA =="
[ -f "$W/gemm_ab_sass.txt" ] && cat "$W/gemm_ab_sass.txt"
echo
echo "== A/B: ours:<tile> / max(cuBLAS, QuACK) (A and B row-major; ours:auto = the rule, kRatePingpong192) =="
sed -n '/^| M x N x K | method | max/,$p' "$W/gemm_ab_bench.txt"
} | tee "$RES/gemm_ab_table.txt"
rm -rf "$W"
exit $RC
