"""scripts/check_sass.py on a made-up build tree, with a stand-in cuobjdump that prints canned
-res-usage and -sass text per object: each rule passes on conforming kernels and fails, naming the
kernel, on a spill beyond STACK_ALLOWED, a GEMM kernel without HGMMA and a row kernel without
16-byte loads."""
import json
import os
import stat
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "check_sass.py")

RES = "Function {name}:\nREG:{reg} STACK:{stack} SHARED:0 LOCAL:{local} CONSTANT[0]:0\n"
SASS = "\tcode for sm_90a\n\t\tFunction : {name}\n\t.headerflags\n{body}\n"

# Object (relative to CMakeFiles/quack.dir) -> (kernel, stack, local, SASS body).
GOOD = {
    "generated/gemm/gemm_sm90_128x192pp_bf16_bf16_kk.cu.o": ("gemm_kernel_a", 0, 0, "HGMMA.64x192x16.F32.BF16 R24, gdesc[UR4], RZ ;"),
    "generated/gemm/gemm_act_sm90_128x192pp_bf16_bf16_kk.cu.o": ("gemm_kernel_b", 16, 0, "HGMMA.64x192x16.F32.BF16 R24 ;"),
    "generated/rmsnorm_fwd_bf16.cu.o": ("row_kernel", 0, 0, "LDG.E.128.CONSTANT R4, desc[UR6][R2.64] ;"),
    "generated/rmsnorm_fwd_f32.cu.o": ("row_ring_kernel", 0, 0, "UBLKCP.S.G [UR8], [UR4], UR10 ;"),
    "generated/rmsnorm_fwd_entry.cu.o": ("row_general", 0, 0, "LDG.E.U16 R4, desc[UR6][R2.64] ;"),
    "src/gemm/gemm_pad.cu.o": ("pad_rows_kernel", 0, 0, "LDG.E R4 ;"),
}

FAKE = r'''#!/usr/bin/env python3
import json, os, sys
flag, path = sys.argv[1], sys.argv[2]
spec = json.load(open(path))
if spec is None:  # an object without device code: cuobjdump prints no kernel and fails
    sys.exit(1)
name, stack, local, body = spec
if flag == "-res-usage":
    print(%r.format(name=name, reg=32, stack=stack, local=local))
else:
    print(%r.format(name=name, body=body))
''' % (RES, SASS)


def tree(tmp_path, objects):
    top = tmp_path / "build" / "CMakeFiles" / "quack.dir"
    for rel, spec in objects.items():
        p = top / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(spec))
    tools = tmp_path / "bin"
    tools.mkdir()
    for exe, text in (("cuobjdump", FAKE), ("nvdisasm", "#!/bin/sh\n")):
        (tools / exe).write_text(text)
        (tools / exe).chmod((tools / exe).stat().st_mode | stat.S_IEXEC)
    return tmp_path / "build", str(tools)


def run(tmp_path, objects, *args):
    build, tools = tree(tmp_path, objects)
    env = dict(os.environ, PATH=tools + os.pathsep + os.environ["PATH"])
    r = subprocess.run([sys.executable, SCRIPT, str(build), *args], capture_output=True, text=True, env=env)
    return r.returncode, r.stdout


def test_conforming_tree_passes(tmp_path):
    rc, out = run(tmp_path, GOOD, "--rows")
    assert rc == 0, out
    assert "6 objects, 6 kernels: ok" in out
    assert "2 GEMM kernels with HGMMA, 2 row kernels with 16-byte loads" in out


def test_spill_beyond_allowance_fails(tmp_path):
    bad = dict(GOOD)
    bad["generated/gemm/gemm_act_sm90_128x192pp_bf16_bf16_kk.cu.o"] = ("gemm_kernel_b", 24, 0, "HGMMA ;")
    bad["generated/softmax_fwd_bf16.cu.o"] = ("softmax_kernel", 8, 0, "LDG.E.128 R4 ;")
    rc, out = run(tmp_path, bad)
    assert rc == 1
    assert "gemm_act_sm90_128x192pp_bf16_bf16_kk: gemm_kernel_b: STACK 24 bytes, expected <= 16" in out
    assert "softmax_fwd_bf16: softmax_kernel: STACK 8 bytes, expected <= 0" in out


def test_local_memory_fails(tmp_path):
    bad = dict(GOOD)
    bad["src/gemm/gemm_pad.cu.o"] = ("pad_rows_kernel", 0, 64, "LDG.E R4 ;")
    rc, out = run(tmp_path, bad)
    assert rc == 1 and "pad_rows_kernel: LOCAL 64 bytes, expected 0" in out


def test_gemm_without_hgmma_fails(tmp_path):
    bad = dict(GOOD)
    bad["generated/gemm/gemm_sm90_128x192pp_bf16_bf16_kk.cu.o"] = ("gemm_kernel_a", 0, 0, "FFMA R1, R2, R3, R4 ;")
    rc, out = run(tmp_path, bad)
    assert rc == 1 and "gemm_kernel_a: no HGMMA" in out


def test_row_kernel_without_16_byte_loads_fails_with_rows(tmp_path):
    bad = dict(GOOD)
    bad["generated/rmsnorm_fwd_bf16.cu.o"] = ("row_kernel", 0, 0, "LDG.E.64 R4, desc[UR6][R2.64] ;")
    rc, out = run(tmp_path, bad)
    assert rc == 0, out  # without --rows the loads are not read
    rc, out = run(tmp_path / "again", bad, "--rows")
    assert rc == 1 and "row_kernel: no 16-byte global load" in out


def test_gemm_object_without_device_code_fails(tmp_path):
    bad = dict(GOOD)
    bad["generated/gemm/gemm_sm90_128x192pp_bf16_bf16_kk.cu.o"] = None
    rc, out = run(tmp_path, bad)
    assert rc == 1 and "gemm_sm90_128x192pp_bf16_bf16_kk: no kernel in the object" in out


def test_empty_tree_fails(tmp_path):
    (tmp_path / "build").mkdir()
    r = subprocess.run([sys.executable, SCRIPT, str(tmp_path / "build")], capture_output=True, text=True)
    assert r.returncode == 1 and "no library objects" in r.stdout
