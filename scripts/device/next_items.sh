# The benches after call_focus.sh's tests for the session after run W, in priority order
# (BUDGET=585 leaves ~110-250 s after the build and the tests: the last items may SKIP).
# The weight gradient (mm) tiles (A/B candidates) at the demo's wgrad shapes, and the rule's
# kMidK pick (128x256 from K = 5632) at the N = 2048 outputs.
run gemm_wgrad 150 python3 bench/bench_gemm.py --shapes 11264x2048x16384,2048x2048x16384,2048x5632x16384,6144x2048x16384 --layouts cr --methods burst --tiles auto,128x192pp,128x128pp,256x128c1x2 --out $R/gemm_wgrad.jsonl
run gemm_midk 100 python3 bench/bench_gemm.py --shapes 16384x2048x5632,16384x2048x6144,16384x2048x11264,8192x8192x8192 --layouts rc,rr --methods burst --tiles auto,128x192pp,128x256 --out $R/gemm_midk.jsonl
# Top-k's radix-select path (forced) against the plan, kernel-only; then --config all (E = 8, 16, 32 beside the queue and bitonic entries).
run topk_radix 90 bash -c "for d in bf16 fp32; do build/d/bench/quack-bench topk --dtype \$d --shapes 16384x4096x128,65536x4096x32,65536x1024x8,16384x4096x32,65536x2048x16; build/d/bench/quack-bench topk --dtype \$d --path radix --shapes 16384x4096x128,65536x4096x32,65536x1024x8,16384x4096x32,65536x2048x16; build/d/bench/quack-bench topk --dtype \$d --config all --shapes 16384x4096x128,65536x4096x32,65536x1024x8; done"
run gemm_demo 150 python3 bench/bench_gemm.py --demo --methods burst --out $R/gemm_demo.jsonl
run topk 120 python3 bench/bench_topk.py --out $R/topk.jsonl
