"""Worker of test_fsdp.py's DTensor tests: quack_cpp modules and functions on DTensors outside
FSDP2 (torch.distributed.tensor.parallel plans and hand-placed DTensors), each case against
the unsharded run of the same module on the same rank (so no reference travels between
processes). Every case records {name: "ok" or the error}, and its outputs / gradients (full
tensors) next to the unsharded ones, for the parent to compare."""

import contextlib
import os

import torch

D, H, ROWS = 16, 32, 8


def _full(t):
    from torch.distributed.tensor import DTensor

    if isinstance(t, DTensor):
        t = t.full_tensor()
    return t.detach().float().cpu().clone()


def _grads(m):
    return {n: _full(p.grad) for n, p in m.named_parameters()}


def _run(m, x, mesh=None):
    """Output (full) and parameter / input gradients of loss = sum(y * c) for a fixed c; with
    a mesh, x goes in as a row-sharded DTensor (sequence parallelism's input)."""
    x = x.detach().clone()
    if mesh is not None:
        from torch.distributed.tensor import Shard, distribute_tensor
        x = distribute_tensor(x, mesh, [Shard(0)])
    x.requires_grad_(True)
    y = m(x)
    yf = y.full_tensor() if hasattr(y, "full_tensor") else y
    c = torch.linspace(-1, 1, yf.numel()).reshape(yf.shape).to(yf.dtype)
    (yf.float() * c.float()).sum().backward()
    return {"y": _full(yf), "dx": _full(x.grad), "grads": _grads(m)}


def _cases(dev, mesh):
    import quack_cpp.nn as qnn
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                                   PrepareModuleOutput, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)
    from torch.distributed.tensor import Partial

    bf16 = torch.bfloat16

    def mlp_plan(m):
        parallelize_module(m, mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
        # MLP's forward calls the fused kernels with fc1.weight / fc2.weight, not fc1() and
        # fc2(): the plan's module hooks go on the MLP itself.
        parallelize_module(m, mesh, PrepareModuleInput(input_layouts=Replicate(),
                                                       desired_input_layouts=Replicate()))
        parallelize_module(m, mesh, PrepareModuleOutput(output_layouts=Partial(),
                                                        desired_output_layouts=Replicate()))
        return m

    class Block(torch.nn.Module):
        """Megatron sequence-parallel pattern: norm on row shards, column- then row-parallel
        Linear (all-gather before, reduce-scatter after)."""

        def __init__(self):
            super().__init__()
            self.norm = qnn.RMSNorm(D)
            self.up = qnn.Linear(D, H, bias=True)
            self.down = qnn.Linear(H, D, bias=True)

        def forward(self, x):
            return self.down(self.up(self.norm(x)))

    def block_plan(m):
        return parallelize_module(m, mesh, {
            "norm": SequenceParallel(sequence_dim=0, use_local_output=False),
            "up": ColwiseParallel(input_layouts=Shard(0)),
            "down": RowwiseParallel(output_layouts=Shard(0), use_local_output=False)})

    return {
        "Linear colwise": (lambda: qnn.Linear(D, H, bias=True),
                           lambda m: parallelize_module(
                               m, mesh, ColwiseParallel(output_layouts=Replicate()))),
        "Linear rowwise": (lambda: qnn.Linear(H, D, bias=True),
                           lambda m: parallelize_module(m, mesh, RowwiseParallel(
                               input_layouts=Replicate()))),
        "RMSNorm sequence": (lambda: qnn.RMSNorm(D), lambda m: parallelize_module(
            m, mesh, SequenceParallel(sequence_dim=0, use_local_output=False))),
        "LayerNorm sequence": (lambda: qnn.LayerNorm(D), lambda m: parallelize_module(
            m, mesh, SequenceParallel(sequence_dim=0, use_local_output=False))),
        "MLP swiglu": (lambda: qnn.MLP(D, H, activation="swiglu"), mlp_plan),
        "MLP relu_sq": (lambda: qnn.MLP(D, H, activation="relu_sq", bias=True), mlp_plan),
        "Block": (Block, block_plan),
    }


def tp_cases(dev, mesh):
    res = {}
    x = torch.randn(ROWS, 64, generator=torch.Generator().manual_seed(7))
    for name, (make, plan) in _cases(dev, mesh).items():
        torch.manual_seed(0)
        ref_m = make().to(dev).to(torch.bfloat16)
        torch.manual_seed(0)
        m = plan(make().to(dev).to(torch.bfloat16))
        width = ref_m.fc1.in_features if hasattr(ref_m, "fc1") else (
            ref_m.in_features if hasattr(ref_m, "in_features") else D)
        xi = x[:, :width].to(dev).to(torch.bfloat16)
        try:
            out = _run(m, xi, mesh if ("sequence" in name or name == "Block") else None)
            res[name] = {"outcome": "ok", "got": out, "ref": _run(ref_m, xi)}
        except Exception as e:  # noqa: BLE001 (recorded for the parent)
            res[name] = {"outcome": f"{type(e).__name__}: "
                                    f"{str(e).splitlines()[0] if str(e) else ''}"}
    return res


def function_cases(dev, mesh):
    """quack_cpp functions on hand-placed DTensors: rows sharded (Shard(0)) and Replicate."""
    import quack_cpp
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    res = {}
    g = torch.Generator().manual_seed(11)
    x = torch.randn(ROWS, D, generator=g)
    t = torch.randint(0, D, (ROWS,), generator=g)
    fns = {
        "softmax": lambda a, tt: quack_cpp.softmax(a),
        "log_softmax": lambda a, tt: quack_cpp.log_softmax(a),
        "cross_entropy none": lambda a, tt: quack_cpp.cross_entropy(a, tt, reduction="none"),
        "cross_entropy sum": lambda a, tt: quack_cpp.cross_entropy(a, tt, reduction="sum"),
        "cross_entropy mean": lambda a, tt: quack_cpp.cross_entropy(a, tt),
    }
    for name, fn in fns.items():
        for pl in (Shard(0), Replicate()):
            key = f"{name} {pl}"
            try:
                xd = distribute_tensor(x.to(dev), mesh, [pl]).requires_grad_(True)
                td = distribute_tensor(t.to(dev), mesh, [pl])
                y = fn(xd, td)
                yf = y.full_tensor()
                c = torch.linspace(-1, 1, yf.numel()).reshape(yf.shape)
                (yf * c).sum().backward()
                xr = x.to(dev).clone().requires_grad_(True)
                yr = fn(xr, t.to(dev))
                (yr * c).sum().backward()
                res[key] = {"outcome": "ok", "got": {"y": _full(yf), "dx": _full(xd.grad)},
                            "ref": {"y": _full(yr), "dx": _full(xr.grad)},
                            "placements": [str(p) for p in y.placements]}
            except Exception as e:  # noqa: BLE001
                res[key] = {"outcome": f"{type(e).__name__}: "
                                       f"{str(e).splitlines()[0] if str(e) else ''}"}
    return res


def topk_cases(dev, mesh):
    """quack_cpp.topk (softmax False, True, "pre") on row-sharded and Replicate DTensors (the
    ROW rule of topk_fwd / topk_bwd): values, indices, dx and the placements."""
    import quack_cpp
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    res = {}
    x = torch.randn(ROWS, D, generator=torch.Generator().manual_seed(13))
    for sm in (False, True, "pre"):
        for pl in (Shard(0), Replicate()):
            key = f"topk softmax={sm} {pl}"
            try:
                xd = distribute_tensor(x.to(dev), mesh, [pl]).requires_grad_(True)
                v, i = quack_cpp.topk(xd, 4, softmax=sm)
                c = torch.linspace(-1, 1, ROWS * 4).reshape(ROWS, 4)
                vf = v.full_tensor()
                (vf * c.to(vf.device)).sum().backward()
                xr = x.to(dev).clone().requires_grad_(True)
                vr, ir = quack_cpp.topk(xr, 4, softmax=sm)
                (vr * c.to(vr.device)).sum().backward()
                res[key] = {"outcome": "ok",
                            "got": {"y": _full(vf), "idx": i.full_tensor().cpu(),
                                    "dx": _full(xd.grad)},
                            "ref": {"y": _full(vr), "idx": ir.cpu(), "dx": _full(xr.grad)},
                            "placements": [str(p) for p in v.placements + i.placements]}
            except Exception as e:  # noqa: BLE001
                res[key] = {"outcome": f"{type(e).__name__}: "
                                       f"{str(e).splitlines()[0] if str(e) else ''}"}
    return res


def linear_cross_entropy_cases(dev, mesh):
    """quack_cpp.linear_cross_entropy ('none', 'sum', 'mean') with x and target row-sharded or
    Replicate and a Replicate weight (the rules of linear_cross_entropy_fwd / _bwd); and
    nn.LinearCrossEntropy with Replicate DTensor parameters (``distribute_module``). Loss, dx,
    dweight against the plain run; the loss's placements."""
    import quack_cpp
    import quack_cpp.nn as qnn
    from torch.distributed.tensor import Replicate, Shard, distribute_module, distribute_tensor

    res = {}
    V, bf16 = 64, torch.bfloat16
    g = torch.Generator().manual_seed(17)
    x = torch.randn(ROWS, D, generator=g).to(bf16)
    w = (torch.randn(V, D, generator=g) / 4).to(bf16)
    t = torch.randint(0, V, (ROWS,), generator=g)
    t[1] = -100  # an ignored token
    for red in ("none", "sum", "mean"):
        for pl in (Shard(0), Replicate()):
            key = f"linear_cross_entropy {red} {pl}"
            try:
                xd = distribute_tensor(x.to(dev), mesh, [pl]).requires_grad_(True)
                td = distribute_tensor(t.to(dev), mesh, [pl])
                wd = distribute_tensor(w.to(dev), mesh, [Replicate()]).requires_grad_(True)
                y = quack_cpp.linear_cross_entropy(xd, wd, td, reduction=red)
                yf = y.full_tensor()
                c = torch.linspace(0.5, 1.5, yf.numel()).reshape(yf.shape).to(yf.device)
                (yf * c).sum().backward()
                xr = x.to(dev).clone().requires_grad_(True)
                wr = w.to(dev).clone().requires_grad_(True)
                yr = quack_cpp.linear_cross_entropy(xr, wr, t.to(dev), reduction=red)
                (yr * c).sum().backward()
                res[key] = {"outcome": "ok",
                            "got": {"y": _full(yf), "dx": _full(xd.grad), "dw": _full(wd.grad)},
                            "ref": {"y": _full(yr), "dx": _full(xr.grad), "dw": _full(wr.grad)},
                            "placements": [str(p) for p in y.placements]}
            except Exception as e:  # noqa: BLE001
                res[key] = {"outcome": f"{type(e).__name__}: "
                                       f"{str(e).splitlines()[0] if str(e) else ''}"}
    key = "LinearCrossEntropy module"
    try:
        torch.manual_seed(0)
        m = distribute_module(qnn.LinearCrossEntropy(D, V).to(dev).to(bf16), mesh)
        torch.manual_seed(0)
        ref_m = qnn.LinearCrossEntropy(D, V).to(dev).to(bf16)
        xd = distribute_tensor(x.to(dev), mesh, [Replicate()]).requires_grad_(True)
        td = distribute_tensor(t.to(dev), mesh, [Replicate()])
        y = m(xd, td)
        y.full_tensor().backward()
        xr = x.to(dev).clone().requires_grad_(True)
        yr = ref_m(xr, t.to(dev))
        yr.backward()
        res[key] = {"outcome": "ok",
                    "got": {"y": _full(y), "dx": _full(xd.grad), "dw": _full(m.weight.grad)},
                    "ref": {"y": _full(yr), "dx": _full(xr.grad), "dw": _full(ref_m.weight.grad)},
                    "placements": [str(p) for p in y.placements]}
    except Exception as e:  # noqa: BLE001
        res[key] = {"outcome": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
    return res


def main(rank, world, port, outdir, device):
    import distributed_worker
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    if device == "cuda":
        torch.cuda.set_device(rank)
        dev, backend = torch.device("cuda", rank), "nccl"
    else:
        dev, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        counts = {}
        ctx = contextlib.nullcontext()
        if device == "cpu":
            import cpu_stand_in
            import fsdp_worker
            cpu_stand_in.STAND_INS = fsdp_worker._counting(cpu_stand_in.STAND_INS, counts)
            ctx = cpu_stand_in.registered()
        with ctx:
            mesh = init_device_mesh(device, (world,))
            out = {"tp": tp_cases(dev, mesh), "functions": function_cases(dev, mesh),
                   "topk": topk_cases(dev, mesh), "lce": linear_cross_entropy_cases(dev, mesh)}
            out["counts"] = dict(counts)
            torch.save(out, os.path.join(outdir, f"dtensor_{rank}.pt"))
        dist.barrier()  # no rank tears its connections down while another is in a collective
    finally:
        dist.destroy_process_group()
    distributed_worker.exit_worker()
