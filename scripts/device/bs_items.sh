# Run BS (an H100: the fallback when a call for run BN's H200 gets an H100): issue 16's bar set on
# the new stream-K rule (1c770cd, kMinGain 5 %) by both methods, AZ3's command. Last read on the
# H100 before that rule: AV2 burst 0.964, 60 ms 0.972 x max(cuBLAS, QuACK); BQ1 read only
# 16384 x 4096 x 14336 on the new rule (1.006 x max sustained). Predicted: sustained 0.97-0.99 x
# max (the new rule moves only the long-K shape), burst within BR1's ~4 % scatter of that.
# One call, cold or warm, carry [".prebuilt-lib", ".peers/quack-0.2.0-site.tar.xz"]:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=300 ITEMS=scripts/device/bs_items.sh bash scripts/device/call_bench.sh
run gemm_bars_h100 260 bash -c "nvidia-smi --query-gpu=name --format=csv,noheader; python3 -u bench/bench_gemm.py --quick --burst-rounds 3 --rounds 8 --out $R/gemm_bars.jsonl"
