# Run AB's first call (sourced by call_focus.sh), after AA3: the Python stream-K workspace on by
# default (the C++ rule decides), the loss-only CE plan cl-t256v8 up to 256 KB rows, LayerNorm
# fwd r16t16v2 at (256, 512] B. Priority order; done items skip on a warm later call.
run ce_rows 130 python3 bench/bench_rows.py --ops ce_fwd,ce_fwd_bwd --dtypes bf16 --shapes 16384x65536,16384x131072,8192x262144 --impls ours,quack,eager --out $R/ce_rows.jsonl
run gemm_demo_sk 120 python3 bench/bench_gemm.py --demo --methods burst --impls ours,cublas --out $R/gemm_demo_sk.jsonl
run gemm_demo_nosk 120 env QUACK_GEMM_STREAMK=0 python3 bench/bench_gemm.py --demo --methods burst --impls ours,cublas --out $R/gemm_demo_nosk.jsonl
run small 120 python3 bench/bench_rows.py --small --impls ours,compile,quack --out $R/small.jsonl
run py_sk_forced 200 env QUACK_GEMM_STREAMK=1 python3 -m pytest tests/python/test_gemm.py tests/python/test_mlp.py -q -x -p no:cacheprovider
