"""GEMM throughput: quack_cpp.gemm beside torch.matmul (cuBLAS) in one process, on one GPU.

How to run (repository root, after `pip install --no-build-isolation --no-deps .`):

    python3 bench/bench_gemm.py                    # issue 3's set (A and B row-major) + layouts
    python3 bench/bench_gemm.py --shapes 8192x8192x8192 --layouts rr,cc
    python3 scripts/gemm_table.py results/bench_gemm.jsonl --plot results/gemm_torch.png

Workload: bf16 A (M, K) and B (K, N), each row-major ("r") or column-major ("c": a transposed
view of a contiguous tensor, as x.t() gives), D = A @ B in bf16 with fp32 accumulation.
  ours   quack_cpp.gemm(A, B)      (the custom op; row-major D)
  torch  torch.matmul(A, B)        (cuBLAS / cuBLASLt as torch dispatches it)

Timing (device METHOD notes): CUDA events around batches of back-to-back calls, each batch after
a torch.cuda._sleep long enough for the CPU to enqueue it (launch overhead hidden), warm-up
first (the sleep is sized from the measured host enqueue time per call), ours and torch alternating batch by batch (A B A B) until each has --rep-ms of measured
time (at least 5 batches); median per-call time; TFLOP/s = 2·M·N·K / time. GEMMs at these sizes
are compute-bound; inputs are not rotated.

Output: JSON lines with the fields of `quack-bench gemm` (so scripts/gemm_table.py reads both),
"impl_peer": "torch.matmul", plus max |ours − torch| / max |torch| on a sample.
"""

import argparse
import json
import math
import os
import statistics
import time

SET = [(8192, 8192, 8192), (4096, 4096, 4096), (2048, 2048, 2048), (16384, 14336, 4096),
       (16384, 4096, 14336), (16384, 28672, 4096), (8192, 128256, 4096), (128, 8192, 8192),
       (8192, 8192, 128)]
OTHER_LAYOUTS = ("rc", "cr", "cc")  # at 8192³


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", help="comma list of MxNxK (default: issue 3's set)")
    p.add_argument("--layouts", default=None, help="comma list of rr, rc, cr, cc (A then B)")
    p.add_argument("--out", default="results/bench_gemm.jsonl")
    p.add_argument("--warmup-ms", type=float, default=50.0)
    p.add_argument("--rep-ms", type=float, default=200.0)
    p.add_argument("--batch-ms", type=float, default=10.0)
    return p.parse_args(argv)


def cases(args):
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
        layouts = (args.layouts or "rr").split(",")
        return [(s, l) for s in shapes for l in layouts]
    out = [(s, "rr") for s in SET]
    return out + [((8192, 8192, 8192), l) for l in OTHER_LAYOUTS]


def operand(torch, rows, cols, layout, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if layout == "r":
        return torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16, generator=g)
    return torch.randn(cols, rows, device="cuda", dtype=torch.bfloat16, generator=g).t()


def timed_batches(torch, fns, warmup_ms, rep_ms, batch_ms):
    """Median milliseconds per call of each fn, batches alternating A B A B."""
    for fn in fns:  # warm-up, and one timed call to size the batches
        fn()
    torch.cuda.synchronize()
    per_call = []
    for fn in fns:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        per_call.append(max(s.elapsed_time(e), 1e-3))
    calls = [max(1, int(batch_ms / t)) for t in per_call]
    # Host time to enqueue one call (custom-op dispatch is tens of µs): the sleep before each
    # batch covers the whole batch's enqueue, so the GPU never waits for the CPU.
    cpu_ms = []
    for fn in fns:
        t0 = time.perf_counter()
        for _ in range(20):
            fn()
        cpu_ms.append((time.perf_counter() - t0) * 1e3 / 20)
    torch.cuda.synchronize()
    sleep_cycles = [int(2e6 * (1.0 + 1.5 * calls[i] * cpu_ms[i])) for i in range(len(fns))]  # ~2e6 cycles/ms
    t_end = [0.0] * len(fns)
    for i, fn in enumerate(fns):
        t0 = 0.0
        while t0 < warmup_ms:
            for _ in range(calls[i]):
                fn()
            t0 += calls[i] * per_call[i]
    samples = [[] for _ in fns]
    while min(t_end) < rep_ms or min(len(s) for s in samples) < 5:
        for i, fn in enumerate(fns):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(sleep_cycles[i])  # the CPU enqueues the batch before it starts
            s.record()
            for _ in range(calls[i]):
                fn()
            e.record()
            torch.cuda.synchronize()
            ms = s.elapsed_time(e)
            samples[i].append(ms / calls[i])
            t_end[i] += ms
        if min(len(s) for s in samples) >= 200:
            break
    return [statistics.median(s) for s in samples]


def bench_case(torch, quack_cpp, M, N, K, layout, args):
    a = operand(torch, M, K, layout[0], 1)
    b = operand(torch, K, N, layout[1], 2)
    ours = quack_cpp.gemm(a, b)
    ref = torch.matmul(a, b)
    torch.cuda.synchronize()
    sample = (slice(None, None, max(1, M // 64)), slice(None, None, max(1, N // 64)))
    diff = (ours[sample].float() - ref[sample].float()).abs().max().item()
    scale = ref[sample].float().abs().max().item()
    ms_q, ms_t = timed_batches(torch, [lambda: quack_cpp.gemm(a, b), lambda: torch.matmul(a, b)],
                               args.warmup_ms, args.rep_ms, args.batch_ms)
    flop = 2.0 * M * N * K
    return {"op": "gemm", "dtype": "bf16", "majors": layout, "M": M, "N": N, "K": K,
            "impl_peer": "torch.matmul", "tile_n": os.environ.get("QUACK_GEMM_TILE_N", "256"),
            "ms_quack": ms_q, "ms_cublas": ms_t, "tflops_quack": flop / ms_q / 1e9,
            "tflops_cublas": flop / ms_t / 1e9, "ratio": ms_t / ms_q,
            "rel_diff_vs_cublas": diff / scale if scale > 0 else diff}


def main(argv=None):
    args = parse_args(argv)
    import torch
    import quack_cpp
    if not torch.cuda.is_available():
        raise SystemExit("bench_gemm: needs a CUDA GPU")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    rows = []
    with open(args.out, "w") as f:
        for (M, N, K), layout in cases(args):
            r = bench_case(torch, quack_cpp, M, N, K, layout, args)
            rows.append(r)
            f.write(json.dumps(r) + "\n")
            f.flush()
            print(f"{M}x{N}x{K} {layout}: ours {r['tflops_quack']:.1f} torch {r['tflops_cublas']:.1f} "
                  f"TFLOP/s, ratio {r['ratio']:.3f}", flush=True)
    geo = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    print(f"geometric mean of ratios over {len(rows)} rows: {geo:.3f}")


if __name__ == "__main__":
    main()
