# Run AA's third call (sourced by call_focus.sh): after the GEMM pingpong's named-barrier turns,
# stream-K (off unless QUACK_GEMM_STREAMK), the cluster register kernel's rank-0 gather
# (loss-only cross-entropy) and division-free prologue, the fp32 top-k rule for any N ≤ 2048,
# LayerNorm fwd at 40 registers (ln-regs; r32t8v4 2.20 TB/s kernel-only at 32768 x 256 in Z3).
# Baselines from AA's first two calls: ce fwd cl-t256v8 3.656 / 3.483 TB/s at 16384 x 65536 /
# 131072 (kernel-only); ncu 8192³ ours 1452 / QuACK 1428 µs, ce 590 / 540 µs.
run ce_fwd_cfg 60 build/d/bench/quack-bench cross-entropy --dtype bf16 --dir fwd --config all --shapes 16384x65536,16384x131072,8192x262144
run ln_cfg 40 build/d/bench/quack-bench layernorm --dtype bf16 --dir fwd --config all --shapes 32768x256,32768x1024
run sk_ab 150 bash -c 'for s in 0 1 0 1; do for l in rc rr; do echo "STREAMK=$s $l"; QUACK_GEMM_STREAMK=$s build/d/bench/quack-bench gemm --shapes 16384x2048x5632,16384x2048x11264,11264x2048x16384 --layout $l; done; echo "STREAMK=$s cr"; QUACK_GEMM_STREAMK=$s build/d/bench/quack-bench gemm --shapes 2048x2048x16384,2048x5632x16384 --layout cr; done'
ncu_pair() { ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/ncu_$1 python3 scripts/ncu_gemm_quack.py "${@:2}" > /dev/null 2>&1; python3 scripts/ncu_gemm_quack.py --report /tmp/ncu_$1.ncu-rep; }
run ncu_g8192 90 bash -c "$(declare -f ncu_pair); ncu_pair g8192 8192 8192 8192"
run ncu_ce65536 90 bash -c "$(declare -f ncu_pair); ncu_pair ce65536 ce 16384 65536"
run topk_f32 30 build/d/bench/quack-bench topk --dtype fp32 --shapes 65536x1000x8,65536x1000x16,65536x2040x16,65536x100x8
run ce_rows 120 python3 bench/bench_rows.py --ops ce_fwd,ce_fwd_bwd --dtypes bf16 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack,eager --out $R/ce_rows.jsonl --plot $R/ce.png
run ln_small 90 python3 bench/bench_rows.py --ops layernorm_fwd --dtypes bf16 --shapes 32768x256,32768x1024 --impls ours,compile,quack --out $R/ln_small.jsonl --plot $R/ln.png
run gemm 150 python3 bench/bench_gemm.py --shapes 8192x8192x8192,16384x2048x5632 --layouts rr,rc --methods burst,sustained --rounds 8 --out $R/gemm.jsonl
