# A short prebuilt call on `next24` (PREBUILT=1: binaries from scripts/device/prebuild.sh with
# AB_INSTANCES=ON, no Python): the new A/B kernels' GPU tests and three kernel-only checks, to
# know before next24's full calls which parts are alive. Carry [".prebuilt"]:
#   PREBUILT=1 AB_INSTANCES=ON BUDGET=250 TEST_TMO=100 TESTS='Gemm.EveryTileConfig GemmDGatedAbTiles.* *RmsNormFwd*'
#   PYFILES='' ITEMS=scripts/device/n24_pre_items.sh bash scripts/device/call_focus.sh
# Predictions: top-k fp32 queue 0.37-0.39 / 0.176-0.182 ms (next24_items.sh); RMSNorm fwd
# kernel-only within 1 % of run AL's 0.5228 ms at 32768 (row_l2n_items.sh); the K = 128 tiles as
# k128c_items.sh's header (128x128ppe128 0.062-0.065, 256x128c1x2e128 0.066-0.071, e128u within
# 3 % of e128; cuBLAS 0.0498).
QB=build/d/bench/quack-bench
run pre_topk_q 30 $QB topk --dtype fp32 --shapes 65536x4096x32,16384x4096x128
run pre_l2n_k 40 $QB rmsnorm --shapes 16384x16384,16384x32768 --dir fwd --ms 100
prek() { for t in 128x128pp 128x128ppe128 128x128ppe128u 256x128c1x2e64 256x128c1x2e128 256x128c1x2e128u; do
  echo "== tile $t"; QUACK_GEMM_TILE=$t $QB gemm --layout rr --shapes 8192x8192x128 --ms 40; done; }
run pre_k128c 60 bash -c "QB=$QB; $(declare -f prek); prek"
