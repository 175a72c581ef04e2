# Run AR6 (warm): AR5's timeline has no GPU gap in ours' relu² step (15.90 ms of wall, 6 kernels
# back to back) where the acceptance method read 18.48 (AR2). Predicted: do_bench reads ours
# 2-3 ms above its back-to-back events, compile not; its per-call list shows which calls.
run mlp_timing_relu_sq 200 python3 scripts/mlp_timing.py relu_sq
