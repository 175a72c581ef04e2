# Call DGI (cold) on branch dgated-a3ip (ba5262d + the A/B tile 128x128ppa3d2ip); A/B build with
# Python; carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=240 TESTS='GemmDGatedAbTiles.* *GemmGatedTest.DGated*' PYFILES=''
#   ITEMS=scripts/device/dgated_ip_items.sh bash scripts/device/call_focus.sh
# Issue 17 (status.md open thread 2; docs/data/run-AK_dgated_budget.md, its "cheaper first
# experiment"): gemm_dgated on 128x128 pingpong with the in-place three-slot ring (EpiInPlace,
# epilogue.cuh). Per warpgroup 3 slots of 8 KB: preact's TMA load lands in a slot, the swiglu
# gradient reads it, each thread writes its dpreact words over the preact words it read (same
# addresses: no cross-thread hazard), and the slot is TMA-stored from there; postact keeps 2
# buffers of 4 KB. 32 KB per warpgroup as a1d2, so 5 mainloop stages. Per subtile j (a1d2 ->
# a3d2ip): preact j + 1 issued after j's visitor -> preact j + 2 issued at the end of j (after
# the group barrier, ahead of j's stores), once j - 1's stores have read their slot
# (wait_group.read 0 before the barrier); store drain wait on j - 2 -> on j - 1 (the store window
# shrinks from ~2 subtile periods to ~1); two group barriers -> one. The next tile's subtiles 0
# and 1 load before its mainloop (a1d2: subtile 0). So all 8 subtiles of a tile find their
# preact loaded a period or more ago (a1d2: 7 of 8 wait on a round trip issued a few hundred
# cycles earlier).
# Predicted (burst, ms; AK2 production a1d2 0.842 / 3.406 / 1.819, plain 0.578 / 3.030 / 1.746,
# diag3 0.747 / 3.193, diag4 0.797 / 3.313):
#   16384x5632x2048   a3d2ip 0.76-0.82, centre 0.79 (-6 %): the wait slice (diag4 - diag3 = 0.050)
#                     hidden, as a2d2 (preact two subtiles ahead) took ~0.08 off in AJ1 while losing a
#                     stage, plus a barrier fewer; not below diag4's floor-ish 0.75 since the reads,
#                     the stores and the L2 side effect of the preact stream stay; the clock drops
#                     as the tensor pipe gets busier, which pulls toward the upper end.
#   16384x14336x4096  a3d2ip 3.22-3.40, centre 3.30 (-3 %): the wait slice there is 0.120 (diag4 -
#                     diag3); E ~ 1.25 T in cycles, so hiding the wait brings E near T; noise ±0.15.
#   8192x8192x8192    a3d2ip 1.80-1.83, centre 1.815: the epilogue is already under the other
#                     mainloop (T ~ 73 K cycles >> E), same stages, so no change.
# What would say otherwise: a3d2ip ~ a1d2 with a3d2ip - diag3 >> 0.02 at K = 2048 means the lead
# is still short or the shorter store window stalls (then the I/O warp design, a3d2io, has the
# same problem); a3d2ip > a1d2 means the store drain on j - 1 is exposed. tile_same: a3d2ip's
# dpreact and postact bit-equal to a1d2 at the four shapes (exit 0); diag1 is the control that
# the forcing reaches the kernels; the kernel of 128x128ppa3d2ip contains EpiInPlace.
# ncu at 16384 x 5632 x 2048, a1d2 against a3d2ip: barrier stalls per issue below a1d2's ~5.2,
# tensor-pipe active up, SM clock down toward plain's (AI2: 1.78 against 1.58 GHz).
run tile_same 120 python3 scripts/check_tile_same.py --base 128x128ppa1d2 --tiles 128x128ppa3d2ip --must-differ 128x128ppa1d2diag1 --must-contain '128x128ppa3d2ip=EpiInPlace'
DG=128x128ppa1d2,128x128ppa3d2ip,128x128ppa1d2diag3,128x128ppa1d2diag4,128x128ppa2d2
run dgated_ip 300 python3 bench/bench_gemm_fused.py --ops dgated --acts swiglu --impls ours --methods burst --burst-rounds 2 --shapes 16384x5632x2048,16384x14336x4096,8192x8192x8192 --tiles $DG --plain-tile 128x128pp --out $R/dgated_ip.jsonl
for t in a1d2 a3d2ip; do
  run ncu_$t 90 env OUT=$R KBASE=demangled bash scripts/ncu_kernel.sh dgi_$t 'regex:DGatedEpilogue' python3 bench/bench_gemm_fused.py --ops dgated --acts swiglu --shapes 16384x5632x2048 --methods burst --burst-rounds 1 --impls ours --tiles 128x128pp$t --out /tmp/f_$t.jsonl
done
