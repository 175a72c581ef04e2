# Run BH: which tiles the LCE's logits (kk: 4096 x 128256 x 4096 a chunk) and dx (km: 4096 x
# 4096 x 128256) GEMMs run best on, in the call (run BG, H100: logits 23.54 ms against cuBLAS's
# 22.67, dx 23.10 against 21.93, kernels of one call). Warm or cold, carry [".prebuilt-lib",
# ".peers/quack-0.2.0-site.tar.xz"]: ITEMS=scripts/device/bh_items.sh bash scripts/device/call_bench.sh
# Predicted: a tile that moves either GEMM by > 2 % (0.45 ms) shows it in the kernel table (the
# table's mean of 3 calls repeats within ~1 % between calls: BF / BG).
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
K="python3 -u bench/bench_linear_ce.py --quick --kernels ours"
run lce_tile_kernels 300 bash -c "$CARD; for t in auto bf16_bf16_kk:128x192pp bf16_bf16_kk:128x128pp bf16_bf16_km:128x192pp bf16_bf16_km:128x128pp auto; do echo \"== QUACK_GEMM_TILE=\$t\"; QUACK_GEMM_TILE=\$t $K 2>&1 | grep -E 'kernels|gemm_kernel' ; done"
# The call by the acceptance method, more rounds than BG's 4 (its rounds spread 77.6-85.0 ms).
run lce_accept 200 bash -c "python3 -u bench/bench_linear_ce.py --quick --impls ours,quack_untuned --rounds 8 --out $R/lce.jsonl"
