# Run AG (the session after run AF; its branches ln-bwd, ln-bwd-ahead and topk-f32-4096 were
# lost with that checkout). Call 1 (device build with the A/B tiles and Python; carry
# [".peers", ".whl", ".data"]), on main:
#   AB_INSTANCES=ON BUDGET=585 TEST_TMO=120 TESTS='Gemm.EveryTileConfig' PYFILES=''
#   ITEMS=scripts/device/next_items.sh bash scripts/device/call_focus.sh
# Call 2 (warm): QUACK_DEMO_COMMIT=<sha> BUDGET=590 DEMO_TMO=585 ITEMS=scripts/device/next_items.sh
#   bash scripts/device/call_demo.sh
# (the demo's (d) bar with 128x256e64 in the forward and dgrad GEMMs; AE3: (d) 1.016 x (b)).
# Done items skip on a warm machine. docs/status.md "Open threads" says why.
QB=build/d/bench/quack-bench
# Issue 16 by both bar methods with 128x256e64 (kk / km) in production (AF3: 1.015-1.045 x
# cuBLAS kernel-only burst at the five shapes).
run gemm_quick 240 python3 bench/bench_gemm.py --quick --out $R/bench_gemm.jsonl
# The weight gradient's 128x256e64 (mm, A/B candidate) against 128x256 at the demo's wgrad
# shapes and the LM head's (cr: mm), four alternating rounds; predicted +0.5-1 % (long K).
wgrad_e64() { for r in 1 2 3 4; do for t in 128x256 128x256e64; do QUACK_GEMM_TILE=$t $QB gemm --layout cr --shapes 11264x2048x16384,2048x5632x16384,128256x4096x2048 --ms 300 | sed "s/^/$t /"; done; done; }
run wgrad_e64 150 bash -c "QB=$QB; $(declare -f wgrad_e64); wgrad_e64"
# One-stream forwards with column vectors at 16-bit rows of (4, 8] KB: t256v2 read 4.00 against
# the planned t128v4's 3.88 for RMSNorm fwd (fp32 weight) at 16384 x 4096 in four rounds (AF3);
# before a rule change, the other N of that range (t256v2 leaves threads idle there).
rows_n() { for r in 1 2; do for n in 2560 3072 3584 4096; do $QB rmsnorm --shapes 16384x$n --dir fwd --config all; $QB layernorm --wdtype x --bias 1 --shapes 16384x$n --dir fwd --config all; done; done; }
run rows_n 90 bash -c "QB=$QB; $(declare -f rows_n); rows_n"
# LayerNorm bwd on main, kernel-only at the anchors: the baseline for its rework (AF2: 3.06 /
# 3.59 / 3.07 TB/s at 4096 / 32768 / 262144).
run ln_bwd 60 $QB layernorm --wdtype x --bias 1 --shapes 16384x4096,16384x32768,16384x131072,8192x262144 --dir bwd --config all
# Issue 15's fp32 anchors, never run by the acceptance method (the forwards; two rounds).
run anchors_f32 150 python3 bench/bench_rows.py --dtypes fp32 --ops rmsnorm_fwd,softmax_fwd,layernorm_fwd --rounds 2 --out $R/anchors_f32.jsonl
# The in-process gap (docs/status.md): ours and QuACK timed quack-bench's way in Python (behind a
# spin kernel, with and without an L2 clear) beside the other ways.
run diag_spin 150 python3 scripts/diag_acceptance_gap.py --op softmax --shapes 16384x65536,16384x4096 --spin
