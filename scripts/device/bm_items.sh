# Run BM: where the LCE's dx GEMM loses to cuBLAS in the call. BL's ncu_dx (H100, one launch
# each): ours (128x256 2x1 coop, e64) and cuBLAS's nvjet 256x128 1x2 take the same cycles
# (8.279 / 8.268 M at 1.529 / 1.548 GHz), but ours reads 8.58 GB of DRAM against 7.40 and its L2
# throughput is 72 against 63 %; in the call ours reads 1.0-1.6 ms (4-7 %) slower. Suspect: the
# power limit (more DRAM / L2 traffic, more energy a call, a lower clock at the cap). One call,
# cold or warm, carry [".prebuilt-lib", ".peers/quack-0.2.0-site.tar.xz"], kind nvidia-h200:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=400 ITEMS=scripts/device/bm_items.sh bash scripts/device/call_bench.sh
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
# dx_sustained (~70 s): the dx shape (rr) at the power limit, 1.5 s batches, ours by raster beside
# cuBLAS: clock, power and energy a call. Predicted: ours 3-6 % slower than cuBLAS with its clock
# lower by about as much and its energy a call higher; a raster that reads less DRAM (ncu below)
# gains clock.
run dx_sustained 200 bash -c "$CARD; python3 -u bench/bench_gemm.py --shapes 4096x4096x128256 --layouts rr --methods sustained --batch-ms 1500 --rounds 4 --drop 1 --impls ours,cublas --tiles auto,auto@h8s,auto@m4,auto@m16 --out $R/dx_sustained.jsonl"
# ncu_dx_rasters (~80 s): DRAM bytes and cycles of the dx GEMM by raster (one launch each).
# m8 is the model's best band here (a wave of 66 2x1 clusters covers 8 x 8.25 cluster tiles);
# predicted: m4 / m16 read more DRAM, h8s (serpentine) within 5 % of m8.
run ncu_dx_rasters 200 bash -c "ncu --clock-control none --profile-from-start off --set full -f -o $R/ncu_dx_r python3 scripts/ncu_gemm_quack.py 4096 4096 128256 m8,h8s,m4,m16 > $R/ncu_dx_r_run.log 2>&1; python3 scripts/ncu_gemm_quack.py --report $R/ncu_dx_r.ncu-rep"
# lce_rasters (~100 s): one call's kernels with every GEMM on each raster (QUACK_GEMM_RASTER
# applies to all three); m8 twice (first and last) for the spread between processes.
run lce_rasters 200 bash -c "for r in m8 h8s m4 m8; do echo \"== raster \$r\"; QUACK_GEMM_RASTER=\$r python3 -u bench/bench_linear_ce.py --quick --kernels ours 2>/dev/null | grep -E 'kernels|gemm_kernel|compact|Fwd' | cut -c1-90; done"
