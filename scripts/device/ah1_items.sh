# Run AH, call 1 (device build without the A/B tiles, Python; carry [".peers", ".whl", ".data"]),
# on main:
#   AB_INSTANCES=OFF BUDGET=585 TEST_TMO=60 TESTS='' PYFILES='' ITEMS=scripts/device/ah1_items.sh
#   bash scripts/device/call_focus.sh
# Diagnosis for the helpers' branches (dgated, topk-q32) and two bars never measured lately.
QB=build/d/bench/quack-bench
# Issue 19's open miss, top-k fp32 (65536, 4096, 32) on the queue kernel (0.574 ms kernel-only,
# QuACK ~0.545): every configuration quack-bench can force, then ours beside QuACK under ncu with
# per-SASS-line stall samples.
run topk_cfg 40 $QB topk --dtype fp32 --shapes 65536x4096x32 --config all
ncu_sass() { mkdir -p $R/$1; ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/ncu_$1 python3 scripts/ncu_gemm_quack.py "${@:2}" > /dev/null 2>&1; python3 scripts/ncu_gemm_quack.py --report /tmp/ncu_$1.ncu-rep; python3 scripts/ncu_gemm_quack.py --sass /tmp/ncu_$1.ncu-rep $R/$1; }
run sass_topk_q32 120 bash -c "$(declare -f ncu_sass); R=$R; ncu_sass topk_q32 topk 65536 4096 32 fp32"
# Issue 17's worst fused ratio, gemm_dgated 1.19 x plain at 16384 x 14336 x 4096 (U2): plain
# kernel-only by tile (km, the dgated GEMM's layout), then dgated and the plain 128x128pp under ncu.
plain_tiles() { for t in "" 128x128pp 128x192pp 128x256; do echo "tile=${t:-rule}"; QUACK_GEMM_TILE=$t $QB gemm --layout rr --shapes 16384x14336x4096,16384x4096x14336,8192x8192x8192 --ms 200; done; }
run plain_tiles 60 bash -c "QB=$QB; $(declare -f plain_tiles); plain_tiles"
run ncu_dgated 90 env OUT=$R KBASE=demangled bash scripts/ncu_kernel.sh dgated 'regex:DGatedEpilogue' python3 bench/bench_gemm_fused.py --ops dgated --shapes 16384x14336x4096 --methods burst --burst-rounds 1 --impls ours --out /tmp/f.jsonl
run ncu_plain128 60 env OUT=$R QUACK_GEMM_TILE=128x128pp bash scripts/ncu_kernel.sh plain128 'regex:gemm_kernel' $QB gemm --layout rr --shapes 16384x14336x4096 --ms 20
# Issue 16's whole-set bar (burst, x cuBLAS; last measured in F, kernel-only) and N = 50257.
run gemm_whole 150 python3 bench/bench_gemm.py --methods burst --impls ours,cublas --burst-rounds 2 --out $R/gemm_whole.jsonl
run gemm_50257 40 python3 bench/bench_gemm.py --shapes 8192x50257x4096 --layouts rr,rc --methods burst --impls ours,cublas --out $R/gemm_50257.jsonl
# Issue 15: the fp32 softmax / log_softmax forwards as planned since 6e2945a (AG1: softmax 3.96 /
# 3.12 TB/s at 32768 / 262144 against QuACK 4.15 / 3.90).
run anchors_f32 120 python3 bench/bench_rows.py --dtypes fp32 --ops softmax_fwd,log_softmax_fwd --rounds 2 --out $R/anchors_f32.jsonl
# LayerNorm bwd beside RMSNorm bwd under ncu at 16384 x 4096 (0.71 against 0.83 x copy, AF1).
run ncu_lnbwd 60 env OUT=$R bash scripts/ncu_kernel.sh ln_bwd 'regex:row_.*kernel' $QB layernorm --wdtype x --bias 1 --dir bwd --shapes 16384x4096 --ms 1
run ncu_rmsbwd 60 env OUT=$R bash scripts/ncu_kernel.sh rms_bwd 'regex:row_.*kernel' $QB rmsnorm --dir bwd --shapes 16384x4096 --ms 1
