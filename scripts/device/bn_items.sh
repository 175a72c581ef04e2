# Run BN: run BL's items for the bars' card (BL1 ran the rest on an H100: git show ec27678:docs/data/run-BL_items.txt).
# Each prints "not an H200: skipped" on an H100 (kind nvidia-h200 may give either card). One call,
# cold or warm, carry [".prebuilt-lib", ".peers/quack-0.2.0-site.tar.xz"], kind nvidia-h200:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=560 ITEMS=scripts/device/bn_items.sh bash scripts/device/call_bench.sh
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
H200="$CARD | grep -q H200"
SKIP="echo 'not an H200: skipped'"
# lce_accept_h200 (~60 s): issue 20's bar figures on the bars' card: the rotating table and the one
# with 1 s rests (BL1, H100: 1.006 / 0.994 x QuACK untuned; tuned QuACK's warm-up autotunes for
# > 420 s, so it is not in the table), then the call against our GEMMs by do_bench (1.026 on H100).
run lce_accept_h200 200 bash -c "if $H200; then python3 -u bench/bench_linear_ce.py --quick --impls ours,quack_untuned,gemms --rounds 4 --rest-ms 1000 --out $R/lce_h200.jsonl; python3 -u bench/bench_linear_ce.py --quick --events 12; else $SKIP; fi"
# gemm_bars_h200 (~150 s): issue 16's bar set on the bars' card with the stream-K threshold at
# 5 % (1c770cd; BQ1, H100: 16384 x 4096 x 14336 1.006 x max sustained), AZ3's command; then
# 2048 x 5632 x 16384 cr, where stream-K (estimate 6.9 %) lost 2-4 % on the H100 (BP1, BQ1) and
# gained 5 % kernel-only here (AA3). Predicted: burst 0.97-1.00, sustained 0.97-1.00 x max;
# 2048 x 5632 x 16384 within +-5 %. Rule: auto behind +nosk by >= 1 % by both methods there ->
# StreamKSchedule::kMinGain 0.07 (keeps 11264 x 2048 x 16384, estimate 9-11 %).
run gemm_bars_h200 220 bash -c "if $H200; then python3 -u bench/bench_gemm.py --quick --burst-rounds 3 --rounds 8 --out $R/gemm_bars.jsonl; python3 -u bench/bench_gemm.py --shapes 2048x5632x16384 --layouts cr --impls ours,cublas --tiles auto,auto+nosk --burst-rounds 3 --batch-ms 1500 --rounds 4 --drop 1 --out $R/sk_2048.jsonl; else $SKIP; fi"
# ce_entries (~60 s): the CE training pair's entries (BB3, H100: cl-t512v8-x2/-x4/-x8 2.8-4.5 %
# ahead of the planned cl-t256v8-s1; run AB, H200: the staged entry ahead). Rule: a family (same
# prefix and thread count, any cluster size) >= 2 % ahead of the planned entry at two of the three
# shapes -> preferred_entry (src/row/row_plan.cpp) takes it for 16-bit rows of 128-512 KB, and
# tests/cpp/host/test_row_plan.cpp follows; else the plan stays.
run ce_entries 150 bash -c "if $H200; then build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x65536,16384x131072,8192x262144 --dir fwdbwd --config all --ms 40; else $SKIP; fi"
# ce_32768_ring: predicted (run W on the unhinted ring 1.007 x QuACK; AZ3 on the map 0.950; BA2,
# H100, on the hinted ring 0.988): the backward from lse >= 1.0 x QuACK, the scaled step 0.97-1.0;
# then every backward entry kernel-only.
run ce_32768_ring 150 bash -c "if $H200; then python3 bench/bench_rows.py --ops ce_bwd,ce_fwd_bwd_half,ce_fwd_bwd --dtypes bf16 --shapes 16384x32768 --impls ours,quack --rounds 3 --plot '' --out $R/ce_32768.jsonl && build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x32768 --dir bwd --config all --ms 60; else $SKIP; fi"
# rows_ring: the forwards the hinted ring carries. Predicted against AL2 / AG1: rmsnorm fwd bf16
# +2 % (65536-262144), layernorm fwd bf16 65536 +3-4 %, 262144 within 0.5 % (0.874 x copy: still
# missed), fp32 layernorm 262144 within 0.5 % (0.819), rmsnorm fp32 131072 / 262144 +0-2 %
# (0.986 / 0.983 x QuACK).
run rows_ring 200 bash -c "if $H200; then python3 bench/bench_rows.py --ops rmsnorm_fwd,layernorm_fwd --dtypes bf16,fp32 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack --rounds 3 --plot '' --out $R/rows_ring.jsonl; else $SKIP; fi"
