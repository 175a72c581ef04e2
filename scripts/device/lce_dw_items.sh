# Branch lce-dw (issue 20): one call (cold), production build with Python (no A/B instances);
# carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=OFF BUDGET=590 TEST_TMO=150 TESTS='' PYFILES=''
#   ITEMS=scripts/device/lce_dw_items.sh bash scripts/device/call_focus.sh
# (the GPU tests are the first items below, so the benches get what the budget leaves; a
# second warm call with BUDGET=560 ITEMS=scripts/device/lce_dw_items.sh bash
# scripts/device/call_bench.sh continues where this one stopped: items already done skip).
#
# What changed: (a) the accumulating dweight GEMMs (fp32 D = acc + C, chunks 2-4) on 128x128
# pingpong with the C ring (128x128ppa1d2, now in instances.txt; the rule takes a C-ring
# instance only where C is read, so chunk 1 keeps the cooperative 128x256); (c) the last
# chunk's workspace half stored straight into the bf16 dweight by its GEMM (the _cf32 mm
# instance, after the in-dw half's compaction), no lce_cast of 1.05 GB at the end.
# Before (this session's --events 200): ours 85.61 ms b2b, GEMM sum 80.68 -> 1.061 x.
# Predicted: (a) -1.5..-2.5 ms (the dweight halves of chunks 2-4 read 3.57-3.99 ms against 2.98
# for chunk 1's write-only; run U2 forced the ring tile on all 8 halves: -1.65 ms, chunk 1 then
# paying ~0.36 ms per half more than on 128x256), (c) -0.35..-0.45 ms (the 0.406 ms cast, the last
# GEMM's fp32 stores become bf16 under the other warpgroup's mainloop). Ours ~83.2 ms (82.6-84.0)
# -> ~1.031 x (1.024-1.041) the unchanged GEMM sum (against: AD3's `lce-overhead`, the same ring
# tile on every half plus stream-K, read 1.059 x where 1.018-1.028 was predicted; here the ring
# tile runs only on the halves that read C, without stream-K); memory unchanged (3.06 GiB). Bits: loss, dx
# and dW identical to main's path (check_lce_dw_bits.py: "old" = f32_mm:128x256 + cast at end).
# In the trace: 8 dW halves of 2.98 (chunk 1, 128x256) and ~3.1-3.4 ms (ring), no lce_cast of
# 0.406 ms, the 15 compaction launches before the last dW half.
# GPU tests, two shards side by side per filter (as call_focus.sh): the LCE suites (every
# dweight path: the split accumulator with the last chunk's direct store, the workspace-only
# accumulator with and without accumulate, forced dweight tiles), then the GEMM tests of the
# two instances (fp32 accumulate in place, mm, on every tile and "auto"; fp32 C into bf16 D, mm).
# (timeout runs bash -c, not a function: the shards' loop is spelled out in SHARDS)
SHARDS='for i in 0 1; do GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i build/d/tests/cpp/quack_gpu_tests --gtest_brief=1 --gtest_filter="$1" > "$0_$i.log" 2>&1 & done; wait; tail -n 3 "$0"_*.log; ! grep -q FAILED "$0"_*.log'
run g_lce 240 bash -c "$SHARDS" $R/g_lce '*Lce*:*LinearCrossEntropy*-*Large*'
run g_gemm 200 bash -c "$SHARDS" $R/g_gemm 'Gemm.EveryTileConfig:Gemm.Float32CIntoBf16D:Gemm.DynamicScheduler:Gemm.StreamK'
run py_lce 200 python3 -m pytest tests/python/test_linear_cross_entropy.py -q -p no:cacheprovider --maxfail=20
run bits 150 python3 scripts/check_lce_dw_bits.py
# The bar (ours <= 1.04 x our three GEMMs, back to back), then the same build with main's path
# (the cooperative dweight tile on every chunk and the cast at the end) for an A/B in one run.
run lce_events 300 python3 bench/bench_linear_ce.py --quick --events 200 --out $R/lce_ev.jsonl
run lce_events_old 300 env QUACK_GEMM_TILE=f32_mm:128x256 QUACK_LCE_DW_CAST_AT_END=1 python3 bench/bench_linear_ce.py --quick --events 200 --out $R/lce_ev_old.jsonl
run lce_trace 90 python3 bench/bench_linear_ce.py --quick --trace $R/lce_trace.json
# The acceptance table at the main shape (time and peak memory; QuACK where it imports).
run lce_accept 300 python3 bench/bench_linear_ce.py --quick --impls ours,ours_lowmem,quack,compile,gemms --rounds 2 --out $R/lce_accept.jsonl
run py_gemm 200 python3 -m pytest tests/python/test_gemm.py -q -p no:cacheprovider --maxfail=20
