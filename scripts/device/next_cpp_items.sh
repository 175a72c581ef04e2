# Run AF, calls 1-2 (device build with the A/B instances and Python; carry [".peers", ".whl",
# ".data"]): merge branch coop-epi64 into a test branch first, then
#   AB_INSTANCES=ON BUDGET=585 TEST_TMO=200 TESTS='Gemm.EveryTileConfig Gemm.DynamicScheduler'
#   PYFILES='' ITEMS=scripts/device/next_cpp_items.sh bash scripts/device/call_focus.sh
# and, warm, BUDGET=585 ITEMS=scripts/device/next_cpp_items.sh bash scripts/device/call_bench.sh
# for the items left. Done items skip on a warm machine.
# GEMM (issues 16 / 21): the cooperative epilogue with 128 x 64 subtiles (half the named
# barriers) against 128x256 and 128x192pp at the demo's N = 2048 outputs, six alternating
# rounds (single samples move up to 8 %, AE4); predicted 1-2 % for 128x256e64.
gemm_rounds() { for r in 1 2 3 4 5 6; do for t in 128x256 128x256e64 128x192pp; do QUACK_GEMM_TILE=$t build/d/bench/quack-bench gemm --layout rc --shapes 16384x2048x5632,16384x2048x11264 --ms 300 | sed "s/^/$t /"; done; done; }
run gemm_e64 200 bash -c "$(declare -f gemm_rounds); gemm_rounds"
# Issue 15's anchor misses (run AF1's table), kernel-only over every configuration: is any
# compiled entry ahead of the plan there?
QB=build/d/bench/quack-bench
run rows_all 170 bash -c "$QB copy; $QB rmsnorm --shapes 16384x4096,16384x32768 --dir fwd --config all; $QB softmax --shapes 16384x4096,16384x32768 --dir fwd --config all; $QB layernorm --wdtype x --bias 1 --shapes 16384x4096,16384x32768,8192x262144 --dir bwd --config all; $QB rmsnorm --shapes 16384x4096,8192x262144 --dir bwd --config all"
# The acceptance method's copy at each anchor's size (16384 x 4096: ours 0.82 x the 4 GiB copy).
run diag_copy 120 python3 scripts/diag_copy_sizes.py
# Softmax fwd's acceptance gap (issue 15): ours through _C into a preallocated output and on
# offset buffers (AF1's run faulted: the script let the output tensors go; fixed, checked).
run diag_place 150 python3 scripts/diag_acceptance_gap.py --op softmax --shapes 16384x65536,8192x262144 --placement
# 16384 x 4096 (the anchor every forward misses 0.90 x copy at): ours by the acceptance method,
# L2 warm, back to back, in a graph and kernel-only, beside QuACK.
run diag_4096 100 python3 scripts/diag_acceptance_gap.py --op softmax --shapes 16384x4096
