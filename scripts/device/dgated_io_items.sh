# Call DGO (cold) on branch dgated-a3io (main 42cad01 + the A/B tile 128x128ppa3d2io); A/B build
# with Python; carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=240 TESTS='GemmDGatedAbTiles.* *GemmGatedTest.DGated*' PYFILES=''
#   ITEMS=scripts/device/dgated_io_items.sh bash scripts/device/call_focus.sh
# Issue 17 (status.md open thread 3; docs/data/run-AK_dgated_budget.md, design a3d2io):
# gemm_dgated on 128x128 pingpong with a3d2ip's in-place ring (3 preact/dpreact slots of 8 KB +
# 2 postact buffers of 4 KB per warpgroup, 5 mainloop stages) and warps 1 and 2 of the producer
# warpgroup as the two warpgroups' I/O warps (EpiIoWarp, epilogue.cuh io_loop): the I/O warp
# issues preact's loads up to 3 subtiles ahead (across tiles: the next tile's first 3 under the
# group's next mainloop), waits d_full, issues the dpreact / postact stores, and drains them
# (wait_group.read 1, then releases the postact buffer by d1_free); the consumers only wait
# c_full, compute, wait d1_free (normally complete), write smem, fence and arrive d_full. No
# named barrier and no store drain in the consumers' chain; the store window is ~1 subtile
# period as in a3d2ip, but a slow drain now delays only a load issue, not the compute.
# Predicted (burst, ms; AM1 in one process: a1d2 0.878 / 3.474 / 1.860, a3d2ip 0.834 / 3.577 /
# 1.867, diag3 0.780 / 3.314, diag4 0.812 / 3.463, plain 0.596 / 3.044 / 1.756):
#   16384x5632x2048   a3d2io 0.72-0.83, centre 0.78 (-11 % vs a1d2): a3d2ip's hidden wait (0.834)
#                     plus the consumers' chain losing its group barrier, store drain and TMA issue
#                     (AJ1: diag1 - plain ~0.08 ms is latency of that chain); the lower end is plain
#                     + preact's L2 side effect (~0.09) once E falls under T; the clock drops as the
#                     tensor pipe gets busier, which pulls toward the upper end.
#   16384x14336x4096  a3d2io 3.20-3.50, centre 3.35 (-4 %): a3d2ip's +3 % came from the store drain
#                     on a 1-period window in the consumers' chain; here a late drain delays only a
#                     preact load that is ~2 periods ahead of its use.
#   8192x8192x8192    a3d2io 1.82-1.87 (the epilogue is already under the other mainloop; same stages).
# What would say otherwise: a3d2io ~ a3d2ip at K = 4096 means the store window itself (bytes in
# flight) is the limit, not where the drain sits; a hang in GemmDGatedAbTiles means the I/O
# warp's and the consumers' subtile sequences or phases disagree (the test's aligned cases
# 3900x1504x64 and 1000x1504x40 L = 3 take the I/O warp path; the tight ones the in-place
# fallback with the I/O warps idle).
run tile_same 120 python3 scripts/check_tile_same.py --base 128x128ppa1d2 --tiles 128x128ppa3d2io,128x128ppa3d2ip --must-differ 128x128ppa1d2diag1 --must-contain '128x128ppa3d2io=EpiIoWarp'
DG=128x128ppa1d2,128x128ppa3d2io,128x128ppa3d2ip,128x128ppa1d2diag3,128x128ppa1d2diag4
run dgated_io 300 python3 bench/bench_gemm_fused.py --ops dgated --acts swiglu --impls ours --methods burst --burst-rounds 2 --shapes 16384x5632x2048,16384x14336x4096,8192x8192x8192 --tiles $DG --plain-tile 128x128pp --out $R/dgated_io.jsonl
for t in a1d2 a3d2io; do
  run ncu_$t 90 env OUT=$R KBASE=demangled bash scripts/ncu_kernel.sh dgo_$t 'regex:DGatedEpilogue' python3 bench/bench_gemm_fused.py --ops dgated --acts swiglu --shapes 16384x5632x2048 --methods burst --burst-rounds 1 --impls ours --tiles 128x128pp$t --out /tmp/f_$t.jsonl
done
