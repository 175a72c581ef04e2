"""RMSNorm bandwidth: quack_cpp next to its peers, in one process, on one GPU.

How to run (repository root, after `pip install --no-build-isolation --no-deps .`):

    python3 bench/bench_rmsnorm.py                 # full: bf16 and fp32 shapes, fwd and bwd
    python3 bench/bench_rmsnorm.py --quick         # 3 bf16 shapes
    python3 bench/bench_rmsnorm.py --replot results/bench_rmsnorm.jsonl   # table + PNG only

Options: --out results/bench_rmsnorm.jsonl (JSON lines), --plot results/rmsnorm_bw.png,
--warmup-ms 25, --rep-ms 100, --no-compile, --no-liger, --ops fwd,bwd, --dtypes bf16,fp32.

Implementations (workload of DESIGN §8: fp32 weight, no bias; bwd produces dx and dw):
  ours     quack_cpp.rmsnorm (fwd); autograd of it (bwd: torch.ops.quack_cpp.rmsnorm_bwd)
  eager    torch.nn.functional.rms_norm with the fp32 weight; bwd = its autograd
  compile  torch.compile(dynamic=False, default mode) of
           (x.float() * rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps) * w).to(x.dtype)
  liger    liger_kernel LigerRMSNorm (fp32 weight, in_place=False), when importable
  quack    quack-kernels' quack.rmsnorm, when importable
Forward runs under torch.no_grad(); backward times torch.autograd.grad(y, (x, w), dy,
retain_graph=True) after one forward per input set.

Timing (the device METHOD notes): CUDA events around batches of back-to-back calls, each batch
preceded by a torch.cuda._sleep long enough for the CPU to enqueue the whole batch (so launch
overhead does not show, only GPU time); warm-up first (--warmup-ms, and until caches and
compilation settle); ours and each peer alternate batch by batch (A B A B ...) until each has
--rep-ms of measured time (at least 5 batches); the median per-call time is reported. Eager
is timed last and alone (its batches do not alternate with ours) whenever another peer ran:
ours read 3-4 % slower in its batches beside eager's (fp32 temporaries of up to 2 GiB, 7 ms a
call) than beside compile's at bf16 16384 x 32768 (H200; fp32: no difference),
a condition no peer was timed under. "ours" is the median over its batches beside the others.
L2 (60 MB on H200) is defeated by rotating 3 input sets whenever one set is under 1 GiB (three
sets then exceed 2x L2 for every shape here); a set of >= 1 GiB is > 16x L2 and cannot be
reused from cache.

Byte model (QuACK's): fwd 2*M*N*elt (x read, y written), bwd 3*M*N*elt (x and dy read, dx
written); weights and rstd are not counted. The same-run ceiling is a 4 GiB device-to-device
copy (bytes read + written).

Output: JSON lines (one per op/dtype/shape/impl, plus the copy), a table printed last
(op, dtype, M, N, TB/s of ours and each peer, ours / best peer, ours / copy) and a PNG like
QuACK's bandwidth figure.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time
import warnings

SHAPES_FULL = {
    "bfloat16": [(16384, 1024), (16384, 4096), (16384, 8192), (16384, 32768), (16384, 65536),
                 (16384, 131072), (8192, 262144)],
    "float32": [(16384, 1024), (16384, 8192), (16384, 32768), (16384, 65536), (16384, 131072)],
}
SHAPES_QUICK = {"bfloat16": [(16384, 4096), (16384, 32768), (8192, 262144)]}
PEERS = ("eager", "compile", "liger", "quack")
EPS = 1e-6
DEVICE = os.environ.get("QUACK_BENCH_DEVICE", "cuda")  # "cpu": self-test of this script only
COPY_ELEMS = 1 << 31  # 4 GiB of bf16
L2_ROTATE_BELOW = 1 << 30  # bytes of one input set under which 3 sets rotate


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="3 bf16 shapes")
    p.add_argument("--full", action="store_true", help="every shape, bf16 and fp32 (the default)")
    p.add_argument("--out", default="results/bench_rmsnorm.jsonl")
    p.add_argument("--plot", default="results/rmsnorm_bw.png")
    p.add_argument("--replot", metavar="JSONL", help="only read JSONL, print the table, plot")
    p.add_argument("--ops", default="fwd,bwd")
    p.add_argument("--dtypes", default=None, help="comma list of bf16, fp16, fp32")
    p.add_argument("--warmup-ms", type=float, default=25.0)
    p.add_argument("--rep-ms", type=float, default=100.0)
    p.add_argument("--batch-ms", type=float, default=10.0, help="GPU time of one timed batch")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--no-liger", action="store_true")
    return p.parse_args(argv)


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


class Timer:
    """Batches of back-to-back calls between CUDA events, behind a sleep kernel that covers
    the CPU's enqueue time."""

    def __init__(self, torch, batch_ms):
        self.torch = torch
        self.batch_ms = batch_ms
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)  # load the kernel
        s.record()
        torch.cuda._sleep(2_000_000)
        e.record()
        e.synchronize()
        self.cycles_per_ms = 2_000_000 / max(s.elapsed_time(e), 1e-3)

    def warmup(self, fn, n_sets, warmup_ms):
        """Runs fn until warmup_ms of wall time (at least 3 calls per set); returns (GPU ms
        per call, CPU enqueue ms per call) estimates."""
        torch = self.torch
        t0 = time.perf_counter()
        k = 0
        while k < 3 * n_sets or (time.perf_counter() - t0) * 1e3 < warmup_ms:
            fn(k % n_sets)
            k += 1
            if k % 8 == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        gpu, cpu = [], []
        for k in range(5):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(int(self.cycles_per_ms * 5))
            s.record()
            c0 = time.perf_counter()
            fn(k % n_sets)
            cpu.append((time.perf_counter() - c0) * 1e3)
            e.record()
            e.synchronize()
            gpu.append(s.elapsed_time(e))
        return statistics.median(gpu), statistics.median(cpu)

    def plan(self, gpu_ms, cpu_ms):
        # At most 32 calls a batch: the launch queue holds them all while the sleep runs.
        n = max(1, min(32, int(round(self.batch_ms / max(gpu_ms, 1e-3)))))
        sleep_ms = min(50.0, 1.5 * n * cpu_ms + 0.2)
        return n, int(sleep_ms * self.cycles_per_ms)

    def batch(self, fn, n_sets, n_calls, sleep_cycles, start_set=0):
        torch = self.torch
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(sleep_cycles)
        s.record()
        for k in range(n_calls):
            fn((start_set + k) % n_sets)
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / n_calls


def alternate(timer, impls, n_sets, rep_ms, min_batches=5, max_batches=30):
    """impls: {name: (fn, n_calls, sleep_cycles)}. Batches alternate A B A B ...; returns
    {name: [per-call ms of each batch]}."""
    samples = {name: [] for name in impls}
    spent = {name: 0.0 for name in impls}
    b = 0
    while b < max_batches and (b < min_batches or min(spent.values()) < rep_ms):
        for name, (fn, n_calls, sleep) in impls.items():
            ms = timer.batch(fn, n_sets, n_calls, sleep, start_set=b)
            samples[name].append(ms)
            spent[name] += ms * n_calls
        b += 1
    return samples


# --------------------------------------------------------------------------------------------
# Implementations
# --------------------------------------------------------------------------------------------


def make_impl(name, op, ctx):
    """Returns fn(i) running one call on input set i, or raises (peer unavailable)."""
    torch, F = ctx["torch"], ctx["F"]
    xs, w, N = ctx["xs"], ctx["w"], ctx["N"]

    if name == "ours":
        import quack_cpp

        fwd = lambda x, w: quack_cpp.rmsnorm(x, w, eps=EPS)
    elif name == "eager":
        def fwd(x, w):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # mixed-dtype: "Cannot dispatch to fused"
                return F.rms_norm(x, (N,), w, EPS)
    elif name == "compile":
        def ref(x, w):
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w).to(x.dtype)

        fwd = torch.compile(ref, dynamic=False)
    elif name == "liger":
        from liger_kernel.transformers.rms_norm import LigerRMSNorm

        try:
            mod = LigerRMSNorm(N, eps=EPS, in_place=False)
        except TypeError:
            mod = LigerRMSNorm(N, eps=EPS)
        mod = mod.to(device=w.device, dtype=torch.float32)
        with torch.no_grad():
            mod.weight.copy_(w)
        ctx.setdefault("keep", []).append(mod)
        w = mod.weight
        fwd = lambda x, _w: mod(x)
    elif name == "quack":
        from quack import rmsnorm as quack_rmsnorm

        fwd = lambda x, w: quack_rmsnorm(x, w, eps=EPS)
    else:
        raise ValueError(name)

    if op == "fwd":
        def run_fwd(i):
            with torch.no_grad():
                return fwd(xs[i], w)

        return run_fwd

    # bwd: one forward per set (graph retained), then time autograd.grad.
    wl = w if w.requires_grad else w.detach().requires_grad_(True)
    xls = [x.detach().requires_grad_(True) for x in xs]
    ys = [fwd(x, wl) for x in xls]
    dys = ctx["dys"]

    def run_bwd(i):
        return torch.autograd.grad(ys[i], (xls[i], wl), dys[i], retain_graph=True)

    run_bwd.state = (xls, ys, wl)
    return run_bwd


def available_peers(args):
    peers = ["eager"]
    if not args.no_compile:
        peers.append("compile")
    if not args.no_liger:
        try:
            import liger_kernel.transformers.rms_norm  # noqa: F401

            peers.append("liger")
        except Exception:
            pass
    try:
        import quack  # noqa: F401

        if hasattr(quack, "rmsnorm"):
            peers.append("quack")
    except Exception:
        pass
    return peers


# --------------------------------------------------------------------------------------------
# Main loop
# --------------------------------------------------------------------------------------------


def copy_bandwidth(torch, timer):
    n = COPY_ELEMS
    src = torch.empty(n, device=DEVICE, dtype=torch.bfloat16).uniform_()
    dst = torch.empty_like(src)
    fn = lambda i: dst.copy_(src)
    gpu, cpu = timer.warmup(fn, 1, 10.0)
    samples = [timer.batch(fn, 1, 3, timer.plan(gpu, cpu)[1]) for _ in range(5)]
    ms = statistics.median(samples)
    src = dst = None  # free the 8 GiB before the row kernels
    torch.cuda.empty_cache()
    nbytes = 2 * n * 2
    return dict(op="copy", dtype="bfloat16", M=1, N=n, impl="copy", ms=ms, bytes=nbytes,
                tbps=nbytes / ms / 1e9)


def bench_shape(args, torch, F, timer, dtype, M, N, op, peers, env, emit):
    elt = torch.tensor([], dtype=dtype).element_size()
    set_bytes = M * N * elt * (1 if op == "fwd" else 2)
    n_sets = 3 if set_bytes < L2_ROTATE_BELOW else 1
    gen = torch.Generator(device=DEVICE).manual_seed(M * 7 + N)
    xs = [torch.randn(M, N, device=DEVICE, dtype=dtype, generator=gen) for _ in range(n_sets)]
    w = (1 + 0.1 * torch.randn(N, device=DEVICE, generator=gen)).float()
    dys = ([torch.randn(M, N, device=DEVICE, dtype=dtype, generator=gen) for _ in range(n_sets)]
           if op == "bwd" else None)
    ctx = dict(torch=torch, F=F, xs=xs, w=w, N=N, dys=dys)
    nbytes = (2 if op == "fwd" else 3) * M * N * elt
    dname = str(dtype).replace("torch.", "")
    rows = {}

    def prepare(name):
        try:
            if name == "compile":
                torch._dynamo.reset()
            fn = make_impl(name, op, ctx)
            gpu, cpu = timer.warmup(fn, n_sets, args.warmup_ms)
            n_calls, sleep = timer.plan(gpu, cpu)
            return fn, n_calls, sleep
        except Exception as e:  # peer refuses the size, not installed properly, OOM ...
            msg = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
            print(f"  {name:8s} {op} {dname} {M}x{N}: skipped ({msg})", flush=True)
            emit(dict(op=f"rmsnorm_{op}", dtype=dname, M=M, N=N, impl=name, ms=None, tbps=None,
                      error=msg, **env))
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            return None

    ours = prepare("ours")
    if ours is None:
        return rows
    ours_samples = []
    # Eager last, and alone once ours has samples beside another peer (see the docstring).
    for peer in sorted(peers, key=lambda name: name == "eager"):
        p = prepare(peer)
        alone = peer == "eager" and p is not None and len(ours_samples) > 0
        impls = {} if alone else {"ours": ours}
        if p is not None:
            impls[peer] = p
        samples = alternate(timer, impls, n_sets, args.rep_ms)
        ours_samples += samples.get("ours", [])
        if p is not None:
            ms = statistics.median(samples[peer])
            paired = {} if alone else dict(ours_ms_paired=statistics.median(samples["ours"]))
            rows[peer] = dict(ms=ms, tbps=nbytes / ms / 1e9, batches=len(samples[peer]),
                              calls_per_batch=p[1], **paired)
        del p, impls
        ctx.pop("keep", None)
        torch.cuda.empty_cache()
    ms = statistics.median(ours_samples)
    rows["ours"] = dict(ms=ms, tbps=nbytes / ms / 1e9, batches=len(ours_samples),
                        calls_per_batch=ours[1])
    for impl, r in rows.items():
        emit(dict(op=f"rmsnorm_{op}", dtype=dname, M=M, N=N, impl=impl, bytes=nbytes,
                  n_sets=n_sets, **r, **env))
    ours = xs = dys = None
    ctx.clear()
    torch.cuda.empty_cache()
    return rows


def main(argv=None):
    args = parse_args(argv)
    if args.replot:
        records = [json.loads(line) for line in open(args.replot) if line.strip()]
        report(records, args.plot)
        return 0
    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        print("bench_rmsnorm: needs a CUDA GPU")
        return 2
    try:
        import quack_cpp
    except ImportError as e:
        print(f"bench_rmsnorm: cannot import quack_cpp ({e}); pip install --no-build-isolation .")
        return 3
    for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                 "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 256)

    dtype_map = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16,
                 "float16": torch.float16, "fp32": torch.float32, "float32": torch.float32}
    table = SHAPES_QUICK if args.quick else SHAPES_FULL
    if args.dtypes:
        wanted = [str(dtype_map[d]).replace("torch.", "") for d in args.dtypes.split(",")]
        table = {d: table.get(d, SHAPES_FULL.get(d, SHAPES_FULL["bfloat16"])) for d in wanted}
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    peers = available_peers(args)
    env = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
               quack_cpp=quack_cpp.__version__)
    print(f"bench_rmsnorm: {env['gpu']}, torch {env['torch']}, quack_cpp {env['quack_cpp']}; "
          f"peers: {', '.join(peers)}", flush=True)

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    records = []
    t_start = time.perf_counter()
    with open(args.out, "w") as f:
        def emit(rec):
            records.append(rec)
            f.write(json.dumps(rec) + "\n")
            f.flush()

        timer = Timer(torch, args.batch_ms)
        emit(dict(copy_bandwidth(torch, timer), **env))
        print(f"  copy 4 GiB d2d: {records[-1]['tbps']:.3f} TB/s", flush=True)
        for dname, shapes in table.items():
            dtype = dtype_map[dname]
            for M, N in shapes:
                for op in ops:
                    t0 = time.perf_counter()
                    rows = bench_shape(args, torch, F, timer, dtype, M, N, op, peers, env, emit)
                    line = "  ".join(f"{k} {v['tbps']:.2f}" for k, v in rows.items())
                    print(f"  {op} {dname:8s} {M:6d} x {N:6d}: {line}   "
                          f"({time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"bench_rmsnorm: {time.perf_counter() - t_start:.0f} s; wrote {args.out}")
    report(records, args.plot)
    return 0


# --------------------------------------------------------------------------------------------
# Table and plot
# --------------------------------------------------------------------------------------------


def summarize(records):
    copy = [r["tbps"] for r in records if r.get("op") == "copy" and r.get("tbps")]
    copy_tbps = statistics.median(copy) if copy else None
    keys, data = [], {}
    for r in records:
        if r.get("op") == "copy":
            continue
        k = (r["op"], r["dtype"], r["M"], r["N"])
        if k not in data:
            keys.append(k)
            data[k] = {}
        if r.get("tbps"):
            data[k][r["impl"]] = r["tbps"]
    return copy_tbps, keys, data


def report(records, plot_path):
    copy_tbps, keys, data = summarize(records)
    peers = [p for p in PEERS if any(p in d for d in data.values())]
    head = ["op", "dtype", "M", "N", "ours"] + peers + ["ours/best", "ours/copy"]
    lines = []
    for k in keys:
        d = data[k]
        best = max((d[p] for p in peers if p in d), default=None)
        ours = d.get("ours")
        cells = [k[0], k[1], str(k[2]), str(k[3]), f"{ours:.2f}" if ours else "-"]
        cells += [f"{d[p]:.2f}" if p in d else "-" for p in peers]
        cells.append(f"{ours / best:.2f}" if ours and best else "-")
        cells.append(f"{ours / copy_tbps:.2f}" if ours and copy_tbps else "-")
        lines.append(cells)
    widths = [max(len(h), *(len(c[i]) for c in lines)) if lines else len(h)
              for i, h in enumerate(head)]
    fmt = lambda cells: " | ".join(c.rjust(wd) for c, wd in zip(cells, widths))
    print()
    print(f"RMSNorm bandwidth, TB/s (copy 4 GiB d2d: "
          f"{copy_tbps:.3f} TB/s)" if copy_tbps else "RMSNorm bandwidth, TB/s")
    print(fmt(head))
    print("-+-".join("-" * wd for wd in widths))
    for cells in lines:
        print(fmt(cells))
    if plot_path:
        try:
            plot(keys, data, copy_tbps, peers, plot_path, records)
            print(f"wrote {plot_path}")
        except Exception as e:  # no matplotlib: the table is still there
            print(f"plot skipped ({type(e).__name__}: {e})")


def _short(n):
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def plot(keys, data, copy_tbps, peers, path, records):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    for k in keys:
        if (k[0], k[1]) not in panels:
            panels.append((k[0], k[1]))
    ncol = 2
    nrow = math.ceil(len(panels) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(6.2 * ncol, 4.2 * nrow), squeeze=False)
    style = {"ours": ("tab:red", "o", 2.4), "eager": ("tab:gray", "v", 1.4),
             "compile": ("tab:blue", "s", 1.6), "liger": ("tab:green", "^", 1.6),
             "quack": ("tab:purple", "D", 1.6)}
    for ax, (op, dt) in zip(axes.flat, panels):
        ks = sorted((k for k in keys if k[0] == op and k[1] == dt), key=lambda k: (k[3], k[2]))
        xs = list(range(len(ks)))
        for impl in ["ours"] + peers:
            pts = [(i, data[k][impl]) for i, k in zip(xs, ks) if impl in data[k]]
            if not pts:
                continue
            c, m, lw = style.get(impl, ("black", "x", 1.2))
            label = "quack_cpp (ours)" if impl == "ours" else impl
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=m, color=c, lw=lw,
                    label=label)
        if copy_tbps:
            ax.axhline(copy_tbps, color="black", ls="--", lw=1, label=f"copy {copy_tbps:.2f}")
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{_short(k[2])} x {_short(k[3])}" for k in ks], rotation=30,
                           fontsize=8)
        ax.set_ylim(0, max(5.0, (copy_tbps or 0) * 1.1))
        ax.set_title(f"{op} {dt}")
        ax.set_xlabel("M x N")
        ax.set_ylabel("effective TB/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    gpu = next((r.get("gpu") for r in records if r.get("gpu")), "")
    fig.suptitle(f"RMSNorm memory bandwidth, {gpu} (QuACK byte model: fwd 2MN, bwd 3MN elt)")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
