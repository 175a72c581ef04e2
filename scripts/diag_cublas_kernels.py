"""Names and times of the kernels cuBLAS (torch.matmul) runs at GEMM shapes (torch.profiler).

    python3 scripts/diag_cublas_kernels.py 8192x8192x128 4096x4096x4096
"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

for s in sys.argv[1:] or ["8192x8192x128"]:
    M, N, K = (int(v) for v in s.split("x"))
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        a @ w.t()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(20):
            a @ w.t()
        torch.cuda.synchronize()
    print(f"== {s} (x @ W^T, bf16)")
    print(p.key_averages().table(sort_by="cuda_time_total", row_limit=4, max_name_column_width=160))
