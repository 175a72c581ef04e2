# Run AP's items in priority order (common_run.sh skips those a warm machine has done).
# Calls (docs/status.md, "Next device calls"):
#   1 (cold; every GPU test): where .prebuilt-lib's stamp is main's (scripts/device/prebuild_lib.sh
#     at the end of the session that wrote this file), PREBUILT_LIB=1 saves the library's
#     ~250 s of GEMM TUs: PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=565 bash scripts/device/call_tests.sh,
#     carry [".prebuilt-lib", ".whl", ".data"] (no QuACK in this call: .peers and .prebuilt-lib
#     pass 64 MiB together). Otherwise the same without PREBUILT_LIB, carry [".peers", ".whl", ".data"].
#   2 (warm): QUACK_DEMO_COMMIT=<main's short hash> DEMO_TMO=450 BUDGET=580
#     ITEMS=scripts/device/ap_items.sh bash scripts/device/call_demo.sh, carry [".peers", ".whl",
#     ".data"] (the demo's second reading of (d) / (b) at this code, then the items)
#   3 (warm, if ~10 min are left): BUDGET=<status's budget_left_s − 45, at most 560> ITEMS=scripts/device/ap_items.sh bash
#     scripts/device/call_bench.sh, same carry (the items left)
QB=build/d/bench/quack-bench
# Issue 18's acceptance: compute-sanitizer memcheck clean on the out-of-range-target test and the
# M·V > 2^31 ones (the forward, dx and the training backward; nothing read or written out of
# bounds). Predicted: "ERROR SUMMARY: 0 errors", exit 0, within ~3 min (CeLarge's float64
# reference dominates; the kernels under memcheck ~100x slower, ~1 s each).
run ce_memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 9 build/d/tests/cpp/quack_gpu_tests --gtest_brief=1 --gtest_filter='CeCases.C10*:CeLarge.*:CeTrain.OutOfRangeTargets'
# Issue 17: gelu_erf and quick_gelu (QuACK 0.6.3's), new in the act / dact epilogues: their GPU
# tests ran in call 1. Predicted: gelu_erf's act within 2 % of gelu_tanh_approx's time and
# <= 1.05 x plain at 16384 x 14336 x 4096 (erff adds ~15 FP32 instructions an element to an
# epilogue that the pingpong schedule overlaps with the other warpgroup's mainloop); quick_gelu
# level with silu. Beyond +3 % against gelu_tanh_approx: the erf costs issue slots the mainloop
# needs (then an erf by tanh.approx-free polynomial of fewer terms).
run act_new 200 python3 bench/bench_gemm_fused.py --impls ours --ops act,dact --acts gelu_tanh_approx,gelu_erf,silu,quick_gelu --methods burst --burst-rounds 2 --shapes 16384x14336x4096,8192x8192x8192 --out $R/act_new.jsonl
# Issue 16, at the power limit: QuACK read 743 against our 688 TFLOP/s at 8192^3 (AO5), at
# clocks of 1455-1470 MHz for both in earlier runs' per-implementation samples (Y, AA3: git
# log -S sm_mhz_quack). Which of our tiles does most at the limit, and at what clock?
# Predicted: no tile > 2 % ahead of auto; each tile's clock within 15 MHz of QuACK's (then the
# gap is work per clock, not power). Kept whole: the lines "SM MHz by impl" are the point.
run gemm_sust 300 python3 bench/bench_gemm.py --quick --methods sustained --rounds 8 --tiles auto,128x192pp,128x256 --out $R/gemm_sust.jsonl
# Issue 16 asks for the rested batches too (not a bar): bench_gemm.py's rested method (19 ms
# batches behind 25 ms sleeps, 10 rounds, the anchors' procedure), the five LLM shapes, ours beside
# cuBLAS and QuACK. The anchors read ours 0.91-0.95 x cuBLAS rested at fc7306b; our burst figure
# has since moved from 0.95-0.97 to ~0.99 x cuBLAS (AO5 geomean 0.992). Predicted: rested ours /
# cuBLAS = burst's +- 2 % (0.97-1.01 a shape), SM clock ~1780-1940 MHz by every implementation
# (the anchors' rested clocks; sustained's ~1400-1460). Below 0.97: the high-clock loss remains
# apart from the burst gains. Time: 5 shapes x 3 impls x 10 batches x ~45 ms = ~7 s, + imports,
# QuACK's first calls (their JIT time a guess), calibration: ~60-90 s. Last: not a bar.
run gemm_rested 150 python3 bench/bench_gemm.py --quick --methods rested --impls ours,cublas,quack --out $R/gemm_rested.jsonl
