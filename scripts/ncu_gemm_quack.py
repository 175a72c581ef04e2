"""One launch each of ours (quack_cpp.gemm) and QuACK 0.2.0's GEMM (quack.gemm_interface.gemm,
tuned=False: pingpong 128x192, cluster 2x1) at one shape, inside a cudaProfilerStart / Stop
region, for Nsight Compute (device only; clocks left alone):

    ncu --clock-control none --profile-from-start off --set full -f -o /tmp/g \
        python3 scripts/ncu_gemm_quack.py 8192 8192 8192
    python3 scripts/ncu_gemm_quack.py --report /tmp/g.ncu-rep

The report mode prints, per kernel, the duration, the SM clock, tensor-pipe activity, issued
instructions, the launch geometry and the top warp stall reasons: where QuACK's mainloop does
more work per clock than ours (docs/performance.md, run Y: 92 % against 84 % of the dense peak).
"""
import csv
import subprocess
import sys


def run(M, N, K):
    import torch
    import quack_cpp
    from quack.gemm_interface import gemm as quack_gemm
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    fs = [("ours", lambda: quack_cpp.gemm(a, b)), ("quack", lambda: quack_gemm(a, b, tuned=False))]
    for _, f in fs:  # compile / plan, warm up
        for _ in range(3):
            f()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _, f in fs:
        f()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


KEYS = ("gpu__time_duration.sum", "sm__cycles_elapsed.avg.per_second",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_tensor_op_hmma.sum", "smsp__inst_executed.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed", "lts__t_sector_hit_rate.pct",
        "launch__grid_size", "launch__block_size", "launch__cluster_size",
        "launch__registers_per_thread", "launch__shared_mem_per_block_dynamic",
        "smsp__warps_active.avg.per_cycle_active")


def report(rep):
    raw = subprocess.run(["ncu", "-i", rep, "--page", "raw", "--csv"], capture_output=True,
                         text=True).stdout
    rows = list(csv.reader(raw.splitlines()))
    if len(rows) < 3:
        print("no ncu data:", raw[:400])
        return
    head = rows[0]
    for vals in rows[2:]:
        d = dict(zip(head, vals))
        print(f"== {d.get('Kernel Name', '?')[:110]}")
        for k in KEYS:
            if k in d:
                print(f"  {k:72s} {d[k]}")
        st = [(h, v) for h, v in d.items()
              if "warps_issue_stalled" in h and (h.endswith("_per_warp_active.pct")
                                                 or h.endswith("_per_issue_active.ratio"))]

        def num(v):
            try:
                return float(v.replace(",", ""))
            except ValueError:
                return 0.0
        print("  stall reasons (top 10):")
        for h, v in sorted(st, key=lambda x: -num(x[1]))[:10]:
            name = h.replace("smsp__average_warps_issue_stalled_", "").replace(
                "_per_warp_active.pct", " (% warp)").replace("_per_issue_active.ratio", " (/issue)")
            print(f"    {name:40s} {v}")


if __name__ == "__main__":
    if sys.argv[1] == "--report":
        report(sys.argv[2])
    else:
        run(*(int(v) for v in sys.argv[1:4]))
