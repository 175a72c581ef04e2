# Run AS (docs/status.md, "Next device calls", is the plan; its commands in short):
# Call 1 (cold, A/B build on the device): every GPU test, the first since 3530b6a and the first
# of the k-loop's uniform descriptors (mainloop.cuh, every GEMM), the bad-input checks, and the
# A/B candidates (the k-loop's "vd" controls, the dgated 128x192 pingpong tiles):
#   AB_INSTANCES=ON BUDGET=565 bash scripts/device/call_tests.sh, carry [".peers", ".whl", ".data"]
# Call 2 (the same machine, warm: within ~30 s of call 1's reply; a fresh one builds again): the
# suites call 1 cut (TESTS / PYFILES; empty for none), then these items in order:
#   TESTS='...' PYFILES='...' BUDGET=<budget_left_s - 30, at most 590> \
#   ITEMS=scripts/device/as_items.sh bash scripts/device/call_focus.sh
# Call 3 (warm): BUDGET=<...> ITEMS=scripts/device/as_items.sh bash scripts/device/call_bench.sh
# (items done on this machine are skipped; one the budget cut reruns whole). Same carry. The
# timeouts below add to ~1,700 s: calls 2-3 reach about fused_gated.
#
# kloop_burst / kloop_sustained: the k-loop's uniform descriptors (production) against the control
# with them in vector registers (tile suffix vd; SASS per k-tile per warp 69 against 93
# instructions at 128x192pp, 55 against 66 at 128x256e64, kk TUs; ncu AQ2 at 8192^3: tensor pipe
# 98.2 % active against QuACK's 99.6 %, +16 % instructions). Each tile beside its control at every
# shape (the rule: 128x192pp, 128x256e64 at 16384x4096x14336). Predicted: burst 0.5-1.5 % faster than vd on 128x192pp, 0-1 %
# on 128x256e64; sustained 0.5-2 % (fewer issued instructions at the power limit); ours / cuBLAS
# up by as much against AO5's geomeans (0.992 burst, 1.034 sustained x cuBLAS). 3 rounds without
# rests: differences under ~1 % are within the noise.
run kloop_burst 150 python3 bench/bench_gemm.py --quick --methods burst --burst-rounds 3 --impls ours,cublas --tiles 128x192pp,128x192ppvd,128x256e64,128x256e64vd --out $R/kloop_burst.jsonl
run kloop_sustained 150 python3 bench/bench_gemm.py --shapes 8192x8192x8192,16384x14336x4096 --layouts rr --methods sustained --rounds 8 --impls ours,cublas --tiles auto,128x192ppvd --out $R/kloop_sustained.jsonl
# dgated_192: gemm_dgated on 128x192 pingpong (instances_ab.txt; its default buffers are a1d2, so
# 128x192ppa1d2 builds the same kernels and is left out) against
# the rule (128x256 from K = 4096, a3d2io at K <= 2048) and a1d2 on 128x128. AR2 / AR8 (H100):
# rule 1.08-1.18 x plain at K = 4096 / 8192, 1.04 at K = 14336, 1.39 at K = 2048. gated moved
# 1.18 -> 0.99 on the same tile change; against it, AH3's dgated 128x192ppa1r (register stores,
# before the per-activation copies) read 1.51 / 1.20 x the rule at K = 2048 / 4096. Predicted:
# 128x192pp 1.02-1.15 at K >= 4096, 1.15-1.35 at K = 2048. Above 1.10 x plain at K >= 4096 the
# candidates go.
run dgated_192 200 python3 bench/bench_gemm_fused.py --impls ours --ops dgated --acts swiglu --methods burst --burst-rounds 3 --burst-rest-ms 300 --tiles auto,128x192pp,128x128pp --shapes 16384x14336x4096,16384x4096x14336,8192x8192x8192,16384x14336x2048 --out $R/dgated_192.jsonl
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
# (--acts: each name to the ops of its kind; bias takes none.)
run fused_act 330 python3 bench/bench_gemm_fused.py --ops act,dact --acts relu,relu_sq,gelu_tanh_approx --methods burst --burst-rounds 2 --out $R/fused_act.jsonl
run fused_gated 200 python3 bench/bench_gemm_fused.py --ops gated,dgated,bias --acts swiglu --methods burst --burst-rounds 2 --out $R/fused_gated.jsonl
run fused_act_rest 330 python3 bench/bench_gemm_fused.py --ops act,dact --acts relu,relu_sq,gelu_tanh_approx --methods burst --burst-rounds 2 --burst-rest-ms 300 --out $R/fused_act_rest.jsonl
run fused_gated_rest 200 python3 bench/bench_gemm_fused.py --ops gated,dgated,bias --acts swiglu --methods burst --burst-rounds 2 --burst-rest-ms 300 --out $R/fused_gated_rest.jsonl
run mlp_rest 240 python3 bench/bench_gemm_fused.py --ops mlp --methods burst --burst-rounds 3 --burst-rest-ms 1500 --out $R/mlp_rest.jsonl
