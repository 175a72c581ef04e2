# The session after run AD, call 1 (C++ only, no device build): merge what should be measured
# first (branches sm-exp, ln-ring2: docs/status.md), then scripts/device/prebuild.sh here and
# carry [".prebuilt"] alone:
#   PREBUILT=1 AB_INSTANCES=OFF BUDGET=585 TEST_TMO=200
#   TESTS='*Softmax* *LayerNorm* CeTrain.* *CeConfigs*' PYFILES=''
#   ITEMS=scripts/device/next_cpp_items.sh bash scripts/device/call_focus.sh
# (CeTrain's second shard needs ~180 s: ForcedConfigs 80 s, ManyRowBlocks ~100 s.) If the build
# log does not say "prebuilt binaries", the stamp differed and it built (~215 s).
# Softmax fwd (issue 15; AD: cl-t256v8 4.19 / 4.19 / 4.13 TB/s kernel-only, 3.97 / 4.00 / 3.96 by
# the acceptance method against QuACK's 4.22 / 4.18 / 3.98): after sm-exp, fewer MUFU.
run sm_configs 120 build/d/bench/quack-bench softmax --dtype bf16 --dir fwd --shapes 16384x65536,16384x131072,8192x262144 --config all --ms 20
run ncu_sm_fwd 80 bash scripts/ncu_kernel.sh sm_fwd 'regex:row_cluster_register_kernel' build/d/bench/quack-bench softmax --dtype bf16 --dir fwd --shapes 16384x65536 --ms 1
# LayerNorm fwd (issue 15; AD: ring 3.94 / 3.35 / 2.99, cl-t256v8-s1 3.49 / 3.43 / 3.19): after
# ln-ring2 (one-sweep statistics, one CTA total per peer), bf16 and fp32 weight and bias.
run ln_configs 150 bash -c "build/d/bench/quack-bench layernorm --dtype bf16 --wdtype x --dir fwd --shapes 16384x65536,16384x131072,8192x262144 --config all --ms 20; build/d/bench/quack-bench layernorm --dtype bf16 --wdtype fp32 --dir fwd --shapes 16384x131072,8192x262144 --config all --ms 20"
# The CE training recompute per entry (issue 18; AD5: looped 1.094 / 2.172 / 2.172 ms, map 1.110
# / 2.231 / 2.228): after moving the finish_loads rule to the looped entry, the plan's line.
run ce_recompute 80 build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x65536,16384x131072,8192x262144 --dir fwdbwd --config all --ms 5
