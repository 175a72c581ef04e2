"""scripts/compile_times.py on a made-up .ninja_log: budgets by family (GEMM instances 60 s, row
and other library TUs 20 s, tests none), the family totals, stale entries left out."""
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "compile_times.py")

LOG = [  # (seconds, output)
    (61.0, "CMakeFiles/quack.dir/generated/gemm/gemm_sm90_128x192pp_bf16_bf16_kk.cu.o"),
    (59.0, "CMakeFiles/quack.dir/generated/gemm/gemm_sm90_128x256_bf16_bf16_km.cu.o"),
    (21.0, "CMakeFiles/quack.dir/generated/softmax_fwd_bf16.cu.o"),
    (19.0, "CMakeFiles/quack.dir/src/topk/topk_queue_bf16_p64.cu.o"),
    (42.0, "tests/cpp/CMakeFiles/quack_host_tests.dir/host/test_gemm_epilogue_layout.cu.o"),
    (1.0, "libquack.a"),
]


def run(tmp_path, *args):
    with open(tmp_path / ".ninja_log", "w") as f:
        f.write("# ninja log v5\n")
        for t, out in LOG:
            f.write(f"0\t{int(t * 1000)}\t0\t{out}\tabc\n")
    # No build.ninja here: `ninja -t targets` fails, so every logged .o counts.
    return subprocess.run([sys.executable, SCRIPT, str(tmp_path), *args], capture_output=True,
                          text=True, check=True).stdout.splitlines()


def test_budgets_by_family(tmp_path):
    lines = run(tmp_path)
    assert lines[0] == "compile times (5 TUs, 202.0 s of compiler time):"
    flagged = {line.split()[2] for line in lines if line.endswith("OVER BUDGET")}
    assert flagged == {LOG[0][1], LOG[2][1]}  # GEMM over 60 s, a row TU over 20 s; tests: none


def test_family_totals_and_top(tmp_path):
    lines = run(tmp_path, "--top", "2")
    fam = lines[1]
    assert fam.startswith("  by family: gemm 2 TUs 120 s, tests 1 TUs 42 s")
    assert "row ops (generated, cross-entropy's too) 1 TUs 21 s" in fam
    assert "library, the rest (top-k, host code) 1 TUs 19 s" in fam
    assert len(lines) == 4 and "61.0 s" in lines[2] and "59.0 s" in lines[3]
