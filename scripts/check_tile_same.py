"""Bit-equality of gemm_dgated's outputs on forced A/B tiles against its production tile.

An A/B variant that changes only how data is staged (buffer counts, prefetches, orders of
loads) must give the production tile's bits. Exits 1 on any difference, naming tile, shape and output.
A forced tile that is not compiled runs the group's base instance (gemm.cpp), which would pass
unseen: --must-differ names tiles that must NOT give the base's bits (a diagnostic tile with
synthetic inputs, diag1), a control that the forcing reaches the kernels of this build.

    python3 scripts/check_tile_same.py --base 128x128ppa1d2 --tiles 128x128ppa2d2,128x128ppa3d2
"""
import argparse
import os
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True)
    p.add_argument("--tiles", required=True)
    p.add_argument("--must-differ", default="", help="tiles whose outputs must differ from --base's")
    p.add_argument("--shapes", default="16384x5632x2048,1000x1000x520,4096x2048x4096,130x4000x64")
    a = p.parse_args()
    import torch
    import quack_cpp

    bad = 0
    for s in a.shapes.split(","):
        M, N, K = (int(v) for v in s.split("x"))
        g = torch.Generator(device="cuda").manual_seed(M + N + K)
        dout = torch.randn(M, K, device="cuda", generator=g).bfloat16()
        W = (torch.randn(K, N, device="cuda", generator=g) * K ** -0.5).bfloat16()
        pre = (torch.randn(M, 2 * N, device="cuda", generator=g) * 2).bfloat16()

        def run(tile):
            os.environ["QUACK_GEMM_TILE"] = tile
            out = quack_cpp.gemm_dgated(dout, W, pre, "swiglu")
            torch.cuda.synchronize()
            return [t.clone() for t in (out if isinstance(out, (tuple, list)) else (out,)) if t is not None]

        ref = run(a.base)
        for t in a.tiles.split(","):
            got = run(t)
            for i, (x, y) in enumerate(zip(got, ref)):
                same = torch.equal(x.view(torch.int16), y.view(torch.int16))
                print(f"{t} {s} output {i}: {'same bits' if same else 'DIFFERS'}")
                bad += not same
        for t in filter(None, a.must_differ.split(",")):
            got = run(t)
            differs = any(not torch.equal(x.view(torch.int16), y.view(torch.int16)) for x, y in zip(got, ref))
            print(f"{t} {s} (control): {'differs, as it must' if differs else 'SAME BITS: the forcing did not reach it'}")
            bad += not differs
    os.environ.pop("QUACK_GEMM_TILE", None)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
