# Issue 15, LayerNorm bwd at 16384 x 4096 (AJ1 0.692 x copy by the acceptance method, bar 0.85):
# branch `ln-bwd3` = main + the forced-only entry staged-v2-ra-occ3 (staged-v4-ra's code at 2
# vectors per thread, 256-thread CTAs, 3 CTAs per SM: 79 registers for bf16 / fp16, 80 fp32, no
# spills; staged-v4-ra 128) and QUACK_LAYERNORM_BWD_ENTRY (forces an entry on the public call).
# One cold call, no A/B tiles (no GEMM item); carry [".peers", ".whl", ".data"]:
#   AB_INSTANCES=OFF BUDGET=585 TEST_TMO=150 TESTS='LayerNormBwdOccupancyEntry.*:All/LayerNormConfigs.MatchesReference/staged_v*_bwd LayerNormBwdSums.* Bwd/LayerNormShapes.*' PYFILES='test_layernorm'
#   ITEMS=scripts/device/ln_bwd3_items.sh bash scripts/device/call_focus.sh
# Call 2 (warm, within 30 s of call 1; items done in call 1 skip):
#   AB_INSTANCES=OFF BUDGET=560 ITEMS=scripts/device/ln_bwd3_items.sh bash scripts/device/call_bench.sh
# (LayerNormPlan.BackwardOccupancyEntry is a host test: call_focus.sh runs every host test.)
# The plan is unchanged (staged-v4-ra on 16-bit rows): only forced calls run the new entry.
#
# Why (docs/status.md open thread 4; the analysis table in the branch's first commit message):
# at 4096 the partial rows (2 x 264 x 4096 x 4 B, written, then read back by two column-sum
# launches) are 4 % of the 403 MB, but the two launches are latency-bound (~10-12 us: AH3's ncu
# kernel 115.7 us against the call's 128.3). AJ1's 136 us split: ~94 us at copy speed, ~19 us
# main-kernel excess (~113 us, 0.83 x copy), ~12 us partials and column sums, ~11 us in the
# process / host. The largest part is the main kernel: 2 CTAs of 256 threads per SM (16 warps)
# at 128 registers, latency-bound (AH3 ncu: issue ~50 %, long / short scoreboard; 20 % fewer
# instructions gave 1-3 %, AG3; a third stage gave nothing, AI4). The new entry holds half the
# column sums per thread (32 registers against 64) so a third CTA fits: 24 warps per SM, one
# 4096-column row per CTA, ~27 % more instructions per row (the per-row reduction over 2
# vectors per thread instead of 4); it writes 396 partial rows (1.5 x). At 131072 / 262144 the
# partials are 0.2 % and the clusters occupy 120 / 112 of 132 SMs: not this entry's rows.
#
# Predictions (H200, bf16 weight and bias, TB/s = 3·M·N·2 / time):
#   kernel-only 16384 x 4096: staged-v4-ra ~3.22 (AI4 3.217); staged-v2-ra-occ3 3.35-3.55
#     (+4 to +10 %; the main kernel ~113 -> 98-106 us, +2-4 us for the larger partials and the
#     column sums' 50 loads per thread against 33). Below 3.30 (or above 3.70): the 24-warp
#     model is wrong; read the instruction growth (2 vectors per thread carry the same per-row
#     reduction) before anything else.
#   kernel-only 16384 x 32768: occ3 (clusters of 8 CTAs, 3 per SM) 3.5-3.9 against ~3.94: no
#     gain expected there (one exchange over 8 CTAs a row instead of 2).
#   131072 / 262144: the entry does not take them (rows beyond 16 x 256 x 16 columns): the
#     forced rows print nothing; their misses are the cluster residency (15 x 8 = 120 and
#     7 x 16 = 112 of 132 SMs at ~30 GB/s per SM), not the partials.
#   acceptance 16384 x 4096: planned 0.69-0.70 x copy (AJ1 0.692), forced 0.72-0.76.
QB=build/d/bench/quack-bench
S4=16384x4096,16384x32768,16384x131072,8192x262144
# Kernel-only, the plan and the new entry alternating (two rounds each), then 2048 / 8192 rows.
lnk() { for r in 1 2; do
  echo "== round $r planned"; $QB layernorm --wdtype x --bias 1 --dir bwd --shapes $S4 --ms 150
  echo "== round $r staged-v2-ra-occ3"; $QB layernorm --wdtype x --bias 1 --dir bwd --shapes $S4 --config staged-v2-ra-occ3 --ms 150
  done
  echo "== 2048 / 8192"; for c in auto staged-v2-ra-occ3; do $QB layernorm --wdtype x --bias 1 --dir bwd --shapes 16384x2048,16384x8192 --config $c --ms 150; done; }
run ln_bwd3_k 150 bash -c "QB=$QB S4=$S4; $(declare -f lnk); lnk"
# Acceptance (bench_rows.py, ours only), 16384 x 4096: the plan and the entry in alternating
# processes (the switch is read per call; one process per setting keeps each do_bench clean).
lna() { for r in 1 2; do
  echo "== round $r planned"; python3 bench/bench_rows.py --dtypes bf16 --ops layernorm_bwd --impls ours --shapes 16384x4096 --rounds 3 --out $R/ln_bwd3_accept_plan_$r.jsonl 2>&1 | tail -4
  echo "== round $r staged-v2-ra-occ3"; QUACK_LAYERNORM_BWD_ENTRY=staged-v2-ra-occ3 python3 bench/bench_rows.py --dtypes bf16 --ops layernorm_bwd --impls ours --shapes 16384x4096 --rounds 3 --out $R/ln_bwd3_accept_occ3_$r.jsonl 2>&1 | tail -4
  done; }
run ln_bwd3_accept 200 bash -c "R=$R; $(declare -f lna); lna"
# The main kernel and the column sums apart (ncu, clocks left alone; 16384 x 4096): the staged
# kernel's duration, registers, occupancy and stalls, planned and forced, and the colsum
# launches' durations (the partial rows: 264 planned, 396 forced). Predicted: main kernel ~113 us
# planned (AH3 staged-v4 115.7), 98-106 forced at 24 warps per SM; colsum ~4 us a launch planned,
# ~5-6 forced.
run ln_bwd3_ncu 200 bash -c "for c in auto staged-v2-ra-occ3; do
  OUT=$R KBASE=demangled bash scripts/ncu_kernel.sh ln_bwd_\${c} 'regex:LayerNormBwdT' $QB layernorm --wdtype x --bias 1 --dir bwd --shapes 16384x4096 --config \$c --ms 1
  OUT=$R bash scripts/ncu_kernel.sh colsum_\${c} 'regex:colsum' $QB layernorm --wdtype x --bias 1 --dir bwd --shapes 16384x4096 --config \$c --ms 1 | head -3; done"
# The four anchors by the acceptance method as planned (AJ1's table again, this build).
run ln_bwd3_anchors 150 python3 bench/bench_rows.py --dtypes bf16 --ops layernorm_bwd --impls ours --rounds 2 --out $R/ln_bwd3_anchors.jsonl
# If time is left: 32768 by the acceptance method with the entry.
run ln_bwd3_accept32k 60 env QUACK_LAYERNORM_BWD_ENTRY=staged-v2-ra-occ3 python3 bench/bench_rows.py --dtypes bf16 --ops layernorm_bwd --impls ours --shapes 16384x32768 --rounds 2 --out $R/ln_bwd3_accept32k.jsonl
