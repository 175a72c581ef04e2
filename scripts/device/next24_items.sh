# Branch `next24` = main + `row-l2n` (issue 15: the row loads beside column slices above 32 KB
# skip L1 with L2's normal policy) + `dgated-a3ip` (issue 17: an A/B dgated tile, preact loaded
# into the dpreact slot, three slots) + `gemm-k128c` (issue 16: A/B tiles with 256-byte store
# rows at K = 128). None GPU-run. Check out next24 in the checkout the device copies; carry
# [".peers", ".whl", ".data"]. Calls (~1,750 s):
# Call 1 (cold; A/B build with Python ~330 s):
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=150 TESTS='*RmsNorm*-*RmsNormBwdConfigs* *Topk* Gemm.EveryTileConfig GemmDGatedAbTiles.* *GemmGatedTest.DGated*'
#   PYFILES='test_rmsnorm test_topk' ITEMS=scripts/device/next24_items.sh bash scripts/device/call_focus.sh
# Call 2 (warm, within 30 s): the demo, not run since AG2 (issue 21; the LCE dweight ring, the
#   plain row loads and top-k's float keys since): DEMO_TMO=450 BUDGET=580 bash scripts/device/call_demo.sh
# Call 3 (warm) if the budget holds: AB_INSTANCES=ON BUDGET=<left> ITEMS=scripts/device/next24_items.sh
#   bash scripts/device/call_bench.sh (the items call 1 did not reach; each runs once a machine).
# Before merging `row-l2n`: the row pytest files and `*RmsNorm*` / `*LayerNorm*` gtests (call 1).
# The items add up to ~1,500 s, more than two calls leave: they run in this order (each once a
# warm machine), so what is cut is the end: the branches' items (l2n ~180 s, dgated ~420,
# k128c ~590), then top-k, the LCE tiles, the CE census, the demo's N = 2048 tiles. Trim
# k128c_burst (the acceptance figure of the K = 128 tiles) first if the kernel-only items
# already say no.
QB=build/d/bench/quack-bench
# Issue 16: 128x128ppe128 (AL4: 11-16 % ahead of the rule's 128x128pp at K = 128 / 256,
# kernel-only) beside the rule over the whole set by the burst method (rr: its only A/B
# instance is km), before promoting it.
# Predicted: ahead at every shape whose plan is 128x128pp (8192 x 8192 x 128: 0.79 -> ~0.91 x
# cuBLAS), within ±2 % of it elsewhere (pingpong overlaps the epilogue with the other
# warpgroup's mainloop at long K); a loss beyond 2 % at any shape: promote only at short K.
run e128_whole 300 python3 bench/bench_gemm.py --methods burst --burst-rounds 2 --layouts rr --impls ours,cublas --tiles auto,128x128ppe128 --out $R/e128_whole.jsonl
# First the branches' own items (their headers hold the predictions), where this checkout has them.
for f in row_l2n dgated_ip k128c; do
  [ -f scripts/device/${f}_items.sh ] && source scripts/device/${f}_items.sh
done
QB=build/d/bench/quack-bench
# Top-k's queue kernel back on evict-first loads (9d600f0; run AL read 0.459 ms kernel-only, 0.4675
# by the acceptance method with plain ones): predicted 0.37-0.39 ms at (65536, 4096, 32), 0.176-0.182
# at (16384, 4096, 128) fp32 (AH4 0.375 / 0.177; AJ1 acceptance 0.3815 / 0.1803).
run topk_q 60 bash -c "$QB topk --dtype fp32 --shapes 65536x4096x32,16384x4096x128,16384x32768x64; $QB topk --dtype bf16 --shapes 65536x4096x32"
run topk_q_acc 90 python3 bench/bench_topk.py --dtypes fp32 --out $R/topk_q_acc.jsonl
# Issue 20 (LCE, ≤ 0.97 × QuACK needs its GEMMs ~9 % faster): every compiled tile at its three
# GEMMs (logits x·Wᵀ rc, dx dlogits·W rr, dW dlogitsᵀ·x cr), kernel-only burst; AK2: 663 / 595 /
# 673 TFLOP/s on the rule's tiles. Predicted: the rule's tile within 2 % of the best at logits and
# dW; at dx (K = 128256) a 256x128 1x2 or 128x192 pingpong tile up to 5 % ahead (cuBLAS's nvjet
# 256x128 1x2 is 4-14 % ahead there, T2).
lcet() { for t in auto 128x256 128x256e64 128x192pp 256x128c1x2 256x192c1x2; do echo "== tile $t"
  QUACK_GEMM_TILE=$t $QB gemm --layout rc --shapes 16384x128256x4096 --ms 120
  QUACK_GEMM_TILE=$t $QB gemm --layout rr --shapes 16384x4096x128256 --ms 120
  QUACK_GEMM_TILE=$t $QB gemm --layout cr --shapes 128256x4096x16384 --ms 120; done; }
run lce_tiles 200 bash -c "QB=$QB; $(declare -f lcet); lcet"
# Issue 18: the CE training step's fwd+dx kernel reads 0.83 × copy kernel-only (1.216 ms at
# 16384 × 65536) where softmax fwd, the same bytes, reads 0.97 (1.045): every entry that takes it
# (80 registers, 3 CTAs per SM on cl-t256v8-s1; AD3). No prediction: a census for the next step.
run ce_configs 120 bash -c "$QB cross-entropy --dtype bf16 --dir fwdbwd --shapes 16384x65536,8192x262144 --config all"
# Issues 16 / 21: the demo's N = 2048 outputs (fc2 forward 16384 x 2048 x 5632 rc, fc1 dgrad
# 16384 x 2048 x 11264 rr), where cuBLAS's nvjet 256x128 1x2 is 5-10 % ahead of the rule's
# 128x256e64 a call (AB); our 256x128 1x2 with 64-byte store rows read 0.93-0.96 x the rule's
# (X). next24's A/B 256x128c1x2e64 (kk, km) stores 128-byte rows. Predicted: e64 2-5 % ahead of
# 256x128c1x2 and within ±3 % of the rule's tile (cuBLAS's lead stays: the row width is a
# K = 128 effect mostly, ~7 % of the time at K = 5632). AL4 (kernel-only): e64 0.5112 / 0.9805 ms
# against the rule's 0.5089 / 0.9694 (held). 256x128c1x2e128 (kk and km A/B; AL4 at K = 128 0.0586
# against e64's 0.0689): predicted 1-3 % ahead of e64 here (half the subtile turns a tile).
demt() { for r in 1 2; do for t in auto 256x128c1x2 256x128c1x2e64 256x128c1x2e128; do echo "== round $r tile $t"
  QUACK_GEMM_TILE=$t $QB gemm --layout rc --shapes 16384x2048x5632 --ms 120
  QUACK_GEMM_TILE=$t $QB gemm --layout rr --shapes 16384x2048x11264 --ms 120; done; done; }
run demo_n2048 150 bash -c "QB=$QB; $(declare -f demt); demt"
