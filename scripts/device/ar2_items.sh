# Run AR2 (86d4550: gated 128x192 pingpong in production, dgated's cooperative stand-in), cold,
# library prebuilt:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=540 TESTS='GemmGated* GemmAct* *DGated*' \
#   PYFILES='test_gemm test_mlp' ITEMS=scripts/device/ar2_items.sh bash scripts/device/call_focus.sh
#   carry [".prebuilt-lib", ".whl", ".data"].
# Predicted (AR1, H100): gated auto (now 128x192pp) 1.00-1.07 x plain at the four shapes, 128x128pp
# 1.11-1.18; dgated auto (now 128x256 from K = 4096) 1.03-1.10, 128x128pp (a1d2) 1.12-1.16 at
# K >= 4096; at K = 2048 both a3d2io (unchanged). MLP SwiGLU fwd+bwd 26.65 (AR1) -> 26.0-26.3 ms.
run gated_rule 150 python3 bench/bench_gemm_fused.py --impls ours --ops gated --acts swiglu --methods burst --burst-rounds 3 --tiles auto,128x128pp --shapes 16384x14336x4096,16384x4096x14336,8192x8192x8192,16384x14336x2048 --out $R/gated_rule.jsonl
run dgated_rule 150 python3 bench/bench_gemm_fused.py --impls ours --ops dgated --acts swiglu --methods burst --burst-rounds 3 --tiles auto,128x128pp --shapes 16384x14336x4096,16384x4096x14336,8192x8192x8192,16384x14336x2048 --out $R/dgated_rule.jsonl
run mlp 240 python3 bench/bench_gemm_fused.py --ops mlp --impls ours,torch,compile --methods burst --burst-rounds 2 --out $R/mlp.jsonl
