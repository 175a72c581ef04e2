# Run AX4 (the same session as AX1-AX3): the CE backward from lse at 16384 x 32768 bf16, ring
# against map (issue 18). AX3's ncu: the plan's ring-t1024v4-s3 760.9 us against QuACK's 717.3
# (one launch each, L2 flushed, clocks ~1.99 GHz both), DRAM reads 1.169 against 1.074 GB (the
# minimum, x once): ours reads x 9 % more than once. Suspect: the ring's L2 prefetch of the row
# kStages rows ahead (kRingL2Ahead), lines evicted under the dx store stream before the row's
# bulk copy. map-t256v8 has no prefetch (each CTA one 32 KB tile into registers).
# Predicted: map's DRAM reads within 1 % of 1.074 GB and its time within 2 % of QuACK's; the
# ring's reads 1.15-1.18 GB again.
# Cold call, carry [".prebuilt-lib", ".peers/quack-0.2.0-site.tar.xz"] or warm after AX3:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=<s> ITEMS=scripts/device/ay_items.sh bash scripts/device/call_bench.sh
Q=build/d/bench/quack-bench
run cebwd_entries 120 bash -c "for i in 1 2; do $Q cross-entropy --dtype bf16 --shapes 16384x32768 --dir bwd --config all; done"
run ncu_map 90 bash -c "ncu --clock-control none --set full --import-source no -k regex:row_map_kernel --launch-count 1 -f -o /tmp/cm $Q cross-entropy --dtype bf16 --shapes 16384x32768 --dir bwd --config all --ms 20 > /dev/null && python3 scripts/ncu_gemm_quack.py --report /tmp/cm.ncu-rep"
run ncu_ring 90 bash -c "ncu --clock-control none --set full --import-source no -k regex:row_ring_kernel --launch-count 4 -f -o /tmp/cr $Q cross-entropy --dtype bf16 --shapes 16384x32768 --dir bwd --config all --ms 20 > /dev/null && python3 scripts/ncu_gemm_quack.py --report /tmp/cr.ncu-rep"
run ce_bwd_acc 90 python3 bench/bench_rows.py --ops ce_bwd --dtypes bf16 --shapes 16384x32768 --impls ours,quack --rounds 3 --plot '' --out $R/ce_bwd.jsonl
