# Run AX5 (the same session as AX1-AX4): the CE backward on map-t256v8 at 16-bit rows of (32, 64]
# KB (row_plan.cpp since this call; the ring before). Cold call, carry [".prebuilt-lib",
# ".peers/quack-0.2.0-site.tar.xz"]:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF TESTS='*Ce*:*CrossEntropy*' PYFILES='test_cross_entropy test_gemm_rotary'
#   BUDGET=<s> ITEMS=scripts/device/ax5_items.sh bash scripts/device/call_focus.sh
# ce_32768_map: the acceptance method at 16384 x 32768 bf16, ours beside QuACK, then the
# kernel-only training pairs. Predicted (H100): ce_bwd 0.97-0.99 x QuACK (AX4 on the ring:
# 0.946), the scaled step (its backward the recompute, now on the map) 0.95-0.97 x QuACK (AW1
# 0.940), fwd+bwd at grad 1 unchanged (0.93 x copy: its backward returns at once).
run ce_32768_map 150 bash -c "python3 bench/bench_rows.py --ops ce_bwd,ce_fwd_bwd_half,ce_fwd_bwd --dtypes bf16 --shapes 16384x32768 --impls ours,quack --rounds 3 --plot '' --out $R/ce_32768.jsonl && build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x32768 --dir fwdbwd"
# rows_15_h200: only on an H200: the row ops at 16384 x 4096 (issue 15's misses there). Predicted:
# rmsnorm bwd 0.82-0.84 x copy (AL2 0.831, AT5 0.754), the forwards 0.86-0.90.
run rows_15_h200 120 bash -c "nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo 'not an H200: skipped'; exit 0; }; python3 bench/bench_rows.py --ops rmsnorm_bwd,layernorm_bwd,rmsnorm_fwd,layernorm_fwd,softmax_fwd --dtypes bf16 --shapes 16384x4096 --impls ours,compile,quack --rounds 3 --plot '' --out $R/rows_15.jsonl"
