# Run AU: the device calls of the session after 2026-12-06's second (docs/status.md, "Next device
# calls"). The first two items need the A/B build (the candidates of instances_ab.txt): the
# library prebuilt here with them (~80 min on 2 cores without ccache: start it first, in
# /work/main's build/, then check the stamp), or built on the device (~300 s of a cold call).
#   AB_INSTANCES=ON scripts/device/prebuild_lib.sh
#   [ "$(cat .prebuilt-lib/stamp)" = "$(bash scripts/device/stamp.sh lib) ab=ON" ] && echo current
# Calls (leave `kind` out; timeout_s 600):
# 1 (cold): PREBUILT_LIB=1 AB_INSTANCES=ON BUDGET=565 bash scripts/device/call_tests.sh
#   carry [".prebuilt-lib", ".whl", ".data"] (every GPU test: the epilogue's folded C tail and
#   half-subtile copies, SASS byte-identical on 20 TUs at 280b2ca, not yet GPU-run)
# 2 (warm, within 30 s): PREBUILT_LIB=1 TESTS='' PYFILES='' BUDGET=<budget_left_s - 30, <= 590> \
#   ITEMS=scripts/device/au_items.sh bash scripts/device/call_focus.sh, carry [".peers", ".whl", ".data"]
# 3 (warm): PREBUILT_LIB=1 BUDGET=<...> ITEMS=scripts/device/au_items.sh bash scripts/device/call_bench.sh
# Run AT's items took 30-120 s each where their timeouts were 150-330 s.
#
# stage_ctl: issue 17's first suspect, a mainloop stage (act / dact keep 4 on 128x192pp, plain
# 5). Plain 128x192pp against its 4-stage control 128x192ppa0d5 at issue 17's shapes, in act's
# (rc: kk) and dact's (rr: km) layouts. Predicted: if the stage is what act / dact lose, a0d5
# reads 1.02-1.06 x auto at 16384 x 4096 x 14336 (AT: act 1.03, dact 1.06 x plain there); if not,
# within 1 % at every shape (then the stage count is not the lever: look at dact's preact wait).
run stage_ctl 150 python3 bench/bench_gemm.py --shapes 16384x14336x4096,16384x4096x14336,8192x8192x8192 --layouts rr,rc --methods burst --burst-rounds 3 --burst-rest-ms 300 --impls cublas,ours --tiles auto,128x192ppa0d5 --out $R/stage_ctl.jsonl
# dact_tiles: the second suspect, dact's preact loaded when its subtile's turn comes, and the
# candidate fix of the first. dact with a C ring of 1 / 2 (same 4 stages) and with one buffer per
# output (a0d1: 5 stages, stores in series) against production, QuACK beside. Predicted: if the
# preact's wait is the cost, a2d2 moves dact from 1.04-1.06 to <= 1.03 x plain and >= 1.0 x
# QuACK at 16384 x 4096 x 14336 (a1d2 between); if the stage is (stage_ctl), a0d1 does at long K
# and may lose at K = 4096 (its stores in series: ~1 us a subtile).
run dact_tiles 260 python3 bench/bench_gemm_fused.py --ops dact --acts relu,gelu_tanh_approx --impls ours,quack --tiles auto,128x192ppa0d1,128x192ppa1d2,128x192ppa2d2 --methods burst --burst-rounds 3 --burst-rest-ms 300 --out $R/dact_tiles.jsonl
# act_d1: act with one buffer per output (5 stages; 172 / 72 bytes of spills against production's
# 16 / 24). Predicted: within 1 % of auto unless the stage is the cost (then 1-3 % ahead at K = 14336).
run act_d1 160 python3 bench/bench_gemm_fused.py --ops act --acts relu,relu_sq --impls ours,quack --tiles auto,128x192ppa0d1 --methods burst --burst-rounds 3 --burst-rest-ms 300 --out $R/act_d1.jsonl
# gemm_power: issue 16's sustained gap (AT2: 0.953 x max; QuACK 0.955 of the dense peak at its
# sampled clock, ours 0.852). bench_gemm.py now samples board power and the hardware-slowdown
# reasons per implementation. Predicted: ours spends more energy a GEMM than QuACK (mJ_ours /
# mJ_quack 1.03-1.10) or runs a larger share of samples under a hardware slowdown; if neither,
# the sampled clock is the effective one and ours does less per clock at the power limit only.
run gemm_power 200 python3 bench/bench_gemm.py --quick --methods sustained --rounds 8 --out $R/gemm_power.jsonl
# rms_bwd_again: AT5 read rmsnorm bwd 16384 x 4096 at 0.754 x copy (rounds 11 % apart) where AL2
# read 0.831; no code change between. Five rounds, the anchors' shapes. Predicted: 0.80-0.84.
run rms_bwd_again 90 python3 bench/bench_rows.py --ops rmsnorm_bwd,layernorm_bwd --dtypes bf16 --shapes 16384x4096,8192x262144 --impls ours,compile --rounds 5 --plot '' --out $R/rms_bwd_again.jsonl
# topk_again: AT6 read QuACK 1.9-2.5 x slower than its earlier figures in one process. Predicted:
# QuACK back at ~0.078 ms (fp32 (65536, 1024, 8)); ours 0.080-0.082 (bar: >= 1.0 x QuACK).
run topk_again 60 python3 bench/bench_topk.py --dtypes fp32,bf16 --shapes 65536x1024x8 --impls ours,quack --rounds 5 --out $R/topk_again.jsonl
# lce_20: issue 20's anchor (16384 x 4096 x 128256) with QuACK; cut by the budget in AT6.
run lce_20 200 python3 bench/bench_linear_ce.py --quick --out $R/lce_20.jsonl
