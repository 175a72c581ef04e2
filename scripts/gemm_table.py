#!/usr/bin/env python3
"""Prints quack-bench gemm JSON lines as a table with the geometric mean of ours / cuBLAS.

    python3 scripts/gemm_table.py results/quack_bench_gemm.jsonl
"""
import json
import math
import sys


def main(path):
    rows = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    if not rows:
        print("(no GEMM results)")
        return
    print(f"{'M x N x K':>22} {'majors':>6} {'quack':>7} {'cuBLAS':>7} {'ratio':>6} {'rel diff':>9}")
    for r in rows:
        shape = f"{r['M']}x{r['N']}x{r['K']}"
        print(f"{shape:>22} {r.get('majors', 'rc'):>6} {r['tflops_quack']:7.1f} {r['tflops_cublas']:7.1f} "
              f"{r['ratio']:6.3f} {r['rel_diff_vs_cublas']:9.1e}")
    geo = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    print(f"geometric mean of ratios over {len(rows)} rows: {geo:.3f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/quack_bench_gemm.jsonl")
