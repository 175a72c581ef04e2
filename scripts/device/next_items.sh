# The benches after call_focus.sh's tests for the session after run X2, in priority order
# (BUDGET=585 leaves ~250 s after the build and the top-k tests: the last items may SKIP).
# Top-k by the acceptance method (fp32's short rows: the register path, if planned).
run topk 120 python3 bench/bench_topk.py --out $R/topk.jsonl
# fp32 top-k, the plan against the queue kernel forced, kernel-only.
run topk_f32 60 bash -c "for p in auto queue; do build/d/bench/quack-bench topk --dtype fp32 --path \$p --shapes 65536x1024x8,65536x4096x32,65536x2048x16,16384x4096x128; done"
# Issue 15's small-row misses (X2: layernorm fwd N = 256-2048, rmsnorm fwd 2048, softmax /
# log_softmax fwd 1024), every configuration that takes them, kernel-only.
run rows_small_cfg 120 bash -c "for op in layernorm rmsnorm softmax; do build/d/bench/quack-bench \$op --dtype bf16 --dir fwd --config all --shapes 32768x256,32768x1024,32768x2048; done"
