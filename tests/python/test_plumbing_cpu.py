"""The torch layer's plumbing without a GPU: the custom ops get a CPU kernel written in torch
that follows the C++ API's contract (include/quack/norm.h), so the wrapper's semantics
(flattening, residual/prenorm/residual_dtype rules, which gradients flow where, placeholders),
the fake kernels (torch.library.opcheck) and torch.compile(fullgraph=True) tracing with the
registered autograd formula are checked on CPU. The CUDA kernels themselves are tested in
test_rmsnorm.py. Needs torch (any build) and an importable quack_cpp."""

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
ops = pytest.importorskip("quack_cpp.ops")

import cpu_stand_in  # noqa: E402
from reference import compare_runs, ref_rmsnorm, run  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def cpu_kernels():
    with cpu_stand_in.registered():
        yield


def _inputs(shape, dtype, wdtype, residual, rdtype, bias, seed=0):
    g = torch.Generator().manual_seed(seed)
    N = shape[-1]
    x = torch.randn(shape, generator=g).to(dtype)
    w = (1 + 0.5 * torch.randn(N, generator=g)).to(wdtype) if wdtype is not None else None
    b = (0.1 * torch.randn(N, generator=g)).to(wdtype or dtype) if bias else None
    r = torch.randn(shape, generator=g).to(rdtype or dtype) if residual else None
    return x, w, b, r


def _lib(x, w, b, r, eps, prenorm, residual_dtype, out_dtype):
    return quack_cpp.rmsnorm(x, w, b, r, eps=eps, prenorm=prenorm, residual_dtype=residual_dtype,
                             out_dtype=out_dtype)


CASES = [
    # shape, x dtype, weight dtype, residual, residual dtype, bias, prenorm, residual_dtype arg
    ((4, 3, 64), torch.float32, torch.float32, False, None, False, False, None),
    ((4, 3, 64), torch.bfloat16, torch.float32, False, None, True, False, None),
    ((5, 64), torch.bfloat16, torch.bfloat16, True, None, False, False, None),
    ((5, 64), torch.bfloat16, torch.float32, True, None, True, True, None),
    ((2, 5, 64), torch.bfloat16, torch.float32, True, torch.float32, False, True, None),
    ((2, 5, 64), torch.float16, torch.float32, True, None, False, True, torch.float32),
    ((7, 64), torch.bfloat16, torch.float32, False, None, False, True, torch.float32),
    ((7, 64), torch.bfloat16, None, False, None, False, True, None),
    ((64,), torch.float32, torch.float32, False, None, False, False, None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-w{c[2]}-r{c[3]}-b{c[5]}-pre{c[6]}-rd{c[7]}")
def test_semantics_vs_float64(case):
    shape, dtype, wdtype, residual, rdtype, bias, prenorm, rd_arg = case
    x, w, b, r = _inputs(shape, dtype, wdtype, residual, rdtype, bias)
    g = torch.Generator().manual_seed(1)
    dy = torch.randn(shape, generator=g).to(dtype)
    has_res_out = prenorm
    res_dtype = rd_arg or (r.dtype if r is not None else dtype)
    dr = torch.randn(shape, generator=g).to(res_dtype) if has_res_out else None
    kw = dict(eps=1e-5, prenorm=prenorm, residual_dtype=rd_arg)
    lib = run(_lib, x, w, b, r, dy=dy, dr=dr, **kw)
    ref = run(ref_rmsnorm, x, w, b, r, dy=dy, dr=dr, f64=True, **kw)
    # The CPU stand-in computes in fp32 like the kernels: a fixed, generous bound suffices
    # here; the real tolerance rule is applied to the CUDA kernels in test_rmsnorm.py.
    compare_runs(lib, ref, None, dtype)
    assert lib["out"].dtype == dtype and lib["out"].shape == x.shape
    if prenorm:
        assert lib["residual_out"].dtype == res_dtype
        if r is None and (rd_arg is None or rd_arg == dtype):
            assert lib["residual_out"] is not None
    if r is not None:
        assert lib["dr"].dtype == r.dtype  # also with prenorm=False (QuACK 0.2.0 gave None)
    assert lib["dx"].dtype == dtype
    if w is not None:
        assert lib["dw"].dtype == w.dtype


def test_prenorm_without_residual_returns_x_itself():
    x = torch.randn(4, 64)
    out, res_out = quack_cpp.rmsnorm(x, prenorm=True)
    assert res_out is x
    out, res_out = quack_cpp.rmsnorm(x.bfloat16(), prenorm=True, residual_dtype=torch.float32)
    assert res_out.dtype == torch.float32 and torch.equal(res_out, x.bfloat16().float())


def test_only_residual_out_used():
    # d(out) absent: the backward gets dout = 0 as a stride-0 view; dx = d(residual_out).
    x, w, _, r = _inputs((6, 64), torch.float32, torch.float32, True, None, False)
    x.requires_grad_(True)
    r.requires_grad_(True)
    w.requires_grad_(True)
    _, res_out = quack_cpp.rmsnorm(x, w, residual=r, prenorm=True)
    dr = torch.randn_like(res_out)
    res_out.backward(dr)
    torch.testing.assert_close(x.grad, dr)
    torch.testing.assert_close(r.grad, dr)
    torch.testing.assert_close(w.grad, torch.zeros_like(w))


def test_no_grad_skips_rstd_and_residual_out():
    from torch.utils._python_dispatch import TorchDispatchMode

    calls = []

    class Spy(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.quack_cpp.rmsnorm_fwd.default:
                calls.append(args)
            return func(*args, **(kwargs or {}))

    x, w, _, r = _inputs((6, 64), torch.float32, torch.float32, True, None, False)
    with Spy():
        quack_cpp.rmsnorm(x, w, residual=r)
    # (x, weight, bias, residual, eps, weight_offset, out_dtype, residual_out_dtype, store_rstd)
    assert calls[-1][7] is None and calls[-1][8] is False  # inference: no residual_out, rstd
    w.requires_grad_(True)
    with Spy():
        quack_cpp.rmsnorm(x, w, residual=r)
    assert calls[-1][7] == torch.float32 and calls[-1][8] is True  # h and rstd for backward
    with Spy(), torch.no_grad():
        quack_cpp.rmsnorm(x, w, residual=r, prenorm=True)
    assert calls[-1][7] == torch.float32 and calls[-1][8] is False


def test_validation_messages():
    x = torch.randn(4, 64)
    with pytest.raises(ValueError, match="x has dtype float64"):
        quack_cpp.rmsnorm(x.double())
    with pytest.raises(ValueError, match="weight has dtype int64"):
        quack_cpp.rmsnorm(x, torch.ones(64, dtype=torch.long))
    with pytest.raises(ValueError, match="residual has shape"):
        quack_cpp.rmsnorm(x, residual=torch.randn(4, 32))
    with pytest.raises(ValueError, match="out_dtype"):
        quack_cpp.rmsnorm(x, out_dtype=torch.float64)


def test_opcheck_fake_kernels():
    x, w, b, r = _inputs((5, 64), torch.bfloat16, torch.float32, True, None, True)
    w.requires_grad_(True)  # also checks the autograd registration and AOT dispatch
    for args in [
        (x, w, b, r, 1e-6, 0.0, torch.bfloat16, torch.bfloat16, True),
        (x, w.detach(), None, None, 1e-6, 1.0, torch.float32, None, False),  # inference form
        (x, None, None, r, 1e-6, 0.0, torch.bfloat16, torch.float32, True),
    ]:
        torch.library.opcheck(torch.ops.quack_cpp.rmsnorm_fwd.default, args)
    rstd = torch.rand(5) + 0.5
    dy = torch.randn(5, 64).bfloat16()
    for args in [
        (x, w.detach(), dy, rstd, None, 0.0, torch.bfloat16, None, True, torch.float32),
        (x, w.detach(), dy[:1].expand(5, 64), rstd, dy, 1.0, torch.bfloat16, torch.float32,
         False, None),
        (x, None, dy, rstd, None, 0.0, torch.float32, None, False, None),
    ]:
        torch.library.opcheck(torch.ops.quack_cpp.rmsnorm_bwd.default, args)


def test_fake_tensor_mode_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(3, 5, 64, dtype=torch.bfloat16)
        w = torch.empty(64)
        r = torch.empty(3, 5, 64)
        y, ro = quack_cpp.rmsnorm(x, w, residual=r, prenorm=True)
        assert y.shape == x.shape and y.dtype == torch.bfloat16
        assert ro.shape == x.shape and ro.dtype == torch.float32


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_fwd_bwd(backend):
    torch._dynamo.reset()
    x, w, b, r = _inputs((8, 128), torch.bfloat16, torch.float32, True, torch.float32, True)

    def f(x, w, b, r):
        y, h = quack_cpp.rmsnorm(x, w, b, r, eps=1e-5, prenorm=True)
        return y.float().square().sum() + h.sum()

    def grads(fn):
        leaves = [t.detach().clone().requires_grad_(True) for t in (x, w, b, r)]
        loss = fn(*leaves)
        loss.backward()
        return [loss.detach()] + [t.grad for t in leaves]

    eager = grads(f)
    compiled = grads(torch.compile(f, fullgraph=True, backend=backend, dynamic=False))
    for a, c in zip(eager, compiled):
        torch.testing.assert_close(c, a, rtol=1e-2, atol=1e-2)


def test_compile_stride0_dy_and_module():
    torch._dynamo.reset()
    m = quack_cpp.nn.RMSNorm(64)
    x = torch.randn(2, 16, 64, requires_grad=True)
    # The CPU module falls back to torch; call the functional path to exercise the op.
    f = torch.compile(lambda x, w: quack_cpp.rmsnorm(x, w).sum(), fullgraph=True,
                      backend="aot_eager")
    f(x, m.weight).backward()
    ref = x.detach().clone().requires_grad_(True)
    wr = m.weight.detach().clone().requires_grad_(True)
    torch.nn.functional.rms_norm(ref, (64,), wr, 1e-6).sum().backward()
    torch.testing.assert_close(x.grad, ref.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(m.weight.grad, wr.grad, rtol=1e-4, atol=1e-4)
