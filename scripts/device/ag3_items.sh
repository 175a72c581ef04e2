# Run AG3 (one cold call, after AG1 / AG2): device build without the A/B tiles, on a test branch
# = main + the branches under test. Call (carry [".peers", ".whl", ".data"]):
#   AB_INSTANCES=OFF BUDGET=520 TEST_TMO=90 TESTS='*LayerNorm* Gemm.EveryTileConfig'
#   PYFILES='test_layernorm' ITEMS=scripts/device/ag3_items.sh bash scripts/device/call_focus.sh
QB=build/d/bench/quack-bench
# LayerNorm bwd (branch ln-bwd: kColShift / kAccInFold, a plain instance), kernel-only; AG1 on
# main: 3.047 / 3.573 / 3.347 / 3.061 TB/s at 4096 / 32768 / 131072 / 262144 (staged-v4).
run ln_bwd 40 $QB layernorm --wdtype x --bias 1 --shapes 16384x4096,16384x32768,16384x131072,8192x262144 --dir bwd
# The demo's idle GPU time: (d) and (b), 30 steps each, the census with the gap lines (AG2: (d)
# GPU time 133.8 ms in a 142.2 ms step; (b) 142.3 in 144.6).
run demo_gap 150 python3 demo/train_lm.py --runs d,b --steps 30 --gen-tokens 0 --no-grad-check --profile 4 --out $R/demo_gap
# fp32 long-row forwards, every configuration (AG1 by the acceptance method: softmax fwd
# 8192 x 262144 3.12 TB/s against QuACK's 3.90; the fp32 plan takes kRowConfigs' order).
rows_f32() { for n in 32768 131072; do $QB softmax --dtype fp32 --shapes 16384x$n --dir fwd --config all; done; $QB softmax --dtype fp32 --shapes 8192x262144 --dir fwd --config all; $QB layernorm --dtype fp32 --wdtype x --bias 1 --shapes 8192x262144 --dir fwd --config all; $QB rmsnorm --dtype fp32 --wdtype x --shapes 16384x32768 --dir fwd --config all; }
run rows_f32 60 bash -c "QB=$QB; $(declare -f rows_f32); rows_f32"
