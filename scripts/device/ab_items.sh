S=16384x32768,16384x65536,16384x131072,8192x262144
run ce_ab 60 bash -c "build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes $S --dir fwdbwd; QUACK_BENCH_CE_FWD=single build/d/bench/quack-bench cross-entropy --dtype bf16 --shapes $S --dir fwdbwd"
run rotary 50 python3 bench/bench_rotary.py --shapes 8x2048x16x128 --dtypes bf16 --impls ours,split,eager --modes fwd,fwd_bwd --rounds 5 --out $R/rotary.jsonl
run topk_ab 70 bash -c "build/d/bench/quack-bench topk --dtype bf16 --config all --shapes 16384x4096x128,4096x131072x256,16384x32768x64,65536x4096x32; build/d/bench/quack-bench topk --dtype bf16; build/d/bench/quack-bench topk --dtype bf16 --path queue-noprefix"
