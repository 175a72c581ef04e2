# Run AO's items (main after run AN: e128 in the rule, ce-lean, the row refills' proxy fence,
# gemm_dgated's a3d2io in the rule at K <= 2048, the rotary kernel at 5 CTAs per SM; none of it
# GPU-run on main's own tree yet), in priority order: the items a call has no time for run in
# the next call of the same machine (common_run.sh skips those done).
# Calls (docs/status.md, "Next device calls"):
#   1 (cold; ~330 s build, <= 200 s tests, so ~60 s of items): AB_INSTANCES=ON BUDGET=590
#     TEST_TMO=200 TESTS='*Softmax*-*Large* *Ce*-*Large* *LayerNorm*-*Large* *RmsNorm*-*Large*
#     Gemm.* *GemmCases* *DGated* *Rotary*' PYFILES='test_gemm test_cross_entropy test_rotary'
#     ITEMS=scripts/device/ao_items.sh bash scripts/device/call_focus.sh
#     (gtest filters "positive-negative": the row ops' and CE's GPU tests without the Large ones)
#   2 (warm): QUACK_DEMO_COMMIT=<main's short hash> DEMO_TMO=450 BUDGET=580
#     ITEMS=scripts/device/ao_items.sh bash scripts/device/call_demo.sh (the demo ~310 s, then
#     ~260 s of items)
#   3 (warm, if ~10 min are left): BUDGET=560 ITEMS=scripts/device/ao_items.sh bash
#     scripts/device/call_bench.sh (the items left: the fence's cost, issue 16's whole set)
QB=build/d/bench/quack-bench
# Issue 21: the rotary kernels took 3.81 ms of the demo's (d) step (AN3: 12 forward + 12 backward
# calls at 8 x 2048 x 16 x 128) where a clone of the same bytes would take ~2.7 (bench_rotary.py,
# run Z: split fwd 0.144 ms against clone 0.101, 1.43 x). The kernel held 72 registers (3 CTAs of
# 256 per SM); main now runs one head per thread at 48 registers, 5 CTAs per SM (rotary.cu).
# Predicted: split fwd 1.10-1.20 x the same run's clone, fwd_bwd likewise against Z's ratio; the
# demo's rotary time 3.81 -> ~3.0 ms a step. Beyond 1.25 x: the ncu item says what bounds it
# (next: v's copy loads issued with q's and k's, one latency period per token instead of two).
run rotary 90 python3 bench/bench_rotary.py --shapes 8x2048x16x128 --impls split,clone --rounds 3 --out $R/rotary.jsonl
run ncu_rotary_f 90 env OUT=$R bash scripts/ncu_kernel.sh rotary_f 'regex:rotary_kernel' python3 bench/bench_rotary.py --shapes 8x2048x16x128 --impls split --modes fwd --rounds 1
# Issue 17: the rule takes 128x128ppa3d2io at K <= kIoWarpMaxK = 2048 on AN2's one shape
# (0.764 against a1d2's 0.834 ms at 16384 x 5632 x 2048). Predicted a3d2io 5-9 % ahead at K = 1024
# / 2048 at these M, N, a1d2 1-3 % ahead at K = 4096. a3d2io ahead at 4096 too: raise kIoWarpMaxK
# (tile_rule.h); behind at a K <= 2048 shape: lower it.
run dgated_k 240 python3 bench/bench_gemm_fused.py --ops dgated --acts swiglu --impls ours --methods burst --burst-rounds 2 --shapes 16384x5632x1024,8192x14336x2048,16384x14336x2048,8192x5632x4096 --tiles 128x128ppa1d2,128x128ppa3d2io --plain-tile 128x128pp --out $R/dgated_k.jsonl
# The race the fence closes: the softmax -s1 config test failed in 3 of 14 runs without it
# (AN1, AN4), 0 of 14 with it. Five more runs here (~25 s each).
run race_sm1 150 build/d/tests/cpp/quack_gpu_tests --gtest_filter='All/SoftmaxConfigs.MatchesReference/cl_t256v8_s1_fwd' --gtest_repeat=5
# The proxy fence before each stage refill (row_stage_issue, RowPipeline::issue): one
# fence.proxy.async in the issuing thread per refill, a row time >= ~2 us. Predicted kernel-only
# within +-1 % of AN1 on each policy that refills (docs/data/run-AN1_items.txt): cluster register
# -s1, CE bf16 fwd+bwd 1.204 / 2.410 / 2.458 ms; ring, CE fp32 16384 x 65536 fwd+bwd 2.584 and
# recompute 2.318; staged, LayerNorm bwd planned (staged-v4-ra) 3.928 / 3.510 ms at 8192 x 262144
# / 16384 x 131072. Beyond +2 % on any: the fence goes to the refills that follow a read in the
# same iteration only, or to every thread before the barrier (CUTLASS's order for stores).
run fence_ce 150 bash -c "$QB cross-entropy --dtype bf16 --dir fwdbwd --shapes 16384x65536,16384x131072,8192x262144; $QB cross-entropy --dtype fp32 --dir fwdbwd --shapes 16384x65536"
run fence_ln 90 $QB layernorm --wdtype x --bias 1 --dir bwd --shapes 8192x262144,16384x131072 --ms 150
# Issue 16's whole set by the acceptance method (burst) with e128 in the rule: predicted
# 8192 x 8192 x 128 from 0.79 to 0.90-0.93 x cuBLAS (AM1 forced: 0.91 kernel-only, 0.923 burst
# x max), the K >= 1024 shapes on 128x128pp 1-3 % up (AN1), the rest unchanged.
run gemm_set 330 python3 bench/bench_gemm.py --methods burst --burst-rounds 2 --out $R/gemm_set.jsonl
