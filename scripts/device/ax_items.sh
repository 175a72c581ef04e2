# Run AX: the device calls after run AW (docs/status.md, "Next device calls"). Production library;
# on an H100 only ratios within one run count, the bars' figures are the H200's.
# Call AX1 (done: scripts/gemm_ab.sh with the A/B build, docs/data/run-AX_items.txt).
# Call AX2 (cold, carry [".prebuilt-lib", ".whl", ".data"]): every GPU test,
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=<s> bash scripts/device/call_tests.sh
# Call AX3 (warm, within 30 s of AX2's reply; carry [".prebuilt-lib",
# ".peers/quack-0.2.0-site.tar.xz"] with QuACK's site packed at a 256 MiB dictionary, or
# [".peers"] on a machine that must build):
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=<s> ITEMS=scripts/device/ax_items.sh bash scripts/device/call_bench.sh
# Afterwards: the tables to docs/data/run-AX_items.txt, the figures to docs/performance.md and
# docs/status.md; then delete this file (git keeps it).
#
# raster: QuACK's tile order (h8s: its heuristic, serpentine bands of 8) against ours (m8) on
# 128x192pp, both methods, beside cuBLAS and QuACK, with the sustained method's energy a call
# (thread 4: AW1's ncu read our DRAM bytes 3.5 % above QuACK's at 8192^3; AU4's 1.5 s batches read
# QuACK's energy a call 1.2-1.8 % under ours). Predicted: h8s within +-1 % of m8 by time (one pass
# does not rank finer), its energy a call 0-1 % lower.
run raster 200 python3 bench/bench_gemm.py --shapes 8192x8192x8192,16384x14336x4096 --layouts rr --methods burst,sustained --rounds 4 --tiles 128x192pp,128x192pp@h8s --out $R/raster.jsonl
# ncu_raster: the same two orders and QuACK's kernel, one launch each at 8192^3 (clocks not
# locked): DRAM bytes, L2 hit rate, cycles. Predicted: h8s's DRAM reads within 1 % of QuACK's
# (m8: +3.5 %), cycles unchanged within 0.5 %.
run ncu_raster 150 bash -c "ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/gr python3 scripts/ncu_gemm_quack.py 8192 8192 8192 m8,h8s > /dev/null && python3 scripts/ncu_gemm_quack.py --report /tmp/gr.ncu-rep"
# ncu_cebwd: issue 18's backward from lse (AW1: 0.948 x QuACK by the acceptance method; QuACK's
# kernel ~2 % faster than every entry of ours kernel-only) beside QuACK's, one launch each at
# 16384 x 32768 bf16: duration, DRAM throughput, issued instructions, stalls, then the SASS lines
# with the most stall samples. Predicted: both within 2 % of the same DRAM bytes (read x, write
# dx); ours more issued instructions a byte or a longer per-row chain (long-scoreboard stalls).
run ncu_cebwd 150 bash -c "ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/cb python3 scripts/ncu_gemm_quack.py cebwd 16384 32768 > /dev/null && python3 scripts/ncu_gemm_quack.py --report /tmp/cb.ncu-rep && python3 scripts/ncu_gemm_quack.py --sass /tmp/cb.ncu-rep $R | cut -c1-200"
# rows_15_h200: only on an H200: rmsnorm / layernorm bwd and the forwards at 16384 x 4096.
# Predicted: rmsnorm bwd 0.82-0.84 x copy (AL2 0.831, AT5 0.754), the forwards 0.86-0.90.
run rows_15_h200 150 bash -c "nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo 'not an H200: skipped'; exit 0; }; python3 bench/bench_rows.py --ops rmsnorm_bwd,layernorm_bwd,rmsnorm_fwd,layernorm_fwd,softmax_fwd --dtypes bf16 --shapes 16384x4096 --impls ours,compile,quack --rounds 5 --plot '' --out $R/rows_15.jsonl"
# gemm_bar: only on an H200: issue 16's bar with the sustained method's equal rests (3219f2a).
# Predicted: burst 0.97-1.00 x max (AT2 0.981); sustained 60 ms batches 0.94-0.99.
run gemm_bar 240 bash -c "nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo 'not an H200: skipped'; exit 0; }; python3 bench/bench_gemm.py --quick --methods burst,sustained --burst-rounds 3 --rounds 8 --out $R/gemm_bar.jsonl"
# host_time: host time per eager call (bench_host_time.py: the row ops, CE, gemm, Linear's C++
# node since 2b456ea with its per-task backward since 0cb7277), twice. Predicted: Linear fwd+bwd
# within 10 % of torch's nn.Linear (AW2 on a loaded host: 246.6 / 267.7 against 252.1 / 400.2 µs).
run host_time 120 bash -c "python3 bench/bench_host_time.py && python3 bench/bench_host_time.py"
