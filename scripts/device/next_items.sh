# The session after run AI. Call 1 (cold; device build with Python, no A/B tiles needed; carry
# [".peers", ".whl", ".data"]), on main:
#   AB_INSTANCES=OFF BUDGET=585 TEST_TMO=120 TESTS='*Topk* *LayerNorm*' PYFILES='test_topk test_layernorm'
#   ITEMS=scripts/device/next_items.sh bash scripts/device/call_focus.sh
# then, warm, the whole suite with a longer limit (AI1 cut four of eight shards at 231 s after the
# build): AB_INSTANCES=OFF BUDGET=590 bash scripts/device/call_tests.sh (ninja finds build/d built).
# docs/status.md "Open threads" says why each item is here.
# Issue 19 with the fp32 fit fold on vector copies (5ac55e8: 0.0854 ms kernel-only in AI4, was
# 0.0886; QuACK 0.0787 by the acceptance method, ours 0.0911 before): the acceptance table.
run topk_accept 120 python3 bench/bench_topk.py --out $R/topk.jsonl
# Issue 15: LayerNorm bwd on staged-v4-ra (planned since 3da2767; AI4 kernel-only +2.5-8.8 %)
# by the acceptance method at the bf16 anchors (AF1: 0.71-0.84 x copy).
run ln_bwd_accept 150 python3 bench/bench_rows.py --dtypes bf16 --ops layernorm_bwd --rounds 2 --out $R/ln_bwd.jsonl
# The in-process gap (AI4: the method, not the process): quack-bench's loop on torch's tensors
# (ptrs) and the public call behind quack-bench's spin (pyloop), beside the executable.
gap2() { ninja -C build/d bench/libquack-bench-lib.so > /dev/null || return 1
  L=build/d/bench/libquack-bench-lib.so; A="softmax --shapes 16384x65536 --dir fwd --ms 200"
  build/d/bench/quack-bench $A
  for m in ptrs pyloop; do python3 scripts/diag_bench_in_torch.py --lib $L --mode $m -- $A; done; }
run gap2 120 bash -c "$(declare -f gap2); gap2"
