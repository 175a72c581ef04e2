# The session after run AC, call 2 (device build, Python): carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=OFF BUDGET=585 TEST_TMO=240 TESTS=''
#   PYFILES='test_cross_entropy test_linear_cross_entropy test_softmax test_layernorm'
#   ITEMS=scripts/device/next_items.sh bash scripts/device/call_focus.sh
# then a warm call_demo.sh (the demo with stream-K on in Python and run AC's cross-entropy: not
# run since X2). Done items skip on a later call of a warm machine (/tmp/done).
# Top-k fp32 (issue 19): ours beside QuACK's under ncu (kernel-wide figures, then the SASS lines
# with the most stall samples): where the ~20 µs fixed part of ours goes (QuACK ~9 µs).
ncu_sass() { mkdir -p $R/$1; ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/ncu_$1 python3 scripts/ncu_gemm_quack.py "${@:2}" > $R/$1/ncu.log 2>&1; tail -3 $R/$1/ncu.log; python3 scripts/ncu_gemm_quack.py --report /tmp/ncu_$1.ncu-rep; python3 scripts/ncu_gemm_quack.py --sass /tmp/ncu_$1.ncu-rep $R/$1; }
run sass_topk_f32 200 bash -c "$(declare -f ncu_sass); R=$R; ncu_sass topk_f32 topk 65536 1024 8 fp32"
# Small rows by the acceptance method (compile's reading collapses in some calls: AA3, AC).
run small 90 python3 bench/bench_rows.py --ops rmsnorm_fwd,softmax_fwd,layernorm_fwd,ce_fwd --dtypes bf16 --shapes 32768x256,32768x1024 --impls ours,compile --out $R/small.jsonl
