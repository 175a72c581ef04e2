#!/usr/bin/env python3
"""Kernel census of quack_cpp.cross_entropy's calls (torch.profiler): which kernels each call
launches, their GPU time per call, and the rate of the row kernels against the logits' bytes.

    python3 scripts/ce_census.py                                   # bf16, 16384x65536
    python3 scripts/ce_census.py --shapes 16384x65536,16384x131072,8192x262144 --calls 5

Cases (x (M, V) random normal, targets uniform in [0, V); 'mean'):
  loss   cross_entropy(x, t, reduction="none") under torch.no_grad() (the loss alone)
  grad1  torch.autograd.grad(cross_entropy(xr, t), xr)            (grad_output 1)
  half   torch.autograd.grad(cross_entropy(xr, t) * 0.5, xr)      (grad_output 0.5)
Each case runs --warmup calls first (so the device's dx prediction word follows the case's
grad_output), then --calls calls under the profiler. Per kernel: calls per case call, µs per
case call, and for kernels that touch the logits (the row kernels: names with "row_") the
rate against one pass over them (M·V·elt) and two (read + write). The per-case total is the
sum of the kernels' GPU time per call; "ideal" is its byte model at --tbps (loss 1 pass, grad1
2 passes, half 3 passes: the recompute). Kernel names are shortened to the template's head
(row policy, traits, tile) — the full name with --full.
"""
import argparse
import re
import sys


def short_name(name, full):
    if full:
        return name
    name = name.replace("(anonymous namespace)::", "").replace("quack::detail::", "")
    name = name.replace("void ", "")
    m = re.match(r"(\w+)<(\w+)<([^>]*)>", name)
    if m:  # policy<Traits<flags>, RowDtypes<...>, tpr, vecs...>
        tail = re.findall(r">,\s*([-\w, ]+)>\s*\(", name)
        geo = tail[-1].strip() if tail else ""
        return f"{m.group(1)}<{m.group(2)}<{m.group(3)}>{', ' + geo if geo else ''}>"
    return name.split("(")[0][:110]


def census(torch, quack_cpp, case, M, V, dtype, calls, warmup):
    from torch.profiler import ProfilerActivity, profile
    gen = torch.Generator(device="cuda").manual_seed(M * 7 + V)
    x = torch.randn(M, V, device="cuda", dtype=dtype, generator=gen)
    t = torch.randint(0, V, (M,), device="cuda", generator=gen)
    if case == "loss":
        def call():
            with torch.no_grad():
                return quack_cpp.cross_entropy(x, t, reduction="none")
    else:
        xr = x.detach().requires_grad_(True)
        s = 0.5 if case == "half" else None

        def call():
            loss = quack_cpp.cross_entropy(xr, t)
            return torch.autograd.grad(loss if s is None else loss * s, xr)
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    rows = {}
    for e in prof.events():
        if not str(e.device_type).endswith("CUDA"):  # GPU-side events: kernels, memsets
            continue
        us = getattr(e, "device_time", None)  # µs (torch >= 2.4; cuda_time before)
        if us is None:
            us = e.cuda_time
        n, tot = rows.get(e.name, (0, 0.0))
        rows[e.name] = (n + 1, tot + us)
    del x, t
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="16384x65536")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    ap.add_argument("--cases", default="loss,grad1,half")
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tbps", type=float, default=4.0, help="rate of the 'ideal' column")
    ap.add_argument("--full", action="store_true", help="full kernel names")
    args = ap.parse_args()
    import torch
    import quack_cpp
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    elt = torch.empty((), dtype=dtype).element_size()
    passes = {"loss": 1, "grad1": 2, "half": 3}
    for shape in args.shapes.split(","):
        M, V = (int(v) for v in shape.lower().split("x"))
        one = M * V * elt  # bytes of one pass over the logits
        for case in args.cases.split(","):
            rows = census(torch, quack_cpp, case, M, V, dtype, args.calls, args.warmup)
            total = sum(tot for _, tot in rows.values()) / args.calls
            ideal = passes[case] * one / (args.tbps * 1e12) * 1e6
            print(f"\n{args.dtype} {M}x{V} {case}: {total:.1f} us of kernels per call "
                  f"(ideal {ideal:.1f} us: {passes[case]} pass(es) of {one / 1e9:.3f} GB at "
                  f"{args.tbps} TB/s)")
            for name, (n, tot) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
                us = tot / args.calls
                rate = ""
                if "row_" in name and us > 0:
                    rate = (f"  1 pass {one / (us * 1e-6) / 1e12:.2f} TB/s, "
                            f"2 passes {2 * one / (us * 1e-6) / 1e12:.2f} TB/s")
                print(f"  {n / args.calls:4.1f} x {us:9.1f} us  {short_name(name, args.full)}{rate}")
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
