"""quack_cpp.layernorm and quack_cpp.nn.LayerNorm on the GPU against a float64 reference, with
the tolerance rule of shared/cases/handed.md (error_lib <= 2*error_torch + atol, torch eager in
the same dtype).

Covers: shapes (M in {1, 7, 257, 8192}, N in {1, 127, 500, 4096, 65536, 262144}, chosen pairs),
dtypes fp32/fp16/bf16 with weight/bias fp32 or x's dtype, weight/bias absent, weight_offset,
residual / prenorm / residual_dtype / out_dtype, return_mean / return_rstd, large-mean rows,
eager and torch.compile(fullgraph=True), backward through autograd, M = 0, CUDA-graph capture,
autocast (float32, as torch), nn.LayerNorm as a drop-in (state dict both ways, CPU fallback,
our kernel on CUDA inputs), determinism of dweight/dbias, bad input, opcheck.

Skips without torch, quack_cpp or a CUDA GPU. QUACK_TEST_DEVICE=cpu runs the device-agnostic
tests against CPU stand-ins of the kernels (tests/python/cpu_stand_in.py): a self-check of
this file, not of the kernels.
"""

import os
import warnings

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
ln_ops = pytest.importorskip("quack_cpp.layernorm_ops")
import torch.nn.functional as F  # noqa: E402

from reference import C01_LAYOUTS, assert_rule, c01_dy, compare_runs, run  # noqa: E402

DEVICE = os.environ.get("QUACK_TEST_DEVICE", "cuda")
if DEVICE == "cuda":
    pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
cuda_only = pytest.mark.skipif(DEVICE != "cuda", reason="checks CUDA itself")

f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
DTYPES = [f32, f16, bf16]

STAND_IN = True  # QUACK_TEST_DEVICE=cpu runs this module on the CPU stand-ins (conftest.py)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def randn(*shape, dtype=f32, scale=1.0, shift=0.0, requires_grad=False):
    return (torch.randn(*shape, device=DEVICE) * scale + shift).to(dtype).requires_grad_(
        requires_grad)


# Implementations with reference.run's signature fn(x, w, b, r, eps, prenorm, residual_dtype,
# out_dtype); the offset is bound by a closure.


def lib_ln(offset=0.0):
    def fn(x, w, b, r, eps, prenorm=False, residual_dtype=None, out_dtype=None):
        return quack_cpp.layernorm(x, w, b, r, eps=eps, prenorm=prenorm,
                                   residual_dtype=residual_dtype, out_dtype=out_dtype,
                                   weight_offset=offset)
    return fn


def ref_ln(offset=0.0):
    """Float64 LayerNorm (inputs cast to float64 by run): two-pass mean and variance."""
    def fn(x, w, b, r, eps, prenorm=False, residual_dtype=None, out_dtype=None):
        h = x if r is None else x + r
        mean = h.mean(-1, keepdim=True)
        var = (h - mean).pow(2).mean(-1, keepdim=True)
        out = (h - mean) * torch.rsqrt(var + eps)
        if w is not None:
            out = out * (w + offset)
        if b is not None:
            out = out + b
        return (out, h) if prenorm else out
    return fn


def torch_ln(offset=0.0):
    """PyTorch eager in the inputs' dtypes (torch_same_dtype of the tolerance rule)."""
    def fn(x, w, b, r, eps, prenorm=False, residual_dtype=None, out_dtype=None):
        if r is not None:
            h = (x + r).to(residual_dtype or r.dtype)
        elif residual_dtype is not None and residual_dtype != x.dtype:
            h = x.to(residual_dtype)
        else:
            h = x
        wt = None if w is None else (w + offset).to(h.dtype)
        bt = None if b is None else b.to(h.dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = F.layer_norm(h, (h.shape[-1],), wt, bt, eps)
        out = out.to(out_dtype or x.dtype)
        return (out, h) if prenorm else out
    return fn


def check_all(x, w=None, b=None, r=None, dy=None, dr=None, offset=0.0, **kw):
    """lib, torch in the same dtypes and the float64 reference through reference.run; the
    tolerance rule per output and gradient."""
    lib = run(lib_ln(offset), x, w, b, r, dy=dy, dr=dr, **kw)
    strip = lambda t: None if t is None else t.detach()  # noqa: E731
    args = (strip(x), strip(w), strip(b), strip(r))
    tch = run(torch_ln(offset), *args, dy=dy, dr=dr, **kw)
    ref = run(ref_ln(offset), *args, dy=dy, dr=dr, f64=True, **kw)
    compare_runs(lib, ref, tch, x.dtype)
    return lib, ref


# --------------------------------------------------------------------------------------------
# Shapes x dtypes, eager, forward + backward
# --------------------------------------------------------------------------------------------

SHAPES = [(7, 1), (1, 127), (7, 127), (257, 500), (8192, 127), (257, 4096), (8192, 4096),
          (1, 65536), (7, 65536), (257, 65536), (1, 262144), (7, 262144)]


@pytest.mark.parametrize("wdtype", ["f32", "x"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("M,N", SHAPES)
def test_fwd_bwd(M, N, dtype, wdtype):
    wd = f32 if wdtype == "f32" else dtype
    x = randn(M, N, dtype=dtype)
    w = randn(N, dtype=wd, scale=0.5, shift=1.0)
    b = randn(N, dtype=wd, scale=0.5)
    dy = randn(M, N, dtype=dtype)
    check_all(x, w, b, dy=dy, eps=1e-5)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("affine", ["none", "weight", "bias"])
def test_weight_bias_absent_3d(dtype, affine):
    x = randn(3, 11, 1000, dtype=dtype)
    w = randn(1000, scale=0.5, shift=1.0) if affine == "weight" else None
    b = randn(1000, scale=0.5) if affine == "bias" else None
    check_all(x, w, b, dy=randn(3, 11, 1000, dtype=dtype), eps=1e-5)


@pytest.mark.parametrize("dtype", [bf16, f32], ids=str)
@pytest.mark.parametrize("offset", [1.0, -0.5])
def test_weight_offset(dtype, offset):
    # Gemma: zero-centred weights, y uses w + 1; dweight does not depend on the offset.
    x = randn(257, 4096, dtype=dtype)
    w = randn(4096, dtype=dtype, scale=0.1, shift=1.0 - offset)
    b = randn(4096, dtype=dtype, scale=0.1)
    check_all(x, w, b, dy=randn(257, 4096, dtype=dtype), offset=offset, eps=1e-6)


@pytest.mark.parametrize("dtype", [f32, bf16], ids=str)
def test_large_mean_rows(dtype):
    # mean 1000 (fp32) / 64 (bf16), unit spread: E[h^2] - E[h]^2 would lose the variance.
    shift = 1000.0 if dtype == f32 else 64.0
    x = randn(64, 4096, dtype=dtype, shift=shift)
    w = randn(4096, scale=0.5, shift=1.0)
    check_all(x, w, None, dy=randn(64, 4096, dtype=dtype), eps=1e-5)


RES_CASES = [
    # (x dtype, residual dtype, residual_dtype, out_dtype, prenorm)
    (bf16, bf16, None, None, True),
    (bf16, bf16, None, None, False),
    (bf16, f32, f32, None, True),
    (f16, f16, None, f32, True),
    (f32, f32, None, None, True),
    (bf16, None, f32, None, True),  # no residual: residual_out is a cast copy of x
]


@pytest.mark.parametrize("shape", [(257, 4096), (3, 11, 1000), (7, 65536)], ids=str)
@pytest.mark.parametrize("case", RES_CASES, ids=lambda c: "-".join(map(str, c)).replace("torch.", ""))
def test_residual_prenorm(case, shape):
    xd, rd, res_dtype, out_dtype, prenorm = case
    N = shape[-1]
    x = randn(*shape, dtype=xd)
    r = randn(*shape, dtype=rd) if rd is not None else None
    w = randn(N, scale=0.5, shift=1.0)
    b = randn(N, scale=0.5)
    dy = randn(*shape, dtype=out_dtype or xd)
    dr = randn(*shape, dtype=res_dtype or rd or xd) if prenorm else None
    check_all(x, w, b, r, dy=dy, dr=dr, eps=1e-5, prenorm=prenorm, residual_dtype=res_dtype,
              out_dtype=out_dtype)


def test_prenorm_no_residual_is_x():
    x = randn(8, 256, dtype=bf16)
    out, h = quack_cpp.layernorm(x, prenorm=True)
    assert h is x


def test_return_mean_rstd():
    x = randn(2, 33, 500, dtype=bf16)
    out, mean, rstd = quack_cpp.layernorm(x, return_mean=True, return_rstd=True, eps=1e-5)
    x64 = x.double()
    assert mean.shape == (2, 33) and rstd.shape == (2, 33)
    assert mean.dtype == f32 and rstd.dtype == f32
    ref_mean = x64.mean(-1)
    ref_rstd = torch.rsqrt(x64.var(-1, unbiased=False) + 1e-5)
    assert torch.allclose(mean.double(), ref_mean, rtol=0, atol=1e-5 * x64.abs().max().item())
    assert torch.allclose(rstd.double(), ref_rstd, rtol=2e-5, atol=0)
    # With a gradient: mean and rstd are non-differentiable, out's gradient flows.
    xl = x.clone().requires_grad_(True)
    r = randn(2, 33, 500, dtype=bf16)
    out, h, mean, rstd = quack_cpp.layernorm(xl, residual=r, prenorm=True, return_mean=True,
                                             return_rstd=True)
    assert not mean.requires_grad and not rstd.requires_grad
    out.float().sum().backward()
    assert xl.grad is not None and xl.grad.shape == x.shape


# --------------------------------------------------------------------------------------------
# torch.compile, CUDA graphs, autocast, M = 0
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [bf16, f32], ids=str)
def test_compile_fullgraph(dtype):
    x = randn(257, 4096, dtype=dtype, requires_grad=True)
    w = randn(4096, scale=0.5, shift=1.0, requires_grad=True)
    b = randn(4096, scale=0.5, requires_grad=True)
    r = randn(257, 4096, dtype=dtype)
    dy = randn(257, 4096, dtype=dtype)

    def f(x, w, b, r):
        y, h = quack_cpp.layernorm(x, w, b, r, prenorm=True, weight_offset=0.5)
        return y * 2, h

    torch._dynamo.reset()
    cf = torch.compile(f, fullgraph=True)
    y, h = cf(x, w, b, r)
    y.backward(dy)
    got = (y.detach(), x.grad.clone(), w.grad.clone(), b.grad.clone())
    x.grad = w.grad = b.grad = None
    y2, h2 = f(x, w, b, r)
    y2.backward(dy)
    want = (y2.detach(), x.grad, w.grad, b.grad)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, rtol=0, atol=0)  # the same kernels: the same bits


# --------------------------------------------------------------------------------------------
# C01: backward with a non-contiguous upstream gradient (test_rmsnorm.py's, for LayerNorm)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", C01_LAYOUTS)
def test_c01_dy_layouts(layout):
    """handed.md C01 for LayerNorm: dy expanded (all strides 0, from y.sum().backward()),
    column-strided, row-strided (a slice of a wider buffer), a transposed 2-D view; dx, dw, db
    against the float64 reference, and with dy = 1, w = 1, b = 0 the closed form."""
    shape = (2048, 256) if layout == "transposed" else (2, 1024, 256)
    x = randn(*shape, dtype=bf16)
    w = torch.ones(256, device=DEVICE)
    b = torch.zeros(256, device=DEVICE)
    dy = c01_dy(layout, shape, DEVICE)
    if layout == "expanded":  # the real trigger: y.sum().backward()
        xl, wl, bl = (t.clone().requires_grad_(True) for t in (x, w, b))
        quack_cpp.layernorm(xl, wl, bl, eps=1e-6).sum().backward()
        lib = dict(dx=xl.grad, dw=wl.grad, db=bl.grad)
    else:
        assert not dy.is_contiguous()
        lib = run(lib_ln(), x, w, b, dy=dy, eps=1e-6)
    ref = run(ref_ln(), x, w, b, dy=dy, eps=1e-6, f64=True)
    tch = run(torch_ln(), x, w, b, dy=dy.contiguous(), eps=1e-6)
    if layout != "expanded":
        compare_runs(lib, ref, tch, bf16, keys=("dx", "dw", "db"))
        return
    compare_runs(lib, ref, tch, bf16, keys=("dw", "db"))
    # dy = 1, w = 1, b = 0: g = dy*w = 1, so mean(g) = 1 and mean(g*xhat) = mean(xhat) = 0:
    # dx = rstd*(g - mean(g) - xhat*mean(g*xhat)) = 0, dw = sum_rows xhat, db = M (rows).
    # dx is 0 only up to the rounding of terms of size rstd that cancel, so the rule's bf16
    # atol at that scale (1e-3*max rstd) plus twice torch's own deviation from 0 bounds it (the
    # rule's atol at max|ref| = 0 would demand exact zeros neither kernel promises).
    x64 = x.double().reshape(-1, 256)
    rstd = torch.rsqrt(x64.var(-1, unbiased=False) + 1e-6)
    xhat = (x64 - x64.mean(-1, keepdim=True)) * rstd[:, None]
    dx = lib["dx"].double()
    assert lib["dx"].shape == x.shape and torch.isfinite(dx).all()
    bound = 2 * tch["dx"].double().abs().max().item() + 1e-3 * rstd.max().item()
    assert dx.abs().max().item() <= bound, (dx.abs().max().item(), bound)
    assert_rule("dw (closed form)", lib["dw"], xhat.sum(0), tch["dw"], dtype=bf16)
    assert torch.equal(lib["db"], torch.full_like(lib["db"], 2048.0))  # sums of ones: exact


def test_c02_zero_rows():
    m = quack_cpp.nn.LayerNorm(2520, device=DEVICE, dtype=bf16)
    x = torch.randn(3, 0, 2520, device=DEVICE, dtype=bf16, requires_grad=True)
    y = m(x)
    assert y.shape == (3, 0, 2520) and y.dtype == bf16
    y.sum().backward()
    assert x.grad.shape == (3, 0, 2520)
    assert torch.count_nonzero(m.weight.grad) == 0 and torch.count_nonzero(m.bias.grad) == 0


def test_zero_columns():
    """N = 0 with rows (nn.LayerNorm(0), as torch): empty output and input gradient; the weight
    and bias gradients empty; the same as torch.nn.functional.layer_norm."""
    m = quack_cpp.nn.LayerNorm(0, device=DEVICE, dtype=bf16)
    x = torch.randn(3, 5, 0, device=DEVICE, dtype=bf16, requires_grad=True)
    y = m(x)
    ref = F.layer_norm(x.detach(), (0,), m.weight.detach(), m.bias.detach())
    assert y.shape == ref.shape == (3, 5, 0) and y.dtype == bf16
    y.sum().backward()
    assert x.grad.shape == (3, 5, 0)
    assert m.weight.grad.shape == (0,) and m.bias.grad.shape == (0,)


@cuda_only
def test_cuda_graph_capture_replay():
    x = randn(64, 4096, dtype=bf16)
    w = randn(4096, scale=0.5, shift=1.0, requires_grad=True)
    b = randn(4096, scale=0.5, requires_grad=True)
    xr = x.clone().requires_grad_(True)
    dy = randn(64, 4096, dtype=bf16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up (workspace sizes, occupancy queries)
        quack_cpp.layernorm(xr, w, b).backward(dy)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    xr.grad = w.grad = b.grad = None
    with torch.cuda.graph(g):
        y = quack_cpp.layernorm(xr, w, b)
        y.backward(dy)
    xg, wg, bg = xr.grad, w.grad, b.grad
    x.add_(0.5)
    with torch.no_grad():
        xr.copy_(x)
    g.replay()
    torch.cuda.synchronize()
    ref_y = quack_cpp.layernorm(x, w.detach(), b.detach())
    torch.testing.assert_close(y, ref_y, rtol=0, atol=0)
    xr2 = x.clone().requires_grad_(True)
    w2, b2 = w.detach().clone().requires_grad_(True), b.detach().clone().requires_grad_(True)
    quack_cpp.layernorm(xr2, w2, b2).backward(dy)
    torch.testing.assert_close(xg, xr2.grad, rtol=0, atol=0)
    torch.testing.assert_close(wg, w2.grad, rtol=0, atol=0)
    torch.testing.assert_close(bg, b2.grad, rtol=0, atol=0)


@cuda_only
@pytest.mark.parametrize("x_dtype", [f32, bf16], ids=str)
def test_autocast_matches_torch_module(x_dtype):
    # Under autocast torch runs layer_norm in float32 (output float32); so do we.
    ours = quack_cpp.nn.LayerNorm(1024, device=DEVICE)
    ref = torch.nn.LayerNorm(1024, device=DEVICE)
    with torch.no_grad():
        ours.weight.normal_(1.0, 0.1)
        ours.bias.normal_(0.0, 0.1)
    ref.load_state_dict(ours.state_dict())
    x = randn(8, 64, 1024, dtype=x_dtype)
    xo = x.clone().requires_grad_(True)
    xr = x.clone().requires_grad_(True)
    with torch.autocast("cuda", dtype=bf16):
        yo = ours(xo)
        yr = ref(xr)
    assert yo.dtype == yr.dtype == f32
    torch.testing.assert_close(yo, yr, rtol=1e-5, atol=1e-5)
    dy = randn(8, 64, 1024)
    yo.backward(dy)
    yr.backward(dy)
    assert xo.grad.dtype == xr.grad.dtype == x_dtype
    tol = 1e-5 if x_dtype == f32 else 1e-2
    torch.testing.assert_close(xo.grad, xr.grad, rtol=tol, atol=tol)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(ours.bias.grad, ref.bias.grad, rtol=1e-4, atol=1e-3)


# --------------------------------------------------------------------------------------------
# nn.LayerNorm: a drop-in for torch.nn.LayerNorm
# --------------------------------------------------------------------------------------------


def test_module_state_dict_both_ways():
    for kw in (dict(), dict(bias=False), dict(elementwise_affine=False), dict(eps=1e-6)):
        ours = quack_cpp.nn.LayerNorm((4, 256), device=DEVICE, **kw)
        ref = torch.nn.LayerNorm((4, 256), device=DEVICE, **kw)
        assert ours.state_dict().keys() == ref.state_dict().keys()
        assert ours.extra_repr() == ref.extra_repr()
        if ours.elementwise_affine:
            with torch.no_grad():
                ref.weight.normal_()
        ours.load_state_dict(ref.state_dict())
        ref.load_state_dict(ours.state_dict())
        x = randn(3, 4, 256)
        torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)


def test_module_weight_offset_init():
    m = quack_cpp.nn.LayerNorm(64, device=DEVICE, weight_offset=1.0)
    assert torch.count_nonzero(m.weight) == 0  # w + 1 = 1 at init
    x = randn(5, 64)
    torch.testing.assert_close(m(x), F.layer_norm(x, (64,)), rtol=1e-5, atol=1e-5)


def test_module_cpu_and_float64_fall_back_to_torch():
    m = quack_cpp.nn.LayerNorm(64, dtype=torch.float64)
    x = torch.randn(5, 64, dtype=torch.float64)
    torch.testing.assert_close(m(x), F.layer_norm(x, (64,), m.weight, m.bias))


@cuda_only
def test_module_runs_our_kernel_on_cuda():
    m = quack_cpp.nn.LayerNorm(4096, device=DEVICE, dtype=bf16)
    x = randn(4, 4096, dtype=bf16, requires_grad=True)
    y = m(x)
    # The eager fast path's autograd node (or the custom op under QUACK_EAGER_CUSTOM_OP=1).
    assert ln_ops.layernorm_fwd.is_fast_node(y.grad_fn) or "quack_cpp" in y.grad_fn.name().lower()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        m(x.detach())
        torch.cuda.synchronize()
    names = " ".join(e.name for e in prof.events())
    assert "row_" in names and "LayerNorm" in names, names[:2000]


# --------------------------------------------------------------------------------------------
# Determinism, bad input, opcheck
# --------------------------------------------------------------------------------------------


@cuda_only
@pytest.mark.parametrize("M,N,dtype", [(8192, 4096, bf16), (4096, 65536, bf16), (1024, 8192, f32)])
def test_dweight_dbias_deterministic(M, N, dtype):
    x = randn(M, N, dtype=dtype)
    dy = randn(M, N, dtype=dtype)
    grads = []
    for _ in range(3):
        w = torch.ones(N, device=DEVICE, requires_grad=True)
        b = torch.zeros(N, device=DEVICE, requires_grad=True)
        quack_cpp.layernorm(x, w, b).backward(dy)
        grads.append((w.grad, b.grad))
    for gw, gb in grads[1:]:
        assert torch.equal(gw, grads[0][0]) and torch.equal(gb, grads[0][1])


@cuda_only
def test_bad_input():
    x = randn(4, 4096, dtype=bf16)
    with pytest.raises(ValueError, match="weight"):
        quack_cpp.layernorm(x, torch.ones(4095, device=DEVICE))
    with pytest.raises(ValueError, match="eps"):
        quack_cpp.layernorm(x, eps=-1.0)
    with pytest.raises(ValueError, match="weight_offset"):
        quack_cpp.layernorm(x, torch.ones(4096, device=DEVICE), weight_offset=float("inf"))
    with pytest.raises(ValueError, match="x"):
        quack_cpp.layernorm(x.to(torch.float64))
    with pytest.raises(ValueError, match="residual"):
        quack_cpp.layernorm(x, residual=randn(4, 4095, dtype=bf16))


@cuda_only
def test_opcheck():
    x = randn(33, 1000, dtype=bf16, requires_grad=True)
    w = randn(1000, scale=0.5, shift=1.0, requires_grad=True)
    b = randn(1000, scale=0.5, requires_grad=True)
    torch.library.opcheck(torch.ops.quack_cpp.layernorm_fwd.default,
                          (x, w, b, None, 1e-5, 0.0, bf16, None, True))
    h = x.detach()
    mean = h.float().mean(-1)
    rstd = torch.rsqrt(h.float().var(-1, unbiased=False) + 1e-5)
    dy = randn(33, 1000, dtype=bf16)
    torch.library.opcheck(torch.ops.quack_cpp.layernorm_bwd.default,
                          (h, w.detach(), dy, mean, rstd, None, 0.0, bf16, None, True, f32))
