# Run BD (warm, after BC): our LCE call's kernels alone (QuACK's warm-up outlasted 415 s in BC),
# then QuACK's with tuned=False (no autotuning: its dweight GEMM on its default tile).
#   ITEMS=scripts/device/bd_items.sh bash scripts/device/call_bench.sh
run lce_kernels_ours 200 bash -c "nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader; python3 -u bench/bench_linear_ce.py --quick --kernels ours"
run lce_kernels_quack_untuned 250 bash -c "python3 -u bench/bench_linear_ce.py --quick --kernels quack_untuned,ours"
run lce_accept_untuned 200 bash -c "python3 -u bench/bench_linear_ce.py --quick --impls ours,quack_untuned,gemms,cublas --rounds 3 --out $R/lce.jsonl"
# lce_chunk_gemms: the LCE's logits and dx GEMMs at its 4096-token chunk (QuACK runs cuBLAS there:
# 5.67 / 5.43 ms a chunk against our 5.83 / 5.75 in lce_kernels): the kernels' names, then burst.
run lce_chunk_gemms 150 bash -c "python3 scripts/gemm_kernel_names.py --shapes 4096x128256x4096 --layouts rc 2>&1 | tail -4; python3 scripts/gemm_kernel_names.py --shapes 4096x4096x128256 --layouts rr 2>&1 | tail -4; python3 bench/bench_gemm.py --shapes 4096x128256x4096,4096x4096x128256 --layouts rc,rr --methods burst --impls ours,cublas --burst-rounds 2 2>&1 | tail -12"
# long_k: the dx shape's tiles and stream-K modes (burst), ours only.
run long_k 120 bash -c "for s in auto 0 1; do echo streamk=\$s; QUACK_GEMM_STREAMK=\$s python3 bench/bench_gemm.py --shapes 4096x4096x128256 --layouts rr --methods burst --impls ours --tiles auto,128x192pp,128x256,128x128pp --burst-rounds 2 2>&1 | grep '^| 4096'; done"
# streamk_scope: where the stream-K rule picks stream-K at long K, auto against off (burst, ours).
run streamk_scope 100 bash -c "for s in auto 0; do echo streamk=\$s; QUACK_GEMM_STREAMK=\$s python3 bench/bench_gemm.py --shapes 4096x4096x16384,4096x4096x32768,2048x4096x128256,8192x4096x65536,1024x1024x131072 --layouts rr --methods burst --impls ours --burst-rounds 2 2>&1 | grep '^| [0-9]*x[0-9]*x[0-9]* | rr | burst'; done"
