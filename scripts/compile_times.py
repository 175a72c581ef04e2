#!/usr/bin/env python3
"""Per-TU compile times of the last Ninja build (from .ninja_log), slowest first.

Usage: scripts/compile_times.py [build-dir] [--top N]
Times are wall seconds as Ninja logged them: they grow with whatever else ran on the machine
(scripts/compile_mem.sh measures each GEMM TU alone, with its peak memory).
Budgets (DESIGN.md §4, on the 2-core build machine): row-kernel TU <= 20 s, GEMM TU <= 60 s.
"""
import argparse
import os
import subprocess
import sys


def build_outputs(build):
    """The outputs of the build graph (`ninja -t targets all`), or None without ninja."""
    try:
        out = subprocess.run(["ninja", "-C", build, "-t", "targets", "all"], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {line.split(":", 1)[0] for line in out.splitlines() if ":" in line}


def main():
    ap = argparse.ArgumentParser(
        description="Per-TU compile times of the last Ninja build (from .ninja_log), slowest "
                    "first; flags .cu TUs over budget (GEMM 60 s, others 20 s).")
    ap.add_argument("build", nargs="?", default="build", help="Ninja build tree (default: build)")
    ap.add_argument("--top", type=int, default=None, metavar="N",
                    help="print only the N slowest TUs (default: all)")
    opts = ap.parse_args()
    build, top = opts.build, opts.top
    path = os.path.join(build, ".ninja_log")
    if not os.path.exists(path):
        print(f"compile_times: no {path}")
        return 0
    last = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            start, end, _, out, *_ = line.rstrip("\n").split("\t")
            last[out] = (int(end) - int(start)) / 1000.0
    # .ninja_log keeps entries of outputs that the build no longer has (a renamed or deleted
    # TU): list only what the current build graph still produces.
    current = build_outputs(build)
    rows = sorted(((t, o) for o, t in last.items() if o.endswith(".o") and (current is None or o in current)),
                  reverse=True)
    print(f"compile times ({len(rows)} TUs, {sum(t for t, _ in rows):.1f} s of compiler time):")
    over = 0
    for t, o in rows[:top]:
        budget = 60.0 if "/gemm/" in o else 20.0
        flag = "  OVER BUDGET" if t > budget and o.endswith(".cu.o") else ""
        over += bool(flag)
        print(f"  {t:7.1f} s  {o}{flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
