# Call DG3 (cold) on branch dgated3 (main at d75101d + the A/B tiles below); A/B build with
# Python; carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=60 TESTS='' PYFILES=''
#   ITEMS=scripts/device/dgated3_items.sh bash scripts/device/call_focus.sh
# Issue 17: gemm_dgated's preact path in smem (128x128ppa1d2). Static analysis (branch dgated3,
# scripts/dgated_smem_banks.py): preact and dpreact are 32-bit words in 64 x 32 subtiles (rows of
# 128 B, SW128); load_subtile reads preact with 8 ld.shared.v2 per thread and subtile and
# store_subtile writes dpreact with 8 st.shared.v2 at the same addresses; in the WGMMA fragment
# order the 4 rows of each half-warp hit each of their 16 banks twice (rows 2k, 2k + 1 share a
# chunk pair under SW128): 4 wavefronts per instruction instead of 2, 32 per warp and subtile
# for preact and 32 for dpreact (ideal 16 each), if the H200 serves an 8-byte access by
# half-warps (ncu's model; whole-warp packing would make it conflict-free). postact (STSM x4,
# SW64) is conflict-free. That is 1024 extra wavefronts per 128x128 tile: 5.77 M at 16384 x 5632
# x 2048 (AI2's ncu: dgated 6.69 M bank conflicts against plain 0.55 M, excess 6.14 M) and 14.7 M
# at 16384 x 14336 x 4096 (AH1: 18.5 M against 1.5 M, excess 17.0 M): the half-warp model holds and
# these accesses are most of dgated's excess conflicts. As smem-pipe time they are small (~3.8 %
# of an SM's cycles at 5632; ~128 extra cycles per subtile of the epilogue's chain).
# Tiles: diag4 preact loaded and waited on, not read; diag5 diag3 + the reads of a never-written
# preact buffer; a1d2cf the conflict-free lane order (bit-identical); a1d2er preact's next load
# issued right after every thread's reads (named barrier 5 + grp) instead of after the visitor
# and the output-buffer wait (bit-identical); a1d2cfer both.
# Predicted (ms, 5632x2048 / 14336x4096 / 8192^3; AJ: production 0.894 / 3.434-3.559 / 1.876,
# diag3 0.763-0.778 / 3.183-3.295 / 1.820):
#   diag4 0.85-0.89 / 3.35-3.50 / 1.85-1.88 (the wait and TMA's smem write are most of it);
#   diag5 0.77-0.81 / 3.20-3.35 / 1.82-1.84 (the conflicted reads alone cost little);
#   a1d2cf 0.87-0.89 / 3.40-3.50 / 1.86-1.88 (at most 2-3 %: 128 FSEL more a subtile);
#   a1d2er 0.80-0.87 / 3.30-3.45 / 1.83-1.87 (the L2 -> smem round trip under the visitor);
#   a1d2cfer <= a1d2er. tile_same: all three bit-equal to a1d2 (exit 0).
# ncu at 16384 x 5632 x 2048: l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum a1d2 ~6.7 M
# (AI2), a1d2cf ~0.9 M (a1d2 less 5.77 M).
run tile_same 90 python3 scripts/check_tile_same.py --base 128x128ppa1d2 --tiles 128x128ppa1d2cf,128x128ppa1d2er,128x128ppa1d2cfer
DG=128x128ppa1d2,128x128ppa1d2diag3,128x128ppa1d2diag4,128x128ppa1d2diag5,128x128ppa1d2cf,128x128ppa1d2er,128x128ppa1d2cfer
run dgated3 300 python3 bench/bench_gemm_fused.py --ops dgated --acts swiglu --impls ours --methods burst --burst-rounds 2 --shapes 16384x5632x2048,16384x14336x4096,8192x8192x8192 --tiles $DG --plain-tile 128x128pp --out $R/dgated3.jsonl
for t in a1d2 a1d2cf; do
  run ncu_$t 90 env OUT=$R KBASE=demangled bash scripts/ncu_kernel.sh dg3_$t 'regex:DGatedEpilogue' python3 bench/bench_gemm_fused.py --ops dgated --acts swiglu --shapes 16384x5632x2048 --methods burst --burst-rounds 1 --impls ours --tiles 128x128pp$t --out /tmp/f_$t.jsonl
done
