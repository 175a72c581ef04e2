"""Handed case C07 (/work/shared/cases/handed.md) for the public ops whose own test files have
no C07 test: LayerNorm, top-k, linear + cross-entropy, the GEMM epilogues (gemm_act,
gemm_gated, gemm_dact, gemm_dgated) and ``quack_cpp.nn.MLP`` (softmax / log_softmax, RMSNorm,
cross-entropy and the plain GEMM have theirs in test_softmax.py, test_rmsnorm.py,
test_cross_entropy.py, test_gemm.py).

With cuda:0 current, each op runs on tensors on cuda:1: forward and, where differentiable,
backward; its outputs and gradients must be on cuda:1 and bitwise equal to the same call with
every tensor on cuda:0; the current device stays 0. The same on a side stream of cuda:1, and
a clear error (naming the device) when one input is on cuda:0 and the others on cuda:1. Paths
that allocate a workspace are included (top-k with k > 256 sorts in one; linear + CE with
several chunks accumulates dweight in one; a GEMM with K not a multiple of 8 in memory pads
through one).

Run under CUDA_LAUNCH_BLOCKING=1 as well (the case asks for it): a launch on the wrong device
then fails at the call. Needs 2 CUDA GPUs; skips otherwise (and with QUACK_TEST_DEVICE=cpu).
"""

import os

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
pytest.importorskip("quack_cpp.nn")

DEVICE = os.environ.get("QUACK_TEST_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(
    not (DEVICE == "cuda" and torch.cuda.is_available() and torch.cuda.device_count() >= 2),
    reason="C07 needs 2 CUDA GPUs")

f32, bf16 = torch.float32, torch.bfloat16
D0, D1 = torch.device("cuda:0"), torch.device("cuda:1")


@pytest.fixture(autouse=True)
def _current_device_0():
    torch.cuda.set_device(0)
    torch.manual_seed(0)
    yield
    torch.cuda.synchronize(D0)
    torch.cuda.synchronize(D1)
    assert torch.cuda.current_device() == 0


def _flat(out):
    """The tensors of a nested result (tuples, lists, dicts; None skipped), in order."""
    if out is None:
        return []
    if torch.is_tensor(out):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    return [t for o in out for t in _flat(o)]


def _check(fn, inputs, side_stream=True):
    """fn(*inputs) with every tensor on cuda:1 (cuda:0 current) == fn(*inputs) on cuda:0,
    bitwise; and the same on a side stream of cuda:1. `.to` keeps each input's strides
    (column-major operands stay column-major)."""
    on = lambda dev: [t.to(dev) if torch.is_tensor(t) else t for t in inputs]  # noqa: E731
    ref = _flat(fn(*on(D0)))
    assert ref, "fn returned no tensor"
    assert torch.cuda.current_device() == 0
    got = _flat(fn(*on(D1)))
    assert torch.cuda.current_device() == 0
    assert len(got) == len(ref)
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.device == D1, (i, g.device)
        assert g.dtype == r.dtype and g.shape == r.shape, i
        assert torch.equal(g.cpu(), r.cpu()), f"output {i} differs from the cuda:0 run"
    if not side_stream:
        return
    s1 = torch.cuda.Stream(device=D1)
    ins = on(D1)
    s1.wait_stream(torch.cuda.current_stream(D1))
    with torch.cuda.stream(s1):
        got = _flat(fn(*ins))
    torch.cuda.current_stream(D1).wait_stream(s1)
    assert torch.cuda.current_device() == 0
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.device == D1 and torch.equal(g.cpu(), r.cpu()), f"side stream: output {i}"


def _mixed(fn, inputs, which):
    """inputs on cuda:1 except inputs[which] on cuda:0: a ValueError / RuntimeError that names
    a device, raised before anything runs."""
    ins = [t.to(D1) if torch.is_tensor(t) else t for t in inputs]
    ins[which] = inputs[which].to(D0)
    with pytest.raises((ValueError, RuntimeError), match=r"cuda:0|cuda:1|device"):
        fn(*ins)
    assert torch.cuda.current_device() == 0


def _grads(fn, inputs, dys):
    """(outputs, gradients of the float inputs) of fn for upstream gradients dys."""
    leaves = [t.detach().clone().requires_grad_(True) if torch.is_tensor(t) and
              t.is_floating_point() else t for t in inputs]
    outs = fn(*leaves)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    pairs = [(o, dy) for o, dy in zip(outs, dys) if o is not None and dy is not None]
    torch.autograd.backward([o for o, _ in pairs], [dy.to(o.device) for o, dy in pairs])
    return [o.detach() for o in outs], [t.grad for t in leaves
                                        if torch.is_tensor(t) and t.is_floating_point()]


# --------------------------------------------------------------------------------------------
# LayerNorm
# --------------------------------------------------------------------------------------------


def test_layernorm():
    M, N = 8, 4096
    x = torch.randn(M, N).to(bf16)
    w, b = torch.randn(N), torch.randn(N)
    r = torch.randn(M, N).to(bf16)
    dy, dr = torch.randn(M, N).to(bf16), torch.randn(M, N).to(bf16)

    def fwd_bwd(x, w, b, r, dy, dr):
        return _grads(lambda x, w, b, r: quack_cpp.layernorm(x, w, b, r, eps=1e-5,
                                                             prenorm=True),
                      (x, w, b, r), (dy, dr))

    _check(fwd_bwd, (x, w, b, r, dy, dr))
    _check(lambda x, w: quack_cpp.layernorm(x, w), (x, w))
    _mixed(lambda x, w: quack_cpp.layernorm(x, w), (x, w), 1)


# --------------------------------------------------------------------------------------------
# Top-k
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k,softmax", [(8, False), (8, True), (8, "pre"), (300, False)])
def test_topk(k, softmax):
    x = torch.randn(8, 4096).to(bf16)
    dv = torch.randn(8, k).to(bf16)

    def fwd_bwd(x, dv):
        outs, grads = _grads(lambda x: quack_cpp.topk(x, k, softmax=softmax), (x,), (dv, None))
        return outs, grads

    _check(fwd_bwd, (x, dv))


def test_topk_sort_path_fp32():
    # k > 256: the sort path and its workspace (allocated on x's device).
    _check(lambda x: quack_cpp.topk(x, 512, largest=False), (torch.randn(16, 2048),))


# --------------------------------------------------------------------------------------------
# Linear + cross-entropy
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_linear_cross_entropy(reduction):
    T, Dm, V = 96, 256, 2048
    x = torch.randn(T, Dm).to(bf16)
    w = (torch.randn(V, Dm) / 16).to(bf16)
    t = torch.randint(0, V, (T,))
    t[3] = -100
    g = torch.randn(T) if reduction == "none" else torch.tensor(0.5)

    def fwd_bwd(x, w, t, g):
        # chunk_size fixed: the default follows the device's free memory.
        return _grads(lambda x, w: quack_cpp.linear_cross_entropy(
            x, w, t, reduction=reduction, z_loss=1e-3, chunk_size=64), (x, w), (g,))

    _check(fwd_bwd, (x, w, t, g))
    lce = lambda x, w, t: quack_cpp.linear_cross_entropy(x, w, t, chunk_size=64)  # noqa: E731
    _mixed(lce, (x, w, t), 1)
    _mixed(lce, (x, w, t), 2)


def test_linear_cross_entropy_default_chunk():
    # chunk_size None: the chunk rule reads the free memory of x's device (one chunk here).
    T, Dm, V = 64, 128, 512
    x, w = torch.randn(T, Dm).to(bf16), (torch.randn(V, Dm) / 8).to(bf16)
    t = torch.randint(0, V, (T,))
    _check(lambda x, w, t: _grads(lambda x, w: quack_cpp.linear_cross_entropy(x, w, t),
                                  (x, w), (torch.tensor(1.0),)), (x, w, t))


# --------------------------------------------------------------------------------------------
# GEMM epilogues
# --------------------------------------------------------------------------------------------


def _w(n, k):
    return (torch.randn(n, k) / 8).to(bf16)


@pytest.mark.parametrize("K", [200, 100])  # 100: not a multiple of 8 -> padded copies
def test_gemm_act(K):
    M, N = 257, 264
    A, W, bias = torch.randn(M, K).to(bf16), _w(N, K), torch.randn(N)
    fn = lambda A, B, bias: quack_cpp.gemm_act(A, B, "relu_sq", bias=bias)  # noqa: E731
    _check(fn, (A, W.t(), bias))
    _mixed(fn, (A, W.t(), bias), 1)
    _mixed(fn, (A, W.t(), bias), 2)


def test_gemm_gated():
    M, K, H = 257, 200, 136
    A, W = torch.randn(M, K).to(bf16), _w(2 * H, K)
    fn = lambda A, B: quack_cpp.gemm_gated(A, B, "swiglu")  # noqa: E731
    _check(fn, (A, W.t()))
    _mixed(fn, (A, W.t()), 0)


def test_gemm_dact():
    M, K, N = 257, 200, 264
    dout, W2 = torch.randn(M, K).to(bf16), _w(K, N)  # B row-major (K, N)
    preact = torch.randn(M, N).to(bf16)
    fn = lambda A, B, p: quack_cpp.gemm_dact(A, B, p, "gelu_tanh_approx")  # noqa: E731
    _check(fn, (dout, W2, preact))
    _mixed(fn, (dout, W2, preact), 2)


def test_gemm_dgated():
    M, K, H = 257, 200, 136
    dout, W2 = torch.randn(M, K).to(bf16), _w(K, H)
    preact = torch.randn(M, 2 * H).to(bf16)
    fn = lambda A, B, p: quack_cpp.gemm_dgated(A, B, p, "swiglu")  # noqa: E731
    _check(fn, (dout, W2, preact))
    _mixed(fn, (dout, W2, preact), 1)


# --------------------------------------------------------------------------------------------
# nn.MLP
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("activation,bias,fuse", [("swiglu", True, False),
                                                  ("relu_sq", False, True)])
def test_mlp(activation, bias, fuse):
    import quack_cpp.nn as qnn

    torch.manual_seed(1)
    base = qnn.MLP(256, 512, activation=activation, bias=bias, fuse_grad_accum=fuse).to(bf16)
    x = torch.randn(2, 64, 256).to(bf16)
    dy = torch.randn(2, 64, 256).to(bf16)

    def run(x, dy):
        m = qnn.MLP(256, 512, activation=activation, bias=bias, fuse_grad_accum=fuse,
                    device=x.device, dtype=bf16)
        m.load_state_dict(base.state_dict())
        xl = x.clone().requires_grad_(True)
        outs = []
        for _ in range(2):  # the second backward accumulates into .grad (in place if fused)
            y = m(xl)
            y.backward(dy)
            outs.append(y.detach())
        return outs, xl.grad, {n: p.grad for n, p in m.named_parameters()}

    _check(run, (x, dy))
    m1 = qnn.MLP(256, 512, activation=activation, bias=bias, device=D1, dtype=bf16)
    with pytest.raises((ValueError, RuntimeError), match=r"cuda:0|cuda:1|device"):
        m1(x.to(D0))
    assert torch.cuda.current_device() == 0
