# Run AD, call 5 (C++ only, prebuilt), carry [".prebuilt"]:
#   PREBUILT=1 AB_INSTANCES=OFF BUDGET=220 TEST_TMO=110
#   TESTS='*CeConfigs* CeTrain.* CeCases.* *CeLarge*' PYFILES=''
#   ITEMS=scripts/device/ad5_items.sh bash scripts/device/call_focus.sh
# The training backward's recompute on each entry in one run (issue 18: map-t256v8 against the
# ring it ran on before; ce_train_bwd_recompute_row lines).
run ce_recompute 80 build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes 16384x65536,16384x131072,8192x262144 --dir fwdbwd --config all --ms 5
