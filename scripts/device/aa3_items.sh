# Run AA's third call (sourced by call_focus.sh): after the GEMM pingpong's named-barrier turns
# and the cluster register kernel's rank-0 gather (loss-only cross-entropy) and division-free
# prologue. Baselines from AA's first two calls: ce fwd cl-t256v8 3.656 / 3.483 TB/s at
# 16384 x 65536 / 131072 (kernel-only); ncu 8192³ ours 1452 / QuACK 1428 µs, ce 590 / 540 µs.
run ce_fwd_cfg 60 build/d/bench/quack-bench cross-entropy --dtype bf16 --dir fwd --config all --shapes 16384x65536,16384x131072,8192x262144
ncu_pair() { ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/ncu_$1 python3 scripts/ncu_gemm_quack.py "${@:2}" > /dev/null 2>&1; python3 scripts/ncu_gemm_quack.py --report /tmp/ncu_$1.ncu-rep; }
run ncu_ce65536 90 bash -c "$(declare -f ncu_pair); ncu_pair ce65536 ce 16384 65536"
run ncu_g8192 90 bash -c "$(declare -f ncu_pair); ncu_pair g8192 8192 8192 8192"
run ce_rows 120 python3 bench/bench_rows.py --ops ce_fwd,ce_fwd_bwd --dtypes bf16 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack,eager --out $R/ce_rows.jsonl --plot $R/ce.png
run gemm 150 python3 bench/bench_gemm.py --shapes 8192x8192x8192,16384x2048x5632 --layouts rr,rc --methods burst,sustained --rounds 8 --out $R/gemm.jsonl
