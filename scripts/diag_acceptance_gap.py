"""Where a row op's acceptance-method time goes beyond its kernel (diagnosis, not a bar).

    python3 scripts/diag_acceptance_gap.py --op softmax --shapes 16384x65536,8192x262144

For ours and QuACK 0.2.0 (where it runs the op) at each bf16 shape, timings of the same
public call, ms per call:
  accept   triton.testing.do_bench (L2 cleared before each call): the acceptance method;
  l2, b2b  events around each call after an L2 clear / back to back, L2 not cleared (host time
           overlapped): bench_linear_ce.py's time_three_ways;
  graph    the call captured in a CUDA graph, 20 per replay, L2 cleared once (no host time);
  kernel   torch.profiler over 10 (L2 clear, call) pairs: the GPU time of the call's kernels,
           and `gap`, the median idle time between the clear's end and the call's first kernel
           (host time that the clear did not cover), with the kernels the call launched.
accept ≈ kernel + gap; kernel against b2b says whether the cleared L2 (dirty lines of the clear
written back during the call) costs the kernel itself. Each line ends with the median SM clock
(nvidia-smi, MHz) over its measurements. --pattern also times x made of one 1 M-element random
block repeated (quack-bench's inputs): whether the data itself (DRAM and SM power, so the clock)
moves the kernel's time. --placement (softmax) also times ours through `_C.softmax_fwd` into
one output allocated once (quack-bench's buffers: no allocation per call), and with x and that
output as views 1 MiB + 4 KiB into larger buffers (other physical pages and alignment): whether
the buffers' placement moves it. --spin also times each call quack-bench's way (behind a
~100 µs spin kernel, torch.cuda._sleep, events around the call alone; `spin`) and so after an
L2 clear (`spin+l2`): whether quack-bench's method, not its process, reads our kernels faster.
--spin2 times two calls behind one spin, each alone (`spin2 first / second`): whether a kernel
is slower after the spin than after itself. --launch prints each kernel's grid, block, cluster,
shared memory and registers from the profiler's trace (against quack-bench's plan).
"""

import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from bench_linear_ce import time_three_ways  # noqa: E402
from bench_gemm import ClockSampler  # noqa: E402


def calls(op, impl, x, w, b):
    if impl == "ours":
        import quack_cpp
        if op == "softmax":
            return lambda: quack_cpp.softmax(x)
        if op == "log_softmax":
            return lambda: quack_cpp.log_softmax(x)
        return lambda: quack_cpp.layernorm(x, w, b)
    try:
        import quack
    except ImportError:
        return None
    if op == "softmax":
        return lambda: quack.softmax(x)
    if op == "layernorm":
        from quack.layernorm import layernorm
        w32 = w.float()
        return lambda: layernorm(x, w32, eps=1e-6)
    return None


def placed_calls(x):
    """Ours on softmax through _C with preallocated outputs: {name: fn} (see --placement)."""
    from quack_cpp import _C
    from quack_cpp._registrar import stream, tensor_arg
    out = torch.empty_like(x)
    shift = (1 << 20) + 4096  # bytes: past a 2 MiB page's start, off 64 KiB alignment
    e = x.element_size()
    big_x = torch.empty(x.numel() + shift // e, dtype=x.dtype, device=x.device)
    big_o = torch.empty_like(big_x)
    x_off = big_x[shift // e:].view_as(x)
    x_off.copy_(x)
    o_off = big_o[shift // e:].view_as(x)

    ref = torch.softmax(x.float(), dim=-1).to(x.dtype)

    def run(xi, oi, keep):
        # _C takes raw pointers: the closure holds every tensor they point into (keep).
        a, b = tensor_arg(xi, "softmax_fwd", "x"), tensor_arg(oi, "softmax_fwd", "out")
        fn = lambda: (keep, _C.softmax_fwd(a, b, stream(xi)))
        oi.fill_(float("nan"))
        fn()
        torch.testing.assert_close(oi, ref, atol=1e-2, rtol=1e-2)
        return fn
    return {"ours-out": run(x, out, (x, out)),
            "ours-offset": run(x_off, o_off, (big_x, big_o, x_off, o_off))}


def spin_ms(fn, cache, n=30, clear=False):
    """quack-bench's timing in this process: each call enqueued behind a ~100 µs spin kernel
    (its launch hidden), events around the call alone; median ms. clear: an L2 clear first."""
    fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(n)]
    for a, e in ev:
        if clear:
            cache.zero_()
        torch.cuda._sleep(200_000)  # cycles: ~100 µs at 1.98 GHz
        a.record()
        fn()
        e.record()
        torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(e) for a, e in ev)


def spin2_ms(fn, n=30):
    """Two calls behind one spin kernel, each timed alone: (first, second) median ms. A kernel
    that is slower after the spin than after itself reads first > second."""
    fn()
    torch.cuda.synchronize()
    firsts, seconds = [], []
    for _ in range(n):
        a, m, e = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        torch.cuda._sleep(400_000)  # cycles: ~200 µs at 1.98 GHz, covers both calls' host time
        a.record()
        fn()
        m.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        firsts.append(a.elapsed_time(m))
        seconds.append(m.elapsed_time(e))
    return statistics.median(firsts), statistics.median(seconds)


def launch_geometry(fn):
    """The kernels one call launches, with grid, block, cluster, dynamic shared memory and
    registers as the profiler's trace records them (compare with quack-bench's plan)."""
    import json
    import tempfile
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    prof.export_chrome_trace(path)
    out = []
    for e in json.load(open(path)).get("traceEvents", []):
        if e.get("cat") == "kernel":
            a = e.get("args", {})
            out.append(f"{e.get('name', '?')[:70]} grid {a.get('grid')} block {a.get('block')} "
                       f"cluster {a.get('cluster', a.get('cluster dim', '-'))} smem {a.get('shared memory')} "
                       f"regs {a.get('registers per thread')} dur {e.get('dur')} us")
    os.unlink(path)
    return out


def graph_ms(fn, cache):
    fn()
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            for _ in range(20):
                fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(5):
        cache.zero_()
        a, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        e.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(e) / 20)
    return statistics.median(out)


def profiled(fn, cache):
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            cache.zero_()
            fn()
        torch.cuda.synchronize()
    ev = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                 and e.time_range.elapsed_us() > 0), key=lambda e: e.time_range.start)
    iters, cur = [], None
    for e in ev:
        if "zero" in e.name.lower() or "fill" in e.name.lower():
            cur = {"clear_end": e.time_range.end, "kernels": []}
            iters.append(cur)
        elif cur is not None:
            cur["kernels"].append(e)
    k_us, gaps, names = [], [], set()
    for it in iters:
        if not it["kernels"]:
            continue
        ks = it["kernels"]
        gaps.append(ks[0].time_range.start - it["clear_end"])
        k_us.append(ks[-1].time_range.end - ks[0].time_range.start)
        names.update(k.name[:60] for k in ks)
    if not k_us:
        return None, None, []
    return statistics.median(k_us) / 1e3, statistics.median(gaps) / 1e3, sorted(names)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--op", default="softmax", choices=("softmax", "log_softmax", "layernorm"))
    p.add_argument("--shapes", default="16384x65536,16384x131072,8192x262144")
    p.add_argument("--pattern", action="store_true", help="also x as a repeated 1 M-element block")
    p.add_argument("--spin2", action="store_true",
                   help="two calls behind one spin kernel, each timed alone (first, second)")
    p.add_argument("--launch", action="store_true",
                   help="print each kernel's launch geometry from the profiler's trace")
    p.add_argument("--spin", action="store_true",
                   help="also time each call behind a spin kernel (quack-bench's way)")
    p.add_argument("--placement", action="store_true",
                   help="softmax: also ours into a preallocated output, and on offset buffers")
    args = p.parse_args()
    from triton.testing import do_bench
    cache = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    for shape in args.shapes.split(","):
        M, N = (int(v) for v in shape.split("x"))
        torch.manual_seed(0)
        w = torch.randn(N, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
        gb = 2 * M * N * 2 / 1e9
        for data in ("randn", "pattern") if args.pattern else ("randn",):
            if data == "randn":
                x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
            else:
                block = torch.randn(1 << 20, device="cuda", dtype=torch.bfloat16)
                x = block.repeat((M * N + block.numel() - 1) // block.numel())[: M * N].view(M, N)
            impls = {impl: calls(args.op, impl, x, w, b) for impl in ("ours", "quack")}
            if args.placement and args.op == "softmax" and data == "randn":
                impls.update(placed_calls(x))
            for impl, fn in impls.items():
                if fn is None:
                    continue
                with torch.no_grad(), ClockSampler() as clock:
                    acc = do_bench(fn, warmup=25, rep=100, return_mode="median")
                    three = time_three_ways(torch, do_bench, fn, 20)
                    gr = graph_ms(fn, cache)
                    k, gap, names = profiled(fn, cache)
                    spin = (spin_ms(fn, cache), spin_ms(fn, cache, clear=True)) if args.spin else None
                    spin2 = spin2_ms(fn) if args.spin2 else None
                tb = lambda ms: f"{ms:.4f} ms {gb / ms:.2f} TB/s" if ms else "-"
                print(f"{args.op} {M}x{N} {data} {impl:11s} accept {tb(acc)} | l2 {tb(three['l2'])}"
                      f" | b2b {tb(three['b2b'])} | graph {tb(gr)}"
                      f" | kernel {tb(k)} gap {gap if gap is None else round(gap * 1e3, 1)} us"
                      + (f" | spin {tb(spin[0])} | spin+l2 {tb(spin[1])}" if spin else "")
                      + (f" | spin2 first {tb(spin2[0])} second {tb(spin2[1])}" if spin2 else "")
                      + f" | {names} | SM {clock.median()} MHz", flush=True)
                if args.launch:
                    for line in launch_geometry(fn):
                        print(f"    launch {impl}: {line}", flush=True)
            del x, impls


if __name__ == "__main__":
    main()
