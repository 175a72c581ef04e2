"""The eager fast path on the GPU: ``quack_cpp.rmsnorm``, ``layernorm``, ``cross_entropy``,
``gemm``, ``gemm_add``, ``gemm_add_inplace``, ``linear`` / ``nn.Linear``, ``nn.RMSNorm`` and
``nn.LayerNorm`` give
bit-for-bit the same
outputs and gradients on the fast path (``_C`` called from autograd.Functions) as on the custom
ops (``quack_cpp.ops.FORCE_CUSTOM_OP = True``, what ``QUACK_EAGER_CUSTOM_OP=1`` sets), on random
data; each test also checks that the fast path was the one taken. Plus: CUDA-graph capture and
replay through the fast path, no host synchronisation (sync debug mode), a side stream.

Backward GEMMs need the transposed layouts: marker all_majors (as test_gemm.py).
Skips without a CUDA GPU (and with QUACK_TEST_DEVICE=cpu): the plumbing is checked on CPU in
test_fastpath_cpu.py.
"""

import os

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
ops = pytest.importorskip("quack_cpp.ops")
gemm_ops = pytest.importorskip("quack_cpp.gemm_ops")
ln_ops = pytest.importorskip("quack_cpp.layernorm_ops")
qnn = pytest.importorskip("quack_cpp.nn")

DEVICE = "cuda"
pytestmark = pytest.mark.skipif(
    os.environ.get("QUACK_TEST_DEVICE", "cuda") != "cuda" or not torch.cuda.is_available(),
    reason="needs a CUDA GPU (CPU plumbing: test_fastpath_cpu.py)")
all_majors = pytest.mark.all_majors

f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16


reg = pytest.importorskip("quack_cpp._registrar")


# The fast path in C++ (quack_cpp._torch, where built) and in Python: each against the custom ops.
@pytest.fixture(autouse=True, params=["cpp", "python"] if ops._torch_ext is not None
                else ["python"])
def _fast_by_default(request, monkeypatch):
    monkeypatch.setattr(ops, "FORCE_CUSTOM_OP", False)
    monkeypatch.setattr(reg, "CPP_EAGER", request.param == "cpp")


def _both(fn, monkeypatch):
    """fn(seed-0 generator) on the fast path, then on the custom ops."""
    def once():
        return fn(torch.Generator(DEVICE).manual_seed(0))

    fast = once()
    monkeypatch.setattr(ops, "FORCE_CUSTOM_OP", True)
    try:
        slow = once()
    finally:
        monkeypatch.setattr(ops, "FORCE_CUSTOM_OP", False)
    return fast, slow


def _assert_equal(fast, slow):
    assert len(fast) == len(slow)
    for i, (a, b) in enumerate(zip(fast, slow)):
        assert (a is None) == (b is None), i
        if a is not None:
            assert (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride()), i
            # bit for bit, NaN included (an empty mean and an out-of-range target give NaN)
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True, msg=str(i))


def _node(t):
    """The autograd node type that made t (through the (..., N) view)."""
    return type(_grad_fn(t))


def _grad_fn(t):
    return (t if t._base is None else t._base).grad_fn


def _rms_fast(t):
    """Whether t came from rmsnorm's fast path (the Python Function or the C++ node)."""
    return ops.rmsnorm_fwd.is_fast_node(_grad_fn(t))


def randn(g, *shape, dtype=f32, scale=1.0, shift=0.0):
    return (torch.randn(*shape, device=DEVICE, generator=g) * scale + shift).to(dtype)


# --------------------------------------------------------------------------------------------
# RMSNorm
# --------------------------------------------------------------------------------------------

RMS_CASES = [
    # M, N, x dtype, weight dtype, residual dtype (None: no residual), bias, prenorm,
    # residual_dtype arg, out_dtype, which of x, w, b, r require grad
    (257, 4096, bf16, f32, None, False, False, None, None, "xw"),
    (8192, 4096, bf16, f32, f32, False, True, None, None, "xwr"),
    (7, 65536, bf16, bf16, bf16, True, True, None, None, "xwbr"),
    (1, 127, f32, f32, None, True, False, None, None, "xwb"),
    (257, 500, f16, f32, f16, False, True, f32, None, "x"),
    (64, 1024, bf16, f32, None, False, False, None, f32, "w"),
    (33, 2048, bf16, None, None, False, True, f32, None, "x"),
    (257, 4096, bf16, f32, bf16, False, False, None, None, ""),
]


def _rms_run(case, g, strided=False, sum_dy=False):
    M, N, dtype, wdtype, rdtype, bias, prenorm, rd_arg, out_dtype, req = case
    x = randn(g, M, N + 64 if strided else N, dtype=dtype)[:, :N]  # row stride > N if strided
    w = randn(g, N, scale=0.5, shift=1.0, dtype=wdtype) if wdtype is not None else None
    b = randn(g, N, scale=0.1, dtype=wdtype or dtype) if bias else None
    r = randn(g, M, N, dtype=rdtype) if rdtype is not None else None
    leaves = [t.requires_grad_(k in req) if t is not None else None
              for k, t in zip("xwbr", (x, w, b, r))]
    outs = quack_cpp.rmsnorm(*leaves, eps=1e-5, prenorm=prenorm, residual_dtype=rd_arg,
                             out_dtype=out_dtype)
    outs = outs if isinstance(outs, tuple) else (outs,)
    fast = _rms_fast(outs[0])
    diff = [o for o in outs if o.requires_grad]
    if sum_dy and diff:
        sum(o.float().sum() for o in diff).backward()  # stride-0 dy
    elif diff:
        torch.autograd.backward(diff, [randn(g, *o.shape, dtype=o.dtype) for o in diff])
    grads = [t.grad if t is not None else None for t in leaves]
    return [o.detach() for o in outs] + grads, fast


@pytest.mark.parametrize("case", RMS_CASES,
                         ids=lambda c: f"{c[0]}x{c[1]}-{c[2]}-grad{c[9] or 'none'}")
def test_rmsnorm_bitwise(case, monkeypatch):
    (fast, ffast), (slow, sfast) = _both(lambda g: _rms_run(case, g), monkeypatch)
    assert ffast == bool(case[-1]) and not sfast
    _assert_equal(fast, slow)


@pytest.mark.parametrize("sum_dy", [False, True])
def test_rmsnorm_strided_x_and_stride0_dy(sum_dy, monkeypatch):
    case = RMS_CASES[1]
    (fast, ffast), (slow, _) = _both(lambda g: _rms_run(case, g, strided=True, sum_dy=sum_dy),
                                     monkeypatch)
    assert ffast
    _assert_equal(fast, slow)


@pytest.mark.parametrize("x_dtype", [f32, bf16], ids=str)
def test_rmsnorm_module_autocast(x_dtype, monkeypatch):
    def go(g):
        m = qnn.RMSNorm(2048, device=DEVICE)
        with torch.no_grad():
            m.weight.copy_(randn(g, 2048, scale=0.5, shift=1.0))
        x = randn(g, 16, 64, 2048, dtype=x_dtype).requires_grad_(True)
        with torch.autocast(DEVICE, dtype=bf16):
            y = m(x)
        y.backward(randn(g, *y.shape, dtype=y.dtype))
        return [y.detach(), x.grad, m.weight.grad], _rms_fast(y)

    (fast, ffast), (slow, sfast) = _both(go, monkeypatch)
    assert ffast and not sfast
    _assert_equal(fast, slow)


# --------------------------------------------------------------------------------------------
# LayerNorm (C++ node LayerNormFn / Python Function, against the custom ops)
# --------------------------------------------------------------------------------------------

LN_CASES = [
    # M, N, x dtype, weight dtype, residual dtype (None: no residual), bias, prenorm,
    # residual_dtype arg, out_dtype, weight_offset, return_mean, return_rstd, which of x, w, b,
    # r require grad
    (257, 4096, bf16, f32, None, True, False, None, None, 0.0, False, False, "xwb"),
    (8, 1024, bf16, bf16, None, True, False, None, None, 0.0, True, True, "xwb"),
    (8192, 4096, bf16, f32, f32, False, True, None, None, 1.0, False, True, "xwr"),
    (7, 65536, bf16, bf16, bf16, True, True, None, None, 0.5, True, False, "xwbr"),
    (1, 127, f32, f32, None, True, False, None, None, 0.0, True, True, "xwb"),
    (257, 500, f16, f32, f16, False, True, f32, None, 0.0, False, False, "x"),
    (64, 1024, bf16, f32, None, False, False, None, f32, 0.0, False, False, "w"),
    (33, 2048, bf16, None, None, True, True, f32, None, 0.0, False, False, "xb"),
    (129, 768, bf16, None, bf16, False, False, None, None, 0.0, False, False, "r"),
    (257, 4096, bf16, f32, bf16, False, False, None, None, 0.0, True, True, ""),
]


def _ln_fast(t):
    """Whether t came from layernorm's fast path (the Python Function or the C++ node)."""
    return ln_ops.layernorm_fwd.is_fast_node(_grad_fn(t))


def _ln_run(case, g, strided=False, sum_dy=False):
    (M, N, dtype, wdtype, rdtype, bias, prenorm, rd_arg, out_dtype, offset, ret_mean, ret_rstd,
     req) = case
    x = randn(g, M, N + 64 if strided else N, dtype=dtype)[:, :N]  # row stride > N if strided
    w = randn(g, N, scale=0.5, shift=1.0, dtype=wdtype) if wdtype is not None else None
    b = randn(g, N, scale=0.1, dtype=wdtype or dtype) if bias else None
    r = randn(g, M, N, dtype=rdtype) if rdtype is not None else None
    leaves = [t.requires_grad_(k in req) if t is not None else None
              for k, t in zip("xwbr", (x, w, b, r))]
    outs = quack_cpp.layernorm(*leaves, eps=1e-5, prenorm=prenorm, residual_dtype=rd_arg,
                               out_dtype=out_dtype, weight_offset=offset, return_mean=ret_mean,
                               return_rstd=ret_rstd)
    outs = outs if isinstance(outs, tuple) else (outs,)
    fast = _ln_fast(outs[0])
    diff = [o for o in outs if o.requires_grad]
    if sum_dy and diff:
        sum(o.float().sum() for o in diff).backward()  # stride-0 dy
    elif diff:
        torch.autograd.backward(diff, [randn(g, *o.shape, dtype=o.dtype) for o in diff])
    grads = [t.grad if t is not None else None for t in leaves]
    return [o.detach() for o in outs] + grads, fast


@pytest.mark.parametrize("case", LN_CASES,
                         ids=lambda c: f"{c[0]}x{c[1]}-{c[2]}-off{c[9]}-grad{c[12] or 'none'}")
def test_layernorm_bitwise(case, monkeypatch):
    (fast, ffast), (slow, sfast) = _both(lambda g: _ln_run(case, g), monkeypatch)
    assert ffast == bool(case[-1]) and not sfast
    _assert_equal(fast, slow)


@pytest.mark.parametrize("sum_dy", [False, True])
def test_layernorm_strided_x_and_stride0_dy(sum_dy, monkeypatch):
    case = LN_CASES[2]
    (fast, ffast), (slow, _) = _both(lambda g: _ln_run(case, g, strided=True, sum_dy=sum_dy),
                                     monkeypatch)
    assert ffast
    _assert_equal(fast, slow)


def test_layernorm_cpp_node_taken(monkeypatch):
    """With quack_cpp._torch built and CPP_EAGER on, the C++ node records the call."""
    if not reg.CPP_EAGER:
        pytest.skip("the Python fast path (parameter 'python')")
    x = torch.randn(8, 1024, device=DEVICE, dtype=bf16, requires_grad=True)
    y = quack_cpp.layernorm(x, torch.ones(1024, device=DEVICE))
    assert y.grad_fn.name() == "torch::autograd::CppNode<quack_torch::LayerNormFn>"


def test_layernorm_only_residual_out_used(monkeypatch):
    def go(g):
        x, r = randn(g, 300, 1024, dtype=bf16), randn(g, 300, 1024, dtype=bf16)
        w = randn(g, 1024, scale=0.5, shift=1.0)
        for t in (x, r, w):
            t.requires_grad_(True)
        out, h = quack_cpp.layernorm(x, w, residual=r, prenorm=True, residual_dtype=f32)
        fast = _ln_fast(out)
        h.backward(randn(g, *h.shape))
        return [out.detach(), h.detach(), x.grad, r.grad, w.grad], fast

    (fast, ffast), (slow, sfast) = _both(go, monkeypatch)
    assert ffast and not sfast
    _assert_equal(fast, slow)


def test_layernorm_double_backward(monkeypatch):
    """create_graph=True: the fast path's backward runs the custom op quack_cpp::layernorm_bwd
    (no autograd formula): the first-order gradients equal the custom op's, and
    differentiating them raises as on the custom-op path."""
    def go(g):
        x = randn(g, 64, 1024, dtype=bf16).requires_grad_(True)
        w = randn(g, 1024, scale=0.5, shift=1.0).requires_grad_(True)
        y = quack_cpp.layernorm(x, w, weight_offset=0.5)
        fast = _ln_fast(y)
        gx, gw = torch.autograd.grad(y, (x, w), randn(g, *y.shape, dtype=bf16),
                                     create_graph=True)
        with pytest.raises(RuntimeError, match="no autograd formula"):
            gx.float().sum().backward()
        return [y.detach(), gx.detach(), gw.detach()], fast

    (fast, ffast), (slow, sfast) = _both(go, monkeypatch)
    assert ffast and not sfast
    _assert_equal(fast, slow)


@pytest.mark.parametrize("x_dtype", [f32, bf16], ids=str)
def test_layernorm_module_autocast(x_dtype, monkeypatch):
    def go(g):
        m = qnn.LayerNorm(2048, device=DEVICE)
        with torch.no_grad():
            m.weight.copy_(randn(g, 2048, scale=0.5, shift=1.0))
            m.bias.copy_(randn(g, 2048, scale=0.1))
        x = randn(g, 16, 64, 2048, dtype=x_dtype).requires_grad_(True)
        with torch.autocast(DEVICE, dtype=bf16):
            y = m(x)
        y.backward(randn(g, *y.shape, dtype=y.dtype))
        return [y.detach(), x.grad, m.weight.grad, m.bias.grad], _ln_fast(y)

    (fast, ffast), (slow, sfast) = _both(go, monkeypatch)
    assert ffast and not sfast
    _assert_equal(fast, slow)


# --------------------------------------------------------------------------------------------
# GEMM, gemm_add, gemm_add_inplace, Linear
# --------------------------------------------------------------------------------------------


def _gemm_fwd(g):
    A, Bt = randn(g, 1000, 512, dtype=bf16), randn(g, 768, 512, dtype=bf16)
    with torch.no_grad():
        return [quack_cpp.gemm(A, Bt.T), quack_cpp.gemm(A, Bt.T, out_dtype=f32, alpha=0.5)]


def _gemm_add_fwd(g):
    A, Bt = randn(g, 3, 256, 512, dtype=bf16), randn(g, 3, 384, 512, dtype=bf16)
    C = randn(g, 3, 256, 384)
    beta = torch.tensor(-2.0, device=DEVICE)
    return [quack_cpp.gemm_add(A, Bt.mT, C, alpha=0.5, beta=beta, out_dtype=f32),
            quack_cpp.gemm_add(A, Bt.mT, C.to(bf16), beta=0.25)]


def _gemm_add_inplace(g):
    A, Bt = randn(g, 512, 256, dtype=bf16), randn(g, 384, 256, dtype=bf16)
    out = randn(g, 512, 384)
    v = out._version
    quack_cpp.gemm_add_inplace(A, Bt.T, out, alpha=2.0, beta=torch.tensor(0.5, device=DEVICE))
    return [out, torch.tensor(out._version - v)]


def _gemm_bwd(g):
    A = randn(g, 1000, 512, dtype=bf16).requires_grad_(True)
    B = randn(g, 512, 768, dtype=bf16).requires_grad_(True)
    C = randn(g, 1000, 768).requires_grad_(True)
    D = quack_cpp.gemm_add(A, B, C, alpha=0.5, beta=-3.0, out_dtype=f32)
    assert (_node(D) is gemm_ops.gemm_op.Function._backward_cls) == (not ops.FORCE_CUSTOM_OP)
    D.backward(randn(g, 1000, 768))
    E = quack_cpp.gemm(A, B)
    E.sum().backward()  # stride-0 dD
    return [D.detach(), E.detach(), A.grad, B.grad, C.grad]


def _linear(wdtype, autocast, fuse=True, bias=False):
    # fuse: the second backward accumulates into weight.grad in place (Linear.backward's);
    # without it the C++ node's own backward runs on the fast path
    def go(g):
        q = qnn.Linear(512, 768, bias=bias, device=DEVICE, dtype=wdtype, fuse_grad_accum=fuse)
        with torch.no_grad():
            q.weight.copy_(randn(g, 768, 512, scale=0.05))
            if bias:
                q.bias.copy_(randn(g, 768))
        x = randn(g, 4, 100, 512, dtype=wdtype).requires_grad_(True)
        res = []
        for _ in range(2):
            with torch.autocast(DEVICE, dtype=bf16, enabled=autocast):
                y = q(x)
            y.backward(randn(g, *y.shape, dtype=y.dtype))
            res += [y.detach(), x.grad.clone(), q.weight.grad.clone()]
            if bias:
                res.append(q.bias.grad.clone())
        return res
    go.__name__ = (f"linear_{wdtype}_{'autocast' if autocast else 'plain'}"
                   f"{'_fused' if fuse else ''}{'_bias' if bias else ''}")
    return go


GEMM_FWD = [_gemm_fwd, _gemm_add_fwd, _gemm_add_inplace]
GEMM_BWD = [_gemm_bwd, _linear(bf16, False), _linear(f32, True), _linear(bf16, False, False),
            _linear(f32, True, False, True)]


@pytest.mark.parametrize("scenario", GEMM_FWD, ids=lambda f: f.__name__)
def test_gemm_forward_bitwise(scenario, monkeypatch):
    fast, slow = _both(scenario, monkeypatch)
    _assert_equal(fast, slow)


@all_majors
@pytest.mark.parametrize("scenario", GEMM_BWD, ids=lambda f: f.__name__)
def test_gemm_backward_bitwise(scenario, monkeypatch):
    fast, slow = _both(scenario, monkeypatch)
    _assert_equal(fast, slow)


# --------------------------------------------------------------------------------------------
# Cross-entropy (the C++ node CrossEntropyFn, or the Python Function; NotImplemented cases of
# the C++ path take the Python one)
# --------------------------------------------------------------------------------------------

ce_ops = pytest.importorskip("quack_cpp.cross_entropy_ops")
CE_NODE = "torch::autograd::CppNode<quack_torch::CrossEntropyFn>"

CE_CASES = [
    # M, V, x dtype, target dtype, cross_entropy's keywords, how the backward runs:
    # "one" (autograd.grad, grad_output 1), "half" (0.5), "backward" (loss.backward()),
    # "rows" (a random grad_output per row: 'none'), "retain" (two retained backwards with
    # 0.5, then a last one), "nograd" (the logits do not require grad)
    (4096, 4096, bf16, torch.int64, {}, "one"),
    (4096, 4096, bf16, torch.int64, {}, "backward"),
    (1000, 32768, bf16, torch.int32, {"reduction": "sum"}, "half"),
    (257, 4100, f32, torch.int64, {"reduction": "none"}, "rows"),
    (257, 4096, f16, torch.int64, {"reduction": "none"}, "nograd"),
    (300, 4096, bf16, torch.int64, {}, "nograd"),
    (513, 8192, bf16, torch.int64, {"return_lse": True, "return_z_loss": True,
                                    "z_loss": 1e-4}, "half"),
    (513, 8192, f32, torch.int64, {"label_smoothing": 0.1, "ignore_index": 3,
                                   "logit_softcap": 30.0}, "one"),
    (513, 8000, bf16, torch.int64, {"weight": True, "label_smoothing": 0.05}, "half"),
    (1024, 4096, bf16, torch.int64, {"inplace_backward": True}, "half"),
    (1024, 4096, bf16, torch.int64, {"inplace_backward": True}, "one"),
    (1024, 4096, bf16, torch.int64, {"inplace_backward": True, "reduction": "none"}, "rows"),
    (1024, 4096, bf16, torch.int64, {}, "retain"),
    (1024, 4096, f32, torch.int64, {"reduction": "none"}, "retain"),
    (0, 4096, bf16, torch.int64, {}, "one"),
    (256, 4096, f32, torch.int64, {"lse_partial": True}, "half"),  # the Python fast path
]


def _ce_run(case, word, g):
    M, V, dtype, tdtype, kw, how = case
    ce_ops.dx_predict_word(torch.device(DEVICE)).fill_(word)  # the same prediction both runs
    kw = dict(kw)
    x = randn(g, M, V, dtype=dtype, scale=2.0)
    t = torch.randint(0, V, (M,), device=DEVICE, generator=g).to(tdtype)
    if M > 4:
        t[1] = -100  # an ignored row
    if kw.get("weight"):
        kw["weight"] = torch.rand(V, device=DEVICE, generator=g) + 0.5
    if kw.get("lse_partial"):
        kw["lse_partial"] = torch.logsumexp(x.float().view(M, 4, V // 4), -1)
    leaf = x.requires_grad_(how != "nograd")
    z = leaf * 1 if how != "nograd" else leaf
    out = quack_cpp.cross_entropy(z, t, **kw)
    outs = list(out) if isinstance(out, tuple) else [out]
    loss = outs[0]
    node = loss.grad_fn
    fast = ce_ops.cross_entropy_fwd.is_fast_node(node)
    cpp = node is not None and node.name() == CE_NODE
    grads = []
    if how in ("one", "half"):
        grads = list(torch.autograd.grad(loss, leaf, None if how == "one"
                                         else torch.full_like(loss, 0.5)))
    elif how == "backward":
        loss.backward()
        grads = [leaf.grad]
    elif how == "rows":
        grads = list(torch.autograd.grad(loss, leaf, randn(g, *loss.shape)))
    elif how == "retain":
        go = torch.full_like(loss, 0.5)
        grads = [torch.autograd.grad(loss, leaf, go, retain_graph=True)[0].clone()
                 for _ in range(2)]
        grads.append(torch.autograd.grad(loss, leaf, go)[0])
    word_after = ce_ops.dx_predict_word(torch.device(DEVICE)).clone()
    return [o.detach() for o in outs] + grads + [word_after], (fast, cpp)


@pytest.mark.parametrize("word", [1, 0])
@pytest.mark.parametrize("case", CE_CASES,
                         ids=lambda c: f"{c[0]}x{c[1]}-{c[2]}-{c[3]}-{c[4]}-{c[5]}")
def test_cross_entropy_bitwise(case, word, monkeypatch):
    """Both fast paths (C++ node, Python Function) against the custom ops, bit for bit, with
    the device's dx prediction word pinned (dx written in the forward, or recomputed in the
    backward), and the word the backward leaves."""
    (fast, (ffast, fcpp)), (slow, (sfast, _)) = _both(lambda g: _ce_run(case, word, g),
                                                      monkeypatch)
    recorded = case[-1] != "nograd"
    kw = case[4]
    inplace = bool(kw.get("inplace_backward")) and recorded
    mean = kw.get("reduction", "mean") == "mean"
    assert ffast == recorded and not sfast
    # 'mean' from lse (inplace_backward) is the Python fast path's.
    assert fcpp == (recorded and reg.CPP_EAGER and "lse_partial" not in kw
                    and not (inplace and mean))
    if inplace and kw.get("reduction", "mean") != "none":
        # The fast path's backward from lse leaves the word as it was; the custom op (no
        # in-place write: a fresh dx on the predicted path) sets it to grad_output == 1.
        assert int(fast[-1][0]) == word
        fast, slow = fast[:-1], slow[:-1]
    _assert_equal(fast, slow)


def test_cross_entropy_double_backward(monkeypatch):
    """create_graph=True with a grad_output that requires grad: the training backward is the
    custom op quack_cpp::cross_entropy_train_bwd through the dispatcher (no autograd formula:
    differentiating the gradient raises), on both fast paths as on the custom ops."""
    def go(g):
        ce_ops.dx_predict_word(torch.device(DEVICE)).fill_(1)
        x = randn(g, 512, 4096, dtype=bf16).requires_grad_(True)
        t = torch.randint(0, 4096, (512,), device=DEVICE, generator=g)
        loss = quack_cpp.cross_entropy(x, t)
        fast = ce_ops.cross_entropy_fwd.is_fast_node(loss.grad_fn)
        go_ = torch.tensor(0.5, device=DEVICE, requires_grad=True)
        gx, = torch.autograd.grad(loss, x, go_, create_graph=True)
        assert gx.requires_grad
        with pytest.raises(RuntimeError, match="no autograd formula"):
            gx.float().sum().backward()
        return [loss.detach(), gx.detach()], fast

    (fast, ffast), (slow, sfast) = _both(go, monkeypatch)
    assert ffast and not sfast
    _assert_equal(fast, slow)


def test_cross_entropy_cuda_graph_and_no_sync(monkeypatch):
    """The training step ('mean', loss * s) captured through the fast path and replayed with
    s = 1 and 0.5, the prediction word at 1 and 0 (dx written or recomputed), equals the eager
    fast path with the same word; no host synchronisation in eager calls."""
    g = torch.Generator(DEVICE).manual_seed(0)
    x = randn(g, 1024, 8192, dtype=bf16).requires_grad_(True)
    t = torch.randint(0, 8192, (1024,), device=DEVICE, generator=g)
    s = torch.ones((), device=DEVICE)

    def step():
        loss = quack_cpp.cross_entropy(x, t)
        assert ce_ops.cross_entropy_fwd.is_fast_node(loss.grad_fn)
        gx, = torch.autograd.grad(loss * s, x)
        return loss, gx

    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss_s, gx_s = step()
    word = ce_ops.dx_predict_word(torch.device(DEVICE))
    for scale, w in ((1.0, 1), (0.5, 1), (0.5, 0), (1.0, 0)):
        s.fill_(scale)
        word.fill_(w)
        graph.replay()
        torch.cuda.synchronize()
        got = [loss_s.clone(), gx_s.clone(), word.clone()]
        word.fill_(w)
        want = [o.detach() for o in step()] + [word.clone()]
        _assert_equal(got, want)


# --------------------------------------------------------------------------------------------
# CUDA graphs, host synchronisation, streams
# --------------------------------------------------------------------------------------------


@all_majors
def test_cuda_graph_capture_fast_path():
    """An RMSNorm (residual, prenorm) + Linear step, forward and backward, captured through the
    fast path and replayed on new inputs, equals the eager fast path on those inputs."""
    g = torch.Generator(DEVICE).manual_seed(0)
    M, N = 512, 1024
    x = randn(g, M, N, dtype=bf16).requires_grad_(True)
    r = randn(g, M, N, dtype=bf16).requires_grad_(True)
    w = randn(g, N, scale=0.5, shift=1.0).requires_grad_(True)
    lin = qnn.Linear(N, 768, device=DEVICE, dtype=bf16)
    dy, dh = randn(g, M, 768, dtype=bf16), randn(g, M, N, dtype=bf16)
    params = (x, r, w, lin.weight)

    def step():
        y, h = quack_cpp.rmsnorm(x, w, residual=r, prenorm=True)
        z = lin(y)
        assert _rms_fast(y)  # the fast path, also when capturing
        torch.autograd.backward([z, h], [dy, dh])
        return z, h

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # warm-up
            for p in params:
                p.grad = None
            step()
    torch.cuda.current_stream().wait_stream(s)
    for p in params:
        p.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        z_s, h_s = step()
    with torch.no_grad():
        for t in (x, r, dy, dh):
            t.copy_(randn(g, *t.shape, dtype=t.dtype))
    graph.replay()
    torch.cuda.synchronize()
    got = [z_s.clone(), h_s.clone()] + [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    z, h = step()
    _assert_equal(got, [z.detach(), h.detach()] + [p.grad for p in params])


@all_majors
def test_no_host_sync():
    g = torch.Generator(DEVICE).manual_seed(0)
    x = randn(g, 256, 1024, dtype=bf16).requires_grad_(True)
    w = randn(g, 1024).requires_grad_(True)
    lin = qnn.Linear(1024, 512, device=DEVICE, dtype=bf16, fuse_grad_accum=True)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            lin(quack_cpp.rmsnorm(x, w)).sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def test_side_stream():
    g = torch.Generator(DEVICE).manual_seed(0)
    x = randn(g, 1024, 4096, dtype=bf16).requires_grad_(True)
    w = randn(g, 4096, scale=0.5, shift=1.0)
    dy = randn(g, 1024, 4096, dtype=bf16)
    y0 = quack_cpp.rmsnorm(x, w)
    y0.backward(dy)
    dx0, x.grad = x.grad, None
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        x2 = x * 1  # made on s: a launch on another stream would race with it
        y = quack_cpp.rmsnorm(x2, w)
        y.backward(dy)
    torch.cuda.current_stream().wait_stream(s)
    assert torch.equal(y, y0) and torch.equal(x.grad, dx0)
