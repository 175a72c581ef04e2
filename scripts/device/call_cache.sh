#!/usr/bin/env bash
# One cold call: scripts/diag_cache_hints.cu (the load / store hints behind a dirty L2), then a
# build with -DQUACK_DIAG_PLAIN_CACHE (no A/B tiles) and scripts/device/cache_items.sh.
cd "$(dirname "$0")/../.."; source scripts/device/common.sh; source scripts/device/common_run.sh
T0=$(date +%s)
say "diag_cache_hints"
nvcc -O3 -arch=sm_90a -o /tmp/cache_hints scripts/diag_cache_hints.cu > $R/cache_hints.txt 2>&1 \
  && timeout 120 /tmp/cache_hints >> $R/cache_hints.txt 2>&1; cat $R/cache_hints.txt
say "build with QUACK_DIAG_PLAIN_CACHE"
export CUDAFLAGS=-DQUACK_DIAG_PLAIN_CACHE
AB_INSTANCES=OFF build || { tail -40 $R/build.log; echo BUILD FAILED; tar -cJf $OUT/a.tar.xz -C $OUT r; exit 1; }
say "built in $(( $(date +%s) - T0 )) s"; stage
grep -c QUACK_DIAG_PLAIN_CACHE build/d/CMakeCache.txt
f=$(find build/d -name "softmax_fwd_bf16*.o" | head -1)
echo "$f: $(cuobjdump -sass $f | grep -cE '(LDG|STG)\.E\.EF') evict-first LDG/STG (0 expected)"
ITEMS=scripts/device/cache_items.sh items_and_tables 20
tar -cJf $OUT/a.tar.xz -C $OUT r && rm -rf $R
say "end at $(( $(date +%s) - T0 )) s"
