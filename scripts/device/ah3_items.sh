# Run AH, call 3 (device build with the A/B tiles and Python; carry [".peers", ".whl", ".data"]),
# on branch ah3 = main + `dgated` (+ `topk-q32`):
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=100
#   TESTS='Candidates/GemmDGatedDirectTest.*:Tiles/GemmGatedTest.DGated*:Tiles/GemmGatedTest.UnalignedOperands* *Topk*'
#   PYFILES='' ITEMS=scripts/device/ah3_items.sh bash scripts/device/call_focus.sh
QB=build/d/bench/quack-bench
# gemm_dgated's candidates (branch dgated; /work/coord/dgated.md): burst, swiglu, ours only, at
# the bench's two LLM shapes and the demo's fc2 dgrad (16384 x 5632 x 2048, K = 2048: the
# demo's (d) bar); U2: a1d2 1.19 / 1.06 x plain. Predicted (helper, ms at 16384x14336x4096):
# a2r 3.25-3.35, a2rf 3.15-3.30, a0g 3.20-3.35, a0gf 3.10-3.30 against a1d2 3.47.
DG=auto,128x128ppa1d2,128x128ppa2r,128x128ppa2rf,128x128ppa0g,128x128ppa0gf,128x128ppa4r,128x128ppa1d2f,128x256,128x256a2r,128x256a2rf,128x192ppa1r
run dgated 150 python3 bench/bench_gemm_fused.py --ops dgated --acts swiglu --impls ours --methods burst --burst-rounds 2 --shapes 16384x5632x2048,16384x14336x4096,8192x8192x8192 --tiles $DG --out $R/dgated.jsonl
# Top-k's queue kernel (branch topk-q32; /work/coord/topk_q32.md): the sparse offer and the
# narrowed prefix search, forced, beside the plan; fp32 (65536, 4096, 32) is issue 19's miss
# (0.574 ms, QuACK 0.545); predicted sparse 0.43-0.49, narrow 0.53-0.55, both 0.40-0.46.
topk_ab() { for dt in fp32 bf16; do for p in auto queue queue-sparse queue-narrow queue-sparse-narrow; do $QB topk --dtype $dt --shapes 65536x4096x32,16384x4096x128,16384x32768x64,4096x131072x256 --path $p | sed "s/^/$p /"; done; done; }
run topk_ab 90 bash -c "QB=$QB; $(declare -f topk_ab); topk_ab"
# Issue 16: 4096³ with the short-K rule (4c0035a: 128x256, AH2 kernel-only 0.1834 against
# 128x128pp's 0.1915 ms), by the acceptance method beside the old tile; AH1: 0.912 x cuBLAS.
run gemm_4096 60 python3 bench/bench_gemm.py --shapes 4096x4096x4096,2048x2048x2048 --layouts rr,rc --methods burst --impls ours,cublas --burst-rounds 3 --tiles auto,128x128pp --out $R/gemm_4096.jsonl
# The in-process gap: two calls behind one spin (first, second) and the launch geometry, beside
# quack-bench's plan of the same shape.
run diag_gap 90 bash -c "python3 scripts/diag_acceptance_gap.py --op softmax --shapes 16384x65536 --spin --spin2 --launch; $QB softmax --shapes 16384x65536 --dir fwd"
# LayerNorm bwd beside RMSNorm bwd under ncu (the backward kernels this time).
run ncu_lnbwd 60 env OUT=$R KBASE=demangled bash scripts/ncu_kernel.sh ln_bwd 'regex:LayerNormBwdT' $QB layernorm --wdtype x --bias 1 --dir bwd --shapes 16384x4096 --ms 1
run ncu_rmsbwd 60 env OUT=$R KBASE=demangled bash scripts/ncu_kernel.sh rms_bwd 'regex:RmsNormBwdT' $QB rmsnorm --dir bwd --shapes 16384x4096 --ms 1
