#!/usr/bin/env bash
# A library A/B in one call: A = .prebuilt-lib (this tree's library), B = .prebuilt-lib-b (a
# branch's library: `scripts/device/prebuild_lib.sh` run in that branch's worktree, then its
# .prebuilt-lib copied here as .prebuilt-lib-b; its stamp file names the branch's library stamp).
# The same Python sources link each library into their own extension (build/d: A, through
# build() and its stamp check; build/e: B, only the binding compiles), staged as /tmp/sA and
# /tmp/sB. Then TESTS_B (a gtest filter: build/e builds the C++ tests too, against B), PYFILES_B
# (pytest files, against B), and AB_CMD (a bench command) run in separate
# processes alternating A B A B ... (ROUNDS pairs): each process's own cuBLAS reading is the
# control for the clock and power between processes (ours / cuBLAS by process, then A against B).
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=<s> ROUNDS=2 TESTS_B='*Gemm*:-*Large*' PYFILES_B='tests/python/test_gemm.py' \
#     AB_CMD='python3 -u bench/bench_gemm.py --shapes ... --layouts rr --methods sustained ...' \
#     bash scripts/device/lib_ab.sh
# carry [".prebuilt-lib", ".prebuilt-lib-b"] (two libraries, ~38 MB: no room for QuACK's site).
cd "$(dirname "$0")/../.."; source scripts/device/common.sh; source scripts/device/common_run.sh
[ -f .prebuilt-lib-b/libquack.a.xz ] || { echo "lib_ab: .prebuilt-lib-b/libquack.a.xz is missing, expected B's library (carry .prebuilt-lib-b)"; exit 2; }
[ -n "${AB_CMD:-}" ] || { echo "lib_ab: AB_CMD is empty, expected a bench command (it gets --out)"; exit 2; }
T0=$(date +%s)
ensure_built; stage build/d /tmp/sA
say "B: $(cat .prebuilt-lib-b/stamp 2>/dev/null)"
mkdir -p build/libB && xz -dc .prebuilt-lib-b/libquack.a.xz > build/libB/libquack.a
TB=OFF; [ -n "${TESTS_B:-}" ] && TB=ON
cmake -S . -B build/e -G Ninja -DCMAKE_BUILD_TYPE=Release -DQUACK_BUILD_PYTHON=ON -DQUACK_BUILD_TESTS=$TB \
  -DQUACK_BUILD_BENCH=OFF -DQUACK_GEMM_AB_INSTANCES=${AB_INSTANCES:-OFF} \
  -DQUACK_PREBUILT_LIBRARY=$PWD/build/libB/libquack.a > $R/cmake_b.log 2>&1 \
  && ninja -C build/e -j "$(nproc)" >> $R/build_b.log 2>&1 || { tail -30 $R/build_b.log; echo "B BUILD FAILED"; exit 1; }
stage build/e /tmp/sB
say "B staged in $(( $(date +%s) - T0 )) s"
[ -n "${TESTS_B:-}" ] && run gtest_b 240 build/e/tests/cpp/quack_gpu_tests --gtest_brief=1 --gtest_filter="$TESTS_B" \
  && tail -3 $R/gtest_b.txt
REST=${PYTHONPATH#/tmp/s:}  # common.sh's PYTHONPATH without its staged package
for f in ${PYFILES_B:-}; do
  run "py_b_$(basename $f .py)" 240 env PYTHONPATH=/tmp/sB:$REST python3 -m pytest -q -x "$f"
  tail -2 $R/py_b_$(basename $f .py).txt
done
for i in $(seq 1 ${ROUNDS:-2}); do
  for v in A B; do
    run "ab_${v}$i" 200 env PYTHONPATH=/tmp/s$v:$REST bash -c "$AB_CMD --out $R/ab_${v}$i.jsonl"
    grep -vE '^\s*$' $R/ab_${v}$i.txt | tail -${TAIL:-8}
  done
done
tar -cJf $OUT/c.tar.xz -C $OUT r && rm -rf $R
say "end at $(( $(date +%s) - T0 )) s"
