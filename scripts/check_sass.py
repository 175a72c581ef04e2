#!/usr/bin/env python3
"""The library's SASS rules, read from a built tree's objects without a GPU (the developers'
guide, "Standards": 16-byte loads, no spills, HGMMA in GEMMs).

    python3 scripts/check_sass.py [BUILD_DIR]        # default: build
    python3 scripts/check_sass.py build --rows       # the row kernels' loads too (~2 min more)

Over every kernel of the library's objects (BUILD_DIR/CMakeFiles/quack.dir/**/*.cu.o):
  - stack: `cuobjdump -res-usage`'s STACK (spilled registers and local arrays) is 0, or at most
    STACK_ALLOWED's bytes for the kernels of the objects named there (known spills, each with
    its reason in docs/architecture.md); LOCAL is 0 everywhere;
  - HGMMA: every kernel of a GEMM instance (generated/gemm/) issues warpgroup MMAs;
  - with --rows: every kernel of a row op's vector-path TU (generated/<op>_<dtype>.cu, not the
    general-policy `_entry` TUs) has a 16-byte global load (LDG.*.128) or a bulk copy (UBLKCP).
cuobjdump comes from PATH, else .deps/sass-tools/bin (scripts/fetch_sass_tools.sh, fetched here
when missing). Exit 0: every rule holds; 1: a rule broken (each named with its kernel);
3: no cuobjdump and none could be fetched (the check skipped, one line says so).
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Object basename (without .cu.o) -> the stack bytes its kernels may hold: the known spills of
# docs/architecture.md ("ptxas -v (CUDA 13.0), spill stores / loads"), and CUB's segmented radix
# sort (top-k's CUB path: CUB's own kernel). A kernel that spills more, or any other that
# spills at all, breaks the rule.
STACK_ALLOWED = {
    "gemm_act_sm90_128x192pp_bf16_bf16_kk": 16,
    "gemm_act_sm90_128x256_bf16_bf16_kk": 8,
    "gemm_dact_sm90_128x192pp_bf16_bf16_km": 24,
    "gemm_gated_sm90_128x192pp_bf16_bf16_kk": 40,
    "topk_sort_cub": 24,
}

RES_RE = re.compile(r"\b(REG|STACK|SHARED|LOCAL):(\d+)")


def cuobjdump():
    """The cuobjdump to use, fetching it into .deps/sass-tools when none is on PATH; or None."""
    local = os.path.join(ROOT, ".deps", "sass-tools", "bin")
    for d in (None, local):
        exe = shutil.which("cuobjdump", path=d)
        if exe and shutil.which("nvdisasm", path=os.path.dirname(exe)):
            return exe
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fetch_sass_tools.sh")],
                       capture_output=True, text=True)
    exe = os.path.join(local, "cuobjdump")
    return exe if r.returncode == 0 and os.access(exe, os.X_OK) else None


def parse_res_usage(text):
    """[(kernel, {REG, STACK, SHARED, LOCAL})] from `cuobjdump -res-usage`."""
    out, name = [], None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Function "):
            name = line[len("Function "):].rstrip(":")
        elif name and "REG:" in line:
            out.append((name, {k: int(v) for k, v in RES_RE.findall(line)}))
            name = None
    return out


def parse_sass(text):
    """{kernel: its SASS text} from `cuobjdump -sass`."""
    out = {}
    for block in text.split("Function : ")[1:]:
        name, _, body = block.partition("\n")
        out[name.strip()] = body
    return out


def stack_errors(obj, kernels):
    allowed = STACK_ALLOWED.get(obj, 0)
    errs = []
    for name, res in kernels:
        if res.get("LOCAL", 0):
            errs.append(f"{obj}: {name[:90]}: LOCAL {res['LOCAL']} bytes, expected 0")
        if res.get("STACK", 0) > allowed:
            errs.append(f"{obj}: {name[:90]}: STACK {res['STACK']} bytes, expected <= {allowed} "
                        "(a spill: scripts/resource_report.py names it; STACK_ALLOWED lists the known ones)")
    return errs


# Kind -> (what every kernel's SASS must hold, the objects' kernels as named in errors, the error).
SASS_RULES = {
    "gemm": (re.compile(r"\bHGMMA\b"), "a GEMM kernel", "no HGMMA, expected warpgroup MMAs"),
    "row": (re.compile(r"\bLDG\S*\.128\b|\bUBLKCP\b"), "row kernels",
            "no 16-byte global load (LDG.128) or bulk copy (UBLKCP)"),
}


def sass_errors(obj, sass, kind):
    """The kernels of one object's SASS ({kernel: text}) that break kind's rule."""
    pattern, kernels, error = SASS_RULES[kind]
    if not sass:
        return [f"{obj}: no kernel in the object, expected {kernels}"]
    return [f"{obj}: {name[:90]}: {error}" for name, body in sass.items() if not pattern.search(body)]


def run(exe, flag, path):
    """cuobjdump's output; empty for an object without device code (cuobjdump exits non-zero)."""
    return subprocess.run([exe, flag, path], capture_output=True, text=True).stdout


def check_object(exe, top, path, rows):
    """(kernel count, errors, kind) of one object; top: the library target's object folder."""
    obj = os.path.basename(path)[:-len(".cu.o")]
    kernels = parse_res_usage(run(exe, "-res-usage", path))
    errs = stack_errors(obj, kernels)
    folder = os.path.dirname(os.path.relpath(path, top))  # generated/gemm, generated, src/<part>
    kind = None
    if folder == os.path.join("generated", "gemm"):
        kind = "gemm"
    elif rows and folder == "generated" and not obj.endswith("_entry"):
        kind = "row"
    if kind:
        errs += sass_errors(obj, parse_sass(run(exe, "-sass", path)), kind)
    return len(kernels), errs, kind


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--rows", action="store_true", help="the row kernels' 16-byte loads too")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    top = os.path.join(a.build, "CMakeFiles", "quack.dir")
    objs = sorted(os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs if f.endswith(".cu.o"))
    if not objs:
        print(f"check_sass: no library objects under {top}, expected a built tree (scripts/run_tests.sh)")
        return 1
    exe = cuobjdump()
    if exe is None:
        print("check_sass: no cuobjdump (scripts/fetch_sass_tools.sh could not fetch it): skipped")
        return 3
    n, errs, counts = 0, [], {"gemm": 0, "row": 0}
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.j) as pool:
        for k, e, kind in pool.map(lambda p: check_object(exe, top, p, a.rows), objs):
            n += k
            errs += e
            if kind:
                counts[kind] += k
    for e in errs:
        print("check_sass:", e)
    rows = f", {counts['row']} row kernels with 16-byte loads" if a.rows else ""
    print(f"check_sass: {len(objs)} objects, {n} kernels: {'FAILED' if errs else 'ok'} "
          f"(stack within STACK_ALLOWED, {counts['gemm']} GEMM kernels with HGMMA{rows})")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
