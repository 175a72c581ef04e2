# Run AD, call 3 (device build, Python): carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=OFF BUDGET=560 TEST_TMO=200
#   TESTS='*Lce* *LinearCrossEntropy* Gemm.EveryTileConfig Gemm.StreamK TopkPlanRule.*'
#   PYFILES='test_linear_cross_entropy test_gemm'
#   ITEMS=scripts/device/ad3_items.sh bash scripts/device/call_focus.sh
# Softmax's forward on cl-t256v8 read 3.96-4.00 TB/s by the acceptance method in call 2 against
# 4.13-4.19 kernel-only; LayerNorm's (the ring, cl-t256v8-s1) read the same both ways: where the
# ~50 us per call go (issue 15).
run diag_gap 120 bash -c "python3 scripts/diag_acceptance_gap.py --op softmax --shapes 16384x65536,8192x262144; python3 scripts/diag_acceptance_gap.py --op layernorm --shapes 16384x65536,16384x131072"
# Linear + cross-entropy with the pingpong dweight tile and stream-K (issue 20, bar 1.04 x its
# GEMMs back to back; W: 1.048): the helper's estimate 1.018-1.028.
run lce_events 90 python3 bench/bench_linear_ce.py --quick --events 5 --out $R/lce_ev.jsonl
# Cross-entropy's fwd+dx kernel after the per-vector fix-up (issue 18; AC0: 746 M warp
# instructions at 16384 x 65536).
run ncu_ce_dx 100 env KBASE=demangled bash scripts/ncu_kernel.sh ce_dx_fix 'regex:CrossEntropyFwd<(true|\(bool\)1)' build/d/bench/quack-bench cross-entropy --dtype bf16 --dir fwdbwd --shapes 16384x65536 --ms 1
# Small rows by the acceptance method (issue 15's small-row bar, x compile).
run small 90 python3 bench/bench_rows.py --ops rmsnorm_fwd,softmax_fwd,layernorm_fwd --dtypes bf16 --shapes 32768x256,32768x1024 --impls ours,compile --out $R/small.jsonl --plot $R/small.png
