#!/usr/bin/env python3
"""Model of the top-k radix-select kernel's selection (src/topk/topk_radix_kernel.cuh).

Follows, per row, the kernel's integer steps: order keys (bf16 / fp32 bit patterns, x' = x or
-x, NaN above every number), entries key << 16 | (0xffff - column), the delegates (top 16 bits
of each 16-byte vector's best key), the bound (the k-th largest delegate by two 8-bit radix
steps, when 2k <= vectors), the candidate list (key >= bound), and either the direct sort
(C <= 256) or the radix select over the list (8-bit digits from the top, stopping when the
digit's bin holds exactly the rank still wanted). Checks the selected (column) order against a
plain sort by (key descending, column ascending) on random normal rows and crafted ones (ties,
sorted rows, NaN, +-0), and reports the candidate counts C and how often the fallback runs.
No GPU; numpy only. Not a timing model.

Usage: scripts/topk_radix_model.py [--shapes 4096x128,4096x32,1024x8] [--rows 200]
       [--dtype bf16|fp32]
"""
import argparse

import numpy as np


def keys_of(x, dtype, largest):
    """Order keys of x (float32 array) in x's format: 16-bit (bf16) or 32-bit (fp32)."""
    x = x.astype(np.float32)
    b32 = x.view(np.uint32).astype(np.uint64)
    nan = np.isnan(x)
    if dtype == "bf16":
        bits, top, mask = (b32 >> 16), 0x8000, 0xFFFF
    else:
        bits, top, mask = b32, 0x80000000, 0xFFFFFFFF
    key = np.where(bits & top, (~bits) & mask, bits | top)
    if not largest:
        key = (~key) & mask
    return np.where(nan, mask if largest else 0, key).astype(np.uint64)


def radix_digit(values, kk):
    """(d, above, count) of 8-bit values holding rank kk from the top (1-based)."""
    hist = np.bincount(values.astype(np.int64), minlength=256)
    above = 0
    for d in range(255, -1, -1):
        if above + hist[d] >= kk:
            return d, above, int(hist[d])
        above += hist[d]
    raise AssertionError("rank beyond the count")


def select_row(key, k, kbits, kv):
    """The kernel's selection: (columns in output order, C, fallback steps or 0)."""
    n = len(key)
    cols = np.arange(n, dtype=np.uint64)
    entry = (key << np.uint64(16)) | (np.uint64(0xFFFF) - cols)
    vectors = (n + kv - 1) // kv
    bound = 0
    if 2 * k <= vectors:
        dv = np.array([key[v * kv:(v + 1) * kv].max() >> (kbits - 16) for v in range(vectors)],
                      dtype=np.uint64)
        d1, above, cnt = radix_digit(dv >> np.uint64(8), k)
        kk = k - above
        b16 = d1 << 8
        if cnt != kk:
            sub = dv[(dv >> np.uint64(8)) == d1] & np.uint64(255)
            b16 |= radix_digit(sub, kk)[0]
        bound = b16 << (kbits - 16)
    cand = entry[key >= np.uint64(bound)]
    C = len(cand)
    assert C >= k
    steps = 0
    if C > 256:
        desired, mask, kk = 0, 0, k
        for shift in range(kbits + 16 - 8, -1, -8):
            m = (cand & np.uint64(mask)) == np.uint64(desired)
            d, above, cnt = radix_digit((cand[m] >> np.uint64(shift)) & np.uint64(255), kk)
            steps += 1
            kk -= above
            desired |= d << shift
            mask |= 255 << shift
            if cnt == kk:
                break
        cand = cand[(cand & np.uint64(mask)) >= np.uint64(desired)]
        assert len(cand) == k, (len(cand), k)
    out = np.sort(cand)[::-1][:k]
    return (np.uint64(0xFFFF) - (out & np.uint64(0xFFFF))).astype(np.int64), C, steps


def reference(key, k):
    order = sorted(range(len(key)), key=lambda c: (-int(key[c]), c))
    return np.array(order[:k], dtype=np.int64)


def rows_of(kind, n, rng, dtype):
    x = rng.standard_normal(n).astype(np.float32)
    if kind == "duplicates":
        x = rng.choice(np.array([-2, -1, -0.5, 0.5, 1, 1.5, 2, 3], np.float32), n)
    elif kind == "ascending":
        x = np.sort(x)
    elif kind == "descending":
        x = np.sort(x)[::-1].copy()
    elif kind == "specials":
        x[::3] = np.nan
        x[1::5] = -0.0
        x[2::7] = np.inf
    if dtype == "bf16":  # round to bf16 (nearest even), keep NaN
        b = x.view(np.uint32).astype(np.uint64)
        r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
        y = r.astype(np.uint32).view(np.float32)
        x = np.where(np.isnan(x), x, y)
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096x128,4096x32,1024x8,8192x256,1000x13,37x5,300x300")
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--dtype", default="bf16")
    a = ap.parse_args()
    kbits, kv = (16, 8) if a.dtype == "bf16" else (32, 4)
    rng = np.random.default_rng(1)
    for s in a.shapes.split(","):
        n, k = map(int, s.split("x"))
        for kind in ["random", "duplicates", "ascending", "descending", "specials"]:
            rows = a.rows if kind == "random" else max(4, a.rows // 20)
            cs, fb, steps = [], 0, []
            for r in range(rows):
                x = rows_of(kind, n, rng, a.dtype)
                for largest in (True, False):
                    key = keys_of(x, a.dtype, largest)
                    got, C, st = select_row(key, k, kbits, kv)
                    ref = reference(key, k)
                    assert np.array_equal(got, ref), (s, kind, largest, r)
                    cs.append(C)
                    fb += st > 0
                    steps.append(st)
            cs = np.array(cs)
            print(f"{a.dtype} N {n} k {k} {kind:10s}: C mean {cs.mean():7.1f} max {cs.max():5d}"
                  f" (k·{cs.mean() / k:.2f}), fallback {fb}/{len(cs)},"
                  f" its steps mean {np.mean([t for t in steps if t] or [0]):.2f}")
    print("all selections equal the reference")


if __name__ == "__main__":
    main()
