# The benches after call_focus.sh's tests for the session after run Z, in priority order; done
# ones skip on a later call (/tmp/done).
# Top-k by the acceptance method: the fp32 rule now takes the fit kernel at power-of-2 N ≤ 2048,
# k ≤ 16 (run Z3 kernel-only: (1024, 8) 0.089 ms, (2048, 16) 0.247 against the queue's 0.334).
run topk 120 python3 bench/bench_topk.py --out $R/topk.jsonl
# fp32 top-k plans at the new edges and generic rows (unmeasured since topk-f32): the planned
# entry first, then every configuration.
run topk_f32_cfg 90 build/d/bench/quack-bench topk --dtype fp32 --config all --shapes 65536x1000x8,65536x2048x8,65536x1024x16,65536x512x16
# Cross-entropy forward, every configuration (a persistent cluster entry, if merged, is forced
# only: compare it with the planned cl-t256v8 at 3.53 TB/s, run Z3).
run ce_fwd_cfg 120 build/d/bench/quack-bench cross-entropy --dtype bf16 --dir fwd --config all --shapes 16384x65536,16384x131072,8192x262144
# GEMM ours beside QuACK under ncu with the stall reasons (run Z2 printed none).
ncu_pair() { ncu --clock-control none --profile-from-start off --set full -f -o /tmp/ncu_$1 python3 scripts/ncu_gemm_quack.py $2 $3 $4 > /dev/null 2>&1; python3 scripts/ncu_gemm_quack.py --report /tmp/ncu_$1.ncu-rep; }
run ncu_gemm_8192 150 bash -c "$(declare -f ncu_pair); ncu_pair g8192 8192 8192 8192"
