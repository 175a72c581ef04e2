# The benches after call_focus.sh's tests for the call after run X, in priority order
# (BUDGET=420 leaves ~100 s after the build and the tests: the last items may SKIP).
# Top-k by the acceptance method with the radix kernel planned (16-bit x from N = 4096).
run topk 120 python3 bench/bench_topk.py --out $R/topk.jsonl
# The radix class's rows past the measured N = 4096 (6000 and 8192), planned against the queue
# kernel forced, kernel-only.
run topk_radix_n 60 bash -c "for p in auto queue; do build/d/bench/quack-bench topk --dtype bf16 --path \$p --shapes 16384x8192x64,16384x8192x256,16384x6000x100,65536x4096x32; done"
# Issue 15's small rows (M = 32768, bf16), never run by the acceptance method.
run rows_small 150 python3 bench/bench_rows.py --small --out $R/rows_small.jsonl --plot $R/rows_small.png
