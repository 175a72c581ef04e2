# Call on branch `gemm-k128b` (main + the 256x128 1x2 A/B tiles below); A/B build with Python; carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=60 TESTS='' PYFILES=''
#   ITEMS=scripts/device/k128b_items.sh bash scripts/device/call_focus.sh
# Issue 16's 8192 x 8192 x 128 (0.79 x cuBLAS; AI4: 128x128pp 0.0634 / 0.0806 / 0.2378 ms at
# 8192x8192x128 / 8192x8192x256 / 16384x16384x128, 256x128c1x2 0.0928 / 0.1119 / 0.3438; cuBLAS
# nvjet 256x128 1x2 coopA 0.0495 / 0.0668 / 0.1831). Our cooperative 256x128's epilogue stages
# 8 subtiles of 128 x 32 (64-byte rows of D per TMA store row) through 4 buffers: subtiles 4-7
# wait (tma_store_wait<3>, epilogue.cuh:666) for this tile's stores 0-3 to have read shared
# memory before the next tile's MMA may start (kernel.cuh:215-232, one set of warps).
# Candidate 256x128c1x2e64a0d4: 4 subtiles of 128 x 64 (128-byte rows), 4 buffers = the whole
# tile's 64 KB, 3 mainloop stages (K = 128 takes 2 a tile): no subtile waits on a store of its
# own tile; each waits on the previous tile's same subtile, issued one MMA (~1.1 us) earlier.
# Control 256x128c1x2e64: 128-byte rows, the in-tile wait kept (2 buffers of 16 KB, 4 stages).
# Predicted, ms at 8192x8192x128 / 8192x8192x256 / 16384x16384x128. Most likely 0.060-0.066 /
#   0.078-0.086 / 0.22-0.25 (= 128x128pp): production 128x128pp already has this structure (its
#   4 subtiles of 64 x 64 per warpgroup fill its 4 buffers: no in-tile store wait, 128-byte rows)
#   and writes D at ~16 GB/s per SM; more buffers did not help it (a0d8, AI2): per tile then
#   max(MMA 1.1 + staging ~0.4 us, 64 KB / 16 GB/s = 4.1 us) x 15.5 tiles per SM = 0.064.
#   0.047-0.056 / 0.064-0.074 / 0.18-0.21 only if the cooperative 1x2 pair's write pattern (both
#   CTAs of a cluster storing adjacent 128-column halves of the same 256 rows at once, as nvjet)
#   takes D's write rate to cuBLAS's ~22 GB/s per SM. Worse than the base (0.0928) refutes the
#   model. e64 (control) between: 0.065-0.09 (how much of the base's 0.0928 is 64-byte rows).
# Bits: the candidate and its control must give 256x128c1x2's bits (same values, same
# conversion); the kernel-name check shows each forced tile reached its own kernel.
QB=build/d/bench/quack-bench
run k128b_same 90 python3 scripts/check_tile_same.py --op gemm --base 256x128c1x2 --tiles 256x128c1x2e64a0d4,256x128c1x2e64 --shapes 8192x8192x128,1000x1000x520,4096x2048x4096,130x4000x64 --must-contain '256x128c1x2e64a0d4=EpiCAhead,256x128c1x2e64=EpiSubtile,256x128c1x2=256, 128, 1, 2, false'
# Kernel-only (quack-bench: ours and cuBLAS alternated in one process; ms_quack, ms_cublas).
k128b() { S=8192x8192x128,8192x8192x256,16384x16384x128
  for t in 256x128c1x2e64a0d4 256x128c1x2e64 256x128c1x2 128x128pp; do echo "== tile $t"; QUACK_GEMM_TILE=$t $QB gemm --layout rr --shapes $S --ms 60; done; }
run k128b 90 bash -c "QB=$QB; $(declare -f k128b); k128b"
# The acceptance method (burst, do_bench with L2 cleared) beside cuBLAS (torch.matmul) and QuACK.
run k128b_burst 150 python3 bench/bench_gemm.py --shapes 8192x8192x128,8192x8192x256,16384x16384x128 --layouts rr --methods burst --burst-rounds 2 --tiles auto,256x128c1x2e64a0d4,256x128c1x2e64 --out $R/k128b_burst.jsonl
