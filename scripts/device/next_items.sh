# The benches after call_focus.sh's tests for the session after run Y (call 2 of run Y), in
# priority order; done ones skip on a later call (/tmp/done).
# The qkv projection with RoPE in the GEMM's epilogue (gemm_rotary, 128x192pp) against the demo's
# previous pair (linear + the split rotary), the demo's shape. Expected: fwd −0.13 ms (the split
# pass over the (16384, 6144) bf16 qkv: ~400 MB at ~3 TB/s) if the epilogue's table reads cost
# nothing; fwd_bwd the same saving (the backward is the pack + the GEMMs either way).
run linear_rotary 90 python3 bench/bench_linear_rotary.py --out $R/linear_rotary.jsonl
# Top-k by the acceptance method (fp32: the register path now only at power-of-2 N ≤ 1024, k ≤ 8).
run topk 120 python3 bench/bench_topk.py --out $R/topk.jsonl
# Small rows by the acceptance method (every row op, M = 32768): the baseline for LayerNorm's
# small-row work.
run rows_small 200 python3 bench/bench_rows.py --small --out $R/rows_small.jsonl
