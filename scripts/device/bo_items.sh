# Run BO (either card): does the dynamic tile scheduler cut the DRAM reads of long-K GEMMs?
# BM1 (H100, docs/data/run-BM_items.txt): the LCE's dx GEMM (rr 4096 x 4096 x 128256) reads
# 8.20 GB of DRAM on our best raster (m8) against cuBLAS's 6.58 at equal cycles, and spends 1.5 %
# more energy a call (~63 mJ; ~1.6 GB at HBM3's ~30 pJ a byte is most of it): at the power cap
# it runs 1.1 % slower. Suspect: on the static schedule (cluster c takes tiles c, c + 66, ...)
# the tiles of waves 2-4 that share an A or B band start at unrelated times (each cluster's
# previous tile ended with its own drift), so they read the same k-blocks at different moments
# and L2 (50 MB, ~90 k-blocks of a wave's bands) misses between them. The dynamic scheduler
# (GemmArgs::tile_counter; quack-bench: QUACK_BENCH_TILE_COUNTER=1) hands consecutive tiles of
# the raster to the clusters that finish together, so band neighbours run in step.
# One call, cold or warm, carry [".prebuilt-lib"], any kind, behind the examples:
#   bash scripts/device/call_examples.sh; PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=560 ITEMS=scripts/device/bo_items.sh bash scripts/device/call_bench.sh
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
NCU_M="gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
# sched_tests (~30 s): the dynamic scheduler's Python tests (new: gemm(dynamic_scheduler=True)
# bitwise equal to the static schedule, another stream, a CUDA graph, the backward, compile).
run sched_tests 120 bash -c "python3 -m pytest tests/python/test_gemm.py -q -p no:cacheprovider -k dynamic 2>&1 | tail -5"
# ncu_dx_sched (~60 s): one launch of ours and one of cuBLAS's per process, static then dynamic
# (m8). Predicted: dynamic reads 5-15 % less DRAM than static (8.20 GB in BM1), cycles within
# 1 %, cuBLAS's launch as BM1's (6.58 GB). Rule: >= 10 % fewer bytes and no more cycles ->
# sched_dx decides whether the long-K rule takes the dynamic scheduler (the LCE's dx first:
# its workspace would carry the counter).
run ncu_dx_sched 150 bash -c "$CARD; for dyn in 0 1; do echo \"== QUACK_BENCH_TILE_COUNTER=\$dyn\"; QUACK_BENCH_TILE_COUNTER=\$dyn ncu --clock-control none --kernel-name regex:'gemm_kernel|nvjet' --launch-skip 6 --launch-count 2 --metrics $NCU_M build/d/bench/quack-bench gemm --shapes 4096x4096x128256 --layout rr --ms 50 2>&1 | grep -E 'gemm_kernel<|nvjet|gpu__time|cycles_elapsed|dram__bytes|hit_rate|hmma' | cut -c1-120; done"
# sustained_sched (~80 s): the dx shape at the power cap (1.5 s batches), static against
# dynamic beside cuBLAS (bench_gemm.py's "+dyn": stream-K off for those calls, so at
# 16384 x 4096 x 14336 it is the rule (stream-K there) against dynamic data-parallel; at the
# dx shape stream-K is off either way): clock, power, energy a call. Predicted:
# dynamic's energy a call lower by about its DRAM saving (~30 pJ a byte) and its TFLOP/s up by
# about as much (BM1: static 0.989 x cuBLAS). Rule: dynamic >= 1 % ahead of static here and not
# behind at 16384 x 4096 x 14336 -> the LCE's dx takes it (a counter in its workspace) and
# issue 16's long-K rule is read next.
run sustained_sched 200 bash -c "$CARD; python3 -u bench/bench_gemm.py --shapes 4096x4096x128256,16384x4096x14336 --layouts rr --methods sustained --batch-ms 1500 --rounds 4 --drop 1 --impls ours,cublas --tiles auto,auto+dyn --out $R/sustained_sched.jsonl"
# sched_dx (~90 s): kernel-only timing beside cuBLAS (quack-bench: alternating launches, the
# spin kernel ahead), static and dynamic, rasters m8 and h8s, at the dx shape and issue 16's
# long-K bar shape (16384 x 4096 x 14336, no stream-K workspace here). Predicted: dynamic's
# "ratio" (cuBLAS ms / ours) within +-1 % of static's at both (kernel-only runs below the power
# cap, where the bytes cost little); sustained_sched decides.
run sched_dx 150 bash -c "for dyn in 0 1; do for r in m8 h8s; do echo \"== dynamic=\$dyn raster=\$r\"; QUACK_BENCH_TILE_COUNTER=\$dyn QUACK_GEMM_RASTER=\$r build/d/bench/quack-bench gemm --shapes 4096x4096x128256,16384x4096x14336 --layout rr --ms 400 | cut -c1-330; done; done"
