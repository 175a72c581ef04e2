# Run AV: the device calls of the session after 2026-12-06's third (docs/status.md, "Next device
# calls"). Production library; every figure here wants the bars' card (H200): on an H100 only
# ratios within one run count (run AU was all H100).
# Before call 1, in /work/main (where the calls are made):
#   [ "$(cat .prebuilt-lib/stamp)" = "$(bash scripts/device/stamp.sh lib) ab=OFF" ] && echo current
# (current at session 36's end: stamp 7479df7, the PDL commits' library code). If not (a commit touched
# src/, include/, cmake/ or CMakeLists.txt), in /work/ci after `.ci/run` on that commit:
#   scripts/device/prebuild_lib.sh && rm -rf /work/main/.prebuilt-lib && cp -r .prebuilt-lib /work/main/
# (seconds: CI's build/ holds every TU).
# Calls (leave `kind` out: naming nvidia-h200 does not get one — the run tool gives an H100 or an
# H200, mostly H100 — and needs_h200 is for memory only; on an H100 run the same items and say so
# in the record: ratios within the run count, the bars' figures stay the H200's; timeout_s 600):
# 1 (cold): PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=565 bash scripts/device/call_tests.sh
#   carry [".prebuilt-lib", ".whl", ".data"]: every GPU test (the final commit's GPU check).
# 2 (warm, within 30 s of call 1's reply: its lease.warm is true): PREBUILT_LIB=1 AB_INSTANCES=OFF
#   TESTS='' PYFILES='' BUDGET=<min(560, call 1's lease.budget_left_s - 30)>
#   ITEMS=scripts/device/av_items.sh bash scripts/device/call_focus.sh, carry [".peers", ".whl", ".data"].
# 3 (warm, if >= 150 s left): PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=<min(560, left - 40)>
#   ITEMS=scripts/device/av_items.sh bash scripts/device/call_bench.sh, the same carry. Items done
#   on this machine are skipped; one that timed out runs again whole (drop lce_20 from a third
#   call by hand if it timed out in the second).
# Cold between calls (a reply's lease.warm false, or more than 30 s idle): the next call is
#   PREBUILT_LIB=1 AB_INSTANCES=OFF TESTS='' PYFILES='' BUDGET=<min(560, left - 120)> ITEMS=scripts/device/av_items.sh
#   bash scripts/device/call_focus.sh with carry [".prebuilt-lib", ".peers/quack-0.2.0-site.tar.xz"]
#   (66.5 MB of the 64 MiB with the tree, 0.6 MB to spare: write nothing untracked into the tree
#   before it; fits only with the 256 MiB-dictionary packing, prebuild_lib.sh). No item here needs
#   Liger (.whl) or the corpus (.data). Without AB_INSTANCES=OFF a machine with no library builds
#   the A/B one (~270 s). A fresh machine has no record of the items done (/tmp/done): delete them
#   from this file first. BUDGET counts from the command's start after QuACK's unpacking; the
#   tables and the archive follow it: 560 leaves ~30 s of the 600.
# Afterwards: each reply's files_at holds its archive (/work/.device/<n>/); its tables go to
# docs/data/run-AV_items.txt, the figures to docs/performance.md (the issue's section, "The runs
# cited", "Raw data") and docs/status.md; the items that did not run go to the next run's file;
# then delete this file (git keeps it).
# Run AU's items took 30-120 s each on the H100 (LCE > 200 s). The timeouts below sum to ~3,050 s
# against ~1,100 s left after call 1: the order is the priority (the first five, 1,010 s, fit;
# cpp_gemm, sixth, 300 s, if call 3 runs).
#
# gemm_bar: issue 16's bar 1 with the sustained method's new rests (3219f2a: every implementation
# ~0.5-0.9 ms of sleep before a batch; AT's figures gave QuACK ~6 x ours' rest). Predicted (H200):
# burst 0.97-1.00 x max as AT2 (0.981); sustained 60 ms batches 0.94-0.99 (transients: +-5 %, AU5);
# QuACK's 8192^3 sustained no longer above its own burst (AT2: 762.9 against 699.6).
run gemm_bar 240 python3 bench/bench_gemm.py --quick --methods burst,sustained --burst-rounds 3 --rounds 8 --out $R/gemm_bar.jsonl
# rows_15: the H200's second reading of rmsnorm bwd at 16384 x 4096 (AT5 0.754 x copy, rounds 11 %
# apart; AL2 0.831; AU2 on the H100 0.846) and the 16384 x 4096 forwards (bar 0.90 x copy).
# Predicted: rmsnorm bwd 0.80-0.84, the forwards 0.86-0.90 as AL2 / AT5.
run rows_15 150 python3 bench/bench_rows.py --ops rmsnorm_bwd,layernorm_bwd,rmsnorm_fwd,layernorm_fwd,softmax_fwd --dtypes bf16 --shapes 16384x4096 --impls ours,compile,quack --rounds 5 --plot '' --out $R/rows_15.jsonl
# ce_32768: issue 18's fwd+bwd at V = 32768 (bar 0.85 x copy at V >= 32768), unread since run W
# (0.666 x copy): the training forward's preferred entry (cl-t256v8-s1) is taken only beyond 64
# KB rows (row_plan.cpp, preferred_entry), so a 64 KB row falls to kRowConfigs' order: t1024v4,
# one 1024-thread CTA per SM (61 registers) in lockstep. Kernel-only, every entry that takes the
# row, then the acceptance method. Predicted: the plan's pair 0.70-0.80 x copy; cl-t256v8-s1
# ~0.83 as at 65536 (AN2 0.834); if it leads, the rule's `>` becomes `>=` for the training pair.
run ce_32768 200 bash -c "build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x32768 --dir fwdbwd --config all && python3 bench/bench_rows.py --ops ce_fwd_bwd,ce_fwd_bwd_half,ce_fwd,ce_bwd --dtypes bf16 --shapes 16384x32768 --impls ours,compile,quack --rounds 3 --plot '' --out $R/ce_32768.jsonl"
# row_profile: rmsnorm / layernorm bwd at 16384 x 4096 (bars 0.85 x copy: 0.831 / 0.787, AL2): the
# row kernel's and the column sums' shares of one call and the launch gap between them. Predicted:
# the column-sum kernel and its gap 4-8 % of the call (then programmatic dependent launch or
# fewer partial rows is the lever); under 2 % (then the row kernel alone sets the figure).
run row_profile 120 bash -c "python3 scripts/row_profile.py rmsnorm_bwd 16384x4096 bf16 ours,compile && python3 scripts/row_profile.py layernorm_bwd 16384x4096 bf16 ours"
# pdl_rows: the column sums as programmatic dependents of the row kernel (QUACK_PDL=1, common/pdl.h;
# off by default until this item): with it on, the backward GPU tests (RMSNorm, LayerNorm: shapes,
# options, every forced entry; *ProgrammaticColsumsSameBits compares the bits with the serial
# launch) in 8 shards, and the CUDA-graph pytests of both; then rmsnorm / layernorm bwd at
# 16384 x 4096 by the acceptance method, off and on in alternating processes (two pairs).
# Fails (no "done") on a failed test. Predicted: the tests pass; on 1-3 % faster a call if
# row_profile shows a launch gap of 1-3 us before the sums (their own time stays); within
# +-0.5 % if it shows none.
pdl_rows_item() {
  local f='*RmsNormBwd*:*LayerNormBwd*:Bwd/LayerNormShapes.*:All/LayerNormOptions.*:All/LayerNormConfigs.*bwd'
  for i in 0 1 2 3 4 5 6 7; do
    QUACK_PDL=1 GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i build/d/tests/cpp/quack_gpu_tests \
      --gtest_brief=1 --gtest_filter="$f" > $R/pdl_gtest_$i.log 2>&1 &
  done
  wait
  tail -qn 2 $R/pdl_gtest_*.log
  QUACK_PDL=1 python3 -m pytest -q -p no:cacheprovider tests/python/test_rmsnorm.py \
    tests/python/test_layernorm.py -k cuda_graph > $R/pdl_pytest.log 2>&1; tail -2 $R/pdl_pytest.log
  for k in 1 2; do for v in 0 1; do
    QUACK_PDL=$v python3 bench/bench_rows.py --ops rmsnorm_bwd,layernorm_bwd --dtypes bf16 \
      --shapes 16384x4096 --impls ours --rounds 3 --plot '' --out $R/pdl_rows_${v}_$k.jsonl
  done; done
  for l in $R/pdl_gtest_*.log; do grep -q "^\[  PASSED  \]" $l || return 1; done  # a crashed shard
  ! grep -q "FAILED\|failed" $R/pdl_gtest_*.log $R/pdl_pytest.log
}
export -f pdl_rows_item; export R
run pdl_rows 300 bash -c pdl_rows_item
# cpp_gemm: the C++ eager path of gemm (QUACK_CPP_EAGER_GEMM=1, python/torch_ext.cpp: the calls
# autograd does not record, every GEMM of Linear; off by default until this item): the GEMM
# pytests with it on (test_fastpath's gemm cases compare it bit for bit with the custom op),
# then the host time of gemm and Linear off / on. Fails on a failed test. Predicted: the tests
# pass; quack_cpp.gemm's host time 45.7 -> 38-42 us on the H100 host (AU2; -3 to -7 us a GEMM),
# Linear fwd+bwd -10 to -20 us.
cpp_gemm_item() {
  QUACK_CPP_EAGER_GEMM=1 python3 -m pytest -q -p no:cacheprovider tests/python/test_fastpath.py \
    tests/python/test_gemm.py tests/python/test_linear.py tests/python/test_mlp.py -k "gemm or linear or mlp or Linear" \
    > $R/cpp_gemm_pytest.log 2>&1; local rc=$?; tail -3 $R/cpp_gemm_pytest.log
  # stream-K forced on every cooperative tile (the workspace the C++ path takes from gemm_ops)
  QUACK_CPP_EAGER_GEMM=1 QUACK_GEMM_STREAMK=1 python3 -m pytest -q -p no:cacheprovider \
    tests/python/test_gemm.py > $R/cpp_gemm_streamk.log 2>&1 || rc=1; tail -2 $R/cpp_gemm_streamk.log
  for v in 0 1; do QUACK_CPP_EAGER_GEMM=$v python3 bench/bench_host_time.py > $R/cpp_gemm_host_$v.txt 2>&1; done
  grep -hi "gemm\|linear\|matmul" $R/cpp_gemm_host_*.txt | head -20
  return $rc
}
export -f cpp_gemm_item
run cpp_gemm 300 bash -c cpp_gemm_item
# gemm_bar_long: the steady state at the cap (1.5 s batches). Predicted (H200): 0.97-0.99 x max
# (AU4 on the H100: 0.981; QuACK 1.3-2.1 % ahead at four shapes, ours 6 % ahead at long K).
run gemm_bar_long 200 python3 bench/bench_gemm.py --quick --methods sustained --rounds 4 --drop 1 --batch-ms 1500 --out $R/gemm_bar_long.jsonl
# fused_17_act / fused_17_gated: issue 17's table on the bars' card, plain on its rule (AT2's two
# items: act / dact with relu, relu_sq, gelu_tanh_approx, 300 ms rests; gated / dgated / bias with
# swiglu). Predicted from AU2 (H100, plain forced onto 128x192pp): act <= 1.03 x plain except at
# 16384 x 4096 x 14336, where plain's rule runs 128x256 and the fused ops read 1.03-1.06 x it
# (~1.00 x plain on 128x192pp); dact 1.04-1.06 at 16384 x 14336 x 4096, QuACK's dact 1.02-1.03
# x plain there; bias ~0.93 x torch.addmm at 16384 x 4096 x 14336.
run fused_17_act 330 python3 bench/bench_gemm_fused.py --ops act,dact --acts relu,relu_sq,gelu_tanh_approx --methods burst --burst-rounds 2 --burst-rest-ms 300 --out $R/fused_17_act.jsonl
run fused_17_gated 240 python3 bench/bench_gemm_fused.py --ops gated,dgated,bias --acts swiglu --methods burst --burst-rounds 2 --out $R/fused_17_gated.jsonl
# fused_17_tile: the same epilogues against plain on 128x192pp (the epilogue's cost alone).
run fused_17_tile 240 python3 bench/bench_gemm_fused.py --ops act,dact,dgated --acts relu,gelu_tanh_approx,swiglu --impls ours,quack --plain-tile 128x192pp --methods burst --burst-rounds 3 --burst-rest-ms 300 --out $R/fused_17_tile.jsonl
# lce_20: issue 20's anchor with QuACK (AU3 cut at 200 s with every implementation).
run lce_20 400 python3 bench/bench_linear_ce.py --quick --impls ours,quack,gemms --out $R/lce_20.jsonl
# ncu_dact: where dact's two points against QuACK's go (issue 17; status.md thread 3): one launch
# each of our plain gemm, gemm_act, gemm_dact and QuACK's gemm_act, gemm_dact at 16384 x 14336 x
# 4096 (relu), clocks not locked. Predicted: ours dact's duration 1.02-1.03 x QuACK's at equal SM
# clocks; the difference in issued instructions or in the epilogue warps' stalls (barrier /
# long scoreboard on the C load), not in DRAM bytes (within 3 %).
run ncu_dact 240 bash -c "ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/dact python3 scripts/ncu_gemm_quack.py dact 16384 14336 4096 relu > /dev/null && python3 scripts/ncu_gemm_quack.py --report /tmp/dact.ncu-rep && python3 scripts/ncu_gemm_quack.py --sass /tmp/dact.ncu-rep | cut -c1-200"
# tune_time: issue 16 item 4 asks that tuning one shape take <= 2 s (never measured): the first
# tuned call per shape class in a fresh cache directory, then a cached one, at three shapes, and
# the tuned pick's time beside the rule's (do_bench). Predicted: 0.3-1.5 s a first call (a handful
# of candidates, each timed a few times), < 1 ms host a cached call; the pick within 2 % of auto.
run tune_time 90 python3 -c "
import os, tempfile, time
os.environ['QUACK_CACHE_DIR'] = tempfile.mkdtemp()
import torch, quack_cpp
from triton.testing import do_bench
for M, N, K in ((8192, 8192, 8192), (16384, 4096, 14336), (4096, 4096, 4096)):
    a = torch.randn(M, K, device='cuda', dtype=torch.bfloat16)
    b = torch.randn(N, K, device='cuda', dtype=torch.bfloat16).T
    quack_cpp.gemm(a, b); torch.cuda.synchronize()
    t0 = time.perf_counter(); quack_cpp.gemm(a, b, tuned=True); torch.cuda.synchronize(); t1 = time.perf_counter()
    quack_cpp.gemm(a, b, tuned=True); torch.cuda.synchronize(); t2 = time.perf_counter()
    auto = do_bench(lambda: quack_cpp.gemm(a, b), warmup=25, rep=100, return_mode='median')
    tuned = do_bench(lambda: quack_cpp.gemm(a, b, tuned=True), warmup=25, rep=100, return_mode='median')
    print(f'{M}x{N}x{K}: first tuned call {t1 - t0:.3f} s, cached call {t2 - t1:.4f} s, auto {auto:.4f} ms, tuned {tuned:.4f} ms')
"
