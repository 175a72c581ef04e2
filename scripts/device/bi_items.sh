# Run BI: the LCE's dx (km) and logits (kk) GEMMs on the A/B candidate 256x128 1x2 cooperative,
# cuBLAS's tile for the dx in QuACK's call (run BG, H100: nvjet 256x128 1x2 21.93 ms against our
# 128x256 2x1's 23.10, kernels of one call). A/B library (AB_INSTANCES=ON prebuild), cold call,
# carry [".prebuilt-lib"]:
#   PREBUILT_LIB=1 AB_INSTANCES=ON TESTS='' PYFILES='' BUDGET=300
#   ITEMS=scripts/device/bi_items.sh bash scripts/device/call_focus.sh
# Predicted: dx on 256x128c1x2 ~22.0 ms (cuBLAS's) if the tile is what separates them; the
# forced tile's kernels within 1 % of auto's otherwise.
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
K="python3 -u bench/bench_linear_ce.py --quick --kernels ours"
run lce_tile_kernels 280 bash -c "$CARD; for t in auto bf16_bf16_km:256x128c1x2 bf16_bf16_kk:256x128c1x2 bf16_bf16_km:256x128c1x2e128 auto; do echo \"== QUACK_GEMM_TILE=\$t\"; QUACK_GEMM_TILE=\$t $K 2>&1 | grep -E 'kernels|gemm_kernel' | cut -c1-80; done"
