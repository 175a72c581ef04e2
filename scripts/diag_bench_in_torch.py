"""quack-bench's own timing loop inside this Python process (diagnosis, not a bar).

    python3 scripts/diag_bench_in_torch.py --lib build/d/bench/libquack-bench-lib.so \
        --torch acceptance -- softmax --shapes 16384x65536 --dir fwd

Our row kernels read 3.5-6 % slower by the acceptance method in Python than under the
quack-bench executable (docs/status.md, the in-process gap). This calls quack-bench's main
(the shared library of bench/CMakeLists.txt: the same code, buffers and spin-kernel timing)
from Python, after --torch sets the process up:
  none        no torch imported (the Python process alone);
  init        torch imported and its CUDA context made (one tensor on the GPU);
  acceptance  as `init`, then the bench's shape timed by do_bench on the public call first
              (softmax / log_softmax / rmsnorm / layernorm fwd, bf16: the acceptance method's
              state: the 256 MB L2-clear buffer, the caching allocator's segments, quack_cpp).
quack-bench in this process reading as the executable does says the method is the difference;
reading as slow as do_bench says the process is (run AI4: the method).

--mode splits the method further (softmax fwd bf16, the first --shapes entry; torch needed):
  ptrs    quack-bench's timing loop and public C++ call on torch's x and output tensors
          (quack_bench_softmax_fwd_ms): slow here -> torch's buffers;
  pyloop  the public Python call (quack_cpp.softmax) timed from Python behind quack-bench's own
          spin kernel (quack_bench_gpu_busy), torch events around the call alone: slow here
          with ptrs fast -> the Python call path (the _C entry, the output's allocation).
"""

import argparse
import ctypes
import sys


def setup_torch(mode, bench_args):
    if mode == "none":
        return
    import torch
    torch.zeros(1, device="cuda")
    if mode != "acceptance":
        return
    import quack_cpp
    from triton.testing import do_bench
    op = bench_args[0]
    shape = bench_args[bench_args.index("--shapes") + 1].split(",")[0]
    M, N = (int(v) for v in shape.split("x"))
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(N, device="cuda", dtype=torch.float32)
    call = {"softmax": lambda: quack_cpp.softmax(x),
            "rmsnorm": lambda: quack_cpp.rmsnorm(x, w),
            "layernorm": lambda: quack_cpp.layernorm(x, w, None)}[op]
    ms = do_bench(call, warmup=25, rep=200)
    tbps = 2 * x.numel() * x.element_size() / ms / 1e9
    print(f"do_bench {op} {M}x{N} bf16: {ms:.4f} ms, {tbps:.3f} TB/s (in this process, first)")


def split_method(lib, mode, bench_args):
    """--mode ptrs / pyloop: median ms of softmax fwd bf16 at the first --shapes entry."""
    import statistics
    import torch
    import quack_cpp
    shape = bench_args[bench_args.index("--shapes") + 1].split(",")[0]
    M, N = (int(v) for v in shape.split("x"))
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    nbytes = 2 * x.numel() * x.element_size()
    if mode == "ptrs":
        y = torch.empty_like(x)
        lib.quack_bench_softmax_fwd_ms.restype = ctypes.c_double
        ms = lib.quack_bench_softmax_fwd_ms(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()),
                                            ctypes.c_longlong(M), ctypes.c_longlong(N), ctypes.c_double(200.0))
        torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), atol=1e-2, rtol=1e-2)
    else:
        lib.quack_bench_gpu_busy.argtypes = [ctypes.c_double]
        quack_cpp.softmax(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(100):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            assert lib.quack_bench_gpu_busy(100.0) == 0
            a.record()
            quack_cpp.softmax(x)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        ms = statistics.median(times)
    print(f"{mode}: softmax fwd {M}x{N} bf16 {ms:.4f} ms, {nbytes / ms / 1e9:.3f} TB/s")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--torch", choices=["none", "init", "acceptance"], default="acceptance")
    ap.add_argument("--mode", choices=["main", "ptrs", "pyloop"], default="main")
    ap.add_argument("bench", nargs=argparse.REMAINDER, help="-- then quack-bench's arguments")
    a = ap.parse_args()
    bench_args = a.bench[1:] if a.bench[:1] == ["--"] else a.bench
    if a.mode != "main":
        # torch and quack_cpp before the library (run AJ1: loading it first segfaulted both
        # modes; `main` loads it after setup_torch and ran).
        import torch  # noqa: F401
        import quack_cpp  # noqa: F401
        torch.zeros(1, device="cuda")
        sys.exit(split_method(ctypes.CDLL(a.lib), a.mode, bench_args))
    setup_torch(a.torch, bench_args)
    lib = ctypes.CDLL(a.lib)
    argv = [b"quack-bench"] + [s.encode() for s in bench_args]
    arr = (ctypes.c_char_p * len(argv))(*argv)
    sys.stdout.flush()
    rc = lib.main(len(argv), arr)
    sys.exit(rc)


if __name__ == "__main__":
    main()
