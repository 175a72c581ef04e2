"""Host time per eager call of quack_cpp's ops beside torch's, on a CUDA GPU (issue 15 item 7).

How to run (repository root, after `pip install --no-build-isolation --no-deps .`):

    python3 bench/bench_host_time.py                 # the table; exit 0
    python3 bench/bench_host_time.py --check         # exit 1 when an op misses the bar
    python3 bench/bench_host_time.py --json out.json # also the rows as JSON

The measurement (the acceptance method of the "Host time per eager call" table,
../shared/perf/h200-anchors.md): bf16 x (8, 1024), bf16 weight and bias (N = 1024); one call is

    fwd      op(x, w, b) under torch.no_grad()
    fwd+bwd  torch.autograd.grad(op(xr, wr, br), (xr, wr, br), dy)   (xr, wr, br require grad)

with op = torch.nn.functional.layer_norm(x, (1024,), w, b) for torch, quack_cpp.rmsnorm(x, w, b)
and, where quack_cpp has them, quack_cpp.layernorm(x, w, b); softmax and log_softmax take x
alone (op(x) and grad(op(xr), xr, dy)). Cross-entropy (not in the bar; beside
F.cross_entropy with the same calls): fwd = cross_entropy(x, t, reduction="none") with x not
requiring grad (issue 18's ce fwd), fwd+bwd = grad(cross_entropy(xr, t), xr) ('mean',
grad_output 1: the gradient in the forward, the device-side rescale), t int64 (8,).
Each round: a torch.cuda._sleep long enough to keep the GPU busy for the whole round, then
100 back-to-back calls timed with time.perf_counter (the time to issue them: host time), then
a synchronisation outside the timing; median of 9 rounds (rounds of all rows alternate). A
round whose sleep had ended before its last call returned is repeated with a longer sleep
(the GPU must stay busy, else kernel completion would be timed).
The longest single call of each row is printed too: a call far longer than the median means the
host waited for the GPU (e.g. a full launch queue behind the sleep), which the median per call
of a round would hide inside "host time".

Bar (issue 15): each row op's fwd <= 1.25 x and fwd+bwd <= 1.5 x F.layer_norm's in the same run.

"ours" is the default path: the C++ fast path (quack_cpp._torch: rmsnorm, layernorm, softmax,
log_softmax, cross_entropy, gemm, linear) where it is built (built by pip where torch is
importable) and QUACK_CPP_EAGER is not 0, else the Python fast path.

Diagnostic rows (not in the bar; they say where our time goes):
  custom op     the same call with quack_cpp.ops.FORCE_CUSTOM_OP = True (the dispatcher path)
  python path   (C++ fast path built) the same call on the Python fast path (CPP_EAGER off)
  C++ no launch (C++ fast path built) the C++ fast path with its kernel launches skipped
                (allocation, autograd and the Python wrapper)
  python only   the Python fast path with every quack_cpp._C function replaced by a no-op
                returning 0 (the Python layer plus torch's allocations and autograd, no C++)
  _C direct     the C++ alone on pre-made tensor tuples and outputs: _C.rmsnorm_fwd with M = 0
                (conversion, validation and plan; no DeviceGuard, no launch), _C.rmsnorm_fwd,
                _C.rmsnorm_bwd_workspace_size, it + _C.rmsnorm_bwd (two plans, three
                launches with dweight and dbias), _C.gemm_can_implement and _C.gemm (TMA
                descriptors, launch)
plus torch's own F.rms_norm, F.softmax and matmul, and quack_cpp.gemm (no grad), as context.

Exit status 2 without torch or a CUDA GPU (nothing measured).
"""

import argparse
import json
import statistics
import sys
import time

DEVICE = "cuda"  # a dry run of this script's plumbing on the CPU replaces it (and torch.cuda)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--calls", type=int, default=100, help="calls per round")
    p.add_argument("--M", type=int, default=8)
    p.add_argument("--N", type=int, default=1024)
    p.add_argument("--no-diagnostics", action="store_true", help="only the bar's rows")
    p.add_argument("--check", action="store_true", help="exit 1 when a row op misses the bar")
    p.add_argument("--json", default="", help="write the rows to this file")
    return p.parse_args()


class NoOpC:
    """quack_cpp._C with every function a no-op returning 0."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        attr = getattr(self._real, name)
        return (lambda *a, **k: 0) if callable(attr) else attr


class Busy:
    """Keeps the GPU busy with torch.cuda._sleep while a round is issued."""

    def __init__(self, torch):
        self.torch = torch
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)  # load the kernel
        s.record()
        torch.cuda._sleep(2_000_000)
        e.record()
        e.synchronize()
        self.cycles_per_ms = 2_000_000 / max(s.elapsed_time(e), 1e-3)

    def round(self, fn, calls, sleep_ms):
        """(per-call host µs, longest single call µs, whether the GPU was still asleep when the
        last call returned) of `calls` calls issued behind a sleep of sleep_ms."""
        torch = self.torch
        clock = time.perf_counter
        torch.cuda._sleep(int(sleep_ms * self.cycles_per_ms))
        asleep = torch.cuda.Event()
        asleep.record()  # completes when the sleep ends
        stamps = [0.0] * (calls + 1)
        stamps[0] = clock()
        for i in range(1, calls + 1):
            fn()
            stamps[i] = clock()
        busy = not asleep.query()
        torch.cuda.synchronize()
        longest = max(stamps[i + 1] - stamps[i] for i in range(calls))
        return 1e6 * (stamps[-1] - stamps[0]) / calls, 1e6 * longest, busy


def make_rows(torch, quack_cpp, a):
    """[(group, name, kind, fn, switch)]: kind 'fwd' or 'fwd+bwd' (None: context); switch
    (setup, teardown) or None wraps every round (path switches, stubs)."""
    import torch.nn.functional as F

    ops = quack_cpp.ops
    dev, bf16 = DEVICE, torch.bfloat16
    M, N = a.M, a.N
    g = torch.Generator(dev).manual_seed(0)
    x = torch.randn(M, N, device=dev, generator=g).to(bf16)
    w = (1 + 0.1 * torch.randn(N, device=dev, generator=g)).to(bf16)
    b = (0.1 * torch.randn(N, device=dev, generator=g)).to(bf16)
    dy = torch.randn(M, N, device=dev, generator=g).to(bf16)
    xr, wr, br = (t.clone().requires_grad_(True) for t in (x, w, b))

    def fwd(op, unary=False):
        if unary:
            def f():
                with torch.no_grad():
                    op(x)
        else:
            def f():
                with torch.no_grad():
                    op(x, w, b)
        return f

    def fwd_bwd(op, unary=False):
        if unary:
            return lambda: torch.autograd.grad(op(xr), (xr,), dy)
        return lambda: torch.autograd.grad(op(xr, wr, br), (xr, wr, br), dy)

    def layer_norm(x, w, b):
        return F.layer_norm(x, (N,), w, b)

    t = torch.randint(0, N, (M,), device=dev, generator=g)

    def ce_fwd(op):
        return lambda: op(x, t, reduction="none")

    def ce_fwd_bwd(op):
        return lambda: torch.autograd.grad(op(xr, t), (xr,))

    ours = [("rmsnorm", quack_cpp.rmsnorm, False)]
    for name, unary in (("layernorm", False), ("softmax", True), ("log_softmax", True)):
        try:
            ours.append((name, getattr(quack_cpp, name), unary))
        except (AttributeError, ImportError):
            pass
    try:
        qce = quack_cpp.cross_entropy
    except (AttributeError, ImportError):
        qce = None

    import quack_cpp._registrar as reg

    force_on = (lambda: setattr(ops, "FORCE_CUSTOM_OP", True),
                lambda: setattr(ops, "FORCE_CUSTOM_OP", False))
    mods = [m for k, m in sorted(sys.modules.items())
            if k.startswith("quack_cpp.") and m is not None and hasattr(m, "_C")]
    real_c = quack_cpp._C
    stub = NoOpC(real_c)
    cpp0 = reg.CPP_EAGER
    ext = ops._torch_ext if cpp0 else None  # the C++ fast path, where built and on

    def set_stub(on):
        for m in mods:
            m._C = stub if on else real_c
        reg.CPP_EAGER = cpp0 and not on

    stub_on = (lambda: set_stub(True), lambda: set_stub(False))
    py_on = (lambda: setattr(reg, "CPP_EAGER", False), lambda: setattr(reg, "CPP_EAGER", cpp0))
    cpp_stub_on = (lambda: ext._set_stub_launches(True), lambda: ext._set_stub_launches(False))

    rows = [("torch", "F.layer_norm", "fwd", fwd(layer_norm), None),
            ("torch", "F.layer_norm", "fwd+bwd", fwd_bwd(layer_norm), None)]
    for name, op, unary in ours:
        rows += [("ours", name, "fwd", fwd(op, unary), None),
                 ("ours", name, "fwd+bwd", fwd_bwd(op, unary), None)]
    ce_rows = []
    if qce is not None:  # context: beside torch's own cross-entropy, not in the bar
        ce_rows = [("torch", "F.cross_entropy", "ce fwd", ce_fwd(F.cross_entropy), None),
                   ("torch", "F.cross_entropy", "ce fwd+bwd", ce_fwd_bwd(F.cross_entropy), None),
                   ("ours", "cross_entropy", "ce fwd", ce_fwd(qce), None),
                   ("ours", "cross_entropy", "ce fwd+bwd", ce_fwd_bwd(qce), None)]
    rows += ce_rows
    if a.no_diagnostics:
        return rows
    if qce is not None:
        rows += [("custom op", "cross_entropy", "ce fwd", ce_fwd(qce), force_on),
                 ("custom op", "cross_entropy", "ce fwd+bwd", ce_fwd_bwd(qce), force_on),
                 ("python only", "cross_entropy", "ce fwd", ce_fwd(qce), stub_on),
                 ("python only", "cross_entropy", "ce fwd+bwd", ce_fwd_bwd(qce), stub_on)]
        if getattr(ext, "cross_entropy_fwd", None) is not None:
            rows += [("python path", "cross_entropy", "ce fwd", ce_fwd(qce), py_on),
                     ("python path", "cross_entropy", "ce fwd+bwd", ce_fwd_bwd(qce), py_on),
                     ("C++ no launch", "cross_entropy", "ce fwd", ce_fwd(qce), cpp_stub_on),
                     ("C++ no launch", "cross_entropy", "ce fwd+bwd", ce_fwd_bwd(qce),
                      cpp_stub_on)]
    for name, op, unary in ours:
        rows += [("custom op", name, "fwd", fwd(op, unary), force_on),
                 ("custom op", name, "fwd+bwd", fwd_bwd(op, unary), force_on)]
        cpp_path = getattr(ext, {"rmsnorm": "rmsnorm_fwd", "layernorm": "layernorm_fwd",
                                 "softmax": "softmax_fwd",
                                 "log_softmax": "log_softmax_fwd"}.get(name, "-"), None)
        if cpp_path is not None:
            rows += [("python path", name, "fwd", fwd(op, unary), py_on),
                     ("python path", name, "fwd+bwd", fwd_bwd(op, unary), py_on),
                     ("C++ no launch", name, "fwd", fwd(op, unary), cpp_stub_on),
                     ("C++ no launch", name, "fwd+bwd", fwd_bwd(op, unary), cpp_stub_on)]
        rows += [("python only", name, "fwd", fwd(op, unary), stub_on),
                 ("python only", name, "fwd+bwd", fwd_bwd(op, unary), stub_on)]

    # The C++ launches alone, on pre-made tuples (what the Python layer passes).
    from quack_cpp._registrar import stream, tensor_arg

    C = real_c
    out = torch.empty(M, N, device=dev, dtype=bf16)
    rstd = torch.empty(M, device=dev)
    h, dx, dw, db = x.clone(), torch.empty_like(x), torch.empty_like(w), torch.empty_like(b)
    T = lambda t: tensor_arg(t, "bench", "t")  # noqa: E731
    fwd_args = (T(x), T(w), T(b), None, T(out), None, None, 1e-6, stream(x))
    bwd_args = (T(h), T(w), T(dy), T(rstd), None, T(dx), None, T(dw), T(db))
    ws = torch.empty(C.rmsnorm_bwd_workspace_size(*bwd_args), device=dev, dtype=torch.uint8)
    ws_args = (ws.data_ptr(), ws.numel(), stream(x))

    # M = 0: the same conversion, validation and plan, then no DeviceGuard and no launch.
    x0, out0 = x[:0], out[:0]
    fwd_args0 = (T(x0), T(w), T(b), None, T(out0), None, None, 1e-6, stream(x))

    def c_fwd():
        C.rmsnorm_fwd(*fwd_args)

    def c_fwd_plan():
        C.rmsnorm_fwd(*fwd_args0)

    def c_bwd_ws():
        C.rmsnorm_bwd_workspace_size(*bwd_args)

    def c_bwd():
        C.rmsnorm_bwd_workspace_size(*bwd_args)
        C.rmsnorm_bwd(*bwd_args, *ws_args)

    A0, B0 = x, torch.randn(N, N, device=dev, generator=g).to(bf16).T
    D0 = torch.empty(M, N, device=dev, dtype=bf16)
    gemm_args = (T(A0), T(B0), None, T(D0))

    def c_gemm_check():
        C.gemm_can_implement(*gemm_args, 1.0, 0.0)

    def c_gemm():
        C.gemm(*gemm_args, 1.0, 0.0, stream(x), False, 0, 0)

    rows += [("_C direct", "rmsnorm_fwd M=0 (no launch)", None, c_fwd_plan, None),
             ("_C direct", "rmsnorm_fwd", None, c_fwd, None),
             ("_C direct", "rmsnorm_bwd_workspace_size", None, c_bwd_ws, None),
             ("_C direct", "rmsnorm_bwd (+workspace_size)", None, c_bwd, None),
             ("_C direct", "gemm_can_implement (no launch)", None, c_gemm_check, None),
             ("_C direct", "gemm", None, c_gemm, None)]

    # Context: torch's own row ops and the GEMM.
    A, Bt = x, torch.randn(N, N, device=dev, generator=g).to(bf16)

    def rms_norm(x, w, b):
        return F.rms_norm(x, (N,), w)

    rows += [("torch", "F.rms_norm", "fwd", fwd(rms_norm), None),
             ("torch", "F.softmax", "fwd", fwd(lambda t: F.softmax(t, -1), True), None),
             ("torch", "matmul", None, fwd(lambda t: t @ Bt.T, True), None),
             ("ours", "gemm", None, fwd(lambda t: quack_cpp.gemm(t, Bt.T), True), None)]
    # Linear fwd+bwd (three GEMMs, a bias): torch's module and ours, the same shapes.
    tl = torch.nn.Linear(N, N, device=dev, dtype=bf16)
    ql = quack_cpp.nn.Linear(N, N, device=dev, dtype=bf16)
    for name, mod in (("nn.Linear", tl), ("quack_cpp.nn.Linear", ql)):
        params = tuple(mod.parameters())
        rows.append(("torch" if mod is tl else "ours", name, None,
                     lambda mod=mod, params=params: torch.autograd.grad(mod(xr), (xr,) + params,
                                                                      dy), None))
    return rows


def main():
    a = parse_args()
    try:
        import torch
    except ImportError:
        print("bench_host_time: needs torch; nothing measured")
        return 2
    if not torch.cuda.is_available():
        print("bench_host_time: no CUDA GPU; nothing measured")
        return 2
    import quack_cpp
    import quack_cpp.ops  # noqa: F401
    import quack_cpp.gemm_ops  # noqa: F401
    for sub in ("softmax_ops", "cross_entropy_ops"):  # their _C is stubbed by 'python only'
        try:
            __import__(f"quack_cpp.{sub}")
        except ImportError:
            pass

    busy = Busy(torch)
    rows = make_rows(torch, quack_cpp, a)

    def call(row, n):
        _, _, _, fn, switch = row
        if switch:
            switch[0]()
        try:
            for _ in range(n):
                fn()
        finally:
            if switch:
                switch[1]()

    # Warm-up and the per-call estimate that sizes each round's sleep.
    sleep_ms = {}
    for row in rows:
        call(row, 20)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        call(row, 20)
        est_ms = 1e3 * (time.perf_counter() - t0) / 20
        torch.cuda.synchronize()
        sleep_ms[id(row)] = min(2000.0, 3.0 * a.calls * est_ms + 5.0)
    samples = {id(r): [] for r in rows}
    longest = {id(r): 0.0 for r in rows}
    idle_rounds = 0
    for _ in range(a.rounds):
        for row in rows:
            for attempt in range(3):
                switch = row[4]
                if switch:
                    switch[0]()
                try:
                    us, long_us, was_busy = busy.round(row[3], a.calls, sleep_ms[id(row)])
                finally:
                    if switch:
                        switch[1]()
                if was_busy:
                    break
                idle_rounds += 1
                sleep_ms[id(row)] = min(4000.0, 2 * sleep_ms[id(row)])
            samples[id(row)].append(us)
            longest[id(row)] = max(longest[id(row)], long_us)

    med = {id(r): statistics.median(samples[id(r)]) for r in rows}
    ref = {kind: med[id(r)] for r in rows for kind in ("fwd", "fwd+bwd")
           if r[0] == "torch" and r[1] == "F.layer_norm" and r[2] == kind}
    ref.update({kind: med[id(r)] for r in rows for kind in ("ce fwd", "ce fwd+bwd")
                if r[0] == "torch" and r[1] == "F.cross_entropy" and r[2] == kind})
    bars = {"fwd": 1.25, "fwd+bwd": 1.5}
    import quack_cpp._registrar as reg

    ops = quack_cpp.ops
    fast = ("C++ (quack_cpp._torch)" if ops._torch_ext is not None and reg.CPP_EAGER
            else "Python")
    err = ops._torch_ext_error or ""
    built = not err.startswith("cannot import name '_torch'")  # else: not built, no noise
    print(f"ours: rmsnorm's (layernorm's, softmax's, log_softmax's, cross_entropy's) fast path "
          f"in {fast}"
          + (f"; quack_cpp._torch did not import: {err}" if err and built else ""))
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, x ({a.M}, {a.N}) bf16, "
          f"median of {a.rounds} rounds x {a.calls} calls, GPU kept busy"
          + (f" ({idle_rounds} rounds repeated with a longer sleep)" if idle_rounds else ""))
    print(f"{'':13s} {'op':30s} {'call':10s} {'us/call':>9s} {'x torch':>15s} {'bar':>6s}"
          f" {'longest call':>13s}   (x torch: F.layer_norm's same call; ce: F.cross_entropy's)")
    out, failed = [], []
    for row in rows:
        group, name, kind = row[:3]
        us = med[id(row)]
        rel = us / ref[kind] if kind in ref else None
        verdict = ""
        if group == "ours" and kind in bars:
            ok = rel <= bars[kind]
            verdict = "ok" if ok else "MISS"
            if not ok:
                failed.append(f"{name} {kind}")
        stall = longest[id(row)] > max(1000.0, 20 * us)
        print(f"{group:13s} {name:30s} {kind or '':10s} {us:9.1f} "
              f"{(f'{rel:.2f}' if rel is not None else ''):>15s} {verdict:>6s} "
              f"{longest[id(row)]:13.1f}" + (" stall" if stall else ""))
        out.append({"group": group, "op": name, "call": kind, "us_per_call": us,
                    "rounds_us": samples[id(row)], "longest_call_us": longest[id(row)],
                    "vs_torch": rel, "bar": verdict})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(),
                       "M": a.M, "N": a.N, "rounds": a.rounds, "calls": a.calls,
                       "rows": out}, f, indent=1)
    if any(longest[id(r)] > max(1000.0, 20 * med[id(r)]) for r in rows):
        print("stall: a single call took > 20x its row's median (and > 1 ms): the host waited "
              "for the GPU (a launch queue full behind the sleep?); the row's figure is not "
              "host time alone. Compare with --calls 25.")
    if failed:
        print("bar missed: " + ", ".join(failed))
    return 1 if (a.check and failed) else 0


if __name__ == "__main__":
    sys.exit(main())
