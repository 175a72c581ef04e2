# Branch row-l2n (issue 15): the register and cluster register policies' row loads beside column
# vectors above 32 KB a CTA (RowRegs::kRowCache: RMSNorm fwd on t1024v4 / t1024v2 and the like)
# go from evict-first (ld.global.cs) to Cache::kNoL1 (ld.global.L1::no_allocate.L2::cache_hint,
# an evict_normal policy). Evidence: run AL's scripts/diag_cache_hints.cu, scale32k (a row-scale
# kernel whose fp32 weight slice lives in L1) after a dirty flush: ld.na+L2n 3.99 TB/s, plain
# 3.93, ld.cs 3.89 (copy: L2n = plain; a load-only sum kernel read 3.82 with L2n against plain's
# 4.55 for a reason not known: watch the kernel-only figures).
# Call (with the other branches' items; carry [".peers", ".whl", ".data"]).
# Predictions (bf16): RMSNorm fwd 16384 x 32768 by the acceptance method 0.540-0.548 ms (run AL
# 0.5556 on ld.cs; compile 0.514), kernel-only 0.518-0.527 (AL 0.5228: quack-bench leaves no
# dirty L2, so little moves); 16384 x 16384 +1-3 % by the acceptance method. A loss beyond 1 %
# kernel-only at either shape means the no-allocate load costs issue or latency: revert.
QB=build/d/bench/quack-bench
run l2n_k 60 bash -c "for r in 1 2; do $QB rmsnorm --shapes 16384x16384,16384x32768 --dir fwd --ms 150; done"
run l2n_acc 120 python3 bench/bench_rows.py --ops rmsnorm_fwd --dtypes bf16 --shapes 16384x16384,16384x32768 --impls ours,compile --rounds 3 --out $R/l2n_acc.jsonl
