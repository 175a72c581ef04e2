#!/usr/bin/env python3
"""Prints quack-bench gemm JSON lines as a table with the geometric mean of ours / cuBLAS, and
optionally plots them (grouped bars, TFLOP/s, the ratio over each pair).

    python3 scripts/gemm_table.py results/quack_bench_gemm.jsonl [--plot gemm.png] [--title T]
"""
import argparse
import json
import math


def load(path):
    return [json.loads(l) for l in open(path) if l.strip().startswith("{")]


def label(r):
    m, n, k = r["M"], r["N"], r["K"]
    shape = f"{m}³" if m == n == k else f"{m}×{n}×{k}"
    return shape + ("" if r.get("majors", "rc") == "rr" else f" ({r.get('majors', 'rc')})")


def table(rows):
    # ratio: launches enqueued behind a spin kernel (host work hidden, as do_bench); idle: each
    # launch started on an idle GPU (host work counted); host µs: the call's wall time.
    print(f"{'M x N x K':>22} {'majors':>6} {'quack':>7} {'cuBLAS':>7} {'ratio':>6} {'idle':>6} "
          f"{'host us q/c':>12} {'rel diff':>9}")
    for r in rows:
        shape = f"{r['M']}x{r['N']}x{r['K']}"
        idle = f"{r['ratio_idle']:6.3f}" if "ratio_idle" in r else f"{'-':>6}"
        host = f"{r['host_us_quack']:5.1f}/{r['host_us_cublas']:<5.1f}" if "host_us_quack" in r else "-"
        print(f"{shape:>22} {r.get('majors', 'rc'):>6} {r['tflops_quack']:7.1f} {r['tflops_cublas']:7.1f} "
              f"{r['ratio']:6.3f} {idle} {host:>12} {r['rel_diff_vs_cublas']:9.1e}")
    geo = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    print(f"geometric mean of ratios over {len(rows)} rows: {geo:.3f}")
    if all("ratio_idle" in r for r in rows):
        geo_idle = math.exp(sum(math.log(r["ratio_idle"]) for r in rows) / len(rows))
        print(f"geometric mean of idle-start ratios: {geo_idle:.3f}")
    return geo


def plot(rows, geo, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(rows)), 4.5))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["tflops_quack"] for r in rows], 0.4, label="QuACK-C++")
    ax.bar([x + 0.2 for x in xs], [r["tflops_cublas"] for r in rows], 0.4, label="cuBLAS")
    for x, r in zip(xs, rows):
        ax.text(x, max(r["tflops_quack"], r["tflops_cublas"]) + 8, f"{r['ratio']:.2f}", ha="center", fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([label(r) for r in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s (bf16, fp32 accumulation)")
    ax.set_title(f"{title} — geometric mean of ratios {geo:.3f}")
    ax.set_ylim(0, 1.18 * max(max(r["tflops_quack"], r["tflops_cublas"]) for r in rows))
    ax.legend(loc="upper center", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl", nargs="?", default="results/quack_bench_gemm.jsonl")
    ap.add_argument("--plot")
    ap.add_argument("--title", default="GEMM on one H200, A B A B beside cuBLAS")
    args = ap.parse_args()
    rows = load(args.jsonl)
    if not rows:
        print("(no GEMM results)")
        return
    geo = table(rows)
    if args.plot:
        plot(rows, geo, args.plot, args.title)


if __name__ == "__main__":
    main()
