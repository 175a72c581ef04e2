# Run AE, call 3 (warm, after call 2's device build): the demo's full command through
# scripts/device/call_demo.sh with ITEMS=scripts/device/ae3_items.sh, then these diagnoses.
# GEMM sustained method (issue 16): does a back-to-back batch time QuACK's kernels as it times
# ours (QuACK's sustained 7-11 % above ours at the same clock in AA3, 1.7 % under ncu)?
run diag_sustained 90 python3 scripts/diag_sustained.py --shape 8192x8192x8192 --calls 150
# Softmax fwd acceptance gap (issue 15; AD3: the kernel 6 % slower in the Python process): the
# SM clock during each measurement, randn against quack-bench's repeated-block inputs, and
# quack-bench's own clock.
run diag_gap 150 python3 scripts/diag_acceptance_gap.py --op softmax --shapes 16384x65536,8192x262144 --pattern
run qb_clock 40 bash -c "nvidia-smi --query-gpu=clocks.sm --format=csv,noheader -lms 100 > $R/qb_clock_smi.txt & p=\$!; build/d/bench/quack-bench softmax --dtype bf16 --dir fwd --shapes 16384x65536,8192x262144 --ms 2000; kill \$p; sort $R/qb_clock_smi.txt | uniq -c | sort -rn | head -5"
