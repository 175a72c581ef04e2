"""Bit-equality of linear + cross-entropy's loss, dx and dweight across its dweight paths.

The accumulating dweight GEMMs (fp32 D = acc + C, every chunk after the first) run 128x192
pingpong with the C ring (128x192ppa1d2) by the rule; forced to the cooperative 128x256 they must
give the same bits (same K order per output element, so the same fp32 sums). Run AK1 checked
this on the tile then in the rule's place, 128x128ppa1d2 (not yet run on 128x192ppa1d2), and
the last chunk's bf16 store against a separate cast after the chunks (same bits).
This runs forward + backward per configuration and compares every output's bits against the
first one:
  new          QUACK_GEMM_TILE unset (the rule)
  old_tile     QUACK_GEMM_TILE=f32_mm:128x256
Exits 1 on any difference, naming configuration, shape and output.

    python3 scripts/check_lce_dw_bits.py [--shapes 8192x4096x32000:2048,16384x4096x128256:4096]

A shape is TxDxV:chunk (0: the C++ rule's chunk, which may follow the free memory; the default
forces 4096 at 16384x4096x128256, the rule's 4 chunks there).
"""
import argparse
import os
import sys

CONFIGS = {
    "new": {},
    "old_tile": {"QUACK_GEMM_TILE": "f32_mm:128x256"},
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="8192x4096x32000:2048,1000x320x1003:64,16384x4096x128256:4096")
    a = p.parse_args()
    import torch
    import quack_cpp

    bad = 0
    for spec in a.shapes.split(","):
        dims, chunk = spec.split(":")
        T, D, V = (int(v) for v in dims.split("x"))
        chunk = int(chunk) or None
        g = torch.Generator(device="cuda").manual_seed(T + D + V)
        x = torch.randn(T, D, device="cuda", generator=g).bfloat16().requires_grad_(True)
        W = (torch.randn(V, D, device="cuda", generator=g) * 0.02).bfloat16().requires_grad_(True)
        t = torch.randint(0, V, (T,), device="cuda", generator=g)

        def run(env):
            os.environ.pop("QUACK_GEMM_TILE", None)
            os.environ.update(env)
            x.grad = None
            W.grad = None
            loss = quack_cpp.linear_cross_entropy(x, W, t, chunk_size=chunk)
            loss.backward()
            torch.cuda.synchronize()
            return {"loss": loss.detach().clone(), "dx": x.grad.clone(), "dW": W.grad.clone()}

        ref = None
        for name, env in CONFIGS.items():
            got = run(env)
            if ref is None:
                ref = got
                continue
            for k in ("loss", "dx", "dW"):
                x0, x1 = ref[k], got[k]
                same = torch.equal(x0.view(-1).view(torch.int16 if x0.element_size() == 2 else torch.int32),
                                   x1.view(-1).view(torch.int16 if x1.element_size() == 2 else torch.int32))
                extra = "" if same else f" (max |diff| {(x0.float() - x1.float()).abs().max().item():.3g})"
                print(f"{name} vs new {spec} {k}: {'same bits' if same else 'DIFFERS'}{extra}", flush=True)
                bad += not same
        del ref, x, W, t
        torch.cuda.empty_cache()
    os.environ.pop("QUACK_GEMM_TILE", None)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
