"""The MLP block's fwd+bwd timed two ways, ours beside torch.compile, in both orders (diagnosis
of a method gap): triton do_bench (the acceptance method, L2 cleared before each call; its
median and its list of per-call times) and CUDA events around 10 back-to-back steps.

    python3 scripts/mlp_timing.py [relu_sq|swiglu]
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))



def events(torch, f, n=10):
    """ms per call of f over n back-to-back calls (one call first, untimed)."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    f()
    s.record()
    for _ in range(n):
        f()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / n


def main():
    """Both implementations by do_bench and by events, round 0 ours first, round 1 compile first."""
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__)
        return
    import torch
    import triton.testing as tt
    from bench_gemm_fused import mlp_calls, warm

    act = sys.argv[1] if len(sys.argv) > 1 else "relu_sq"
    calls = warm(torch, mlp_calls(torch, act, ["ours", "compile"]))
    for rnd, order in enumerate((["ours", "compile"], ["compile", "ours"])):
        for name in order:
            f = calls[name]
            db = tt.do_bench(f, warmup=25, rep=100, return_mode="median")
            db_all = tt.do_bench(f, warmup=25, rep=100, return_mode="all")
            ev = events(torch, f)
            print(f"round {rnd} {act} {name}: do_bench {db:.3f} ms (all: "
                  f"{', '.join(f'{t:.2f}' for t in db_all)}), events back-to-back {ev:.3f} ms")


if __name__ == "__main__":
    main()
