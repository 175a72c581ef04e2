# The session after run AJ, on branch `next22` = main + `topk-regs2` (issue 19) + `lce-dw` (issue
# 20); main already holds `dgated3`'s A/B tiles (issue 17). Check out next22 in the checkout the
# device copies; carry [".peers", ".whl", ".data"].
# Call 1 (cold; A/B build with Python, ~300 s):
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=100 TESTS='*Topk* *Lce*' PYFILES='test_topk test_linear_cross_entropy'
#   ITEMS=scripts/device/next22_items.sh bash scripts/device/call_focus.sh
# Call 2 (warm, within 30 s of call 1; items done before skip):
#   AB_INSTANCES=ON BUDGET=580 ITEMS=scripts/device/next22_items.sh bash scripts/device/call_bench.sh
# Call 3 (warm): every GPU test before merging next22 into main:
#   AB_INSTANCES=ON BUDGET=560 TMO_MAX=400 bash scripts/device/call_tests.sh
# Predictions: each sourced file's header.
source scripts/device/topk_regs2_items.sh
run tile_same 90 python3 scripts/check_tile_same.py --base 128x128ppa1d2 --tiles 128x128ppa1d2cf,128x128ppa1d2er,128x128ppa1d2cfer
run bits 150 python3 scripts/check_lce_dw_bits.py
run lce_events 300 python3 bench/bench_linear_ce.py --quick --events 200 --out $R/lce_ev.jsonl
run lce_events_old 300 env QUACK_GEMM_TILE=f32_mm:128x256 QUACK_LCE_DW_CAST_AT_END=1 python3 bench/bench_linear_ce.py --quick --events 200 --out $R/lce_ev_old.jsonl
source scripts/device/dgated3_items.sh
SHARDS=$(sed -n 's/^SHARDS=//p' scripts/device/lce_dw_items.sh); SHARDS=${SHARDS#\'}; SHARDS=${SHARDS%\'}
run g_gemm 200 bash -c "$SHARDS" $R/g_gemm 'Gemm.EveryTileConfig:Gemm.Float32CIntoBf16D:Gemm.DynamicScheduler:Gemm.StreamK'
run lce_trace 90 python3 bench/bench_linear_ce.py --quick --trace $R/lce_trace.json
run lce_accept 300 python3 bench/bench_linear_ce.py --quick --impls ours,ours_lowmem,quack,compile,gemms --rounds 2 --out $R/lce_accept.jsonl
