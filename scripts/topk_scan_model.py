#!/usr/bin/env python3
"""Model of the top-k queue kernel's scan (src/topk/topk_queue_kernel.cuh) on random rows.

Counts, per warp, the elements accepted into the buffer, the merges of 32 into the queue and the
slots visited (a slot of an iteration is visited when some lane holds a candidate against the
threshold at the iteration's start), with and without the prefix bound; and for the sparse offer
(TopkPlan::sparse) the iterations with a candidate and its ballot rounds (per such iteration the
largest count of candidates one lane holds; merges inside an iteration are not modelled there). The kernel's slot order
(slot s = vector s / V, element s % V of every lane; lane l's vector u is column (32·u + l)·V),
its threshold updates after each merge and the prefix bound's 16 delegates per lane are
followed; ties and the first-block bound (k ≤ 64) are not modelled. No GPU; numpy only.

Usage: scripts/topk_scan_model.py [--shapes 4096x128,131072x256] [--prefix 0,8] [--rows 4]
       [--dtype bf16|fp32]
"""
import argparse

import numpy as np


def scan(x, k, prefix_iters, kv):
    """(merges, slots visited, accepted, hit iterations, sparse rounds) of one warp scanning row x
    for its k best."""
    ku, kd = 4, 16
    slots, it_cols = ku * kv, ku * 32 * kv
    n = len(x)
    lanes = np.arange(32)
    thr = -np.inf
    n_pre = min(n // it_cols, prefix_iters)
    if n_pre:  # the k-th largest of 512 group maxima
        dm = np.full((32, kd), -np.inf)
        for it in range(n_pre):
            for s in range(slots):
                u, i = divmod(s, kv)
                cols = it * it_cols + (u * 32 + lanes) * kv + i
                dm[:, s % kd] = np.maximum(dm[:, s % kd], x[cols])
        thr = np.sort(dm.ravel())[::-1][k - 1]
        assert thr <= np.sort(x)[::-1][k - 1], "the bound exceeds the k-th best"
    queue = np.array([])
    buf, merges, visits, accepted, hits, rounds = [], 0, 0, 0, 0, 0
    cap = 32 * max(1, int(2 ** np.ceil(np.log2(max(k, 32) / 32))))
    for c0 in range(0, n, it_cols):
        thr_it = thr
        per_lane = np.zeros(32, dtype=int)
        for s in range(slots):
            u, i = divmod(s, kv)
            cols = c0 + (u * 32 + lanes) * kv + i
            ok = cols < n
            per_lane[ok] += x[cols[ok]] >= thr_it
        if per_lane.any():
            hits += 1
            rounds += per_lane.max()
        for s in range(slots):
            u, i = divmod(s, kv)
            cols = c0 + (u * 32 + lanes) * kv + i
            cols = cols[cols < n]
            if not np.any(x[cols] >= thr_it):
                continue
            visits += 1
            for c in cols:
                if x[c] >= thr and (len(queue) < k or x[c] > thr):
                    buf.append(x[c])
                    accepted += 1
            while len(buf) >= 32:
                queue = np.sort(np.concatenate([queue, buf[:32]]))[::-1][:cap]
                buf = buf[32:]
                merges += 1
                if len(queue) >= k:
                    thr = max(thr, queue[k - 1])
    return merges + (1 if buf else 0), visits, accepted, hits, rounds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="4096x128,131072x256", help="comma list of NxK")
    ap.add_argument("--prefix", default="0,8", help="prefix iterations to compare (0: none)")
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    opts = ap.parse_args()
    kv = 8 if opts.dtype == "bf16" else 4
    rng = np.random.default_rng(0)
    for shape in opts.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        rows = []
        for _ in range(opts.rows):
            x = rng.standard_normal(n).astype(np.float32)
            if opts.dtype == "bf16":
                x = (x.view(np.uint32) & 0xFFFF0000).view(np.float32)
            rows.append(x.astype(np.float64))
        for p in (int(v) for v in opts.prefix.split(",")):
            m = np.mean([scan(x, k, p, kv) for x in rows], axis=0)
            print(f"N {n} k {k} {opts.dtype} prefix {p}: merges {m[0]:.1f}, slots visited "
                  f"{m[1]:.1f}, accepted {m[2]:.0f}; sparse offer: iterations with a candidate "
                  f"{m[3]:.1f} of {-(-n // (4 * 32 * kv))}, rounds {m[4]:.1f}")


if __name__ == "__main__":
    main()
