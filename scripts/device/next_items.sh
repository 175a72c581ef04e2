# The session after run AE (device build, Python): carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=OFF BUDGET=585 TEST_TMO=200 TESTS='' PYFILES=''
#   ITEMS=scripts/device/next_items.sh bash scripts/device/call_focus.sh
# Done items skip on a later call of a warm machine. docs/status.md "Open threads" says why.
# Softmax fwd's acceptance gap (issue 15; AE3: not the clock, not the data): ours through _C into
# a preallocated output (quack-bench's buffers) and on offset buffers, beside the public call.
run diag_place 150 python3 scripts/diag_acceptance_gap.py --op softmax --shapes 16384x65536,8192x262144 --placement
# Issue 15's anchor table by the acceptance method (not run since O / R / U), first half.
run anchors_fwd 300 python3 bench/bench_rows.py --dtypes bf16 --ops rmsnorm_fwd,softmax_fwd,log_softmax_fwd,layernorm_fwd --out $R/anchors_fwd.jsonl --plot $R/anchors_fwd.png
# (second half: anchors_bwd, last)
# Top-k fp32 beside QuACK under ncu (issue 19).
ncu_sass() { mkdir -p $R/$1; ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/ncu_$1 python3 scripts/ncu_gemm_quack.py "${@:2}" > $R/$1/ncu.log 2>&1; tail -3 $R/$1/ncu.log; python3 scripts/ncu_gemm_quack.py --report /tmp/ncu_$1.ncu-rep; python3 scripts/ncu_gemm_quack.py --sass /tmp/ncu_$1.ncu-rep $R/$1; }
run sass_topk_f32 150 bash -c "$(declare -f ncu_sass); R=$R; ncu_sass topk_f32 topk 65536 1024 8 fp32"
# Issue 15's anchor table, second half.
run anchors_bwd 300 python3 bench/bench_rows.py --dtypes bf16 --ops rmsnorm_bwd,softmax_bwd,log_softmax_bwd,layernorm_bwd --out $R/anchors_bwd.jsonl --plot $R/anchors_bwd.png
