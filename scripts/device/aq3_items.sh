# Run AQ3 (cold; one call): where gelu_erf's epilogue time goes.
#   PREBUILT_LIB=1 BUDGET=<≤ 300> ITEMS=scripts/device/aq3_items.sh bash scripts/device/call_bench.sh,
#   carry [".prebuilt-lib", ".whl", ".data"] (the stamp must be main's: see aq_items.sh).
# AQ2 (H100): gelu_erf act / dact 1.571 / 1.475 x plain at 16384 x 14336 x 4096 with the erfcc Phi,
# where erff read 1.478 / 1.511 (AP2, H200): the Phi's form did not move it (predicted ~1.10).
# quick_gelu read 1.240 / 1.184, gelu_tanh_approx 1.218 / 1.101 in the same call. The SASS of
# the act TU holds ~19 instructions a gelu_erf element (no spills, no local memory) against ~7
# for quick_gelu; the excess, ~0.66 T a tile (E = 2 t - T), is ~200 cycles an element per thread.
# Hypothesis: an epilogue instruction issued beside the other warpgroup's WGMMAs costs ~10+
# cycles (the cost scales with the epilogue's instruction count, not its MUFU count). Predicted:
# ncu's cycles per tile minus plain's grow with smsp__inst_executed across relu, quick_gelu,
# gelu_tanh_approx, gelu_erf, at ~10-15 cycles per extra epilogue instruction per warp.
# Otherwise (cycles not in line with instructions): the stall reasons on the erf lines say why.
QB=build/d/bench/quack-bench
run act_ncu 200 bash -c "ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/act python3 scripts/ncu_gemm_quack.py act 16384 14336 4096 relu,quick_gelu,gelu_tanh_approx,gelu_erf > /dev/null && python3 scripts/ncu_gemm_quack.py --report /tmp/act.ncu-rep && python3 scripts/ncu_gemm_quack.py --sass /tmp/act.ncu-rep | cut -c1-200"
