# The session after run AH. Call 1 (device build with Python; with the A/B tiles when a
# candidate below needs them; carry [".peers", ".whl", ".data"]), on main:
#   AB_INSTANCES=ON BUDGET=585 TEST_TMO=150 TESTS='*Topk* Gemm.EveryTileConfig'
#   PYFILES='test_topk' ITEMS=scripts/device/next_items.sh bash scripts/device/call_focus.sh
# docs/status.md "Open threads" says why each item is here.
QB=build/d/bench/quack-bench
# Issue 19's acceptance table with the sparse offer planned (b83afdb; AH4 kernel-only: fp32
# (65536, 4096, 32) 0.375 ms against QuACK's ~0.545): every shape, bf16 and fp32, beside QuACK
# 0.2.0 and torch.topk. Resolves issue 19 if >= 1.0 x QuACK and >= 3 x torch everywhere.
run topk_accept 180 python3 bench/bench_topk.py --out $R/topk.jsonl
# gemm_dgated at the demo's fc2 dgrad (1.43 x plain, AH3) under ncu beside plain 128x128pp at
# the same shape: what the other warpgroup's mainloop waits for.
run ncu_dgated_k2048 90 env OUT=$R KBASE=demangled bash scripts/ncu_kernel.sh dgated_k2048 'regex:DGatedEpilogue' python3 bench/bench_gemm_fused.py --ops dgated --shapes 16384x5632x2048 --methods burst --burst-rounds 1 --impls ours --out /tmp/f.jsonl
run ncu_plain_k2048 60 env OUT=$R QUACK_GEMM_TILE=128x128pp bash scripts/ncu_kernel.sh plain_k2048 'regex:gemm_kernel' $QB gemm --layout rr --shapes 16384x5632x2048 --ms 20
# Issue 16's K = 128 (0.79 x cuBLAS, AH1/AH2): the rule beside any short-K A/B candidate of
# instances_ab.txt (set SMALLK_TILES to their tile names), kernel-only.
smallk() { for t in "" 128x128pp ${SMALLK_TILES:-}; do echo "tile=${t:-rule}"; QUACK_GEMM_TILE=$t $QB gemm --layout rr --shapes 8192x8192x128,8192x8192x256,16384x16384x128 --ms 60; done; }
run smallk 60 bash -c "QB=$QB; SMALLK_TILES='${SMALLK_TILES:-}'; $(declare -f smallk); smallk"
