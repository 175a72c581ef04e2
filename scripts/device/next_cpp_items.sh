# The session after run AC, call 1 (C++ only, no device build): the binaries prebuilt here for
# the tree whose stamp .prebuilt/stamp holds (scripts/device/stamp.sh; after any C++ change
# scripts/device/prebuild.sh again), carry [".prebuilt"] alone:
#   PREBUILT=1 AB_INSTANCES=OFF BUDGET=585 TEST_TMO=240
#   TESTS='*Ce* *SoftmaxConfigs* *LayerNormConfigs* *Lce*' PYFILES=''
#   ITEMS=scripts/device/next_cpp_items.sh bash scripts/device/call_focus.sh
# (`*Ce*`: the parametrized All/CeConfigs, CeOptions, CeShapes have not run since AB; run AC's
# changes passed CeTrain.*, CeCases.* and test_cross_entropy only. SoftmaxConfigs /
# LayerNormConfigs: the forwards on the cluster register entries, never GPU-run.) If the
# build log does not say "prebuilt binaries", the stamp differed and it built (~250 s).
# Softmax / log_softmax forwards on the cluster register entries (compiled since run AC, forced
# only): against the plan's (t1024v4, rings) at the anchor shapes, QuACK's geometry (issue 15:
# QuACK's softmax fwd 4.12-4.19 TB/s against ours 3.50-3.89 in run O).
run sm_configs 150 build/d/bench/quack-bench softmax --dtype bf16 --dir fwd --shapes 16384x32768,16384x65536,16384x131072,8192x262144 --config all --ms 30
# LayerNorm fwd likewise (issue 15: 0.70 x copy at 8192 x 262144 on the ring; bf16 weight and
# bias: the persistent entries too).
run ln_configs 150 build/d/bench/quack-bench layernorm --dtype bf16 --wdtype x --dir fwd --shapes 16384x65536,16384x131072,8192x262144 --config all --ms 30
# Cross-entropy's fwd+dx kernel after the fix-up (issue 18): instructions and stalls (AC0: 746 M).
run ncu_ce_dx 150 env KBASE=demangled bash scripts/ncu_kernel.sh ce_dx_fix 'regex:CrossEntropyFwd<1' build/d/bench/quack-bench cross-entropy --dtype bf16 --dir fwdbwd --shapes 16384x65536 --ms 1
# Top-k fp32 at k = 32 (issue 19): the bitonic kernel forced against the queue kernel's plan at
# N <= 1024 (Z3: 0.275 against 0.286 ms at (1024, 32)) before widening the fp32 bitonic rule.
run topk_f32_k32 60 build/d/bench/quack-bench topk --dtype fp32 --shapes 65536x1024x32,65536x512x32,65536x256x32 --config all --ms 30
