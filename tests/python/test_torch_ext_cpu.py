"""The C++ eager paths (quack_cpp._torch, built by pip where torch is importable: rmsnorm,
softmax, log_softmax) without a GPU: with their launches skipped (``_set_stub_launches``) and
CPU tensors let through the route, every case gives the outputs (shape, dtype, strides, None
where absent), the autograd node, the gradients' metadata and the errors that the Python fast
path gives. The values are the GPU
tests' (test_fastpath.py runs every case on both fast paths against the custom ops). Skips
where the extension is not built."""

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

f32, bf16 = torch.float32, torch.bfloat16


@pytest.fixture
def stubbed(monkeypatch):
    monkeypatch.setattr(reg, "_is_plain_cuda", _cpu_as_cuda)
    monkeypatch.setattr(reg, "DEVICE_TYPES", reg.DEVICE_TYPES + ("cpu",))
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
    out, res_out, rstd = ops.rmsnorm_fwd(x, None, None, None, 1e-6, f32, None, False)
    assert out.shape == (4, 64) and res_out is None and rstd is None
    out, res_out, rstd = ops.rmsnorm_fwd(x, None, None, x, 1e-6, bf16, f32, True)
    assert out.dtype == bf16 and res_out.dtype == f32 and rstd.shape == (4,)


def test_errors_as_the_python_path(monkeypatch):
    # Real launches on host tensors: both paths reach the C++ API and raise its error.
    monkeypatch.setattr(reg, "_is_plain_cuda", _cpu_as_cuda)
    monkeypatch.setattr(reg, "DEVICE_TYPES", reg.DEVICE_TYPES + ("cpu",))
    msgs = []
    for cpp in (True, False):
        monkeypatch.setattr(reg, "CPP_EAGER", cpp)
        for args in ((torch.randn(4, 64), torch.ones(63)), (torch.randn(4, 64),)):
            with pytest.raises(ValueError) as e:
                quack_cpp.rmsnorm(*args)
            msgs.append(str(e.value))
    assert msgs[:2] == msgs[2:] and "rmsnorm_fwd: " in msgs[0]
    with pytest.raises(ValueError, match="rmsnorm_fwd: x has 3 dimensions"):
        ops._torch_ext.rmsnorm_fwd(torch.randn(2, 3, 4), None, None, None, 1e-6, f32, None,
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
