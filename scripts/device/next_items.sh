# The benches after call_focus.sh's tests, run Z's second call, in priority order; done ones skip
# on a later call (/tmp/done).
# Small rows by the acceptance method: LayerNorm fwd at N = 256 now plans r32t8v4 (kernel-only
# 2.20 / 2.05 TB/s against r8t32v1 in run Z's first call). Expected: layernorm fwd 256 from 0.78
# toward ~0.85 x compile (Y3).
run rows_small 150 python3 bench/bench_rows.py --ops layernorm_fwd,rmsnorm_fwd,softmax_fwd --dtypes bf16 --shapes 32768x256,32768x1024 --out $R/rows_small.jsonl
# GEMM: ours against QuACK (pingpong 128x192 2x1) under Nsight Compute, one launch each:
# where QuACK's mainloop does more work per clock (run Y: 92 % against 84 % of peak at 8192^3).
ncu_pair() { ncu --clock-control none --profile-from-start off --set full -f -o /tmp/ncu_$1 python3 scripts/ncu_gemm_quack.py $2 $3 $4 > /dev/null 2>&1; python3 scripts/ncu_gemm_quack.py --report /tmp/ncu_$1.ncu-rep; }
run ncu_gemm_8192 150 bash -c "$(declare -f ncu_pair); ncu_pair g8192 8192 8192 8192"
run ncu_gemm_2048 150 bash -c "$(declare -f ncu_pair); ncu_pair g2048 16384 2048 5632"
# The gated loss-only cross-entropy instances held to 1536 threads per SM (ce-spill: removes their
# 4-byte spill): base, overlay, base. Expected: within 1 % (the spill is outside the loop).
run ce_spill_ab 200 env AB_BUILD_DIR=build/d OUT=$R bash scripts/ab_overlay.sh cespill -- 'cross-entropy --dtype bf16 --dir fwdbwd --shapes 16384x4096,16384x16384 --ms 30'
