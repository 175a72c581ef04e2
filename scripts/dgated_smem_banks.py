#!/usr/bin/env python3
"""Shared-memory bank model of gemm_dgated's epilogue (128x128 pingpong, EpiM 64, EpiN 32 words):
per warp instruction, the wavefronts (bank passes) of load_subtile's C reads (fp32 path:
ld.shared.v2, 8 per thread and subtile), store_subtile's D writes (st.shared.v2, 8) and
store_subtile's postact writes (STSM x4, 2), with the swizzle of epilogue_smem.cuh (tests/cpp/host/test_gemm_epilogue_layout.cu checks it against CuTe's SW
atoms). Two hardware models for 8-byte accesses: 'half' (each half-warp served on its own: the
documented rule since Kepler, which ncu's wavefront count follows) and 'warp' (the whole
warp's 64 words packed into the fewest passes). The second half: the order of a1d2cf (lanes
whose row lane/4 is odd take column block j ^ 2 at slot j)."""
import argparse


def sw(row_bytes, row, b):
    off = row * row_bytes + b
    mask = row_bytes // 16 - 1
    return off ^ (((off >> 7) & mask) << 4)


def frag_row(t, h):
    return 16 * (t // 32) + 8 * h + (t % 32) // 4


def wavefronts(words_per_lane):  # list over lanes of lists of 4-byte word addresses
    banks = {}
    for ws in words_per_lane:
        for w in ws:
            banks.setdefault(w % 32, set()).add(w)
    return max(len(s) for s in banks.values()) if banks else 0


def passes(addrs, width, model):
    """addrs: byte address per lane (None: inactive); width: bytes per lane."""
    words = [[] if a is None else [(a + 4 * k) // 4 for k in range(max(1, width // 4))] for a in addrs]
    if width == 8 and model == "half":
        return wavefronts(words[:16]) + wavefronts(words[16:])
    if width == 16:
        return sum(wavefronts(words[8 * i:8 * i + 8]) for i in range(4))
    return wavefronts(words)


def run(perm, model):
    out = {}
    # C (fp32 words, rows of 128 B, SW128): pair p = (h, j) = (p % 2, p / 2), columns 8j + 2q, +1
    tot = 0
    for p in range(8):
        h, j = p % 2, p // 2
        addrs = []
        for lane in range(32):
            jj = j ^ (2 if perm and ((lane // 4) & 1) else 0)
            addrs.append(sw(128, frag_row(lane, h), 4 * (8 * jj + 2 * (lane % 4))))
        tot += passes(addrs, 8, model)
    out["C ld.shared.v2 (8/subtile; D st.shared.v2 the same, again): wavefronts per subtile per warp, each"] = tot
    # postact (bf16: one value per pair, 64 x 32 in rows of 64 B, SW64): store_subtile's STSM x4,
    # 2 per thread and subtile; each 8 x 8 matrix's 8 row addresses (16 B each) are one wavefront
    # when they fill the 8 bank groups. cf: the lane giving row r uses chunk group jj ^ (r & 1).
    tot = 0
    for jj in range(2):
        for q in range(4):
            addrs = []
            for r in range(8):
                lane = 8 * q + r
                row = 8 * (q % 2) + r
                chunk = 2 * (jj ^ (r & 1 if perm else 0)) + q // 2
                addrs.append(sw(64, row, 16 * chunk))
            tot += wavefronts([[a // 4 + k for k in range(4)] for a in addrs])
    out["postact STSM x4 (2/subtile): wavefronts per subtile per warp"] = tot
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.parse_args()
    for perm in (False, True):
        for model in ("half", "warp"):
            r = run(perm, model)
            print(f"{'a1d2cf order' if perm else 'production   '} model={model}: " +
                  "; ".join(f"{k} = {v}" for k, v in r.items()))
    print("ideal: 8-byte accesses 2 wavefronts each (16 per subtile); STSM x4 4 each (8 per subtile)")
