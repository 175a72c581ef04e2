# Branch `am5` (docs/pending/am5.diff on main) = main + `ce-lean` (issue 18) + `rows-4096`
# (issue 15, forced-only entries) + `e128-promote` (issue 16) + the A/B control 128x128ppa0d4.
# None GPU-run: run AM's last call was refused (no machine lent). Check am5 out in the checkout
# the device copies (`run` copies /work/main's working tree: `git -C /work/main checkout --detach am5`,
# or apply the diff there); carry [".peers", ".whl", ".data"]. Calls:
# Call 1 (cold, A/B build with Python ~330 s): every GPU test its parts reach, then the items:
#   AB_INSTANCES=ON BUDGET=590 TEST_TMO=200 TESTS='Gemm.* *GemmCases* *Ce*-*Large* *Lce*-*Large* *RmsNorm*-*RmsNormBwdConfigs*:*Large* *LayerNorm*-*Large* *Softmax*-*Large*'
#   PYFILES='test_cross_entropy test_linear_cross_entropy test_gemm' ITEMS=scripts/device/am5_items.sh
#   bash scripts/device/call_focus.sh
# Call 2 (warm, within 30 s): the items call 1 did not reach, CE by the acceptance method last:
#   AB_INSTANCES=ON BUDGET=560 ITEMS=scripts/device/am5_items.sh bash scripts/device/call_bench.sh
# (or, with .prebuilt from `AB_INSTANCES=ON scripts/device/prebuild.sh build` on this tree:
#   PREBUILT=1 ..., carry [".prebuilt"], PYFILES='', no acc_* items.)
# Merge each part whose tests pass and prediction holds: ce-lean changes production kernels
# (the CE training forward's dx kernel at 64 registers; every cluster register kernel's col_t /
# cluster count), so its gtests AND test_cross_entropy / test_linear_cross_entropy first.
QB=build/d/bench/quack-bench
# Issue 16: branch e128-promote (the rule's 128x128pp runs e128 here; 128x128ppa0d4, an A/B
# control, is the tile as it was), at the shapes where the rule takes
# 128x128pp with K >= 1024 (tile_rule.cpp: medium M·N, where 128x192 does not qualify or costs
# more waves). e128's D buffers are the same bytes as the 64 x 64 subtiles' (kStagesD0: 2 x
# 16 KB against 4 x 8 KB a warpgroup), so the mainloop keeps its stages; at K >= 1024 the
# epilogue hides under the other warpgroup's mainloop. Predicted: 128x128pp (e128) within ±2 %
# of 128x128ppa0d4 at each (ahead by up to 5 % at K = 1024, where the epilogue still shows); a loss beyond 2 %
# at any: promote only below K = 1024.
e128k() { for r in 1 2; do for t in 128x128ppa0d4 128x128pp; do echo "== round $r tile $t"
  QUACK_GEMM_TILE=$t $QB gemm --layout rr --shapes 4096x4096x2048,2048x11264x8192,4096x5632x4096,8192x2048x2048,2048x5632x1024,4096x4096x1024 --ms 100
  done; done; }
run e128_longk 120 bash -c "QB=$QB; $(declare -f e128k); e128k"
# Issue 18, branch `ce-lean` (0a22f9a, 872ccd5): the training forward's dx kernel without the
# softcap at 64 registers (4 CTAs of 256 per SM; was 80 at 3) and the fix-up tested by one bit a
# vector (fix_mask); SASS a thread bf16 2,519 -> 2,382 (this build's cuobjdump; AD3's ncu read 2,528), fp32 1,856 -> 1,716; results bitwise as
# before by construction. Kernel-only at AL1 (main): fwd with dx 1.216 / 2.402 / 2.539 ms at
# 16384 x 65536 / 16384 x 131072 / 8192 x 262144; AM3's census 1.206-1.212 at 65536.
# Predicted: the ce_fwd_bwd record (the training step; AM3's census 1.212 on this entry)
# 1.10-1.19 (centre 1.15, -5 %) at 65536, the same share at the others
# (the occupancy is the lever: softmax fwd, the same bytes at 4 CTAs and 63 registers, reads
# 1.045); the scaled step's forward with the word at 0 (the loss-only kernel, not changed but
# for col_t / %nclusterid) within ±2 % of AD4's 0.596 / 1.234 / 1.168.
run ce_lean 120 bash -c "$QB cross-entropy --dtype bf16 --dir fwdbwd --shapes 16384x65536,16384x131072,8192x262144; $QB cross-entropy --dtype fp32 --dir fwdbwd --shapes 16384x65536"
# Issue 15, branch `rows-4096`: the forced-only entries t128v4-sm16 / r2t64v8-sm8 at 16384 x 4096
# (the file's header holds the predictions).
source scripts/device/rows4096_items.sh
# Issue 18 by the acceptance method (needs the Python build): the training step with ce-lean,
# against AL2's 0.826 / 0.842 / 0.795 x copy (bar 0.85). Predicted 0.85-0.88 at 65536 if the
# kernel-only prediction holds (the step is the fwd+dx kernel plus the bwd's early return).
run acc_ce 200 python3 bench/bench_rows.py --ops ce_fwd_bwd,ce_fwd_bwd_half --dtypes bf16 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack --rounds 2 --out $R/acc_ce.jsonl
