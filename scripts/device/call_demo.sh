#!/usr/bin/env bash
# Call 2 (warm): the demo's full command (runs a-e, 300 steps), then short A/Bs while time is left.
cd "$(dirname "$0")/../.."; source scripts/device/common.sh; source scripts/device/common_run.sh
T0=$(date +%s); ensure_built; stage
# The demo's limit: DEMO_TMO, clipped to what the call's budget has left after a build.
tmo=${DEMO_TMO:-500}; l=$(left); [ "$l" -lt "$tmo" ] && tmo=$(( l > 60 ? l - 30 : 30 ))
timeout $tmo python3 demo/train_lm.py --out $R/demo --profile 10 ${DEMO_ARGS:-} > $R/demo.txt 2>&1; echo "demo exit $?" >> $R/demo.txt
tail -50 $R/demo.txt
[ -f "${ITEMS:-}" ] && source "$ITEMS"
for f in $R/*.txt; do [ $(basename $f) = demo.txt ] && continue; echo "=== $(basename $f)"; grep -vE "^\s*$" $f | tail -25; done
tar -cJf $OUT/b.tar.xz -C $OUT r && rm -rf $R
say "end at $(( $(date +%s) - T0 )) s"
