# Run BC (cold, after BB on an H100): the fp16 linear + cross-entropy's and CE's gtests on eba9d3d's
# library (the f16 _cf32 validation fix; the prefetch reverted), then issue 20's kernel table (run BB's timed out at
# 150 s: QuACK's tuned=True GEMMs autotune on their first call).
#   PREBUILT_LIB=1 AB_INSTANCES=OFF TESTS='LcePaths.* CeTrain.* CeCases.*' PYFILES='' TEST_TMO=120 BUDGET=560
#   ITEMS=scripts/device/bc_items.sh bash scripts/device/call_focus.sh
# carry [".prebuilt-lib", ".peers/quack-0.2.0-site.tar.xz"].
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
# lce_kernels: issue 20's gap (QuACK 76.3 ms against our 83.1 at 16384 x 4096 x 128256, yet our
# three GEMMs kernel-only at 1.03 x cuBLAS, which QuACK runs for two of its three): each call's
# kernels by name, ours and QuACK's alternating. Predicted: QuACK's GEMM kernels sum below our
# three GEMMs' by most of the 7 ms; the kernel sum against the span says whether gaps carry any.
run lce_kernels 420 bash -c "$CARD; python3 -u bench/bench_linear_ce.py --quick --kernels ours,quack"
