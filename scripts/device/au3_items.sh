# Run AU, call 3 (cold; the production library prebuilt, .peers carried): issue 16's bar 1 with
# the sustained method's new rests (3219f2a: the sleep before a batch lets the host stay ahead,
# ~1 ms for every implementation at these shapes, where AT / AU2 gave QuACK 128-370 ms per 1.5 s
# batch against ours 9-62). Command:
#   PREBUILT_LIB=1 BUDGET=<budget_left - 90> ITEMS=scripts/device/au3_items.sh bash scripts/device/call_bench.sh
#   carry [".prebuilt-lib", ".peers", ".whl"] (65.5 MB)
# Predicted (H100): QuACK's sustained lead over ours at 8192^3 and 16384 x 14336 x 4096 within
# 0-2 % (AU2 with equal 100-460 ms rests: 1.0-1.6 %); rest_ms_<impl> 0.5-1.0 ms for all three.
run gemm_bar 240 python3 bench/bench_gemm.py --quick --methods burst,sustained --burst-rounds 3 --rounds 8 --out $R/gemm_bar.jsonl
# The same sustained batches with AU2's 1.5 s length (power samples inside each batch).
run gemm_bar_long 200 python3 bench/bench_gemm.py --quick --methods sustained --rounds 4 --drop 1 --batch-ms 1500 --out $R/gemm_bar_long.jsonl
