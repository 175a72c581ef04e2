"""Python host time per call of the eager fast path, on the CPU with ``_C`` stubbed (no GPU).

How to run (repository root; quack_cpp importable, e.g. installed, or the Python files staged
next to a built ``_C*.so`` on PYTHONPATH; any torch build, CPU is enough):

    python3 bench/bench_host_overhead_cpu.py                  # M=8, N=K=1024 (bench_op_overhead's)
    python3 bench/bench_host_overhead_cpu.py --profile linear # cProfile of one case
    python3 bench/bench_host_overhead_cpu.py --cases linear,gemm  # these cases only
    python3 bench/bench_host_overhead_cpu.py --custom-op      # the custom ops' path

Cases (each: one call = what bench_host_time.py / bench_op_overhead.py time on the GPU, minus
the GPU):
  rmsnorm fwd      quack_cpp.rmsnorm(x, w, b) under no_grad: x bf16 (M, N), w and b bf16 (N,)
                   (bench_host_time.py's call)
  rmsnorm fwd+bwd  torch.autograd.grad(quack_cpp.rmsnorm(xr, wr, br), (xr, wr, br), dy) (ditto)
  rmsnorm .backward quack_cpp.rmsnorm(x bf16 (M, N), w fp32).backward(dy); grads reset to None
  layernorm fwd    quack_cpp.layernorm(x, w, b) under no_grad (bench_host_time.py's call)
  layernorm fwd+bwd torch.autograd.grad(quack_cpp.layernorm(xr, wr, br), (xr, wr, br), dy)
  linear fwd+bwd   quack_cpp.nn.Linear(K, N, bf16)(x bf16 (M, K)).backward(dy): forward GEMM,
                   dgrad, wgrad; grads reset to None
  linear+bias fwd+bwd  the same with bias=True (bf16 (N,)): the bias in the forward GEMM's
                   epilogue, its gradient dy.sum(0) in fp32 (torch's reduction, computed on
                   the CPU here: its compute is part of the figure)
  gemm fwd         quack_cpp.gemm(A bf16 (M, K), W.T) with no grad (``_gemm_impl`` only)
  softmax fwd      quack_cpp.softmax(x) under no_grad, x bf16 (M, N) (bench_host_time.py's)
  softmax fwd+bwd  torch.autograd.grad(quack_cpp.softmax(xr), (xr,), dy) (ditto)
  ce fwd           quack_cpp.cross_entropy(x, t, reduction="none"), x bf16 (M, N) not
                   requiring grad, t int64 (M) (issue 18's ce fwd call)
  ce fwd+bwd       torch.autograd.grad(quack_cpp.cross_entropy(xr, t), (xr,)) ('mean': the
                   gradient in the forward, the device-side rescale in the backward)
  ce none fwd+bwd  torch.autograd.grad(quack_cpp.cross_entropy(xr, t, reduction="none"),
                   (xr,), g) (the backward from lse)
plus, for scale, torch's own ops on a (1, 4) CPU tensor (their compute negligible):
F.layer_norm, F.softmax and F.cross_entropy, fwd and fwd+bwd.

RMSNorm, LayerNorm, softmax, log_softmax, cross-entropy, gemm and Linear take the C++ fast path
(quack_cpp._torch, its launches skipped) where it is built, unless --python-eager.

Method: CPU tensors are let through ``_registrar.route`` as test_fastpath_cpu.py's ``as_cuda``
fixture does (so they take the CUDA fast path), and the launches (``_C.gemm``,
``_C.rmsnorm_fwd``, ``_C.rmsnorm_bwd``, ``_C.rmsnorm_bwd_workspace_size``, LayerNorm's,
softmax's and cross-entropy's launches) are Python no-ops, and so are quack_cpp._torch's
launches (``_set_stub_launches``); ``_C.cross_entropy_fwd_workspace_size`` (host-only) is real;
``_C.gemm_can_implement`` is the real host-only C++ query. What is measured is therefore the
torch layer's Python + torch's own host work (allocation, autograd), not the C++ side (~7-9 µs
per GEMM on the H200 host) nor ``torch.cuda.current_stream`` (CPU tensors get stream 0 without
asking CUDA). Each round times ``iters`` calls with the thread's CPU time (time.thread_time:
time the process waited for a core does not count, so a shared host's load matters less;
``--clock wall`` for time.perf_counter); the median and the minimum over the rounds are printed
(the minimum is the steadier figure). Absolute numbers depend on the CPU; compare runs on the
same machine.
"""

import argparse
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--M", type=int, default=8)
    p.add_argument("--N", type=int, default=1024)
    p.add_argument("--K", type=int, default=1024)
    p.add_argument("--iters", type=int, default=2000, help="calls per round")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--profile", default="",
                   help="cProfile one case (a key of cases(): rmsnorm_fwd, rmsnorm_grad, "
                   "rmsnorm, layernorm_fwd, layernorm_grad, linear, linear_bias, gemm, "
                   "softmax_fwd, softmax_grad, ce_fwd, ce_grad, ...)")
    p.add_argument("--cases", default="",
                   help="comma-separated keys of cases() to time (default: all), e.g. "
                   "linear,gemm")
    p.add_argument("--clock", choices=("thread", "wall"), default="thread",
                   help="thread: CPU time of this thread (default; other processes on a shared "
                   "host do not count), wall: time.perf_counter")
    p.add_argument("--python-eager", action="store_true",
                   help="the Python fast path even where quack_cpp._torch (the C++ one) is built")
    p.add_argument("--custom-op", action="store_true",
                   help="time the custom-op path (FORCE_CUSTOM_OP) instead of the fast path")
    return p.parse_args()


class StubC:
    """quack_cpp._C with no-op launches; anything else is the real extension's (host-only
    queries: gemm_can_implement, cross_entropy_fwd_workspace_size)."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def gemm(self, *a):
        pass

    def rmsnorm_fwd(self, *a):
        pass

    def rmsnorm_bwd(self, *a):
        pass

    def rmsnorm_bwd_workspace_size(self, *a):
        return 4096

    def layernorm_fwd(self, *a):
        pass

    def layernorm_bwd(self, *a):
        pass

    def layernorm_bwd_workspace_size(self, *a):
        return 4096

    def softmax_fwd(self, *a):
        pass

    def softmax_bwd(self, *a):
        pass

    def log_softmax_fwd(self, *a):
        pass

    def log_softmax_bwd(self, *a):
        pass

    def cross_entropy_fwd(self, *a):
        pass

    def cross_entropy_bwd(self, *a):
        pass

    def cross_entropy_scale_grad(self, *a):
        pass

    def cross_entropy_train_bwd(self, *a):
        pass


def patch(reg, ops, gemm_ops, torch, force_custom_op, cpp_eager=True):
    """CPU tensors take the fast path (as test_fastpath_cpu.py's as_cuda) and _C is stubbed;
    with force_custom_op, the custom ops run (their CPU kernels: the CUDA kernels' bodies)."""
    import quack_cpp.cross_entropy_ops as ce_ops
    import quack_cpp.layernorm_ops as ln_ops
    import quack_cpp.softmax_ops as sm_ops

    plain, strided, dtypes = reg._PLAIN_TYPES, torch.strided, reg.KERNEL_DTYPES
    idtypes = frozenset(reg.INDEX_DTYPES)
    wrapped = reg._is_wrapped

    def cpu_as_cuda(t):  # _registrar._is_plain_cuda with is_cpu for is_cuda: the same cost
        return (type(t) in plain and t.is_cpu and t.layout == strided and not t.is_nested
                and t.dtype in dtypes and not wrapped(t))

    def cpu_as_cuda_index(t):
        return (type(t) in plain and t.is_cpu and t.layout == strided and not t.is_nested
                and t.dtype in idtypes and not wrapped(t))

    reg._is_plain_cuda = cpu_as_cuda
    reg._is_plain_cuda_index = cpu_as_cuda_index
    reg.DEVICE_TYPES = reg.DEVICE_TYPES + ("cpu",)
    ops.FORCE_CUSTOM_OP = force_custom_op
    reg.CPP_EAGER = cpp_eager
    if ops._torch_ext is not None:  # the C++ eager path: allocation and autograd, no launch
        ops._torch_ext._set_stub_launches(True)
    stub = StubC(ops._C)
    for m in (ops, gemm_ops, sm_ops, ce_ops, ln_ops):
        m._C = stub
    lib = torch.library.Library("quack_cpp", "IMPL")
    for op in (ops.rmsnorm_fwd, ops.rmsnorm_bwd, gemm_ops.gemm_op, gemm_ops.gemm_add_inplace_op,
               ln_ops.layernorm_fwd, ln_ops.layernorm_bwd, sm_ops.softmax_fwd,
               sm_ops.softmax_bwd, ce_ops.cross_entropy_fwd,
               ce_ops.cross_entropy_bwd, ce_ops.cross_entropy_scale_grad,
               ce_ops.cross_entropy_train_bwd):
        lib.impl(op.__name__, op.kernel, "CPU")
    return lib


def cases(torch, a):
    import quack_cpp
    import quack_cpp.nn as qnn

    bf16 = torch.bfloat16
    xb, wb, bb = (torch.randn(*s, dtype=bf16) for s in ((a.M, a.N), (a.N,), (a.N,)))
    xr, wr, br = (t.clone().requires_grad_(True) for t in (xb, wb, bb))
    dyb = torch.randn(a.M, a.N, dtype=bf16)

    def rmsnorm_fwd():
        with torch.no_grad():
            quack_cpp.rmsnorm(xb, wb, bb)

    def rmsnorm_grad():
        torch.autograd.grad(quack_cpp.rmsnorm(xr, wr, br), (xr, wr, br), dyb)

    def layernorm_fwd():
        with torch.no_grad():
            quack_cpp.layernorm(xb, wb, bb)

    def layernorm_grad():
        torch.autograd.grad(quack_cpp.layernorm(xr, wr, br), (xr, wr, br), dyb)

    x = torch.randn(a.M, a.N, dtype=bf16, requires_grad=True)
    w = torch.ones(a.N, requires_grad=True)
    dy = torch.randn(a.M, a.N, dtype=bf16)

    def rmsnorm():
        quack_cpp.rmsnorm(x, w, eps=1e-6).backward(dy)
        x.grad = w.grad = None

    xl = torch.randn(a.M, a.K, dtype=bf16, requires_grad=True)
    q = qnn.Linear(a.K, a.N, dtype=bf16)
    dyl = torch.randn(a.M, a.N, dtype=bf16)

    def linear():
        q(xl).backward(dyl)
        xl.grad = q.weight.grad = None

    qb = qnn.Linear(a.K, a.N, bias=True, dtype=bf16)

    def linear_bias():
        qb(xl).backward(dyl)
        xl.grad = qb.weight.grad = qb.bias.grad = None

    A, Bt = xl.detach(), q.weight.detach()

    def gemm():
        with torch.no_grad():
            quack_cpp.gemm(A, Bt.mT)

    def softmax_fwd():
        with torch.no_grad():
            quack_cpp.softmax(xb)

    def softmax_grad():
        torch.autograd.grad(quack_cpp.softmax(xr), (xr,), dyb)

    t = torch.randint(0, a.N, (a.M,))
    gce = torch.randn(a.M)

    def ce_fwd():
        quack_cpp.cross_entropy(xb, t, reduction="none")

    def ce_grad():
        torch.autograd.grad(quack_cpp.cross_entropy(xr, t), (xr,))

    def ce_none_grad():
        torch.autograd.grad(quack_cpp.cross_entropy(xr, t, reduction="none"), (xr,), gce)

    import torch.nn.functional as F

    xs = torch.randn(1, 4)
    xsr, ws, bs = xs.clone().requires_grad_(True), torch.ones(4), torch.zeros(4)
    ts = torch.tensor([1])

    def ln_fwd():
        with torch.no_grad():
            F.layer_norm(xs, (4,), ws, bs)

    def ln_grad():
        torch.autograd.grad(F.layer_norm(xsr, (4,), ws, bs), (xsr,), xs)

    def tsm_fwd():
        with torch.no_grad():
            F.softmax(xs, -1)

    def tsm_grad():
        torch.autograd.grad(F.softmax(xsr, -1), (xsr,), xs)

    def tce_fwd():
        F.cross_entropy(xs, ts, reduction="none")

    def tce_grad():
        torch.autograd.grad(F.cross_entropy(xsr, ts), (xsr,))

    return {"rmsnorm_fwd": ("rmsnorm fwd", rmsnorm_fwd),
            "rmsnorm_grad": ("rmsnorm fwd+bwd", rmsnorm_grad),
            "rmsnorm": ("rmsnorm .backward", rmsnorm),
            "layernorm_fwd": ("layernorm fwd", layernorm_fwd),
            "layernorm_grad": ("layernorm fwd+bwd", layernorm_grad),
            "linear": ("linear fwd+bwd", linear),
            "linear_bias": ("linear+bias fwd+bwd", linear_bias),
            "gemm": ("gemm fwd", gemm),
            "softmax_fwd": ("softmax fwd", softmax_fwd),
            "softmax_grad": ("softmax fwd+bwd", softmax_grad),
            "ce_fwd": ("ce fwd", ce_fwd), "ce_grad": ("ce fwd+bwd", ce_grad),
            "ce_none_grad": ("ce none fwd+bwd", ce_none_grad),
            "torch_ln_fwd": ("F.layer_norm fwd", ln_fwd),
            "torch_ln_grad": ("F.layer_norm fwd+bwd", ln_grad),
            "torch_sm_fwd": ("F.softmax fwd", tsm_fwd),
            "torch_sm_grad": ("F.softmax fwd+bwd", tsm_grad),
            "torch_ce_fwd": ("F.cross_entropy fwd", tce_fwd),
            "torch_ce_grad": ("F.cross_entropy fwd+bwd", tce_grad)}


def main():
    a = parse_args()
    import torch

    import quack_cpp._registrar as reg
    import quack_cpp.gemm_ops as gemm_ops
    import quack_cpp.ops as ops

    cpp = not a.python_eager and ops._torch_ext is not None
    lib = patch(reg, ops, gemm_ops, torch, a.custom_op, cpp)  # noqa: F841 (kept registered)
    table = cases(torch, a)
    if a.cases:
        table = {k: table[k] for k in a.cases.split(",")}
    if a.profile:
        import cProfile
        import pstats

        fn = table[a.profile][1]
        for _ in range(200):
            fn()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(a.iters):
            fn()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        return 0

    clock = time.thread_time if a.clock == "thread" else time.perf_counter

    def timed(fn, n):
        t0 = clock()
        for _ in range(n):
            fn()
        return 1e6 * (clock() - t0) / n

    for _, fn in table.values():
        timed(fn, 200)  # warm-up
    res = {k: [] for k in table}
    for _ in range(a.rounds):  # cases alternate round by round
        for k, (_, fn) in table.items():
            res[k].append(timed(fn, a.iters))
    print(f"torch {torch.__version__}, CPU, _C stubbed, M={a.M} N={a.N} K={a.K}, "
          f"{a.iters} calls x {a.rounds} rounds, {a.clock} clock, "
          f"{'custom-op path' if a.custom_op else 'C++ fast path' if cpp else 'fast path'}")
    print(f"{'case':24s} {'median':>8s} {'min':>8s}  (us/call)")
    for k, (name, _) in table.items():
        print(f"{name:24s} {statistics.median(res[k]):8.1f} {min(res[k]):8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
