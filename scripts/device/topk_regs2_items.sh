# Issue 19's last miss (top-k fp32 (65536, 1024, 8)), branch `topk-regs2`; cold call with Python
# (the acceptance bench needs the extension and QuACK); carry [".peers", ".whl", ".data"]:
#   BUDGET=590 TEST_TMO=80 TESTS='*Topk*' PYFILES='test_topk'
#   ITEMS=scripts/device/topk_regs2_items.sh bash scripts/device/call_focus.sh
# What changed (fp32 fit, lists of 8, E 64): at T 16 (N = 1024, this shape) an instance with T and
# N constant (immediate load offsets, unrolled butterfly, the entries' column parts as LOP3
# immediates, d from the own lists after the butterfly, the finish's entry by a select tree and
# its tie test by a ballot): 72 registers under __launch_bounds__(128, 7), no spills: 7 CTAs/SM
# (was 89 -> 96 allocated, 5 CTAs; QuACK 0.2.0: 72, 7); hot-path SASS per storing lane 1257 ->
# 1122 (-10.7 %). The other E 64 fit instances (runtime T, the filter at T 32) 80 registers, 6
# CTAs (were 89 / 91, 5). See the branch's commits.
# Before: kernel-only 0.0854 ms (AI4, before the one-LOP3 entry; main's kernel-only figure since
# was not measured: AJ1's item passed a --config topk does not take), acceptance 0.0865-0.0873
# (AJ1 / AJ2), QuACK 0.0785 (0.91 x).
# Predicted: kernel-only 0.075-0.080 ms at 65536x1024x8 (7 CTAs: 224 KB of loads in flight per
# SM against 160, as QuACK's; ~11 % fewer instructions); acceptance 0.078-0.083 (ours ~+0.0025
# over kernel-only, AI4 against AJ): >= 1.0 x QuACK needs the low half of that range. 65536x2048x8 (filter
# instance, 80 registers, 6 CTAs) no slower than AJ's ~0.160; 65536x1024x16 (K 16 E 64, only the
# finish's remade row changed) within 1 % of ~0.123. --softmax row / --largest 0 exercise the
# st_sm and the flipped-key paths (timings only; the GPU tests check values). If 1024x8 reads no
# faster, occupancy is not its limit: next, ncu's stall reasons at 7 CTAs (scripts/ncu_kernel.sh).
QB=build/d/bench/quack-bench
run topk_r2_k 60 bash -c "$QB topk --dtype fp32 --shapes 65536x1024x8,65536x2048x8,65536x1024x16; $QB topk --dtype fp32 --shapes 65536x1024x8 --path bitonic-fit; $QB topk --dtype fp32 --shapes 65536x1024x8 --softmax row; $QB topk --dtype fp32 --shapes 65536x1024x8 --largest 0"
run topk_r2_p1 45 python3 bench/bench_topk.py --dtypes fp32 --shapes 65536x1024x8 --out $R/topk_r2_p1.jsonl
run topk_r2_p2 45 python3 bench/bench_topk.py --dtypes fp32 --shapes 65536x1024x8 --out $R/topk_r2_p2.jsonl
run topk_r2_cfg 60 $QB topk --dtype fp32 --shapes 65536x1024x8,65536x2048x8 --config all
