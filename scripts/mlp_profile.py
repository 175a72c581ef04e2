"""Per-kernel CUDA time of one MLP block fwd+bwd (bench_gemm_fused.py's mlp_calls: Llama-8B shape),
ours beside torch.compile, by torch.profiler: where a block's time goes (diagnosis, not a bar).

    python3 scripts/mlp_profile.py [relu_sq|swiglu] [impl,impl]   (default relu_sq ours,compile)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))

import torch  # noqa: E402
from bench_gemm_fused import mlp_calls, warm  # noqa: E402


def main():
    act = sys.argv[1] if len(sys.argv) > 1 else "relu_sq"
    impls = (sys.argv[2] if len(sys.argv) > 2 else "ours,compile").split(",")
    calls = warm(torch, mlp_calls(torch, act, impls))
    for name, f in calls.items():
        for _ in range(3):
            f()
        torch.cuda.synchronize()
        import time
        t0 = time.perf_counter()
        for _ in range(3):
            f()
        host = (time.perf_counter() - t0) / 3 * 1000
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / 3 * 1000
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(3):
                f()
            torch.cuda.synchronize()
        api = [e for e in prof.key_averages() if e.key.startswith("cuda") and e.count]
        api.sort(key=lambda e: -e.cpu_time_total)
        print(f"== {act} {name}: host {host:.3f} ms per step (enqueue), wall {wall:.3f} ms; runtime calls per step:")
        for e in api[:8]:
            print(f"  {e.cpu_time_total / 3 / 1000:8.3f} ms  x{e.count / 3:<5.1f} {e.key[:80]}")
        rows = [e for e in prof.key_averages() if e.device_time_total > 0]
        rows.sort(key=lambda e: -e.device_time_total)
        total = sum(e.device_time_total for e in rows) / 3 / 1000
        print(f"== {act} {name}: {total:.3f} ms of kernels per step")
        for e in rows[:14]:
            print(f"  {e.device_time_total / 3 / 1000:8.3f} ms  x{e.count // 3:<3d} {e.key[:110]}")


if __name__ == "__main__":
    main()
