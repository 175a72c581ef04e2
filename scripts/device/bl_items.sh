# Run BL: the next device session's items, most valuable first. One call, cold or warm (build/d
# from .prebuilt-lib when its stamp matches; check it here first, docs/status.md), carry
# [".prebuilt-lib", ".peers/quack-0.2.0-site.tar.xz"], kind nvidia-h200:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=590 ITEMS=scripts/device/bl_items.sh bash scripts/device/call_bench.sh
# and the same command again (warm or cold) for the items left: an item done on a warm machine
# is skipped (/tmp/done). Items marked [H200] print "not an H200: skipped" on an H100 (the bars'
# card is the H200; their H100 readings exist: runs BA2, BB3); the others read on either card.
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
H200="$CARD | grep -q H200"  # an [H200] item: bash -c "if $H200; then ...; else $SKIP; fi"
SKIP="echo 'not an H200: skipped'"
# lce_events (~25 s): issue 20's call against our three GEMMs by do_bench with nothing between
# (BK1, H100: 1.026 x); predicted within 1 % of BK1 on an H100.
run lce_events 120 bash -c "$CARD; python3 -u bench/bench_linear_ce.py --quick --events 12"
# lce_accept (~30 s) and lce_kernels (~20 s): the acceptance table beside QuACK untuned and one
# call's kernels (BH1, H100: 1.018 x QuACK untuned; BG1's kernel table).
run lce_accept 200 bash -c "$CARD; python3 -u bench/bench_linear_ce.py --quick --impls ours,quack_untuned,gemms --rounds 8 --out $R/lce.jsonl"
run lce_kernels 150 bash -c "python3 -u bench/bench_linear_ce.py --quick --kernels ours,quack_untuned"
# lce_first_chunk (~60 s): the first chunk's dweight halves (no C) on 128x192ppa1d2 too, by
# forcing the tile on both fp32 groups (f32_mm matches ..._f32_mm and ..._cf32_mm) against the
# rule, which keeps them on 128x256 (no C, no ring: gemm.cpp, choose_instance). Predicted from
# BF1 (forced: 7 fp32 halves 21.22 ms) against BG1 (rule: 15.87 + 6.15 ms): -0.5 to -0.9 ms of
# kernels a call. If the forced call's kernels are >= 0.5 ms (and its acceptance median not
# slower) below auto's, let the rule offer C-ring instances to fp32-D problems without C too.
run lce_first_chunk 200 bash -c "QUACK_GEMM_TILE=f32_mm:128x192ppa1d2 python3 -u bench/bench_linear_ce.py --quick --kernels ours | grep -E 'kernels|gemm_kernel' | cut -c1-80; python3 -u bench/bench_linear_ce.py --quick --impls ours --tiles auto,f32_mm:128x192ppa1d2 --rounds 6 --out $R/lce_first_chunk.jsonl"
# lce_v65536 (~70 s): V = 65536 takes 8192-token chunks (a 1 GiB logits budget), so the
# C-reading dweight halves are 32768 x 4096 x 8192: K in [kMidK, kLongK), where the rule weighs
# 128x256 against 128x192 by waves x tile area (tile_rule.cpp cost(), by hand: 1.978e6 against
# 1.994e6, 128x256 by 0.8 %)
# with rates measured on plain bf16 GEMMs, while a C-reading fp32 epilogue on the cooperative
# tile waits in series (AJ6: +20-34 % a half). Predicted: auto's kernel table shows 128x256 on
# the C-reading halves; forced 128x192ppa1d2 1-2 ms faster a call. If forced reads >= 1 % faster,
# keep the cooperative tile out of C-reading fp32 problems where a C-ring tile qualifies.
run lce_v65536 200 bash -c "python3 -u bench/bench_linear_ce.py --shapes 16384x4096x65536 --kernels ours | grep -E 'kernels|gemm_kernel' | cut -c1-80; python3 -u bench/bench_linear_ce.py --shapes 16384x4096x65536 --impls ours --tiles auto,f32_mm:128x192ppa1d2 --rounds 4 --out $R/lce_v65536.jsonl"
# ncu_dx (~90 s): the LCE's dx GEMM shape (rr, 4096 x 4096 x 128256) under Nsight Compute:
# ours (128x256e64), QuACK's (128x192 pingpong), cuBLAS's (nvjet 256x128 1x2; ~1.0-1.6 ms a call
# ahead of ours in QuACK's LCE, BE1 / BG1). The report's clocks, tensor-pipe activity, DRAM bytes
# and stall reasons say where ours loses; the .ncu-rep comes back in the archive.
run ncu_dx 200 bash -c "ncu --clock-control none --profile-from-start off --set full -f -o $R/ncu_dx python3 scripts/ncu_gemm_quack.py 4096 4096 128256 > $R/ncu_dx_run.log 2>&1; python3 scripts/ncu_gemm_quack.py --report $R/ncu_dx.ncu-rep"
# lce_accept_rested (~90 s): the acceptance table with 1 s of GPU idle before each do_bench
# (--rest-ms 1000), so that no implementation heats the card for the next. Predicted: the
# rounds' spread narrows from BH1's 77.7-90.0 ms to within +-3 %, ours / gemms toward BK1's
# 1.026 (the rotating table read 1.086 in BG1), ours / QuACK untuned within 1 % of lce_accept's.
run lce_accept_rested 200 bash -c "python3 -u bench/bench_linear_ce.py --quick --impls ours,quack_untuned,gemms --rounds 6 --rest-ms 1000 --out $R/lce_rested.jsonl"
# ce_entries [H200] (~60 s): the CE training pair's entries (BB3, H100: cl-t512v8-x2/-x4/-x8
# 2.8-4.5 % ahead of the planned cl-t256v8-s1; run AB, H200: the staged entry ahead).
run ce_entries 150 bash -c "if $H200; then build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x65536,16384x131072,8192x262144 --dir fwdbwd --config all --ms 40; else $SKIP; fi"
# ce_32768_ring [H200]: predicted (run W on the unhinted ring 1.007 x QuACK; AZ3 on the map
# 0.950; BA2, H100, on the hinted ring 0.988): the backward from lse >= 1.0 x QuACK, the scaled
# step 0.97-1.0; then every backward entry kernel-only.
run ce_32768_ring 150 bash -c "if $H200; then python3 bench/bench_rows.py --ops ce_bwd,ce_fwd_bwd_half,ce_fwd_bwd --dtypes bf16 --shapes 16384x32768 --impls ours,quack --rounds 3 --plot '' --out $R/ce_32768.jsonl && build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x32768 --dir bwd --config all --ms 60; else $SKIP; fi"
# rows_ring [H200]: the forwards the hinted ring carries. Predicted against AL2 / AG1: rmsnorm fwd
# bf16 +2 % (65536-262144), layernorm fwd bf16 65536 +3-4 %, 262144 within 0.5 % (0.874 x copy:
# still missed), fp32 layernorm 262144 within 0.5 % (0.819), rmsnorm fp32 131072 / 262144 +0-2 %
# (0.986 / 0.983 x QuACK).
run rows_ring 200 bash -c "if $H200; then python3 bench/bench_rows.py --ops rmsnorm_fwd,layernorm_fwd --dtypes bf16,fp32 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack --rounds 3 --plot '' --out $R/rows_ring.jsonl; else $SKIP; fi"
