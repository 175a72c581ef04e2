# The benches after call_focus.sh's tests, run Z's third call, in priority order; done ones skip
# on a later call (/tmp/done).
# fp32 register top-k after topk-f32 (~33 -> ~21 SASS instructions per element at (k 8, E 64)
# fit). Expected kernel-only: bitonic-k8-e64-t16-fit 0.134 -> ~0.085 ms at (65536, 1024, 8) (an
# e128-t8-fit entry, if compiled: ~0.07); k 32 fit 2.40 -> ~0.3-0.4 ms; (2048, 16) fit below 0.598.
run topk_f32_cfg 90 build/d/bench/quack-bench topk --dtype fp32 --config all --shapes 65536x1024x8,65536x1024x32,65536x2048x16
# Top-k by the acceptance method. Expected fp32 (65536, 1024, 8) 0.131 -> ~0.09 ms (QuACK 0.079-0.146).
run topk 120 python3 bench/bench_topk.py --out $R/topk.jsonl
# The softmax variants of the fp32 register kernel (their code moved): the plan's, kernel-only.
run topk_f32_softmax 40 bash -c "build/d/bench/quack-bench topk --dtype fp32 --softmax row --shapes 65536x1024x8; build/d/bench/quack-bench topk --dtype fp32 --softmax selected --shapes 65536x1024x8"
# LayerNorm fwd r8t32v1 at 32 registers (ln-occ: 8 CTAs per SM, 3.88 waves at 32768 x 256):
# expected 2.05 -> 2.4-2.6 TB/s, against the planned r32t8v4's ~2.20 (48 registers, 1.55 waves).
run ln_small_cfg 60 build/d/bench/quack-bench layernorm --dtype bf16 --dir fwd --config all --shapes 32768x256,32768x1024
# Diagnosis for the next session: the cross-entropy forward at V = 65536 (0.80-0.83 x copy; QuACK
# 0.89-0.93) under Nsight Compute: DRAM throughput, occupancy, stall reasons of the planned kernel.
run ncu_ce_fwd 90 env OUT=$R bash scripts/ncu_kernel.sh ce_fwd_65536 'regex:row_.*kernel' build/d/bench/quack-bench cross-entropy --dtype bf16 --dir fwd --shapes 16384x65536 --ms 1
