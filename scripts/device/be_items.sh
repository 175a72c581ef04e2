# Run BE (next session): the GEMM's stream-K rule off beyond 256 k-blocks a tile
# (StreamKSchedule::kMaxRuleKBlocks), its GPU tests and its speed; then issue 20's kernel table
# on an H200. Cold call, carry [".prebuilt-lib", ".peers/quack-0.2.0-site.tar.xz"], kind nvidia-h200:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF TESTS='*StreamK* Gemm.*' PYFILES='test_gemm' TEST_TMO=200
#   BUDGET=590 ITEMS=scripts/device/be_items.sh bash scripts/device/call_focus.sh
# then warm: ITEMS=scripts/device/be_items.sh bash scripts/device/call_bench.sh (the items left).
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
# long_k_rule: predicted (run BD's "off" column, H100): 4096 x 4096 x 32768 / 128256 ~717 / ~755
# TFLOP/s with the rule (unset) as with =0; K = 16384 shapes unchanged by the rule (stream-K
# still allowed there: AA3's +9 % / +5 % at 11264 x 2048 and 2048 x 5632, H200). Two passes,
# the order alternating (BD ran the rule first each time).
run long_k_rule 150 bash -c "$CARD; for s in 0 auto 0 auto; do echo streamk=\$s; QUACK_GEMM_STREAMK=\$s python3 bench/bench_gemm.py --shapes 4096x4096x16384,4096x4096x32768,4096x4096x128256,11264x2048x16384,2048x5632x16384 --layouts rr --methods burst --impls ours,cublas --burst-rounds 2 2>&1 | grep '^| [0-9]*x[0-9]*x[0-9]* | rr | burst'; done"
# lce_kernels: issue 20's kernel table (run BD on the H100: ours 77.96 ms of kernels, QuACK
# untuned 73.05; the dweight GEMMs +2.56 ms) on the bars' card; then the acceptance method.
run lce_kernels 250 bash -c "$CARD; python3 -u bench/bench_linear_ce.py --quick --kernels ours,quack_untuned"
run lce_accept 200 bash -c "python3 -u bench/bench_linear_ce.py --quick --impls ours,quack_untuned,gemms,cublas --rounds 3 --out $R/lce.jsonl"
