"""The kernel each GEMM implementation launches at the demo's GEMM shapes (or --shapes), by
torch.profiler: cuBLAS's names carry its tile, cluster and stages, e.g.
sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_cluster2x1x1_..., which tells which
configuration ours is measured against (diagnosis; bench_gemm.py times them).

    python3 scripts/gemm_kernel_names.py                 # the demo's thirteen GEMMs, cuBLAS and ours
    python3 scripts/gemm_kernel_names.py --shapes 8192x8192x8192 --layouts rr
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", help="comma list of MxNxK (default: the demo's GEMMs)")
    p.add_argument("--layouts", default="rr", help="with --shapes: comma list of rr, rc, cr, cc")
    p.add_argument("--impls", default="cublas,ours")
    args = p.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile
    import bench_gemm

    cases = bench_gemm.DEMO if not args.shapes else [
        (tuple(int(v) for v in s.split("x")), l) for s in args.shapes.split(",") for l in args.layouts.split(",")]
    for (M, N, K), layout in cases:
        a = bench_gemm.operand(torch, M, K, layout[0], 1)
        b = bench_gemm.operand(torch, K, N, layout[1], 2)
        calls = bench_gemm.make_calls(torch, args.impls.split(","), a, b)
        for name, f in calls.items():
            f()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                f()
                torch.cuda.synchronize()
            kernels = [(e.name, getattr(e, "device_time_total", 0.0)) for e in prof.events()
                       if getattr(e.device_type, "name", "") == "CUDA"]
            for kname, us in kernels:
                print(f"{M}x{N}x{K} {layout} {name}: {us:8.1f} us  {kname[:160]}")


if __name__ == "__main__":
    main()
