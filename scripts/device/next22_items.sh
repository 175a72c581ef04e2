# The session after run AJ, on branch `next22` = main + `topk-regs2` (issue 19) + `lce-dw` (issue
# 20); main already holds `dgated3`'s A/B tiles (issue 17). Check out next22 in the checkout the
# device copies; carry [".peers", ".whl", ".data"]. Two calls fit a session's ~1,800 s (cold start
# ~100 s, an A/B build with Python ~300 s); items done in call 1 skip in call 2.
# Call 1 (cold):
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=110 TESTS='*Topk* *Lce*-*Large*' PYFILES='test_topk test_linear_cross_entropy'
#   ITEMS=scripts/device/next22_items.sh bash scripts/device/call_focus.sh
# Call 2 (warm, within 30 s of call 1):
#   AB_INSTANCES=ON BUDGET=560 ITEMS=scripts/device/next22_items.sh bash scripts/device/call_bench.sh
# Before merging next22 into main, every GPU test (a third call, or the next session's first):
#   AB_INSTANCES=ON BUDGET=560 TMO_MAX=400 bash scripts/device/call_tests.sh (~330 s warm).
# Predictions: topk_regs2_items.sh, lce_dw_items.sh and dgated3_items.sh (their headers).
QB=build/d/bench/quack-bench
# Correctness first: the two new production GEMM instances, the bits of both candidate sets.
SHARDS='for i in 0 1; do GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i build/d/tests/cpp/quack_gpu_tests --gtest_brief=1 --gtest_filter="$1" > "$0_$i.log" 2>&1 & done; wait; tail -n 3 "$0"_*.log; ! grep -q FAILED "$0"_*.log'
run g_gemm 200 bash -c "$SHARDS" $R/g_gemm 'Gemm.EveryTileConfig:Gemm.Float32CIntoBf16D:Gemm.DynamicScheduler:Gemm.StreamK'
run bits 150 python3 scripts/check_lce_dw_bits.py
run tile_same 90 python3 scripts/check_tile_same.py --base 128x128ppa1d2 --tiles 128x128ppa1d2cf,128x128ppa1d2er,128x128ppa1d2cfer --must-differ 128x128ppa1d2diag1
# Issue 19 (topk-regs2).
run topk_r2_k 60 bash -c "$QB topk --dtype fp32 --shapes 65536x1024x8,65536x2048x8,65536x1024x16; $QB topk --dtype fp32 --shapes 65536x1024x8 --path bitonic-fit"
run topk_r2_p1 45 python3 bench/bench_topk.py --dtypes fp32 --shapes 65536x1024x8 --out $R/topk_r2_p1.jsonl
run topk_r2_p2 45 python3 bench/bench_topk.py --dtypes fp32 --shapes 65536x1024x8 --out $R/topk_r2_p2.jsonl
# Issue 20 (lce-dw): the bar, then main's path in the same build.
run lce_events 300 python3 bench/bench_linear_ce.py --quick --events 200 --out $R/lce_ev.jsonl
run lce_events_old 300 env QUACK_GEMM_TILE=f32_mm:128x256 QUACK_LCE_DW_CAST_AT_END=1 python3 bench/bench_linear_ce.py --quick --events 200 --out $R/lce_ev_old.jsonl
# Issue 17 (dgated3's candidates and diagnostics; burst).
DG=128x128ppa1d2,128x128ppa1d2diag3,128x128ppa1d2diag4,128x128ppa1d2diag5,128x128ppa1d2cf,128x128ppa1d2er,128x128ppa1d2cfer
run dgated3 300 python3 bench/bench_gemm_fused.py --ops dgated --acts swiglu --impls ours --methods burst --burst-rounds 2 --shapes 16384x5632x2048,16384x14336x4096,8192x8192x8192 --tiles $DG --plain-tile 128x128pp --out $R/dgated3.jsonl
# If time is left: the LCE trace and table (QuACK's JIT has never fit a call: not asked).
run lce_trace 90 python3 bench/bench_linear_ce.py --quick --trace $R/lce_trace.json
run lce_accept 240 python3 bench/bench_linear_ce.py --quick --impls ours,ours_lowmem,compile,gemms --rounds 2 --out $R/lce_accept.jsonl
