# Run AH, call 4 (PREBUILT=1 at 0e6f3c7's stamp, AB_INSTANCES=OFF; carry [".prebuilt"]):
#   AB_INSTANCES=OFF PREBUILT=1 BUDGET=300 TEST_TMO=120 TESTS='*Topk*' PYFILES=''
#   ITEMS=scripts/device/ah4_items.sh bash scripts/device/call_focus.sh
# Top-k with the sparse offer planned (0e6f3c7): the shapes as planned, then shapes the
# rule moved without a measurement of their own, planned beside the dense queue and radix.
QB=build/d/bench/quack-bench
topk_plan() { for dt in bf16 fp32; do $QB topk --dtype $dt --shapes 65536x1024x8,65536x4096x32,16384x4096x128,16384x32768x64,4096x131072x256; done; }
run topk_plan 40 bash -c "QB=$QB; $(declare -f topk_plan); topk_plan"
topk_moved() { for p in auto queue-dense radix; do $QB topk --dtype bf16 --shapes 16384x4096x32,4096x4096x64,65536x4096x256 --path $p | sed "s/^/$p /"; done; for p in auto queue-dense; do $QB topk --dtype fp32 --shapes 65536x2048x32,65536x1000x32,16384x8192x64,1024x65536x32 --path $p | sed "s/^/$p /"; done; }
run topk_moved 60 bash -c "QB=$QB; $(declare -f topk_moved); topk_moved"
