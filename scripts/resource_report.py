#!/usr/bin/env python3
"""Per-kernel resource report (registers, stack frame, spills, shared memory) of the CUDA TUs.

Re-runs each .cu compile command of a Ninja build tree with -Xptxas=-v and prints one line per
kernel instance. Usage: scripts/resource_report.py [build-dir] [substring-of-source ...]
Exit code 1 when any kernel spills or uses a stack frame (the project's rule: none).
"""
import argparse
import re
import shlex
import subprocess
import sys


def compile_commands(build):
    out = subprocess.run(["ninja", "-C", build, "-t", "commands"], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        if "nvcc" in line and " -c " in line and line.rstrip().endswith(".o"):
            src = re.search(r"-c (\S+\.cu)\b", line)
            if src:
                yield src.group(1), line


def demangle(names):
    res = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    return res.stdout.splitlines()


def report(cmd, build_dir):
    cmd = cmd.replace("/usr/bin/ccache ", "")
    args = shlex.split(cmd.split("&&")[-1] if "&&" in cmd else cmd)
    obj = args[args.index("-o") + 1]
    args[args.index("-o") + 1] = "/tmp/_resource_report.o"
    args += ["-Xptxas=-v"]
    if "-MF" in args:  # drop the depfile options
        i = args.index("-MF")
        del args[i:i + 2]
    args = [a for a in args if a not in ("-MD",)]
    if "-MT" in args:
        i = args.index("-MT")
        del args[i:i + 2]
    log = subprocess.run(args, capture_output=True, text=True, cwd=build_dir).stderr
    rows, cur, frame = [], None, (0, 0, 0)
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            cur = m.group(1)
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                      line)
        if m:
            frame = tuple(int(x) for x in m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            smem = re.search(r"(\d+) bytes smem", line)
            rows.append((cur, int(m.group(1)), frame, int(smem.group(1)) if smem else 0))
            cur, frame = None, (0, 0, 0)
    return rows


def main():
    ap = argparse.ArgumentParser(
        description="Per-kernel registers, stack frame, spills and shared memory of the CUDA TUs "
                    "of a Ninja build tree (each .cu recompiled with -Xptxas=-v). Exit code 1 "
                    "when any kernel spills or uses a stack frame.")
    ap.add_argument("build", nargs="?", default="build", help="Ninja build tree (default: build)")
    ap.add_argument("only", nargs="*", metavar="SUBSTRING",
                    help="report only the .cu sources whose path contains one of these")
    opts = ap.parse_args()
    build, only = opts.build, opts.only
    try:
        commands = list(compile_commands(build))
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"resource_report: cannot list the compile commands of {build!r} "
              f"(ninja -C {build} -t commands): {e}", file=sys.stderr)
        return 2
    bad = 0
    for src, cmd in commands:
        if only and not any(s in src for s in only):
            continue
        rows = report(cmd, build)
        names = demangle([r[0] for r in rows])
        print(f"== {src}: {len(rows)} kernels")
        for (_, regs, frame, smem), name in zip(rows, names):
            name = name.replace("quack::detail::", "").split("(")[0]
            flag = "  <-- SPILL" if frame and (frame[0] or frame[1]) else ""
            bad |= bool(flag)
            print(f"  {regs:4d} regs  stack {frame[0]:5d}  spill st/ld {frame[1]}/{frame[2]}"
                  f"  smem {smem:6d}  {name}{flag}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
