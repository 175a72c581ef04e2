# Run BB: the ring's and staged cluster register kernels' L1 prefetch of cross-entropy's target
# (RowPlan::prefetch_row_in, on by default) A/B against off, then the CE training pair's entries kernel-only
# at the long rows with the ring's hinted L2 mode. With the GPU tests of the fp16 linear +
# cross-entropy (its gtests, its pytest file and test_linear, whose fp16 autocast wgrad now runs
# the f16 -> fp32 mm instances) and of cross-entropy (the prefetch's users).
# Cold call, carry [".prebuilt-lib", ".peers/quack-0.2.0-site.tar.xz"], kind nvidia-h200:
#   PREBUILT_LIB=1 AB_INSTANCES=OFF TESTS='LcePaths.* LceBwd.* LceCases.* CeTrain.* CeCases.*'
#   PYFILES='test_linear_cross_entropy test_linear' TEST_TMO=200 BUDGET=560
#   ITEMS=scripts/device/bb_items.sh bash scripts/device/call_focus.sh
# Then BB2 (warm): ITEMS=scripts/device/bb2_items.sh bash scripts/device/call_bench.sh
CARD="nvidia-smi --query-gpu=name --format=csv,noheader"
# row_in_prefetch: the training pair at grad 1 (planned entries; its backward is gated off) and
# the backward from lse, prefetch on (1) / off (0), alternating, two passes each (lines tagged). Predicted: the
# fwd+dx kernel (cl-t256v8-s1 at 65536-262144; AZ2's ncu: 10.3 % of its stall samples on the
# target's compare after its load) 2-5 % faster with it; the backward on the ring (32768 / 65536)
# within 1 % (its load_row sits before the stage wait).
run row_in_prefetch 100 bash -c "$CARD; for m in 1 0 1 0; do build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x65536,16384x131072,8192x262144 --dir fwdbwd --row-in-prefetch \$m --ms 40 | grep '\"op\": \"ce_fwd_bwd\"'; build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x32768,16384x65536 --dir bwd --row-in-prefetch \$m --ms 40; done"
# ce_pair_entries: run BA (H100) read the hinted ring-t1024v4-s3-x2 6.2 % ahead of the planned
# cl-t256v8-s1-x4 at 16384 x 65536, cl-t512v8-x4 2.7 % ahead of cl-t256v8-s1-x8 at 131072; the
# bars' card is the H200 (run T: there the unhinted ring trailed cl-t256v8 by 17-19 % at 131072
# / 262144). Predicted (H200): the hinted ring within 3 % of the planned entry at 65536, behind
# at 131072.
run ce_pair_entries 120 bash -c "$CARD; build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x65536,16384x131072,8192x262144 --dir fwdbwd --config all --ms 40 | grep '\"op\": \"ce_fwd_bwd\"'"
# ce_bwd_ring_l2: the CE backward from lse on its ring, hinted (0) against plain (1), two passes:
# 16384 x 32768 (ring-t1024v4-s3-x1) and 65536 (-x2; run W's 0.959 x QuACK). Predicted: hinted
# 2-4 % faster at both.
run ce_bwd_ring_l2 60 bash -c "for m in 0 1 0 1; do build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x32768,16384x65536 --dir bwd --ring-l2 \$m --ms 60; done"
