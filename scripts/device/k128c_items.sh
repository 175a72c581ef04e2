# Call on branch `gemm-k128c` (main + the e128 / e128u A/B tiles below); A/B build with Python; carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=240 TESTS='Gemm.EveryTileConfig' PYFILES=''
#   ITEMS=scripts/device/k128c_items.sh bash scripts/device/call_focus.sh
# (Gemm.EveryTileConfig forces every lincomb tile of the build, the e128 / e128u ones included, on tails,
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
# e128 and e128u: a TMA box row with the 128-byte swizzle spans at most 128 bytes, so each e128
# subtile sits in two SW128 column blocks and its store is two 64-column boxes (the e64 /
# 128x128pp boxes: 4 UTMASTG per tile's code, as theirs), issued back to back by one thread
# after one barrier pair: e128 against e64 / 128x128pp is both halves of each row handed to the
# TMA unit together (and half the named barriers), not a wider box. e128u (same subtiles,
# buffers and stages) keeps them row-major without swizzle, one box of 256-byte rows per subtile
# (2 UTMASTG per tile's code), its STSM rows rotated against bank conflicts (96 SEL per thread
# and subtile): e128u against e128 is the box's row width alone, the hypothesis under test.
# Predicted, ms at 8192x8192x128 / 8192x8192x256 / 16384x16384x128. Most likely (the write rate
# is set by the boxes and by the bytes in flight, which e128 does not change):
#   128x128ppe128 0.062-0.065 / 0.078-0.083 / 0.23-0.245 (= 128x128pp: its subtiles already go
#   (m0, n0), (m0, n1), ... so the two halves of a row were issued about one subtile's staging
#   (~0.2 us) apart; now together);
#   256x128c1x2e128 0.066-0.071 / 0.085-0.092 / 0.25-0.27 (= e64: the same boxes; 3 stages
#   instead of 4 cost nothing at K = 128, 2 k-blocks a tile: e64a0d4 with 3 read 0.0704).
#   128x128ppe128u / 256x128c1x2e128u: the same as their e128 (within 3 %; the SELs are hidden
#   under the stores): L2 takes D in 128-byte lines whatever the box's row width, so a 256-byte
#   row is two line writes as before; if run AL's 64 -> 128-byte step was half-line (2-sector)
#   writes against whole lines, there is no further step past one line.
#   0.050-0.058 / 0.066-0.074 / 0.18-0.21 (near cuBLAS) only if the write rate depends on a
#   row's 256 bytes arriving together (e128 and e128u) or in one request (e128u alone). If
#   neither moves, the gap to cuBLAS is not the box: next, the order in which the 132 SMs'
#   tiles write D (raster band, cluster pairing: DRAM pages open at once) under ncu's
#   dram__bytes_write / lts__t_sectors_op_write at 8192x8192x128.
# Bits: each candidate must give its base's bits (same values, same conversion); the kernel-name
# check shows each forced tile reached its own kernel (demangled EpiSubtile<TileConfig<..>, N, S>).
QB=build/d/bench/quack-bench
run k128c_same 150 bash -c "python3 scripts/check_tile_same.py --op gemm --base 256x128c1x2 --tiles 256x128c1x2e128,256x128c1x2e128u,256x128c1x2e64 --shapes 8192x8192x128,1000x1000x520,4096x2048x4096,130x4000x64,520x1001x136 --must-contain '256x128c1x2e128=1, 2, false>, 128, 2>;256x128c1x2e128u=EpiUnswizzled;256x128c1x2e64=1, 2, false>, 64, 2>;256x128c1x2=256, 128, 1, 2, false' && python3 scripts/check_tile_same.py --op gemm --base 128x128pp --tiles 128x128ppe128,128x128ppe128u --shapes 8192x8192x128,1000x1000x520,4096x2048x4096,130x4000x64,520x1001x136 --must-contain '128x128ppe128=2, 1, true>, 128, 2>;128x128ppe128u=EpiUnswizzled;128x128pp=128, 128, 2, 1, true'"
# Kernel-only (quack-bench: ours and cuBLAS alternated in one process; ms_quack, ms_cublas), two
# rounds in alternating order.
k128c() { S=8192x8192x128,8192x8192x256,16384x16384x128
  for r in 1 2; do
    tiles="128x128ppe128u 128x128ppe128 128x128pp 256x128c1x2e128u 256x128c1x2e128 256x128c1x2e64 256x128c1x2"
    [ $r = 2 ] && tiles="256x128c1x2 256x128c1x2e64 256x128c1x2e128 256x128c1x2e128u 128x128pp 128x128ppe128 128x128ppe128u"
    for t in $tiles; do echo "== round $r tile $t"; QUACK_GEMM_TILE=$t $QB gemm --layout rr --shapes $S --ms 60; done
  done; }
run k128c 240 bash -c "QB=$QB; $(declare -f k128c); k128c"
# The acceptance method (burst, do_bench with L2 cleared) beside cuBLAS (torch.matmul) and QuACK.
run k128c_burst 200 python3 bench/bench_gemm.py --shapes 8192x8192x128,8192x8192x256,16384x16384x128 --layouts rr --methods burst --burst-rounds 2 --tiles auto,128x128ppe128,128x128ppe128u,256x128c1x2e128,256x128c1x2e128u --out $R/k128c_burst.jsonl
