# Run AD, call 4 (C++ only, prebuilt: scripts/device/prebuild.sh first), carry [".prebuilt"]:
#   PREBUILT=1 AB_INSTANCES=OFF BUDGET=440 TEST_TMO=170
#   TESTS='*CeConfigs* CeTrain.* CeCases.* *CeOptions* *CeShapes* *CeLarge* *Lce*' PYFILES=''
#   ITEMS=scripts/device/ad4_items.sh bash scripts/device/call_focus.sh
# Cross-entropy's backward on the map policy (issue 18's scaled step; helper branch ce-map):
# predicted 1.0-1.1 / 2.05-2.2 / 2.05-2.2 ms against the ring's 1.139 / 2.479 / 2.609.
run ce_bwd_map 90 build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x65536,16384x131072,8192x262144 --dir bwd --config all --ms 20
run ce_fwdbwd 40 build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x65536,16384x131072,8192x262144 --dir fwdbwd
run ce_bwd_mid 40 build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x32768,16384x16384 --dir bwd --config all --ms 20
# Softmax's forward on cl-t256v8 (6 % behind QuACK's kernel of the same geometry in the Python
# process, run AD call 3): instructions and pipes.
run ncu_sm_fwd 80 bash scripts/ncu_kernel.sh sm_fwd 'regex:row_cluster_register_kernel' build/d/bench/quack-bench softmax --dtype bf16 --dir fwd --shapes 16384x65536 --ms 1
