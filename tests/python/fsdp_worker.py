"""The model, the data and the per-process body of test_fsdp.py (torch.multiprocessing spawn):
one rank of `world` training a small model of quack_cpp.nn modules under FSDP2
(``torch.distributed.fsdp.fully_shard``), on the CPU (gloo, the CPU stand-ins of the kernels)
or on cuda:rank (NCCL). Every rank builds the same model (seeded) and takes its own slice of the
same seeded batches; it saves its losses, its gradients (full tensors), its parameters after the
steps, the state dicts and the probe losses, and the parent compares them with the unsharded
single-process run (``reference``). Needs torch and quack_cpp."""

import copy
import os
import sys

# NVLink multicast off in every process (the device tool's KINDS.md), before NCCL starts.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import contextlib  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

D, H, V = 32, 48, 80  # multiples of 8: MLP and LinearCrossEntropy take the kernels
ROWS = 8  # rows of one rank's micro-batch
STEPS, MICRO = 2, 2  # optimizer steps; micro-batches per step (gradient accumulation)
LR = 0.5


class Net(torch.nn.Module):
    """RMSNorm -> gated MLP (swiglu) -> LayerNorm -> MLP (relu_sq, biases) -> Linear (bias), with
    residuals; the loss is LinearCrossEntropy's plus CrossEntropyLoss's on a Linear's logits."""

    def __init__(self, fuse_grad_accum=False, checkpoint=False):
        import quack_cpp.nn as qnn

        super().__init__()
        self.checkpoint = checkpoint  # activation checkpointing of the two MLP blocks
        fuse = dict(fuse_grad_accum=fuse_grad_accum)
        self.norm1 = qnn.RMSNorm(D)
        self.mlp1 = qnn.MLP(D, H, activation="swiglu", **fuse)
        self.norm2 = qnn.LayerNorm(D)
        self.mlp2 = qnn.MLP(D, H, activation="relu_sq", bias=True, **fuse)
        self.proj = qnn.Linear(D, D, bias=True, **fuse)
        self.logits = qnn.Linear(D, V, **fuse)
        self.ce = qnn.CrossEntropyLoss(label_smoothing=0.1)
        self.head = qnn.LinearCrossEntropy(D, V, z_loss=1e-3, fuse_grad_accum=fuse_grad_accum)

    def _block(self, mlp, x):
        if self.checkpoint:  # recomputed in the backward (non-reentrant)
            from torch.utils.checkpoint import checkpoint
            return checkpoint(mlp, x, use_reentrant=False)
        return mlp(x)

    def forward(self, x, t):
        h = x + self._block(self.mlp1, self.norm1(x))
        h = h + self._block(self.mlp2, self.norm2(h))
        h = self.proj(h)
        return self.head(h, t) + self.ce(self.logits(h), t)


def build(seed, dev, fuse_grad_accum=False, checkpoint=False):
    """The model, initialised from `seed` (CPU generator: the same on every rank and device),
    the norms' weights and the biases randomised so that their gradients are not trivial."""
    torch.manual_seed(seed)
    m = Net(fuse_grad_accum, checkpoint)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.startswith("norm") or name.endswith("bias"):
                p.copy_(torch.randn(p.shape) * 0.1 + (1.0 if name.endswith("weight") else 0.0))
    return m.to(dev)


def batch(case, step, micro, rank, world):
    """(x (ROWS, D) float32, target (ROWS,) int64) of rank's slice of a micro-batch, on the CPU;
    about a quarter of the targets ignored (-100)."""
    g = torch.Generator().manual_seed(case["seed"] * 1000 + step * 100 + micro)
    x = torch.randn(world * ROWS, D, generator=g)
    t = torch.randint(0, V, (world * ROWS,), generator=g)
    t[torch.rand(world * ROWS, generator=g) < 0.25] = -100
    s = slice(rank * ROWS, (rank + 1) * ROWS)
    return x[s], t[s]


def probe(case):
    """The batch every rank evaluates after training and after loading a state dict."""
    g = torch.Generator().manual_seed(case["seed"] * 1000 + 999)
    return torch.randn(2 * ROWS, D, generator=g), torch.randint(0, V, (2 * ROWS,), generator=g)


def reference(case, world, dev):
    """The unsharded single-process run of the same steps: every micro-batch of every rank in
    turn, loss / (MICRO * world) (the ranks' mean of FSDP's reduce-scatter, the accumulation's
    1 / MICRO), gradients summed in float32. Mixed precision: the forward and backward run on a
    bfloat16 copy of the float32 parameters (FSDP2's param_dtype), the gradients are added in
    float32 (reduce_dtype). Returns (losses [step][micro][rank], grads of step 0 {name: fp32},
    parameters after the steps {name: fp32}, probe loss)."""
    m = build(case["seed"], dev)
    mp = case.get("mp", False)
    opt = torch.optim.SGD(m.parameters(), lr=LR)
    losses, grads0 = [], None
    for step in range(STEPS):
        run = copy.deepcopy(m).to(torch.bfloat16) if mp else m
        acc = {n: torch.zeros_like(p) for n, p in m.named_parameters()}
        per_micro = []
        for micro in range(MICRO):
            per_rank = []
            for rank in range(world):
                x, t = batch(case, step, micro, rank, world)
                x = x.to(dev).to(torch.bfloat16) if mp else x.to(dev)
                loss = run(x, t.to(dev))
                (loss / (MICRO * world)).backward()
                per_rank.append(loss.detach().float().cpu())
                for n, p in run.named_parameters():
                    acc[n] += p.grad.float()
                    p.grad = None
            per_micro.append(per_rank)
        losses.append(per_micro)
        for n, p in m.named_parameters():
            p.grad = acc[n].to(p.dtype)
        if step == 0:
            grads0 = {n: g.detach().cpu() for n, g in acc.items()}
        opt.step()
        opt.zero_grad(set_to_none=True)
    x, t = probe(case)
    run = copy.deepcopy(m).to(torch.bfloat16) if mp else m
    with torch.no_grad():
        px = x.to(dev).to(torch.bfloat16) if mp else x.to(dev)
        ploss = run(px, t.to(dev)).float().cpu()
    return losses, grads0, {n: p.detach().cpu() for n, p in m.named_parameters()}, ploss


def _build(case, offset, dev):
    """build() for a case: seed + offset, its fuse_grad_accum and checkpointing flags."""
    return build(case["seed"] + offset, dev, case.get("fuse", False), case.get("ac", False))


def shard(m, mesh, case):
    """fully_shard on every block and the head, then on the root (FSDP2's usual wrapping)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    kw = dict(mesh=mesh, reshard_after_forward=case.get("reshard", True))
    if case.get("mp"):
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                               reduce_dtype=torch.float32)
    for sub in (m.mlp1, m.mlp2, m.proj, m.logits, m.head):
        fully_shard(sub, **kw)
    fully_shard(m, **kw)
    return m


def _full(t):
    """A DTensor's full tensor (a plain tensor as it is), detached, on the CPU."""
    from torch.distributed.tensor import DTensor

    if isinstance(t, DTensor):
        t = t.full_tensor()
    return t.detach().cpu().clone()  # full_tensor() on a 1-rank mesh may share storage


def _probe_loss(m, case, dev):
    x, t = probe(case)
    with torch.no_grad():
        return m(x.to(dev), t.to(dev)).detach().float().cpu()


def run_case(case, rank, world, dev, mesh):
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         set_model_state_dict)
    from torch.distributed.tensor import DTensor

    if case.get("meta"):
        # FSDP2's large-model start: build on the meta device, shard, allocate the shards
        # (to_empty), run the modules' reset_parameters on the DTensors, then load the full
        # state dict that rank 0 holds (broadcast to the other ranks).
        with torch.device("meta"):
            m = Net(case.get("fuse", False), case.get("ac", False))
        shard(m, mesh, case)
        m.to_empty(device=dev)
        for sub in m.modules():
            if sub is not m and hasattr(sub, "reset_parameters"):
                sub.reset_parameters()
        out_reset = {n: _full(p) for n, p in m.named_parameters() if n.startswith("norm")}
        sd = build(case["seed"], "cpu").state_dict() if rank == 0 else {}
        set_model_state_dict(m, sd, options=StateDictOptions(full_state_dict=True,
                                                             broadcast_from_rank0=True))
    else:
        m = shard(_build(case, 0, dev), mesh, case)
        out_reset = {}
    out = {"reset": out_reset,"param_types": sorted({type(p).__name__ for p in m.parameters()}),
           "local_rows": {n: p.to_local().shape[0] for n, p in m.named_parameters()}}
    opt = torch.optim.SGD(m.parameters(), lr=LR)
    losses = []
    for step in range(STEPS):
        per_micro = []
        for micro in range(MICRO):
            # The last micro-batch reduce-scatters the accumulated gradients; the others keep
            # them unsharded on each rank (FSDP2's gradient accumulation).
            m.set_requires_gradient_sync(micro == MICRO - 1)
            x, t = batch(case, step, micro, rank, world)
            loss = m(x.to(dev), t.to(dev))
            (loss / MICRO).backward()
            per_micro.append(loss.detach().float().cpu())
        losses.append(per_micro)
        if step == 0:
            out["grad_types"] = sorted({type(p.grad).__name__ for p in m.parameters()})
            out["grads0"] = {n: _full(p.grad) for n, p in m.named_parameters()}
        opt.step()
        opt.zero_grad(set_to_none=True)
    out["losses"] = losses
    out["probe"] = _probe_loss(m, case, dev)

    # State dicts: the full one (plain tensors, every rank) and the sharded one (DTensors).
    full_opts = StateDictOptions(full_state_dict=True)
    full = get_model_state_dict(m, options=full_opts)
    out["full_sd"] = {k: v.detach().cpu() for k, v in full.items()}
    out["full_sd_types"] = sorted({type(v).__name__ for v in full.values()})
    m2 = shard(_build(case, 1, dev), mesh, case)
    set_model_state_dict(m2, full, options=full_opts)
    out["probe_full_loaded"] = _probe_loss(m2, case, dev)
    sharded = m.state_dict()
    out["sharded_sd_types"] = sorted({type(v).__name__ for v in sharded.values()})
    m3 = shard(_build(case, 2, dev), mesh, case)
    m3.load_state_dict(sharded)
    out["probe_sharded_loaded"] = _probe_loss(m3, case, dev)
    out["sharded_equal"] = all(
        torch.equal(_full(a), _full(b)) for a, b in zip(m.state_dict().values(),
                                                       m3.state_dict().values()))
    # The full state dict into a plain (unsharded) model: the same probe loss as the reference.
    plain = build(case["seed"] + 3, dev)
    plain.load_state_dict(out["full_sd"])
    if case.get("mp"):
        plain = plain.to(torch.bfloat16)
    x, t = probe(case)
    with torch.no_grad():
        px = x.to(dev).to(torch.bfloat16) if case.get("mp") else x.to(dev)
        out["probe_plain"] = plain(px, t.to(dev)).float().cpu()
    assert all(isinstance(p, DTensor) for p in m.parameters())
    return out


def dtensor_probe(dev, mesh):
    """Each kernel module with Replicate DTensor parameters (``distribute_module``), called
    outside FSDP2 on a Replicate DTensor input (bfloat16, so the kernels' path): {module name:
    "ok" or the error's type and first line}. DTensor's dispatch runs our custom ops on their
    sharding rules (quack_cpp._dtensor; FSDP2's forward hands the modules plain unsharded
    tensors, so it needs none)."""
    import quack_cpp.nn as qnn
    from torch.distributed.tensor import Replicate, distribute_module, distribute_tensor

    mods = {"RMSNorm": lambda: qnn.RMSNorm(D), "LayerNorm": lambda: qnn.LayerNorm(D),
            "Linear": lambda: qnn.Linear(D, D, bias=True),
            "MLP": lambda: qnn.MLP(D, H, activation="swiglu")}
    res = {}
    for name, make in mods.items():
        torch.manual_seed(0)
        m = distribute_module(make().to(dev).to(torch.bfloat16), mesh)
        x = distribute_tensor(torch.randn(ROWS, D).to(dev).to(torch.bfloat16), mesh,
                              [Replicate()])
        try:
            m(x)
            res[name] = "ok"
        except Exception as e:  # noqa: BLE001 (recorded for the parent)
            res[name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return res


def _counting(stand_ins, counts):
    def wrap(name, fn):
        def counted(*args, **kwargs):
            counts[name] = counts.get(name, 0) + 1
            return fn(*args, **kwargs)
        return counted
    return {name: wrap(name, fn) for name, fn in stand_ins.items()}


def main(rank, world, port, cases, outdir, device, probe_dtensor=False):
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
            # Count the stand-ins' calls: the parent checks that the kernels ran, not torch.
            cpu_stand_in.STAND_INS = _counting(cpu_stand_in.STAND_INS, counts)
            ctx = cpu_stand_in.registered()
        with ctx:
            mesh = init_device_mesh(device, (world,))
            for i, case in enumerate(cases):
                counts.clear()
                out = run_case(case, rank, world, dev, mesh)
                out["counts"] = dict(counts)
                torch.save(out, os.path.join(outdir, f"{i}_{rank}.pt"))
            if probe_dtensor:
                torch.save(dtensor_probe(dev, mesh), os.path.join(outdir, f"dtensor_{rank}.pt"))
        dist.barrier()  # no rank tears its connections down while another is in a collective
    finally:
        dist.destroy_process_group()
    distributed_worker.exit_worker()
