"""bench_gemm's clock attribution (no GPU): each nvidia-smi sample counts for the
implementation whose batch was running when it arrived."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))

import bench_gemm  # noqa: E402


def test_clock_by_window_attributes_samples_to_the_running_batch():
    samples = [(0.5, 1980), (1.2, 1500), (1.4, 1520), (2.1, 1700), (2.2, 1720), (2.3, 1740),
               (3.5, 1111)]
    windows = {"ours": [(1.0, 1.5)], "quack": [(2.0, 2.5)], "cublas": [(4.0, 5.0)]}
    got = bench_gemm.clock_by_window(samples, windows)
    assert got == {"ours": 1510, "quack": 1720, "cublas": None}


def test_clock_by_window_several_windows_and_edges():
    samples = [(1.0, 1400), (2.0, 1600), (3.0, 1800), (4.0, 2000)]
    got = bench_gemm.clock_by_window(samples, {"a": [(1.0, 1.0), (3.0, 3.5)], "b": [(1.5, 2.5)]})
    assert got == {"a": 1600, "b": 1600}
    assert bench_gemm.clock_by_window([], {"a": [(0, 1)]}) == {"a": None}
