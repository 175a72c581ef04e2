# Run AR7 (cold, library prebuilt; carry .prebuilt-lib, .whl, .data). mlp_rest: the MLP blocks with a 1.5 s rest before each implementation's
# do_bench (AR6, H100: whichever implementation ran second in a round read 1.5-1.9 ms slower;
# relu² ours 15.95 / 17.80 and compile 17.46 / 15.99 by position). Predicted: relu² ours within
# 2 % of compile; SwiGLU ours ~1.03 x compile (AR2: 25.16 against 26.01).
# act_longk: act / dact at 16384 x 4096 x 14336 where the rule takes the cooperative 128x256
# (kLongK) and its epilogue is not hidden; AR1 read act 1.069-1.125, dact 1.069-1.190 x plain.
# Predicted: 128x192pp 1.00-1.06 x plain (plain's own 128x192pp ~1.04 x its 128x256).
run mlp_rest 240 python3 bench/bench_gemm_fused.py --ops mlp --impls ours,torch,compile --methods burst --burst-rounds 3 --burst-rest-ms 1500 --out $R/mlp_rest.jsonl
run act_longk 150 python3 bench/bench_gemm_fused.py --impls ours --ops act,dact --acts relu,gelu_tanh_approx --methods burst --burst-rounds 3 --burst-rest-ms 300 --tiles auto,128x192pp --shapes 16384x4096x14336,16384x14336x4096 --out $R/act_longk.jsonl
