"""The acceptance method's copy at each anchor's size (diagnosis, not a bar; DESIGN §8's copy is
a 4 GiB one): `triton.testing.do_bench` (L2 flushed before each call) of `dst.copy_(src)` moving
the bytes a forward moves (M x N read, M x N written, bf16) and a backward's three streams (two
reads, one write, as two copies of M x N), beside the 4 GiB copy. Where the same-size copy reads
below 0.90 x the 4 GiB copy, the forward bar at that shape asks for more than a copy of its bytes
reaches by the same method.

  python3 scripts/diag_copy_sizes.py [--shapes 16384x4096,...] [--rounds 3]
"""
import argparse

import torch
from triton.testing import do_bench


def tbps(fn, nbytes, warmup, rep):
    return nbytes / do_bench(fn, warmup=warmup, rep=rep, return_mode="median") / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default="16384x4096,16384x32768,16384x131072,8192x262144")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=25)
    p.add_argument("--rep", type=int, default=100)
    a = p.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    ref_n = 1 << 31  # elements: the 4 GiB copy
    big = torch.empty(max(ref_n, 2 * max(m * n for m, n in shapes)), device="cuda",
                      dtype=torch.bfloat16).uniform_()
    big_dst = torch.empty_like(big)
    for r in range(a.rounds):
        ref = tbps(lambda: big_dst[:ref_n].copy_(big[:ref_n]), 2 * ref_n * 2, a.warmup, a.rep)
        print(f"round {r}: 4 GiB copy {ref:.3f} TB/s")
        for M, N in shapes:
            src = big[: M * N].view(M, N)
            dst = big_dst[: M * N].view(M, N)
            fwd = tbps(lambda: dst.copy_(src), 2 * M * N * 2, a.warmup, a.rep)
            # A backward's three streams: src read, src2 read, dst written (a + b into dst).
            src2 = big[M * N: 2 * M * N].view(M, N)
            bwd = tbps(lambda: torch.add(src, src2, out=dst), 3 * M * N * 2, a.warmup, a.rep)
            print(f"  {M}x{N}: copy {fwd:.3f} TB/s ({fwd / ref:.3f} x 4 GiB copy), "
                  f"add {bwd:.3f} TB/s ({bwd / ref:.3f} x)", flush=True)


if __name__ == "__main__":
    main()
