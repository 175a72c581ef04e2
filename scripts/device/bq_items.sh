# Run BQ (either card): the stream-K rule at kMinGain 0.05 (src/gemm/streamk.h) and
# gemm_dact / gemm_dgated(dynamic_scheduler=): their GPU tests, then the bench. BP1 (H100,
# docs/data/run-BO_items.txt): at 16384 x 4096 x 14336 rr
# stream-K (the old rule) read 0.950 / 0.975 x data-parallel burst / sustained; at
# 11264 x 2048 x 16384 cr it gained 5 / 7 %.
# One cold call, any kind, carry [".prebuilt-lib", ".peers/quack-0.2.0-site.tar.xz"] (QuACK's
# column at the bar shape; skipped without it):
#   PREBUILT_LIB=1 AB_INSTANCES=OFF TESTS='*StreamK*' PYFILES='test_gemm' BUDGET=450 ITEMS=scripts/device/bq_items.sh bash scripts/device/call_focus.sh
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
# dact_dyn_tests (~30 s): gemm_dact / gemm_dgated(dynamic_scheduler=True) bitwise equal to the
# static schedule, the counter handed and left at 0, opcheck.
run dact_dyn_tests 120 bash -c "python3 -m pytest tests/python/test_mlp.py -q -p no:cacheprovider -k dynamic 2>&1 | tail -5"
# sk_rule (~100 s): predicted: auto = +nosk within the run's noise at 16384 x 4096 x 14336 (the
# same kernel now), both near BP1's +nosk (723.9 burst, 685.5 sustained, 1.01 / 1.00 x cuBLAS);
# at 11264 x 2048 x 16384 auto still ahead of +nosk by 3-9 % (stream-K kept); at 2048 x 5632 x
# 16384 (stream-K kept, estimate 6.9 %) auto behind by ~3.5 % on an H100 (BP1), ahead on an
# H200 (AA3 kernel-only +5 %): an H200 reading behind by both methods -> kMinGain 0.07.
run sk_rule 200 bash -c "$CARD; python3 -u bench/bench_gemm.py --shapes 16384x4096x14336 --layouts rr --methods burst,sustained --burst-rounds 3 --batch-ms 1500 --rounds 4 --drop 1 --impls ours,cublas,quack --tiles auto,auto+nosk --out $R/sk_rule_rr.jsonl; python3 -u bench/bench_gemm.py --shapes 11264x2048x16384,2048x5632x16384 --layouts cr --methods burst,sustained --burst-rounds 3 --batch-ms 1500 --rounds 4 --drop 1 --impls ours,cublas --tiles auto,auto+nosk --out $R/sk_rule_cr.jsonl"
# bias_long (~60 s): issue 17's bias at the long-K shape, where plain gemm ran stream-K (AU2:
# bias 0.934 x torch.addmm, ~4 of its 6.6 points plain gemm's own gap to cuBLAS there).
# Predicted: bias >= 0.97 x torch.addmm, plain (the ratio's base) about as much faster.
run bias_long 120 bash -c "$CARD; python3 -u bench/bench_gemm_fused.py --ops bias --shapes 16384x4096x14336 --methods burst --burst-rounds 5 --impls ours,torch --out $R/bias_long.jsonl"
# dyn_burst (~90 s): BP1's burst readings of the dynamic scheduler moved +3.2 / +3.1 / -4.2 % at
# 16384 x 14336 x 4096, 16384 x 28672 x 4096, 8192 x 128256 x 4096 (sustained within 1 %).
# Predicted: noise, within +-1 % over 6 rounds. Rule: dynamic >= 1 % ahead burst at all three
# -> a design note on a library-owned counter for the rule's tiles (QuACK's gemm default is static).
run dyn_burst 150 bash -c "$CARD; python3 -u bench/bench_gemm.py --shapes 16384x14336x4096,16384x28672x4096,8192x128256x4096 --layouts rr --methods burst --burst-rounds 6 --impls ours,cublas --tiles auto,auto+dyn --out $R/dyn_burst.jsonl"
