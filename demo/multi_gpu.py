"""``demo/train_lm.py --gpus N`` (N >= 2): the demo model trained data-parallel over N GPUs of
one host with FSDP2 (``torch.distributed.fsdp.fully_shard``: each block, then the root),
NCCL, our modules inside (issue 22 item 5).

Launch (either):

    python3 demo/train_lm.py --gpus 2 [--quick] [--runs a,c]
        # spawns N processes (torch.multiprocessing, rendezvous on 127.0.0.1:<free port>)
    torchrun --standalone --nproc-per-node 2 demo/train_lm.py --gpus 2 [--quick]
        # torchrun's processes (WORLD_SIZE must equal --gpus); each runs as its rank
    python3 demo/train_lm.py --gpus 2 --cpu-smoke
        # no GPU: 2 CPU processes over gloo, the toy model and the torch stand-ins of our ops

Every process sets NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
NVSHMEM_DISABLE_NVLS=1 (NVLink multicast off) before the process group starts.

Runs: the eager ones, (a) torch, (c) ours, (e) torch with seed 1 (default a,c); the compiled
runs (b), (d), the kernel census and the generated text are single-GPU only. The model, its
seeded init (on each rank, before sharding: the same weights as the single-GPU run), the
batches (the single-GPU run's sequences of each step, rank r taking the r-th of N equal slices)
and the optimizer settings (AdamW with foreach, not fused) are the single-GPU run's; every rank
computes the mean loss of its slice under bf16 autocast with fp32 parameters, FSDP2 averages
the gradients (reduce-scatter), so each step's loss (the mean of the ranks' losses, all-reduced)
and update are those of the single-GPU step up to summation order: compare this run's
``train_lm_gpus<N>.json`` with ``train_lm.json`` of ``--runs a,c`` on one GPU. Reported: the
same table and parity check as one GPU (tokens/s counts the tokens of all ranks per step;
peak memory is the largest rank's).
"""

import datetime
import json
import os
import socket
import statistics
import sys
import tempfile
import time

from train_lm import (EXIT_ENV, EXIT_FAIL, EXIT_NO_QUACK, EXIT_PROBE, FINAL_WINDOW, RUNS,
                      TIMING_WARMUP, DemoExit, batch_starts, final_loss, free_memory,
                      import_quack, load_data, make_train_step, print_summary, print_table,
                      summarize, val_loss)

NVLS_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
            "NVSHMEM_DISABLE_NVLS": "1"}
EAGER_RUNS = ("a", "c", "e")


def check(args):
    """torch, or DemoExit with one line naming what is missing or refused."""
    n = args.gpus
    bad = [r for r in args.runs if r not in EAGER_RUNS]
    if bad:
        raise DemoExit(EXIT_ENV, f"train_lm: --gpus {n} trains the eager runs a, c, e only; "
                                 f"drop {','.join(bad)} from --runs (compiled runs: one GPU)")
    try:
        import torch
    except ImportError:
        raise DemoExit(EXIT_ENV, "train_lm: needs PyTorch (python3 cannot import torch)") from None
    import torch.distributed as dist
    if not dist.is_available():
        raise DemoExit(EXIT_ENV, f"train_lm: --gpus {n} needs torch.distributed; torch "
                                 f"{torch.__version__} has none")
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        raise DemoExit(EXIT_ENV, f"train_lm: --gpus {n} needs FSDP2 "
                                 "(torch.distributed.fsdp.fully_shard); torch "
                                 f"{torch.__version__} has none") from None
    from lm import CONFIG, TINY
    batch = (TINY if args.cpu_smoke else CONFIG)["batch"]
    if batch % n:
        raise DemoExit(EXIT_ENV, f"train_lm: --gpus {n} must divide the batch of {batch} "
                                 "sequences (each rank takes an equal slice)")
    if args.cpu_smoke:
        return torch
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count < n:
        raise DemoExit(EXIT_ENV, f"train_lm: --gpus {n} needs {n} CUDA GPUs; torch "
                                 f"{torch.__version__} sees {count} (--gpus 1, the default, "
                                 "trains on one; --cpu-smoke --gpus 2 runs 2 CPU processes)")
    if not dist.is_nccl_available():
        raise DemoExit(EXIT_ENV, f"train_lm: --gpus {n} needs NCCL; torch "
                                 f"{torch.__version__} was built without it")
    return torch


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(args):
    """Entry from train_lm.main for --gpus N > 1: the exit code (DemoExit for the one-line
    refusals)."""
    check(args)
    os.environ.update(NVLS_OFF)  # inherited by the spawned processes; set again in each
    if "LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        world = int(os.environ["WORLD_SIZE"])
        if world != args.gpus:
            raise DemoExit(EXIT_ENV, f"train_lm: torchrun started {world} processes, --gpus "
                                     f"says {args.gpus}; make them equal")
        return worker(int(os.environ["LOCAL_RANK"]), world, args, "env://", None,
                      int(os.environ.get("RANK", os.environ["LOCAL_RANK"])))
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as d:
        result = os.path.join(d, "code.json")
        try:
            mp.spawn(worker, args=(args.gpus, args, f"tcp://127.0.0.1:{_free_port()}", result),
                     nprocs=args.gpus, join=True)
        except Exception as e:  # noqa: BLE001 - a rank died: its traceback is above
            print(f"train_lm: --gpus {args.gpus}: a process failed: "
                  f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e) else ''}",
                  flush=True)
            return EXIT_FAIL
        with open(result) as f:
            code = json.load(f)
    if code.get("message"):
        print(code["message"], flush=True)
    return code["code"]


def worker(local_rank, world, args, init_method, result_path, rank=None):
    """One rank: the process group, the data, the parts, the runs; rank 0 reports."""
    os.environ.update(NVLS_OFF)
    import torch
    import torch.distributed as dist

    rank = local_rank if rank is None else rank
    if args.cpu_smoke:
        device, backend = torch.device("cpu"), "gloo"
        torch.set_num_threads(1)
    else:
        torch.cuda.set_device(local_rank)
        device, backend = torch.device("cuda", local_rank), "nccl"
        torch.set_float32_matmul_precision("high")
    if rank != 0:  # one report: the other ranks keep stderr (tracebacks) only
        sys.stdout = open(os.devnull, "w")
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(minutes=15))
    code, message = EXIT_FAIL, None
    try:
        code = _worker(args, rank, world, device)
    except DemoExit as e:
        code, message = e.code, str(e)
        if result_path is None:
            print(message, flush=True)
    finally:
        dist.destroy_process_group()
    if rank == 0 and result_path is not None:
        with open(result_path, "w") as f:
            json.dump({"code": code, "message": message}, f)
    return code


def _worker(args, rank, world, device):
    import torch
    from lm import CONFIG, TINY, torch_parts

    cfg = dict(TINY if args.cpu_smoke else CONFIG)
    t_start = time.perf_counter()
    meta, train, val, _tok = load_data(args.data, cfg["vocab"], device)
    env = dict(torch=torch.__version__, device=str(device), world=world,
               backend="gloo" if args.cpu_smoke else "nccl",
               nvls_off={k: os.environ.get(k) for k in NVLS_OFF})
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
    over = "CPU processes (gloo)" if args.cpu_smoke else "GPUs (NCCL)"
    print(f"train_lm --gpus {world}: FSDP2 over {world} {over}; "
          f"{cfg['n_layers']} layers, d {cfg['d_model']}, vocab {cfg['vocab']}, "
          f"{cfg['seq_len'] * cfg['batch']} tokens/step ({cfg['batch'] // world} sequences per "
          f"rank), {args.steps} steps/run, runs {','.join(args.runs)}", flush=True)
    parts = {"torch": torch_parts(device)}
    if "c" in args.runs:
        from ours import OpUnavailable, ProbeMismatch, cpu_stand_ins, ours_parts
        qc, label = (cpu_stand_ins(), "stand-in") if args.cpu_smoke else (import_quack(),
                                                                           "quack_cpp")
        want = (None if args.ours == "auto" else
                [] if args.ours == "none" else [o.strip() for o in args.ours.split(",")])
        try:
            parts["ours"] = ours_parts(qc, cfg, device, want, label=label)
        except ProbeMismatch as e:
            raise DemoExit(EXIT_PROBE, f"train_lm: {e}") from None
        except OpUnavailable as e:
            raise DemoExit(EXIT_NO_QUACK, f"train_lm: {e}") from None
        free_memory()
        print("ours in run (c):\n" + "\n".join(f"  {o}" for o in parts["ours"].ops))
        env["ours_used"] = parts["ours"].used

    runs = {}
    for label in args.runs:
        desc, pname, seed, _compiled = RUNS[label]
        runs[label] = fsdp_run(label, parts[pname], seed, cfg, args.steps, train, val, device,
                               rank, world)
    env["total_s"] = time.perf_counter() - t_start
    if rank != 0:
        return 0
    summary = summarize(runs, args.steps)
    print_table(runs, args.steps)
    print_summary(summary, runs)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"train_lm_gpus{world}.json")
    with open(path, "w") as f:
        json.dump(dict(config=dict(cfg, steps=args.steps, gpus=world, cpu_smoke=args.cpu_smoke,
                                   timing_warmup=TIMING_WARMUP, final_window=FINAL_WINDOW),
                       env=env, runs=runs, summary=summary), f, indent=1)
    print(f"wrote {path}\ntrain_lm: total {env['total_s']:.0f} s", flush=True)
    ok = all(all(x == x and abs(x) != float("inf") for x in r["losses"]) for r in runs.values())
    return 0 if ok and summary.get("parity_pass") is not False else EXIT_FAIL


def fsdp_run(label, parts, seed, cfg, steps, train, val, device, rank, world):
    """One run under FSDP2; every rank returns the same dict (the losses all-reduced)."""
    import torch
    import torch.distributed as dist
    from lm import LM, checksum, init_weights
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    desc = RUNS[label][0]
    cuda = device.type == "cuda"
    free_memory()
    torch.manual_seed(seed)
    model = LM(cfg, parts, device)
    init_weights(model, seed)  # the single-GPU weights, then sharded
    n_params = sum(p.numel() for p in model.parameters())
    chk = checksum(model)
    # The mesh names the device type: FSDP2's default mesh would take CUDA whenever a GPU is
    # visible, also for --cpu-smoke's CPU processes.
    mesh = init_device_mesh(device.type, (world,))
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh)
    fully_shard(model, mesh=mesh)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=cfg["betas"], eps=cfg["adam_eps"],
                            foreach=True)
    print(f"run {label}: {desc}, seed {seed}, {n_params / 1e6:.1f} M parameters sharded over "
          f"{world} ranks, init checksum {chk:.6f}", flush=True)

    T, b = cfg["seq_len"], cfg["batch"] // world
    starts = batch_starts(train.numel(), cfg, steps)[:, rank * b:(rank + 1) * b].to(device)
    offs = torch.arange(T + 1, device=device)
    losses = torch.zeros(steps, device=device)
    params = list(model.parameters())
    ac = dict(device_type=device.type, dtype=torch.bfloat16)

    step_fn = make_train_step(model, opt, params, train, starts, offs, losses, steps, cfg, ac)

    ev = ([(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
           for _ in range(steps)] if cuda else None)
    host_ms, first_step_s = [], None
    t0 = time.perf_counter()
    for step in range(steps):
        h0 = time.perf_counter()
        if cuda:
            ev[step][0].record()
        step_fn(step)
        if cuda:
            ev[step][1].record()
        if step == 0:
            if cuda:
                torch.cuda.synchronize(device)
            first_step_s = time.perf_counter() - h0
        host_ms.append((time.perf_counter() - h0) * 1e3)
        if step % 50 == 0 or step == steps - 1:
            mean = losses[step:step + 1].clone()
            dist.all_reduce(mean)
            print(f"  step {step:4d}  loss {mean.item() / world:.4f}", flush=True)
    if cuda:
        torch.cuda.synchronize(device)
        times = [a.elapsed_time(b_) for a, b_ in ev]
        peak = torch.tensor([torch.cuda.max_memory_allocated(device) / 2**30], device=device)
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)
        peak = float(peak)
    else:
        times, peak = host_ms, None
    train_s = time.perf_counter() - t0
    dist.all_reduce(losses)
    losses = (losses / world).tolist()

    # Validation: every rank runs the same sequences (FSDP2's collectives need the same
    # forwards on every rank), so every rank gets the whole split's loss.
    vl, vn = val_loss(model, val, T, offs, cfg, ac, device)

    timed = times[TIMING_WARMUP:] if len(times) > TIMING_WARMUP else times
    med = statistics.median(timed)
    res = dict(label=label, desc=f"{desc} x{world}", parts=parts.name, ops=parts.ops,
               used=parts.used, seed=seed, compiled=False, n_params=n_params,
               init_checksum=chk, losses=losses, step_ms=times, host_ms=host_ms,
               timed_from_step=steps - len(timed), median_step_ms=med,
               tokens_per_s=cfg["batch"] * T / (med / 1e3),
               final_loss=final_loss(losses), val_loss=vl / max(1, vn),
               peak_gib=peak, first_step_s=first_step_s, train_s=train_s, world=world)
    print(f"  final loss (mean of last {min(FINAL_WINDOW, steps)}) {res['final_loss']:.4f}, "
          f"val loss {res['val_loss']:.4f}, median step {med:.2f} ms, {res['tokens_per_s']:,.0f} "
          f"tokens/s" + (f", peak {peak:.2f} GiB (largest rank)" if peak is not None else ""),
          flush=True)
    model = opt = params = step_fn = None
    free_memory()
    return res
