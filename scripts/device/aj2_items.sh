# Call AJ2 (cold) on branch aj (+ EpiCL2 tiles); A/B build with Python; carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=60 TESTS='' PYFILES=''
#   ITEMS=scripts/device/aj2_items.sh bash scripts/device/call_focus.sh
# Issue 17: EpiCL2 (the tile's later preact subtiles asked into L2 when it starts). AJ1: diag3
# (preact as unwaited L2 prefetches) 3.183 ms = plain 3.187 at 16384 x 14336 x 4096 (production
# 3.559); 0.763 at 16384 x 5632 x 2048 (production 0.894, diag1 0.660, plain 0.566).
# Predicted: a1d2l2 3.20-3.35 at 14336 x 4096 (the ring's loads hit L2: the wait ~L2 latency),
# 0.76-0.82 at 5632 x 2048; a2d2l2 no better (a mainloop stage less). Bits equal to a1d2.
run tile_same 60 python3 scripts/check_tile_same.py --base 128x128ppa1d2 --tiles 128x128ppa1d2l2,128x128ppa2d2l2
DG=128x128ppa1d2,128x128ppa1d2l2,128x128ppa2d2l2,128x128ppa1d2diag3
run dgated_l2 170 python3 bench/bench_gemm_fused.py --ops dgated --acts swiglu --impls ours --methods burst --burst-rounds 2 --shapes 16384x5632x2048,16384x14336x4096,8192x8192x8192 --tiles $DG --plain-tile 128x128pp --out $R/dgated_l2.jsonl
# Issue 19: AJ1 read fp32 (65536, 1024, 8) 0.0873 ms, 1.18 x QuACK (QuACK 0.1028; AI: 0.0787):
# two more processes of three rotated rounds each.
run topk_p2 45 python3 bench/bench_topk.py --dtypes fp32 --shapes 65536x1024x8 --out $R/topk_p2.jsonl
run topk_p3 45 python3 bench/bench_topk.py --dtypes fp32 --shapes 65536x1024x8 --out $R/topk_p3.jsonl
