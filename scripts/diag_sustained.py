"""Diagnosis of bench_gemm.py's sustained method: does a back-to-back batch time what it claims?

For each implementation (ours, QuACK 0.2.0, cuBLAS) at one shape, one batch of back-to-back
calls is timed by CUDA events on the current stream (as bench_gemm.py's sustained method does)
while torch.profiler records the GPU kernels. Printed per implementation: the events' ms per
call, the profiler's kernel count, the mean kernel time, the span of the batch's kernels per
call and the result's max error against torch.matmul (what
the call computes). A batch whose events read less than its kernels' span per call did not time
its own kernels (another stream); a max error near 1 means a different product.

  python3 scripts/diag_sustained.py [--shape 8192x8192x8192] [--layout rr] [--calls 200]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from bench_gemm import make_calls, operand  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="8192x8192x8192")
    p.add_argument("--layout", default="rr", help="a's then b's major: r (row) or c (column)")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--impls", default="ours,quack,cublas")
    return p.parse_args(argv)


def one(torch, impl, f, ref, calls):
    err = ((f().float() - ref).abs().max() / ref.abs().max()).item()
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(50_000_000)  # the host enqueues the batch meanwhile
        s.record()
        for _ in range(calls):
            f()
        e.record()
        e.synchronize()
    ev_ms = s.elapsed_time(e) / calls
    # The batch's kernels: not the spin kernel of torch.cuda._sleep that precedes it.
    kern = [k for k in prof.events() if k.device_type.name == "CUDA" and "spin_kernel" not in k.name
            and k.device_time_total > 0]
    big = [k for k in kern if k.device_time_total > 50]  # µs: the GEMM kernels, not fills
    starts = [k.time_range.start for k in big]
    ends = [k.time_range.end for k in big]
    span = (max(ends) - min(starts)) / 1e3 / calls if big else float("nan")
    mean = sum(k.device_time_total for k in big) / max(len(big), 1) / 1e3
    names = sorted({k.name[:60] for k in big})
    print(f"{impl:7s} events {ev_ms:.4f} ms/call | kernels {len(big)} (+{len(kern) - len(big)} small)"
          f" mean {mean:.4f} ms, span {span:.4f} ms/call | err {err:.2e} | {names}")
    return ev_ms, span


def main(argv=None):
    args = parse_args(argv)
    M, N, K = (int(v) for v in args.shape.split("x"))
    a = operand(torch, M, K, args.layout[0], 1)
    b = operand(torch, K, N, args.layout[1], 2)
    ref = torch.matmul(a, b).float()
    print(f"shape {M}x{N}x{K} layout {args.layout}, {args.calls} calls per batch")
    for impl, f in make_calls(torch, args.impls.split(","), a, b).items():
        for _ in range(2):
            one(torch, impl, f, ref, args.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
