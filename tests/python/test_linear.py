"""quack_cpp.nn.Linear (and quack_cpp.linear) on the GPU against torch.nn.Linear with the same
weights and a float64 reference (tolerance rule of shared/cases/handed.md).

Covers: forward for 2-D/3-D/1-D inputs and M = 0; in_features = 0 and out_features = 0
(forward and backward against torch.nn.Linear); forward + backward (dgrad, wgrad) in bf16 and
fp16; fuse_grad_accum (wgrad accumulated in place into an existing weight.grad, bf16 and fp32;
with autograd.grad / backward(inputs=...) of x or weight alone); in-place ops on y (add_, ReLU);
autocast (fp32 module under torch.autocast(bf16): bf16 output, fp32 weight gradient); in and
out features that are not multiples of 8 (the GEMM's unaligned paths), also with a bias; the
F.linear fallback (fp32 without autocast); torch.compile(fullgraph=True); CUDA-graph capture. Every backward needs the GEMM's transposed layouts (dx = dy W with W
row-major as B; dW = dy^T x with dy^T column-major as A): marker all_majors.

Skips without torch, quack_cpp or a CUDA GPU. QUACK_TEST_DEVICE=cpu runs them against the CPU
stand-ins (tests/python/cpu_stand_in.py; autocast is then CPU autocast): a self-check only.
"""

import os

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
qnn = pytest.importorskip("quack_cpp.nn")

import quack_cpp.gemm_ops as gemm_ops  # noqa: E402
from reference import assert_rule  # noqa: E402

DEVICE = os.environ.get("QUACK_TEST_DEVICE", "cuda")
if DEVICE == "cuda":
    pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
cuda_only = pytest.mark.skipif(DEVICE != "cuda", reason="checks CUDA itself")
all_majors = pytest.mark.all_majors

f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16


STAND_IN = True  # QUACK_TEST_DEVICE=cpu runs this module on the CPU stand-ins (conftest.py)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def pair(in_f, out_f, dtype, fuse=False):
    """(ours, torch.nn.Linear) with the same weight, on DEVICE."""
    q = qnn.Linear(in_f, out_f, device=DEVICE, dtype=dtype, fuse_grad_accum=fuse)
    t = torch.nn.Linear(in_f, out_f, bias=False, device=DEVICE, dtype=dtype)
    t.load_state_dict(q.state_dict())
    return q, t


def run(module, x, dy=None, f64=False):
    """Forward (and backward with dy); returns y, dx, dW. f64: a float64 copy of the module."""
    if f64:
        m = torch.nn.Linear(module.in_features, module.out_features, bias=False,
                            device=x.device, dtype=torch.float64)
        with torch.no_grad():
            m.weight.copy_(module.weight.double())
        module, x, dy = m, x.double(), None if dy is None else dy.double()
    x = x.detach().clone().requires_grad_(dy is not None)
    y = module(x)
    if dy is None:
        return y.detach(), None, None
    y.backward(dy)
    return y.detach(), x.grad, module.weight.grad


def compare(lib, ref, tch, dtype, names=("y", "dx", "dW")):
    """The tolerance rule per tensor; dtype: the compute precision (picks atol)."""
    for name, a, r, t in zip(names, lib, ref, tch):
        if r is not None:
            assert_rule(name, a, r, t, dtype=dtype)


@pytest.mark.parametrize("dtype", [bf16, f16], ids=str)
@pytest.mark.parametrize("shape,in_f,out_f", [((2, 37, 256), 256, 384), ((1000, 512), 512, 264),
                                              ((72,), 72, 136), ((0, 64), 64, 128)])
def test_forward(shape, in_f, out_f, dtype):
    q, t = pair(in_f, out_f, dtype)
    x = torch.randn(shape, device=DEVICE).to(dtype)
    with torch.no_grad():
        lib = run(q, x)
    assert lib[0].shape == shape[:-1] + (out_f,) and lib[0].dtype == dtype
    assert lib[0].is_contiguous()
    compare(lib, run(q, x, f64=True), run(t, x), dtype, names=("y",))


@all_majors
@pytest.mark.parametrize("dtype", [bf16, f16], ids=str)
@pytest.mark.parametrize("shape,in_f,out_f", [((2, 37, 256), 256, 384), ((1000, 512), 512, 264),
                                              ((72,), 72, 136)])
def test_forward_backward(shape, in_f, out_f, dtype):
    q, t = pair(in_f, out_f, dtype)
    x = torch.randn(shape, device=DEVICE).to(dtype)
    dy = torch.randn(shape[:-1] + (out_f,), device=DEVICE).to(dtype)
    lib = run(q, x, dy)
    assert lib[1].dtype == dtype and lib[2].dtype == dtype
    compare(lib, run(q, x, dy, f64=True), run(t, x, dy), dtype)


@all_majors
def test_empty_batch_backward():
    q, _ = pair(64, 128, bf16)
    x = torch.randn(0, 64, device=DEVICE).to(bf16).requires_grad_(True)
    q(x).sum().backward()
    assert x.grad.shape == (0, 64)
    assert torch.equal(q.weight.grad, torch.zeros_like(q.weight))


@all_majors
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("shape,in_f,out_f", [((2, 5, 0), 0, 64), ((7, 0), 0, 24), ((0,), 0, 16),
                                              ((2, 5, 64), 64, 0), ((7, 40), 40, 0),
                                              ((0, 0), 0, 8)])
def test_zero_features(shape, in_f, out_f, bias):
    """in_features = 0 (K = 0: y = bias, or zeros; dx empty, dW (N, 0)) and out_features = 0
    (y empty; dx zeros, dW (0, K)), as torch.nn.Linear: same shapes, dtypes and values."""
    q = qnn.Linear(in_f, out_f, bias=bias, device=DEVICE, dtype=bf16)
    t = torch.nn.Linear(in_f, out_f, bias=bias, device=DEVICE, dtype=bf16)
    if bias:
        with torch.no_grad():
            q.bias.copy_(torch.randn(out_f, device=DEVICE).to(bf16))
    t.load_state_dict(q.state_dict())
    x = torch.randn(shape, device=DEVICE).to(bf16)
    res = []
    for m in (q, t):
        xi = x.clone().requires_grad_(True)
        y = m(xi)
        y.backward(torch.ones_like(y))  # ones: db = row counts, exact in bf16 either way
        res.append((y.detach(), xi.grad, m.weight.grad, m.bias.grad if bias else None))
    assert res[0][0].shape == shape[:-1] + (out_f,)
    for name, a, r in zip(("y", "dx", "dW", "db"), *res):
        if r is None:
            assert a is None, name
            continue
        assert a.shape == r.shape and a.dtype == r.dtype, name
        assert torch.equal(a, r), name


@all_majors
@pytest.mark.parametrize("wdtype,autocast", [(bf16, None), (f32, bf16), (f32, f16)], ids=str)
def test_fuse_grad_accum(wdtype, autocast, monkeypatch):
    calls = []
    inplace = gemm_ops.gemm_add_inplace_op  # the registered op (custom op or eager fast path)
    monkeypatch.setattr(gemm_ops, "gemm_add_inplace_op",
                        lambda *a: calls.append(a[2].data_ptr()) or inplace(*a))
    q, t = pair(256, 384, wdtype, fuse=True)
    cdt = autocast or wdtype  # compute dtype
    ac = torch.autocast(DEVICE, dtype=cdt, enabled=autocast is not None)
    x1, x2 = (torch.randn(3, 40, 256, device=DEVICE).to(wdtype) for _ in range(2))
    dy1, dy2 = (torch.randn(3, 40, 384, device=DEVICE).to(cdt) for _ in range(2))
    hooks = []
    q.weight.register_post_accumulate_grad_hook(lambda p: hooks.append(p.grad.data_ptr()))
    for m in (q, t):
        for x, dy in ((x1, dy1), (x2, dy2)):
            with ac:
                y = m(x)
            y.backward(dy)
            if m is q and len(hooks) == 1:
                first_ptr = q.weight.grad.data_ptr()
                first = q.weight.grad.clone()
    # The second backward accumulated into weight.grad in place (gemm_add_inplace) where the
    # C++ has the kernel (bf16 and fp16 inputs: the wgrad's mm instances with an fp32 C),
    # and AccumulateGrad kept that tensor (no new gradient buffer; the hook still ran).
    g2 = dy2.flatten(0, -2).T
    fused = gemm_ops._accepts(g2, x2.to(cdt).flatten(0, -2), q.weight.grad, q.weight.grad, 1.0)
    if DEVICE == "cuda":
        assert fused, (f"the C++ rejects {cdt} wgrad accumulation (dy^T column-major, x "
                       "row-major)")
    assert calls == ([first_ptr] if fused else [])
    assert q.weight.grad.data_ptr() == first_ptr and hooks == [first_ptr, first_ptr]
    assert q.weight.grad.dtype == wdtype
    dw64 = [dy.double().flatten(0, -2).T @ x.to(cdt).double().flatten(0, -2)
            for x, dy in ((x1, dy1), (x2, dy2))]
    assert_rule("dW first", first, dw64[0], None, rtol_no_torch=1e-2)
    assert_rule("dW sum", q.weight.grad, dw64[0] + dw64[1], t.weight.grad, dtype=cdt)


@all_majors
@pytest.mark.parametrize("how", ["grad", "inputs"])
def test_fuse_grad_accum_partial_backward(how):
    """fuse_grad_accum with a backward that computes one input's gradient (how: autograd.grad,
    or backward(inputs=...)) once weight.grad exists: x's alone is torch.nn.Linear's dx and
    leaves weight.grad as it was; weight's alone is the new dW (autograd.grad, weight.grad as it
    was) or dW accumulated into weight.grad (backward(inputs=[weight]))."""
    q, t = pair(256, 384, bf16, fuse=True)
    x = torch.randn(3, 40, 256, device=DEVICE).to(bf16)
    dy1, dy2 = (torch.randn(3, 40, 384, device=DEVICE).to(bf16) for _ in range(2))
    x64, dw1 = x.double().flatten(0, -2), dy1.double().flatten(0, -2).T @ x.double().flatten(0, -2)
    dw2 = dy2.double().flatten(0, -2).T @ x64
    for target in ("x", "weight"):
        out = []
        for m in (q, t):
            m.weight.grad = None
            m(x).backward(dy1)  # weight.grad = dW1
            xg = x.clone().requires_grad_(True)
            y = m(xg)
            wanted = xg if target == "x" else m.weight
            if how == "grad":
                (g,) = torch.autograd.grad(y, wanted, dy2)
            else:
                y.backward(dy2, inputs=[wanted])
                g = wanted.grad
            out.append((g, m.weight.grad))
        (g, wgrad), (tg, twgrad) = out
        assert_rule("dW1 kept" if target == "x" or how == "grad" else "dW1 + dW2", wgrad,
                    dw1 if target == "x" or how == "grad" else dw1 + dw2, twgrad, dtype=bf16)
        ref = (dy2.double() @ q.weight.double()) if target == "x" else (
            dw2 if how == "grad" else dw1 + dw2)
        assert_rule(f"d{target}", g, ref, tg, dtype=bf16)


@all_majors
@pytest.mark.parametrize("shape", [(2, 37, 256), (37, 256), (256,)], ids=str)
def test_inplace_on_output(shape):
    """In-place ops on y with grad on, as torch.nn.Linear allows them (y is no view made inside
    the autograd Function for a 3-D or 1-D x): y.add_(r) then nn.ReLU(inplace=True); y and
    the gradients against torch.nn.Linear's and a float64 reference."""
    q, t = pair(256, 384, bf16)
    x = torch.randn(shape, device=DEVICE).to(bf16)
    # +-8 by column: y + r has r's sign (|y| is far below 8 here), so ReLU's mask is the same
    # in bf16 and float64
    r = torch.where(torch.arange(384, device=DEVICE) % 2 == 0, 8.0, -8.0).to(bf16)
    dy = torch.randn(shape[:-1] + (384,), device=DEVICE).to(bf16)

    def go(m, dtype=bf16):
        xg = x.to(dtype).requires_grad_(True)
        y = m(xg)
        y.add_(r.to(dtype))
        y = torch.nn.ReLU(inplace=True)(y)
        y.backward(dy.to(dtype))
        return y.detach(), xg.grad, m.weight.grad

    m64 = torch.nn.Linear(256, 384, bias=False, device=DEVICE, dtype=torch.float64)
    with torch.no_grad():
        m64.weight.copy_(q.weight.double())
    compare(go(q), go(m64, torch.float64), go(t), bf16)


@all_majors
@pytest.mark.parametrize("cdt", [bf16, f16], ids=str)
def test_autocast_matches_torch_module(cdt):
    q, t = pair(256, 384, f32)
    x = torch.randn(4, 33, 256, device=DEVICE)
    dy = torch.randn(4, 33, 384, device=DEVICE).to(cdt)
    with torch.autocast(DEVICE, dtype=cdt):
        lib = run(q, x, dy)
        tch = run(t, x, dy)
    assert lib[0].dtype == cdt == tch[0].dtype
    assert lib[1].dtype == f32 and lib[2].dtype == f32  # as nn.Linear under autocast
    # Reference: autocast rounds x and W to cdt, then float64 math.
    xb, wb, g = x.to(cdt).double(), q.weight.detach().to(cdt).double(), dy.double()
    ref = (xb @ wb.T, g @ wb, g.flatten(0, -2).T @ xb.flatten(0, -2))
    compare(lib, ref, tch, cdt)


def test_autocast_forward_only():
    q, t = pair(256, 384, f32)
    x = torch.randn(50, 256, device=DEVICE)
    with torch.no_grad(), torch.autocast(DEVICE, dtype=bf16):
        y, yt = q(x), t(x)
    assert y.dtype == bf16
    ref = x.to(bf16).double() @ q.weight.detach().to(bf16).double().T
    assert_rule("y", y, ref, yt)


@all_majors
@pytest.mark.parametrize("dtype", [bf16, f16], ids=str)
@pytest.mark.parametrize("shape,in_f,out_f", [((5, 20), 20, 64), ((3, 7, 64), 64, 36),
                                              ((130, 1001), 1001, 1003), ((64, 256), 256, 50257)])
def test_unaligned_features(shape, in_f, out_f, dtype):
    # Issue 16: sizes that are not multiples of 8 (a 50257-word vocabulary) run our GEMM too
    # (no F.linear fallback): forward, dgrad and wgrad against float64 and torch.
    q, t = pair(in_f, out_f, dtype)
    x = torch.randn(shape, device=DEVICE).to(dtype)
    dy = torch.randn(shape[:-1] + (out_f,), device=DEVICE).to(dtype)
    lib, ref, tch = run(q, x, dy), run(q, x, dy, f64=True), run(t, x, dy)
    compare(lib, ref, tch, dtype)


@all_majors
@pytest.mark.parametrize("dtype", [bf16, f16], ids=str)
@pytest.mark.parametrize("shape,in_f,out_f", [((3, 7, 64), 64, 36), ((130, 1001), 1001, 1003)])
def test_bias_unaligned_out_features(shape, in_f, out_f, dtype):
    """nn.Linear(bias=True) with out_features not a multiple of 8 (pair() has no bias): the bias
    added in the epilogue of a GEMM whose output rows are padded (plain stores), its gradient the
    column sum of dy; y, dx, dW and db against float64 autograd and torch.nn.Linear(bias=True)
    with the same state dict."""
    q = qnn.Linear(in_f, out_f, bias=True, device=DEVICE, dtype=dtype)
    t = torch.nn.Linear(in_f, out_f, bias=True, device=DEVICE, dtype=dtype)
    with torch.no_grad():  # a bias of the size of the outputs, not the small default init
        q.bias.copy_(torch.randn(out_f, device=DEVICE).to(dtype))
    t.load_state_dict(q.state_dict())
    x = torch.randn(shape, device=DEVICE).to(dtype)
    dy = torch.randn(shape[:-1] + (out_f,), device=DEVICE).to(dtype)

    def grads(m, x, dy):
        x = x.detach().clone().requires_grad_(True)
        y = m(x)
        y.backward(dy)
        return y.detach(), x.grad, m.weight.grad, m.bias.grad

    m64 = torch.nn.Linear(in_f, out_f, bias=True, device=DEVICE, dtype=torch.float64)
    m64.load_state_dict({k: v.double() for k, v in q.state_dict().items()})
    lib, ref, tch = grads(q, x, dy), grads(m64, x.double(), dy.double()), grads(t, x, dy)
    assert lib[0].shape == shape[:-1] + (out_f,) and lib[3].dtype == dtype
    compare(lib, ref, tch, dtype, names=("y", "dx", "dW", "db"))


@pytest.mark.parametrize("in_f,out_f,dtype", [(64, 64, f32)])
def test_fallback_is_torch(in_f, out_f, dtype):
    q, t = pair(in_f, out_f, dtype)
    x = torch.randn(5, in_f, device=DEVICE).to(dtype).requires_grad_(True)
    xt = x.detach().clone().requires_grad_(True)
    q(x).sum().backward()
    t(xt).sum().backward()
    assert torch.equal(x.grad, xt.grad) and torch.equal(q.weight.grad, t.weight.grad)


def test_compile_fullgraph_forward():
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    q, _ = pair(256, 384, bf16)
    x = torch.randn(2, 37, 256, device=DEVICE).to(bf16)
    cq = torch.compile(q, fullgraph=True, dynamic=False)
    with torch.no_grad():
        assert torch.equal(cq(x), q(x))
    assert sum(counters["graph_break"].values()) == 0


@all_majors
@pytest.mark.parametrize("autocast", [False, True])
def test_compile_fullgraph_backward(autocast):
    torch._dynamo.reset()
    dtype = f32 if autocast else bf16
    q, _ = pair(256, 384, dtype, fuse=True)
    x = torch.randn(2, 37, 256, device=DEVICE).to(dtype)

    def loss(m, x):
        with torch.autocast(DEVICE, dtype=bf16, enabled=autocast):
            return m(x).float().square().mean()

    def grads(fn):
        q.weight.grad = None
        xl = x.detach().clone().requires_grad_(True)
        out = fn(q, xl)
        out.backward()
        return out.detach(), xl.grad, q.weight.grad.clone()

    eager = grads(loss)
    compiled = grads(torch.compile(loss, fullgraph=True, dynamic=False))
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c, e, rtol=1e-2, atol=1e-3)


@cuda_only
@pytest.mark.parametrize("backward", [False, pytest.param(True, marks=all_majors)])
def test_cuda_graph(backward):
    q, _ = pair(256, 384, bf16)
    x = torch.randn(64, 256, device="cuda").to(bf16).requires_grad_(backward)
    dy = torch.randn(64, 384, device="cuda").to(bf16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.set_grad_enabled(backward):
        for _ in range(2):
            y = q(x)
            if backward:
                y.backward(dy)
    torch.cuda.current_stream().wait_stream(s)
    q.weight.grad = None
    x.grad = None
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.set_grad_enabled(backward):
        y = q(x)
        if backward:
            y.backward(dy)
    with torch.no_grad():
        x.copy_(torch.randn(64, 256, device="cuda").to(bf16))
    g.replay()
    torch.cuda.synchronize()
    with torch.no_grad():
        assert torch.equal(y, q(x))
    if backward:
        xe = x.detach().clone().requires_grad_(True)
        q2, _ = pair(256, 384, bf16)
        q2.load_state_dict(q.state_dict())
        q2(xe).backward(dy)
        assert torch.equal(x.grad, xe.grad) and torch.equal(q.weight.grad, q2.weight.grad)


@cuda_only
def test_backward_passes_on_a_python_error():
    """A Python exception raised where the C++ node's backward calls Python (the stream-K
    workspace's owner, asked on a stream's first GEMM) reaches the caller of backward as that
    exception, type and message (python_error), not as the engine's RuntimeError."""
    ext = gemm_ops._torch_ext
    if ext is None or not hasattr(ext, "_gemm_set_streamk"):
        pytest.skip("no C++ eager path in this build")
    q, _ = pair(256, 384, bf16)
    x = torch.randn(64, 256, device=DEVICE).to(bf16).requires_grad_(True)
    y = q(x)
    if "LinearFn" not in y.grad_fn.name():
        pytest.skip(f"Linear ran {y.grad_fn.name()}, not the C++ node")

    class WorkspaceError(Exception):
        pass

    def lookup(D, s):
        raise WorkspaceError("no workspace")

    ext._gemm_set_streamk(lookup)  # also forgets the workspaces the C++ path was given
    try:
        with pytest.raises(WorkspaceError, match="no workspace"):
            y.backward(torch.randn_like(y))
    finally:
        ext._gemm_set_streamk(gemm_ops._streamk_workspace)
    y = q(x)  # and the node works again
    y.backward(torch.ones_like(y))
    assert x.grad is not None and torch.isfinite(x.grad.float()).all()
