# Run AC's second call (sourced by call_focus.sh): cross-entropy's dx with the per-vector fix-up
# (kFixVector), kernel-only (the plan) and by the acceptance method.
run ce_pair 60 build/d/bench/quack-bench cross-entropy --dtype bf16 --dir fwdbwd --shapes 16384x65536,16384x131072,8192x262144 --ms 40
run ce_rows 90 python3 bench/bench_rows.py --ops ce_fwd_bwd,ce_fwd_bwd_half --dtypes bf16 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack --out $R/ce_rows.jsonl
