# Run AW: the device call(s) after run AV (docs/status.md, "Next device calls"). Production
# library; on an H100 only ratios within one run count (AV was all H100), the bars' figures are
# the H200's.
# Before the call, in /work/main: the library stamp must be the final commit's
#   [ "$(cat .prebuilt-lib/stamp)" = "$(bash scripts/device/stamp.sh lib) ab=OFF" ] && echo current
# (current at session 37's end: stamp e74acb7; else, in /work/ci: `git checkout -q -- . && git
# checkout -q --detach main && .ci/run`, then AB_INSTANCES=OFF bash scripts/device/prebuild_lib.sh
# && rm -rf /work/main/.prebuilt-lib && cp -r .prebuilt-lib /work/main/).
# Call 1 (cold; leave `kind` out, timeout_s 600), carry [".prebuilt-lib",
# ".peers/quack-0.2.0-site.tar.xz"] (QuACK's site packed at a 256 MiB dictionary: status.md; 66.64
# MB with the tree at session 37's end, 0.26 MB under a size once refused: write nothing
# untracked into the tree first; if refused, carry [".prebuilt-lib"] and skip ncu_dact):
#   PREBUILT_LIB=1 AB_INSTANCES=OFF TESTS='CeTrain.* CeCases.* *CeConfigs* *CeOptions* *CeShapes* *Lce*-*Large* *Tuned*' \
#   PYFILES='test_cross_entropy test_linear_cross_entropy test_linear test_gemm test_fastpath test_mlp test_nn' \
#   BUDGET=<min(560, budget_left - 300)> ITEMS=scripts/device/aw_items.sh bash scripts/device/call_focus.sh
# (budget_left - 300: refused starts cost 90-180 s each of the same budget; BUDGET counts from
# after QuACK's unpacking.) The GPU tests of what session 37 left un-run: the CE plan's (32, 64] KB
# rule (2a2d490: CeTrain.PairBitwise's 600 x 32768 and 64 x 32000 softcap cases run cl-t512v8 on
# both kernels of the split forward and on the separate calls), the tuner (93d9e52: *Tuned*),
# Linear's routes (149eda3: test_linear, test_mlp, test_nn, test_fastpath); then the items in
# priority order (ce_32768, ncu_dact, rows_15_h200 — on an H200 only, opportunistic: on an H100
# it prints 'skipped' —, tune_time). Call 1 will likely cut ncu_dact short (tests ~200 s): an
# item counts as done only when it exits 0, so a cut item runs again whole in call 2.
# Call 2 (warm: within 30 s of call 1's reply, its lease.warm true; timeout_s 600, the same carry):
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=<min(560, budget_left - 30)> \
#   ITEMS=scripts/device/aw_items.sh bash scripts/device/call_bench.sh
# Afterwards: the archive's tables to docs/data/run-AW_items.txt, the figures to
# docs/performance.md and docs/status.md; then delete this file (git keeps it).
#
# ce_32768: issue 18 at V = 32768 with the forwards on cl-t512v8 (2a2d490). The loss alone per
# entry (kernel-only: is cl-t512v8 within 3 % of t1024v4 there?), the backward from lse per entry
# (AV2: bwd 0.941 x QuACK on the ring; the recompute read map-t256v8 4.4 % ahead of the ring), the
# training pair on the plan, then the acceptance method. Predicted (H100): fwd+bwd 0.92-0.93 x copy (AV2 0.858), the scaled
# step ~0.93 x QuACK (AV2 0.855), the loss alone 0.99-1.02 x copy (AV2 1.017 on t1024v4).
run ce_32768 200 bash -c "build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x32768 --dir fwd --config all && build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x32768 --dir bwd --config all && build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x32768 --dir fwdbwd && python3 bench/bench_rows.py --ops ce_fwd_bwd,ce_fwd_bwd_half,ce_fwd,ce_bwd --dtypes bf16 --shapes 16384x32768 --impls ours,quack --rounds 3 --plot '' --out $R/ce_32768.jsonl"
# ncu_dact: where dact's points against QuACK's go (issue 17; status.md thread 3): one launch
# each of our plain gemm, gemm_act, gemm_dact and QuACK's gemm_act, gemm_dact at 16384 x 14336 x
# 4096 (relu), clocks not locked (AV3's try stopped at the script's gemm_act call on a row-major B;
# fixed in a010d10). Predicted: ours dact's duration 1.02-1.03 x QuACK's at equal SM clocks; the
# difference in issued instructions or the epilogue warps' stalls, not in DRAM bytes (within 3 %).
run ncu_dact 240 bash -c "ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/dact python3 scripts/ncu_gemm_quack.py dact 16384 14336 4096 relu > /dev/null && python3 scripts/ncu_gemm_quack.py --report /tmp/dact.ncu-rep && python3 scripts/ncu_gemm_quack.py --sass /tmp/dact.ncu-rep | cut -c1-200"
# ncu_gemm: where our plain gemm's tensor pipe idles against QuACK's at 8192^3 (thread 4; AQ2:
# pipe 98.2 against 99.6 %, QuACK 0.984 x our time at the same clock). Predicted (a SASS count of
# 7ca5a2b's 128x192pp, helper analysis): ours 125-130 M instructions against QuACK's ~138.6 M, our
# warps_active 3.0 against 2.2, the idle in the consumer's full-barrier waits (data late) rather
# than the pingpong turn's BAR.SYNC; if so the raster order (tile_scheduler.h) is the next candidate.
run ncu_gemm 150 bash -c "ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/g8k python3 scripts/ncu_gemm_quack.py 8192 8192 8192 > /dev/null && python3 scripts/ncu_gemm_quack.py --report /tmp/g8k.ncu-rep && python3 scripts/ncu_gemm_quack.py --sass /tmp/g8k.ncu-rep | cut -c1-200"
# rows_15_h200: only on an H200 (skip on an H100: AV2 read it there): rmsnorm / layernorm bwd and
# the forwards at 16384 x 4096 with the column sums' programmatic launch on (4d29852). Predicted:
# rmsnorm bwd 0.82-0.84 x copy (AL2 0.831, AT5 0.754), the forwards 0.86-0.90.
run rows_15_h200 150 bash -c "nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo 'not an H200: skipped'; exit 0; }; python3 bench/bench_rows.py --ops rmsnorm_bwd,layernorm_bwd,rmsnorm_fwd,layernorm_fwd,softmax_fwd --dtypes bf16 --shapes 16384x4096 --impls ours,compile,quack --rounds 5 --plot '' --out $R/rows_15.jsonl"
# tune_time: the tuner's rotating rounds and its 1 % margin for the rule's tile (93d9e52): the
# first tuned call, a cached one, and the tuned pick's time beside the rule's (do_bench), at AV3's
# three shapes, then the cache file (the picks' names). Predicted: the first call 0.1-0.3 s
# (AV3: 0.016-0.168), the pick within +-1 % of auto at 8192^3 and 16384 x 4096 x 14336 (AV3: +2
# %), still ahead at 4096^3 (AV3: -10 %).
run tune_time 120 python3 -c "
import os, tempfile, time
d = tempfile.mkdtemp(); os.environ['QUACK_CACHE_DIR'] = d
import torch, quack_cpp
from triton.testing import do_bench
for M, N, K in ((8192, 8192, 8192), (16384, 4096, 14336), (4096, 4096, 4096)):
    a = torch.randn(M, K, device='cuda', dtype=torch.bfloat16)
    b = torch.randn(N, K, device='cuda', dtype=torch.bfloat16).T
    quack_cpp.gemm(a, b); torch.cuda.synchronize()
    t0 = time.perf_counter(); quack_cpp.gemm(a, b, tuned=True); torch.cuda.synchronize(); t1 = time.perf_counter()
    quack_cpp.gemm(a, b, tuned=True); torch.cuda.synchronize(); t2 = time.perf_counter()
    auto, tuned = [], []
    for r in range(3):  # alternating, so the card's warming falls on both
        auto.append(do_bench(lambda: quack_cpp.gemm(a, b), warmup=25, rep=100, return_mode='median'))
        tuned.append(do_bench(lambda: quack_cpp.gemm(a, b, tuned=True), warmup=25, rep=100, return_mode='median'))
    f = lambda v: ' '.join(f'{x:.4f}' for x in v)
    print(f'{M}x{N}x{K}: first tuned call {t1 - t0:.3f} s, cached call {t2 - t1:.4f} s, auto {f(auto)} ms, tuned {f(tuned)} ms')
print(open(os.path.join(d, 'gemm_autotune.tsv')).read())
"
