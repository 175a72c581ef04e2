"""bench/bench_linear_ce.py's --trace analysis (trace_gaps) on hand-made chrome-trace events and
its --tiles wrapper; no GPU, no torch (the bench imports torch only in main)."""

import importlib.util
import os

import pytest

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                     "bench_linear_ce.py")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_linear_ce", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def kernel(name, ts, dur, cat="kernel"):
    return dict(ph="X", cat=cat, name=name, ts=ts, dur=dur)


def test_gaps_between_kernels_and_lead_in(bench):
    ev = [dict(ph="X", cat="user_annotation", name="lce_call", ts=900.0, dur=50.0),
          kernel("gemm_a", 1000.0, 100.0),
          kernel("ce", 1110.0, 20.0),               # 10 us gap: below the threshold
          kernel("gemm_b", 1200.0, 300.0),          # 70 us gap
          kernel("memset", 1490.0, 30.0, "gpu_memset"),  # overlaps gemm_b's end: no gap
          kernel("gemm_c", 1700.0, 100.0),          # 180 us gap after gemm_b (ends at 1520)
          dict(ph="X", cat="cuda_runtime", name="cudaMalloc", ts=1550.0, dur=100.0),
          dict(ph="X", cat="cuda_runtime", name="cudaLaunchKernel", ts=1560.0, dur=5.0),
          dict(ph="X", cat="cuda_runtime", name="cudaStreamSynchronize", ts=100.0, dur=5.0)]
    g = bench.trace_gaps(ev, 50.0)
    assert g["kernels"] == 5
    assert g["lead_in_us"] == pytest.approx(100.0)
    assert [round(x["gap_us"], 3) for x in g["gaps"]] == [70.0, 180.0]
    assert g["gaps"][0]["before"] == "ce" and g["gaps"][0]["after"] == "gemm_b"
    assert g["gaps"][0]["start_us"] == pytest.approx(130.0)
    assert g["gaps"][1]["before"] == "memset" and g["gaps"][1]["after"] == "gemm_c"
    assert g["gaps"][1]["host_calls"] == ["cudaMalloc"]  # launches are not stalls; the sync is outside
    assert g["span_us"] == pytest.approx(800.0)
    assert g["busy_us"] == pytest.approx(100 + 20 + 300 + 20 + 100)
    assert g["idle_us"] == pytest.approx(800.0 - 540.0)


def test_no_gpu_activity(bench):
    g = bench.trace_gaps([dict(ph="X", cat="cpu_op", name="aten::add", ts=0.0, dur=1.0)])
    assert g["kernels"] == 0 and g["gaps"] == [] and g["lead_in_us"] is None


def test_tiles_and_trace_arguments(bench):
    a = bench.parse_args(["--quick", "--impls", "ours,gemms", "--tiles",
                          "auto,f32_mm:128x256a1d2", "--trace", "t.json", "--gap-us", "20"])
    assert a.tiles.split(",") == ["auto", "f32_mm:128x256a1d2"]
    assert a.trace == "t.json" and a.gap_us == 20.0
    seen = []
    f = bench.with_tile(lambda: seen.append(os.environ.get("QUACK_GEMM_TILE")), "f32_mm:128x256a1d2")
    old = os.environ.get("QUACK_GEMM_TILE")
    try:
        f()
    finally:
        if old is None:
            os.environ.pop("QUACK_GEMM_TILE", None)
        else:
            os.environ["QUACK_GEMM_TILE"] = old
    assert seen == ["f32_mm:128x256a1d2"]


class _FakeEvent:
    """A CUDA event stand-in: record() takes the fake clock's time."""

    def __init__(self, clock):
        self.clock, self.t = clock, None

    def record(self):
        self.t = self.clock[0]

    def elapsed_time(self, other):
        return other.t - self.t


def test_events_times_each_way(bench):
    a = bench.parse_args(["--quick", "--events", "5"])
    assert a.events == 5
    clock = [0.0]
    cleared = []

    class Cuda:
        @staticmethod
        def Event(enable_timing):
            assert enable_timing
            return _FakeEvent(clock)

        @staticmethod
        def synchronize():
            pass

    class Buf:
        def zero_(self):
            cleared.append(1)
            clock[0] += 0.5  # the clear itself must not count

    class Torch:
        cuda = Cuda
        int8 = "int8"

        @staticmethod
        def empty(n, dtype, device):
            return Buf()

    def call():
        clock[0] += 2.0

    seen = {}

    def do_bench(fn, warmup, rep, return_mode):
        seen.update(warmup=warmup, rep=rep, mode=return_mode)
        return 2.25

    r = bench.time_three_ways(Torch, do_bench, call, 5)
    assert r["b2b"] == 2.0 and r["l2"] == 2.0 and len(cleared) == 5
    assert r["host"] >= 0.0 and r["do_bench"] == 2.25
    assert seen == dict(warmup=25.0, rep=100.0, mode="median")


def test_gemm_tile_from_kernel_names(bench):
    mangled = ("_ZN5quack6detail4sm9011gemm_kernelINS1_10GemmKernelINS1_9EpiCAheadINS1_10TileConfigIN7"
               "cutlass10bfloat16_tELN4cute4SM904GMMA5MajorE1ELSB_1ELi128ELi192ELi2ELi1ELb1EEELi1ELi2EEE")
    assert bench.gemm_tile(mangled) == "[128x192 2x1 pp EpiCAhead] "
    demangled = ("void quack::detail::sm90::gemm_kernel<quack::detail::sm90::GemmKernel<quack::detail::"
                 "sm90::TileConfig<cutlass::bfloat16_t, (cute::SM90::GMMA::Major)0, "
                 "(cute::SM90::GMMA::Major)0, 128, 256, 2, 1, false>, ...>>")
    assert bench.gemm_tile(demangled) == "[128x256 2x1 coop] "
    nested = demangled.replace("GemmKernel<quack::detail::sm90::TileConfig",
                               "GemmKernel<quack::detail::sm90::EpiPaths<quack::detail::sm90::"
                               "EpiSubtile<quack::detail::sm90::TileConfig")
    assert bench.gemm_tile(nested) == "[128x256 2x1 coop EpiPaths EpiSubtile] "
    assert bench.gemm_tile("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT") == ""


def test_timed_rounds_rotate_and_rest(bench):
    log = []

    class _Cuda:
        @staticmethod
        def synchronize():
            log.append("sync")

    class _Torch:
        cuda = _Cuda

    def do_bench(fn, warmup, rep, return_mode):
        assert (warmup, rep, return_mode) == (25.0, 100.0, "median")
        return fn()

    timed = {"a": lambda: log.append("a") or 1.0, "b": lambda: log.append("b") or 2.0,
             "c": lambda: log.append("c") or 3.0}
    s = bench.timed_rounds(_Torch, do_bench, timed, 3, 25.0, 100.0, 500.0,
                           sleep=lambda sec: log.append(sec))
    assert s == {"a": [1.0] * 3, "b": [2.0] * 3, "c": [3.0] * 3}
    calls = [x for x in log if isinstance(x, str) and x != "sync"]
    assert calls == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]  # rotated by one a round
    assert log[:3] == ["sync", 0.5, "a"]  # the rest before each call
    log.clear()
    bench.timed_rounds(_Torch, do_bench, timed, 1, 25.0, 100.0, 0.0, sleep=lambda sec: log.append(sec))
    assert log == ["a", "b", "c"]  # no rest: no synchronisation, no sleep
    assert bench.parse_args(["--rest-ms", "800"]).rest_ms == 800.0
    assert bench.parse_args([]).rest_ms == 0.0
