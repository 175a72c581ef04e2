# Run AT: the device calls of the session after 2026-12-06 (docs/status.md, "Next device calls").
# Before call 1, in /work/main after CI has built HEAD there or in /work/ci (ccache then serves
# the TUs): AB_INSTANCES=OFF scripts/device/prebuild_lib.sh (switches build/ to the production
# instances; ~10 min with ccache, ~60 min without), then check
#   [ "$(cat .prebuilt-lib/stamp)" = "$(bash scripts/device/stamp.sh lib) ab=OFF" ] && echo current
# Calls (leave `kind` out; note the card each reply names; set the run's timeout_s to 600):
# 1 (cold, ~300 s; every GPU test: the first of the rule by epilogue, gemm_dgated's 128x192
#   pingpong in production, and of the epilogue's subtile loop macro: SASS byte-identical to the
#   loops before it on 17 TUs, its _Pragma form on 2):
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=565 bash scripts/device/call_tests.sh
#   carry [".prebuilt-lib", ".whl", ".data"]
# 2 (warm: issue it within 30 s of call 1's reply, so decide nothing in between):
#   PREBUILT_LIB=1 TESTS='' PYFILES='' BUDGET=<call 1's lease.budget_left_s - 30, at most 590> \
#   ITEMS=scripts/device/at_items.sh bash scripts/device/call_focus.sh
#   carry [".peers", ".whl", ".data"] (the machine's build/lib copy of the library and its A/B
#   switch are reused; with TESTS / PYFILES unset call_focus runs its default suites instead)
# 3 (warm, if budget is left): PREBUILT_LIB=1 BUDGET=<...> ITEMS=scripts/device/at_items.sh \
#   bash scripts/device/call_bench.sh, same carry (items done on this machine are skipped; one the
#   budget cut reruns whole).
# A machine gone cold between calls builds the library again (~240 s; .prebuilt-lib and .peers
# together pass the 64 MiB carry): carry .peers and let it build, or carry .prebuilt-lib and
# drop the QuACK columns. The items below run in priority order; their timeouts add to 1,650 s,
# more than one session's device time after call 1: what is cut moves to the next session. The
# demo's full command (scripts/device/README.md, call_demo.sh, ~320 s) is a call of its own.
#
# dgated_demo: at K <= 2048 the rule keeps gemm_dgated on 128x128ppa3d2io (gemm.cpp,
# choose_instance: 128x192 not compared there). Run AS at 16384 x 14336 x 2048: 128x192pp
# 1.285 / 1.318 x plain against a3d2io's 1.326 / 1.330. Predicted: 128x192pp within 3 % of
# a3d2io at each shape (at the demo's 16384 x 5632 x 2048 the estimates put 128x192 1.3 % ahead
# of 128x128 at a1d2's rate). 128x192pp ahead by more than 2 % at the demo's shape and at
# 16384 x 14336 x 2048: let it compete at K <= 2048 (drop the rate192 = 0 there).
run dgated_demo 150 python3 bench/bench_gemm_fused.py --impls ours --ops dgated --acts swiglu --methods burst --burst-rounds 3 --burst-rest-ms 300 --tiles auto,128x192pp --shapes 16384x5632x2048,16384x5632x1024,8192x14336x2048,16384x14336x2048 --out $R/dgated_demo.jsonl
# gemm_quick: issue 16's bar 1 (five LLM shapes, burst and sustained, with cuBLAS and QuACK): the
# first reading with QuACK since the k-loop's descriptors moved to uniform registers (AO5, H200:
# 0.982 burst / 0.945 sustained x max; AS2 read no change against cuBLAS). Predicted: burst
# 0.97-1.00 x max, sustained 0.93-0.97 x max (QuACK ahead at the power limit, as in AO5 / AP2).
run gemm_quick 200 python3 bench/bench_gemm.py --quick --methods burst,sustained --burst-rounds 3 --rounds 8 --out $R/gemm_quick.jsonl
# Issue 17's table by the acceptance method with QuACK on the new rule: act /
# dact for QuACK's three activations, gated / dgated / bias, with rests first (the cooler card's
# figures AS2 read steadier: dact 1.00-1.07 x plain rested against 1.18-1.23 without), then
# without. Predicted from AS (H100): ours / plain act and gated <= 1.03, dact <= 1.03 at
# 16384 x 4096 x 14336 (now 128x192pp; 1.02-1.07 on 128x256 in AS2), dgated 1.00-1.06 at
# K >= 4096 (the table's 16384 x 14336 x 4096, 16384 x 4096 x 14336, 8192³), bias within 2 %; QuACK / ours 0.97-1.03 (AS2 rested: dact 0.92-0.96 at
# 16384 x 4096 x 14336 on 128x256).
# mlp_rest (1.5 s rests): SwiGLU >= 1.0 x compile, relu² 0.97-1.03 x QuACK and compile.
# (--acts: each name to the ops of its kind; bias takes none.)
run fused_act_rest 330 python3 bench/bench_gemm_fused.py --ops act,dact --acts relu,relu_sq,gelu_tanh_approx --methods burst --burst-rounds 2 --burst-rest-ms 300 --out $R/fused_act_rest.jsonl
run fused_gated_rest 200 python3 bench/bench_gemm_fused.py --ops gated,dgated,bias --acts swiglu --methods burst --burst-rounds 2 --burst-rest-ms 300 --out $R/fused_gated_rest.jsonl
run mlp_rest 240 python3 bench/bench_gemm_fused.py --ops mlp --methods burst --burst-rounds 3 --burst-rest-ms 1500 --out $R/mlp_rest.jsonl
run fused_act 330 python3 bench/bench_gemm_fused.py --ops act,dact --acts relu,relu_sq,gelu_tanh_approx --methods burst --burst-rounds 2 --out $R/fused_act.jsonl
run fused_gated 200 python3 bench/bench_gemm_fused.py --ops gated,dgated,bias --acts swiglu --methods burst --burst-rounds 2 --out $R/fused_gated.jsonl
# gemm_set (call 3, H200 if lent): issue 16's bar 2, the whole set by burst against cuBLAS (AO2: 0.984).
run gemm_set 300 python3 bench/bench_gemm.py --methods burst --burst-rounds 2 --impls ours,cublas --out $R/gemm_set.jsonl
# rows_15 (call 4): issue 15's missed points on H200, this build (AL2 / AK4 / AN2 readings).
run rows_15 200 python3 bench/bench_rows.py --ops rmsnorm_fwd,rmsnorm_bwd,layernorm_fwd,layernorm_bwd,softmax_fwd,ce_fwd_bwd --dtypes bf16 --shapes 16384x4096,4096x262144,16384x131072 --impls ours,quack,compile --out $R/rows_15.jsonl
run gemm_set2 60 python3 bench/bench_gemm.py --methods burst --burst-rounds 2 --impls cublas,ours --out $R/gemm_set2.jsonl
# call 5: issue 19's fp32 point and issue 20's anchor shape on this build.
run topk_19 60 python3 bench/bench_topk.py --dtypes fp32,bf16 --shapes 65536x1024x8,16384x4096x128 --rounds 5 --out $R/topk_19.jsonl
run lce_20 120 python3 bench/bench_linear_ce.py --quick --out $R/lce_20.jsonl
