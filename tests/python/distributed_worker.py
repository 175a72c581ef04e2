"""The per-process body of test_distributed.py's multi-process tests (torch.multiprocessing
spawn): one rank of a group of `world`, on the CPU (gloo, the CPU stand-ins of the kernels) or
on cuda:rank (NCCL). Each case's inputs come from a seeded generator on the CPU (identical on
every rank); the rank saves its outputs to `outdir`, and the parent compares them with the
unsharded float64 reference. Needs torch and quack_cpp."""

import ctypes
import os
import sys

# NVLink multicast off in every process (the device tool's KINDS.md), before NCCL starts.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import contextlib  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def ce_inputs(case):
    """(logits (M, V) float32 on the CPU, target (M,) int64, grad_output) of a CE case."""
    g = torch.Generator().manual_seed(case["seed"])
    M, V = case["M"], case["V"]
    x = torch.randn(M, V, generator=g) * 2.0
    t = torch.randint(0, V, (M,), generator=g)
    t[torch.rand(M, generator=g) < 0.25] = -100
    if case.get("bad_row") is not None:
        t[case["bad_row"]] = V + 3
    dl = (torch.rand(M, generator=g) + 0.5) if case["reduction"] == "none" else torch.tensor(0.7)
    return x, t, dl


def bounds(case, rank):
    """[start, end) of rank's vocabulary shard: `splits` (cumulative ends) or equal shards."""
    ends = case.get("splits")
    if ends is None:
        Vr = case["V"] // case["world"]
        return rank * Vr, (rank + 1) * Vr
    return (ends[rank - 1] if rank else 0), ends[rank]


def mlp_inputs(case):
    g = torch.Generator().manual_seed(case["seed"])
    M, K, H, N = case["M"], case["K"], case["H"], case["N"]
    x = torch.randn(M, K, generator=g)
    w1 = torch.randn(H, K, generator=g) / K ** 0.5
    b1 = torch.randn(H, generator=g) * 0.1
    w2 = torch.randn(N, H, generator=g) / H ** 0.5
    b2 = torch.randn(N, generator=g) * 0.1
    c = torch.randn(M, N, generator=g)
    return x, w1, b1, w2, b2, c


def lce_inputs(case):
    """(x (M, D), W (V, D), target, grad_output) float32 on the CPU of a linear + CE case."""
    g = torch.Generator().manual_seed(case["seed"])
    M, D, V = case["M"], case["D"], case["V"]
    x = torch.randn(M, D, generator=g)
    w = torch.randn(V, D, generator=g) * (2.0 / D ** 0.5)
    t = torch.randint(0, V, (M,), generator=g)
    t[torch.rand(M, generator=g) < 0.25] = -100
    return x, w, t, torch.tensor(0.7)


def _run_lce(case, rank, world, dev, group):
    import quack_cpp.distributed as qd

    x, w, t, dl = lce_inputs(case)
    s, e = bounds(case, rank)
    dt = case["dtype"]
    xx = x.to(dt).to(dev).requires_grad_()
    wr = w[s:e].to(dt).to(dev).requires_grad_()
    kw = {}
    if case.get("splits") is not None:
        kw = dict(vocab_start=s, vocab_size=case["V"])
    loss = qd.vocab_parallel_linear_cross_entropy(xx, wr, t.to(dev), group,
                                                  reduction=case["reduction"],
                                                  label_smoothing=case["eps"], **kw)
    loss.backward(dl.to(dev))
    return {"loss": loss.detach().cpu(), "dx": xx.grad.cpu(), "dw": wr.grad.cpu()}


def _run_ce(case, rank, world, dev, group):
    import quack_cpp.distributed as qd

    x, t, dl = ce_inputs(case)
    s, e = bounds(case, rank)
    shard = x[:, s:e].to(case["dtype"]).to(dev).requires_grad_()
    kw = {}
    if case.get("splits") is not None:
        kw = dict(vocab_start=s, vocab_size=case["V"])
    tt = t.to(case.get("target_dtype", torch.int64)).to(dev)
    loss, lse = qd.vocab_parallel_cross_entropy(
        shard, tt, group, reduction=case["reduction"], label_smoothing=case["eps"],
        z_loss=case.get("z_loss", 0.0), return_lse=True, **kw)
    loss.backward(dl.to(dev))
    return {"loss": loss.detach().cpu(), "lse": lse.cpu(), "grad": shard.grad.cpu()}


def _run_mlp(case, rank, world, dev, group):
    import quack_cpp.distributed as qd

    x, w1, b1, w2, b2, c = mlp_inputs(case)
    H = case["H"]
    s, e = rank * H // world, (rank + 1) * H // world
    dt = case["dtype"]
    xx = x.to(dt).to(dev).requires_grad_()
    w1r = w1[s:e].to(dt).to(dev).requires_grad_()
    b1r = b1[s:e].to(dt).to(dev).requires_grad_()
    w2r = w2[:, s:e].to(dt).to(dev).requires_grad_()
    b2d = b2.to(dt).to(dev).requires_grad_()
    h = qd.column_parallel_linear(xx, w1r, b1r, group)
    y = qd.row_parallel_linear(torch.nn.functional.gelu(h), w2r, b2d, group)
    (y.float() * c.to(dev)).sum().backward()
    return {"y": y.detach().cpu(), "dx": xx.grad.cpu(), "dw1": w1r.grad.cpu(),
            "db1": b1r.grad.cpu(), "dw2": w2r.grad.cpu(), "db2": b2d.grad.cpu()}


def exit_worker():
    """End a spawned worker with status 0 once its outputs are written and its process group
    destroyed, without the interpreter's finalization: gloo's threads can still hold work
    objects then, and tearing those down can abort the process ('terminate called without an
    active exception', SIGABRT, seen in CI in test_fsdp2_matches_unsharded[2]; the
    mechanism: pytorch/pytorch PR 179291). An exception in the worker never gets here: spawn
    reports it."""
    sys.stdout.flush()
    sys.stderr.flush()
    ctypes.CDLL(None).fflush(None)  # C stdio too (NCCL_DEBUG, the extensions' printf)
    os._exit(0)


def main(rank, world, port, cases, outdir, device):
    import torch.distributed as dist

    if device == "cuda":
        torch.cuda.set_device(rank)
        dev, backend = torch.device("cuda", rank), "nccl"
    else:
        dev, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        ctx = contextlib.nullcontext()
        if device == "cpu":
            import cpu_stand_in
            ctx = cpu_stand_in.registered()
        with ctx:
            sub = dist.new_group(list(range(world)))
            for i, case in enumerate(cases):
                group = sub if case.get("explicit_group") else None
                run = {"mlp": _run_mlp, "ce": _run_ce, "lce": _run_lce}[case["kind"]]
                out = run(case, rank, world, dev, group)
                torch.save(out, os.path.join(outdir, f"{i}_{rank}.pt"))
        dist.barrier()  # no rank tears its connections down while another is in a collective
    finally:
        dist.destroy_process_group()
    exit_worker()
