# The benches after call_focus.sh's tests for the session after run Y, in priority order; done
# ones skip on a later call (/tmp/done).
# gemm_rotary with paired float2 tables, L1 prefetch of the next subtile, and the interleaved
# rotary kernel's coalesced accesses (rotary-perf, 3993f85). Expected (the helper's estimate):
# fused fwd 0.65-0.67 ms (Y2: 0.7147; separate 0.7190), fwd_bwd 2.03-2.06 (Y2: 2.1430; separate
# 2.0984). If fused fwd_bwd < separate, run the demo with QUACK_DEMO_FUSED_ROTARY=1 (call 2).
run linear_rotary 90 python3 bench/bench_linear_rotary.py --out $R/linear_rotary.jsonl
# The rotary kernel alone, both layouts (the split forward and the pack): the interleaved one
# should now match the non-interleaved one.
run rotary 120 python3 bench/bench_rotary.py --shapes 8x2048x16x128 --impls ours,split,clone --modes fwd,fwd_bwd
# Top-k bf16 (65536, 1024, 8): the register kernel's configurations (QuACK 0.0713 ms in Y;
# ours 0.0720, kernel-only 0.0706). Expected after topk-fit-cost (4c1e7f4): the planned
# bitonic-k8-e128-t8-fit at 0.058-0.062 ms kernel-only.
run topk_cfg 90 build/d/bench/quack-bench topk --dtype bf16 --config all --shapes 65536x1024x8
run topk 120 python3 bench/bench_topk.py --out $R/topk.jsonl
# Small rows still below compile (Y3): rmsnorm fwd 256 / 1024, softmax fwd 1024, layernorm fwd
# 256: every configuration, kernel-only.
run rows_small_cfg 120 bash -c "for op in rmsnorm softmax layernorm; do build/d/bench/quack-bench \$op --dtype bf16 --dir fwd --config all --shapes 32768x256,32768x1024; done"
