"""Row ops by the acceptance method (DESIGN §8): quack_cpp beside every peer, one process.

    python3 bench/bench_rows.py                          # every op we have, bf16 + fp32 anchors
    python3 bench/bench_rows.py --quick                  # bf16, (16384, 4096) and (16384, 32768)
    python3 bench/bench_rows.py --ops softmax_fwd,softmax_bwd --dtypes bf16 --shapes 16384x4096
    python3 bench/bench_rows.py --small                  # bf16, M = 32768, N = 128 ... 2048
    python3 bench/bench_rows.py --replot results/bench_rows.jsonl

Method: ``triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")`` on the public
Python call of each implementation, at the same shape, in the same process. do_bench clears L2
before every call, so the host time of a call shows wherever its kernel is shorter than that
clear: host time is part of what is measured, as the users see it. The order of the
implementations rotates between rounds (A B C, B C A, C A B; --rounds), and each figure is the
median of its rounds. A 4 GiB device-to-device copy timed the same way is the same-run ceiling.

Implementations (a dash in the table: the peer does not run that op or refuses the size):
  ours     quack_cpp's public function (quack_cpp.rmsnorm, .softmax, .log_softmax, .layernorm,
           .cross_entropy)
  eager    torch's own op (F.rms_norm, F.softmax, F.log_softmax, F.layer_norm, F.cross_entropy)
  compile  torch.compile(dynamic=False) of the fp32-math reference expression
  liger    Liger-Kernel's module (N <= 65536), when importable
  quack    QuACK's public function (quack-kernels 0.2.0: rmsnorm fwd, softmax fwd/bwd, layernorm
           fwd with an fp32 weight and no bias, cross_entropy), when importable

Workloads: RMSNorm with an fp32 weight and no bias (bwd: dx and dweight); LayerNorm with a weight
and bias in x's dtype... except QuACK's, timed with the fp32 weight and no bias it takes; forward
under torch.no_grad(); a backward is ``torch.autograd.grad(y, inputs, dy, retain_graph=True)`` on
a graph built once. Cross-entropy (issue 18's calls): ce_fwd = ``cross_entropy(x, t,
reduction="none")`` with x not requiring grad; ce_bwd = the backward alone of a
``reduction="none"`` call with a random grad per row; ce_fwd_bwd = ``autograd.grad(
cross_entropy(x, t), x)`` (mean, grad_output 1); ce_fwd_bwd_half = the same with the loss * 0.5.

Byte model (QuACK's): fwd 2*M*N*elt, bwd 3*M*N*elt, ce_fwd M*N*elt, ce_bwd and ce_fwd_bwd
2*M*N*elt. TB/s = bytes / time.

Output: JSON lines (--out), the table last (ours and each peer in TB/s, ours / best peer,
ours / copy) and a PNG (--plot).
"""

import argparse
import json
import math
import os
import statistics
import sys

ANCHORS = {
    "bfloat16": [(16384, 4096), (16384, 32768), (16384, 131072), (8192, 262144)],
    "float32": [(16384, 32768), (16384, 131072), (8192, 262144)],
}
QUICK = {"bfloat16": [(16384, 4096), (16384, 32768)]}
SMALL = {"bfloat16": [(32768, 128), (32768, 256), (32768, 1024), (32768, 2048)]}
OPS = ("rmsnorm_fwd", "rmsnorm_bwd", "softmax_fwd", "softmax_bwd", "log_softmax_fwd",
       "log_softmax_bwd", "layernorm_fwd", "layernorm_bwd", "ce_fwd", "ce_bwd", "ce_fwd_bwd",
       "ce_fwd_bwd_half")
IMPLS = ("ours", "eager", "compile", "liger", "quack")
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
EPS = 1e-6
LIGER_MAX_N = 65536
COPY_BYTES = 4 << 30


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--small", action="store_true", help="bf16 small rows (M = 32768)")
    p.add_argument("--ops", default=None, help="comma list (default: every op quack_cpp has)")
    p.add_argument("--dtypes", default=None, help="comma list of bf16, fp16, fp32")
    p.add_argument("--shapes", default=None, help="comma list of MxN (every dtype)")
    p.add_argument("--impls", default=",".join(IMPLS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup-ms", type=float, default=25.0)
    p.add_argument("--rep-ms", type=float, default=100.0)
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "results"), "bench_rows.jsonl"))
    p.add_argument("--plot", default=os.path.join(os.environ.get("OUT", "results"), "rows_bw.png"),
                   help="PNG of the table ('' for none)")
    p.add_argument("--replot", metavar="JSONL")
    return p.parse_args(argv)


def byte_factor(op):
    if op == "ce_fwd":
        return 1
    if op.startswith("ce_"):
        return 2
    return 2 if op.endswith("_fwd") else 3


# --------------------------------------------------------------------------------------------
# Implementations: make(impl, op, inputs) -> a zero-argument callable, or None (not run)
# --------------------------------------------------------------------------------------------


def _ours(name):
    import quack_cpp

    try:
        return getattr(quack_cpp, name)
    except (AttributeError, ImportError):
        return None


def _liger(module, cls):
    try:
        mod = __import__(f"liger_kernel.transformers.{module}", fromlist=[cls])
        return getattr(mod, cls)
    except Exception:
        return None


def _quack(path):
    try:
        mod_name, _, attr = path.rpartition(".")
        mod = __import__(mod_name, fromlist=[attr])
        return getattr(mod, attr)
    except Exception:
        return None


def row_fns(torch, F, impl, family, N, dtype):
    """(fn(x, *params), params) for a normalisation or softmax family, or None."""
    dev = "cuda"
    if family == "rmsnorm":
        w = (1 + 0.1 * torch.randn(N, device=dev)).float()
        if impl == "ours":
            f = _ours("rmsnorm")
            return (None if f is None else (lambda x, w: f(x, w, eps=EPS)), [w])
        if impl == "eager":
            return (lambda x, w: F.rms_norm(x, (N,), w, EPS)), [w]
        if impl == "compile":
            def ref(x, w):
                xf = x.float()
                return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w).to(x.dtype)
            return torch.compile(ref, dynamic=False), [w]
        if impl == "liger" and N <= LIGER_MAX_N:
            cls = _liger("rms_norm", "LigerRMSNorm")
            if cls is None:
                return None
            try:
                mod = cls(N, eps=EPS, in_place=False)
            except TypeError:
                mod = cls(N, eps=EPS)
            mod = mod.to(device=dev, dtype=torch.float32)
            return (lambda x, w: mod(x)), [mod.weight]
        if impl == "quack":
            f = _quack("quack.rmsnorm")
            return (None if f is None else (lambda x, w: f(x, w, eps=EPS)), [w])
        return None
    if family == "layernorm":
        w = (1 + 0.1 * torch.randn(N, device=dev)).to(dtype)
        b = (0.1 * torch.randn(N, device=dev)).to(dtype)
        if impl == "ours":
            f = _ours("layernorm")
            return (None if f is None else (lambda x, w, b: f(x, w, b, eps=EPS)), [w, b])
        if impl == "eager":
            return (lambda x, w, b: F.layer_norm(x, (N,), w, b, EPS)), [w, b]
        if impl == "compile":
            def ref(x, w, b):
                xf = x.float()
                mu = xf.mean(-1, keepdim=True)
                var = (xf - mu).pow(2).mean(-1, keepdim=True)
                return ((xf - mu) * torch.rsqrt(var + EPS) * w.float() + b.float()).to(x.dtype)
            return torch.compile(ref, dynamic=False), [w, b]
        if impl == "liger" and N <= LIGER_MAX_N:
            cls = _liger("layer_norm", "LigerLayerNorm")
            if cls is None:
                return None
            mod = cls(N, eps=EPS).to(device=dev, dtype=dtype)
            return (lambda x, w, b: mod(x)), [mod.weight, mod.bias]
        if impl == "quack":
            f = _quack("quack.layernorm.layernorm")
            wq = w.float()
            return (None if f is None else (lambda x, w: f(x, w, eps=EPS)), [wq])
        return None
    if family in ("softmax", "log_softmax"):
        if impl == "ours":
            f = _ours(family)
            return (None if f is None else (lambda x: f(x, dim=-1)), [])
        if impl == "eager":
            g = F.softmax if family == "softmax" else F.log_softmax
            return (lambda x: g(x, dim=-1)), []
        if impl == "compile":
            g = torch.softmax if family == "softmax" else torch.log_softmax
            return torch.compile(lambda x: g(x.float(), dim=-1).to(x.dtype), dynamic=False), []
        if impl == "liger" and N <= LIGER_MAX_N and family == "softmax":
            cls = _liger("softmax", "LigerSoftmax")
            if cls is None:
                return None
            mod = cls()
            return (lambda x: mod(x)), []
        if impl == "quack" and family == "softmax":
            f = _quack("quack.softmax")
            return (None if f is None else (lambda x: f(x)), [])
        return None
    raise ValueError(family)


def ce_fn(torch, F, impl, N):
    """fn(x, t, reduction) or None."""
    if impl == "ours":
        f = _ours("cross_entropy")
        return None if f is None else (lambda x, t, r: f(x, t, reduction=r))
    if impl == "eager":
        return lambda x, t, r: F.cross_entropy(x, t, reduction=r)
    if impl == "compile":
        cache = {}

        def run(x, t, r):
            if r not in cache:
                cache[r] = torch.compile(
                    lambda x, t: F.cross_entropy(x.float(), t, reduction=r), dynamic=False)
            return cache[r](x, t)
        return run
    if impl == "liger" and N <= LIGER_MAX_N:
        cls = _liger("cross_entropy", "LigerCrossEntropyLoss")
        if cls is None:
            return None
        mods = {}

        def run(x, t, r):
            if r not in mods:
                mods[r] = cls(reduction=r)
            return mods[r](x, t)
        return run
    if impl == "quack":
        f = _quack("quack.cross_entropy")
        return None if f is None else (lambda x, t, r: f(x, t, reduction=r))
    return None


def make_call(torch, F, impl, op, M, N, dtype, gen):
    """A zero-argument callable timing `op` for `impl`, or None."""
    dev = "cuda"
    family, _, direction = op.rpartition("_")
    if op.startswith("ce_"):
        f = ce_fn(torch, F, impl, N)
        if f is None:
            return None
        x = torch.randn(M, N, device=dev, dtype=dtype, generator=gen)
        t = torch.randint(0, N, (M,), device=dev, generator=gen)
        if op == "ce_fwd":
            def call():
                with torch.no_grad():
                    return f(x, t, "none")
            return call
        xr = x.detach().requires_grad_(True)
        if op == "ce_bwd":
            loss = f(xr, t, "none")
            g = torch.rand(M, device=dev, generator=gen)
            return lambda: torch.autograd.grad(loss, xr, g, retain_graph=True)
        scale = 0.5 if op == "ce_fwd_bwd_half" else None
        if scale is None:
            return lambda: torch.autograd.grad(f(xr, t, "mean"), xr)
        return lambda: torch.autograd.grad(f(xr, t, "mean") * scale, xr)
    made = row_fns(torch, F, impl, family, N, dtype)
    if made is None or made[0] is None:
        return None
    fn, params = made
    x = torch.randn(M, N, device=dev, dtype=dtype, generator=gen)
    if direction == "fwd":
        def call():
            with torch.no_grad():
                return fn(x, *params)
        return call
    xr = x.detach().requires_grad_(True)
    ps = [p.detach().requires_grad_(True) if not p.requires_grad else p for p in params]
    y = fn(xr, *ps)
    dy = torch.randn_like(y)
    inputs = (xr, *ps)
    return lambda: torch.autograd.grad(y, inputs, dy, retain_graph=True)


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


def timed(torch, do_bench, call, args):
    return do_bench(call, warmup=args.warmup_ms, rep=args.rep_ms, return_mode="median")


def copy_tbps(torch, do_bench, args):
    n = COPY_BYTES // 2
    src = torch.empty(n, device="cuda", dtype=torch.bfloat16).uniform_()
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), warmup=args.warmup_ms, rep=args.rep_ms,
                  return_mode="median")
    del src, dst
    torch.cuda.empty_cache()
    return 2 * COPY_BYTES / ms / 1e9


def bench_one(torch, F, do_bench, args, op, dname, M, N, impls, emit):
    dtype = getattr(torch, dname)
    gen = torch.Generator(device="cuda").manual_seed(M * 131 + N)
    calls = {}
    for impl in impls:
        try:
            if impl == "compile":
                torch._dynamo.reset()
            c = make_call(torch, F, impl, op, M, N, dtype, gen)
            if c is not None:
                c()  # first call: compile, JIT, autotune; errors show here
                torch.cuda.synchronize()
                calls[impl] = c
        except Exception as e:  # a peer refuses the size, OOM, ...
            msg = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
            print(f"  {impl:8s} {op} {dname} {M}x{N}: skipped ({msg})", flush=True)
            emit(dict(op=op, dtype=dname, M=M, N=N, impl=impl, ms=None, error=msg))
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    if "ours" not in calls:
        return
    names = list(calls)
    samples = {n: [] for n in names}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            samples[n].append(timed(torch, do_bench, calls[n], args))
    elt = dtype.itemsize
    nbytes = byte_factor(op) * M * N * elt
    for n in names:
        ms = statistics.median(samples[n])
        emit(dict(op=op, dtype=dname, M=M, N=N, impl=n, ms=ms, bytes=nbytes,
                  tbps=nbytes / ms / 1e9, rounds=samples[n]))
    calls.clear()
    torch.cuda.empty_cache()


def main(argv=None):
    args = parse_args(argv)
    if args.replot:
        with open(args.replot) as f:
            records = [json.loads(line) for line in f if line.strip()]
        report(records, args.plot)
        return 0
    try:
        import torch
        import torch.nn.functional as F
        from triton.testing import do_bench
    except ImportError as e:
        print(f"bench_rows: needs torch and triton ({e})")
        return 2
    if not torch.cuda.is_available():
        print("bench_rows: needs a CUDA GPU")
        return 2
    import quack_cpp  # noqa: F401

    shapes = SMALL if args.small else QUICK if args.quick else ANCHORS
    if args.dtypes:
        wanted = [DTYPES[d] for d in args.dtypes.split(",")]
        shapes = {d: shapes.get(d, shapes.get("bfloat16")) for d in wanted}
    if args.shapes:
        mn = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
        shapes = {d: mn for d in shapes}
    ops = args.ops.split(",") if args.ops else [
        o for o in OPS if _ours({"rmsnorm": "rmsnorm", "softmax": "softmax",
                                 "log_softmax": "log_softmax", "layernorm": "layernorm",
                                 "ce": "cross_entropy"}[o.split("_fwd")[0].split("_bwd")[0]])
        is not None]
    impls = args.impls.split(",")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    records = []
    env = dict(torch=torch.__version__, gpu=torch.cuda.get_device_name())
    try:
        import quack

        env["quack"] = getattr(quack, "__version__", "?")
    except Exception:
        pass
    with open(args.out, "w") as out:
        def emit(rec):
            rec.update(env)
            records.append(rec)
            out.write(json.dumps(rec) + "\n")
            out.flush()

        emit(dict(op="copy", dtype="bfloat16", M=1, N=COPY_BYTES // 2, impl="copy",
                  tbps=copy_tbps(torch, do_bench, args)))
        for op in ops:
            for dname, mns in shapes.items():
                for M, N in mns:
                    print(f"bench_rows: {op} {dname} {M}x{N}", flush=True)
                    bench_one(torch, F, do_bench, args, op, dname, M, N, impls, emit)
    report(records, args.plot)
    return 0


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def report(records, plot_path):
    copy = [r["tbps"] for r in records if r.get("op") == "copy" and r.get("tbps")]
    copy = copy[-1] if copy else None
    rows = {}
    for r in records:
        if r.get("op") == "copy" or r.get("tbps") is None:
            continue
        rows.setdefault((r["op"], r["dtype"], r["M"], r["N"]), {})[r["impl"]] = r["tbps"]
    print(f"\ncopy {copy:.3f} TB/s" if copy else "\ncopy: not measured")
    hdr = "| op | dtype | M x N | ours | " + " | ".join(IMPLS[1:]) + " | ours/best | ours/copy |"
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for (op, dt, M, N), v in rows.items():
        ours = v.get("ours")
        peers = [v[p] for p in IMPLS[1:] if v.get(p)]
        best = max(peers) if peers else None
        cells = [f"{v[p]:.2f}" if v.get(p) else "-" for p in IMPLS]
        ratio = f"{ours / best:.3f}" if ours and best else "-"
        vs_copy = f"{ours / copy:.3f}" if ours and copy else "-"
        print(f"| {op} | {dt} | {M} x {N} | " + " | ".join(cells) + f" | {ratio} | {vs_copy} |")
    if not plot_path:  # --plot '': the table alone
        return
    try:
        plot(rows, copy, plot_path)
    except Exception as e:  # matplotlib missing: the table is the result
        print(f"bench_rows: no plot ({e})")


def plot(rows, copy, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(op, dt) for op, dt, _, _ in rows})
    if not groups:
        return
    cols = 4
    nr = math.ceil(len(groups) / cols)
    fig, axes = plt.subplots(nr, cols, figsize=(4.2 * cols, 3.2 * nr), squeeze=False)
    colors = {"ours": "tab:red", "eager": "tab:gray", "compile": "tab:blue",
              "liger": "tab:green", "quack": "tab:purple"}
    for ax, (op, dt) in zip(axes.flat, groups):
        keys = sorted((M, N) for o, d, M, N in rows if (o, d) == (op, dt))
        for impl in IMPLS:
            xs = [i for i, k in enumerate(keys) if rows[(op, dt, *k)].get(impl)]
            ys = [rows[(op, dt, *keys[i])][impl] for i in xs]
            if ys:
                ax.plot(xs, ys, marker="o", label=impl, color=colors[impl])
        if copy:
            ax.axhline(copy, color="black", linestyle=":", linewidth=1)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([f"{M // 1024}Kx{N // 1024 if N >= 1024 else N}{'K' if N >= 1024 else ''}"
                            for M, N in keys], fontsize=7)
        ax.set_title(f"{op} {dt}", fontsize=9)
        ax.set_ylabel("TB/s")
        ax.set_ylim(bottom=0)
    for ax in list(axes.flat)[len(groups):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"bench_rows: plot {path}")


if __name__ == "__main__":
    sys.exit(main())
