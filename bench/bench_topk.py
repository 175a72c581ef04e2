"""Top-k by the acceptance method (DESIGN §8; issue 19): ours beside torch.topk and QuACK 0.2.0.

    python3 bench/bench_topk.py                      # issue 19's shapes, bf16 and fp32
    python3 bench/bench_topk.py --dtypes bf16 --shapes 65536x1024x8 --softmax selected

Method: ``triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")`` on each call,
every implementation at the same shape in one process, the order rotated between rounds
(A B C, B C A, C A B; --rounds) and the median of the rounds kept.

Implementations (a dash: it does not run that shape):
  ours   quack_cpp's topk when the torch layer has one (``quack_cpp.topk``); until then the
         extension's raw entry point ``quack_cpp._C.topk_fwd`` on torch-allocated outputs (values
         in x's dtype, int64 indices) on the current stream: the kernel and the C++ call, without
         the torch op's dispatch
  torch  ``torch.topk(x, k, dim=-1)`` (values, int64 indices); with --softmax selected it is
         followed by ``torch.softmax(values.float(), -1)``, with row by ``torch.softmax`` first
  quack  QuACK 0.2.0's ``quack.topk(x, k)`` (N a power of 2 <= 4096, k a power of 2 <= 128;
         int32 indices), softmax none only

TB/s = M*N*elt (x read once) / time, the anchors' model (perf/h200-anchors.md). Output: JSON
lines (--out) and a table: ours, each peer, ours / torch, ours / quack.
"""

import argparse
import json
import os
import statistics
import sys

SHAPES = [(65536, 1024, 8), (65536, 4096, 32), (16384, 4096, 128), (16384, 32768, 64),
          (4096, 131072, 256)]
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
SOFTMAX = {"none": 0, "selected": 1, "row": 2}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtypes", default="bf16,fp32")
    p.add_argument("--shapes", default=None, help="comma list of MxNxK")
    p.add_argument("--softmax", default="none", choices=sorted(SOFTMAX))
    p.add_argument("--impls", default="ours,torch,quack")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup-ms", type=float, default=25.0)
    p.add_argument("--rep-ms", type=float, default=100.0)
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "results"), "bench_topk.jsonl"))
    return p.parse_args(argv)


def _dtype_code(torch, dt):
    return {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.int32: 3, torch.int64: 4}[dt]


def _tup(torch, t):
    return (t.data_ptr(), _dtype_code(torch, t.dtype), tuple(t.shape), tuple(t.stride()),
            t.device.index)


def make_call(torch, impl, x, k, softmax):
    M, N = x.shape
    if impl == "ours":
        import quack_cpp
        if hasattr(quack_cpp, "topk"):
            sm = {0: False, 1: True, 2: "pre"}[softmax]
            return lambda: quack_cpp.topk(x, k, softmax=sm)
        from quack_cpp import _C
        values = torch.empty(M, k, dtype=x.dtype, device=x.device)
        indices = torch.empty(M, k, dtype=torch.int64, device=x.device)
        lse = torch.empty(M, dtype=torch.float32, device=x.device) if softmax == 2 else None
        args = (_tup(torch, x), _tup(torch, values), _tup(torch, indices),
                _tup(torch, lse) if lse is not None else None)
        ws_bytes = _C.topk_fwd_workspace_size(*args, True, True, softmax)
        ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device=x.device)

        def run():
            _C.topk_fwd(*args, True, True, softmax, ws.data_ptr(), ws_bytes,
                        torch.cuda.current_stream(x.device).cuda_stream)
        return run
    if impl == "torch":
        if softmax == 1:
            return lambda: torch.softmax(torch.topk(x, k, dim=-1).values.float(), -1)
        if softmax == 2:
            return lambda: torch.topk(torch.softmax(x, -1), k, dim=-1)
        return lambda: torch.topk(x, k, dim=-1)
    if impl == "quack":
        pow2 = lambda v: v > 0 and v & (v - 1) == 0
        if softmax or not (pow2(N) and N <= 4096 and pow2(k) and k <= 128):
            return None
        try:
            from quack.topk import topk as quack_topk
        except Exception:
            return None
        return lambda: quack_topk(x, k)
    raise ValueError(impl)


def main(argv=None):
    args = parse_args(argv)
    import torch
    from triton.testing import do_bench

    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    impls = args.impls.split(",")
    softmax = SOFTMAX[args.softmax]
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    rows = []
    with open(args.out, "a") as out:
        for dname in args.dtypes.split(","):
            dt = getattr(torch, DTYPES[dname])
            for (M, N, k) in shapes:
                x = torch.randn(M, N, device="cuda", dtype=dt)
                calls = {}
                for impl in impls:
                    try:
                        c = make_call(torch, impl, x, k, softmax)
                    except Exception as e:  # an implementation that refuses the call
                        print(f"{impl} {dname} {M}x{N}x{k}: {e}", file=sys.stderr)
                        c = None
                    if c is not None:
                        c()
                        calls[impl] = c
                torch.cuda.synchronize()
                times = {i: [] for i in calls}
                order = list(calls)
                for r in range(args.rounds):
                    for impl in order[r % len(order):] + order[:r % len(order)]:
                        times[impl].append(do_bench(calls[impl], warmup=args.warmup_ms,
                                                    rep=args.rep_ms, return_mode="median"))
                gbytes = M * N * x.element_size()
                rec = {"op": "topk", "softmax": args.softmax, "dtype": DTYPES[dname], "M": M,
                       "N": N, "k": k}
                for impl, t in times.items():
                    ms = statistics.median(t)
                    rec[impl + "_ms"] = ms
                    rec[impl + "_tbps"] = gbytes / (ms * 1e-3) / 1e12
                out.write(json.dumps(rec) + "\n")
                out.flush()
                rows.append(rec)
                del x
                torch.cuda.empty_cache()
    head = f"{'dtype':9} {'M':>6} {'N':>7} {'k':>4} " + " ".join(f"{i:>7}" for i in impls)
    print(head + "  ours/torch  ours/quack   (TB/s)")
    for r in rows:
        vals = " ".join(f"{r[i + '_tbps']:7.3f}" if i + "_tbps" in r else f"{'-':>7}" for i in impls)
        rt = r.get("ours_tbps", 0) / r["torch_tbps"] if "torch_tbps" in r else float("nan")
        rq = r.get("ours_tbps", 0) / r["quack_tbps"] if "quack_tbps" in r else float("nan")
        print(f"{r['dtype']:9} {r['M']:6} {r['N']:7} {r['k']:4} {vals}  {rt:10.2f}  {rq:10.2f}")


if __name__ == "__main__":
    main()
