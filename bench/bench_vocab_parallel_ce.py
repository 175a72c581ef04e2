"""Vocabulary-parallel cross-entropy over 2 GPUs, forward + backward, against the naive way
(issue 22's acceptance: >= 1.5x faster and <= 0.5x peak memory per rank at (16384, 128256)).

    python3 bench/bench_vocab_parallel_ce.py                       # 2 GPUs, (16384, 128256) bf16
    python3 bench/bench_vocab_parallel_ce.py --shapes 8192x32000,16384x128256 --world 2
    python3 bench/bench_vocab_parallel_ce.py --device cpu --shapes 64x512 --iters 2   # smoke test
                                                     # (gloo, CPU stand-ins of the kernels)

Each rank holds bf16 logits (M, V/world) (its vocabulary shard, requires_grad) and the same
targets (25 % ignored); one call = the mean loss, then ``loss.backward()`` into a fresh grad:

  ours   quack_cpp.distributed.vocab_parallel_cross_entropy(shard, target)
  naive  all_gather of the shards (torch.distributed.all_gather, then torch.cat to (M, V)),
         quack_cpp.cross_entropy on the full logits, the backward slicing this rank's columns
         of the full gradient (no communication in the backward: the loss is replicated)

Time: CUDA events around `--iters` calls after `--warmup` calls, a barrier before each impl;
the max over ranks of the mean time per call. Memory: peak allocated during the calls minus
allocated before (shard and target excluded, the gradient included), max over ranks. NVLink
multicast is off in every process (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1). Output: one line per (shape, impl), then the ratios.
"""

import argparse
import os
import socket
import sys

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
               ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="16384x128256", help="comma list of MxV")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    return p.parse_args(argv)


def _naive_fn(torch, dist):
    class Gather(torch.autograd.Function):
        @staticmethod
        def forward(ctx, shard, start):
            parts = [torch.empty_like(shard) for _ in range(dist.get_world_size())]
            dist.all_gather(parts, shard.contiguous())
            ctx.bounds = (start, start + shard.shape[1])
            return torch.cat(parts, 1)

        @staticmethod
        def backward(ctx, g):
            s, e = ctx.bounds
            return g[:, s:e], None

    return Gather.apply


def worker(rank, world, port, args):
    import torch
    import torch.distributed as dist

    if args.device == "cuda":
        torch.cuda.set_device(rank)
        dev, backend = torch.device("cuda", rank), "nccl"
    else:
        sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
        dev, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    import contextlib

    import quack_cpp
    import quack_cpp.distributed as qd

    ctx = contextlib.nullcontext()
    if args.device == "cpu":
        import cpu_stand_in
        ctx = cpu_stand_in.registered()
    gather = _naive_fn(torch, dist)
    cuda = args.device == "cuda"
    with ctx:
        for shape in args.shapes.split(","):
            M, V = (int(v) for v in shape.split("x"))
            Vr = V // world
            g = torch.Generator(device=dev).manual_seed(0)
            t = torch.randint(0, V, (M,), device=dev, generator=g)
            t[torch.rand(M, device=dev, generator=g) < 0.25] = -100
            shard = (torch.randn(M, Vr, device=dev, generator=g) * 2).to(torch.bfloat16)
            shard.requires_grad_()
            impls = {
                "ours": lambda: qd.vocab_parallel_cross_entropy(shard, t),
                "naive": lambda: quack_cpp.cross_entropy(gather(shard, rank * Vr), t),
            }
            res = {}
            for name, fn in impls.items():
                def call():
                    shard.grad = None
                    fn().backward()
                for _ in range(args.warmup):
                    call()
                dist.barrier()
                if cuda:
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                    shard.grad = None
                    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                        enable_timing=True)
                    t0.record()
                for _ in range(args.iters):
                    call()
                if cuda:
                    t1.record()
                    torch.cuda.synchronize()
                    ms = t0.elapsed_time(t1) / args.iters
                    mem = (torch.cuda.max_memory_allocated() - base) / 2**30
                else:
                    ms = mem = 0.0
                stats = torch.tensor([ms, mem], dtype=torch.float64, device=dev)
                dist.all_reduce(stats, op=dist.ReduceOp.MAX)
                res[name] = stats.tolist()
            if rank == 0:
                for name, (ms, mem) in res.items():
                    print(f"M={M} V={V} world={world} {name:6s} {ms:8.3f} ms  "
                          f"{mem:7.3f} GiB peak/rank", flush=True)
                if cuda:
                    (mo, go), (mn, gn) = res["ours"], res["naive"]
                    print(f"M={M} V={V} speedup naive/ours {mn / mo:.2f}x (bar >= 1.5)  "
                          f"memory ours/naive {go / gn:.2f} (bar <= 0.5)", flush=True)
    dist.destroy_process_group()


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torch.multiprocessing as mp

    if args.device == "cuda" and torch.cuda.device_count() < args.world:
        print(f"bench_vocab_parallel_ce: needs {args.world} GPUs, "
              f"found {torch.cuda.device_count()}")
        return 3
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(args.world, port, args), nprocs=args.world, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
