# Run BP (either card; the H200 for the bars): stream-K against data-parallel at issue 16's long-K
# bar shape. BO (H100, docs/data/run-BO_items.txt) read 16384 x 4096 x 14336 rr at the power cap:
# the rule (128x256, stream-K: the estimate 2.1 % under data-parallel) 663.0 TFLOP/s, the dynamic
# scheduler (stream-K off) 690.0, cuBLAS 689.8; kernel-only (quack-bench, no stream-K) static and
# dynamic read 1.009 / 1.012 x cuBLAS. Suspect: stream-K's units run their k-ranges at different
# depths of K, so the split wave's tiles stop sharing A / B panels in L2 (the cause of the
# 256-k-block cap, src/gemm/streamk.h) and its partials cost energy at the cap.
# One call, cold or warm, carry [".prebuilt-lib"] (add ".peers/quack-0.2.0-site.tar.xz" on an
# H200 for QuACK's column), any kind:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=560 ITEMS=scripts/device/bp_items.sh bash scripts/device/call_bench.sh
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
# sk_long (~120 s): the bar shape, rr, burst and sustained: the rule, stream-K off, dynamic.
# Predicted: +nosk 2-4 % above auto sustained and 1-3 % burst; +dyn within 1 % of +nosk.
# Rule: +nosk >= 1 % ahead of auto by both methods -> StreamKSchedule::kMinGain 0.01 -> 0.05
# (the model's estimate there is 2.1 %; it keeps 10.8 % at 11264 x 2048 x 16384 and 6.9 % at
# 2048 x 5632 x 16384), unless sk_wgrad shows stream-K losing there too.
run sk_long 200 bash -c "$CARD; python3 -u bench/bench_gemm.py --shapes 16384x4096x14336 --layouts rr --methods burst,sustained --burst-rounds 3 --batch-ms 1500 --rounds 4 --drop 1 --impls ours,cublas,quack --tiles auto,auto+nosk,auto+dyn --out $R/sk_long.jsonl"
# sk_wgrad (~120 s): the demo's wgrad shapes where stream-K gained on the H200 kernel-only (AA3:
# +9 % at 11264 x 2048 x 16384, +5 % at 2048 x 5632 x 16384; H100: +3-8 %, -6 %), cr.
# Predicted: auto (stream-K) >= +nosk by 3-9 % at 11264 x 2048 x 16384 by both methods; at
# 2048 x 5632 x 16384 within +-5 %.
run sk_wgrad 200 bash -c "$CARD; python3 -u bench/bench_gemm.py --shapes 11264x2048x16384,2048x5632x16384 --layouts cr --methods burst,sustained --burst-rounds 3 --batch-ms 1500 --rounds 4 --drop 1 --impls ours,cublas --tiles auto,auto+nosk,auto+dyn --out $R/sk_wgrad.jsonl"
# dyn_llm (~150 s): the dynamic scheduler at the other four LLM shapes (128x192pp, no stream-K):
# predicted within +-1 % of auto by both methods (BO: the dx shape 702.0 against 702.7).
run dyn_llm 200 bash -c "$CARD; python3 -u bench/bench_gemm.py --shapes 8192x8192x8192,16384x14336x4096,16384x28672x4096,8192x128256x4096 --layouts rr --methods burst,sustained --burst-rounds 3 --batch-ms 1500 --rounds 3 --drop 1 --impls ours,cublas --tiles auto,auto+dyn --out $R/dyn_llm.jsonl"
