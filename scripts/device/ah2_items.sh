# Run AH, call 2 (PREBUILT=1 at main's stamp; carry [".prebuilt"]):
#   PREBUILT=1 BUDGET=240 TEST_TMO=60 TESTS='' PYFILES='' ITEMS=scripts/device/ah2_items.sh
#   bash scripts/device/call_focus.sh
# Issue 16's whole-set misses (AH1, burst x cuBLAS): 4096³ 0.912, 2048³ 0.941, 128x8192x8192
# 0.946, 8192x8192x128 0.789. Every production tile, stream-K off / rule / forced, kernel-only
# beside cuBLAS (quack-bench's ratio), two rounds.
QB=build/d/bench/quack-bench
whole_tiles() { for r in 1 2; do for sk in 0 auto 1; do for t in "" 128x128pp 128x192pp 128x256 128x64 64x128; do echo "round=$r sk=$sk tile=${t:-rule}"; QUACK_GEMM_STREAMK=$sk QUACK_GEMM_TILE=$t $QB gemm --layout rr --shapes 4096x4096x4096,2048x2048x2048,128x8192x8192,8192x8192x128 --ms 60; done; done; done; }
run whole_tiles 200 bash -c "QB=$QB; $(declare -f whole_tiles); whole_tiles"
