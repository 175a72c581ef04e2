# Run AR8 (warm after AR7): issue 17's gated / dgated / bias rows with torch and torch.compile
# beside, the rule as on main (gated 128x192pp, dgated's cooperative stand-in), 300 ms rests.
# Predicted: gated 0.99-1.06 x plain (AR2), dgated 1.04-1.14, bias within 2 %.
run fused_gated_rest 200 python3 bench/bench_gemm_fused.py --ops gated,dgated,bias --acts swiglu --impls ours,torch,compile --methods burst --burst-rounds 2 --burst-rest-ms 300 --out $R/fused_gated_rest.jsonl
