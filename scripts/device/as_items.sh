# Run AS. Call 1 (cold, A/B build on the device: the dgated 128x192 pingpong candidates are A/B
# only):
#   BUDGET=585 TEST_TMO=240 TESTS='GemmDGatedAbTiles.* *GemmGatedTest*' PYFILES='test_mlp' \
#   ITEMS=scripts/device/as_items.sh bash scripts/device/call_focus.sh, carry [".peers", ".whl", ".data"]
# (GemmDGatedAbTiles is one test, EveryCandidateTile, forcing every dgated candidate, the two
# 128x192 ones included: one of its two shards runs nothing and call_focus warns; *GemmGatedTest*
# skips A/B candidates.) The A/B build (~270 s) and the tests leave call 1 time for dgated_192;
# act_longk and the tables go to later calls on the same warm machine:
#   BUDGET=<budget_left_s - 30, at most 590> ITEMS=scripts/device/as_items.sh bash scripts/device/call_bench.sh
# (items done on the warm machine are skipped; a fresh machine builds again and reruns them).
# An H200 in a later call is a fresh machine: carry [".peers", ".whl", ".data"] and expect the
# build. Device time (~1,800 s) fits call 1 and one or two more: the dgated candidates first,
# then fused_table, then the rest.
#
# dgated_192: gemm_dgated on 128x192 pingpong (instances_ab.txt: default buffers, a1d2) against
# the rule (128x256 from K = 4096, a3d2io at K <= 2048) and a1d2 on 128x128. AR2 / AR8 (H100):
# rule 1.08-1.18 x plain at K = 4096 / 8192, 1.04 at K = 14336, 1.39 at K = 2048. gated moved
# 1.18 -> 0.99 on the same tile change; against it, AH3's dgated 128x192ppa1r (register stores,
# before the per-activation copies) read 1.51 / 1.20 x the rule at K = 2048 / 4096. Predicted:
# 128x192pp 1.02-1.15 at K >= 4096, 1.15-1.35 at K = 2048; a1d2 within 3 % of the default
# buffers. Above 1.10 x plain at K >= 4096 the candidates go.
run dgated_192 200 python3 bench/bench_gemm_fused.py --impls ours --ops dgated --acts swiglu --methods burst --burst-rounds 3 --burst-rest-ms 300 --tiles auto,128x192pp,128x192ppa1d2,128x128pp --shapes 16384x14336x4096,16384x4096x14336,8192x8192x8192,16384x14336x2048 --out $R/dgated_192.jsonl
# act_longk: act / dact at 16384 x 4096 x 14336 (the rule's cooperative 128x256 by kLongK) against
# 128x192pp (AR7, H100: dact 1.123 / 1.061 against 1.068 / 0.976 x plain), and gated (AR1:
# 128x256 ahead). Predicted: 128x192pp ahead by 2-8 % for act and dact, behind for gated.
run act_longk 150 python3 bench/bench_gemm_fused.py --impls ours --ops act,dact --acts relu,gelu_tanh_approx --methods burst --burst-rounds 3 --burst-rest-ms 300 --tiles auto,128x192pp --shapes 16384x4096x14336,16384x4096x28672 --out $R/act_longk.jsonl
run gated_longk 100 python3 bench/bench_gemm_fused.py --impls ours --ops gated --acts swiglu --methods burst --burst-rounds 3 --burst-rest-ms 300 --tiles auto,128x192pp --shapes 16384x4096x14336,16384x4096x28672 --out $R/gated_longk.jsonl
# Issue 17's table by the acceptance method with QuACK (H200 where lent): act / dact for QuACK's
# three activations, gated / dgated / bias, both without and with rests. Predicted (H200; run U's
# QuACK / ours act 1.084 / 0.999 / 0.995, dact 1.050 / 0.956 / 1.020; AR's H100 ratios): ours /
# plain act and gated <= 1.03 at 16384 x 14336 x 4096 and 8192³, dact <= 1.05, dgated 1.05-1.15,
# bias within 2 %; QuACK / ours 0.95-1.05; torch / ours >= 1.04 for act at 16384 x 14336 x 4096.
# mlp_rest (1.5 s rests): SwiGLU >= 1.0 x compile, relu² 0.97-1.03 x QuACK and compile.
run fused_table 300 python3 bench/bench_gemm_fused.py --ops act,dact,gated,dgated,bias --methods burst --burst-rounds 2 --out $R/fused_table.jsonl
run fused_table_rest 300 python3 bench/bench_gemm_fused.py --ops act,dact,gated,dgated,bias --methods burst --burst-rounds 2 --burst-rest-ms 300 --out $R/fused_table_rest.jsonl
run mlp_rest 240 python3 bench/bench_gemm_fused.py --ops mlp --methods burst --burst-rounds 3 --burst-rest-ms 1500 --out $R/mlp_rest.jsonl
