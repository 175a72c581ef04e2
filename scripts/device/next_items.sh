# The benches after call_focus.sh's tests for the session after run X2, in priority order
# (BUDGET=585 leaves ~250 s after the build and the top-k tests: the last items may SKIP).
# Top-k by the acceptance method (fp32's short rows: the register path, if planned).
run topk 120 python3 bench/bench_topk.py --out $R/topk.jsonl
# fp32 top-k: the register path (planned for N <= 2048, <= 1024 for k > 16; expected ~0.09 ms
# at (65536, 1024, 8) against the queue's 0.180) against the queue kernel forced, then every
# configuration at its two shapes, kernel-only.
run topk_f32 90 bash -c "for p in auto queue; do build/d/bench/quack-bench topk --dtype fp32 --path \$p --shapes 65536x1024x8,65536x2048x16,65536x1024x32,65536x1000x8,65536x4096x32; done; build/d/bench/quack-bench topk --dtype fp32 --config all --shapes 65536x1024x8,65536x2048x16"
# Issue 15's small-row misses (X2: layernorm fwd N = 256-2048, rmsnorm fwd 2048, softmax /
# log_softmax fwd 1024), every configuration that takes them, kernel-only.
run rows_small_cfg 120 bash -c "for op in layernorm rmsnorm softmax; do build/d/bench/quack-bench \$op --dtype bf16 --dir fwd --config all --shapes 32768x256,32768x1024,32768x2048; done"
# The demo's N = 2048 outputs: cuBLAS's tile (256x128 1x2; kk since this session's A/B list)
# and the other 1x2 candidates against the rule.
run gemm_n2048_tiles 150 python3 bench/bench_gemm.py --shapes 16384x2048x2048,16384x2048x5632,16384x2048x11264 --layouts rr,rc --methods burst --tiles auto,256x128c1x2,256x192c1x2,128x192ppc1x2 --out $R/gemm_n2048_tiles.jsonl
# The demo's N = 2048 outputs (0.920-0.960 x cuBLAS in X): the persistent schedule's raster,
# no build change (QUACK_GEMM_RASTER through bench_gemm's "@<raster>").
run gemm_raster 150 python3 bench/bench_gemm.py --shapes 16384x2048x2048,16384x2048x5632,16384x2048x11264 --layouts rr,rc --methods burst --tiles auto,auto@m4,auto@m16,auto@n8,auto@h8s,auto@m8s --out $R/gemm_raster.jsonl
# QuACK sustains 708-768 TFLOPS on the five LLM shapes against our 674-698 (W): the SM clock by
# implementation at the power limit (bench_gemm's sm_mhz_<impl>) says whether its kernels draw
# less power or do more per clock; with QuACK's raster (h8s: serpentine bands of 8) beside ours
# (m8), since L2 reuse moves DRAM power.
run gemm_sustained_clocks 240 python3 bench/bench_gemm.py --quick --methods sustained --tiles auto,auto@h8s --out $R/gemm_sustained_clocks.jsonl
# Issue 17's fused ops in fp16 (never benched): ours / plain and the peers, burst.
run gemm_fused_fp16 150 python3 bench/bench_gemm_fused.py --quick --dtype fp16 --ops act,dact,gated,dgated,bias --out $R/gemm_fused_fp16.jsonl
