# Session 21, call AJ1 (cold) on branch aj = main + topk-fixup + dgated2; A/B build with Python;
# carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=100 TESTS='*Topk* *LayerNorm*' PYFILES='test_topk test_layernorm'
#   ITEMS=scripts/device/aj_items.sh bash scripts/device/call_focus.sh
# Issue 19: the acceptance table with the one-LOP3 entry (predicted fp32 (65536, 1024, 8)
# ~0.083 ms kernel-only, AI4 main 0.0854); kernel-only first for the kernel's own figure.
run topk_k 30 build/d/bench/quack-bench topk --dtype fp32 --shapes 65536x1024x8 --config bitonic-k8-e64-t16-fit
run topk_accept 120 python3 bench/bench_topk.py --out $R/topk.jsonl
# Issue 17: dgated's cost split (predictions in scripts/device/dgated2_items.sh).
source scripts/device/dgated2_items.sh
# Then, if time is left (else next call): issue 15's LayerNorm bwd by acceptance and the gap.
source scripts/device/next_items.sh
