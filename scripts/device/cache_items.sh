# The evict-first hint behind a dirty L2 (docs/status.md, the in-process gap), one cold call on a
# tree built with -DQUACK_DIAG_PLAIN_CACHE (plain ld / st where main issues ld.global.cs /
# st.global.cs). Call (cold; carry [".peers", ".whl", ".data"]):
#   BUDGET=560 bash scripts/device/call_cache.sh
# Predictions: if the hint is the gap, diag_cache_hints shows ld.cs / st.cs slower than ld / st
# after the dirty flush by 3-6 % (and level back to back), and below ours / QuACK moves from
# 0.94-0.96 (softmax fwd 16384 x 65536: 3.95-4.00 against 4.18-4.22 TB/s, AD2 / AE2) to >= 0.99,
# top-k fp32 (65536, 1024, 8) from 0.0848-0.0859 ms (AK1) toward its 0.0817 kernel-only.
# If not, the three move by < 1 %.
QB=build/d/bench/quack-bench
run k_rows 90 bash -c "$QB softmax --shapes 16384x4096,16384x65536 --dir fwd; $QB rmsnorm --shapes 16384x4096,16384x32768 --dir fwd; $QB layernorm --wdtype x --bias 1 --dir bwd --shapes 16384x4096,16384x32768,16384x131072,8192x262144; $QB topk --dtype fp32 --shapes 65536x1024x8"
run acc_topk 60 python3 bench/bench_topk.py --dtypes fp32 --shapes 65536x1024x8 --out $R/acc_topk.jsonl
run acc_rows 200 python3 bench/bench_rows.py --ops softmax_fwd,rmsnorm_fwd --dtypes bf16 --shapes 16384x4096,16384x32768,16384x65536 --impls ours,quack --rounds 3 --out $R/acc_rows.jsonl
run acc_lnb 100 python3 bench/bench_rows.py --ops layernorm_bwd --dtypes bf16 --impls ours --rounds 3 --out $R/acc_lnb.jsonl
