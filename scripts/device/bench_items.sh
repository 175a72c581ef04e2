# The benches of call C (sourced by call_bench.sh): the kernel-only A/Bs of ab_items.sh first,
# then the acceptance benches in priority order.
source scripts/device/ab_items.sh
run ce_rows 150 python3 bench/bench_rows.py --ops ce_fwd,ce_bwd,ce_fwd_bwd,ce_fwd_bwd_half --dtypes bf16 --shapes 16384x32768,16384x65536,16384x131072,8192x262144 --impls ours,quack,eager,liger --out $R/ce_rows.jsonl --plot $R/ce.png
run topk 120 python3 bench/bench_topk.py --out $R/topk.jsonl
run lce_events 60 python3 bench/bench_linear_ce.py --quick --events 5 --out $R/lce_ev.jsonl
run gemm_quick 150 python3 bench/bench_gemm.py --quick --out $R/gemm_quick.jsonl
run gemm_n2048 120 python3 bench/bench_gemm.py --shapes 16384x2048x2048,16384x2048x5632,16384x2048x11264 --layouts rc,rr --methods burst --tiles auto,128x256,128x128pp,256x128c1x2 --out $R/gemm_n2048.jsonl
