# Run BD (warm, after BC): our LCE call's kernels alone (QuACK's warm-up outlasted 415 s in BC),
# then QuACK's with tuned=False (no autotuning: its dweight GEMM on its default tile).
#   ITEMS=scripts/device/bd_items.sh bash scripts/device/call_bench.sh
run lce_kernels_ours 200 bash -c "nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader; python3 -u bench/bench_linear_ce.py --quick --kernels ours"
run lce_kernels_quack_untuned 250 bash -c "python3 -u bench/bench_linear_ce.py --quick --kernels quack_untuned,ours"
run lce_accept_untuned 200 bash -c "python3 -u bench/bench_linear_ce.py --quick --impls ours,quack_untuned,gemms,cublas --rounds 3 --out $R/lce.jsonl"
