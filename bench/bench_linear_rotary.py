"""The attention layer's qkv projection with rotary by the acceptance method (DESIGN §8): the
fused ``quack_cpp.linear_rotary_qkv`` (RoPE in the GEMM's epilogue) against the demo's previous
pair ``quack_cpp.linear`` + ``apply_rotary_emb_qkv_split`` (non-interleaved), one process.

    python3 bench/bench_linear_rotary.py                       # the demo's shape, bf16
    python3 bench/bench_linear_rotary.py --shape 8x2048x16x128 --rounds 5

Method: ``triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")`` on the public
Python calls, the implementations' order rotated between rounds, medians of the rounds. Modes:
fwd (torch.no_grad) and fwd_bwd (``torch.autograd.grad`` of q, k, v with random gradients
w.r.t. x and the weight). Output: one JSON line per (mode, impl) (--out) and a table in ms with
fused / separate (< 1: the fused call is faster).
"""

import argparse
import json
import statistics

import torch


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="8x2048x16x128", help="BxTxHxD (K = H·D)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import quack_cpp
    from triton.testing import do_bench
    B, T, H, D = (int(v) for v in args.shape.split("x"))
    d = H * D
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(B, T, d, device="cuda", dtype=torch.bfloat16, generator=g, requires_grad=True)
    w = (torch.randn(3 * d, d, device="cuda", dtype=torch.bfloat16, generator=g) * d ** -0.5
         ).requires_grad_()
    ang = torch.arange(T, device="cuda", dtype=torch.float32)[:, None] * (
        10000.0 ** (-torch.arange(0, D, 2, device="cuda", dtype=torch.float32) / D))
    cos, sin = ang.cos(), ang.sin()                                  # (T, D / 2)
    grads = [torch.randn(B, T, H, D, device="cuda", dtype=torch.bfloat16, generator=g)
             for _ in range(3)]

    def fused():
        return quack_cpp.linear_rotary_qkv(x, w, cos, sin, H)

    def separate():
        qkv = quack_cpp.linear(x, w).view(B, T, 3, H, D)
        return quack_cpp.apply_rotary_emb_qkv_split(qkv, cos, sin)

    impls = {"fused": fused, "separate": separate}
    res = {}
    for mode in ("fwd", "fwd_bwd"):
        names = list(impls)
        times = {n: [] for n in names}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                fn = impls[n]
                if mode == "fwd":
                    def call(fn=fn):
                        with torch.no_grad():
                            fn()
                else:
                    def call(fn=fn):
                        q, k, v = fn()
                        torch.autograd.grad((q, k, v), (x, w), grads)
                times[n].append(do_bench(call, warmup=25, rep=100, return_mode="median"))
        for n in names:
            res[(mode, n)] = statistics.median(times[n])
            line = {"bench": "linear_rotary", "shape": args.shape, "mode": mode, "impl": n,
                    "ms": res[(mode, n)]}
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(line) + "\n")
    print(f"{'mode':8} {'fused ms':>9} {'separate ms':>12} {'fused/separate':>15}")
    for mode in ("fwd", "fwd_bwd"):
        a, b = res[(mode, "fused")], res[(mode, "separate")]
        print(f"{mode:8} {a:9.4f} {b:12.4f} {a / b:15.3f}")


if __name__ == "__main__":
    main()
