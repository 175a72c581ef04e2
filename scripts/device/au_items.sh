# Run AU: the device calls of the session after 2026-12-06's second (docs/status.md, "Next device
# calls"). The first three items need the A/B build (instances_ab.txt's candidates).
# Before call 1, in /work/main, after the last commit that touches src/, include/, cmake/ or
# CMakeLists.txt (the library stamp hashes them; any such commit makes the prebuild stale):
#   AB_INSTANCES=ON scripts/device/prebuild_lib.sh build-ab
#   [ "$(cat .prebuilt-lib/stamp)" = "$(bash scripts/device/stamp.sh lib) ab=ON" ] && echo current
# (/work/main/.prebuilt-lib of 7dfc07c is stale since 4ce8529: rerun the prebuild; build-ab: its own directory, so build/'s cache keeps the production instances; a whole A/B
# library took ~20 min on 2 cores in a fresh directory, 2026-12-06, with nothing else compiling;
# ccache rarely serves it: it keys on the build directory's path.) Without a current prebuild,
# call 1 drops PREBUILT_LIB and carries .peers instead, and the device builds (~300 s of it).
# Calls (leave `kind` out; note the card each reply names: on an H100 only ratios within one run
# count, and the second readings below do not replace AT's H200 figures; timeout_s 600):
# 1 (cold): PREBUILT_LIB=1 AB_INSTANCES=ON BUDGET=565 bash scripts/device/call_tests.sh
#   carry [".prebuilt-lib", ".whl", ".data"]. Every GPU test: first GPU run of 280b2ca (the
#   epilogue's folded C tail and half subtiles; SASS byte-identical on 20 TUs), ee32912 / d96a2a1 /
#   ea935b0 (one buffer per output for A/B tiles; production SASS byte-identical on 2 TUs) and
#   GemmActAbTiles (every act / dact candidate), and f674592's EpiShared (a0d2sh: the two pingpong
#   warpgroups share the epilogue buffers and take turns; production SASS byte-identical on 4 TUs;
#   a turn that never comes would hang: the shard's timeout then names the test). If
#   GemmActAbTiles fails or hangs, drop the failing tiles from the items below (their timings
#   mean nothing).
# 2 (warm: within 30 s of call 1's reply; decide nothing in between):
#   PREBUILT_LIB=1 TESTS='' PYFILES='' BUDGET=<min(590, call 1's lease.budget_left_s - 30)> \
#   ITEMS=scripts/device/au_items.sh bash scripts/device/call_focus.sh
#   carry [".peers", ".whl", ".data"] (the machine's build/lib copy of the library is reused).
# 3 (warm, if call 2's lease.budget_left_s >= 150): PREBUILT_LIB=1 BUDGET=<min(590, that - 40)>
#   ITEMS=scripts/device/au_items.sh bash scripts/device/call_bench.sh, the same carry. Items
#   done on this machine are skipped; one the budget cut reruns whole (common_run.sh).
# A machine gone cold between calls builds the library again (~300 s): .prebuilt-lib and .peers
# together pass the 64 MiB carry, so carry .prebuilt-lib and run the items with --impls ours only
# (stage_ctl, act_d1 / dact_tiles without quack, rms_bwd_again), or carry .peers and let it build.
# Run AT's items took 16-130 s each where their timeouts were 60-330 s.
#
# Issue 17's ratios "x plain" compare against plain gemm's rule, which takes the cooperative
# 128x256 at 16384 x 4096 x 14336 (K >= kLongK) where the fused ops run 128x192pp: part of act /
# dact's 1.03-1.06 there may be the tile, not the epilogue (a third suspect). The items below
# force plain onto 128x192pp (--plain-tile, and bench_gemm's ours:128x192pp) so that each ratio
# is the epilogue's alone; 5 rounds, since tiles of equal code read 1-2 % apart.
# stage_ctl: issue 17's first suspect, a mainloop stage (act / dact keep 4 on 128x192pp, plain
# 5). Plain 128x192pp against its 4-stage control 128x192ppa0d5 at issue 17's shapes, in act's
# (rc: kk) and dact's (rr: km) layouts; auto beside (128x256 at K = 14336: the tile suspect).
# Predicted: if the stage is what act / dact lose, a0d5 reads >= 1.02 x 128x192pp at K = 14336 at
# both layouts (AT, one row each: act relu 1.030, dact relu 1.060 x plain's auto there); if not,
# within 1 % of it at every shape and layout (then look at dact's preact wait and the tile).
run stage_ctl 240 python3 bench/bench_gemm.py --shapes 16384x14336x4096,16384x4096x14336,8192x8192x8192 --layouts rr,rc --methods burst --burst-rounds 5 --burst-rest-ms 300 --impls cublas,ours --tiles auto,128x192pp,128x192ppa0d5 --out $R/stage_ctl.jsonl
# dact_tiles: the second suspect, dact's preact loaded when its subtile's turn comes, and the
# candidate fixes of the first. dact with a C ring of 1 / 2 (same 4 stages), with one buffer per
# output (a0d1: 5 stages, stores in series) and with 2 buffers per output shared by the two
# warpgroups in turns (a0d2sh: 5 stages, QuACK's layout) against production, QuACK beside. Predicted: if the
# preact's wait is the cost, a2d2 moves dact from 1.04-1.06 to <= 1.03 x plain and >= 1.0 x
# QuACK at 16384 x 4096 x 14336 (a1d2 between); if the stage is (stage_ctl), a0d1 does at long K
# and may lose at K = 4096 (its stores in series; a store's smem reads end ~1 us after issue:
# epilogue.cuh's note on the H200, ncu at 4c9df5f); a0d2sh at least as fast as a0d1 everywhere.
run dact_tiles 360 python3 bench/bench_gemm_fused.py --ops dact --acts relu,gelu_tanh_approx --impls ours,quack --tiles auto,128x192ppa0d1,128x192ppa0d2sh,128x192ppa1d2,128x192ppa2d2 --plain-tile 128x192pp --methods burst --burst-rounds 5 --burst-rest-ms 300 --out $R/dact_tiles.jsonl
# act_d1: act with one buffer per output (5 stages; 172 / 72 bytes of spills against production's
# 16 / 24) and with shared buffers (a0d2sh: 5 stages, 48 / 52). Predicted: within 1 % of auto unless the stage is the cost (then 1-3 % ahead at K = 14336).
run act_d1 240 python3 bench/bench_gemm_fused.py --ops act --acts relu,relu_sq --impls ours,quack --tiles auto,128x192ppa0d1,128x192ppa0d2sh --plain-tile 128x192pp --methods burst --burst-rounds 5 --burst-rest-ms 300 --out $R/act_d1.jsonl
# gemm_power: issue 16's sustained gap (AT2: 0.953 x max; QuACK 0.955 of the dense peak at its
# sampled clock, ours 0.852). bench_gemm.py samples board power (power.draw.instant where the
# driver has it: the query is printed) and the hardware-slowdown reasons per implementation;
# 1.5 s batches so that a one-second power average still falls inside one implementation's batch.
# At the power cap every implementation draws about the cap, so mJ a call follows the time: decide
# on the rest. Predicted: watts_ours at the cap as QuACK's, and a larger hw_slowdown_ share for
# ours (the brake slows it below its sampled clock); if the shares are level and both at the cap,
# the sampled clock is the effective one and ours does less per clock at the limit only (next:
# %globaltimer against %clock64 inside the kernel, performance.md's open question).
run gemm_power 240 python3 bench/bench_gemm.py --quick --methods sustained --rounds 4 --drop 1 --batch-ms 1500 --out $R/gemm_power.jsonl
# gemm_rest: the sustained method sleeps before each implementation's batch as long as that
# implementation's host needs to enqueue it (0.3 ms + 1.3 x calls x enqueue ms): an implementation
# slow to enqueue (QuACK's Python launch path) rests longer before each batch, and rests raise the
# clock the power limiter then allows. QuACK's sustained 8192^3 exceeds its own burst figure (AT2
# 762.9 against 699.6 TFLOP/s) where ours and cuBLAS's do not. gemm_power's records now carry
# rest_ms_<impl> and enqueue_ms_<impl>; this item gives every implementation the longest rest
# (--equal-rest). Predicted: if rest_ms_quack in gemm_power is >= 3 x ours, QuACK's lead over ours
# at these two shapes shrinks by >= 2 points here; if the rests are within 2 x, no change (+-1 %).
run gemm_rest 150 python3 bench/bench_gemm.py --shapes 8192x8192x8192,16384x14336x4096 --layouts rr --methods sustained --equal-rest --rounds 4 --drop 1 --batch-ms 1500 --out $R/gemm_rest.jsonl
# bias_tiles: issue 17's worst bias reading, 0.937 x torch.addmm at 16384 x 4096 x 14336 (AT2).
# Bias follows plain's rule (kCooperativeRates): the cooperative 128x256 at K >= kLongK. Forced
# tiles beside auto, torch (addmm) in the same process. Predicted: 128x256 (= auto) within 1 % of
# plain's 128x256 and 0.93-0.95 x addmm (addmm's cuBLAS kernel, not the epilogue, sets the gap);
# 128x192pp no better. If 128x192pp reads >= 2 % ahead of auto, the bias rule moves to the fused set.
run bias_tiles 150 python3 bench/bench_gemm_fused.py --ops bias --shapes 16384x4096x14336,16384x14336x4096 --impls ours,torch --tiles auto,128x192pp,128x256 --methods burst --burst-rounds 5 --burst-rest-ms 300 --out $R/bias_tiles.jsonl
# rms_bwd_again: AT5 read rmsnorm bwd 16384 x 4096 at 0.754 x copy (rounds 11 % apart) where AL2
# read 0.831; no code change between. Five rounds, the anchors' shapes. Predicted (H200): 0.80-0.84.
run rms_bwd_again 90 python3 bench/bench_rows.py --ops rmsnorm_bwd,layernorm_bwd --dtypes bf16 --shapes 16384x4096,8192x262144 --impls ours,compile --rounds 5 --plot '' --out $R/rms_bwd_again.jsonl
# host_time: the backward's host path per call (the acceptance figure above times
# autograd.grad: host time near the kernel's 0.11 ms would read as the spread AT5 saw). Predicted:
# rmsnorm fwd+bwd within 10 % of run N's 191 us (x F.layer_norm 1.11).
run host_time 90 python3 bench/bench_host_time.py --json $R/host_time.json
# topk_again: AT6 read QuACK at 0.148 ms (fp32 (65536, 1024, 8)), within its earlier 0.078-0.193 ms
# spread between processes (performance.md, issue 19). Predicted (H200): ours 0.080-0.082 ms; QuACK
# anywhere in that spread: the bar (>= 1.0 x QuACK) needs its figure from several processes.
run topk_again 60 python3 bench/bench_topk.py --dtypes fp32,bf16 --shapes 65536x1024x8 --impls ours,quack --rounds 5 --out $R/topk_again.jsonl
# lce_20: issue 20's anchor (16384 x 4096 x 128256) with QuACK; cut by the budget in AT6.
run lce_20 200 python3 bench/bench_linear_ce.py --quick --out $R/lce_20.jsonl
# gemm_rest5 (added after AU2): the five LLM shapes with equal rests, both orders of the method
# in one call (gemm_power's own-rest figures were taken minutes before).
run gemm_rest5 200 python3 bench/bench_gemm.py --quick --methods sustained --equal-rest --rounds 4 --drop 1 --batch-ms 1500 --out $R/gemm_rest5.jsonl
