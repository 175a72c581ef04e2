# The benches after call_focus.sh's tests for the session after run AB, in priority order; done
# ones skip on a later call (/tmp/done). Suggested call: AB_INSTANCES=OFF BUDGET=585 TEST_TMO=240
# TESTS='CeConfigs* *Gemm*' PYFILES='test_gemm test_mlp' ITEMS=scripts/device/next_items.sh
# bash scripts/device/call_focus.sh; then a warm call_demo.sh (the demo with the Python stream-K
# workspace on by default: its figure X2 predates it).
# Where a dx CTA's time per row goes (issue 18): the fwd+dx kernel on cl-t256v8-s1 beside the
# loss-only cl-t256v8 kernel, ncu stall reasons, one launch each (3rd matching launch).
run ncu_ce_dx 150 bash scripts/ncu_kernel.sh ce_dx_s1 regex:row_cluster_register_prefetch_kernel build/d/bench/quack-bench cross-entropy --dtype bf16 --dir fwdbwd --shapes 16384x65536 --ms 1
run ncu_ce_loss 150 bash scripts/ncu_kernel.sh ce_loss regex:row_cluster_register_kernel build/d/bench/quack-bench cross-entropy --dtype bf16 --dir fwd --shapes 16384x65536 --ms 1
# Top-k fp32 (issue 19): where the fit kernel's time goes at (65536, 1024, 8) (issue-bound or not).
# Ours beside QuACK's (one launch each, SASS-line stall samples; diag_items.sh's ncu_sass).
ncu_sass() { mkdir -p $R/$1; ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/ncu_$1 python3 scripts/ncu_gemm_quack.py "${@:2}" > /dev/null 2>&1; python3 scripts/ncu_gemm_quack.py --report /tmp/ncu_$1.ncu-rep; python3 scripts/ncu_gemm_quack.py --sass /tmp/ncu_$1.ncu-rep $R/$1; }
run sass_topk_f32 150 bash -c "$(declare -f ncu_sass); R=$R; ncu_sass topk_f32 topk 65536 1024 8 fp32"
# Small rows by the acceptance method, repeated (compile's figure moves between calls).
run small 120 python3 bench/bench_rows.py --ops rmsnorm_fwd,softmax_fwd,layernorm_fwd,ce_fwd --dtypes bf16 --shapes 32768x256,32768x1024 --impls ours,compile --out $R/small.jsonl
