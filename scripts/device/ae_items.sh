# Run AE, call 2 (device build, Python), branch ae: carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=OFF BUDGET=585 TEST_TMO=200 TESTS='Topk* CeTrain.* *SoftmaxConfigs*'
#   PYFILES='test_softmax test_layernorm test_cross_entropy'
#   ITEMS=scripts/device/ae_items.sh bash scripts/device/call_focus.sh
# Softmax fwd held entries (cl-t512v4-h new) beside cl-t256v8.
# Top-k fp32 (issue 19): the staged bitonic instance (-fit-stg, forced only; helper's prediction
# 0.072-0.080 ms at (65536, 1024, 8) against the plan's 0.0889 and QuACK's 0.0781).
run sm_held 40 build/d/bench/quack-bench softmax --dtype bf16 --dir fwd --shapes 16384x65536,8192x262144 --config all --ms 20
run topk_cfg 60 build/d/bench/quack-bench topk --dtype fp32 --config all --shapes 65536x1024x8,65536x2048x8,65536x1024x16 --ms 40
# LayerNorm fwd with fp32 weight and bias at 65536 (the rule plans cl-t256v8 beyond 64 KB; AE1
# measured it at 131072 / 262144 only).
run ln_f32 40 build/d/bench/quack-bench layernorm --dtype bf16 --wdtype fp32 --dir fwd --shapes 16384x65536 --config all --ms 20
# Long-row forwards beside QuACK by the acceptance method (issue 15; LayerNorm back on the ring).
run rows_long 150 python3 bench/bench_rows.py --ops softmax_fwd,log_softmax_fwd,layernorm_fwd --dtypes bf16 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack --out $R/rows_long.jsonl --plot $R/rows_long.png
# The CE training steps by the acceptance method (issue 18; the recompute on the looped entry).
run ce_steps 150 python3 bench/bench_rows.py --ops ce_fwd_bwd,ce_fwd_bwd_half --dtypes bf16 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack --out $R/ce_steps.jsonl --plot $R/ce_steps.png
