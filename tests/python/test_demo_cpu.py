"""The demo harness (demo/train_lm.py, demo/lm.py, demo/ours.py) on the CPU: the whole command
with --cpu-smoke on a synthetic corpus (five runs of a 2-layer model, torch stand-ins for our
ops, torch.compile through aot_eager), --cpu-smoke --gpus 2 (FSDP2 over 2 gloo
processes) against the single-process run, the detection and probes of our ops (fallbacks, a
concatenated gate/up layout, a wrong kernel, the fused residual add + RMSNorm), the gate/up
interleave, the fused-residual model against the plain one, --grad-check (passing, and
catching a wrong gradient: exit 5), the reference evaluator (one all-torch instrument for
every run's weights: the same value for (a)'s and (c)'s parts holding the same weights, the
exact weight conversion, offsets), generate() and run (c)'s text with a stub tokenizer (no
tokenizer: exit 2), the parity check (summarize() on crafted losses, and a run (c) off by 0.25:
exit 1), and the one-line exits of the script (no GPU, --gpus 2 without 2 GPUs or with
compiled runs, no PyTorch with --ours). Needs torch and numpy (skips without them); no GPU."""

import contextlib
import io
import json
import os
import subprocess
import sys
import types

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(REPO, "demo")
sys.path.insert(0, DEMO)

import lm  # noqa: E402
import ours  # noqa: E402
import train_lm  # noqa: E402

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A synthetic corpus in prepare_corpus.sh's format (ids below 500, no tokenizer)."""
    d = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(0)
    rng.integers(0, 500, 20000, dtype=np.uint16).tofile(d / "train.bin")
    rng.integers(0, 500, 3000, dtype=np.uint16).tofile(d / "val.bin")
    (d / "meta.json").write_text(json.dumps(dict(vocab_size=500, bpe_vocab_target=32768,
                                                 source_package="synthetic")))
    return str(d)


def run_main(argv):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = train_lm.main(argv)
    return code, buf.getvalue()


def run_script(*argv, block_torch=False):
    """demo/train_lm.py as a script in a fresh interpreter (it is __main__ there); with
    block_torch, ``import torch`` fails in it as where PyTorch is not installed."""
    path = os.path.join(DEMO, "train_lm.py")
    code = ("import runpy, sys\n"
            + ("sys.modules['torch'] = None\n" if block_torch else "")
            + f"sys.argv = [{path!r}] + {list(argv)!r}\n"
            + f"runpy.run_path({path!r}, run_name='__main__')\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)


class StubTokenizer:
    """The two calls generate() makes of a tokenizers.Tokenizer: a character's id is its code
    point modulo 100; decode writes the ids."""

    def encode(self, text):
        return types.SimpleNamespace(ids=[ord(ch) % 100 for ch in text])

    def decode(self, ids):
        return " ".join(map(str, ids))


def test_cpu_smoke_all_runs(corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(train_lm, "load_tokenizer", lambda folder: StubTokenizer())
    code, out = run_main(["--cpu-smoke", "--data", corpus, "--out", str(tmp_path),
                          "--steps", "2"])
    assert code == 0, out
    assert "train_lm: cpu smoke OK" in out
    rec = json.loads((tmp_path / "train_lm.json").read_text())
    assert list(rec["runs"]) == list("abcde")
    assert rec["env"]["ours_used"] == ["rmsnorm", "add_rmsnorm", "linear", "rotary", "mlp",
                                      "lce"]  # lce replaces ce
    runs = rec["runs"]
    # Same weights and batches: (a)-(d) agree on the first loss; (e) starts elsewhere.
    for k in "bcd":
        assert runs[k]["init_checksum"] == runs["a"]["init_checksum"]
        assert abs(runs[k]["losses"][0] - runs["a"]["losses"][0]) < 1e-2
    assert runs["e"]["init_checksum"] != runs["a"]["init_checksum"]
    assert rec["summary"]["parity_pass"] is True
    assert {b["what"] for b in rec["summary"]["bars"]} >= {"tokens/s (c)/(a)",
                                                          "tokens/s (d)/(b)"}
    assert "graph(s) captured" in runs["d"]["compiled_graphs"]
    if rec["plot"] is None:
        assert "train_lm: matplotlib not found; no plot" in out
    else:
        assert os.path.exists(rec["plot"])
    # Run (c)'s text: 48 new ids after each prompt, below the corpus's 500.
    assert "== text from the model of run (c), 48 tokens per prompt" in out
    assert len(rec["generated"]) == len(train_lm.PROMPTS)
    for text in rec["generated"]:
        ids = [int(i) for i in text.split()]
        assert all(0 <= i < 500 for i in ids[-48:])
    assert "== train_lm: results ==" in out
    # The reference evaluator (one all-torch evaluator of every run's final weights): for the
    # torch runs it is their own code on their own weights (the same numbers, bit for bit on
    # the CPU); for (c) and (d) the stand-ins compute the same function up to rounding.
    for k, r in runs.items():
        ev = r["ref_eval"]
        assert r["ref_eval_error"] is None and r["ref_val_loss"] == ev["ref_val_loss"]
        assert np.isfinite(r["ref_val_loss"]) and ev["seconds"] > 0
        if k in "abe":
            assert r["ref_val_loss"] == r["val_loss"], k
            assert ev["forward_offset"] == 0 and ev["loss_instrument_offset"] == 0, (k, ev)
        else:
            assert abs(r["ref_val_loss"] - r["val_loss"]) < 1e-2, (k, r["val_loss"], ev)
            assert abs(ev["loss_instrument_offset"]) < 1e-2, (k, ev)
            assert abs(ev["forward_offset"]) < 1e-2, (k, ev)
    rv = rec["summary"]["ref_val"]
    assert set(rv["within_bound"]) == {"c", "d"} and all(rv["within_bound"].values())
    assert rv["abs_c_minus_a"] == abs(runs["c"]["ref_val_loss"] - runs["a"]["ref_val_loss"])
    assert out.count("loss instrument offset") == 5
    assert "|ref_val(c) - ref_val(a)|" in out and "ref val" in out


def test_gpus_2_refused_without_2_gpus(corpus):
    if torch.cuda.is_available() and torch.cuda.device_count() >= 2:
        pytest.skip("2 GPUs are present")
    code, out = run_main(["--gpus", "2", "--data", corpus])
    assert code == 2
    assert "--gpus 2 needs 2 CUDA GPUs" in out and out.count("\n") == 1
    p = run_script("--gpus", "2", "--data", corpus)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stdout.count("\n") == 1 and "--gpus 2 needs 2 CUDA GPUs" in p.stdout
    assert "Traceback" not in p.stderr, p.stderr


def test_gpus_2_refuses_compiled_runs(corpus):
    code, out = run_main(["--gpus", "2", "--runs", "a,b,d", "--data", corpus])
    assert code == 2
    assert "drop b,d from --runs" in out and out.count("\n") == 1
    p = run_script("--gpus", "2", "--runs", "a,b,d", "--data", corpus)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stdout.count("\n") == 1 and "drop b,d from --runs" in p.stdout
    assert "Traceback" not in p.stderr, p.stderr


@pytest.mark.parametrize("argv", [[], ["--ours", "mlp"], ["--gpus", "2"]])
def test_no_torch_one_line(corpus, argv):
    """Without PyTorch (its import blocked): one line and exit 2, also where --ours names ops
    (parse_args checks them against ours.py, which imports torch) and for --gpus 2."""
    p = run_script("--data", corpus, *argv, block_torch=True)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stdout.count("\n") == 1 and "needs PyTorch" in p.stdout
    assert "Traceback" not in p.stderr, p.stderr


def test_cpu_smoke_gpus_2_matches_one_process(corpus, tmp_path):
    """--cpu-smoke --gpus 2: FSDP2 over 2 gloo processes (demo/multi_gpu.py) trains runs (a)
    and (c) on the single-process run's batches (each rank half of every step's sequences):
    the same initial weights, per-step losses and validation loss as the single-process run
    up to summation order."""
    one, two = tmp_path / "one", tmp_path / "two"
    code, out = run_main(["--cpu-smoke", "--runs", "a,c", "--steps", "2", "--gen-tokens", "0",
                          "--data", corpus, "--out", str(one)])
    assert code == 0, out
    code, out = run_main(["--cpu-smoke", "--gpus", "2", "--steps", "2", "--data", corpus,
                          "--out", str(two)])
    assert code == 0, out
    ref = json.loads((one / "train_lm.json").read_text())["runs"]
    rec = json.loads((two / "train_lm_gpus2.json").read_text())
    assert rec["config"]["gpus"] == 2 and rec["env"]["backend"] == "gloo"
    assert rec["env"]["nvls_off"] == {"NCCL_NVLS_ENABLE": "0",
                                      "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                                      "NVSHMEM_DISABLE_NVLS": "1"}
    assert rec["env"]["ours_used"] == ["rmsnorm", "add_rmsnorm", "linear", "rotary", "mlp",
                                      "lce"]
    assert list(rec["runs"]) == ["a", "c"]
    for k in "ac":
        got, want = rec["runs"][k], ref[k]
        assert got["init_checksum"] == want["init_checksum"], k
        assert len(got["losses"]) == 2
        for g, w in zip(got["losses"], want["losses"]):
            assert abs(g - w) <= 1e-4 * abs(w), (k, got["losses"], want["losses"])
        assert abs(got["val_loss"] - want["val_loss"]) <= 1e-4 * abs(want["val_loss"]), k
    assert rec["summary"]["parity_pass"] is True


def test_no_gpu_one_line(corpus):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    p = subprocess.run([sys.executable, os.path.join(DEMO, "train_lm.py"), "--data", corpus],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2
    assert p.stdout.strip().count("\n") == 0 and "needs a CUDA GPU" in p.stdout


def test_no_tokenizer_stops_run_c(corpus, tmp_path, monkeypatch):
    """Run (c) with text asked for (the default --gen-tokens 48) and a tokenizer that does not
    load: one line and exit 2 before any run; --gen-tokens 0 or no run (c) needs none."""
    def missing(folder):
        raise ModuleNotFoundError("No module named 'tokenizers'")
    monkeypatch.setattr(train_lm, "load_tokenizer", missing)
    code, out = run_main(["--cpu-smoke", "--runs", "a,c", "--data", corpus,
                          "--out", str(tmp_path)])
    assert code == train_lm.EXIT_ENV == 2, out
    assert out.count("\n") == 1 and "No module named 'tokenizers'" in out, out
    assert "--gen-tokens 0" in out
    code, out = run_main(["--cpu-smoke", "--runs", "a", "--steps", "1", "--data", corpus,
                          "--out", str(tmp_path)])
    assert code == 0, out


def test_generate_with_a_stub_tokenizer():
    """generate(): per prompt, its ids then n_new sampled ids below vocab_real (the model's
    vocabulary is larger), the same for the same seed."""
    cpu = torch.device("cpu")
    model = lm.LM(CFG, lm.torch_parts(cpu), cpu)
    lm.init_weights(model, 0)
    tok = StubTokenizer()
    out = train_lm.generate(model, tok, CFG, 100, cpu, 7)
    assert len(out) == len(train_lm.PROMPTS)
    for prompt, text in zip(train_lm.PROMPTS, out):
        ids, head = [int(i) for i in text.split()], tok.encode(prompt).ids
        assert ids[:len(head)] == head and len(ids) == len(head) + 7
        assert all(0 <= i < 100 for i in ids[len(head):])
    assert train_lm.generate(model, tok, CFG, 100, cpu, 7) == out


def _run(final, label="a"):
    """A finished run as summarize() reads it: the final loss of a crafted loss list."""
    return dict(final_loss=final, tokens_per_s=1000.0, peak_gib=None, label=label)


def test_parity_check_on_crafted_losses():
    """The final loss is the mean of the last 20 losses; (c) and (d) each pass within
    max(0.02, 3 |a - e|) of (a), and fail outside; (b) is reported, not judged."""
    assert train_lm.FINAL_WINDOW == 20 and train_lm.MIN_BOUND == 0.02
    a = [9.0] * 30 + [3.0] * 20            # the first 30 are outside the window
    assert train_lm.final_loss(a) == 3.0
    assert train_lm.final_loss([4.0, 2.0]) == 3.0   # fewer than 20: all of them
    e = [3.0] * 10 + [3.01, 3.03] * 10     # mean 3.02: 3 |a - e| = 0.06, the bound
    runs = {k: _run(train_lm.final_loss(v), k) for k, v in
            dict(a=a, b=[3.5] * 20, c=[3.05] * 20, d=[2.95] * 20, e=e).items()}
    s = train_lm.summarize(runs, 50)
    assert s["bound"] == pytest.approx(0.06)
    assert s["parity"] == {"c": True, "d": True} and s["parity_pass"] is True
    assert s["abs_b_minus_a"] == pytest.approx(0.5)

    runs["d"] = _run(train_lm.final_loss([3.07] * 20), "d")    # 0.07 > 0.06
    s = train_lm.summarize(runs, 50)
    assert s["parity"] == {"c": True, "d": False} and s["parity_pass"] is False

    del runs["e"]                                              # no (e): the floor 0.02
    runs["d"] = _run(3.015, "d")
    s = train_lm.summarize(runs, 50)
    assert s["bound"] == 0.02 and "three_abs_a_minus_e" not in s
    assert s["parity"] == {"c": False, "d": True} and s["parity_pass"] is False
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        train_lm.print_summary(s, runs)
    assert "|c - a| = 0.0500  FAIL" in buf.getvalue()
    assert "|d - a| = 0.0150  PASS" in buf.getvalue()


def test_parity_failure_exits_1(corpus, tmp_path, monkeypatch):
    """A run (c) whose training loss reads 0.5 high from its second step on (the gradients
    untouched, so the first-loss smoke check passes): its final loss is 0.25 above (a)'s,
    outside the bound 0.02, and the command exits 1 with every run finished."""
    real = ours.ours_parts

    def shifted_parts(*a, **k):
        p = real(*a, **k)
        make = p.head

        def head(d, vocab):
            h = make(d, vocab)
            fwd, calls = h.forward, []

            def forward(x, t):
                loss = fwd(x, t)
                if torch.is_grad_enabled():   # training steps, not val or the evaluator
                    calls.append(1)
                    if len(calls) > 1:
                        return loss + 0.5
                return loss
            h.forward = forward
            return h
        p.head = head
        return p

    monkeypatch.setattr(ours, "ours_parts", shifted_parts)
    code, out = run_main(["--cpu-smoke", "--runs", "a,c", "--steps", "2", "--gen-tokens", "0",
                          "--data", corpus, "--out", str(tmp_path)])
    assert code == train_lm.EXIT_FAIL == 1, out
    assert "train_lm: cpu smoke OK" in out and "FAILED" not in out, out
    s = json.loads((tmp_path / "train_lm.json").read_text())["summary"]
    assert s["parity"] == {"c": False} and s["parity_pass"] is False
    assert s["abs_c_minus_a"] == pytest.approx(0.25, abs=1e-2)
    assert "|c - a| = 0.2" in out and "  FAIL" in out


def test_stale_corpus_is_named(tmp_path):
    (tmp_path / "train.bin").write_bytes(b"\0\0" * 100)
    (tmp_path / "val.bin").write_bytes(b"\0\0" * 100)
    (tmp_path / "meta.json").write_text(json.dumps(dict(vocab_size=8192)))
    code, out = run_main(["--cpu-smoke", "--data", str(tmp_path), "--out", str(tmp_path)])
    assert code == 2 and "prepare_corpus.sh" in out


def test_interleave_round_trip():
    w = torch.randn(2 * 6, 5)
    wi = ours._interleave(w)
    assert torch.equal(wi[0::2], w[:6]) and torch.equal(wi[1::2], w[6:])
    assert torch.equal(ours._deinterleave(wi), w)


CFG = dict(lm.TINY, vocab=512)


def test_fallbacks_when_ops_are_missing():
    """A package with only RMSNorm and Linear: the MLP, CE and head fall back, said aloud."""
    full = ours.cpu_stand_ins()
    qc = types.SimpleNamespace(nn=types.SimpleNamespace(RMSNorm=full.nn.RMSNorm,
                                                        Linear=full.nn.Linear))
    lines = []
    p = ours.ours_parts(qc, CFG, torch.device("cpu"), None, log=lines.append, label="q")
    assert p.used == ["rmsnorm", "linear"]
    assert any("mlp" in l and "not in q yet" in l for l in lines)
    assert any("F.silu" in o for o in p.ops)
    assert any("F.cross_entropy (fp32 logits" in o for o in p.ops)
    assert p.head(8, 16).ce == "torch_fp32"  # run (a)'s loss, not torch's bf16-logit CE
    model = lm.LM(CFG, p, torch.device("cpu"))
    lm.init_weights(model, 0)
    ref = lm.LM(CFG, lm.torch_parts(torch.device("cpu")), torch.device("cpu"))
    lm.init_weights(ref, 0)
    idx = torch.randint(0, 512, (2, 16))
    with torch.no_grad():
        assert abs(float(model(idx, idx)) - float(ref(idx, idx))) < 1e-2


def test_explicit_op_that_is_missing_is_an_error():
    qc = types.SimpleNamespace(nn=types.SimpleNamespace(RMSNorm=nn.RMSNorm))
    with pytest.raises(ours.OpUnavailable, match="mlp"):
        ours.ours_parts(qc, CFG, torch.device("cpu"), ["rmsnorm", "mlp"], log=lambda s: None)


def test_concatenated_gate_up_is_detected():
    class ConcatMLP(nn.Module):  # gate and up as two halves of fc1's output
        def __init__(self, d, h, out_features=None, bias1=False, bias2=False,
                     activation="swiglu", device=None):
            super().__init__()
            self.fc1 = nn.Linear(d, 2 * h, bias=False, device=device)
            self.fc2 = nn.Linear(h, d, bias=False, device=device)

        def forward(self, x):
            g, u = self.fc1(x).chunk(2, -1)
            return self.fc2(F.silu(g) * u)

    qc = types.SimpleNamespace(nn=types.SimpleNamespace(MLP=ConcatMLP))
    lines = []
    p = ours.ours_parts(qc, CFG, torch.device("cpu"), None, log=lines.append)
    assert p.used == ["mlp"]
    assert any("concat" in o for o in p.ops), p.ops


def test_wrong_kernel_stops_the_demo():
    class WrongNorm(nn.RMSNorm):
        def forward(self, x):
            return 2 * super().forward(x)

    qc = types.SimpleNamespace(nn=types.SimpleNamespace(RMSNorm=WrongNorm))
    with pytest.raises(ours.ProbeMismatch, match="rmsnorm"):
        ours.ours_parts(qc, CFG, torch.device("cpu"), None, log=lambda s: None)


def test_probe_that_raises_drops_the_op():
    class Refusing(nn.Linear):
        def __init__(self, i, o, bias=False, device=None):
            super().__init__(i, o, bias=False, device=device)

        def forward(self, x):
            raise ValueError("gemm: a has leading stride 3, expected a multiple of 8")

    qc = types.SimpleNamespace(nn=types.SimpleNamespace(Linear=Refusing))
    lines = []
    p = ours.ours_parts(qc, CFG, torch.device("cpu"), None, log=lines.append)
    assert p.used == []
    assert any("probe raised ValueError: gemm: a has leading stride" in l for l in lines)


def test_lr_schedule():
    cfg = lm.CONFIG
    assert train_lm.lr_at(0, 300, cfg) == pytest.approx(cfg["lr"] / 20)
    assert train_lm.lr_at(19, 300, cfg) == pytest.approx(cfg["lr"])
    assert train_lm.lr_at(299, 300, cfg) == pytest.approx(cfg["lr"] * 0.1, rel=1e-3)
    assert lm.CONFIG["vocab"] == 32768 and lm.CONFIG["d_model"] == 2048


def test_model_size():
    """The fixed model has ~751 M parameters (built on the meta device: no memory)."""
    m = lm.LM(lm.CONFIG, lm.torch_parts(torch.device("meta")), torch.device("meta"))
    n = sum(p.numel() for p in m.parameters())
    assert 750e6 < n < 752e6, n


def test_kernel_families():
    f = train_lm.kernel_family
    assert f("void quack::detail::rmsnorm_fwd_kernel<float>(...)") == "ours"
    assert f("nvjet_tst_256x128_64x4_1x2_h_bz_coopA_NTN") == "GEMM (cuBLAS)"
    assert f("void pytorch_flash::flash_fwd_kernel<...>") == "attention"
    assert f("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0") == "Triton (compiled)"
    assert f("void at::native::(anonymous namespace)::multi_tensor_apply_kernel") == "optimizer"
    assert f("void at::native::vectorized_elementwise_kernel<4, ...>") == "other"


def test_demo_on_quack_cpp_python_layer(corpus, tmp_path, monkeypatch):
    """Runs (a), (c), (d) with the installed quack_cpp's Python layer in place of the
    stand-ins, its kernels replaced by the CPU stand-ins of cpu_stand_in.py (the custom ops,
    their autograd and fake kernels, our modules' constructors and dispatch all run; the GEMM
    ops are counted in the compiled graph). Needs a built quack_cpp (skips without)."""
    quack_cpp = pytest.importorskip("quack_cpp")
    import quack_cpp.nn  # noqa: F401
    cpu_stand_in = pytest.importorskip("cpu_stand_in")
    monkeypatch.setattr(ours, "cpu_stand_ins", lambda: quack_cpp)
    with cpu_stand_in.registered():
        code, out = run_main(["--cpu-smoke", "--data", corpus, "--out", str(tmp_path),
                              "--steps", "2", "--runs", "a,c,d", "--gen-tokens", "0"])
    assert code == 0, out
    rec = json.loads((tmp_path / "train_lm.json").read_text())
    assert {"rmsnorm", "add_rmsnorm", "linear"} <= set(rec["env"]["ours_used"])
    # quack_cpp's own modules (MLP layout, fused head) through the reference evaluator.
    runs = rec["runs"]
    for k in "cd":
        assert runs[k]["ref_eval_error"] is None, runs[k]["ref_eval_error"]
        assert abs(runs[k]["ref_val_loss"] - runs["a"]["ref_val_loss"]) < 1e-2, k
        assert abs(runs[k]["ref_eval"]["loss_instrument_offset"]) < 1e-2, k
    assert "gemm x" in rec["runs"]["d"]["compiled_graphs"], rec["runs"]["d"]["compiled_graphs"]
    assert "rmsnorm_fwd x" in rec["runs"]["d"]["compiled_graphs"]


def _grads_of(model, idx, ac):
    model.zero_grad(set_to_none=True)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=ac):
        loss = model(idx, idx)
    loss.backward()
    return float(loss.detach()), dict(lm.canonical_grads(model))


@pytest.mark.parametrize("ac", [False, True])
def test_add_norm_model_is_the_plain_model(ac):
    """The model with add_norm (the residual add fused with the next norm, carried across
    blocks) is the plain pre-norm model: same loss and gradients in fp32 up to rounding, and
    under bf16 autocast as close as two bf16 runs of one function; torch's form of the
    contract and the stand-in rmsnorm through make_add_norm agree."""
    cpu = torch.device("cpu")
    plain = lm.LM(CFG, lm.torch_parts(cpu), cpu)
    lm.init_weights(plain, 0)
    idx = torch.randint(0, 512, (2, 32), generator=torch.Generator().manual_seed(0))
    loss_p, g_p = _grads_of(plain, idx, ac)
    for add_norm in (lm.torch_add_norm, ours.make_add_norm(ours.cpu_stand_ins().rmsnorm)):
        parts = lm.torch_parts(cpu)
        parts.add_norm = add_norm
        fused = lm.LM(CFG, parts, cpu)
        lm.init_weights(fused, 0)
        loss_f, g_f = _grads_of(fused, idx, ac)
        tol = 2e-2 if ac else 1e-5
        assert abs(loss_f - loss_p) <= (1e-3 if ac else 1e-6) * abs(loss_p)
        assert set(g_f) == set(g_p)
        for k in g_p:
            err = float((g_f[k] - g_p[k]).norm() / g_p[k].norm())
            assert err <= tol, (k, err)


def test_add_rmsnorm_probe_catches_a_wrong_residual():
    """An rmsnorm whose residual_out leaves delta out: the probe stops the demo; one without
    a residual argument is not used (the plain form runs)."""
    good = ours.cpu_stand_ins().rmsnorm

    def wrong(x, weight=None, bias=None, residual=None, eps=1e-6, prenorm=False,
              residual_dtype=None, out_dtype=None, weight_offset=0.0):
        out, _ = good(x, weight, bias, residual, eps, True, residual_dtype, out_dtype)
        return (out, residual) if prenorm else out

    with pytest.raises(ours.ProbeMismatch, match="add_rmsnorm.*residual_out"):
        ours.ours_parts(types.SimpleNamespace(rmsnorm=wrong), CFG, torch.device("cpu"), None,
                        log=lambda s: None)

    def no_residual(x, weight=None, eps=1e-6):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)

    lines = []
    p = ours.ours_parts(types.SimpleNamespace(rmsnorm=no_residual), CFG, torch.device("cpu"),
                        None, log=lines.append, label="q")
    assert p.used == [] and p.add_norm is None
    assert any("add_rmsnorm" in l and "not in q yet" in l for l in lines)


def test_grad_check_passes_on_the_stand_ins(corpus, tmp_path):
    code, out = run_main(["--cpu-smoke", "--grad-check", "--runs", "a,c", "--steps", "1",
                          "--gen-tokens", "0", "--data", corpus, "--out", str(tmp_path)])
    assert code == 0, out
    assert "gradient check: PASS" in out
    rec = json.loads((tmp_path / "train_lm.json").read_text())["grad_check"]
    assert rec["ok"] and rec["failed"] == []
    assert set(rec["groups"]) == {"loss", *train_lm.GRAD_GROUPS}
    for k, v in rec["groups"].items():
        # Same function and dtypes on the CPU: ours' error is torch's; bf16-sized, not zero.
        assert v["ours"] == pytest.approx(v["torch"], rel=0.05, abs=1e-7), (k, v)
        if k != "loss":
            assert 1e-4 < v["torch"] < 5e-2, (k, v)
    assert rec["losses"]["a"] == pytest.approx(rec["losses"]["ref"], rel=1e-3)


def test_grad_check_catches_a_wrong_gradient(corpus, tmp_path, monkeypatch):
    """A run (c) whose fc2 weight gradient is 1.5 x the right one (the probes pass: they see
    the module, not the model) fails the check in the fc2 group only: exit 5."""
    real = ours.ours_parts

    def bad_parts(*a, **k):
        p = real(*a, **k)
        make = p.mlp

        def mlp(d, h):
            m = make(d, h)
            m.inner.fc2.weight.register_hook(lambda g: 1.5 * g)
            return m
        p.mlp = mlp
        return p

    monkeypatch.setattr(ours, "ours_parts", bad_parts)
    code, out = run_main(["--cpu-smoke", "--grad-check", "--runs", "c", "--steps", "1",
                          "--gen-tokens", "0", "--data", corpus, "--out", str(tmp_path)])
    assert code == train_lm.EXIT_GRAD == 5, out
    assert "gradient check: FAIL: fc2 above 4 x torch's error" in out
    rec = json.loads((tmp_path / "train_lm.json").read_text())["grad_check"]
    assert rec["failed"] == ["fc2"]
    assert rec["groups"]["fc2"]["ours"] > 0.3


def _val_and_batch(cfg, vocab, seed=0):
    g = torch.Generator().manual_seed(seed)
    T = cfg["seq_len"]
    val = torch.randint(0, vocab, (cfg["val_seqs"] * T + 1,), generator=g)
    batch = torch.randint(0, vocab, (cfg["batch"], T + 1), generator=g)
    return val, batch


def test_reference_evaluator_is_one_instrument():
    """Run (a)'s parts and run (c)'s parts (the CPU stand-ins: fc1 interleaved, fused head,
    fused residual add, ...) holding identical weights give the same reference val loss, bit
    for bit: lm.load_canonical's conversion is exact (the canonical tensors come back
    unchanged, fc1 is stored interleaved) and right (the fp32 forwards agree), and
    train_lm.reference_eval measures both with the same code. For (a) the own and reference
    numbers coincide (offsets 0); for (c) they differ by rounding only. A biased loss
    instrument shows in the offsets and not in the reference val loss; a model whose MLP
    misreports its layout is caught (the reference differs)."""
    cpu = torch.device("cpu")
    a = lm.LM(CFG, lm.torch_parts(cpu), cpu)
    lm.init_weights(a, 3)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():   # off the init: norms away from 1, every matrix moved
        for p in a.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    parts_c = ours.ours_parts(ours.cpu_stand_ins(), CFG, cpu, None, log=lambda s: None)
    assert {"mlp", "lce", "add_rmsnorm"} <= set(parts_c.used)
    c = lm.LM(CFG, parts_c, cpu)
    lm.init_weights(c, 0)
    lm.load_canonical(c, a)
    ta, tc = lm.canonical_tensors(a), lm.canonical_tensors(c)
    assert [n for n, _ in ta] == [n for n, _ in tc]
    for (n, x), (_, y) in zip(ta, tc):
        assert torch.equal(x, y), n
    raw = c.blocks[0].mlp.inner.fc1.weight
    assert not torch.equal(raw, a.blocks[0].mlp.fc1.weight)
    assert torch.equal(raw, ours._interleave(a.blocks[0].mlp.fc1.weight))

    val, batch = _val_and_batch(CFG, 512)
    with torch.no_grad():   # fp32, no autocast: the same function
        la, lc = float(a(batch[:, :-1], batch[:, 1:])), float(c(batch[:, :-1], batch[:, 1:]))
    assert lc == pytest.approx(la, rel=1e-5)

    ac = dict(device_type="cpu", dtype=torch.bfloat16)
    ea = train_lm.reference_eval(a, CFG, val, batch, ac, cpu)
    ec = train_lm.reference_eval(c, CFG, val, batch, ac, cpu)
    for k in ("ref_val_loss", "batch_loss_ref", "head_loss_ref"):
        assert ea[k] == ec[k], (k, ea[k], ec[k])
    assert ea["forward_offset"] == 0 and ea["loss_instrument_offset"] == 0
    vl, vn = train_lm.val_loss(a, val, CFG["seq_len"], torch.arange(CFG["seq_len"] + 1), CFG,
                               ac, cpu)
    assert ea["ref_val_loss"] == vl / vn          # (a)'s own val loss: the same instrument
    assert abs(ec["loss_instrument_offset"]) < 1e-2
    assert abs(ec["forward_offset"]) < 1e-2
    assert 3 < ea["ref_val_loss"] < 20

    # A loss instrument that reads 0.05 high (the weights untouched): the offsets show it,
    # the reference val loss does not move.
    fwd = c.head.forward
    c.head.forward = lambda h, t: fwd(h, t) + 0.05
    eb = train_lm.reference_eval(c, CFG, val, batch, ac, cpu)
    del c.head.forward
    assert eb["ref_val_loss"] == ea["ref_val_loss"]
    assert eb["loss_instrument_offset"] == pytest.approx(0.05, abs=1e-3)
    assert eb["forward_offset"] == pytest.approx(0.05, abs=1e-3)

    for b in c.blocks:      # fc1 read back as if it held [gate; up]: a wrong conversion
        b.mlp.layout = "concat"
    bad = train_lm.reference_eval(c, CFG, val, batch, ac, cpu)
    assert abs(bad["ref_val_loss"] - ea["ref_val_loss"]) > 1e-4


def test_load_canonical_refuses_other_shapes():
    cpu = torch.device("cpu")
    a = lm.LM(CFG, lm.torch_parts(cpu), cpu)
    other = lm.LM(dict(CFG, d_mlp=192), lm.torch_parts(cpu), cpu)
    with pytest.raises(ValueError, match="0.fc1"):
        lm.load_canonical(other, a)
    fewer = lm.LM(dict(CFG, n_layers=1), lm.torch_parts(cpu), cpu)
    with pytest.raises(ValueError, match="names differ"):
        lm.load_canonical(fewer, a)


def test_fused_qkv_rotary_is_detected_and_used(monkeypatch):
    """With QUACK_DEMO_FUSED_ROTARY=1 and the stand-ins' linear_rotary_qkv: the model's qkv
    Linear and rotary are one FusedQkvRotary module (the split rotary is not used), said in the
    ops lines; without it, the split rotary."""
    p = ours.ours_parts(ours.cpu_stand_ins(), CFG, torch.device("cpu"), None,
                        log=lambda _: None, label="q")
    assert p.qkv_rotary is None and p.rotary is not None
    monkeypatch.setenv("QUACK_DEMO_FUSED_ROTARY", "1")
    lines = []
    p = ours.ours_parts(ours.cpu_stand_ins(), CFG, torch.device("cpu"), None,
                        log=lines.append, label="q")
    assert "rotary" in p.used and p.qkv_rotary is not None and p.rotary is None
    assert any("linear_rotary_qkv" in o for o in p.ops)
    model = lm.LM(CFG, p, torch.device("cpu"))
    assert isinstance(model.blocks[0].attn.qkv, ours.FusedQkvRotary)


def test_fused_qkv_rotary_permutation_float64():
    """The permuted fused path (FusedQkvRotary on the stand-in linear_rotary_qkv: x @ W_perm^T,
    then adjacent pairs rotated) against torch_rotary on the unpermuted Linear, in float64: the
    attention scores q · kᵀ and v are equal, q and k equal up to the head-dim permutation; the
    canonical weight round-trips exactly; whole models of the two kinds from one seed give the
    same loss (to fp32 rounding: the model's tables and loss are fp32)."""
    h, hd, T, B = 4, 16, 12, 2
    d = h * hd
    g = torch.Generator().manual_seed(0)
    w = torch.randn(3 * d, d, generator=g, dtype=torch.float64)
    x = torch.randn(B, T, d, generator=g, dtype=torch.float64)
    inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).double() / hd))
    ang = torch.outer(torch.arange(T).double(), inv)
    ang = torch.cat((ang, ang), -1)
    cos, sin = ang.cos(), ang.sin()
    mod = ours.FusedQkvRotary(ours.cpu_stand_ins().linear_rotary_qkv, d, h, torch.device("cpu"))
    mod.double()
    mod.set_weight(w)
    assert torch.equal(mod.canonical_weight(), w)
    q, k, v = mod(x, cos, sin)
    qr, kr, vr = lm.torch_rotary(F.linear(x, w).view(B, T, 3, h, hd), cos, sin)
    torch.testing.assert_close(q @ k.transpose(-1, -2), qr @ kr.transpose(-1, -2),
                               rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(v, vr, rtol=0, atol=0)
    perm = torch.arange(hd).view(2, hd // 2).t().reshape(-1)
    torch.testing.assert_close(q, qr[..., perm], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(k, kr[..., perm], rtol=1e-12, atol=1e-12)

    cfg = dict(CFG)
    fused = lm.LM(cfg, ours.ours_parts(ours.cpu_stand_ins(), cfg, torch.device("cpu"),
                                       ["rotary"], log=lambda s: None), torch.device("cpu"))
    ref = lm.LM(cfg, lm.torch_parts(torch.device("cpu")), torch.device("cpu"))
    lm.init_weights(fused, 0)
    lm.init_weights(ref, 0)
    assert lm.checksum(fused) == lm.checksum(ref)
    fused.double()
    ref.double()
    idx = torch.randint(0, 512, (2, 16), generator=g)
    with torch.no_grad():
        torch.testing.assert_close(fused(idx, idx), ref(idx, idx), rtol=1e-6, atol=1e-6)
