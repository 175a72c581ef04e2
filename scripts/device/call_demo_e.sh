#!/usr/bin/env bash
# Call E: the demo's run (e) alone (torch eager, seed 1; no quack_cpp needed) for the parity bound.
cd "$(dirname "$0")/../.."; export PYTHONUNBUFFERED=1; R=$OUT/r; mkdir -p $R
timeout ${E_TMO:-230} python3 demo/train_lm.py --runs e --no-census --gen-tokens 0 --out $R/demo > $R/demo_e.txt 2>&1; echo "demo exit $?" >> $R/demo_e.txt
grep -vE "^\s+step" $R/demo_e.txt | tail -30; grep -E "^\s+step" $R/demo_e.txt | tail -3
tar -cJf $OUT/e.tar.xz -C $OUT r
