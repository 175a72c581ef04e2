# Run BF: the LCE's dweight GEMM on the A/B candidate 128x192ppa1d2 (bf16 -> fp32 mm, C ring)
# against the rule's 128x128ppa1d2 (run BD, H100: our C-reading dweight halves ~600 TFLOP/s,
# QuACK's untuned 128x192 pingpong ~676). An A/B library: here, `AB_INSTANCES=ON bash
# scripts/device/prebuild_lib.sh` (in /work/ci's build/: the production TUs from ccache, the A/B
# ones ~10 min), or the packed one in .prebuilt-lib-ab when its stamp matches (swap it in:
# mv .prebuilt-lib .prebuilt-lib-prod && mv .prebuilt-lib-ab .prebuilt-lib). Cold call, carry
# [".prebuilt-lib"] (the A/B library with QuACK's site passes 64 MiB; no QuACK item here):
#   PREBUILT_LIB=1 AB_INSTANCES=ON TESTS='Gemm.EveryTileConfig LcePaths.*' PYFILES='' TEST_TMO=200
#   BUDGET=560 ITEMS=scripts/device/bf_items.sh bash scripts/device/call_focus.sh
# Predicted: the call 1.5-3 ms faster with the candidate on the dweight (its 2.56 ms gap to
# QuACK's dweight at ~10 % of the C-reading halves' 21.7 ms); take it into instances.txt at >= 2 %
# (status.md, Next device calls, 2).
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
run lce_dweight_tile 300 bash -c "$CARD; python3 -u bench/bench_linear_ce.py --quick --impls ours --tiles auto,f32_mm:128x192ppa1d2 --rounds 4 --out $R/lce_tiles.jsonl; QUACK_GEMM_TILE=f32_mm:128x192ppa1d2 python3 -u bench/bench_linear_ce.py --quick --kernels ours"
