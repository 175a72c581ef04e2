# Branch row-loads: plain row loads (ld.global) where main issues evict-first ones (ld.global.cs),
# except beside column vectors of more than 32 KB a CTA (RowInRegs::kRowCache); top-k's loads
# plain. Stores stay evict-first. Evidence: run AK3 (everything plain) against AK4 (= main).
# Call (cold; carry [".peers", ".whl", ".data"]; no A/B tiles: ~225 s build):
#   AB_INSTANCES=OFF BUDGET=590 TEST_TMO=200 TESTS='*Softmax* *RmsNorm*-*RmsNormBwdConfigs* *LayerNorm* *Ce* *Topk*'
#   PYFILES='test_softmax test_rmsnorm test_layernorm test_cross_entropy test_topk'
#   ITEMS=scripts/device/row_loads_items.sh bash scripts/device/call_focus.sh
# Predictions (kernel-only, ms; AK4 = main in brackets): softmax fwd 16384 x 4096 / 65536
# 0.0650-0.068 [0.0674] / 0.98-1.02 [1.020] (kernel-only moves little: quack-bench leaves no dirty
# L2); RMSNorm fwd 4096 / 32768 as main [0.0692 / 0.5193]; top-k fp32 (65536, 1024, 8)
# 0.076-0.078 [0.0837]; LayerNorm bwd as main (staged: bulk-copy loads). By the acceptance method:
# softmax fwd 16384 x 65536 >= 4.12 TB/s [4.00; AK3 4.18], 16384 x 32768 >= 4.05 [3.89; AK3 4.14];
# RMSNorm fwd 4096 0.070-0.073 ms [0.0764; AK3 0.0717], 32768 / 65536 as main [0.5502 / 1.0777];
# top-k fp32 0.079-0.082 ms [0.0848-0.0859; AK3 0.0806] (QuACK's best 0.0785: 0.96-0.99 x);
# CE fwd+bwd (map / looped paths, kCols = 0) +0-5 %.
QB=build/d/bench/quack-bench
# The hints themselves (~15 s): true plain ld.global, ld.nc, ld.cs, L1::no_allocate with and
# without an L2 evict_normal policy, L1::evict_first; copy, sum and a row-scale kernel whose
# fp32 weight slice lives in L1 (4096 / 32768 / 65536 columns). Predicted: plain and ld.nc level
# after the dirty flush, ld.cs / ld.na 4.5-5.5 % behind (AK3 / AK4); for scale32k / scale64k a
# no-L1 load ahead of plain if AK3's RMSNorm loss was L1's weights.
run hints 60 bash -c "nvcc -O3 -arch=sm_90a -o /tmp/cache_hints scripts/diag_cache_hints.cu && /tmp/cache_hints"
run k_rows 120 bash -c "$QB softmax --shapes 16384x4096,16384x32768,16384x65536 --dir all; $QB rmsnorm --shapes 16384x4096,16384x32768,16384x65536 --dir fwd; $QB layernorm --shapes 16384x4096,16384x32768 --dir fwd; $QB topk --dtype fp32 --shapes 65536x1024x8,65536x4096x32; $QB topk --dtype bf16 --shapes 65536x4096x32,16384x32768x64; $QB cross-entropy --dtype bf16 --dir fwdbwd --shapes 16384x65536,16384x131072,8192x262144"
run acc_topk 90 python3 bench/bench_topk.py --out $R/acc_topk.jsonl
run acc_fwd 200 python3 bench/bench_rows.py --ops softmax_fwd,log_softmax_fwd,rmsnorm_fwd,layernorm_fwd --dtypes bf16 --impls ours,compile,quack --rounds 2 --out $R/acc_fwd.jsonl
run acc_bwd 200 python3 bench/bench_rows.py --ops softmax_bwd,log_softmax_bwd,rmsnorm_bwd --dtypes bf16 --impls ours,compile,quack --rounds 2 --out $R/acc_bwd.jsonl
# CE at its issue's shapes: the training step and the scaled step (ce_scale_grad_kernel's
# in-place dx scale now loads plain). AE2: fwd+bwd 0.826 / 0.843 / 0.797 x copy, scaled 0.942 /
# 0.950 / 1.029 x QuACK; predicted +0-4 % on both.
run acc_ce 200 python3 bench/bench_rows.py --ops ce_fwd_bwd,ce_fwd_bwd_half --dtypes bf16 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack --rounds 2 --out $R/acc_ce.jsonl
