# Issue 19's last miss (top-k fp32 (65536, 1024, 8)), branch `topk-regs3` (from row-loads: plain
# loads); cold call with Python (the acceptance bench needs the extension and QuACK); carry
# [".peers", ".whl", ".data"]:
#   BUDGET=590 TEST_TMO=80 TESTS='*Topk*' PYFILES='test_topk'
#   ITEMS=scripts/device/topk_regs3_items.sh bash scripts/device/call_focus.sh
# What changed (only the fp32 fit K 8 E 64 T 16 instance, bitonic-k8-e64-t16-fit; every other
# top-k instance's SASS the same, two E 16 ones with registers renamed in the rare fix-up): where
# no x of the warp is ±inf or NaN, the selection, butterfly and d run on float keys f = (x's bits
# & ~m) | column part, one LOP3 per element (was SHF + LOP3 + LOP3), compared by FMNMX (header of
# topk_bitonic_kernel.cuh, "fp32 float keys"); the inf / NaN test is Σ x0·x1 by FFMA (FMA pipe,
# one per two elements) and one FSETP (was an FSETP.NAN per two elements), made warp-uniform by a
# VOTE; a warp with an inf / NaN (or |x| ≳ 1e19) takes the old integer path (the same code).
# SASS per storing lane, largest, no softmax: 1122 -> 1059 (float keys) -> 1028 (FFMA test), -8.4 %;
# ALU-pipe instructions (LOP3, min / max, SHF, setp, SEL) ~961 -> ~830 (-14 %); smallest 1187 ->
# 1102; 72 registers, no local memory, 7 CTAs/SM as before. Not GPU-run: checked by the host
# emulation (scripts/topk_bitonic_emu/run.sh 0, 1, 2: every case equal to the float64 reference).
# Before (row-loads): kernel-only 0.0771 ms, acceptance 0.0806, QuACK 0.0785.
# Predicted: kernel-only 0.0710-0.0750 ms at 65536x1024x8 (0.0706 if time went with the
# instructions; the kernel also waits on its loads: AF1 ncu 6.2 warps per scheduler,
# long-scoreboard stalls first, HBM floor ~0.062); acceptance 0.0745-0.0785 (>= 1.0 x QuACK's
# 0.0785). 65536x2048x8 (filter instance, T 32) and 65536x1024x16 (K 16) unchanged (the same
# SASS): within noise of row-loads. --largest 0 (the sign flip, then the column-ascending float
# keys; 7 % more instructions than largest) faster than row-loads' smallest; --softmax row: its
# fold unchanged, the selection as largest. The GPU tests (TESTS, PYFILES) check values,
# including ±inf / NaN rows (the integer path) and ties (the fix-up's reversed groups).
# If 1024x8 reads no faster: the kernel is not issue / ALU-bound at 7 CTAs (next: ncu's pipe
# utilisation and stall reasons, scripts/ncu_kernel.sh).
QB=build/d/bench/quack-bench
run topk_r3_k 60 bash -c "$QB topk --dtype fp32 --shapes 65536x1024x8,65536x2048x8,65536x1024x16; $QB topk --dtype fp32 --shapes 65536x1024x8 --path bitonic-fit; $QB topk --dtype fp32 --shapes 65536x1024x8 --softmax row; $QB topk --dtype fp32 --shapes 65536x1024x8 --largest 0"
run topk_r3_p1 45 python3 bench/bench_topk.py --dtypes fp32 --shapes 65536x1024x8 --out $R/topk_r3_p1.jsonl
run topk_r3_p2 45 python3 bench/bench_topk.py --dtypes fp32 --shapes 65536x1024x8 --out $R/topk_r3_p2.jsonl
