# Run BR (either card): the burst column's same-kernel spread (docs/status.md, thread 15). BQ1
# (H100, docs/data/run-BO_items.txt) read one kernel at 16384 x 4096 x 14336 as 698.0 and 735.9
# TFLOP/s under two names (auto, auto+nosk) in one process, do_bench back to back with no rest.
# Here three names of one kernel (auto; auto@m8: the rule's raster named; auto+nosk: stream-K
# off, which the rule no longer takes at these shapes) beside cuBLAS, 6 rounds; the records
# carry every round's reading and order (burst_rounds_ms_<impl>, burst_orders).
# One call, cold or warm, carry [".prebuilt-lib"], any kind:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=400 ITEMS=scripts/device/br_items.sh bash scripts/device/call_bench.sh
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
# same_kernel (~60 s each): predicted without rests the three names up to ~5 % apart, the
# spread following the position in the round (the predecessor's heat); with 300 ms rests within
# 1 %. Rule: rests bring the spread under 1 % where it was >= 3 % without -> the GEMM bars'
# burst readings take --burst-rest-ms (DESIGN §8's acceptance method still: do_bench on the
# public call, rotated), and performance.md's burst tables say so.
for rest in 0 300; do
  run same_kernel_rest$rest 150 bash -c "$CARD; python3 -u bench/bench_gemm.py --shapes 16384x4096x14336,8192x8192x8192 --layouts rr --methods burst --burst-rounds 6 --burst-rest-ms $rest --impls ours,cublas --tiles auto,auto@m8,auto+nosk --out $R/same_kernel_rest$rest.jsonl"
done
