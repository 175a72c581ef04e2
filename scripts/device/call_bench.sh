#!/usr/bin/env bash
# Call 3 (warm): benches by the acceptance method + A/Bs ($ITEMS, default bench_items.sh), each under a timeout.
cd "$(dirname "$0")/../.."; source scripts/device/common.sh; source scripts/device/common_run.sh
T0=$(date +%s); ensure_built; stage
items_and_tables 30
tar -cJf $OUT/c.tar.xz -C $OUT r && rm -rf $R
say "end at $(( $(date +%s) - T0 )) s"
