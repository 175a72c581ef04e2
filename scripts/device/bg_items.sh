# Run BG: the LCE's dweight on 128x192 pingpong with the C ring in production (instances.txt:
# the fp32-accumulating halves and the last chunk's _cf32 GEMM, bf16 and f16). Cold call, carry
# [".prebuilt-lib", ".peers/quack-0.2.0-site.tar.xz"], kind nvidia-h200:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF TESTS='Gemm.* LcePaths.*' PYFILES='test_linear_cross_entropy'
#   TEST_TMO=200 BUDGET=560 ITEMS=scripts/device/bg_items.sh bash scripts/device/call_focus.sh
# Predicted (H100; run BF forced the tile on the f32 group only: kernels 74.54 ms, the _cf32 GEMM
# 3.82 ms on 128x128 pingpong): kernels ~73.7 ms (the _cf32 GEMM ~3.0 like the f32 halves),
# QuACK untuned's 73.2; by the acceptance method ours/quack_untuned 1.00-1.04 (BE: 1.092).
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
run lce_kernels 250 bash -c "$CARD; python3 -u bench/bench_linear_ce.py --quick --kernels ours,quack_untuned"
run lce_accept 200 bash -c "python3 -u bench/bench_linear_ce.py --quick --impls ours,quack_untuned,gemms --rounds 4 --out $R/lce.jsonl"
# The CE training pair's entries, only on an H200 (status.md, Next device calls: BB3 read them on the H100).
run ce_entries 120 bash -c "$CARD | grep -q H200 && build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x65536,16384x131072,8192x262144 --dir fwdbwd --config all --ms 40 || echo 'not an H200: skipped'"
