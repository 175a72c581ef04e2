# Run AY's H200 items (AY1 / AY2 ran on an H100: docs/data/run-AY_items.txt). Every item runs
# only where the reply's device is an H200 (a card cannot be asked for timings): the CE backward
# on map-t256v8 at 16-bit rows of (32, 64] KB (the plan since b96127b; AX6 / AY2 on the H100:
# bwd from lse 0.969 / 0.964 x QuACK, the scaled step 0.974 / 0.972), where run W read the ring
# at 1.007 x QuACK; the rows at 16384 x 4096; issue 16's sustained method. Cold call, carry
# [".prebuilt-lib", ".peers/quack-0.2.0-site.tar.xz"] (QuACK's site packed at a 256 MiB
# dictionary: status.md), after run AZ or alone:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=480 ITEMS=scripts/device/ay_items.sh bash scripts/device/call_bench.sh
# Afterwards: the tables to docs/data/run-<X>_items.txt; then delete this file (git keeps it).
# ce_32768_map: the acceptance method at 16384 x 32768 bf16, ours beside QuACK, then the
# kernel-only training pairs. Predicted (H200): ce_bwd >= 1.0 x QuACK (run W on the ring 1.007),
# the scaled step 0.97-1.0 x QuACK, fwd+bwd at grad 1 as before.
run ce_32768_map 150 bash -c "nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo 'not an H200: skipped'; exit 0; }; python3 bench/bench_rows.py --ops ce_bwd,ce_fwd_bwd_half,ce_fwd_bwd --dtypes bf16 --shapes 16384x32768 --impls ours,quack --rounds 3 --plot '' --out $R/ce_32768.jsonl && build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x32768 --dir fwdbwd"
# rows_15_h200: only on an H200: the row ops at 16384 x 4096 (issue 15's misses there). Predicted:
# rmsnorm bwd 0.82-0.84 x copy (AL2 0.831, AT5 0.754), the forwards 0.86-0.90.
run rows_15_h200 120 bash -c "nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo 'not an H200: skipped'; exit 0; }; python3 bench/bench_rows.py --ops rmsnorm_bwd,layernorm_bwd,rmsnorm_fwd,layernorm_fwd,softmax_fwd --dtypes bf16 --shapes 16384x4096 --impls ours,compile,quack --rounds 3 --plot '' --out $R/rows_15.jsonl"
# gemm_bar: only on an H200: issue 16's bar with the sustained method's equal rests (3219f2a).
# Predicted: burst 0.97-1.00 x max (AT2 0.981); sustained 60 ms batches 0.94-0.99.
run gemm_bar 240 bash -c "nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo 'not an H200: skipped'; exit 0; }; python3 bench/bench_gemm.py --quick --methods burst,sustained --burst-rounds 3 --rounds 8 --out $R/gemm_bar.jsonl"
