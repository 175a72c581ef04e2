"""One launch each of ours (quack_cpp.gemm), QuACK 0.2.0's GEMM (quack.gemm_interface.gemm,
tuned=False: pingpong 128x192, cluster 2x1) and cuBLAS's (torch.matmul) at one shape, inside a
cudaProfilerStart / Stop region, for Nsight Compute (device only; clocks left alone):

    ncu --clock-control none --profile-from-start off --set full -f -o /tmp/g \
        python3 scripts/ncu_gemm_quack.py 8192 8192 8192
    python3 scripts/ncu_gemm_quack.py --report /tmp/g.ncu-rep
    python3 scripts/ncu_gemm_quack.py --sass /tmp/g.ncu-rep [OUT_DIR]

`act M N K NAME[,NAME...]` profiles our plain gemm, then gemm_act (preact stored) with each
activation named, in that order (the epilogue's cost per activation); `dact M N K [ACT]` (default
relu) our plain gemm, gemm_act and gemm_dact, then QuACK's gemm_act and gemm_dact, all on D =
dout (M, K) @ W (K, N) (dact's epilogue beside act's and QuACK's; our gemm_act reads W's values
K-major, the one B layout it compiles); `gated M N K [ACT]` our plain
gemm, gemm_gated and gemm_dgated (default swiglu); `ce M N` in place of `M N K` profiles the cross-entropy forward (reduction="none") of each
instead, `cebwd M N` the backward of a reduction="none" call from its saved lse with a random
grad per row (bench_rows.py's ce_bwd); `topk M N K [fp32|bf16]` the top-k forward (quack_cpp.topk against quack.topk). The `--sass` mode prints, per kernel, the SASS lines with the most warp stall samples
and the stall reasons sampled on them (the per-instruction view behind the kernel-wide
reasons), and with OUT_DIR writes each kernel's whole source page as CSV (xz) for reading
beside our own SASS. In the plain mode `M N K [RASTER,...]` our gemm runs once per raster named
(QUACK_GEMM_RASTER, e.g. `m8,h8s`: the tile order of the persistent schedule), then QuACK's,
then cuBLAS's (torch.matmul); a and b row-major (D = A·B: the kernel's km, linear +
cross-entropy's dx GEMM at `4096 4096 128256`).

The report mode prints, per kernel, the duration, the SM clock, tensor-pipe activity, issued
instructions, the launch geometry and the top warp stall reasons: where QuACK's mainloop does
more work per clock than ours (docs/performance.md, run Y: 92 % against 84 % of the dense peak).
"""
import csv
import os
import subprocess
import sys


def calls(args):
    import torch
    import quack_cpp
    torch.manual_seed(0)
    if args[0] == "ce":
        import quack
        M, N = int(args[1]), int(args[2])
        x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
        t = torch.randint(0, N, (M,), device="cuda")
        return [("ours", lambda: quack_cpp.cross_entropy(x, t, reduction="none")),
                ("quack", lambda: quack.cross_entropy(x, t, reduction="none"))]
    if args[0] == "cebwd":
        import quack
        M, N = int(args[1]), int(args[2])
        x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
        t = torch.randint(0, N, (M,), device="cuda")
        g = torch.rand(M, device="cuda")
        out = []
        for name, f in (("ours", quack_cpp.cross_entropy), ("quack", quack.cross_entropy)):
            xr = x.detach().requires_grad_(True)
            loss = f(xr, t, reduction="none")  # the forward runs here, outside the profiled region
            out.append((name, lambda loss=loss, xr=xr: torch.autograd.grad(loss, xr, g, retain_graph=True)))
        return out
    if args[0] == "topk":
        from quack.topk import topk as quack_topk
        M, N, k = (int(v) for v in args[1:4])
        dt = torch.float32 if (args[4:] or ["fp32"])[0] == "fp32" else torch.bfloat16
        x = torch.randn(M, N, device="cuda", dtype=dt)
        return [("ours", lambda: quack_cpp.topk(x, k)), ("quack", lambda: quack_topk(x, k))]
    if args[0] == "act":
        M, N, K = (int(v) for v in args[1:4])
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        return [("plain", lambda: quack_cpp.gemm(a, w.T))] + [
            (act, lambda act=act: quack_cpp.gemm_act(a, w.T, act)) for act in args[4].split(",")]
    if args[0] == "dact":
        # dact's epilogue against act's and plain's at one shape, ours and QuACK's (issue 17:
        # dact reads 1.04-1.06 x plain at 16384 x 14336 x 4096 where act reads 1.00 and QuACK's
        # dact 1.02-1.03; run AU2). D = dout (M, K) @ W (K, N), as bench_gemm_fused.py's dact.
        from quack import gemm_interface as qgi
        M, N, K = (int(v) for v in args[1:4])
        act = args[4] if len(args) > 4 else "relu"
        dout = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        W = (torch.randn(K, N, device="cuda") * K ** -0.5).to(torch.bfloat16)
        pre = (torch.randn(M, N, device="cuda") * 2.0).to(torch.bfloat16)
        Wc = W.t().contiguous().t()  # W's values K-major: gemm_act compiles K-major B only
        return [("plain", lambda: quack_cpp.gemm(dout, W)),
                ("act", lambda: quack_cpp.gemm_act(dout, Wc, act)),
                ("dact", lambda: quack_cpp.gemm_dact(dout, W, pre, act)),
                ("quack_act", lambda: qgi.gemm_act(dout, W, activation=act, tuned=False)),
                ("quack_dact", lambda: qgi.gemm_dact(dout, W, pre, activation=act, tuned=False))]
    if args[0] == "gated":
        M, N, K = (int(v) for v in args[1:4])
        act = args[4] if len(args) > 4 else "swiglu"
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        w2 = torch.randn(K, N // 2, device="cuda", dtype=torch.bfloat16) * K ** -0.5  # (K, N / 2)
        pre = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)  # (gate, up) pairs
        return [("plain", lambda: quack_cpp.gemm(a, w.T)),
                ("gated", lambda: quack_cpp.gemm_gated(a, w.T, act)),
                ("dgated", lambda: quack_cpp.gemm_dgated(a, w2, pre, act))]
    from quack.gemm_interface import gemm as quack_gemm
    M, N, K = (int(v) for v in args[:3])
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    def ours(raster):
        def call():
            if not raster:  # the caller's environment as it is
                return quack_cpp.gemm(a, b)
            old = os.environ.get("QUACK_GEMM_RASTER")
            os.environ["QUACK_GEMM_RASTER"] = raster  # read at each call (gemm.cpp, apply_raster_env)
            try:
                return quack_cpp.gemm(a, b)
            finally:
                if old is None:
                    os.environ.pop("QUACK_GEMM_RASTER", None)
                else:
                    os.environ["QUACK_GEMM_RASTER"] = old
        return call
    rasters = args[3].split(",") if len(args) > 3 else [""]
    return [(f"ours{'@' + r if r else ''}", ours(r)) for r in rasters] + [
        ("quack", lambda: quack_gemm(a, b, tuned=False)), ("cublas", lambda: torch.matmul(a, b))]


def run(args):
    import torch
    fs = calls(args)
    for _, f in fs:  # compile / plan, warm up
        for _ in range(3):
            f()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _, f in fs:
        f()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


KEYS = ("gpu__time_duration.sum", "sm__cycles_elapsed.avg.per_second",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_tensor_op_hmma.sum", "smsp__inst_executed.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed", "lts__t_sector_hit_rate.pct",
        "dram__bytes_read.sum", "dram__bytes_write.sum",
        "launch__grid_size", "launch__block_size", "launch__cluster_size",
        "launch__registers_per_thread", "launch__shared_mem_per_block_dynamic",
        "smsp__warps_active.avg.per_cycle_active")


def report(rep):
    raw = subprocess.run(["ncu", "-i", rep, "--page", "raw", "--csv"], capture_output=True,
                         text=True).stdout
    rows = list(csv.reader(raw.splitlines()))
    if len(rows) < 3:
        print("no ncu data:", raw[:400])
        return
    head = rows[0]
    for vals in rows[2:]:
        d = dict(zip(head, vals))
        print(f"== {d.get('Kernel Name', '?')[:110]}")
        for k in KEYS:
            if k in d:
                print(f"  {k:72s} {d[k]}")
        st = [(h, v) for h, v in d.items()
              if "warps_issue_stalled" in h and (h.endswith("_per_warp_active.pct")
                                                 or h.endswith("_per_issue_active.ratio"))]

        def num(v):
            try:
                return float(v.replace(",", ""))
            except ValueError:
                return 0.0
        print("  stall reasons (top 10):")
        for h, v in sorted(st, key=lambda x: -num(x[1]))[:10]:
            name = h.replace("smsp__average_warps_issue_stalled_", "").replace(
                "_per_warp_active.pct", " (% warp)").replace("_per_issue_active.ratio", " (/issue)")
            print(f"    {name:40s} {v}")


def sass(rep, out_dir=None):
    """Per kernel of the report: the SASS lines with the most stall samples, with their reasons."""
    import lzma
    import os
    text = subprocess.run(["ncu", "-i", rep, "--page", "source", "--csv", "--print-source", "sass"],
                          capture_output=True, text=True).stdout
    rows = list(csv.reader(text.splitlines()))
    # One block per kernel: a "Kernel Name" row, then a header row naming the sampling columns.
    starts = [i for i, r in enumerate(rows) if r and r[0].startswith("Kernel Name")] or [0]
    for n, s0 in enumerate(starts):
        block = rows[s0:starts[n + 1] if n + 1 < len(starts) else len(rows)]
        name = ",".join(block[0][1:])[:100] if block and block[0][0].startswith("Kernel Name") else "?"
        hi = next((i for i, r in enumerate(block)
                   if any(h.startswith("Warp Stall Sampling (All") for h in r)), None)
        print(f"== kernel {n}: {name}")
        if hi is None:
            print("  no stall-sampling column; first rows:", [r[:4] for r in block[:3]])
            continue
        head, body = block[hi], [r for r in block[hi + 1:] if len(r) == len(block[hi])]
        if out_dir:
            with lzma.open(os.path.join(out_dir, f"sass_{n}.csv.xz"), "wt") as f:
                csv.writer(f).writerows([block[0], head] + body)
        col = next(i for i, h in enumerate(head) if h.startswith("Warp Stall Sampling (All"))
        src = next((i for i, h in enumerate(head) if h == "Source"), 1)
        addr = next((i for i, h in enumerate(head) if h == "Address"), 0)

        def num(r, i):
            try:
                return float(r[i].replace(",", ""))
            except (ValueError, IndexError):
                return 0.0
        reasons = [i for i, h in enumerate(head) if "stall" in h.lower() and i != col
                   and "Not-issued" not in h and "Sampling" not in h]
        total = sum(num(r, col) for r in body) or 1.0
        print(f"  {len(body)} SASS lines, {total:.0f} samples; top 40 lines:")
        for r in sorted(body, key=lambda r: -num(r, col))[:40]:
            top = sorted(((num(r, i), head[i]) for i in reasons), reverse=True)[:3]
            why = "; ".join(f"{h.split('(')[0].strip()[:24]} {v:.0f}" for v, h in top if v > 0)
            print(f"  {100 * num(r, col) / total:5.1f}% {r[addr]:>6} {r[src][:70]:70s} {why}")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    if sys.argv[1] == "--report":
        report(sys.argv[2])
    elif sys.argv[1] == "--sass":
        sass(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        run(sys.argv[1:])
