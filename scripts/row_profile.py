"""Where one call of a row op spends its GPU time: each kernel's duration and the GPU's idle gap
before it, for one call (after warm-up) of bench_rows.py's call of that op and implementation,
by torch.profiler (diagnosis, not a bar). For ops that run more than one kernel (rmsnorm_bwd,
layernorm_bwd: the row kernel, then the column sums of the weight's partials; cross-entropy's
prep and main kernels) it tells the second kernel's share and the launch gap between them.

    python3 scripts/row_profile.py rmsnorm_bwd 16384x4096 [bf16] [ours,compile]

Prints per implementation: the call's kernels in order (start, duration, gap before, name, in
µs from the first kernel's start), their sum, the span from the first start to the last end,
and the span's gaps; then the median of 5 profiled calls of the same.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))


def kernels_of_calls(torch, prof, n_calls):
    """[(start µs, end µs, name)] per call: the GPU activities of the profile in time order,
    split into n_calls equal groups (each call runs the same kernels)."""
    gpu = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                 key=lambda e: e.time_range.start)
    per = len(gpu) // n_calls
    return [[(e.time_range.start, e.time_range.end, e.name) for e in gpu[i * per:(i + 1) * per]]
            for i in range(n_calls)] if per else []


def summary(call):
    """(sum of kernel µs, span µs, [(start, duration, gap before, name)]) of one call's kernels."""
    t0 = call[0][0]
    rows, prev = [], None
    for st, en, name in call:
        rows.append((st - t0, en - st, st - prev if prev is not None else 0.0, name))
        prev = en
    return sum(r[1] for r in rows), call[-1][1] - t0, rows


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    import torch
    import torch.nn.functional as F
    from bench_rows import make_call

    op, shape = argv[0], argv[1]
    M, N = (int(v) for v in shape.split("x"))
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[
        argv[2] if len(argv) > 2 else "bf16"]
    impls = (argv[3] if len(argv) > 3 else "ours").split(",")
    n = 5
    for impl in impls:
        call = make_call(torch, F, impl, op, M, N, dtype, torch.Generator(device="cuda").manual_seed(0))
        if call is None:
            print(f"{impl}: not available for {op}")
            continue
        for _ in range(5):
            call()
        torch.cuda.synchronize()
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(n):
                call()
                torch.cuda.synchronize()  # calls apart: each call's gaps are its own
        calls = kernels_of_calls(torch, prof, n)
        if not calls:
            print(f"{impl}: no kernels recorded")
            continue
        busy, span, rows = summary(calls[-1])
        print(f"== {impl} {op} {shape} {dtype}: the last call's kernels (µs from the first start)")
        for st, dur, gap, name in rows:
            print(f"  {st:9.1f} {dur:9.1f} gap {gap:6.1f}  {name[:90]}")
        sums = [summary(c) for c in calls]
        print(f"  kernels {busy:.1f} µs, span {span:.1f} µs, gaps {span - busy:.1f} µs; median of {n}"
              f" calls: kernels {statistics.median(s[0] for s in sums):.1f}, span "
              f"{statistics.median(s[1] for s in sums):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
