"""Rotary embedding of a packed qkv by the acceptance method (DESIGN §8): ours beside torch's
formula, eager and compiled, one process.

    python3 bench/bench_rotary.py                  # bf16, the demo's shape and two more
    python3 bench/bench_rotary.py --shapes 8x2048x16x128 --dtypes bf16,fp32 --rounds 5
    python3 bench/bench_rotary.py --shapes 8x2048x16x128 --impls ours,split --modes fwd_bwd

Method: ``triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")`` on the public
Python call, the implementations' order rotated between rounds, medians of the rounds. Each call
takes qkv (B, S, 3, H, D) as the fused qkv Linear's output viewed so, and cos, sin (S, D) (the
demo's tables, halves repeated; ours reads their first halves), and gives q, k, v (B, H, S, D)
for SDPA, as demo/lm.py's Attention does:

  ours     quack_cpp.apply_rotary_emb_qkv(qkv, cos[:, :D/2], sin[:, :D/2])
           .transpose(1, 3).unbind(2) (one kernel: q, k rotated, v copied); in fwd_bwd
           autograd's unbind backward stacks dq, dk, dv (a copy) before the rotary backward
  split    quack_cpp.apply_rotary_emb_qkv_split(qkv, cos[:, :D/2], sin[:, :D/2]), each
           .transpose(1, 2) (one kernel; the backward one kernel writing the packed
           gradient from dq, dk, dv: no stack). The demo's Parts.rotary (demo/ours.py)
  eager    demo/lm.py's torch_rotary (x * cos + rotate_half(x) * sin on q and k; v a view)
  compile  torch.compile(dynamic=False) of the same function
  clone    qkv.clone() (a copy of the bytes ours moves: the same-run ceiling)

Modes: fwd (under torch.no_grad) and fwd_bwd (``torch.autograd.grad`` of q, k, v with random
gradients w.r.t. qkv, the graph built per call, as in training).

Bytes (the split's traffic, each tensor read once and written once): fwd 6·B·S·H·D·elt (read
q, k, v; write them), fwd_bwd twice that (ours moves 4·B·S·H·D·elt more in fwd_bwd: the
stack). TB/s = those bytes / time for every column (so the columns compare as times). Output:
one JSON line per (shape, dtype, mode, impl) and a table with the speed-ups eager / ours,
compile / ours and ours / split (> 1: the latter faster) where both columns ran.
``--impls`` (default all) and ``--modes`` (default fwd,fwd_bwd) pick a subset; the demo's
shape is 8x2048x16x128 bf16 (demo/lm.py CONFIG: batch 8, seq_len 2048, 16 heads, d 2048).
"""

import argparse
import json
import os
import statistics
import sys

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
SHAPES = [(8, 2048, 16, 128), (4, 4096, 32, 128), (16, 1024, 16, 64)]
IMPLS = ("ours", "split", "eager", "compile", "clone")
MODES = ("fwd", "fwd_bwd")


def parse_shapes(s):
    return [tuple(int(v) for v in part.split("x")) for part in s.split(",")]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=parse_shapes, default=SHAPES, help="BxSxHxD,...")
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--impls", default=",".join(IMPLS), help="a comma list of " + ",".join(IMPLS))
    ap.add_argument("--modes", default=",".join(MODES), help="a comma list of " + ",".join(MODES))
    ap.add_argument("--out", default=None, help="JSON lines file (default: stdout only)")
    opts = ap.parse_args(argv)
    want = opts.impls.split(",")
    modes = opts.modes.split(",")
    bad = [n for n in want if n not in IMPLS] + [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown impl or mode {bad}: impls {IMPLS}, modes {MODES}")
    try:
        import torch
        import triton.testing
    except ImportError as e:
        print(f"bench_rotary: needs torch and triton ({e})")
        return 2
    if not torch.cuda.is_available():
        print("bench_rotary: needs a CUDA GPU")
        return 2
    import quack_cpp
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "demo"))
    from lm import torch_rotary

    def ours_fn(qkv, cos, sin):
        half = cos.shape[-1] // 2
        return quack_cpp.apply_rotary_emb_qkv(qkv, cos[:, :half], sin[:, :half]) \
            .transpose(1, 3).unbind(2)

    def split_fn(qkv, cos, sin):
        half = cos.shape[-1] // 2
        q, k, v = quack_cpp.apply_rotary_emb_qkv_split(qkv, cos[:, :half], sin[:, :half])
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    compiled = torch.compile(torch_rotary, dynamic=False) if "compile" in want else None
    impls = {"ours": ours_fn, "split": split_fn, "eager": torch_rotary, "compile": compiled,
             "clone": lambda qkv, cos, sin: (qkv.clone(),)}
    impls = {n: impls[n] for n in IMPLS if n in want}
    rows = []
    out_f = open(opts.out, "a") if opts.out else None
    for dname in opts.dtypes.split(","):
        dtype = getattr(torch, DTYPES[dname])
        for (B, S, H, D) in opts.shapes:
            inv = 1.0 / (10000.0 ** (torch.arange(0, D, 2, device="cuda").float() / D))
            ang = torch.outer(torch.arange(S, device="cuda").float(), inv)
            ang = torch.cat((ang, ang), -1)
            cos, sin = ang.cos(), ang.sin()
            qkv = torch.randn(B, S, 3 * H * D, device="cuda", dtype=dtype).view(B, S, 3, H, D)
            elems = B * S * 3 * H * D
            for mode in modes:
                nbytes = 2 * elems * qkv.element_size() * (2 if mode == "fwd_bwd" else 1)
                calls = {}
                for name, fn in impls.items():
                    if mode == "fwd":
                        def call(fn=fn):
                            with torch.no_grad():
                                return fn(qkv, cos, sin)
                    else:
                        x = qkv.detach().clone().requires_grad_()
                        grads = [torch.randn(B, H, S, D, device="cuda", dtype=dtype)
                                 for _ in range(3)]
                        if name == "clone":
                            grads = [torch.randn_like(qkv)]

                        def call(fn=fn, x=x, grads=grads):
                            outs = fn(x, cos, sin)
                            return torch.autograd.grad(outs, x, grads[:len(outs)])
                    call()  # compile / warm up
                    calls[name] = call
                times = {n: [] for n in calls}
                order = list(calls)
                for r in range(opts.rounds):
                    rot = order[r % len(order):] + order[:r % len(order)]
                    for n in rot:
                        times[n].append(triton.testing.do_bench(
                            calls[n], warmup=25, rep=100, return_mode="median"))
                med = {n: statistics.median(t) for n, t in times.items()}
                for n, ms in med.items():
                    rec = dict(op="rotary_qkv", mode=mode, shape=[B, S, H, D], dtype=dname,
                               impl=n, ms=ms, tbps=nbytes / (ms * 1e-3) / 1e12)
                    rows.append(rec)
                    line = json.dumps(rec)
                    print(line)
                    if out_f:
                        out_f.write(line + "\n")
    if out_f:
        out_f.close()
    print()
    names = list(impls)
    ratios = [(a, b) for a, b in (("eager", "ours"), ("compile", "ours"), ("ours", "split"))
              if a in impls and b in impls]
    print(f"{'shape':>20s} {'dtype':>5s} {'mode':>8s} " +
          " ".join(f"{n + ' ms':>10s}" for n in names) +
          " ".join(f"{n + ' TB/s':>13s}" for n in names) + "".join(
              f"{a + '/' + b:>14s}" for a, b in ratios))
    keys = sorted({(tuple(r["shape"]), r["dtype"], r["mode"]) for r in rows},
                  key=lambda k: (k[1], k[0], k[2]))
    for k in keys:
        by = {r["impl"]: r for r in rows if (tuple(r["shape"]), r["dtype"], r["mode"]) == k}
        ms = " ".join(f"{by[n]['ms']:10.4f}" for n in names)
        cols = " ".join(f"{by[n]['tbps']:13.2f}" for n in names)
        sp = "".join(f"{by[a]['ms'] / by[b]['ms']:13.2f}x" for a, b in ratios)
        print(f"{'x'.join(map(str, k[0])):>20s} {k[1]:>5s} {k[2]:>8s} {ms} {cols}{sp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
