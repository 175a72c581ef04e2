# Run AQ4 (cold; one call): the fused epilogues with the activation a constant per tile path
# (specialize, epilogue_ops.cuh), library prebuilt from 79f9cd2's tree:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=<budget_left_s - 120> ITEMS=scripts/device/aq4_items.sh
#   bash scripts/device/call_bench.sh, carry [".prebuilt-lib", ".whl", ".data"].
# AQ3 (H100, main 3530b6a, ncu at 16384 x 14336 x 4096): plain 2.452 ms (tensor pipe 97.5 %
# active), gemm_act relu 2.674 (83.0 %), quick_gelu 3.377 (62.3 %), gelu_tanh_approx 2.815
# (78.2 %), gelu_erf 4.223 (48.6 %); "no instruction" the second stall reason of every act
# (4.4-7.1 per issue against plain's 0.26), and quick_gelu / gelu_tanh_approx the same
# instruction count (380 M / 381 M) 20 % apart: the act code's place in the kernel, not its
# length. Predicted: relu, gelu_tanh_approx, quick_gelu within 1.10 x plain and gelu_erf within
# 1.20 at 16384 x 14336 x 4096 (AQ2: 1.218 / 1.240 / 1.571 act, 1.101 / 1.184 / 1.475 dact);
# no_instruction stalls of the act kernels near plain's; swiglu gated / dgated move the same way
# (AN2 dgated 1.15 x plain at 16384 x 14336 x 4096, a3d2io 1.30 at 16384 x 14336 x 2048).
QB=build/d/bench/quack-bench
run act_spec 120 python3 bench/bench_gemm_fused.py --impls ours --ops act,dact --acts relu,gelu_tanh_approx,gelu_erf,quick_gelu --methods burst --burst-rounds 2 --shapes 16384x14336x4096,8192x8192x8192 --out $R/act_spec.jsonl
run gated_spec 90 python3 bench/bench_gemm_fused.py --impls ours --ops gated,dgated --acts swiglu --methods burst --burst-rounds 2 --shapes 16384x14336x4096,16384x14336x2048,16384x5632x2048,8192x8192x8192 --out $R/gated_spec.jsonl
run gemm_gtests 120 build/d/tests/cpp/quack_gpu_tests --gtest_filter='GemmAct*:GemmGated*:GemmBias*:*DGated*:*Dgated*:*Mlp*' --gtest_brief=1
run act_ncu 110 bash -c "ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/act python3 scripts/ncu_gemm_quack.py act 16384 14336 4096 relu,quick_gelu,gelu_erf > /dev/null && python3 scripts/ncu_gemm_quack.py --report /tmp/act.ncu-rep"
run gemm_pytests 150 python3 -m pytest -q -x tests/python/test_gemm.py tests/python/test_mlp.py tests/python/test_linear.py
