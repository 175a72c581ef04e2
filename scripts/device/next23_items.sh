# Branch `next23` = main + `row-loads` (issues 15 / 18 / 19: plain row and top-k loads) +
# `gemm-k128b` (issue 16: the 256x128 1x2 tiles at K = 128) + `ln-bwd3` (issue 15: the forced-only
# LayerNorm bwd entry staged-v2-ra-occ3, 3 CTAs per SM at 4096 columns) + `colsum1` (the column
# sums of a row call in one launch: LayerNorm bwd 4096 predicted +5-6 % planned, RMSNorm bwd 4096
# +1-2 %; AK4's LayerNorm bwd kernel-only 0.1228 / 0.8204 / 3.506 / 3.927 ms at the four anchors)
# + `topk-regs3` (issue 19: the fp32 fit T 16 instance on float keys, 1122 -> 1028 SASS a thread;
# predicted 0.071-0.075 ms kernel-only, 0.0745-0.0785 by the acceptance method at (65536, 1024, 8)). Check out next23 in the checkout
# the device copies; carry [".peers", ".whl", ".data"]. Three calls (~1,700 s):
# Call 1 (cold; A/B build with Python ~320 s):
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=240 TESTS='*Softmax* *RmsNorm*-*RmsNormBwdConfigs* *LayerNorm* *Ce* *Topk*'
#   PYFILES='test_softmax test_rmsnorm test_layernorm test_cross_entropy test_topk'
#   ITEMS=scripts/device/next23_items.sh bash scripts/device/call_focus.sh
# Call 2 (warm, within 30 s): AB_INSTANCES=ON BUDGET=560 ITEMS=scripts/device/next23_items.sh bash scripts/device/call_bench.sh
# Call 3 (warm), before merging: AB_INSTANCES=ON BUDGET=560 TMO_MAX=400 bash scripts/device/call_tests.sh
# Predictions: the headers of row_loads_items.sh, k128b_items.sh, ln_bwd3_items.sh and
# topk_regs3_items.sh (their items, reordered here). Ran as run AL (docs/performance.md); the
# k128b and ln_bwd3 items' tiles and entry were dropped after it (their items files: git show
# d9a3f15:scripts/device/k128b_items.sh, ln_bwd3_items.sh).
QB=build/d/bench/quack-bench
run hints 60 bash -c "nvcc -O3 -arch=sm_90a -o /tmp/cache_hints scripts/diag_cache_hints.cu && /tmp/cache_hints"
run k_rows 120 bash -c "$QB softmax --shapes 16384x4096,16384x32768,16384x65536 --dir all; $QB rmsnorm --shapes 16384x4096,16384x32768,16384x65536 --dir fwd; $QB layernorm --shapes 16384x4096,16384x32768 --dir fwd; $QB rmsnorm --shapes 16384x4096,16384x32768 --dir bwd; $QB topk --dtype fp32 --shapes 65536x1024x8,65536x4096x32; $QB topk --dtype bf16 --shapes 65536x4096x32,16384x32768x64; $QB cross-entropy --dtype bf16 --dir fwdbwd --shapes 16384x65536,16384x131072,8192x262144"
run topk_r3_k 60 bash -c "$QB topk --dtype fp32 --shapes 65536x1024x8,65536x2048x8,65536x1024x16; $QB topk --dtype fp32 --shapes 65536x1024x8 --softmax row; $QB topk --dtype fp32 --shapes 65536x1024x8 --largest 0"
run k128b_same 90 python3 scripts/check_tile_same.py --op gemm --base 256x128c1x2 --tiles 256x128c1x2e64a0d4,256x128c1x2e64 --shapes 8192x8192x128,1000x1000x520,4096x2048x4096,130x4000x64 --must-contain '256x128c1x2e64a0d4=EpiCAhead,256x128c1x2e64=EpiSubtile,256x128c1x2=256, 128, 1, 2, false'
k128b() { S=8192x8192x128,8192x8192x256,16384x16384x128
  for t in 256x128c1x2e64a0d4 256x128c1x2e64 256x128c1x2 128x128pp; do echo "== tile $t"; QUACK_GEMM_TILE=$t $QB gemm --layout rr --shapes $S --ms 60; done; }
run k128b 90 bash -c "QB=$QB; $(declare -f k128b); k128b"
S4=16384x4096,16384x32768,16384x131072,8192x262144
lnk() { for r in 1 2; do
  echo "== round $r planned"; $QB layernorm --wdtype x --bias 1 --dir bwd --shapes $S4 --ms 150
  echo "== round $r staged-v2-ra-occ3"; $QB layernorm --wdtype x --bias 1 --dir bwd --shapes $S4 --config staged-v2-ra-occ3 --ms 150
  done; }
run ln_bwd3_k 150 bash -c "QB=$QB S4=$S4; $(declare -f lnk); lnk"
lna() { for r in 1 2; do
  echo "== round $r planned"; python3 bench/bench_rows.py --dtypes bf16 --ops layernorm_bwd --impls ours --shapes 16384x4096 --rounds 3 --out $R/ln_bwd3_accept_plan_$r.jsonl 2>&1 | tail -4
  echo "== round $r staged-v2-ra-occ3"; QUACK_LAYERNORM_BWD_ENTRY=staged-v2-ra-occ3 python3 bench/bench_rows.py --dtypes bf16 --ops layernorm_bwd --impls ours --shapes 16384x4096 --rounds 3 --out $R/ln_bwd3_accept_occ3_$r.jsonl 2>&1 | tail -4
  done; }
run ln_bwd3_accept 200 bash -c "R=$R; $(declare -f lna); lna"
run acc_topk 90 python3 bench/bench_topk.py --out $R/acc_topk.jsonl
run topk_r3_p1 45 python3 bench/bench_topk.py --dtypes fp32 --shapes 65536x1024x8 --out $R/topk_r3_p1.jsonl
run acc_fwd 200 python3 bench/bench_rows.py --ops softmax_fwd,log_softmax_fwd,rmsnorm_fwd,layernorm_fwd --dtypes bf16 --impls ours,compile,quack --rounds 2 --out $R/acc_fwd.jsonl
run acc_ce 200 python3 bench/bench_rows.py --ops ce_fwd_bwd,ce_fwd_bwd_half --dtypes bf16 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack --rounds 2 --out $R/acc_ce.jsonl
run acc_bwd 200 python3 bench/bench_rows.py --ops softmax_bwd,log_softmax_bwd,rmsnorm_bwd --dtypes bf16 --impls ours,compile,quack --rounds 2 --out $R/acc_bwd.jsonl
# Small rows (M = 32768; AD3 / AB: softmax fwd 1024 0.963 x compile, the open small-row miss) and
# the fp32 forwards (AH1 / AG1: softmax 32768 0.952 x the peers, rmsnorm 32768 3.92 against
# compile's 4.28): plain loads predicted +2-5 % where the row ops' loads are plain (kCols = 0, or
# a column slice <= 32 KB).
run acc_small 120 python3 bench/bench_rows.py --small --ops rmsnorm_fwd,softmax_fwd,log_softmax_fwd,layernorm_fwd --impls ours,compile --rounds 2 --out $R/acc_small.jsonl
run acc_f32 150 python3 bench/bench_rows.py --dtypes fp32 --ops softmax_fwd,rmsnorm_fwd --impls ours,compile,quack --rounds 2 --out $R/acc_f32.jsonl
run k128b_burst 150 python3 bench/bench_gemm.py --shapes 8192x8192x128,8192x8192x256,16384x16384x128 --layouts rr --methods burst --burst-rounds 2 --tiles auto,256x128c1x2e64a0d4,256x128c1x2e64 --out $R/k128b_burst.jsonl
