#!/usr/bin/env bash
# Call 1 (cold): A/B build, every GPU test (gtest shards + pytest files alongside), budget-guarded.
cd "$(dirname "$0")/../.."; source scripts/device/common.sh
T0=$(date +%s); END=$((T0 + ${BUDGET:-565}))
say "build"
# A failed TU (ninja -k 0 built the rest): the tests that were built still run.
build || { tail -40 $R/build.log; echo "BUILD FAILED (continuing with what was built)"
           [ -x build/d/tests/cpp/quack_gpu_tests ] || { tar -cJf $OUT/a.tar.xz -C $OUT r; exit 1; }; }
say "built in $(( $(date +%s) - T0 )) s"; stage; ls /tmp/s/quack_cpp | tr '\n' ' '; echo
python3 -c "import quack_cpp; print('quack_cpp', quack_cpp.__file__)"
python3 -c "import quack; print('quack', quack.__version__)" 2>/dev/null || echo "quack (the peer): not on the path (no .peers in this call)"
G=build/d/tests/cpp/quack_gpu_tests; NSH=${NSH:-8}
# GTEST_LIST=<file> (one full test name a line): only those gtests, in 2·NSH shards, and only the
# pytest files of PY_FILES (default none), no *Large* unless listed: the rest of a suite a call cut.
# Lines may be gtest patterns (Tiles/GemmActTest.*).
if [ -n "${GTEST_LIST:-}" ]; then
  F=$(paste -sd: "$GTEST_LIST"); NSH2=$((2 * NSH))
  TMO=$(( END - $(date +%s) - 30 )); [ $TMO -lt 30 ] && TMO=30
  say "gtest list $GTEST_LIST ($(wc -l < "$GTEST_LIST") tests), timeout $TMO"
  for i in $(seq 0 $((NSH2-1))); do
    ( GTEST_TOTAL_SHARDS=$NSH2 GTEST_SHARD_INDEX=$i timeout $TMO $G --gtest_filter="$F" > $R/g$i.log 2>&1; echo "rc=$?" >> $R/g$i.log ) &
  done
  for f in ${PY_FILES:-}; do
    ( b=$(basename $f .py); timeout $TMO python3 -m pytest $f -q -p no:cacheprovider --maxfail=20 > $R/py_$b.log 2>&1; echo "rc=$?" >> $R/py_$b.log ) &
  done
  wait; say "tests done at $(( $(date +%s) - T0 )) s"
  test_summary $R/g*.log
  # AFTER: one more command (a short bench) with the staged package, its output in after.log.
  # Under the call's budget (at least 20 s), so the archive below is always written.
  A=$(( END - $(date +%s) )); [ $A -lt 20 ] && A=20
  [ -n "${AFTER:-}" ] && { R=$R timeout $A bash -c "$AFTER" > $R/after.log 2>&1; tail -${AFTER_TAIL:-30} $R/after.log; }
  tar -cJf $OUT/a.tar.xz -C $OUT r && rm -rf $R; exit 0
fi
build/d/tests/cpp/quack_host_tests --gtest_brief=1 > $R/host.log 2>&1; tail -2 $R/host.log
run_examples
TMO=$(( END - $(date +%s) - 75 )); [ $TMO -gt ${TMO_MAX:-240} ] && TMO=${TMO_MAX:-240}
[ $TMO -lt 30 ] && TMO=30  # a slow build: timeout 0 would mean no limit, a negative one runs nothing
say "gtest/pytest timeout $TMO"
for i in $(seq 0 $((NSH-1))); do
  ( GTEST_TOTAL_SHARDS=$NSH GTEST_SHARD_INDEX=$i timeout $TMO $G --gtest_filter='-*Large*:*RmsNormBwdConfigs*' > $R/g$i.log 2>&1; echo "rc=$?" >> $R/g$i.log ) &
  ( GTEST_TOTAL_SHARDS=$NSH GTEST_SHARD_INDEX=$i timeout $TMO $G --gtest_brief=1 --gtest_filter='*RmsNormBwdConfigs*' > $R/c$i.log 2>&1; echo "rc=$?" >> $R/c$i.log ) &
done
# Python test files 4 at a time alongside (rotary first: mended, not GPU-run before).
( { echo tests/python/test_rotary.py; ls tests/python/test_*.py | grep -v test_rotary.py; } | timeout $TMO xargs -P 4 -I{} sh -c 'f={}; b=$(basename $f .py); python3 -m pytest $f -q -p no:cacheprovider --maxfail=20 > '$R'/py_$b.log 2>&1; echo "rc=$?" >> '$R'/py_$b.log' ) &
wait
L=$(( END - $(date +%s) - 10 )); [ $L -gt 150 ] && L=150
[ $L -gt 20 ] && ( timeout $L $G --gtest_brief=1 --gtest_filter='*Large*' > $R/large.log 2>&1; echo "rc=$?" >> $R/large.log )
say "tests done at $(( $(date +%s) - T0 )) s"
test_summary $R/g*.log $R/c*.log $R/large.log
ls tests/python/test_*.py | while read f; do b=$(basename $f .py); [ -f $R/py_$b.log ] || echo "NOT RUN $b"; done
tar -cJf $OUT/a.tar.xz -C $OUT r && rm -rf $R
say "end at $(( $(date +%s) - T0 )) s"
