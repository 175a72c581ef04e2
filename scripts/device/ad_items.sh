# Run AD, call 2 (device build, Python): carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=OFF BUDGET=585 TEST_TMO=200 TESTS='*Softmax* *LayerNorm* *Topk*'
#   PYFILES='test_softmax test_layernorm test_topk'
#   ITEMS=scripts/device/ad_items.sh bash scripts/device/call_focus.sh
# Softmax / log_softmax forwards on cl-t256v8, LayerNorm's on cl-t256v8-s1 (issue 15; planned
# since run AD's first call) by the acceptance method beside QuACK 0.2.0.
run rows_long 150 python3 bench/bench_rows.py --ops softmax_fwd,log_softmax_fwd,layernorm_fwd --dtypes bf16 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack --out $R/rows_long.jsonl --plot $R/rows_long.png
# Cross-entropy's fwd+dx kernel after the per-vector fix-up (issue 18): instructions and stalls
# (AC0: 746 M warp instructions at 16384 x 65536).
run ncu_ce_dx 120 env KBASE=demangled bash scripts/ncu_kernel.sh ce_dx_fix 'regex:CrossEntropyFwd<true' build/d/bench/quack-bench cross-entropy --dtype bf16 --dir fwdbwd --shapes 16384x65536 --ms 1
