# Call AM5 (cold, prebuilt binaries, A/B build, no Python) on branch `am5` = main + the helpers'
# branches below; carry [".prebuilt"]:
#   PREBUILT=1 AB_INSTANCES=ON BUDGET=<left> TEST_TMO=120 TESTS='<filters>' PYFILES=''
#   ITEMS=scripts/device/am5_items.sh bash scripts/device/call_focus.sh
QB=build/d/bench/quack-bench
# Issue 16: before promoting 128x128ppe128 (branch e128-promote), the shapes where the rule takes
# 128x128pp with K >= 1024 (tile_rule.cpp: medium M·N, where 128x192 does not qualify or costs
# more waves). e128's D buffers are the same bytes as the 64 x 64 subtiles' (kStagesD0: 2 x
# 16 KB against 4 x 8 KB a warpgroup), so the mainloop keeps its stages; at K >= 1024 the
# epilogue hides under the other warpgroup's mainloop. Predicted: e128 within ±2 % of 128x128pp
# at each (ahead by up to 5 % at K = 1024, where the epilogue still shows); a loss beyond 2 %
# at any: promote only below K = 1024.
e128k() { for r in 1 2; do for t in 128x128pp 128x128ppe128; do echo "== round $r tile $t"
  QUACK_GEMM_TILE=$t $QB gemm --layout rr --shapes 4096x4096x2048,2048x11264x8192,4096x5632x4096,8192x2048x2048,2048x5632x1024,4096x4096x1024 --ms 100
  done; done; }
run e128_longk 120 bash -c "QB=$QB; $(declare -f e128k); e128k"
