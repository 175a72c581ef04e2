# Run AE, call 4 (prebuilt, C++ only; carry [".prebuilt"] alone):
#   PREBUILT=1 AB_INSTANCES=OFF BUDGET=200 TEST_TMO=90 TESTS='*SoftmaxConfigs* TopkBitonic.*'
#   PYFILES='' ITEMS=scripts/device/ae4_items.sh bash scripts/device/call_focus.sh
# GEMM tiles at the demo's N = 2048 outputs (issues 16 / 21; kernel-only, for diagnosis): does
# 128x128 pingpong (epilogue overlapped, no partial tile, 15.5 waves) beat the rule's 128x256
# cooperative (tensor pipe 92.4 % active in AA2) and 128x192 pingpong (a third of a tile wasted)?
for t in auto 128x128pp 128x192pp 128x256; do
  run gemm_n2048_$t 25 env QUACK_GEMM_TILE=$([ $t = auto ] || echo $t) build/d/bench/quack-bench gemm --layout rc --shapes 16384x2048x2048,16384x2048x5632 --ms 150
  run gemm_n2048_rr_$t 25 env QUACK_GEMM_TILE=$([ $t = auto ] || echo $t) build/d/bench/quack-bench gemm --layout rr --shapes 16384x2048x6144,16384x2048x11264 --ms 150
done
