# Run AR (main 3f33d1b's code). Call 1 (cold, A/B build, focused tests of the fused GEMMs):
#   BUDGET=585 TESTS='GemmAct* GemmGated* GemmBias* *DGated* *Dgated* *Mlp*' \
#   PYFILES='test_gemm test_mlp test_linear' ITEMS=scripts/device/ar_items.sh \
#   bash scripts/device/call_focus.sh, carry [".peers", ".whl", ".data"].
# Call 2 (warm): BUDGET=... ITEMS=scripts/device/ar_items.sh bash scripts/device/call_bench.sh
# (items already done on the warm machine are skipped).
#
# gated_tiles: gemm_gated runs on 128x128 pingpong where plain gemm runs 128x192 pingpong
# (no production 128x192 gated instance: spills). AQ5 (H100, ncu, 16384 x 14336 x 4096): gated
# 3.012 ms on 128x128pp against plain 2.390 on 128x192pp, tensor pipe 75.9 %, 4.6 GB of DRAM
# reads against 2.7; AM1 (H200) plain gemm on 128x128pp itself 3.044 against the rule's ~2.6:
# the tile, not the epilogue, is most of gated's 1.21 x plain. Predicted: gated on 128x192pp
# (the A/B instance, 92 / 280 bytes of spills) 1.03-1.08 x plain at K >= 4096; on 128x256
# (cooperative, production) 1.04-1.10; 128x128pp (auto) 1.15-1.25 as AQ4.
run gated_tiles 150 python3 bench/bench_gemm_fused.py --impls ours --ops gated --acts swiglu --methods burst --burst-rounds 2 --tiles auto,128x192pp,128x256 --shapes 16384x14336x4096,16384x4096x14336,8192x8192x8192,16384x14336x2048 --out $R/gated_tiles.jsonl
# dgated_tiles: the same question for gemm_dgated on its production tiles (128x128ppa1d2 /
# a3d2io by the rule, 128x256 cooperative). Predicted: 128x256 within 5 % of auto at K = 4096.
run dgated_tiles 120 python3 bench/bench_gemm_fused.py --impls ours --ops dgated --acts swiglu --methods burst --burst-rounds 2 --tiles auto,128x256 --shapes 16384x14336x4096,16384x4096x14336,8192x8192x8192,16384x14336x2048 --out $R/dgated_tiles.jsonl
# Issue 17's table by the acceptance method on main (burst, 2 rounds, every peer): act / dact
# for QuACK's three activations. Predicted (AQ4 on H100): ours / plain 1.00-1.08, >= 1.0 x QuACK.
run fused_act 240 python3 bench/bench_gemm_fused.py --ops act,dact --acts relu,relu_sq,gelu_tanh_approx --methods burst --burst-rounds 2 --out $R/fused_act.jsonl
run fused_gated 200 python3 bench/bench_gemm_fused.py --ops gated,dgated,bias --acts swiglu --methods burst --burst-rounds 2 --out $R/fused_gated.jsonl
run mlp 200 python3 bench/bench_gemm_fused.py --ops mlp --methods burst --burst-rounds 2 --out $R/mlp.jsonl
