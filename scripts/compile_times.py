#!/usr/bin/env python3
"""Per-TU compile times of the last Ninja build (from .ninja_log), slowest first.

Usage: scripts/compile_times.py [build-dir] [--top N]
Times are wall seconds as Ninja logged them: they grow with whatever else ran on the machine
(scripts/compile_mem.sh measures each GEMM TU alone, with its peak memory).
Budgets (DESIGN.md §4, on the 2-core build machine): row-kernel TU <= 20 s, GEMM TU <= 60 s
(the tests' TUs have none); a family line sums the compiler time of the GEMM instances, the row
ops' generated TUs, the other library TUs and the tests (a clean build's wall time on 2 cores is
about half the total).
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


def family(out):
    """The TU's family for the totals line and its budget in seconds (None: no budget)."""
    if "/generated/gemm/" in out:
        return "gemm", 60.0
    if out.startswith("tests/"):
        return "tests", None
    if out.startswith("bench/"):
        return "bench", None
    if "/generated/" in out:
        return "row ops (generated, cross-entropy's too)", 20.0
    if out.startswith("CMakeFiles/quack.dir/"):
        return "library, the rest (top-k, host code)", 20.0
    return "other", None


def main():
    ap = argparse.ArgumentParser(
        description="Per-TU compile times of the last Ninja build (from .ninja_log), slowest "
                    "first, and by family; flags library .cu TUs over budget (GEMM instances 60 s, the rest "
                    "20 s; tests and bench have none).")
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
    totals = {}
    for t, o in rows:
        name = family(o)[0]
        n, s = totals.get(name, (0, 0.0))
        totals[name] = (n + 1, s + t)
    print("  by family: " + ", ".join(f"{name} {n} TUs {s:.0f} s" for name, (n, s) in
                                       sorted(totals.items(), key=lambda kv: -kv[1][1])))
    for t, o in rows[:top]:
        budget = family(o)[1]
        flag = "  OVER BUDGET" if budget is not None and t > budget and o.endswith(".cu.o") else ""
        print(f"  {t:7.1f} s  {o}{flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
