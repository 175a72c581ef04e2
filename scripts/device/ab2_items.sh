# Run AB's second call (sourced by call_focus.sh): the integ branch (ce-dx-pipe: cl-t256v8-s1 / -s2
# forced-only; topk-f32-loop: the fp32 candidate filter planned at N 1024 / 2048, k <= 8).
S=16384x65536,16384x131072,8192x262144
run ce_cfg 90 build/d/bench/quack-bench cross-entropy --dtype bf16 --dir fwdbwd --config all --shapes $S
run topk_cfg 40 build/d/bench/quack-bench topk --dtype fp32 --config all --shapes 65536x1024x8,65536x2048x8,65536x1024x4
run topk_acc 90 python3 bench/bench_topk.py --dtypes fp32 --shapes 65536x1024x8,65536x4096x32,16384x4096x128 --out $R/topk.jsonl
run ln_cfg 50 build/d/bench/quack-bench layernorm --dtype bf16 --wdtype x --dir fwd --config all --shapes 8192x262144,16384x4096
run gemm_names 60 python3 scripts/gemm_kernel_names.py
