# gemm_dgated's cost split (branch `dgated2`; the DIAGNOSTIC tiles of instances_ab.txt, wrong
# results by design, ours only, no torch column): device build with the A/B tiles and Python;
# carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=80 TESTS='' PYFILES=''
#   ITEMS=scripts/device/dgated2_items.sh bash scripts/device/call_focus.sh
# Production 128x128ppa1d2 0.825 ms, plain 0.579 (AH3) at 16384 x 5632 x 2048. Predicted
# (helper, ms): diag1 (no preact) 0.64 (0.60-0.70); diag2 (no stores) 0.70 (0.65-0.80);
# diag3 (preact prefetched into L2, never waited) 0.76 (0.66-0.82). diag3 near diag1: the
# epilogue's per-subtile wait on preact is the cost; diag3 near production: preact's stream
# slows the other warpgroup's mainloop (interference), not the wait. At 16384 x 14336 x 4096
# (production 3.475, plain 2.916; there the epilogue fits under the other mainloop): diag3
# 3.40-3.47, diag1 and diag2 3.10-3.25. a2d2 / a3d2 (deeper preact ring, 4 mainloop stages; only
# measured at K >= 4096 so far, run U): at K = 2048 0.76-0.80 if the wait is the cost.
DG=128x128ppa1d2,128x128ppa1d2diag1,128x128ppa1d2diag2,128x128ppa1d2diag3,128x128ppa2d2,128x128ppa3d2
run dgated_diag 120 python3 bench/bench_gemm_fused.py --ops dgated --acts swiglu --impls ours --methods burst --burst-rounds 2 --shapes 16384x5632x2048,16384x14336x4096 --tiles $DG --plain-tile 128x128pp --out $R/dgated_diag.jsonl
