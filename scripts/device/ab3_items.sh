# Run AB's third call (sourced by call_focus.sh): the fwd+dx on cl-t256v8-s1 and the top-k
# filter at N = 2048 only, by the acceptance method.
run ce_rows 100 python3 bench/bench_rows.py --ops ce_fwd_bwd,ce_fwd_bwd_half --dtypes bf16 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack --out $R/ce_rows.jsonl
run topk_acc 60 python3 bench/bench_topk.py --dtypes fp32 --shapes 65536x1024x8,65536x2048x8,65536x4096x32 --out $R/topk.jsonl
