# Run AF, call 3 (prebuilt, C++ only; carry [".prebuilt"] alone): here first
# AB_INSTANCES=OFF scripts/device/prebuild.sh, then
#   PREBUILT=1 AB_INSTANCES=OFF BUDGET=380 TEST_TMO=150 TESTS='Gemm.* *GemmCases* *Lce*'
#   PYFILES='' ITEMS=scripts/device/next_cpp_items.sh bash scripts/device/call_focus.sh
QB=build/d/bench/quack-bench
# GEMM with the 128x256e64 forward / dgrad (kk / km) by the rule, kernel-only beside cuBLAS: the
# demo's N = 2048 outputs and issue 16's five shapes, two rounds each (rc: kk, rr: km).
gemm_rule() { for r in 1 2; do for l in rc rr; do $QB gemm --layout $l --shapes 16384x2048x5632,16384x2048x11264,8192x8192x8192,16384x14336x4096,16384x4096x14336,16384x28672x4096,8192x128256x4096 --ms 300 | sed "s/^/$l /"; done; done; }
run gemm_rule 150 bash -c "QB=$QB; $(declare -f gemm_rule); gemm_rule"
# RMSNorm / softmax fwd at 16384 x 4096, every configuration, four rounds (AF2: t256v2 4.00
# against the planned t128v4 3.88 for RMSNorm, one sample; T2 had them the other way round).
rows_4096() { for r in 1 2 3 4; do $QB rmsnorm --shapes 16384x4096 --dir fwd --config all; $QB softmax --shapes 16384x4096 --dir fwd --config all; done; }
run rows_4096 60 bash -c "QB=$QB; $(declare -f rows_4096); rows_4096"
