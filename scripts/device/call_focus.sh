#!/usr/bin/env bash
# Call 1 (cold), focused: A/B build (PREBUILT=1: .prebuilt's binaries where they match),
# host tests, the GPU tests of what changed since the last full run (TESTS: gtest filters,
# PYFILES: pytest files, each space-separated, empty for none; run side by side, two shards
# per filter), then the benches of $ITEMS (default bench_items.sh) while the budget lasts.
cd "$(dirname "$0")/../.."; source scripts/device/common.sh; source scripts/device/common_run.sh
T0=$(date +%s)
say "build"
build || { tail -40 $R/build.log; echo BUILD FAILED; tar -cJf $OUT/a.tar.xz -C $OUT r; exit 1; }
say "built in $(( $(date +%s) - T0 )) s"; stage
G=build/d/tests/cpp/quack_gpu_tests
build/d/tests/cpp/quack_host_tests --gtest_brief=1 > $R/host.log 2>&1; tail -2 $R/host.log
TMO=${TEST_TMO:-200}
set -f  # TESTS: gtest filters separated by spaces, unquoted (e.g. TESTS='*Topk* CeTrain.*'): no globbing
for f in ${TESTS-CeTrain.* *Topk* *Rotary*}; do
  for i in 0 1; do
    ( GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i timeout $TMO $G --gtest_filter="$f" > "$R/g_${f//[^A-Za-z]/}_$i.log" 2>&1; echo "rc=$?" >> "$R/g_${f//[^A-Za-z]/}_$i.log" ) &
  done
done
set +f
for f in ${PYFILES-test_topk test_rotary test_cross_entropy test_linear_cross_entropy}; do
  ( timeout $TMO python3 -m pytest tests/python/$f.py -q -p no:cacheprovider --maxfail=20 > $R/py_$f.log 2>&1; echo "rc=$?" >> $R/py_$f.log ) &
done
wait
say "tests done at $(( $(date +%s) - T0 )) s"
grep -l 'PASSED  \] 0 tests' $R/g_*.log && echo "WARNING: a gtest filter matched no test"
for f in $R/g_*.log; do echo "$(basename $f): $(grep -E '^\[  (PASSED|FAILED)  \]' $f | head -2 | tr '\n' ' ') $(grep '^rc=' $f)"; done
test_summary $R/g_*.log
items_and_tables 14
tar -cJf $OUT/a.tar.xz -C $OUT r && rm -rf $R
say "end at $(( $(date +%s) - T0 )) s"
