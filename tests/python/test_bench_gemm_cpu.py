"""bench_gemm's clock attribution (no GPU): each nvidia-smi sample counts for the
implementation whose batch was running when it arrived; the sustained and rested batches
(sleeps, batch lengths, rounds, order, medians, clocks) on a simulated GPU."""
import argparse
import contextlib
import io
import math
import os
import statistics
import sys
import types

import pytest

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


# The batched methods on a simulated GPU: one stream, a host and a GPU clock in ms. The host spends
# ENQ_MS enqueuing each op (events cost nothing); the GPU runs an op after the previous one and no
# earlier than its enqueue; an event records when the stream reaches it; synchronize brings the
# host up to it.
# nvidia-smi is a sampler that reads the clock of whatever the GPU runs at each host instant.
ENQ_MS = 0.01
IDLE_MHZ = 1980


class FakeGPU:
    def __init__(self, mhz, cycles_per_ms=1_755_000, enq=None):
        self.host = self.gpu = 0.0
        self.enq = enq or {}  # host ms to enqueue one op, by name (ENQ_MS otherwise)
        self.cycles_per_ms = cycles_per_ms
        self.mhz = mhz
        self.log = []  # (kind, name, start ms, end ms)
        self.mark = None  # len(log) when the sampler started: the rounds' ops follow

    def op(self, kind, name, ms):
        self.host += self.enq.get(name, ENQ_MS)  # the GPU sees the op once its enqueue ends
        start = max(self.gpu, self.host)
        self.gpu = start + ms
        self.log.append((kind, name, start, self.gpu))

    def running(self, t):
        for kind, name, t0, t1 in self.log:
            if t0 <= t < t1:
                return name if kind == "call" else None
        return None

    def torch(self):
        gpu = self

        class Event:
            def __init__(self, enable_timing=False):
                self.t = None

            def record(self):
                self.t = max(gpu.gpu, gpu.host)

            def synchronize(self):
                gpu.host = max(gpu.host, self.t)

            def elapsed_time(self, end):
                return end.t - self.t

        class Buffer:
            def zero_(self):
                gpu.op("clear", None, 0.1)

        cuda = types.SimpleNamespace(
            Event=Event,
            _sleep=lambda cycles: gpu.op("sleep", None, cycles / gpu.cycles_per_ms),
            synchronize=lambda: setattr(gpu, "host", max(gpu.host, gpu.gpu)))
        return types.SimpleNamespace(cuda=cuda, int8="int8",
                                     empty=lambda n, dtype=None, device=None: Buffer())

    def sampler(self, every_ms=2.0):
        gpu = self

        class Sampler:
            def __enter__(self):
                gpu.mark = len(gpu.log)
                self.t0 = gpu.host
                self.samples = []
                return self

            def __exit__(self, *exc):
                t = self.t0
                self.power, self.reasons = [], []
                while t < gpu.host:
                    name = gpu.running(t)
                    self.samples.append((t / 1e3, gpu.mhz[name] if name else IDLE_MHZ))
                    self.power.append((t / 1e3, WATTS[name] if name else IDLE_W))
                    self.reasons.append((t / 1e3, 1.0 if name == "ours" and int(t / every_ms) % 4 == 0 else 0.0))
                    t += every_ms

            def median(self):
                return statistics.median(v for _, v in self.samples) if self.samples else None

        return Sampler

    def batches(self):
        """The rounds as [(sleep ms, clears, impl, calls, batch ms)], in order."""
        out, sleep, clears, cur = [], None, 0, None
        for kind, name, t0, t1 in self.log[self.mark:]:
            if kind == "sleep":
                if cur:
                    out.append(cur)
                sleep, clears, cur = t1 - t0, 0, None
            elif kind == "clear":
                clears += 1
            elif cur is None:
                cur = (sleep, clears, name, 1, t1 - t0)
            else:
                assert cur[2] == name
                cur = (sleep, clears, name, cur[3] + 1, cur[4] + t1 - t0)
        return out + ([cur] if cur else [])


CALL_MS = {"ours": 1.5, "cublas": 1.3, "quack": 1.2}
MHZ = {"ours": 1900, "cublas": 1950, "quack": 1850}
WATTS = {"ours": 690.0, "cublas": 660.0, "quack": 700.0}  # board power while each runs
IDLE_W = 120.0


def run_method(monkeypatch, method, argv=(), spec=None, enq=None):
    gpu = FakeGPU(MHZ, enq=enq)
    monkeypatch.setattr(bench_gemm, "ClockSampler", gpu.sampler())
    monkeypatch.setattr(bench_gemm, "time", types.SimpleNamespace(perf_counter=lambda: gpu.host / 1e3))
    calls = {n: (lambda n=n: gpu.op("call", n, CALL_MS[n])) for n in CALL_MS}
    args = bench_gemm.parse_args(["--methods", method, *argv])
    if spec is None:
        got = bench_gemm.measure(gpu.torch(), calls, method, args)
    else:
        got = bench_gemm.batched(gpu.torch(), calls, spec)
    return gpu, got


def test_rested_batches_sleeps_rounds_and_clocks(monkeypatch):
    gpu, (ms, clk, clks, *_) = run_method(monkeypatch, "rested")
    assert ms == pytest.approx(CALL_MS)
    batches = gpu.batches()
    assert len(batches) == 3 * 10  # 10 rounds, none dropped
    names = list(CALL_MS)
    for r in range(10):  # the order rotates: A B C, B C A, C A B
        assert [b[2] for b in batches[3 * r:3 * r + 3]] == bench_gemm.rotated(names, r)
    for sleep, clears, name, n, batch_ms in batches:
        assert sleep == pytest.approx(25.0, abs=1e-5)
        assert clears == 0  # no L2 clear
        assert n == math.ceil(19.0 / CALL_MS[name])  # >= 19 ms of back-to-back calls
        assert 19.0 <= batch_ms < 19.0 + CALL_MS[name]
    idle = sum(b[0] for b in batches) / sum(b[0] + b[4] for b in batches)
    assert 0.5 < idle < 0.6  # the GPU idles ~55 % of the time
    # Each implementation's clock from the samples inside its batches; the overall figure from
    # every batch's samples: none of the rests' idle clock.
    assert clks == MHZ
    assert clk in MHZ.values()


def test_rested_parameters(monkeypatch):
    argv = ["--rested-batch-ms", "40", "--rested-sleep-ms", "5", "--rested-rounds", "4"]
    gpu, (ms, clk, clks, *_) = run_method(monkeypatch, "rested", argv)
    batches = gpu.batches()
    assert len(batches) == 3 * 4
    for sleep, clears, name, n, batch_ms in batches:
        assert sleep == pytest.approx(5.0, abs=1e-5)
        assert n == math.ceil(40.0 / CALL_MS[name])


def test_sustained_defaults(monkeypatch):
    """The defaults: 60 ms batches behind a sleep that lets the host stay ahead (one call's
    enqueue with a margin: the fake's host is faster than its GPU), 12 rounds with the first 2
    dropped; the overall clock over every sample of the rounds."""
    gpu, (ms, clk, clks, *_) = run_method(monkeypatch, "sustained")
    assert ms == pytest.approx(CALL_MS)
    batches = gpu.batches()
    assert len(batches) == 3 * 12
    for sleep, clears, name, n, batch_ms in batches:
        n_calls = math.ceil(60.0 / CALL_MS[name])
        assert n == n_calls and clears == 0
        enqueue = ENQ_MS  # the fake host's ms per call
        assert sleep == pytest.approx(0.5 + 1.3 * enqueue, abs=1e-5)  # the host is ahead
    assert clks == MHZ
    assert clk in MHZ.values()


def test_power_and_slowdown_by_implementation(monkeypatch):
    """Each implementation's board power from the samples inside its batches (none of the
    sleeps' idle power), and the share of its samples with a hardware slowdown."""
    gpu, got = run_method(monkeypatch, "sustained")
    assert got.watts == WATTS
    assert 0.1 < got.slowdown["ours"] < 0.4  # every 4th sample in the fake
    assert got.slowdown["cublas"] == 0.0 and got.slowdown["quack"] == 0.0


def gaps_in_batches(gpu):
    """The GPU's idle ms between consecutive calls of a batch (it waited for the host)."""
    gaps, prev = [], None
    for kind, name, t0, t1 in gpu.log[gpu.mark:]:
        if kind == "call" and prev is not None and prev[0] == "call":
            gaps.append(t0 - prev[1])
        prev = (kind, t1)
    return gaps


def test_host_lead():
    assert bench_gemm.host_lead_ms(40, 0.3, 1.5) == pytest.approx(0.3)  # the host stays ahead
    assert bench_gemm.host_lead_ms(10, 2.0, 1.5) == pytest.approx(2.0 + 9 * 0.5)  # it falls behind
    assert bench_gemm.host_lead_ms(1, 2.0, 1.5) == pytest.approx(2.0)


def test_rest_by_implementation_and_equal_rest(monkeypatch):
    """Each implementation sleeps before its batches just long enough for its host to stay
    ahead of the GPU (the records say how long): a host faster than the GPU gets one call's
    enqueue, a slower one the whole deficit (both with the margin: 0.5 ms and a host 30 %
    slower); the GPU never waits for the host inside a batch. --equal-rest gives every
    implementation the longest sleep. The clock windows cover each kept batch whole."""
    enq = {"quack": 0.2, "cublas": 2.0}  # QuACK's host slower than ours, cuBLAS's than its GPU
    seen = []
    by_window = bench_gemm.clock_by_window

    def spy(samples, windows, stat=statistics.median):
        seen.append(windows)
        return by_window(samples, windows, stat)

    monkeypatch.setattr(bench_gemm, "clock_by_window", spy)
    gpu, got = run_method(monkeypatch, "sustained", ["--rounds", "3", "--drop", "0"], enq=enq)
    n_calls = {n: math.ceil(60.0 / v) for n, v in CALL_MS.items()}
    assert n_calls == {"ours": 40, "cublas": 47, "quack": 50}
    want = {"ours": 0.5 + 1.3 * ENQ_MS, "quack": 0.5 + 1.3 * 0.2,
            "cublas": 0.5 + 1.3 * 2.0 + 46 * (1.3 * 2.0 - 1.3)}  # the deficit of 46 calls
    assert got.rest == pytest.approx(want)
    assert got.enqueue == pytest.approx({n: enq.get(n, ENQ_MS) for n in CALL_MS})
    assert got.ms == pytest.approx(CALL_MS)
    assert max(gaps_in_batches(gpu)) == pytest.approx(0.0, abs=1e-9)
    batches = gpu.batches()
    for sleep, _, name, _, _ in batches:
        assert sleep == pytest.approx(want[name], abs=1e-5)
    # Windows (host seconds) against the batches' GPU spans (ms): each kept batch whole, within
    # the fake's enqueue of the sleep op, and nothing of the sleep before it.
    spans = {n: [] for n in CALL_MS}
    for kind, name, t0, t1 in gpu.log[gpu.mark:]:
        if kind == "call":
            if spans[name] and spans[name][-1][1] == t0:
                spans[name][-1][1] = t1
            else:
                spans[name].append([t0, t1])
    windows = seen[0]
    for n in CALL_MS:
        assert len(windows[n]) == len(spans[n]) == 3
        for (w0, w1), (b0, b1) in zip(windows[n], spans[n]):
            assert w0 * 1e3 == pytest.approx(b0, abs=2 * ENQ_MS) and w1 * 1e3 >= b1 - 1e-9
    rec = bench_gemm.record(8192, 8192, 8192, "rr", "sustained", got, {})
    assert rec["rest_ms_quack"] == pytest.approx(want["quack"])
    assert rec["enqueue_ms_ours"] == pytest.approx(ENQ_MS)

    gpu, got = run_method(monkeypatch, "sustained", ["--rounds", "3", "--drop", "0", "--equal-rest"], enq=enq)
    assert got.rest == pytest.approx(dict.fromkeys(CALL_MS, want["cublas"]))
    assert got.ms == pytest.approx(CALL_MS)
    assert max(gaps_in_batches(gpu)) == pytest.approx(0.0, abs=1e-9)
    for sleep, _, _, _, _ in gpu.batches():
        assert sleep == pytest.approx(want["cublas"], abs=1e-5)


def test_short_rest_would_starve_the_gpu(monkeypatch):
    """The check above can fail: a sleep of the host's lead without the margin's 30 % leaves
    gaps where the host is slower than the GPU (the fake's host: 2.0 ms a call against 1.3)."""
    monkeypatch.setattr(bench_gemm, "host_lead_ms", lambda n, enq, call: 0.5 * (enq / 1.3))
    gpu, got = run_method(monkeypatch, "sustained", ["--rounds", "2", "--drop", "0"], enq={"cublas": 2.0})
    assert max(gaps_in_batches(gpu)) > 0.5


def test_smi_lines():
    assert bench_gemm.parse_smi_line("1455, 698.52, 0x0000000000000084") == (1455, 698.52, 0x84)
    assert bench_gemm.parse_smi_line("1980, [N/A], [Not Supported]") == (1980, None, None)
    assert bench_gemm.parse_smi_line("1410") == (1410, None, None)
    assert bench_gemm.parse_smi_line("clocks.sm [MHz]") is None
    mask = bench_gemm.parse_smi_line("1455, 700.0, 0x0000000000000004")[2]
    assert mask & bench_gemm.HW_SLOWDOWN == 0  # SW power cap: the reported clock shows it
    assert 0x80 & bench_gemm.HW_SLOWDOWN  # the power brake does not


def test_smi_query_falls_back_and_is_cached(monkeypatch):
    """The first query nvidia-smi answers with a clock is kept for the process; none where
    nvidia-smi is missing (the sampler then has no samples)."""
    asked = []

    def run(cmd, **kw):
        query = cmd[1].split("=", 1)[1]
        asked.append(query)
        ok = "instant" not in query  # a driver without power.draw.instant
        return types.SimpleNamespace(returncode=0 if ok else 2,
                                     stdout="1455, 650.5, 0x0000000000000004\n" if ok else "")

    monkeypatch.setattr(bench_gemm, "_smi_query", None)
    monkeypatch.setattr(bench_gemm.subprocess, "run", run)
    assert bench_gemm.smi_query("0") == "clocks.sm,power.draw,clocks_throttle_reasons.active"
    assert len(asked) == 3
    assert bench_gemm.smi_query("0") == "clocks.sm,power.draw,clocks_throttle_reasons.active"
    assert len(asked) == 3  # cached

    def missing(cmd, **kw):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(bench_gemm, "_smi_query", None)
    monkeypatch.setattr(bench_gemm.subprocess, "run", missing)
    assert bench_gemm.smi_query("0") is None
    with bench_gemm.ClockSampler() as clock:
        pass
    assert clock.samples == [] and clock.median() is None


def test_l2_clear_between_sleep_and_batch_untimed(monkeypatch):
    spec = bench_gemm.BatchSpec(batch_ms=10.0, sleep_ms=2.0, rounds=2, drop=0, l2_clear=True)
    gpu, (ms, clk, clks, *_) = run_method(monkeypatch, "rested", spec=spec)
    assert ms == pytest.approx(CALL_MS)
    batches = gpu.batches()
    assert len(batches) == 6 and all(b[1] == 1 for b in batches)


def test_methods_and_records():
    assert bench_gemm.parse_args([]).methods == "burst,sustained"  # the default stays
    args = bench_gemm.parse_args(["--methods", "burst,sustained,rested"])
    assert (args.rested_batch_ms, args.rested_sleep_ms, args.rested_rounds) == (19.0, 25.0, 10)
    assert bench_gemm.batch_spec("rested", args) == (19.0, 25.0, 10, 0, False, False)
    assert bench_gemm.batch_spec("sustained", args) == (60.0, None, 12, 2, False, False)
    # bench_gemm_fused.py's arguments have no --equal-rest: each its own rest
    fused = argparse.Namespace(batch_ms=60.0, rounds=12, drop=2)
    assert bench_gemm.batch_spec("sustained", fused) == (60.0, None, 12, 2, False, False)
    with pytest.raises(SystemExit):
        bench_gemm.parse_args(["--methods", "burst,restd"])
    # One record per method, the same fields; the table shows the method and its clock.
    rows = []
    ms = {"ours": 1.5, "cublas": 1.4}
    for got in (bench_gemm.Measured(ms),
                bench_gemm.Measured(ms, 1935, {"ours": 1930, "cublas": 1940}, {"ours": 700.0, "cublas": None},
                                    {"ours": 0.25, "cublas": 0.0})):
        rows.append(bench_gemm.record(8192, 8192, 8192, "rr", "burst" if got.clk is None else "rested", got,
                                      {"ours": 1e-3}))
    assert set(rows[1]) - set(rows[0]) == {"sm_mhz_ours", "sm_mhz_cublas", "watts_ours", "watts_cublas",
                                           "mj_ours", "hw_slowdown_ours", "hw_slowdown_cublas"}
    assert rows[1]["mj_ours"] == pytest.approx(700.0 * 1.5)  # W x ms = mJ
    assert rows[1]["watts_cublas"] is None and rows[1]["hw_slowdown_ours"] == 0.25
    assert rows[1]["method"] == "rested" and rows[1]["sm_mhz"] == 1935
    assert rows[1]["tflops_ours"] == pytest.approx(2 * 8192 ** 3 / 1.5 / 1e9)
    assert rows[1]["rel_diff_vs_cublas"] == 1e-3
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        bench_gemm.report(rows)
    text = out.getvalue()
    assert "| 8192x8192x8192 | rr | rested | 733.0 | 785.4 | - | 0.933 | 0.933 | 1935 |" in text
    assert "geomean rested ours/cuBLAS over all: 0.933 (1 shapes)" in text


def test_burst_rounds_orders_and_records(monkeypatch):
    # A stand-in do_bench: each implementation's reading grows by round, so the medians, the
    # per-round lists and the rotation's orders can be checked.
    seen = []

    def do_bench(fn, warmup, rep, return_mode):
        assert (warmup, rep, return_mode) == (25, 100, "median")
        seen.append(fn.__name__)
        return {"a": 1.0, "b": 2.0, "c": 3.0}[fn.__name__] + 0.1 * seen.count(fn.__name__)

    testing = types.ModuleType("triton.testing")
    testing.do_bench = do_bench
    monkeypatch.setitem(sys.modules, "triton", types.ModuleType("triton"))
    monkeypatch.setitem(sys.modules, "triton.testing", testing)

    def named(n):
        def f():
            return None
        f.__name__ = n
        return f

    calls = {n: named(n) for n in "abc"}
    args = argparse.Namespace(burst_rounds=3, burst_rest_ms=0.0)
    ms, rounds, orders = bench_gemm.burst_rounds(None, calls, args)
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    assert seen == sum(orders, [])
    assert rounds["a"] == pytest.approx([1.1, 1.2, 1.3]) and ms["a"] == pytest.approx(1.2)
    assert bench_gemm.burst(None, calls, args)["c"] == pytest.approx(3.5)  # rounds 4-6 now
    got = bench_gemm.Measured(ms, rounds=rounds, orders=tuple(orders))
    row = bench_gemm.record(256, 256, 256, "rr", "burst", got, {})
    assert row["burst_rounds_ms_b"] == rounds["b"] and row["burst_orders"] == orders
    assert "burst_orders" not in bench_gemm.record(256, 256, 256, "rr", "burst", bench_gemm.Measured(ms), {})


def test_ours_forced_tile_specs(monkeypatch):
    # The spec's parts reach the environment and gemm's keyword before every call: "+dyn" the
    # dynamic scheduler, "+nosk" stream-K off (QUACK_GEMM_STREAMK=0), neither: both cleared.
    handed = []

    class Stub:
        @staticmethod
        def gemm(a, b, dynamic_scheduler=False):
            handed.append((os.environ.get("QUACK_GEMM_TILE"), os.environ.get("QUACK_GEMM_RASTER"),
                           os.environ.get("QUACK_GEMM_STREAMK"), dynamic_scheduler))

    # A private copy of the environment (restored afterwards), without the three variables.
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items()
                                        if not k.startswith("QUACK_GEMM_")})
    for spec in ("auto+nosk", "128x192pp@h8s+dyn", "auto"):
        bench_gemm.ours_forced(Stub, None, None, spec)()
    assert handed == [("auto", None, "0", False), ("128x192pp", "h8s", None, True),
                      ("auto", None, None, False)]
    with pytest.raises(SystemExit):
        bench_gemm.ours_forced(Stub, None, None, "auto+fast")
