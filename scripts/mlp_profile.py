"""Per-kernel CUDA time of one MLP block fwd+bwd (bench_gemm_fused.py's mlp_calls: Llama-8B shape),
ours beside torch.compile, by torch.profiler: where a block's time goes (diagnosis, not a bar).

    python3 scripts/mlp_profile.py [relu_sq|swiglu] [impl,impl]   (default relu_sq ours,compile)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))



def timeline(torch, prof):
    """The last step's kernels in time order: launch call (host) and kernel start, end, the GPU's
    idle gap before each, in ms from the first kernel launch of that step."""
    ev = list(prof.events())
    gpu = sorted((e for e in ev if e.device_type == torch.autograd.DeviceType.CUDA and "emset" not in e.name),
                 key=lambda e: e.time_range.start)
    launches = sorted((e for e in ev if e.name.startswith("cudaLaunch")), key=lambda e: e.time_range.start)
    per = len(gpu) // 3
    if per == 0:
        return
    g, la = gpu[-per:], launches[-per:] if len(launches) >= per else []
    t0 = la[0].time_range.start if la else g[0].time_range.start
    prev = None
    print("  timeline of the last step (ms): launch | start  end  gap-before  kernel")
    for i, e in enumerate(g):
        l = (la[i].time_range.start - t0) / 1000 if i < len(la) else float("nan")
        st, en = (e.time_range.start - t0) / 1000, (e.time_range.end - t0) / 1000
        gap = st - prev if prev is not None else float("nan")
        print(f"  {l:8.3f} | {st:8.3f} {en:8.3f} {gap:7.3f}  {e.name[:70]}")
        prev = en


def main():
    """Profiles each implementation's step (3 warm steps, then 3 under the profiler)."""
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__)
        return
    import torch
    from bench_gemm_fused import mlp_calls, warm

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
        timeline(torch, prof)
        # Self device time: a CPU op's device_time_total also counts the kernels it launched.
        rows = [e for e in prof.key_averages() if e.self_device_time_total > 0]
        rows.sort(key=lambda e: -e.self_device_time_total)
        total = sum(e.self_device_time_total for e in rows) / 3 / 1000
        print(f"== {act} {name}: {total:.3f} ms of kernels per step")
        for e in rows[:14]:
            print(f"  {e.self_device_time_total / 3 / 1000:8.3f} ms  x{e.count // 3:<3d} {e.key[:110]}")


if __name__ == "__main__":
    main()
