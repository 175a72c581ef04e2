"""Host time per call of the torch layer: the eager fast path against the custom ops.

How to run (repository root, after `pip install --no-build-isolation --no-deps .`, on a GPU):

    python3 bench/bench_op_overhead.py                    # rmsnorm and linear, M=8 N=K=1024
    python3 bench/bench_op_overhead.py --ops rmsnorm --iters 5000 --rounds 7

Implementations, each one forward + backward per call (grads reset to None every call):
  rmsnorm  quack_cpp.rmsnorm(x bf16 (M, N), w fp32) on the fast path; the same with
           quack_cpp.ops.FORCE_CUSTOM_OP = True (what QUACK_EAGER_CUSTOM_OP=1 sets: the custom
           ops quack_cpp::rmsnorm_fwd / rmsnorm_bwd); torch.nn.functional.rms_norm.
  linear   quack_cpp.nn.Linear (K -> N, bf16, bias-free) fast / custom op; torch F.linear.

Method: the problem is small (a few µs on the GPU per call) so that the CPU is the bottleneck.
Each round times `iters` back-to-back calls with time.perf_counter, without synchronising
inside the loop ("host": the time to issue them), then synchronises ("wall": host + what the
GPU had left). host ~= wall means the run was host-bound, as intended; if wall is much larger,
the GPU is the bottleneck and host is not the per-call overhead (use a smaller M). The
implementations alternate round by round after a warm-up; the table shows the medians.

Exit status 2 without torch or a CUDA GPU (nothing measured).
"""

import argparse
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", default="rmsnorm,linear", help="comma list: rmsnorm, linear")
    p.add_argument("--M", type=int, default=8, help="rows (tokens)")
    p.add_argument("--N", type=int, default=1024, help="hidden size (linear: out features)")
    p.add_argument("--K", type=int, default=1024, help="linear: in features")
    p.add_argument("--iters", type=int, default=2000, help="calls per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=200, help="calls per implementation first")
    return p.parse_args()


def steps(torch, op, a):
    """[(name, step, force_custom_op)] for one op; each step runs forward + backward."""
    import torch.nn.functional as F

    import quack_cpp
    import quack_cpp.nn as qnn

    dev, bf16 = "cuda", torch.bfloat16
    if op == "rmsnorm":
        x = torch.randn(a.M, a.N, device=dev, dtype=bf16, requires_grad=True)
        w = torch.ones(a.N, device=dev, requires_grad=True)
        dy = torch.randn(a.M, a.N, device=dev, dtype=bf16)

        def ours():
            quack_cpp.rmsnorm(x, w, eps=1e-6).backward(dy)
            x.grad = w.grad = None

        def peer():
            F.rms_norm(x, (a.N,), w, 1e-6).backward(dy.float())
            x.grad = w.grad = None

        peer_name = "torch F.rms_norm"
    elif op == "linear":
        x = torch.randn(a.M, a.K, device=dev, dtype=bf16, requires_grad=True)
        q = qnn.Linear(a.K, a.N, device=dev, dtype=bf16)
        wt = q.weight.detach().clone().requires_grad_(True)
        dy = torch.randn(a.M, a.N, device=dev, dtype=bf16)

        def ours():
            q(x).backward(dy)
            x.grad = q.weight.grad = None

        def peer():
            F.linear(x, wt).backward(dy)
            x.grad = wt.grad = None

        peer_name = "torch F.linear"
    else:
        sys.exit(f"bench_op_overhead: unknown op {op!r} (rmsnorm, linear)")
    return [("quack fast path", ours, False), ("quack custom op", ours, True),
            (peer_name, peer, False)]


def main():
    a = parse_args()
    try:
        import torch
    except ImportError:
        print("bench_op_overhead: needs torch; nothing measured")
        return 2
    if not torch.cuda.is_available():
        print("bench_op_overhead: no CUDA GPU; nothing measured")
        return 2
    import quack_cpp.ops as ops

    def timed(fn, force, n):
        ops.FORCE_CUSTOM_OP = force
        try:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
        finally:
            ops.FORCE_CUSTOM_OP = False
        return 1e6 * (t1 - t0) / n, 1e6 * (t2 - t0) / n

    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, M={a.M} N={a.N} K={a.K}, "
          f"{a.iters} calls x {a.rounds} rounds (fwd + bwd per call)")
    rows = []
    for op in a.ops.split(","):
        impls = steps(torch, op, a)
        for _, fn, force in impls:
            timed(fn, force, a.warmup)
        res = {name: [] for name, _, _ in impls}
        for _ in range(a.rounds):
            for name, fn, force in impls:
                res[name].append(timed(fn, force, a.iters))
        base = statistics.median(h for h, _ in res["quack custom op"])
        for name, _, _ in impls:
            host = statistics.median(h for h, _ in res[name])
            wall = statistics.median(w for _, w in res[name])
            rows.append((op, name, host, wall, host / base))
    print(f"{'op':8s} {'implementation':18s} {'host us/call':>12s} {'wall us/call':>12s} "
          f"{'host / custom op':>16s}")
    for op, name, host, wall, rel in rows:
        print(f"{op:8s} {name:18s} {host:12.1f} {wall:12.1f} {rel:16.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
