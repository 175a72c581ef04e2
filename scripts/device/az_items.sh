# Run AZ: the ring's L2 use (RingL2, src/row/row_params.h) A/B, kernel-only and under ncu, on the
# production build (quack-bench --ring-l2 forces the mode on the plan's entry). AY2's ncu read
# every ring user 3-10 % above its input once (H100): rmsnorm fwd 16384 x 65536 +8.0 %, 131072
# +8.6 %, layernorm fwd (bf16 w, b) 65536 +10.3 %, softmax bwd 65536 +3.4 %. Modes: 0 the plan's
# (prefetch, no hints), 1 prefetch evict-last + copies evict-first, 2 prefetch evict-last, 3 no
# prefetch, 4 copies evict-first. Predicted: mode 1 or 2 reads within 1-2 % of the minimum and
# runs 2-4 % faster than 0 at 65536 (the DRAM traffic's share); 3 is 4-5 % slower than 0 (the
# prefetch's measured gain); 4 between. Cold call, carry [".prebuilt-lib"]:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF TESTS='*SoftmaxRingL2* *ring*' PYFILES='' TEST_TMO=90
#   BUDGET=420 ITEMS=scripts/device/az_items.sh bash scripts/device/call_focus.sh
# (AZ_QUICK=1 TEST_TMO=40 BUDGET=140 for a call with ~150 s of budget: the forwards at 65536.)
# Afterwards: the tables to docs/data/run-AZ_items.txt; then delete this file (git keeps it).
Q=build/d/bench/quack-bench
ab() {  # one pass over the modes in the order given
  for m in "$@"; do
    $Q rmsnorm --dir fwd --dtype bf16 --shapes 16384x65536,16384x131072 --ring-l2 $m --ms 100
    $Q layernorm --dir fwd --dtype bf16 --wdtype x --shapes 16384x65536,8192x262144 --ring-l2 $m --ms 100
    $Q softmax --dir bwd --dtype bf16 --shapes 16384x65536 --ring-l2 $m --ms 100
  done
}
quick() {  # AZ_QUICK=1: the two forwards at 65536 only (a call with little budget)
  for m in "$@"; do
    $Q rmsnorm --dir fwd --dtype bf16 --shapes 16384x65536 --ring-l2 $m --ms 40
    $Q layernorm --dir fwd --dtype bf16 --wdtype x --shapes 16384x65536 --ring-l2 $m --ms 40
  done
}
export -f ab quick; export Q
if [ -n "${AZ_QUICK:-}" ]; then
  run ring_l2_quick 60 bash -c "quick 0 1 2 3 4 0"
else
  run ring_l2_ab 130 bash -c "ab 0 1 2 3 4 0"
fi
NCU="ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum -k regex:row_ring_kernel --launch-count 1 --csv"
run ring_l2_dram 70 bash -c "for m in 0 1 2 3 4; do for a in 'rmsnorm --dir fwd --shapes 16384x65536' 'layernorm --dir fwd --wdtype x --shapes 16384x65536'; do echo \"== \$a mode \$m\"; $NCU $Q \$a --dtype bf16 --ms 5 --ring-l2 \$m 2>&1 | grep -E 'dram__|gpu__time|No kernels' | awk -F'\",\"' '{print \$(NF-2), \$(NF-1), \$NF}'; done; done"
# ce_fwddx_sass: thread 7's per-row chain — the CE training forward's fwd+dx kernel (kGrad true)
# at 16384 x 65536 bf16 under ncu --set full, then its SASS lines with the most stall samples
# (ncu_gemm_quack.py --sass) and the whole source page as CSV. Predicted: the stalls sit on the
# row's exchange (long scoreboard / barrier at the 4-float reduction and finish's loads), not on
# the element loops.
run ce_fwddx_sass 110 bash -c "KBASE=demangled bash scripts/ncu_kernel.sh ce_fwddx 'regex:CrossEntropyFwd<(true|\(bool\)1)' $Q cross-entropy --dir fwdbwd --dtype bf16 --shapes 16384x65536 --ms 1 && python3 scripts/ncu_gemm_quack.py --sass /tmp/ncu_ce_fwddx.ncu-rep $R/ce_fwddx_sass | head -80"
