# Call on branch `gemm-k128c` (main + the e128 A/B tiles below); A/B build with Python; carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=240 TESTS='Gemm.EveryTileConfig' PYFILES=''
#   ITEMS=scripts/device/k128c_items.sh bash scripts/device/call_focus.sh
# (Gemm.EveryTileConfig forces every lincomb tile of the build, the e128 ones included, on tails,
# batches, C loaded into the D buffers and rows TMA cannot address: the plain-store path.)
# Issue 16's 8192 x 8192 x 128 (bound by writing D's 134 MB). Run AL, kernel-only, ms at
# 8192x8192x128: 256x128c1x2 (128 x 32 subtiles, 64-byte rows per TMA box row) 0.0926,
# 256x128c1x2e64 (128 x 64, 128-byte rows) 0.0690, e64a0d4 (a whole tile of D buffers) 0.0704,
# 128x128pp (64 x 64, 128-byte rows) 0.0639, cuBLAS (nvjet 256x128 1x2 coopA) 0.0498. AI4 at
# 8192x8192x256 / 16384x16384x128: 128x128pp 0.0806 / 0.2378, 256x128c1x2 0.1119 / 0.3438,
# cuBLAS 0.0668 / 0.1831.
# Candidates (e128: subtiles as wide as the N = 128 tile, rows of 256 bytes of D):
#   256x128c1x2e128: 2 subtiles of 128 x 128 per tile, 2 buffers of 32 KB, 3 mainloop stages;
#   128x128ppe128: per warpgroup 2 subtiles of 64 x 128 per tile, 2 buffers of 16 KB (its bytes,
#   5 mainloop stages); 256x128c1x2e64 the control (AL's 0.0690).
# What e128 is and is not: a TMA box row with the 128-byte swizzle spans at most 128 bytes, so
# each e128 subtile sits in two SW128 column blocks and its store is two 64-column boxes (the
# e64 / 128x128pp boxes: UTMASTG count per tile unchanged, 4), issued back to back by one thread
# after one barrier pair; no box has 256-byte rows. e128 against e64 / 128x128pp is then: both
# halves of each row handed to the TMA unit together (and fewer named barriers per tile), not
# a wider TMA request.
# Predicted, ms at 8192x8192x128 / 8192x8192x256 / 16384x16384x128. Most likely (the write rate
# is set by the boxes and by the bytes in flight, which e128 does not change):
#   128x128ppe128 0.062-0.065 / 0.078-0.083 / 0.23-0.245 (= 128x128pp: its subtiles already go
#   (m0, n0), (m0, n1), ... so the two halves of a row were issued about one subtile's staging
#   (~0.2 us) apart; now together);
#   256x128c1x2e128 0.066-0.071 / 0.085-0.092 / 0.25-0.27 (= e64: the same boxes; 3 stages
#   instead of 4 cost nothing at K = 128, 2 k-blocks a tile: e64a0d4 with 3 read 0.0704).
#   0.050-0.058 / 0.066-0.074 / 0.18-0.21 (near cuBLAS) only if DRAM's write rate depends on a
#   row's 256 bytes arriving together (the hypothesis of issue 16's open thread); if so the next
#   step is an unswizzled 256-byte box (SWIZZLE_NONE allows rows up to 256 elements; STSM then
#   needs a per-row register rotation to stay free of bank conflicts).
# Bits: each candidate must give its base's bits (same values, same conversion); the kernel-name
# check shows each forced tile reached its own kernel (demangled EpiSubtile<TileConfig<..>, N, S>).
QB=build/d/bench/quack-bench
run k128c_same 120 bash -c "python3 scripts/check_tile_same.py --op gemm --base 256x128c1x2 --tiles 256x128c1x2e128,256x128c1x2e64 --shapes 8192x8192x128,1000x1000x520,4096x2048x4096,130x4000x64,520x1001x136 --must-contain '256x128c1x2e128=1, 2, false>, 128, 2>;256x128c1x2e64=1, 2, false>, 64, 2>;256x128c1x2=256, 128, 1, 2, false' && python3 scripts/check_tile_same.py --op gemm --base 128x128pp --tiles 128x128ppe128 --shapes 8192x8192x128,1000x1000x520,4096x2048x4096,130x4000x64,520x1001x136 --must-contain '128x128ppe128=2, 1, true>, 128, 2>;128x128pp=128, 128, 2, 1, true'"
# Kernel-only (quack-bench: ours and cuBLAS alternated in one process; ms_quack, ms_cublas), two
# rounds in alternating order.
k128c() { S=8192x8192x128,8192x8192x256,16384x16384x128
  for r in 1 2; do
    tiles="128x128ppe128 128x128pp 256x128c1x2e128 256x128c1x2e64 256x128c1x2"
    [ $r = 2 ] && tiles="256x128c1x2 256x128c1x2e64 256x128c1x2e128 128x128pp 128x128ppe128"
    for t in $tiles; do echo "== round $r tile $t"; QUACK_GEMM_TILE=$t $QB gemm --layout rr --shapes $S --ms 60; done
  done; }
run k128c 180 bash -c "QB=$QB; $(declare -f k128c); k128c"
# The acceptance method (burst, do_bench with L2 cleared) beside cuBLAS (torch.matmul) and QuACK.
run k128c_burst 150 python3 bench/bench_gemm.py --shapes 8192x8192x128,8192x8192x256,16384x16384x128 --layouts rr --methods burst --burst-rounds 2 --tiles auto,128x128ppe128,256x128c1x2e128 --out $R/k128c_burst.jsonl
