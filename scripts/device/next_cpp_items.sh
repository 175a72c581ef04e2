# The session after run AE, call 1 (C++ only, prebuilt; carry [".prebuilt"] alone): merge
# branch coop-epi64 (A/B instance 128x256e64) into a test branch, then
# AB_INSTANCES=ON scripts/device/prebuild.sh here (the A/B build: longer) and
#   PREBUILT=1 AB_INSTANCES=ON BUDGET=585 TEST_TMO=200
#   TESTS='Gemm.EveryTileConfig Gemm.DynamicScheduler' PYFILES=''
#   ITEMS=scripts/device/next_cpp_items.sh bash scripts/device/call_focus.sh
# GEMM (issues 16 / 21): the cooperative epilogue with 128 x 64 subtiles (half the named
# barriers) against 128x256 and 128x192pp at the demo's N = 2048 outputs, six alternating
# rounds (single samples move up to 8 %, AE4); predicted 1-2 % for 128x256e64.
gemm_rounds() { for r in 1 2 3 4 5 6; do for t in 128x256 128x256e64 128x192pp; do QUACK_GEMM_TILE=$t build/d/bench/quack-bench gemm --layout rc --shapes 16384x2048x5632,16384x2048x11264 --ms 300 | sed "s/^/$t /"; done; done; }
run gemm_e64 200 bash -c "$(declare -f gemm_rounds); gemm_rounds"
