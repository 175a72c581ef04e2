#!/usr/bin/env python3
"""Prints quack-bench rmsnorm JSON lines as a table: op, impl, dtype, M x N, TB/s, × the same
file's copy bandwidth, and the kernel configuration fields when present (config, rows_per_cta,
cluster, partials).   scripts/norm_table.py quack_bench.jsonl [--best] (--best: the fastest
line per op/dtype/shape/impl only)"""
import json
import sys


def main(argv):
    rows, copy = [], None
    for line in open(argv[1]):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r.get("op") == "copy":
            copy = r["tbps"]
        elif "tbps" in r:
            rows.append(r)
    if "--best" in argv:
        best = {}
        for r in rows:
            k = (r["op"], r["dtype"], r["M"], r["N"], r["impl"])
            if k not in best or r["tbps"] > best[k]["tbps"]:
                best[k] = r
        rows = list(best.values())
    print(f"copy {copy} TB/s" if copy else "copy: not in file")
    for r in rows:
        extra = " ".join(f"{k}={r[k]}" for k in ("config", "rows_per_cta", "cluster", "partials") if k in r)
        frac = f"{r['tbps'] / copy:5.2f}" if copy else "  -  "
        print(f"{r['op']:12s} {r['impl']:13s} {r['dtype']:9s} {r['M']:>6}x{r['N']:<7} {r['tbps']:6.3f} {frac}  {extra}")


if __name__ == "__main__":
    main(sys.argv)
