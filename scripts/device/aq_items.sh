# Run AQ's items in priority order (common_run.sh skips those a warm machine has done).
# Calls (docs/status.md, "Next device calls"):
#   1 (cold; every GPU test): where .prebuilt-lib's stamp is main's (`bash scripts/device/stamp.sh
#     lib` against `cat .prebuilt-lib/stamp`; else re-pack from CI's build: `cd /work/ci && bash
#     scripts/device/prebuild_lib.sh`, copy .prebuilt-lib over): PREBUILT_LIB=1 AB_INSTANCES=OFF
#     BUDGET=565 bash scripts/device/call_tests.sh, carry [".prebuilt-lib", ".whl", ".data"];
#     otherwise BUDGET=565 bash scripts/device/call_tests.sh, carry [".peers", ".whl", ".data"].
#     A cut suite's rest: GTEST_LIST=<file of test names or patterns> (PY_FILES, AFTER: see
#     call_tests.sh) in a later call.
#   2 (warm): BUDGET=<status's budget_left_s − 45, at most 560> ITEMS=scripts/device/aq_items.sh
#     bash scripts/device/call_bench.sh, carry [".peers", ".whl", ".data"].
QB=build/d/bench/quack-bench
# Issue 17: gelu_erf's Φ by Numerical Recipes' erfcc (one MUFU.RCP, one MUFU.EX2, ten FFMA) in
# place of erff, which read 1.478 x plain (act) / 1.511 (dact) at 16384 x 14336 x 4096 in AP2
# (gelu_tanh_approx 1.095 / 1.106, quick_gelu 1.103 / 1.100). Predicted: gelu_erf within 2 % of
# quick_gelu at both shapes (act ~1.10, dact ~1.10 x plain at 16384 x 14336 x 4096; <= 1.03 at
# 8192^3). Beyond +5 %: the second MUFU (rcp) or the FFMA chain costs more issue slots than
# quick_gelu's sigmoid in the pingpong epilogue (then a lower-degree fit).
run act_erf 200 python3 bench/bench_gemm_fused.py --impls ours --ops act,dact --acts gelu_tanh_approx,gelu_erf,quick_gelu --methods burst --burst-rounds 2 --shapes 16384x14336x4096,8192x8192x8192 --out $R/act_erf.jsonl
# Issue 16 at the power limit: AP2 read QuACK 5-10 % ahead sustained at clocks no higher than
# ours (medians of nvidia-smi samples), and level per clock rested. Run AA's ncu (8192^3, clocks
# not locked) counted 163.0 M instructions executed for ours against QuACK's 138.6 M (+18 %) at
# the same duration: issue work that costs power. Predicted (diagnosis, not a bar): the gap in
# smsp__inst_executed holds at the current tile (+10-20 %), dram bytes within 5 % of QuACK's
# (the L2 hit rates were level: 73.6 / 73.2 %). Instructions level instead: the power gap is
# elsewhere (the memory side: compare dram__bytes and lts throughput).
# (the report stays in /tmp: a --set full report would push the call's archive over 16 MiB)
run gemm_ncu 240 bash -c "ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/g8192 python3 scripts/ncu_gemm_quack.py 8192 8192 8192 > /dev/null && python3 scripts/ncu_gemm_quack.py --report /tmp/g8192.ncu-rep"
