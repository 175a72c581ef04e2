# The benches after call_focus.sh's tests for the session after run AC, in priority order; done
# ones skip on a later call (/tmp/done). Suggested first call: AB_INSTANCES=OFF BUDGET=585
# TEST_TMO=240 TESTS='*Ce* *SoftmaxConfigs* *LayerNormConfigs* *Lce*'
# PYFILES='test_linear_cross_entropy test_softmax test_layernorm'
# ITEMS=scripts/device/next_items.sh bash scripts/device/call_focus.sh (`*Ce*`: the
# parametrized All/CeConfigs, CeOptions, CeShapes have not run since AB; run AC's changes
# passed CeTrain.*, CeCases.* and test_cross_entropy only); then a
# warm call_demo.sh (the demo with stream-K on in Python and run AC's cross-entropy).
# Softmax / log_softmax forwards on the cluster register entries (compiled since run AC, forced
# only): against the plan's (t1024v4, rings) at the anchor shapes, QuACK's geometry (issue 15:
# QuACK's softmax fwd 4.12-4.19 TB/s against ours 3.50-3.89 in run O).
run sm_configs 150 build/d/bench/quack-bench softmax --dtype bf16 --dir fwd --shapes 16384x32768,16384x65536,16384x131072,8192x262144 --config all --ms 30
# LayerNorm fwd likewise (issue 15: 0.70 x copy at 8192 x 262144 on the ring; bf16 weight and
# bias: the persistent entries too).
run ln_configs 150 build/d/bench/quack-bench layernorm --dtype bf16 --wdtype x --dir fwd --shapes 16384x65536,16384x131072,8192x262144 --config all --ms 30
# Top-k fp32 (issue 19): ours beside QuACK's under ncu (kernel-wide figures, then the SASS lines
# with the most stall samples): where the ~20 µs fixed part of ours goes (QuACK ~9 µs).
ncu_sass() { mkdir -p $R/$1; ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/ncu_$1 python3 scripts/ncu_gemm_quack.py "${@:2}" > $R/$1/ncu.log 2>&1; tail -3 $R/$1/ncu.log; python3 scripts/ncu_gemm_quack.py --report /tmp/ncu_$1.ncu-rep; python3 scripts/ncu_gemm_quack.py --sass /tmp/ncu_$1.ncu-rep $R/$1; }
run sass_topk_f32 200 bash -c "$(declare -f ncu_sass); R=$R; ncu_sass topk_f32 topk 65536 1024 8 fp32"
# Cross-entropy's fwd+dx kernel after the fix-up (issue 18): instructions and stalls (AC0: 746 M).
run ncu_ce_dx 150 env KBASE=demangled bash scripts/ncu_kernel.sh ce_dx_fix 'regex:CrossEntropyFwd<1' build/d/bench/quack-bench cross-entropy --dtype bf16 --dir fwdbwd --shapes 16384x65536 --ms 1
# Small rows by the acceptance method (compile's reading collapses in some calls: AA3, AC).
run small 90 python3 bench/bench_rows.py --ops rmsnorm_fwd,softmax_fwd,layernorm_fwd,ce_fwd --dtypes bf16 --shapes 32768x256,32768x1024 --impls ours,compile --out $R/small.jsonl
