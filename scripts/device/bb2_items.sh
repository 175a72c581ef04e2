# Run BB2 (warm, after a cold call on the same library): run BA's two acceptance items on the bars' card (BA ran on
# an H100), QuACK carried:
#   ITEMS=scripts/device/bb2_items.sh bash scripts/device/call_bench.sh
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
# ce_32768_ring: predicted (run W on the unhinted ring 1.007 x QuACK; AZ3 on the map 0.950): the
# backward from lse >= 1.0 x QuACK, the scaled step 0.97-1.0; then every backward entry kernel-only.
run ce_32768_ring 100 bash -c "$CARD; python3 bench/bench_rows.py --ops ce_bwd,ce_fwd_bwd_half,ce_fwd_bwd --dtypes bf16 --shapes 16384x32768 --impls ours,quack --rounds 3 --plot '' --out $R/ce_32768.jsonl && build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x32768 --dir bwd --config all --ms 60"
# rows_ring: the forwards the ring carries. Predicted against AL2 / AG1: rmsnorm fwd bf16 +2 %
# (65536-262144), layernorm fwd bf16 65536 +3-4 %, 262144 within 0.5 % (0.874 x copy: still
# missed), fp32 layernorm 262144 within 0.5 % (0.819), rmsnorm fp32 131072 / 262144 +0-2 %
# (0.986 / 0.983 x QuACK).
run rows_ring 200 bash -c "$CARD; python3 bench/bench_rows.py --ops rmsnorm_fwd,layernorm_fwd --dtypes bf16,fp32 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack --rounds 3 --plot '' --out $R/rows_ring.jsonl"
