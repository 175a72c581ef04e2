# Run BD (warm, after BC): our LCE call's kernels alone (QuACK's warm-up outlasted 415 s in BC).
#   ITEMS=scripts/device/bd_items.sh bash scripts/device/call_bench.sh
run lce_kernels_ours 200 bash -c "nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader; python3 -u bench/bench_linear_ce.py --quick --kernels ours"
