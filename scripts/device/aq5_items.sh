# Run AQ5 (cold, one call, the rest of the session's device time): ncu of plain gemm, gemm_gated
# and gemm_dgated (swiglu) at 16384 x 14336 x 4096 with the specialised epilogues (79f9cd2's
# library): AQ4 read gated 1.213 / dgated 1.272 x plain there (burst, H100), against act's
# 1.01-1.08. Whether their kernels still wait on instruction fetch (no_instruction) or on the
# epilogue's own time (E > T: barrier stalls, the store path).
#   PREBUILT_LIB=1 BUDGET=<budget_left_s - 100> ITEMS=scripts/device/aq5_items.sh bash scripts/device/call_bench.sh,
#   carry [".prebuilt-lib", ".whl", ".data"].
run gated_ncu 100 bash -c "ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/gd python3 scripts/ncu_gemm_quack.py gated 16384 14336 4096 swiglu > /dev/null && python3 scripts/ncu_gemm_quack.py --report /tmp/gd.ncu-rep"
