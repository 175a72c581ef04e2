# The session after run AD, call 2 (device build, Python): carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=OFF BUDGET=585 TEST_TMO=200 TESTS=''
#   PYFILES='test_softmax test_layernorm test_cross_entropy'
#   ITEMS=scripts/device/next_items.sh bash scripts/device/call_focus.sh
# then a warm call_demo.sh (not run since X2). Done items skip on a later call of a warm machine.
# Long-row forwards beside QuACK (issue 15) and the softmax acceptance gap.
run rows_long 150 python3 bench/bench_rows.py --ops softmax_fwd,log_softmax_fwd,layernorm_fwd --dtypes bf16 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack --out $R/rows_long.jsonl --plot $R/rows_long.png
run diag_gap 80 python3 scripts/diag_acceptance_gap.py --op softmax --shapes 16384x65536,8192x262144
# The CE training steps by the acceptance method (issue 18; the recompute off the ring since AD).
run ce_steps 150 python3 bench/bench_rows.py --ops ce_fwd_bwd,ce_fwd_bwd_half --dtypes bf16 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack --out $R/ce_steps.jsonl --plot $R/ce_steps.png
# Top-k fp32 beside QuACK under ncu (issue 19: where our ~20 us fixed part goes; QuACK ~9 us).
ncu_sass() { mkdir -p $R/$1; ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/ncu_$1 python3 scripts/ncu_gemm_quack.py "${@:2}" > $R/$1/ncu.log 2>&1; tail -3 $R/$1/ncu.log; python3 scripts/ncu_gemm_quack.py --report /tmp/ncu_$1.ncu-rep; python3 scripts/ncu_gemm_quack.py --sass /tmp/ncu_$1.ncu-rep $R/$1; }
run sass_topk_f32 150 bash -c "$(declare -f ncu_sass); R=$R; ncu_sass topk_f32 topk 65536 1024 8 fp32"
