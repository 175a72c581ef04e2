# Run AS. Call 1 (cold, A/B build on the device: the dgated 128x192 pingpong candidates are A/B
# only):
#   BUDGET=585 TESTS='*GemmGatedTest* GemmDGatedAbTiles.* GemmGatedEdge.*' PYFILES='test_mlp' \
#   ITEMS=scripts/device/as_items.sh bash scripts/device/call_focus.sh, carry [".peers", ".whl", ".data"]
# Later warm calls: BUDGET=... ITEMS=scripts/device/as_items.sh bash scripts/device/call_bench.sh
# (items done on the warm machine are skipped).
#
# dgated_192: gemm_dgated on 128x192 pingpong (instances_ab.txt: default buffers, a1d2) against
# the rule (128x256 from K = 4096, a3d2io at K <= 2048) and a1d2 on 128x128. AR2 / AR8 (H100):
# rule 1.04-1.18 x plain at K >= 4096, 1.39 at K = 2048. Predicted (gated moved 1.18 -> 0.99 on
# the same tile change): 128x192pp 1.02-1.08 at K >= 4096, 1.15-1.30 at K = 2048; a1d2 within
# 3 % of the default buffers.
run dgated_192 200 python3 bench/bench_gemm_fused.py --impls ours --ops dgated --acts swiglu --methods burst --burst-rounds 3 --burst-rest-ms 300 --tiles auto,128x192pp,128x192ppa1d2,128x128pp --shapes 16384x14336x4096,16384x4096x14336,8192x8192x8192,16384x14336x2048 --out $R/dgated_192.jsonl
# act_longk: act / dact at 16384 x 4096 x 14336 (the rule's cooperative 128x256 by kLongK) against
# 128x192pp (AR7, H100: dact 1.123 / 1.061 against 1.068 / 0.976 x plain), and gated (AR1:
# 128x256 ahead). Predicted: 128x192pp ahead by 2-8 % for act and dact, behind for gated.
run act_longk 200 python3 bench/bench_gemm_fused.py --impls ours --ops act,dact,gated --acts relu,gelu_tanh_approx,swiglu --methods burst --burst-rounds 3 --burst-rest-ms 300 --tiles auto,128x192pp --shapes 16384x4096x14336,16384x4096x28672 --out $R/act_longk.jsonl
# Issue 17's table by the acceptance method with QuACK (H200 where lent): act / dact for QuACK's
# three activations, gated / dgated / bias, both without and with rests.
run fused_table 300 python3 bench/bench_gemm_fused.py --ops act,dact,gated,dgated,bias --methods burst --burst-rounds 2 --out $R/fused_table.jsonl
run fused_table_rest 300 python3 bench/bench_gemm_fused.py --ops act,dact,gated,dgated,bias --methods burst --burst-rounds 2 --burst-rest-ms 300 --out $R/fused_table_rest.jsonl
run mlp_rest 240 python3 bench/bench_gemm_fused.py --ops mlp --methods burst --burst-rounds 3 --burst-rest-ms 1500 --out $R/mlp_rest.jsonl
