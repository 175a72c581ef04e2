#!/usr/bin/env python3
"""Draw README.md's performance plots from docs/img/readme_figures.csv.

The CSV holds figures copied from docs/performance.md ("Current figures"), one per row, each
with the run that measured it and the card. This script only draws them:

  docs/img/rows_tbps.png           row ops: ours x same-run copy at the anchor shapes, the
                                   peers' x copy where given; ours / the binding peer
  docs/img/cross_entropy_tbps.png  cross-entropy: ours TB/s; ours / QuACK 0.2.0
  docs/img/gemm_tflops.png         GEMM, five LLM shapes: ours, cuBLAS, QuACK (burst, sustained)

Usage: python3 scripts/plot_readme.py [--csv PATH] [--out DIR]   (needs matplotlib)
To update a plot: edit the CSV from docs/performance.md, rerun, commit the PNGs.
"""
import argparse
import collections
import csv
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLORS = {"ours": "#1f77b4", "cuBLAS": "#7f7f7f", "QuACK": "#ff7f0e",
          "torch.compile": "#2ca02c", "Liger": "#9467bd"}
SHAPE_COLORS = ["#9ecae1", "#4292c6", "#08519c", "#08306b"]


def read(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    for r in rows:
        r["text"] = r["value"]  # as performance.md prints it
        r["value"] = float(r["value"])
    return rows


def pretty(shape):
    return shape.replace("x", " × ")


def runs_of(rows):
    runs = collections.OrderedDict()
    for r in rows:
        runs.setdefault(r["run"], r["card"])
    return ", ".join(f"{k} ({v})" for k, v in runs.items())


def ordered(values):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def save(fig, out, name):
    path = os.path.join(out, name)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"{path}: {os.path.getsize(path) // 1024} KB")


def bar_x(i, j, n, width):
    """The x of series j's bar (of n side by side, each `width` wide) in group i."""
    return i + (j - (n - 1) / 2) * width


def grouped_bars(axis, rows, groups, series, group_key, series_key, color, label):
    """One bar per (group, series) found in rows, groups along x and the series side by side
    within each; color(j, name) and label(name) for series j. Returns the bar width."""
    width = 0.8 / len(series)
    for j, name in enumerate(series):
        xs, ys = [], []
        for i, g in enumerate(groups):
            for r in rows:
                if r[series_key] == name and r[group_key] == g:
                    xs.append(bar_x(i, j, len(series), width))
                    ys.append(r["value"])
        axis.bar(xs, ys, width, color=color(j, name), label=label(name))
    return width


def plot_rows(data, out):
    ours = [r for r in data if r["chart"] == "rows"]
    peer_copy = [r for r in data if r["chart"] == "rows_peer_copy"]
    vs_peer = [r for r in data if r["chart"] == "rows_vs_peer"]
    ops = ordered(r["series"] for r in ours)
    shapes = ordered(r["shape"] for r in ours)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [3, 2]})
    width = grouped_bars(ax, ours, ops, shapes, "series", "shape",
                         lambda j, _: SHAPE_COLORS[j % len(SHAPE_COLORS)],
                         lambda shape: f"ours {pretty(shape)}")
    for r in peer_copy:
        i, j = ops.index(r["series"]), shapes.index(r["shape"])
        ax.plot(bar_x(i, j, len(shapes), width), r["value"], marker="D", ms=6,
                color=COLORS.get(r["impl"], "k"), linestyle="none",
                label=f"{r['impl']} (where given)")
    ax.axhline(1.0, color="k", lw=1)
    ax.text(len(ops) - 0.5, 1.003, "copy", ha="right", va="bottom", fontsize=8)
    nfwd = sum(1 for op in ops if op.endswith("fwd"))
    ax.hlines(0.90, -0.5, nfwd - 0.5, colors="r", linestyles="--", lw=1, label="bar: fwd 0.90, bwd 0.85")
    ax.hlines(0.85, nfwd - 0.5, len(ops) - 0.5, colors="r", linestyles="--", lw=1)
    ax.set_xticks(range(len(ops)))
    ax.set_xticklabels(ops, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0.7, 1.06)
    ax.set_ylabel("× same-run device copy (axis from 0.7)")
    ax.set_title(f"Row ops, bf16: ours against copy\nruns {runs_of(ours + peer_copy)}", fontsize=9)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), fontsize=7, ncol=4, loc="upper center",
              bbox_to_anchor=(0.5, -0.28))

    labels = [f"{r['series']} {pretty(r['shape'])}" for r in vs_peer]
    bx.barh(range(len(vs_peer)), [r["value"] for r in vs_peer],
            color=[COLORS.get(r["impl"], "k") for r in vs_peer])
    for k, r in enumerate(vs_peer):
        bx.text(r["value"] + 0.01, k, f"{r['text']} × {r['impl']}", va="center", fontsize=7)
    bx.axvline(1.0, color="k", lw=1)
    bx.set_yticks(range(len(vs_peer)))
    bx.set_yticklabels(labels, fontsize=7)
    bx.invert_yaxis()
    bx.set_xlim(0.8, max(r["value"] for r in vs_peer) + 0.35)
    bx.set_xlabel("ours ÷ the peer that binds (> 1: ours faster)")
    bx.set_title("Against the binding peer, where performance.md gives it", fontsize=9)
    fig.tight_layout()
    save(fig, out, "rows_tbps.png")


def plot_ce(data, out):
    ours = [r for r in data if r["chart"] == "ce"]
    vs = [r for r in data if r["chart"] == "ce_vs_quack"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.2))
    for axis, rows, ylabel, ref in ((ax, ours, "TB/s (axis from 2)", None),
                                    (bx, vs, "ours ÷ QuACK 0.2.0 (> 1: ours faster)", 1.0)):
        calls = ordered(r["series"] for r in rows)
        shapes = ordered(r["shape"] for r in rows)
        grouped_bars(axis, rows, calls, shapes, "series", "shape",
                     lambda j, _: SHAPE_COLORS[j % len(SHAPE_COLORS)],
                     lambda shape: f"M × V = {pretty(shape)}")
        if ref is not None:
            axis.axhline(ref, color="k", lw=1)
        axis.set_xticks(range(len(calls)))
        axis.set_xticklabels(calls, fontsize=8)
        axis.set_ylabel(ylabel)
        axis.set_title(f"runs {runs_of(rows)}", fontsize=9)
    ax.set_ylim(2.0, 4.5)
    bx.set_ylim(0.8, 2.0)
    ax.legend(fontsize=7, loc="lower left")
    fig.suptitle("Cross-entropy, bf16: ours (left) and against QuACK 0.2.0 (right)", fontsize=10)
    fig.tight_layout()
    save(fig, out, "cross_entropy_tbps.png")


def plot_gemm(data, out):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for axis, chart, title in (
            (axes[0], "gemm_burst", "burst (do_bench)"),
            (axes[1], "gemm_sustained", "sustained (power limit, equal rests)")):
        rows = [r for r in data if r["chart"] == chart]
        shapes = ordered(r["shape"] for r in rows)
        impls = ordered(r["impl"] for r in rows)
        grouped_bars(axis, rows, shapes, impls, "shape", "impl",
                     lambda _, impl: COLORS.get(impl, "k"), lambda impl: impl)
        axis.set_xticks(range(len(shapes)))
        axis.set_xticklabels([pretty(s) for s in shapes], rotation=20, ha="right", fontsize=8)
        axis.set_title(f"{title}, run {runs_of(rows)}", fontsize=9)
        axis.set_ylim(600, 780)
    axes[0].set_ylabel("TFLOP/s (axis from 600)")
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle("GEMM, bf16, A and B row-major: ours, cuBLAS, QuACK 0.2.0", fontsize=10)
    fig.tight_layout()
    save(fig, out, "gemm_tflops.png")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--csv", default=os.path.join(ROOT, "docs", "img", "readme_figures.csv"))
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "img"))
    a = p.parse_args()
    data = read(a.csv)
    os.makedirs(a.out, exist_ok=True)
    plot_rows(data, a.out)
    plot_ce(data, a.out)
    plot_gemm(data, a.out)


if __name__ == "__main__":
    main()
