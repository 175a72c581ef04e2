# Run BK: where the LCE call's acceptance time goes above its kernels (BG1, H100: do_bench 81.29
# ms against 75.51 of kernels; QuACK untuned 78.65 against 73.59). Cold call, carry [".prebuilt-lib"]:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF TESTS='' PYFILES='' BUDGET=200
#   ITEMS=scripts/device/bk_items.sh bash scripts/device/call_focus.sh
# Predicted: b2b (back to back, no L2 clear) within 1 % of the kernels' sum; if "host" exceeds
# "l2" by > 1 ms the gap is host-side (a synchronisation or allocation in the call), else the
# clocks of a sustained 80 ms load.
run lce_events 120 bash -c "nvidia-smi --query-gpu=name --format=csv,noheader; python3 -u bench/bench_linear_ce.py --quick --events 12"
run lce_trace 60 bash -c "python3 -u bench/bench_linear_ce.py --quick --trace $R/lce_trace.json | tail -40"
