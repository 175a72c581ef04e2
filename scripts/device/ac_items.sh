# Run AC's first call (sourced by call_focus.sh): the predicted training forward's loss-only
# kernel on cl-t256v8-s1 (closed launch: the resident clusters), kernel-only with every entry
# forced and by the acceptance method; the top-k L2 lookahead (-l2 lines); small rows before
# any ncu item (compile's reading collapsed after ncu items in AA3 and AC1); then the fp32 top-k
# beside QuACK's under ncu.
run ce_kernel 150 build/d/bench/quack-bench cross-entropy --dtype bf16 --dir all --shapes 16384x65536,16384x131072 --config all --ms 40
run topk_kernel 60 build/d/bench/quack-bench topk --dtype fp32 --shapes 65536x1024x8,65536x2048x8 --config all --ms 40
run ce_rows 120 python3 bench/bench_rows.py --ops ce_fwd_bwd,ce_fwd_bwd_half --dtypes bf16 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack --out $R/ce_rows.jsonl
run small 70 python3 bench/bench_rows.py --ops rmsnorm_fwd,softmax_fwd,layernorm_fwd --dtypes bf16 --shapes 32768x1024 --impls ours,compile --out $R/small.jsonl
ncu_sass() { mkdir -p $R/$1; ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/ncu_$1 python3 scripts/ncu_gemm_quack.py "${@:2}" > $R/$1/ncu.log 2>&1; tail -5 $R/$1/ncu.log; python3 scripts/ncu_gemm_quack.py --report /tmp/ncu_$1.ncu-rep; python3 scripts/ncu_gemm_quack.py --sass /tmp/ncu_$1.ncu-rep $R/$1; }
run sass_topk_f32 200 bash -c "$(declare -f ncu_sass); R=$R; ncu_sass topk_f32 topk 65536 1024 8 fp32"
