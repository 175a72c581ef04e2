"""GEMM by DESIGN §8's methods and rested batches: quack_cpp beside cuBLAS and QuACK 0.2.0.

    python3 bench/bench_gemm.py                        # issue 16's whole set, both methods
    python3 bench/bench_gemm.py --quick                # the five LLM shapes, both methods
    python3 bench/bench_gemm.py --quick --methods rested  # the five, batches after rests
    python3 bench/bench_gemm.py --demo --methods burst  # the demo's thirteen GEMMs (fprop, dgrad, wgrad)
    python3 bench/bench_gemm.py --shapes 8192x8192x8192 --layouts rr,cc --methods burst
    python3 bench/bench_gemm.py --quick --tiles auto,128x128pp,128x192pp,128x192pp@h8s   # A/B

Workload: bf16 A (M, K) and B (K, N), each row-major ("r") or column-major ("c": the transposed
view of a contiguous tensor, as W.t() gives), D = A @ B in bf16 with fp32 accumulation.
  ours    quack_cpp.gemm(A, B)                              (default tile rule, tuned=False)
  cublas  torch.matmul(A, B)
  quack   quack.gemm_interface.gemm(A, B, tuned=False)      (its default: pingpong 128x192, 2x1)
With --tiles, "ours" becomes one implementation per tile configuration, "ours:<spec>": spec is
"auto" (the default rule) or a kernel name's tile part (QUACK_GEMM_TILE, e.g. 128x192pp,
256x128c1x2; a tile not compiled for the problem's dtypes and layout runs the default instead),
optionally "@<raster>" (QUACK_GEMM_RASTER, e.g. @h8s: QuACK's raster heuristic, bands of 8,
serpentine), then optionally "+dyn" (the dynamic tile scheduler: gemm(dynamic_scheduler=True))
or "+nosk" (stream-K off: QUACK_GEMM_STREAMK=0), e.g. auto+dyn, auto@h8s+dyn, auto+nosk. The
environment is set before every call.

Methods (the order of the implementations rotates between rounds: A B C, B C A, C A B):
  burst      triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") (it clears L2
             before every call), --burst-rounds rounds, median of the rounds' medians. The
             acceptance method: the clocks are high after do_bench's short idle gaps.
             --burst-rest-ms (default 0) idles that long before each implementation's do_bench
             (each from the same idle state; the records carry burst_rest_ms), and each
             implementation's reading round by round (burst_rounds_ms_<impl>) with the rounds'
             orders (burst_orders).
  sustained  the GPU at its power limit, as in training: batches of >= --batch-ms of back-to-back
             calls, each behind a torch.cuda._sleep just long enough for the host to stay ahead
             of the GPU through the batch (0.5 ms + 1.3 x one call's enqueue where the host is
             faster than the GPU: GPU busy >= 98 %, each implementation alike), no L2 clear, --rounds rounds, the first
             --drop dropped, median per call. The SM clock seen (nvidia-smi, sampled every 50 ms
             during the rounds) is printed beside the figures, overall and by implementation
             (the samples that arrived while its batches ran: sm_mhz_<impl> in the records):
             an implementation that draws less power holds a higher clock at the limit. Where
             the driver reports them, the board power by implementation (watts_<impl>), the
             energy per call (mj_<impl> = W x ms) and the share of samples with a hardware
             slowdown active (hw_slowdown_<impl>: the power brake slows the SM below the clock
             nvidia-smi reports) come with it. The records carry rest_ms_<impl> (the sleep) and
             enqueue_ms_<impl> (host ms a call); --equal-rest gives every implementation the
             longest of the sleeps (0.5 ms + 1.3 x one call's enqueue where the host is
             faster than the GPU: they differ by 1.3 x the enqueues' difference).
  rested     (not a bar method) the clocks kept high by rests (perf/h200-anchors.md's "rested"):
             sustained's code with batches of >= --rested-batch-ms (19 ms) of back-to-back calls,
             each behind a --rested-sleep-ms (25 ms) sleep (the GPU idles ~55 % of the time), no
             L2 clear, --rested-rounds (10) rounds, none dropped, median per call. SM clock as
             for sustained, overall from the samples that arrived while a batch ran (sustained's
             overall figure keeps every sample of its rounds).
TFLOP/s = 2·M·N·K / time.

Output: JSON lines (--out), and a table last: TFLOP/s per implementation and method, ours /
max(cuBLAS, QuACK), ours / cuBLAS, geometric means, the SM clock; with --tiles, one more table:
every ours:<spec> / max(cuBLAS, QuACK) per shape and method, and their geometric means.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from types import MappingProxyType
from typing import Mapping, NamedTuple, Optional

LLM = [(8192, 8192, 8192), (16384, 14336, 4096), (16384, 4096, 14336), (16384, 28672, 4096),
       (8192, 128256, 4096)]
OTHERS = [(4096, 4096, 4096), (2048, 2048, 2048), (128, 8192, 8192), (8192, 8192, 128)]
OTHER_LAYOUTS = ("rc", "cr", "cc")  # at 8192³
# The demo's GEMMs per step (demo/lm.py: 16384 tokens, d 2048, qkv 6144, SwiGLU 5632 (fc1 11264
# wide), vocabulary 32768) as torch issues them: fprop x @ W.t() (rc), dgrad dy @ W (rr),
# wgrad dy.t() @ x (cr; kernel majors mm). Plain GEMMs at those shapes: in the demo fc1's
# forward runs gemm_gated, the gradient into fc1's output gemm_dgated, and the head's three
# (logits, dgrad, wgrad) run chunked inside linear + cross-entropy.
DEMO = [((16384, 6144, 2048), "rc"), ((16384, 2048, 2048), "rc"), ((16384, 11264, 2048), "rc"),
        ((16384, 2048, 5632), "rc"), ((16384, 32768, 2048), "rc"),
        ((16384, 2048, 6144), "rr"), ((16384, 2048, 2048), "rr"), ((16384, 2048, 11264), "rr"),
        ((16384, 2048, 32768), "rr"),
        ((6144, 2048, 16384), "cr"), ((2048, 2048, 16384), "cr"), ((11264, 2048, 16384), "cr"),
        ((2048, 5632, 16384), "cr")]
IMPLS = ("ours", "cublas", "quack")
METHODS = ("burst", "sustained", "rested")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="the five LLM shapes, A and B row-major")
    p.add_argument("--demo", action="store_true",
                   help="the demo's thirteen GEMMs, each in its layout (fprop rc, dgrad rr, wgrad cr)")
    p.add_argument("--shapes", help="comma list of MxNxK")
    p.add_argument("--layouts", default=None, help="comma list of rr, rc, cr, cc (A then B)")
    p.add_argument("--methods", default="burst,sustained", help="comma list of " + ", ".join(METHODS))
    p.add_argument("--impls", default=",".join(IMPLS))
    p.add_argument("--tiles", default=None,
                   help="comma list of tile configurations for ours (auto, 128x192pp, 128x192pp@h8s, ...)")
    p.add_argument("--burst-rounds", type=int, default=3)
    p.add_argument("--burst-rest-ms", type=float, default=0.0,
                   help="burst: idle this long before each implementation's do_bench (default 0)")
    p.add_argument("--rounds", type=int, default=12, help="sustained rounds")
    p.add_argument("--drop", type=int, default=2, help="sustained rounds dropped first")
    p.add_argument("--batch-ms", type=float, default=60.0, help="sustained batch length")
    p.add_argument("--equal-rest", action="store_true",
                   help="sustained / rested: every implementation sleeps as long before each batch "
                        "as the slowest to enqueue needs (default: each its own)")
    p.add_argument("--rested-batch-ms", type=float, default=19.0)
    p.add_argument("--rested-sleep-ms", type=float, default=25.0, help="rested: the rest before each batch")
    p.add_argument("--rested-rounds", type=int, default=10)
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "results"), "bench_gemm.jsonl"))
    args = p.parse_args(argv)
    bad = [m for m in args.methods.split(",") if m not in METHODS]
    if bad:
        p.error(f"--methods: unknown {','.join(bad)} (from {','.join(METHODS)})")
    return args


def cases(args):
    if args.demo:
        return list(DEMO)
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
        return [(s, l) for s in shapes for l in (args.layouts or "rr").split(",")]
    out = [(s, "rr") for s in LLM]
    if not args.quick:
        out += [(s, "rr") for s in OTHERS] + [((8192, 8192, 8192), l) for l in OTHER_LAYOUTS]
    return out


def operand(torch, rows, cols, layout, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if layout == "r":
        return torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16, generator=g)
    return torch.randn(cols, rows, device="cuda", dtype=torch.bfloat16, generator=g).t()


def ours_forced(quack_cpp, a, b, spec):
    """quack_cpp.gemm(a, b) with the tile (and raster) of spec forced through the environment,
    on the dynamic scheduler where spec ends in "+dyn", with stream-K off where it ends in "+nosk"."""
    spec, plus, suffix = spec.partition("+")
    if plus and suffix not in ("dyn", "nosk"):
        raise SystemExit(f"bench_gemm: tile spec suffix '+{suffix}', expected '+dyn' or '+nosk'")
    tile, _, raster = spec.partition("@")

    def f():
        os.environ["QUACK_GEMM_TILE"] = tile
        if raster:
            os.environ["QUACK_GEMM_RASTER"] = raster
        else:
            os.environ.pop("QUACK_GEMM_RASTER", None)
        if suffix == "nosk":
            os.environ["QUACK_GEMM_STREAMK"] = "0"
        else:
            os.environ.pop("QUACK_GEMM_STREAMK", None)
        return quack_cpp.gemm(a, b, dynamic_scheduler=suffix == "dyn")

    return f


def impl_names(args):
    impls = args.impls.split(",")
    if not args.tiles or "ours" not in impls:
        return impls
    i = impls.index("ours")
    return impls[:i] + [f"ours:{t}" for t in args.tiles.split(",")] + impls[i + 1:]


def make_calls(torch, impls, a, b):
    calls = {}
    for impl in impls:
        try:
            if impl.startswith("ours:"):
                import quack_cpp

                f = ours_forced(quack_cpp, a, b, impl[len("ours:"):])
            elif impl == "ours":
                import quack_cpp

                f = lambda: quack_cpp.gemm(a, b)
            elif impl == "cublas":
                f = lambda: torch.matmul(a, b)
            elif impl == "quack":
                from quack.gemm_interface import gemm as quack_gemm

                f = lambda: quack_gemm(a, b, tuned=False)
            else:
                raise ValueError(impl)
            f()  # compile / JIT / first-call work
            torch.cuda.synchronize()
            calls[impl] = f
        except Exception as e:
            print(f"  {impl}: skipped ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})")
    return calls


def rotated(names, r):
    k = r % len(names)
    return names[k:] + names[:k]


def burst_rounds(torch, calls, args):
    """(ms by implementation: the median of its rounds' do_bench medians, {implementation: its
    ms in each round}, [each round's order]): the rounds and orders go into the JSON records
    (burst_rounds_ms_<impl>, burst_orders), so a reading's spread and its place in the rotation
    can be read back."""
    from triton.testing import do_bench

    names = list(calls)
    samples = {n: [] for n in names}
    orders = []
    rest = getattr(args, "burst_rest_ms", 0.0) / 1000
    for r in range(args.burst_rounds):
        orders.append(rotated(names, r))
        for n in orders[-1]:
            if rest > 0:  # each implementation from the same idle state (clocks, power)
                torch.cuda.synchronize()
                time.sleep(rest)
            samples[n].append(do_bench(calls[n], warmup=25, rep=100, return_mode="median"))
    return {n: statistics.median(s) for n, s in samples.items()}, samples, orders


def burst(torch, calls, args):
    """ms by implementation, the burst method (burst_rounds' first part)."""
    return burst_rounds(torch, calls, args)[0]


# nvidia-smi's fields, richest first: the SM clock, the board power and the active clock event
# reasons (a bit mask); a driver that refuses a field gets the next, shorter query. power.draw is
# a one-second average on recent boards (nvidia-smi --help-query-gpu), longer than a sustained
# batch: power.draw.instant first.
SMI_QUERIES = ("clocks.sm,power.draw.instant,clocks_event_reasons.active",
               "clocks.sm,power.draw.instant,clocks_throttle_reasons.active",
               "clocks.sm,power.draw,clocks_throttle_reasons.active", "clocks.sm,power.draw", "clocks.sm")
_smi_query = None  # the query this driver answered (chosen once per process)


def smi_query(gpu):
    """The first of SMI_QUERIES that nvidia-smi answers with a clock for GPU `gpu` (cached), or
    None where nvidia-smi is missing or answers none."""
    global _smi_query
    if _smi_query is None:
        for query in SMI_QUERIES:
            try:
                probe = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits",
                                        "-i", gpu], capture_output=True, text=True, timeout=10)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                return None
            if probe.returncode == 0 and parse_smi_line(probe.stdout.strip() or "x") is not None:
                _smi_query = query
                print(f"bench_gemm: nvidia-smi --query-gpu={query}", flush=True)
                break
    return _smi_query
# The reasons that slow the SM below the clock nvidia-smi reports (NVML's nvmlClocksEventReason*):
# HW slowdown 0x8, HW thermal slowdown 0x40, HW power brake slowdown 0x80. SW power cap (0x4)
# lowers the reported clock itself.
HW_SLOWDOWN = 0x8 | 0x40 | 0x80


def parse_smi_line(line):
    """One nvidia-smi CSV line of SMI_QUERIES' fields -> (MHz, W or None, reasons mask or None),
    or None when the clock is not a number."""
    f = [x.strip() for x in line.split(",")]
    if not f or not f[0].isdigit():
        return None
    def num(i, conv):
        try:
            return conv(f[i]) if i < len(f) else None
        except ValueError:  # "[N/A]", "[Not Supported]"
            return None
    return int(f[0]), num(1, float), num(2, lambda x: int(x, 16))


class ClockSampler:
    """nvidia-smi's SM clock every 50 ms while active, each sample with the host time it
    arrived (None where nvidia-smi is missing); with it, where the driver reports them, the board
    power (W) and the clock event reasons (hardware slowdowns the clock figure does not show)."""

    def __init__(self):
        self.proc = None
        self.thread = None
        self.samples = []  # (time.perf_counter() at arrival, MHz)
        self.power = []  # (time at arrival, W)
        self.reasons = []  # (time at arrival, reasons mask)

    def __enter__(self):
        gpu = str(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0)
        query = smi_query(gpu)
        if query is None:
            return self
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-lms", "50", "-i", gpu],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except (OSError, ValueError):
            self.proc = None
            return self
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        return self

    def _read(self):
        for line in self.proc.stdout:
            got = parse_smi_line(line)
            if got is None:
                continue
            t, (mhz, watts, mask) = time.perf_counter(), got
            self.samples.append((t, mhz))
            if watts is not None:
                self.power.append((t, watts))
            if mask is not None:
                self.reasons.append((t, 1.0 if mask & HW_SLOWDOWN else 0.0))

    def __exit__(self, *exc):
        if self.proc is None:
            return
        self.proc.terminate()
        self.proc.wait(timeout=5)
        self.thread.join(timeout=5)

    def median(self):
        return statistics.median(v for _, v in self.samples) if self.samples else None


def clock_by_window(samples, windows, stat=statistics.median):
    """The median (or `stat`) of the samples that arrived inside each name's host-time windows
    ({name: [(t0, t1), ...]} -> {name: value or None}): which implementation the GPU ran while a
    sample was taken (a batch runs from the end of its sleep to its event's synchronize)."""
    out = {}
    for name, spans in windows.items():
        vals = [v for t, v in samples if any(t0 <= t <= t1 for t0, t1 in spans)]
        out[name] = stat(vals) if vals else None
    return out


class Measured(NamedTuple):
    """One method's figures: ms per call by implementation; for the batched methods the SM clock
    overall and by implementation (MHz), and by implementation the median board power (W) and the
    share of samples with a hardware slowdown active (HW_SLOWDOWN), the sleep before each batch
    (rest, ms) and the host's ms to enqueue one call (enqueue); empty for burst."""
    ms: dict
    clk: Optional[float] = None
    clocks: Mapping = MappingProxyType({})  # read-only defaults: shared by every instance
    watts: Mapping = MappingProxyType({})
    slowdown: Mapping = MappingProxyType({})
    rest: Mapping = MappingProxyType({})
    enqueue: Mapping = MappingProxyType({})
    rounds: Mapping = MappingProxyType({})  # burst: ms by implementation, round by round
    orders: tuple = ()  # burst: each round's order of the implementations


class BatchSpec(NamedTuple):
    """One batched method (sustained, rested): back-to-back calls in batches, each behind a
    torch.cuda._sleep, the order of the implementations rotated between rounds."""
    batch_ms: float  # each batch: back-to-back calls for at least this long (GPU time)
    # The sleep before each batch: None = just long enough for the host to stay ahead of the GPU
    # through the batch (host_lead_ms); else this many ms (a rest), or that where it is longer.
    sleep_ms: Optional[float]
    rounds: int
    drop: int  # the first rounds dropped
    l2_clear: bool  # clear L2 (a 256 MiB write, untimed) between the sleep and the batch
    equal_rest: bool = False  # every implementation sleeps the longest of the sleeps


L2_CLEAR_BYTES = 256 << 20  # do_bench's cache clear


def batch_spec(method, args):
    if method == "sustained":
        return BatchSpec(args.batch_ms, None, args.rounds, args.drop, False,
                         getattr(args, "equal_rest", False))
    if method == "rested":
        return BatchSpec(args.rested_batch_ms, args.rested_sleep_ms, args.rested_rounds, 0, False,
                         getattr(args, "equal_rest", False))
    raise ValueError(method)


def host_lead_ms(n_calls, enqueue_ms, call_ms):
    """How long the GPU must wait before a batch of n_calls back-to-back calls so that it never
    waits for the host inside it: max over i of (i + 1)·enqueue − i·call, i.e. one call's enqueue
    where the host is faster than the GPU, else the whole deficit."""
    return enqueue_ms + max(0, n_calls - 1) * max(0.0, enqueue_ms - call_ms)


def batched(torch, calls, spec):
    """Measured: median ms per call over the kept batches, the SM clock overall and by
    implementation, each implementation's board power and hardware-slowdown share (from the
    samples taken while its kept batches ran), its sleep before each batch and its host's ms to
    enqueue one call."""
    names = list(calls)
    per_call, enqueue = {}, {}
    for n, f in calls.items():  # host ms to enqueue one call
        t0 = time.perf_counter()
        for _ in range(10):
            f()
        enqueue[n] = (time.perf_counter() - t0) * 1e3 / 10
        torch.cuda.synchronize()
    torch.cuda._sleep(2_000_000)  # ~1 ms: the events and the timed sleep queue up behind it
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    torch.cuda._sleep(1_000_000)
    e.record()
    e.synchronize()
    cycles_per_ms = 1_000_000 / max(s.elapsed_time(e), 1e-3)
    for n, f in calls.items():  # GPU ms per call: three calls enqueued behind a sleep, no host gaps
        torch.cuda._sleep(int(cycles_per_ms * (0.5 + host_lead_ms(3, 1.3 * enqueue[n], 0.0))))
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(3):
            f()
        e.record()
        torch.cuda.synchronize()
        per_call[n] = max(s.elapsed_time(e) / 3, 1e-3)
    n_calls = {n: max(2, math.ceil(spec.batch_ms / per_call[n])) for n in names}
    # The sleep lets the host stay ahead of the GPU through the batch (and is the rest, if
    # any): call i is enqueued (i + 1)·enqueue ms after the sleep's on the host and starts
    # sleep + i·per_call ms after it on the GPU; the margin: 0.5 ms and a host 30 % slower a call.
    rest_ms = {n: max(0.5 + host_lead_ms(n_calls[n], 1.3 * enqueue[n], per_call[n]), spec.sleep_ms or 0.0)
               for n in names}
    if spec.equal_rest:
        rest_ms = dict.fromkeys(names, max(rest_ms.values()))
    sleep = {n: int(cycles_per_ms * v) for n, v in rest_ms.items()}
    cache = torch.empty(L2_CLEAR_BYTES, dtype=torch.int8, device="cuda") if spec.l2_clear else None
    samples = {n: [] for n in names}
    windows = {n: [] for n in names}
    with ClockSampler() as clock:
        for r in range(spec.rounds):
            for n in rotated(names, r):
                t_sleep = time.perf_counter()  # the GPU is idle: the sleep starts now
                torch.cuda._sleep(sleep[n])
                if cache is not None:
                    cache.zero_()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                for _ in range(n_calls[n]):
                    calls[n]()
                e.record()
                e.synchronize()
                if r >= spec.drop:  # the batch ran from the sleep's end to now (host time)
                    samples[n].append(s.elapsed_time(e) / n_calls[n])
                    windows[n].append((t_sleep + rest_ms[n] / 1e3, time.perf_counter()))
    clocks = clock_by_window(clock.samples, windows)
    if spec.sleep_ms is None:  # the GPU busy but for ~1 ms a batch: every sample of the rounds
        clk = clock.median()
    else:  # the GPU rests between batches: the samples taken while a kept batch ran
        clk = clock_by_window(clock.samples, {"": [w for ws in windows.values() for w in ws]})[""]
    watts = clock_by_window(getattr(clock, "power", []), windows)
    slowdown = clock_by_window(getattr(clock, "reasons", []), windows, stat=statistics.fmean)
    return Measured({n: statistics.median(v) for n, v in samples.items()}, clk, clocks, watts, slowdown,
                    rest_ms, enqueue)


def sustained(torch, calls, args):
    return batched(torch, calls, batch_spec("sustained", args))


def measure(torch, calls, method, args):
    """Measured for one method (burst: the ms alone)."""
    if method == "burst":
        ms, rounds, orders = burst_rounds(torch, calls, args)
        return Measured(ms, rounds=rounds, orders=tuple(orders))
    return batched(torch, calls, batch_spec(method, args))


def batched_fields(got):
    """A Measured's fields by implementation (empty for burst): the SM clock (sm_mhz_), board
    power (watts_), energy per call (mj_: W x ms), the share of samples under a hardware slowdown
    (hw_slowdown_), the sleep before each batch (rest_ms_) and the host's ms to enqueue one call
    (enqueue_ms_). bench_gemm_fused.py's records carry them too."""
    return {**{f"sm_mhz_{n}": v for n, v in got.clocks.items()},
            **{f"watts_{n}": v for n, v in got.watts.items()},
            **{f"mj_{n}": v * got.ms[n] for n, v in got.watts.items() if v is not None and n in got.ms},
            **{f"hw_slowdown_{n}": v for n, v in got.slowdown.items()},
            **{f"rest_ms_{n}": v for n, v in got.rest.items()},
            **{f"enqueue_ms_{n}": v for n, v in got.enqueue.items()}}


def record(M, N, K, layout, method, got, diffs):
    """One JSON line: the same fields for every method; a batched method adds batched_fields."""
    flop = 2.0 * M * N * K
    return dict(op="gemm", M=M, N=N, K=K, layout=layout, method=method, sm_mhz=got.clk,
                rel_diff_vs_cublas=diffs.get("ours", next(iter(diffs.values()), None)), rel_diff=diffs,
                **{f"ms_{n}": v for n, v in got.ms.items()},
                **{f"tflops_{n}": flop / v / 1e9 for n, v in got.ms.items()},
                **batched_fields(got),
                **{f"burst_rounds_ms_{n}": v for n, v in got.rounds.items()},
                **({"burst_orders": [list(o) for o in got.orders]} if got.orders else {}))


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("bench_gemm: needs torch")
        return 2
    if not torch.cuda.is_available():
        print("bench_gemm: needs a CUDA GPU")
        return 2
    methods = args.methods.split(",")
    impls = impl_names(args)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    rows = []
    with open(args.out, "w") as fout:
        for (M, N, K), layout in cases(args):
            a = operand(torch, M, K, layout[0], 1)
            b = operand(torch, K, N, layout[1], 2)
            calls = make_calls(torch, impls, a, b)
            diffs = {}
            if "cublas" in calls:
                ref = torch.matmul(a, b).float()
                scale = max(ref.abs().max().item(), 1e-30)
                for n in calls:
                    if n == "ours" or n.startswith("ours:"):
                        diffs[n] = (calls[n]().float() - ref).abs().max().item() / scale
                del ref
            flop = 2.0 * M * N * K
            for m in methods:
                got = measure(torch, calls, m, args)
                ms, clk, clks = got.ms, got.clk, got.clocks
                rec = record(M, N, K, layout, m, got, diffs)
                if m == "burst":
                    rec["burst_rest_ms"] = args.burst_rest_ms
                rows.append(rec)
                fout.write(json.dumps(rec) + "\n")
                fout.flush()
                print(f"{M}x{N}x{K} {layout} {m}: " + "  ".join(
                    f"{n} {flop / v / 1e9:.1f}" for n, v in ms.items()) +
                    (f"  SM {clk:.0f} MHz" if clk else "") +
                    ("  (SM MHz by impl: " + ", ".join(f"{n} {v:.0f}" for n, v in clks.items()
                                                       if v) + ")" if any(clks.values()) else "") +
                    ("  (W, mJ a call by impl: " + ", ".join(f"{n} {v:.0f} W {v * ms[n]:.0f} mJ"
                                                            for n, v in got.watts.items() if v) + ")"
                     if any(got.watts.values()) else "") +
                    ("  (rest ms before a batch by impl: " + ", ".join(f"{n} {v:.1f}" for n, v in got.rest.items()) + ")"
                     if got.rest else ""),
                    flush=True)
            del a, b, calls
            torch.cuda.empty_cache()
    for var in ("QUACK_GEMM_TILE", "QUACK_GEMM_RASTER", "QUACK_GEMM_STREAMK"):
        os.environ.pop(var, None)
    report(rows)
    if args.tiles:
        report_tiles(rows, [n for n in impls if n.startswith("ours:")])
    return 0


def report(rows):
    print("\n| M x N x K | layout | method | ours | cuBLAS | QuACK | ours/max | ours/cuBLAS | SM MHz |")
    print("|---|---|---|---|---|---|---|---|---|")
    geo = {}
    for r in rows:
        o, c, q = (r.get(f"tflops_{n}") for n in IMPLS)
        best = max(v for v in (c, q) if v) if (c or q) else None
        vs_max = o / best if o and best else None
        vs_c = o / c if o and c else None
        f = lambda v: f"{v:.1f}" if v else "-"
        g = lambda v: f"{v:.3f}" if v else "-"
        print(f"| {r['M']}x{r['N']}x{r['K']} | {r['layout']} | {r['method']} | {f(o)} | {f(c)} | {f(q)} "
              f"| {g(vs_max)} | {g(vs_c)} | {r['sm_mhz'] or '-'} |")
        llm = (r["M"], r["N"], r["K"]) in LLM and r["layout"] == "rr"
        for key, v in (("max_llm", vs_max if llm else None), ("cublas_all", vs_c)):
            if v:
                geo.setdefault((r["method"], key), []).append(v)
    for (m, key), vs in sorted(geo.items()):
        print(f"geomean {m} ours/{'max(cuBLAS, QuACK) over the LLM shapes' if key == 'max_llm' else 'cuBLAS over all'}"
              f": {math.exp(sum(map(math.log, vs)) / len(vs)):.3f} ({len(vs)} shapes)")


def report_tiles(rows, variants):
    """Each ours:<spec> against max(cuBLAS, QuACK) per shape and method, geometric means last
    (the A/B table of scripts/gemm_ab.sh)."""
    print("\n| M x N x K | method | max(cuBLAS, QuACK) | " + " | ".join(variants) + " | SM MHz |")
    print("|---|---|---|" + "---|" * len(variants) + "---|")
    geo = {}
    for r in rows:
        peers = [r.get(f"tflops_{n}") for n in ("cublas", "quack")]
        best = max((v for v in peers if v), default=None)
        cells = []
        for v in variants:
            t = r.get(f"tflops_{v}")
            bad = (r.get("rel_diff") or {}).get(v)
            mark = " (!)" if bad is not None and bad > 2e-2 else ""
            if t and best:
                geo.setdefault((r["method"], v), []).append(t / best)
                cells.append(f"{t:.1f} ({t / best:.3f}){mark}")
            else:
                cells.append((f"{t:.1f}" if t else "-") + mark)
        print(f"| {r['M']}x{r['N']}x{r['K']} {r['layout']} | {r['method']} | "
              f"{best:.1f} | " if best else f"| {r['M']}x{r['N']}x{r['K']} {r['layout']} | {r['method']} | - | ",
              end="")
        print(" | ".join(cells) + f" | {r['sm_mhz'] or '-'} |")
    for m in sorted({k[0] for k in geo}):
        print(f"geomean {m}, ours:<spec> / max(cuBLAS, QuACK): " + ", ".join(
            f"{v} {math.exp(sum(map(math.log, geo[(m, v)])) / len(geo[(m, v)])):.3f}"
            for v in variants if (m, v) in geo))
    print("(!) = max |ours - cuBLAS| / max |cuBLAS| > 2e-2 on this shape: a wrong result")


if __name__ == "__main__":
    sys.exit(main())
