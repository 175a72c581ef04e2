"""The C++ eager paths (quack_cpp._torch, built by pip where torch is importable: rmsnorm,
layernorm, softmax, log_softmax) without a GPU: with their launches skipped
(``_set_stub_launches``) and CPU tensors let through the route, every case gives the outputs
(shape, dtype, strides, None where absent), the autograd node, the gradients' metadata and the
errors that the Python fast path gives. The values are the GPU tests' (test_fastpath.py runs
every case on both fast paths against the custom ops). Skips where the extension is not
built."""

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
ops = pytest.importorskip("quack_cpp.ops")
reg = pytest.importorskip("quack_cpp._registrar")
if ops._torch_ext is None:
    pytest.skip("quack_cpp._torch not built (torch was not importable at build time)", allow_module_level=True)
if torch.cuda.is_available():
    # CPU tensors let through a path that takes CUDA streams and devices from its inputs: on a
    # machine with a GPU this process died (SIGSEGV, H200). test_fastpath.py runs every case
    # there on the real kernels.
    pytest.skip("CPU-only test of the C++ path; test_fastpath.py covers it on a GPU", allow_module_level=True)

from test_fastpath_cpu import RMS_CASES, _cpu_as_cuda  # noqa: E402

sm = pytest.importorskip("quack_cpp.softmax_ops")
ln = pytest.importorskip("quack_cpp.layernorm_ops")

f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16


def _route_host(monkeypatch):
    """CPU tensors take the route's CUDA fast path (the C++ and Python paths under test)."""
    monkeypatch.setattr(reg, "_is_plain_cuda", _cpu_as_cuda)
    monkeypatch.setattr(reg, "DEVICE_TYPES", reg.DEVICE_TYPES + ("cpu",))


@pytest.fixture
def stubbed(monkeypatch):
    _route_host(monkeypatch)
    monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", False)
    # The Python path's launches skipped too: outputs uninitialised on both paths.
    monkeypatch.setattr(ops, "_C", type("NoLaunch", (), {
        "rmsnorm_fwd": staticmethod(lambda *a: None),
        "rmsnorm_bwd": staticmethod(lambda *a: None),
        "rmsnorm_bwd_workspace_size": staticmethod(lambda *a: 0)})())
    no_launch = staticmethod(lambda *a: None)
    monkeypatch.setattr(sm, "_C", type("NoLaunch", (), {
        "softmax_fwd": no_launch, "softmax_bwd": no_launch, "log_softmax_fwd": no_launch,
        "log_softmax_bwd": no_launch})())
    monkeypatch.setattr(ln, "_C", type("NoLaunch", (), {
        "layernorm_fwd": no_launch, "layernorm_bwd": no_launch,
        "layernorm_bwd_workspace_size": staticmethod(lambda *a: 0)})())
    ops._torch_ext._set_stub_launches(True)
    yield
    ops._torch_ext._set_stub_launches(False)


def _meta(t):
    return None if t is None else (t.dtype, tuple(t.shape), t.stride(), t.requires_grad)


def _run(case, cpp, monkeypatch):
    monkeypatch.setattr(reg, "CPP_EAGER", cpp)
    shape, dtype, wdtype, residual, rdtype, bias, prenorm, rd_arg, req = case
    g = torch.Generator().manual_seed(0)
    N = shape[-1]
    x = torch.randn(shape, generator=g).to(dtype)
    w = (1 + 0.5 * torch.randn(N, generator=g)).to(wdtype) if wdtype is not None else None
    b = (0.1 * torch.randn(N, generator=g)).to(wdtype or dtype) if bias else None
    r = torch.randn(shape, generator=g).to(rdtype or dtype) if residual else None
    leaves = [t.requires_grad_(k in req) if t is not None else None
              for k, t in zip("xwbr", (x, w, b, r))]
    outs = quack_cpp.rmsnorm(*leaves, eps=1e-5, prenorm=prenorm, residual_dtype=rd_arg)
    outs = outs if isinstance(outs, tuple) else (outs,)
    base = outs[0] if outs[0]._base is None else outs[0]._base
    node = base.grad_fn
    diff = [o for o in outs if o.requires_grad]
    if diff:
        torch.autograd.backward(diff, [torch.zeros(o.shape, dtype=o.dtype) for o in diff])
    return [_meta(o) for o in outs] + [_meta(t.grad) if t is not None else None
                                       for t in leaves], node


@pytest.mark.parametrize("case", RMS_CASES, ids=lambda c: f"{c[0]}-{c[1]}-w{c[2]}-r{c[3]}{c[4]}"
                         f"-b{c[5]}-pre{c[6]}-rd{c[7]}-grad{c[8] or 'none'}")
def test_same_outputs_and_gradients_as_the_python_path(stubbed, monkeypatch, case):
    cpp, cpp_node = _run(case, True, monkeypatch)
    py, py_node = _run(case, False, monkeypatch)
    assert cpp == py
    if case[-1]:
        assert cpp_node.name() == "torch::autograd::CppNode<quack_torch::RMSNormFn>"
        assert ops.rmsnorm_fwd.is_fast_node(cpp_node) and ops.rmsnorm_fwd.is_fast_node(py_node)
    else:
        assert cpp_node is None or not ops.rmsnorm_fwd.is_fast_node(cpp_node)


def test_absent_outputs_are_none(stubbed, monkeypatch):
    monkeypatch.setattr(reg, "CPP_EAGER", True)
    x = torch.randn(4, 64)
    out, res_out, rstd = ops.rmsnorm_fwd(x, None, None, None, 1e-6, 0.0, f32, None, False)
    assert out.shape == (4, 64) and res_out is None and rstd is None
    out, res_out, rstd = ops.rmsnorm_fwd(x, None, None, x, 1e-6, 0.0, bf16, f32, True)
    assert out.dtype == bf16 and res_out.dtype == f32 and rstd.shape == (4,)


def test_errors_as_the_python_path(monkeypatch):
    # Real launches on host tensors: both paths reach the C++ API and raise its error.
    _route_host(monkeypatch)
    msgs = []
    for cpp in (True, False):
        monkeypatch.setattr(reg, "CPP_EAGER", cpp)
        for args in ((torch.randn(4, 64), torch.ones(63)), (torch.randn(4, 64),)):
            with pytest.raises(ValueError) as e:
                quack_cpp.rmsnorm(*args)
            msgs.append(str(e.value))
    assert msgs[:2] == msgs[2:] and "rmsnorm_fwd: " in msgs[0]
    with pytest.raises(ValueError, match="rmsnorm_fwd: x has 3 dimensions"):
        ops._torch_ext.rmsnorm_fwd(torch.randn(2, 3, 4), None, None, None, 1e-6, 0.0, f32, None,
                                   False)


def test_double_backward_raises_like_the_custom_op(stubbed, monkeypatch):
    monkeypatch.setattr(reg, "CPP_EAGER", True)
    x = torch.randn(4, 64, requires_grad=True)
    y = quack_cpp.rmsnorm(x, torch.ones(64))
    lib = torch.library.Library("quack_cpp", "IMPL")  # the custom op's kernel for CPU tensors
    lib.impl("rmsnorm_bwd", ops.rmsnorm_bwd.kernel, "CPU")
    try:
        gx, = torch.autograd.grad(y.square().sum(), x, create_graph=True)
        with pytest.raises(RuntimeError, match="no autograd formula"):
            gx.sum().backward()
    finally:
        lib._destroy()


# --------------------------------------------------------------------------------------------
# softmax, log_softmax (RowUnaryFn)
# --------------------------------------------------------------------------------------------

SM_CASES = [((4, 3, 64), bf16, 1, True), ((5, 64), f32, -1, True), ((64,), bf16, 0, False),
            ((2, 7, 32), f32, -1, False), ((), f32, 0, True)]


def _sm_run(fn, case, cpp, monkeypatch, out_fp32=False):
    monkeypatch.setattr(reg, "CPP_EAGER", cpp)
    monkeypatch.setattr(sm, "autocast_fp32", lambda x: out_fp32)
    shape, dtype, dim, grad = case
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    x.requires_grad_(grad)
    y = fn(x, dim)
    base = y if y._base is None else y._base
    if grad:
        y.backward(torch.zeros(y.shape, dtype=y.dtype))
    return [_meta(y), _meta(x.grad)], base.grad_fn


@pytest.mark.parametrize("kind", ["softmax", "log_softmax"])
@pytest.mark.parametrize("out_fp32", [False, True])
@pytest.mark.parametrize("case", SM_CASES, ids=str)
def test_softmax_same_as_the_python_path(stubbed, monkeypatch, case, out_fp32, kind):
    fn = getattr(quack_cpp, kind)
    op = getattr(sm, f"{kind}_fwd")
    cpp, cpp_node = _sm_run(fn, case, True, monkeypatch, out_fp32)
    py, py_node = _sm_run(fn, case, False, monkeypatch, out_fp32)
    assert cpp == py
    if case[-1]:
        name = "SoftmaxFn" if kind == "softmax" else "LogSoftmaxFn"
        assert cpp_node.name() == f"torch::autograd::CppNode<quack_torch::{name}>"
        assert op.is_fast_node(cpp_node) and op.is_fast_node(py_node)
    else:
        assert cpp_node is None


def test_softmax_errors_and_double_backward(stubbed, monkeypatch):
    monkeypatch.setattr(reg, "CPP_EAGER", True)
    with pytest.raises(ValueError, match="softmax_fwd: x has 3 dimensions"):
        ops._torch_ext.softmax_fwd(torch.randn(2, 3, 4), f32)
    x = torch.randn(4, 64, requires_grad=True)
    y = quack_cpp.log_softmax(x)
    lib = torch.library.Library("quack_cpp", "IMPL")  # the custom op's kernel for CPU tensors
    lib.impl("log_softmax_bwd", sm.log_softmax_bwd.kernel, "CPU")
    try:
        gx, = torch.autograd.grad(y.square().sum(), x, create_graph=True)
        with pytest.raises(RuntimeError, match="no autograd formula"):
            gx.sum().backward()
    finally:
        lib._destroy()


# --------------------------------------------------------------------------------------------
# layernorm (LayerNormFn)
# --------------------------------------------------------------------------------------------

LN_CASES = [
    # shape, x dtype, weight dtype, residual, its dtype, bias, prenorm, residual_dtype arg,
    # out_dtype, weight_offset, return_mean, return_rstd, which of x, w, b, r require grad
    ((4, 3, 64), f32, f32, False, None, False, False, None, None, 0.0, False, False, "xw"),
    ((4, 3, 64), bf16, f32, False, None, True, False, None, None, 1.0, True, True, "xwb"),
    ((5, 64), bf16, bf16, True, None, False, False, None, None, 0.0, False, True, "xwr"),
    ((5, 64), bf16, f32, True, None, True, True, None, f32, 0.5, True, False, "xwbr"),
    ((2, 5, 64), bf16, f32, True, f32, False, True, None, None, 0.0, False, False, "xr"),
    ((2, 5, 64), f16, f32, True, None, False, True, f32, None, 0.0, True, True, "w"),
    ((7, 64), bf16, f32, False, None, False, True, f32, None, 0.0, False, False, "x"),
    ((7, 64), bf16, None, False, None, True, True, None, None, 0.0, True, True, "xb"),
    ((64,), f32, f32, False, None, False, False, None, None, 0.0, True, True, ""),
    ((5, 64), bf16, f32, True, f32, True, True, None, None, 0.0, False, False, ""),
    ((5, 64), bf16, f32, True, bf16, True, False, None, None, 0.0, False, False, "b"),
    ((6, 64), f32, None, True, None, False, False, None, None, 0.0, False, True, "r"),
]


def _ln_leaves(case):
    shape, dtype, wdtype, residual, rdtype = case[:5]
    bias, req = case[5], case[-1]
    g = torch.Generator().manual_seed(0)
    N = shape[-1]
    x = torch.randn(shape, generator=g).to(dtype)
    w = (1 + 0.5 * torch.randn(N, generator=g)).to(wdtype) if wdtype is not None else None
    b = (0.1 * torch.randn(N, generator=g)).to(wdtype or dtype) if bias else None
    r = torch.randn(shape, generator=g).to(rdtype or dtype) if residual else None
    return [t.requires_grad_(k in req) if t is not None else None
            for k, t in zip("xwbr", (x, w, b, r))]


def _ln_run(case, cpp, monkeypatch):
    monkeypatch.setattr(reg, "CPP_EAGER", cpp)
    prenorm, rd_arg, out_dtype, offset, ret_mean, ret_rstd = case[6:12]
    leaves = _ln_leaves(case)
    outs = quack_cpp.layernorm(*leaves, eps=1e-5, prenorm=prenorm, residual_dtype=rd_arg,
                               out_dtype=out_dtype, weight_offset=offset, return_mean=ret_mean,
                               return_rstd=ret_rstd)
    outs = outs if isinstance(outs, tuple) else (outs,)
    base = outs[0] if outs[0]._base is None else outs[0]._base
    node = base.grad_fn
    diff = [o for o in outs if o.requires_grad]
    if diff:
        torch.autograd.backward(diff, [torch.zeros(o.shape, dtype=o.dtype) for o in diff])
    return [_meta(o) for o in outs] + [_meta(t.grad) if t is not None else None
                                       for t in leaves], node


@pytest.mark.parametrize("case", LN_CASES, ids=lambda c: f"{c[0]}-{c[1]}-w{c[2]}-r{c[3]}{c[4]}"
                         f"-b{c[5]}-pre{c[6]}-rd{c[7]}-out{c[8]}-off{c[9]}-m{c[10]:d}{c[11]:d}"
                         f"-grad{c[12] or 'none'}")
def test_layernorm_same_outputs_and_gradients_as_the_python_path(stubbed, monkeypatch, case):
    cpp, cpp_node = _ln_run(case, True, monkeypatch)
    py, py_node = _ln_run(case, False, monkeypatch)
    assert cpp == py
    if case[-1]:
        assert cpp_node.name() == "torch::autograd::CppNode<quack_torch::LayerNormFn>"
        assert ln.layernorm_fwd.is_fast_node(cpp_node) and ln.layernorm_fwd.is_fast_node(py_node)
    else:
        assert cpp_node is None or not ln.layernorm_fwd.is_fast_node(cpp_node)


@pytest.mark.parametrize("used", ["residual_out", "both_retained"])
def test_layernorm_only_residual_out_used(stubbed, monkeypatch, used):
    # d(out) is None (stride-0 zeros in the backward) on both paths alike; with the graph
    # retained, a second backward gives the same metadata again.
    def go(cpp):
        monkeypatch.setattr(reg, "CPP_EAGER", cpp)
        x, r = (torch.randn(6, 64, dtype=bf16).requires_grad_(True) for _ in range(2))
        w = torch.ones(64, requires_grad=True)
        out, h = quack_cpp.layernorm(x, w, residual=r, prenorm=True, residual_dtype=f32)
        if used == "residual_out":
            h.backward(torch.ones_like(h))
        else:
            for _ in range(2):
                torch.autograd.backward([out, h], [torch.ones_like(out), torch.ones_like(h)],
                                        retain_graph=True)
        return [_meta(t) for t in (out, h, x.grad, r.grad, w.grad)]

    assert go(True) == go(False)


def test_layernorm_absent_outputs_are_none(stubbed, monkeypatch):
    monkeypatch.setattr(reg, "CPP_EAGER", True)
    x = torch.randn(4, 64)
    out, res_out, mean, rstd = ln.layernorm_fwd(x, None, None, None, 1e-5, 0.0, f32, None, False)
    assert out.shape == (4, 64) and res_out is None and mean is None and rstd is None
    x.requires_grad_(True)
    out, res_out, mean, rstd = ln.layernorm_fwd(x, None, None, x, 1e-5, 0.0, bf16, f32, True)
    assert out.dtype == bf16 and res_out.dtype == f32
    assert mean.shape == rstd.shape == (4,) and mean.dtype == rstd.dtype == f32
    assert out.requires_grad and res_out.requires_grad
    assert not mean.requires_grad and not rstd.requires_grad  # non-differentiable, as Python's


def test_layernorm_errors_as_the_python_path(monkeypatch):
    # Real launches on host tensors: both paths reach the C++ API and raise its error.
    _route_host(monkeypatch)
    msgs = []
    for cpp in (True, False):
        monkeypatch.setattr(reg, "CPP_EAGER", cpp)
        for args, kw in (((torch.randn(4, 64), torch.ones(63)), {}), ((torch.randn(4, 64),), {}),
                         ((torch.randn(4, 64),), {"eps": -1.0}),
                         ((torch.randn(4, 64), torch.ones(64)),
                          {"weight_offset": float("inf")})):
            with pytest.raises(ValueError) as e:
                quack_cpp.layernorm(*args, **kw)
            msgs.append(str(e.value))
    assert msgs[:4] == msgs[4:] and all("layernorm_fwd: " in m for m in msgs)
    with pytest.raises(ValueError, match="layernorm_fwd: x has 3 dimensions"):
        ln._torch_ext.layernorm_fwd(torch.randn(2, 3, 4), None, None, None, 1e-5, 0.0, f32,
                                    None, False)


def test_layernorm_backward_without_stats_raises_like_the_python_path(stubbed, monkeypatch):
    msgs = []
    for cpp in (True, False):
        monkeypatch.setattr(reg, "CPP_EAGER", cpp)
        x = torch.randn(4, 64, requires_grad=True)
        out = ln.layernorm_fwd(x, None, None, None, 1e-5, 0.0, f32, None, False)[0]
        with pytest.raises(RuntimeError) as e:
            out.sum().backward()
        msgs.append(str(e.value))
    assert "store_stats=False" in msgs[0] and msgs[1] in msgs[0]


def test_layernorm_double_backward_raises_like_the_custom_op(stubbed, monkeypatch):
    for cpp in (True, False):
        monkeypatch.setattr(reg, "CPP_EAGER", cpp)
        x = torch.randn(4, 64, requires_grad=True)
        w = torch.ones(64, requires_grad=True)
        y = quack_cpp.layernorm(x, w, weight_offset=0.5)
        assert ln.layernorm_fwd.is_fast_node(y.grad_fn)
        lib = torch.library.Library("quack_cpp", "IMPL")  # the custom op's kernel for CPU
        lib.impl("layernorm_bwd", ln.layernorm_bwd.kernel, "CPU")
        try:
            gx, gw = torch.autograd.grad(y.square().sum(), (x, w), create_graph=True)
            assert gx.requires_grad and gx.grad_fn is not None
            with pytest.raises(RuntimeError, match="no autograd formula"):
                gx.sum().backward()
        finally:
            lib._destroy()


# --------------------------------------------------------------------------------------------
# cross-entropy (CrossEntropyFn; NotImplemented -> the Python fast path)
# --------------------------------------------------------------------------------------------

ce = pytest.importorskip("quack_cpp.cross_entropy_ops")

CE_NODE = "torch::autograd::CppNode<quack_torch::CrossEntropyFn>"


@pytest.fixture
def ce_stubbed(stubbed, monkeypatch):
    def cpu_as_cuda_index(t):
        return (type(t) in reg._PLAIN_TYPES and t.device.type == "cpu"
                and t.layout == torch.strided and not t.is_nested
                and t.dtype in (torch.int32, torch.int64) and not reg._is_wrapped(t))

    monkeypatch.setattr(reg, "_is_plain_cuda_index", cpu_as_cuda_index)
    no_launch = staticmethod(lambda *a: None)
    real = ce._C
    monkeypatch.setattr(ce, "_C", type("NoLaunch", (), {
        "cross_entropy_fwd": no_launch, "cross_entropy_bwd": no_launch,
        "cross_entropy_scale_grad": no_launch, "cross_entropy_train_bwd": no_launch,
        "cross_entropy_fwd_workspace_size": staticmethod(
            real.cross_entropy_fwd_workspace_size)})())
    yield


def _ce_meta(t, x):
    """_meta plus the version counter and whether t shares x's storage (in-place gradients)."""
    if t is None:
        return None
    return _meta(t) + (t._version, t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr())


# Each case: x shape and dtype, target dtype, the keyword options of cross_entropy, how the
# backward runs: "grad1" (autograd.grad, grad_output 1), "grad.5" (0.5), "backward"
# (loss.backward()), "retain" (two retained autograd.grad with 0.5, then a last one),
# "nograd" (x does not require grad), "create" (create_graph=True).
CE_CASES = [
    ((8, 64), bf16, torch.int64, {}, "grad1"),
    ((8, 64), bf16, torch.int64, {}, "backward"),
    ((8, 64), f16, torch.int32, {"reduction": "sum"}, "grad.5"),
    ((8, 64), f32, torch.int64, {"reduction": "none"}, "grad.5"),
    ((8, 64), bf16, torch.int64, {"reduction": "none"}, "nograd"),
    ((8, 64), bf16, torch.int64, {}, "nograd"),
    ((8, 64), bf16, torch.int64, {"return_lse": True, "return_z_loss": True, "z_loss": 1e-4},
     "grad.5"),
    ((8, 64), f32, torch.int64, {"label_smoothing": 0.1, "ignore_index": 3,
                                 "logit_softcap": 30.0}, "grad1"),
    ((8, 64), f32, torch.int64, {"weight": "w", "reduction": "sum"}, "grad1"),
    ((8, 64), bf16, torch.int64, {"inplace_backward": True}, "grad.5"),
    ((8, 64), bf16, torch.int64, {"inplace_backward": True, "reduction": "none"}, "grad.5"),
    ((8, 64), bf16, torch.int64, {}, "retain"),
    ((8, 64), bf16, torch.int64, {"inplace_backward": True}, "retain"),
    ((8, 64), f32, torch.int64, {"reduction": "none"}, "retain"),
    ((8, 64), bf16, torch.int64, {}, "create"),
    ((0, 64), bf16, torch.int64, {}, "grad1"),
    ((8, 64), bf16, torch.int64, {"weight": "w_grad"}, "nograd"),  # weight alone requires grad
    # The Python fast path (NotImplemented): lse_partial.
    ((8, 64), f32, torch.int64, {"lse_partial": "lp"}, "grad.5"),
]


def _ce_run(case, cpp, monkeypatch):
    monkeypatch.setattr(reg, "CPP_EAGER", cpp)
    shape, dtype, tdtype, kw, how = case
    g = torch.Generator().manual_seed(0)
    M, V = shape
    x = torch.randn(shape, generator=g).to(dtype)
    t = torch.randint(0, V, (M,), generator=g).to(tdtype)
    kw = dict(kw)
    if kw.get("weight") in ("w", "w_grad"):
        kw["weight"] = (torch.rand(V, generator=g) + 0.5).requires_grad_(kw["weight"] == "w_grad")
    if kw.get("lse_partial") == "lp":
        kw["lse_partial"] = torch.randn(M, 4, generator=g)
    leaf = x.requires_grad_(how != "nograd")
    z = leaf * 1.0 if how != "nograd" else leaf  # a non-leaf (inplace_backward writes into it)
    out = quack_cpp.cross_entropy(z, t, **kw)
    outs = list(out) if isinstance(out, tuple) else [out]
    loss = outs[0]
    node = loss.grad_fn
    grads = []
    if how in ("grad1", "grad.5"):
        go = None if how == "grad1" else torch.full_like(loss, 0.5)
        grads = list(torch.autograd.grad(loss, leaf, go))
    elif how == "backward":
        loss.backward()
        grads = [leaf.grad]
    elif how == "retain":
        go = torch.full_like(loss, 0.5)
        grads = [torch.autograd.grad(loss, leaf, go, retain_graph=True)[0] for _ in range(2)]
        grads.append(torch.autograd.grad(loss, leaf, go)[0])
        with pytest.raises(RuntimeError, match="second time"):
            torch.autograd.grad(loss, leaf, go)
    elif how == "create":
        grads = list(torch.autograd.grad(loss, leaf, create_graph=True))
    # The loss goes back with its node: a Python Function's node is only valid while the graph
    # that holds it lives (torch 2.11 raises on node.name() once the loss is freed).
    return [_ce_meta(o, z) for o in outs + grads] + [z._version], node, loss


@pytest.mark.parametrize("case", CE_CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{c[3]}-{c[4]}")
def test_ce_same_outputs_and_gradients_as_the_python_path(ce_stubbed, monkeypatch, case):
    cpp, cpp_node, _cpp_loss = _ce_run(case, True, monkeypatch)
    py, py_node, _py_loss = _ce_run(case, False, monkeypatch)
    assert cpp == py
    how, kw = case[-1], case[3]
    if how == "nograd":
        assert cpp_node is None and py_node is None
    elif "lse_partial" in kw or (kw.get("inplace_backward")
                                 and kw.get("reduction", "mean") == "mean"):
        # Left to the Python fast path: lse_partial; the backward from lse with 'mean' (what
        # inplace_backward takes), whose denominator the Python path computes on the device.
        assert type(cpp_node) is ce.cross_entropy_fwd.Function._backward_cls
    else:
        assert cpp_node.name() == CE_NODE
        assert ce.cross_entropy_fwd.is_fast_node(cpp_node)
        assert ce.cross_entropy_fwd.is_fast_node(py_node) and py_node.name() != CE_NODE


def test_ce_op_outputs_and_fallbacks(ce_stubbed, monkeypatch):
    """The op called directly: absent outputs None; 'dx' mode (want_dx without predict_dx);
    the backward from lse with 'mean' left to the Python path (NotImplemented)."""
    monkeypatch.setattr(reg, "CPP_EAGER", True)
    ext = ops._torch_ext
    x, t = torch.randn(6, 32), torch.randint(0, 32, (6,))
    args = (None, None, -100, "none", 0.0, 0.0, 0.0, -1)
    loss, lse, z, dx, st = ext.cross_entropy_fwd(x, t, None, *args, False, False, False)
    assert loss.shape == (6,) and loss.dtype == f32 and lse is z is dx is st is None
    x.requires_grad_(True)
    mean = (None, None, -100, "mean", 0.0, 0.0, 0.0, -1)
    assert ext.cross_entropy_fwd(x, t, None, *mean, True, False, False) is NotImplemented
    assert ext.cross_entropy_fwd(None, t, None, *mean, False, False, False) is NotImplemented
    for cpp in (True, False):  # want_dx alone: the "dx" mode (DTensors' on the Python path)
        monkeypatch.setattr(reg, "CPP_EAGER", cpp)
        outs = ce.cross_entropy_fwd(x, t, None, *mean, False, False, True)
        assert outs[0].grad_fn.name() == CE_NODE if cpp else outs[0].grad_fn.name() != CE_NODE
        gx, = torch.autograd.grad(outs[0], x, torch.tensor(0.5))
        assert gx.shape == x.shape and gx.dtype == x.dtype and not gx.requires_grad
        assert outs[1] is outs[2] is outs[4] is None and outs[3].shape == x.shape
        assert gx.data_ptr() == outs[3].data_ptr()  # rescaled in place


def test_ce_predict_word_is_the_python_one(ce_stubbed, monkeypatch):
    monkeypatch.setattr(reg, "CPP_EAGER", True)
    w = ce.dx_predict_word(torch.device("cpu"))
    x = torch.randn(4, 16, requires_grad=True)
    loss = quack_cpp.cross_entropy(x, torch.randint(0, 16, (4,)))
    assert loss.grad_fn.name() == CE_NODE
    assert ce._PREDICT[("cpu", None)] is w


def test_ce_errors_as_the_python_path(monkeypatch):
    # Real launches on host tensors: both paths raise the same error (their own checks, or the
    # C++ API's for what they pass on).
    _route_host(monkeypatch)
    monkeypatch.setattr(reg, "_is_plain_cuda_index", lambda t: t.dtype in (torch.int32,
                                                                        torch.int64))
    x, t = torch.randn(4, 64), torch.randint(0, 64, (4,))
    calls = [((x, t.view(2, 2)), {}), ((x, torch.randint(0, 64, (5,))), {}),
             ((x, t), {"label_smoothing": 2.0}), ((x, t), {}),
             ((x.clone().requires_grad_(True), t), {"z_loss": -1.0})]
    msgs = []
    for cpp in (True, False):
        monkeypatch.setattr(reg, "CPP_EAGER", cpp)
        for args, kw in calls:
            with pytest.raises(ValueError) as e:
                quack_cpp.cross_entropy(*args, **kw)
            msgs.append(str(e.value))
        with pytest.raises(ValueError) as e:
            ce.cross_entropy_fwd(x, t, None, None, None, -100, "avg", 0.0, 0.0, 0.0, -1, False,
                                 False, False)
        msgs.append(str(e.value))
    n = len(calls) + 1
    assert msgs[:n] == msgs[n:] and all("cross_entropy_fwd: " in m for m in msgs), msgs
    assert "target has shape (2, 2), expected (M,)" in msgs[0]


def test_ce_double_backward_raises_like_the_custom_op(ce_stubbed, monkeypatch):
    # create_graph with a grad_output that requires grad: the training backward's custom op
    # through the dispatcher (no autograd formula), on both paths.
    lib = torch.library.Library("quack_cpp", "IMPL")  # the custom ops' kernels for CPU
    lib.impl("cross_entropy_train_bwd", ce.cross_entropy_train_bwd.kernel, "CPU")
    lib.impl("cross_entropy_bwd", ce.cross_entropy_bwd.kernel, "CPU")
    try:
        for cpp in (True, False):
            monkeypatch.setattr(reg, "CPP_EAGER", cpp)
            for red in ("mean", "none"):
                x = torch.randn(4, 64, requires_grad=True)
                loss = quack_cpp.cross_entropy(x, torch.randint(0, 64, (4,)), reduction=red)
                assert loss.grad_fn.name() == CE_NODE if cpp else loss.grad_fn.name() != CE_NODE
                go = torch.full_like(loss, 0.5).requires_grad_(True)
                gx, = torch.autograd.grad(loss, x, go, create_graph=True)
                assert gx.requires_grad and gx.shape == x.shape
                with pytest.raises(RuntimeError, match="no autograd formula"):
                    gx.sum().backward()
    finally:
        lib._destroy()


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("saver", ["square", "softmax"])
def test_ce_inplace_backward_refuses_saved_logits(ce_stubbed, monkeypatch, saver, reduction):
    """C08: another node saved the logits before an inplace_backward call (the gradient written
    into them by the cross-entropy's backward, which runs first, their version bumped): autograd
    raises on both paths (the softmax's node is its C++ one; 'mean' from lse is the Python
    path's)."""
    for cpp in (True, False):
        monkeypatch.setattr(reg, "CPP_EAGER", cpp)
        leaf = torch.randn(8, 64, requires_grad=True)
        if saver == "square":
            z = leaf * 1.0
            extra = z.square().mean()  # saves z
        else:
            z = quack_cpp.softmax(leaf)  # saves its output
            extra = 0.0
        loss = quack_cpp.cross_entropy(z, torch.randint(0, 64, (8,)), reduction=reduction,
                                       inplace_backward=True)
        assert (loss.grad_fn.name() == CE_NODE) == (cpp and reduction == "sum")
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            (loss + extra).backward()


# --------------------------------------------------------------------------------------------
# gemm (on unless QUACK_CPP_EAGER_GEMM=0): the calls autograd does not record
# --------------------------------------------------------------------------------------------

gm = pytest.importorskip("quack_cpp.gemm_ops")


_REAL_C = gm._C


class _GemmRecorder:
    """quack_cpp._C for gemm_ops: gemm records its arguments and launches nothing, the padded
    copies' workspace is 0 bytes (the real query refuses host memory); the rest
    (can_implement) is the real host-only C++."""

    def __init__(self):
        self.calls = []

    def gemm(self, *args):
        self.calls.append(args)

    def gemm_workspace_size(self, *args):
        return 0

    def __getattr__(self, name):
        return getattr(_REAL_C, name)


@pytest.fixture
def gemm_stubbed(monkeypatch):
    _route_host(monkeypatch)
    monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", False)
    monkeypatch.setattr(reg, "CPP_EAGER", True)
    rec = _GemmRecorder()
    monkeypatch.setattr(gm, "_C", rec)
    ops._torch_ext._set_stub_launches(True)
    yield rec
    ops._torch_ext._set_stub_launches(False)


def _matrix(shape, dtype, col, g):
    """A (.., R, C) matrix, row-major or column-major (a transposed contiguous tensor)."""
    if not col:
        return torch.randn(shape, generator=g).to(dtype)
    t = torch.randn(shape[:-2] + (shape[-1], shape[-2]), generator=g).to(dtype)
    return t.mT


GEMM_CASES = [  # (L or None, M, N, K, dtype, A col-major, B col-major, out dtype, bias, alpha)
    (None, 64, 32, 48, bf16, False, True, bf16, False, 1.0),  # x @ W.T
    (None, 64, 32, 48, bf16, False, True, bf16, True, 1.0),   # with a bias
    (None, 64, 32, 48, bf16, False, False, bf16, False, 0.5),  # dgrad's majors
    (None, 64, 32, 48, bf16, True, False, bf16, False, 1.0),   # wgrad's majors
    (None, 64, 32, 48, bf16, True, True, bf16, False, 1.0),    # both column-major
    (None, 64, 32, 48, bf16, True, True, f32, False, 2.0),     # ... fp32 out: D column-major
    (None, 64, 32, 48, bf16, True, False, f32, False, 1.0),
    (None, 64, 32, 48, bf16, False, True, f32, False, 1.0),
    (None, 64, 32, 48, f16, False, True, f16, False, 1.0),
    (None, 64, 30, 48, bf16, False, True, bf16, False, 1.0),   # N = 30: D's rows padded to 32
    (3, 64, 32, 48, bf16, False, True, bf16, False, 1.0),
    (3, 64, 30, 48, bf16, True, True, f32, False, 1.0),        # batched, column-major D
    (None, 0, 32, 48, bf16, False, True, bf16, False, 1.0),
    (None, 64, 32, 0, bf16, False, True, bf16, False, 1.0),
]


def _gemm_call(case, cpp, monkeypatch):
    monkeypatch.setattr(gm.gemm_op, "eager", ops._torch_ext.gemm if cpp else None)
    L, M, N, K, dt, acol, bcol, odt, bias, alpha = case
    g = torch.Generator().manual_seed(1)
    lead = (L,) if L else ()
    A = _matrix(lead + (M, K), dt, acol, g)
    B = _matrix(lead + (K, N), dt, bcol, g)
    b = torch.randn(N, generator=g).to(dt) if bias else None
    D = quack_cpp.gemm(A, B, out_dtype=odt, alpha=alpha, bias=b)
    return A, B, b, D


def test_gemm_dynamic_scheduler_takes_the_python_path(gemm_stubbed, monkeypatch):
    """dynamic_scheduler=True: the C++ eager path declines (NotImplemented) and the Python
    path launches once, handing _C.gemm the stream's tile counter and no stream-K workspace;
    static calls hand it none (gemm, gemm_add, gemm_add_inplace)."""
    monkeypatch.setattr(gm.gemm_op, "eager", ops._torch_ext.gemm)
    counter = torch.zeros(1, dtype=torch.int32)  # a host stand-in: only its address is read
    monkeypatch.setattr(gm, "_tile_counter", lambda D, s: counter)
    g = torch.Generator().manual_seed(1)
    A, B = _matrix((64, 48), bf16, False, g), _matrix((48, 32), bf16, True, g)
    C = torch.randn(64, 32, generator=g).to(bf16)
    D = quack_cpp.gemm(A, B, dynamic_scheduler=True)
    assert len(gemm_stubbed.calls) == 1, "the Python path did not launch"
    assert D.shape == (64, 32) and D.dtype == bf16
    quack_cpp.gemm(A, B)
    assert len(gemm_stubbed.calls) == 1, "the static call left the C++ path"
    quack_cpp.gemm_add(A, B, C, dynamic_scheduler=True)
    quack_cpp.gemm_add_inplace(A, B, C.clone(), dynamic_scheduler=True)
    quack_cpp.gemm_add(A, B, C)
    quack_cpp.gemm_add_inplace(A, B, C.clone())
    calls = gemm_stubbed.calls
    assert len(calls) == 5
    for k, dyn in enumerate((True, True, True, False, False)):
        want = counter.data_ptr() if dyn else 0
        assert calls[k][16] == want, f"call {k}: tile_counter {calls[k][16]}, expected {want}"
        if dyn:
            assert calls[k][14] == calls[k][15] == 0, "stream-K workspace with the counter"


def _tuple(t):  # a _C tensor tuple without its pointer; shape and strides as plain tuples
    return None if t is None else (t[1], tuple(t[2]), tuple(t[3]), t[4])


@pytest.mark.parametrize("case", GEMM_CASES, ids=lambda c: "-".join(map(str, c)))
def test_gemm_same_output_and_launch_as_the_python_path(gemm_stubbed, monkeypatch, case):
    """The C++ path's D (dtype, shape, strides: row- and column-major) and its launch's
    arguments (a, b, bias as given, d's layout, alpha, beta, no stream-K workspace on the CPU)
    are the Python path's, and the Python path's _C.gemm is not called."""
    A, B, b, D = _gemm_call(case, False, monkeypatch)
    assert len(gemm_stubbed.calls) == 1
    a, bb, c, d, alpha, beta, _s, tuned, adev, bdev, ws, wsb, brow, bcol, sk, skb, tc = \
        gemm_stubbed.calls[0]
    assert c is None and not tuned and adev == bdev == ws == wsb == tc == 0 and bcol is None
    A2, B2, b2, D2 = _gemm_call(case, True, monkeypatch)
    assert len(gemm_stubbed.calls) == 1, "the C++ path called the Python launch"
    ca, cb, cd, cbias, calpha, cbeta, csk, cskb = ops._torch_ext._last_gemm_args()
    assert (D2.dtype, D2.shape, D2.stride()) == (D.dtype, D.shape, D.stride())
    assert ca[0] == A2.data_ptr() and cb[0] == B2.data_ptr() and cd[0] == D2.data_ptr()
    assert (_tuple(ca), _tuple(cb), _tuple(cd)) == (_tuple(a), _tuple(bb), _tuple(d))
    assert (_tuple(cbias) if cbias else None) == _tuple(brow)
    assert (calpha, cbeta, csk, cskb) == (alpha, beta, sk, skb) == (case[-1], 0.0, 0, 0)


def test_gemm_leaves_to_the_python_path(gemm_stubbed, monkeypatch):
    """NotImplemented (the Python fast path runs, and its _C.gemm is called) for a C, a device
    alpha, tuning, a recorded call, an operand TMA cannot address (K = 63), and bad ranks /
    K (the Python path's ValueError)."""
    monkeypatch.setattr(gm.gemm_op, "eager", ops._torch_ext.gemm)
    g = torch.Generator().manual_seed(2)
    A, W = torch.randn(16, 64, generator=g).to(bf16), torch.randn(32, 64, generator=g).to(bf16)
    calls = gemm_stubbed.calls
    quack_cpp.gemm_add(A, W.T, torch.randn(16, 32).to(bf16))
    quack_cpp.gemm(A, W.T, tuned=True)
    quack_cpp.gemm(A, W.T, alpha=torch.ones((), dtype=f32))
    quack_cpp.gemm(A.requires_grad_(True), W.T)
    A.requires_grad_(False)
    quack_cpp.gemm(torch.randn(16, 63).to(bf16), torch.randn(32, 63).to(bf16).T)
    assert len(calls) == 5
    with torch.no_grad():
        quack_cpp.gemm(A.requires_grad_(True), W.T)  # not recorded: the C++ path
    assert len(calls) == 5
    with pytest.raises(ValueError, match="gemm: b has shape"):
        quack_cpp.gemm(A, W)


def test_gemm_colvec_bias_goes_to_the_python_path(gemm_stubbed, monkeypatch):
    """A column bias (colvec_bias): the C++ path answers NotImplemented (the checks that name
    colvec_bias are the Python path's), and the Python path hands it to _C.gemm as bias_col,
    beside the row bias as bias_row; a bad one raises before any launch."""
    monkeypatch.setattr(gm.gemm_op, "eager", ops._torch_ext.gemm)
    g = torch.Generator().manual_seed(3)
    A, W = torch.randn(16, 64, generator=g).to(bf16), torch.randn(32, 64, generator=g).to(bf16)
    row, col = torch.randn(32, generator=g), torch.randn(16, generator=g).to(bf16)
    calls = gemm_stubbed.calls
    D = quack_cpp.gemm(A, W.T, bias=row, colvec_bias=col)
    assert len(calls) == 1 and D.shape == (16, 32)
    brow, bcol = calls[0][12], calls[0][13]
    assert brow[0] == row.data_ptr() and _tuple(brow) == (0, (32,), (1,), -1)
    assert bcol[0] == col.data_ptr() and _tuple(bcol) == (2, (16,), (1,), -1)
    with pytest.raises(ValueError, match=r"gemm: colvec_bias has shape \(32,\) bfloat16, "
                                         r"expected \(M,\) = \(16,\)"):
        quack_cpp.gemm(A, W.T, colvec_bias=torch.zeros(32, dtype=bf16))
    assert len(calls) == 1
    quack_cpp.gemm(A, W.T, bias=row)  # without it: the C++ path again
    assert len(calls) == 1


# --------------------------------------------------------------------------------------------
# Linear: the C++ node LinearFn (on unless QUACK_CPP_EAGER_LINEAR=0) against linear_op's Python
# Function, whose GEMMs take the C++ gemm path or the Python one
# --------------------------------------------------------------------------------------------

LINEAR_NODE = "torch::autograd::CppNode<quack_torch::LinearFn>"
# "python": the Function with its GEMMs in Python; "gemm": the Function with its GEMMs on the
# C++ gemm path; "node": the C++ node.
LINEAR_PATHS = ("python", "gemm", "node")


def _set_linear_path(path, monkeypatch):
    ext = ops._torch_ext
    monkeypatch.setattr(gm.linear_op, "eager", ext.linear if path == "node" else None)
    monkeypatch.setattr(gm.gemm_op, "eager", ext.gemm if path != "python" else None)


def _launch(a, b, c, d, bias, alpha, beta, tuned, sk, skb):
    """One GEMM launch: a, b, c, d, bias as (dtype, shape, strides, device), their pointers
    (0 where absent), the scalars."""
    ts = (a, b, c, d, bias)
    return (tuple(_tuple(t) for t in ts), tuple(t[0] if t else 0 for t in ts), alpha, beta,
            tuned, sk, skb)


def _without_pointers(launches):
    # addresses differ between runs (and a freed tensor's may come back): compared where the
    # tensors are known (test_linear_gemm_operands)
    return [(ts,) + tuple(rest) for ts, _ptrs, *rest in launches]


def _cpp_launches(on):
    """The C++ path's stubbed launches since the last call; recording on from now if on."""
    return [_launch(a, b, None, d, bias or None, alpha, beta, False, sk, skb)
            for a, b, d, bias, alpha, beta, sk, skb in ops._torch_ext._gemm_log(on)]


class _LinearRecorder(_GemmRecorder):
    """_GemmRecorder whose launches (self.launches, while a list) hold every GEMM launch in
    order: the Python path's _C.gemm calls and, before each, the C++ path's since the last."""

    launches = None

    def gemm(self, *args):
        super().gemm(*args)
        if self.launches is not None:
            a, b, c, d, alpha, beta, _s, tuned, *_, brow, _bcol, sk, skb, _tile_counter = args
            self.launches += _cpp_launches(True)
            self.launches.append(_launch(a, b, c, d, brow, alpha, beta, tuned, sk, skb))


@pytest.fixture
def linear_stubbed(gemm_stubbed, monkeypatch):
    rec = _LinearRecorder()
    monkeypatch.setattr(gm, "_C", rec)
    yield rec
    _cpp_launches(False)


def _linear_run(path, scenario, rec, monkeypatch):
    """scenario() (a list of tensors, None where absent) on path: their metadata, their
    grad_fn names, and every GEMM launch in order."""
    _set_linear_path(path, monkeypatch)
    _cpp_launches(True)
    rec.launches = []
    try:
        res = scenario()
        launches = rec.launches + _cpp_launches(False)
    finally:
        rec.launches = None
    nodes = [t.grad_fn.name() if t is not None and t.grad_fn is not None else None
             for t in res]
    return [_meta(t) for t in res], nodes, _without_pointers(launches)


def _linear_module(bias=True, dtype=bf16, K=64, N=32, **kw):
    torch.manual_seed(3)
    return quack_cpp.nn.Linear(K, N, bias=bias, dtype=dtype, **kw)


def _grads(q, x):
    return [x.grad, q.weight.grad, q.bias.grad if q.bias is not None else None]


def _needs_input_grad(mask, xshape=(4, 8, 64)):
    def go():
        q = _linear_module()
        q.weight.requires_grad_(bool(mask & 2))
        q.bias.requires_grad_(bool(mask & 4))
        x = torch.randn(xshape, dtype=bf16, requires_grad=bool(mask & 1))
        y = q(x)
        if mask:
            y.backward(torch.zeros_like(y))
        return [y] + _grads(q, x)
    go.__name__ = f"needs_input_grad_{mask}_{len(xshape)}d"
    return go


def _autocast_fp32_weight():
    # fp32 weight and bias under autocast: dW in fp32 where can_implement has that instance
    q = _linear_module(dtype=f32)
    x = torch.randn(6, 64, requires_grad=True)
    with torch.autocast("cpu", dtype=bf16):
        y = q(x)
    y.backward(torch.zeros_like(y))
    return [y] + _grads(q, x)


def _functional_no_bias_1d():
    torch.manual_seed(3)
    w = torch.randn(32, 64, dtype=bf16, requires_grad=True)
    x = torch.randn(64, dtype=bf16, requires_grad=True)
    y = quack_cpp.linear(x, w)
    y.backward(torch.zeros_like(y))
    return [y, x.grad, w.grad]


def _create_graph():
    # A recorded backward (the node hands it to Linear.backward), differentiated again.
    q = _linear_module()
    x = torch.randn(5, 64, dtype=bf16, requires_grad=True)
    dy = torch.zeros(5, 32, dtype=bf16, requires_grad=True)
    dx, dw, db = torch.autograd.grad(q(x), (x, q.weight, q.bias), dy, create_graph=True)
    (dx.float().sum() + dw.float().sum() + db.float().sum()).backward()
    return [dx, dw, db, dy.grad, x.grad]


def _fused():
    # fuse_grad_accum: the second backward accumulates into weight.grad in place (Python's)
    q = _linear_module(fuse_grad_accum=True)
    x = torch.randn(3, 4, 64, dtype=bf16, requires_grad=True)
    res = []
    for _ in range(2):
        y = q(x)
        y.backward(torch.zeros_like(y))
        res += [y] + _grads(q, x)
    return res


def _no_grad_mode():
    q = _linear_module()
    x = torch.randn(4, 8, 64, dtype=bf16, requires_grad=True)
    with torch.no_grad():
        return [q(x)]


def _tuned():
    q = _linear_module(tuned=True)
    x = torch.randn(4, 64, dtype=bf16, requires_grad=True)
    y = q(x)
    y.backward(torch.zeros_like(y))
    return [y] + _grads(q, x)


def _unaligned_k():
    # K = 63: W^T is no TMA operand (the node leaves the call to Python: padded copies)
    q = _linear_module(K=63)
    x = torch.randn(4, 63, dtype=bf16, requires_grad=True)
    y = q(x)
    y.backward(torch.zeros_like(y))
    return [y] + _grads(q, x)


def _strided_dy():
    # a stride-0 dy (y.sum()): made a row-major operand before the backward GEMMs
    q = _linear_module()
    x = torch.randn(2, 3, 64, dtype=bf16, requires_grad=True)
    q(x).float().sum().backward()
    return _grads(q, x)


def _inplace_after(xshape):
    """In-place ops on y with grad on (y.add_, nn.ReLU(inplace=True)), as torch.nn.Linear
    allows: y is no view made inside the Function or node (x 3-D or 1-D too)."""
    def go():
        q = _linear_module()
        x = torch.randn(xshape, dtype=bf16, requires_grad=True)
        y = q(x)
        assert y._base is None
        y.add_(torch.ones(32, dtype=bf16))
        y = torch.nn.ReLU(inplace=True)(y)
        y.backward(torch.zeros_like(y))
        return [y] + _grads(q, x)
    go.__name__ = f"inplace_after_{len(xshape)}d"
    return go


def _partial(target, how, fuse=True):
    """A backward of one input's gradient (target "x" or "weight"; how "grad": autograd.grad,
    "inputs": backward(inputs=...)) after a full one made weight.grad: only that gradient's
    GEMM runs, fused into weight.grad only where backward(inputs=[weight]) accumulates it."""
    def go():
        q = _linear_module(fuse_grad_accum=fuse)
        x = torch.randn(3, 4, 64, dtype=bf16, requires_grad=True)
        q(x).backward(torch.zeros(3, 4, 32, dtype=bf16))
        y = q(x)
        t = x if target == "x" else q.weight
        if how == "grad":
            (g,) = torch.autograd.grad(y, t, torch.zeros_like(y))
        else:
            y.backward(torch.zeros_like(y), inputs=[t])
            g = t.grad
        return [y, g] + _grads(q, x)
    go.__name__ = f"partial_{how}_{target}" + ("_fused" if fuse else "")
    return go


LINEAR_SCENARIOS = ([_needs_input_grad(m) for m in range(8)]
                    + [_needs_input_grad(7, (4, 64)), _autocast_fp32_weight,
                       _functional_no_bias_1d, _create_graph, _fused, _no_grad_mode, _tuned,
                       _unaligned_k, _strided_dy]
                    + [_partial(t, h) for t in ("x", "weight") for h in ("grad", "inputs")]
                    + [_partial("x", "grad", fuse=False)]
                    + [_inplace_after(shape) for shape in ((4, 8, 64), (4, 64), (64,))])


@pytest.mark.parametrize("scenario", LINEAR_SCENARIOS, ids=lambda f: f.__name__)
def test_linear_same_launches_on_every_path(linear_stubbed, monkeypatch, scenario):
    """Outputs' and gradients' metadata and every GEMM launch (arguments, order) are the same
    on the node as on the Function with its GEMMs in Python or on the C++ gemm path: the
    forward GEMM, the dgrad where x needs a gradient, the wgrad where weight does (in place
    into weight.grad where fused), the GEMMs of a recorded backward and its differentiation."""
    py = _linear_run("python", scenario, linear_stubbed, monkeypatch)
    assert py[2], "no GEMM launched"
    assert _linear_run("gemm", scenario, linear_stubbed, monkeypatch)[::2] == py[::2]
    assert _linear_run("node", scenario, linear_stubbed, monkeypatch)[::2] == py[::2]


@pytest.mark.parametrize("path", LINEAR_PATHS)
def test_linear_gemm_operands(linear_stubbed, monkeypatch, path):
    """Each GEMM reads and writes the tensors it should: forward (x2 = x's rows, W^T, bias) ->
    y, dgrad (dy, W) -> x.grad, wgrad (dy^T, x2) -> weight.grad (all kept alive)."""
    _set_linear_path(path, monkeypatch)
    q = _linear_module()
    x = torch.randn(4, 8, 64, dtype=bf16, requires_grad=True)
    dy = torch.zeros(4, 8, 32, dtype=bf16)
    _cpp_launches(True)
    linear_stubbed.launches = []
    try:
        y = q(x)
        y.backward(dy)
        launches = linear_stubbed.launches + _cpp_launches(False)
    finally:
        linear_stubbed.launches = None
    w, b = q.weight.data_ptr(), q.bias.data_ptr()
    xp, yp, dyp = x.data_ptr(), y.data_ptr(), dy.data_ptr()
    assert [ptrs for _ts, ptrs, *_ in launches] == [
        (xp, w, 0, yp, b), (dyp, w, 0, x.grad.data_ptr(), 0),
        (dyp, xp, 0, q.weight.grad.data_ptr(), 0)]


@pytest.mark.parametrize("path", LINEAR_PATHS)
@pytest.mark.parametrize("how", ("grad", "inputs"))
def test_linear_fused_partial_backward_keeps_weight_grad(linear_stubbed, monkeypatch, path, how):
    """fuse_grad_accum with a backward that computes x's gradient alone (autograd.grad(y, x),
    backward(inputs=[x])): no wgrad runs and weight.grad stays the tensor it was; one that
    computes weight's alone: autograd.grad returns the plain wgrad (a new tensor, weight.grad
    untouched), backward(inputs=[weight]) accumulates into weight.grad in place; no dgrad.
    weight.grad is held by the module alone (AccumulateGrad keeps it then)."""
    _set_linear_path(path, monkeypatch)
    q = _linear_module(fuse_grad_accum=True)
    x = torch.randn(3, 4, 64, dtype=bf16, requires_grad=True)
    ones = torch.ones(32, 64, dtype=bf16)
    for target in ("x", "weight"):
        q.weight.grad = ones.clone()
        grad0 = q.weight.grad.data_ptr()
        y = q(x)
        t = x if target == "x" else q.weight
        _cpp_launches(True)
        linear_stubbed.launches = []
        try:
            if how == "grad":
                (g,) = torch.autograd.grad(y, t, torch.zeros_like(y))
            else:
                y.backward(torch.zeros_like(y), inputs=[t])
                g = t.grad
            launches = linear_stubbed.launches + _cpp_launches(False)
        finally:
            linear_stubbed.launches = None
        assert g is not None and g.shape == t.shape
        ptrs = [p for _ts, p, *_ in launches]
        if target == "x":  # the dgrad alone (dy, W) -> dx
            assert ptrs == [(ptrs[0][0], q.weight.data_ptr(), 0, g.data_ptr(), 0)]
        elif how == "grad":  # the plain wgrad (dy^T, x) -> a new tensor
            assert ptrs == [(ptrs[0][0], x.data_ptr(), 0, g.data_ptr(), 0)]
            assert g.data_ptr() != grad0
        else:  # the wgrad into weight.grad (C = D)
            assert ptrs == [(ptrs[0][0], x.data_ptr(), grad0, grad0, 0)]
        assert q.weight.grad.data_ptr() == grad0 and torch.equal(q.weight.grad, ones)


@pytest.mark.parametrize("path", LINEAR_PATHS)
def test_linear_weight_updated_before_backward(linear_stubbed, monkeypatch, path):
    """dW = dy^T x2 does not read W: with x needing no gradient, weight may be updated in place
    between the forward and the backward (as with torch.nn.Linear); where x needs one
    (dx = dy W) that is autograd's error."""
    _set_linear_path(path, monkeypatch)
    for x_grad in (False, True):
        q = _linear_module()
        x = torch.randn(4, 64, dtype=bf16, requires_grad=x_grad)
        y = q(x)
        with torch.no_grad():
            q.weight.add_(1)
        if x_grad:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                y.backward(torch.zeros_like(y))
        else:
            y.backward(torch.zeros_like(y))
            assert q.weight.grad is not None and q.bias.grad is not None


def test_linear_module_asks_the_cpp_path_once(linear_stubbed, monkeypatch):
    """nn.Linear asks the C++ path once for a call it leaves to Python (K = 63, tuning)."""
    asked = []
    real = ops._torch_ext.linear
    monkeypatch.setattr(gm.linear_op, "eager", lambda *a: asked.append(1) or real(*a))
    monkeypatch.setattr(gm.gemm_op, "eager", ops._torch_ext.gemm)
    for q, K in ((_linear_module(K=63), 63), (_linear_module(tuned=True), 64)):
        asked.clear()
        y = q(torch.randn(4, K, dtype=bf16, requires_grad=True))
        assert asked == [1] and y.grad_fn.name() == "LinearFunctionBackward"


def test_linear_python_path_launches_in_python(linear_stubbed, monkeypatch):
    """The "python" path above runs every GEMM through _C.gemm (3 for a forward and backward
    with dx and dW); the node runs none there."""
    for path, n in (("python", 3), ("node", 0)):
        linear_stubbed.calls.clear()
        _linear_run(path, _needs_input_grad(3), linear_stubbed, monkeypatch)
        assert len(linear_stubbed.calls) == n


@pytest.mark.parametrize("mask", range(1, 8))
def test_linear_node_where_recorded(linear_stubbed, monkeypatch, mask):
    """The node is y's grad_fn on the C++ path wherever autograd records the call (y 2-D, or
    viewed as x's leading dims), the Function's on the Python path; both are linear_op's fast
    nodes."""
    for path, name in (("node", LINEAR_NODE), ("gemm", "LinearFunctionBackward")):
        _set_linear_path(path, monkeypatch)
        q = _linear_module()
        q.weight.requires_grad_(bool(mask & 2))
        q.bias.requires_grad_(bool(mask & 4))
        for shape in ((4, 8, 64), (4, 64)):
            y = q(torch.randn(shape, dtype=bf16, requires_grad=bool(mask & 1)))
            assert y.grad_fn.name() == name and gm.linear_op.is_fast_node(y.grad_fn)


def test_linear_node_falls_back_to_python_backward(linear_stubbed, monkeypatch):
    """Where the node's backward would not route EAGER it runs Linear.backward: with
    FORCE_CUSTOM_OP set after the forward its GEMMs take the custom op (as on the Python path),
    and a Tensor subclass dy takes it too (route's type check)."""
    lib = torch.library.Library("quack_cpp", "IMPL")
    lib.impl("gemm", gm.gemm_op.kernel, "CPU")
    custom = []
    real = gm.gemm_op.custom_op
    monkeypatch.setattr(gm.gemm_op, "custom_op", lambda *a: custom.append(1) or real(*a))

    class Sub(torch.Tensor):
        pass

    def force_after_forward():
        q = _linear_module()
        x = torch.randn(4, 64, dtype=bf16, requires_grad=True)
        y = q(x)
        monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", True)
        try:
            y.backward(torch.zeros_like(y))
        finally:
            monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", False)
        return [y] + _grads(q, x)

    def subclass_dy():
        q = _linear_module()
        x = torch.randn(4, 64, dtype=bf16, requires_grad=True)
        y = q(x)
        y.backward(torch.zeros_like(y).as_subclass(Sub))
        return [y] + _grads(q, x)

    try:
        for scenario in (force_after_forward, subclass_dy):
            custom.clear()
            py = _linear_run("python", scenario, linear_stubbed, monkeypatch)
            assert len(custom) == 2  # dgrad and wgrad
            custom.clear()
            assert _linear_run("node", scenario, linear_stubbed, monkeypatch)[::2] == py[::2]
            assert len(custom) == 2
    finally:
        lib._destroy()


def test_linear_errors_as_the_python_path(linear_stubbed, monkeypatch):
    """Bad shapes and dtypes raise the Python checks' messages on every path (the node leaves
    such calls to them); an fp32 module outside autocast is F.linear on both."""
    w, b = torch.randn(32, 64, dtype=bf16), torch.randn(32, dtype=bf16)
    calls = [
        lambda: quack_cpp.linear(torch.randn(4, 63, dtype=bf16), w),
        lambda: quack_cpp.linear(torch.randn(4, 64, dtype=bf16), w, torch.randn(31, dtype=bf16)),
        lambda: quack_cpp.linear(torch.randn(4, 64, dtype=bf16), w.half()),
        lambda: _linear_module()(torch.randn(4, 63, dtype=bf16)),
        lambda: quack_cpp.linear(torch.randn(4, 64, dtype=bf16), torch.randn(2, 32, 64,
                                                                            dtype=bf16)),
    ]
    msgs = {}
    for path in LINEAR_PATHS:
        _set_linear_path(path, monkeypatch)
        for i, call in enumerate(calls):
            with pytest.raises(ValueError) as e:
                call()
            msgs.setdefault(i, set()).add(str(e.value))
        y = _linear_module(dtype=f32)(torch.randn(4, 64))
        assert y.dtype == f32 and y.grad_fn.name() == "AddmmBackward0"
    assert all(len(m) == 1 for m in msgs.values()), msgs
    assert "linear: x has shape (4, 63)" in msgs[0].pop()
