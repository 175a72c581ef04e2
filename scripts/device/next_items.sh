# The benches after call_focus.sh's tests for run Y's third call, in priority order; done ones
# skip on a later call (/tmp/done).
# Small rows by the acceptance method: LayerNorm fwd with its vectors at apply (kColsAtApply)
# and r4t32v8 at N = 2048 for every one-stream op. Expected against run Y's second call:
# layernorm fwd ~2.6 / 3.5 / 3.7 TB/s kernel-only at 256 / 1024 / 2048 (acceptance ≥ compile at
# 1024, 2048), rmsnorm fwd 2048 +10 % (3.48 -> 3.89 kernel-only), softmax fwd 2048 ±0.
run rows_small_norms 150 python3 bench/bench_rows.py --small --ops layernorm_fwd,rmsnorm_fwd,softmax_fwd,log_softmax_fwd --out $R/rows_small_norms.jsonl
# Kernel-only, every configuration: LayerNorm with fp32 vectors (run Y's workload) and with
# vectors in x's dtype (the acceptance workload); RMSNorm for comparison with run Y.
run ln_cfg 120 bash -c "for w in fp32 x; do build/d/bench/quack-bench layernorm --dtype bf16 --dir fwd --wdtype \$w --config all --shapes 32768x256,32768x1024,32768x2048; done; build/d/bench/quack-bench rmsnorm --dtype bf16 --dir fwd --config all --shapes 32768x2048"
