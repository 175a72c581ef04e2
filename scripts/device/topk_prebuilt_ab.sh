#!/usr/bin/env bash
# (Not yet run: the session that wrote it had no device time left.) One short prebuilt call (kernel-only, no Python): the top-k tree's `*Topk*` gtests and its
# quack-bench, beside another tree's quack-bench binary where .prebuilt/quack-bench-base is one
# (a 205 MB binary: with bin.tar.xz it exceeds the 64 MiB carry unless xz'd small). Prepare here:
#   <check out the candidate tree>; AB_INSTANCES=OFF scripts/device/prebuild.sh
# then call with carry [".prebuilt"]: PREBUILT=1 AB_INSTANCES=OFF bash scripts/device/topk_prebuilt_ab.sh
cd "$(dirname "$0")/../.."; source scripts/device/common.sh
T0=$(date +%s); build || { echo BUILD FAILED; exit 1; }; say "unpacked"
G=build/d/tests/cpp/quack_gpu_tests; NEW=build/d/bench/quack-bench; BASE=.prebuilt/quack-bench-base
for i in 0 1 2 3; do
  ( GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout ${TEST_TMO:-70} $G --gtest_brief=1 --gtest_filter='*Topk*' > $R/t$i.log 2>&1; echo "rc=$?" >> $R/t$i.log ) &
done; wait; say "tests done"
for f in $R/t*.log; do echo "$(basename $f): $(grep -E '^\[  (PASSED|FAILED)  \]' $f | head -3 | tr '\n' ' ') $(grep '^rc=' $f)"; done
grep -h "FAILED  \] [A-Z]" $R/t*.log | head
S=${SHAPES:-65536x1024x8}
[ -x $BASE ] || BASE=""
for r in 1 2; do for b in $BASE $NEW; do echo "== $b round $r"; $b topk --dtype fp32 --shapes $S --ms 200 2>&1 | tail -2; done; done
echo "== new, other shapes"; $NEW topk --dtype fp32 --shapes 65536x2048x8,65536x1024x16 2>&1 | tail -3
echo "== bf16 new"; $NEW topk --dtype bf16 --shapes 65536x1024x8 2>&1 | tail -1
if [ -n "$BASE" ]; then echo "== base, other shapes"; $BASE topk --dtype fp32 --shapes 65536x2048x8,65536x1024x16 2>&1 | tail -3; fi
say "end at $(( $(date +%s) - T0 )) s"
