"""quack_cpp.rmsnorm on the GPU against a float64 reference, with the tolerance rule of
shared/cases/handed.md (error_lib <= 2*error_torch + atol, torch eager in the same dtype).

Covers: shapes (M in {1, 7, 257, 8192}, N in {1, 127, 500, 4096, 65536, 262144}, chosen pairs),
dtypes fp32/fp16/bf16 with weight fp32 or x's dtype, residual / prenorm / residual_dtype /
out_dtype / bias, strided x, eager and torch.compile(fullgraph=True), backward through
autograd, cases C01 (dy layouts), C02 (M = 0), C07 (non-current device, 2 GPUs), CUDA-graph
capture and replay, bad input, determinism of dweight, direct _C calls on NaN-poisoned
outputs, and opcheck of the custom ops.

Skips without torch, quack_cpp or a CUDA GPU. QUACK_TEST_DEVICE=cpu runs the device-agnostic
tests against CPU stand-ins of the kernels (tests/python/cpu_stand_in.py): a self-check of
this file, not of the kernels.
"""

import os

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
ops = pytest.importorskip("quack_cpp.ops")
from quack_cpp._registrar import tensor_arg  # noqa: E402

from reference import (  # noqa: E402
    C01_LAYOUTS,
    assert_rule,
    c01_dy,
    compare_runs,
    poison_,
    ref_rmsnorm,
    run,
    torch_rmsnorm,
)

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


def randn(*shape, dtype=f32, scale=1.0, shift=0.0):
    return (torch.randn(*shape, device=DEVICE) * scale + shift).to(dtype)


def lib_rmsnorm(x, w, b, r, eps, prenorm=False, residual_dtype=None, out_dtype=None):
    return quack_cpp.rmsnorm(x, w, b, r, eps=eps, prenorm=prenorm,
                             residual_dtype=residual_dtype, out_dtype=out_dtype)


def check_all(x, w=None, b=None, r=None, dy=None, dr=None, fn=lib_rmsnorm, **kw):
    """Runs lib (fn), torch in the same dtypes and the float64 reference; applies the rule."""
    lib = run(fn, x, w, b, r, dy=dy, dr=dr, **kw)
    strip = lambda t: None if t is None else t.detach()
    args = (strip(x), strip(w), strip(b), strip(r))
    tch = run(torch_rmsnorm, *args, dy=dy, dr=dr, **kw)
    ref = run(ref_rmsnorm, *args, dy=dy, dr=dr, f64=True, **kw)
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
    x = randn(M, N, dtype=dtype)
    w = randn(N, dtype=f32 if wdtype == "f32" else dtype, scale=0.5, shift=1.0)
    dy = randn(M, N, dtype=dtype)
    if N == 1:
        # One element per row: dx = rstd*g*(1 - xhat^2) with 1 - xhat^2 ~ eps/x^2, a
        # cancellation every fp32 implementation pays; compare the rest by the rule and dx
        # against an absolute bound.
        lib = run(lib_rmsnorm, x, w, dy=dy, eps=1e-6)
        ref = run(ref_rmsnorm, x, w, dy=dy, eps=1e-6, f64=True)
        tch = run(torch_rmsnorm, x, w, dy=dy, eps=1e-6)
        compare_runs(lib, ref, tch, dtype, keys=("out", "dw"))
        assert_rule("dx", lib["dx"], ref["dx"], None, rtol_no_torch=1e-3)
        return
    check_all(x, w, dy=dy, eps=1e-6)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_no_weight_3d(dtype):
    x = randn(4, 33, 1024, dtype=dtype)
    check_all(x, dy=randn(4, 33, 1024, dtype=dtype), eps=1e-5)


# --------------------------------------------------------------------------------------------
# Residual, prenorm, residual_dtype, out_dtype, bias
# --------------------------------------------------------------------------------------------

RES_CASES = [
    # x dtype, weight dtype, residual tensor dtype (None: none), bias, prenorm,
    # residual_dtype argument, out_dtype
    (bf16, f32, bf16, False, True, None, None),
    (bf16, f32, bf16, False, False, None, None),   # d(residual) also with prenorm=False
    (bf16, f32, f32, True, True, None, None),      # fp32 residual stream
    (bf16, f32, None, False, True, f32, None),     # residual_dtype fp32 from bf16 x
    (bf16, f32, bf16, False, True, f32, None),     # bf16 residual, fp32 residual_out
    (f16, f16, f16, True, True, None, None),
    (f32, f32, f32, True, False, None, None),
    (f32, f32, f32, True, True, None, None),
    (bf16, bf16, None, False, False, None, f32),   # out_dtype fp32
    (bf16, f32, bf16, True, True, None, f32),
    (f16, f32, None, True, False, None, None),
]


@pytest.mark.parametrize("shape", [(257, 4096), (3, 11, 1000), (7, 65536)], ids=str)
@pytest.mark.parametrize("case", RES_CASES, ids=lambda c: "-".join(map(str, c)).replace("torch.", ""))
def test_residual_prenorm(case, shape):
    dtype, wdtype, rdtype, bias, prenorm, rd_arg, out_dtype = case
    N = shape[-1]
    x = randn(*shape, dtype=dtype)
    w = randn(N, dtype=wdtype, scale=0.5, shift=1.0)
    b = randn(N, dtype=wdtype, scale=0.1) if bias else None
    r = randn(*shape, dtype=rdtype) if rdtype is not None else None
    dy = randn(*shape, dtype=out_dtype or dtype)
    res_out_dtype = rd_arg or (rdtype or dtype)
    dr = randn(*shape, dtype=res_out_dtype) if prenorm else None
    lib, _ = check_all(x, w, b, r, dy=dy, dr=dr, eps=1e-6, prenorm=prenorm,
                       residual_dtype=rd_arg, out_dtype=out_dtype)
    assert lib["out"].dtype == (out_dtype or dtype)
    if prenorm:
        assert lib["residual_out"].dtype == res_out_dtype
    if r is not None:
        assert lib["dr"] is not None and lib["dr"].dtype == r.dtype


def test_prenorm_no_residual_is_x():
    x = randn(8, 512, dtype=bf16)
    out, res = quack_cpp.rmsnorm(x, prenorm=True)
    assert res is x
    out, res = quack_cpp.rmsnorm(x, prenorm=True, residual_dtype=f32)
    assert res.dtype == f32 and torch.equal(res, x.float())


def test_only_residual_out_used():
    x = randn(64, 1024, dtype=bf16).requires_grad_(True)
    r = randn(64, 1024, dtype=bf16).requires_grad_(True)
    w = randn(1024, scale=0.5, shift=1.0).requires_grad_(True)
    _, h = quack_cpp.rmsnorm(x, w, residual=r, prenorm=True)
    dr = randn(64, 1024, dtype=bf16)
    h.backward(dr)
    assert torch.equal(x.grad, dr) and torch.equal(r.grad, dr)
    assert torch.count_nonzero(w.grad) == 0


def test_strided_x_keeps_row_stride():
    from torch.utils._python_dispatch import TorchDispatchMode

    base = randn(8, 64, 576, dtype=bf16).requires_grad_(True)
    x = base[..., :512]
    w = randn(512, scale=0.5, shift=1.0)
    rbase = randn(8, 64, 640, dtype=bf16)
    r = rbase[..., 64:576]
    seen = []

    class Spy(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.quack_cpp.rmsnorm_fwd.default:
                seen.append((args[0].stride(), args[3].stride()))
            return func(*args, **(kwargs or {}))

    with Spy():
        quack_cpp.rmsnorm(x.detach(), w, residual=r)
    assert seen == [((576, 1), (640, 1))], seen  # flattened as views: no copy
    dy = randn(8, 64, 512, dtype=bf16)
    check_all(x, w, None, r, dy=dy, dr=randn(8, 64, 512, dtype=bf16), eps=1e-6, prenorm=True)


def test_rstd_output():
    x = randn(300, 2048, dtype=bf16)
    out, _, rstd = torch.ops.quack_cpp.rmsnorm_fwd(x, None, None, None, 1e-6, 0.0, bf16, None, True)
    ref = torch.rsqrt(x.double().pow(2).mean(-1) + 1e-6)
    assert_rule("rstd", rstd, ref, None, rtol_no_torch=1e-5)


# --------------------------------------------------------------------------------------------
# torch.compile(fullgraph=True)
# --------------------------------------------------------------------------------------------

COMPILE_CASES = [
    ((4, 256, 4096), bf16, f32, None, False, False, None),
    ((257, 1000), f32, f32, f32, True, True, None),
    ((8, 128, 2048), bf16, f32, bf16, False, True, f32),
    ((2, 1024, 256), bf16, f32, bf16, False, False, None),
]


@pytest.mark.parametrize("case", COMPILE_CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_compile_fullgraph(case):
    shape, dtype, wdtype, rdtype, bias, prenorm, rd_arg = case
    N = shape[-1]
    x = randn(*shape, dtype=dtype)
    w = randn(N, dtype=wdtype, scale=0.5, shift=1.0)
    b = randn(N, dtype=wdtype, scale=0.1) if bias else None
    r = randn(*shape, dtype=rdtype) if rdtype is not None else None
    dy = randn(*shape, dtype=dtype)
    dr = randn(*shape, dtype=rd_arg or rdtype or dtype) if prenorm else None
    torch._dynamo.reset()  # each case compiles afresh (no recompile limit across cases)
    compiled = torch.compile(lib_rmsnorm, fullgraph=True, dynamic=False)
    lib, _ = check_all(x, w, b, r, dy=dy, dr=dr, fn=compiled, eps=1e-6, prenorm=prenorm,
                       residual_dtype=rd_arg)
    eager = run(lib_rmsnorm, x, w, b, r, dy=dy, dr=dr, eps=1e-6, prenorm=prenorm,
                residual_dtype=rd_arg)
    # Same kernels on the same inputs (dy may arrive with other strides: general path).
    for k in ("out", "residual_out"):
        if eager[k] is not None:
            assert torch.equal(lib[k], eager[k]), k


def test_compile_sum_backward_and_module():
    # C01's trigger under compile: the dy of y.sum() is an expanded (stride-0) tensor.
    m = quack_cpp.nn.RMSNorm(256, eps=1e-6, device=DEVICE)
    cm = torch.compile(m, fullgraph=True, dynamic=False)
    x = randn(2, 1024, 256, dtype=bf16).requires_grad_(True)
    cm(x).sum().backward()
    ref = run(ref_rmsnorm, x.detach(), m.weight.detach(), dy=torch.ones(2, 1024, 256,
              device=DEVICE), eps=1e-6, f64=True)
    tch = run(torch_rmsnorm, x.detach(), m.weight.detach(), dy=torch.ones(2, 1024, 256,
              device=DEVICE, dtype=bf16), eps=1e-6)
    assert_rule("dx", x.grad, ref["dx"], tch["dx"], dtype=bf16)
    assert_rule("dw", m.weight.grad, ref["dw"], tch["dw"], dtype=bf16)


# --------------------------------------------------------------------------------------------
# C01: backward with non-contiguous upstream gradient
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", C01_LAYOUTS)
def test_c01_dy_layouts(layout):
    shape = (2048, 256) if layout == "transposed" else (2, 1024, 256)
    x = randn(*shape, dtype=bf16)
    w = torch.ones(256, device=DEVICE)
    dy = c01_dy(layout, shape, DEVICE)
    if layout == "expanded":  # the real trigger: y.sum().backward()
        xl = x.clone().requires_grad_(True)
        wl = w.clone().requires_grad_(True)
        quack_cpp.rmsnorm(xl, wl, eps=1e-6).sum().backward()
        lib = dict(dx=xl.grad, dw=wl.grad)
    else:
        assert not dy.is_contiguous()
        lib = run(lib_rmsnorm, x, w, dy=dy, eps=1e-6)
    ref = run(ref_rmsnorm, x, w, dy=dy, eps=1e-6, f64=True)
    tch = run(torch_rmsnorm, x, w, dy=dy.contiguous(), eps=1e-6)
    compare_runs(lib, ref, tch, bf16, keys=("dx", "dw"))
    if layout == "expanded":
        # dy = 1, w = 1: dx_i = rstd*(1 - xhat_i*mean(xhat)), dw = sum_rows xhat.
        x64 = x.double()
        rstd = torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6)
        xhat = x64 * rstd
        dx = rstd * (1 - xhat * xhat.mean(-1, keepdim=True))
        assert_rule("dx (closed form)", lib["dx"], dx, tch["dx"], dtype=bf16)
        assert_rule("dw (closed form)", lib["dw"], xhat.reshape(-1, 256).sum(0), tch["dw"],
                    dtype=bf16)


# --------------------------------------------------------------------------------------------
# C02: M = 0
# --------------------------------------------------------------------------------------------


def test_c02_zero_rows():
    m = quack_cpp.nn.RMSNorm(2520, eps=1e-5, device=DEVICE, dtype=bf16)
    x = torch.randn(3, 0, 2520, device=DEVICE, dtype=bf16, requires_grad=True)
    y = m(x)
    assert y.shape == (3, 0, 2520) and y.dtype == bf16
    y.sum().backward()
    assert x.grad.shape == (3, 0, 2520)
    assert m.weight.grad is not None and m.weight.grad.shape == (2520,)
    assert torch.count_nonzero(m.weight.grad) == 0


def test_c02_zero_rows_bias_residual_prenorm():
    x = torch.randn(0, 4096, device=DEVICE, dtype=bf16, requires_grad=True)
    r = torch.randn(0, 4096, device=DEVICE, dtype=bf16, requires_grad=True)
    w = torch.randn(4096, device=DEVICE, requires_grad=True)
    b = torch.randn(4096, device=DEVICE, requires_grad=True)
    y, h = quack_cpp.rmsnorm(x, w, b, r, prenorm=True)
    assert y.shape == (0, 4096) and h.shape == (0, 4096)
    (y.sum() + h.sum()).backward()
    assert x.grad.shape == (0, 4096) and r.grad.shape == (0, 4096)
    assert torch.equal(w.grad, torch.zeros_like(w)) and torch.equal(b.grad, torch.zeros_like(b))


def test_zero_columns():
    """N = 0 with rows (nn.RMSNorm(0), as torch): empty output and gradients, the residual
    stream too."""
    x = torch.randn(4, 0, device=DEVICE, dtype=bf16, requires_grad=True)
    r = torch.randn(4, 0, device=DEVICE, dtype=bf16, requires_grad=True)
    w = torch.randn(0, device=DEVICE, requires_grad=True)
    y, h = quack_cpp.rmsnorm(x, w, None, r, prenorm=True)
    assert y.shape == (4, 0) and h.shape == (4, 0)
    (y.sum() + h.sum()).backward()
    assert x.grad.shape == (4, 0) and r.grad.shape == (4, 0) and w.grad.shape == (0,)
    m = quack_cpp.nn.RMSNorm(0, device=DEVICE)
    assert m(torch.randn(2, 3, 0, device=DEVICE)).shape == (2, 3, 0)


@cuda_only
def test_c02_no_deferred_error():
    # "invalid configuration argument" would surface at the next CUDA call.
    x = torch.randn(0, 2520, device=DEVICE, requires_grad=True)
    w = torch.randn(2520, device=DEVICE, requires_grad=True)
    quack_cpp.rmsnorm(x, w).sum().backward()
    torch.cuda.synchronize()
    torch.ones(4, device=DEVICE).sum().item()


# --------------------------------------------------------------------------------------------
# CUDA graphs
# --------------------------------------------------------------------------------------------


@cuda_only
def test_cuda_graph_capture_replay():
    M, N = 512, 4096
    x = randn(M, N, dtype=bf16).requires_grad_(True)
    r = randn(M, N, dtype=bf16).requires_grad_(True)
    w = randn(N, scale=0.5, shift=1.0).requires_grad_(True)
    dy = randn(M, N, dtype=bf16)
    dr = randn(M, N, dtype=bf16)

    def step():
        y, h = quack_cpp.rmsnorm(x, w, residual=r, prenorm=True)
        torch.autograd.backward([y, h], [dy, dr])
        return y, h

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # warm-up (allocator, function attributes, occupancy caches)
            x.grad = r.grad = w.grad = None
            step()
    torch.cuda.current_stream().wait_stream(s)
    x.grad = r.grad = w.grad = None
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y_s, h_s = step()
    # New inputs, replay, compare with eager on the same inputs.
    with torch.no_grad():
        x.copy_(randn(M, N, dtype=bf16))
        r.copy_(randn(M, N, dtype=bf16))
        w.copy_(randn(N, scale=0.5, shift=1.0))
        dy.copy_(randn(M, N, dtype=bf16))
        dr.copy_(randn(M, N, dtype=bf16))
    g.replay()
    torch.cuda.synchronize()
    got = dict(out=y_s.clone(), residual_out=h_s.clone(), dx=x.grad.clone(),
               dr=r.grad.clone(), dw=w.grad.clone())
    eager = run(lib_rmsnorm, x.detach(), w.detach(), None, r.detach(), dy=dy, dr=dr,
                eps=1e-6, prenorm=True)
    for k, v in got.items():
        assert torch.equal(v, eager[k]), k


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


@cuda_only
def test_bad_weight_length():
    x = randn(16, 4096, dtype=bf16)
    with pytest.raises(ValueError, match=r"weight has shape \(4095,\).*expected \(4096,\)"):
        quack_cpp.rmsnorm(x, randn(4095))
    with pytest.raises(ValueError, match="bias"):
        quack_cpp.rmsnorm(x, randn(4096), randn(4097))


@cuda_only
def test_bad_device_and_dtype():
    x = randn(16, 256, dtype=bf16)
    with pytest.raises(ValueError, match="x is on cpu"):
        quack_cpp.rmsnorm(x.cpu())
    with pytest.raises(ValueError, match="weight is on cpu"):
        quack_cpp.rmsnorm(x, torch.ones(256))
    with pytest.raises(ValueError, match="x has dtype float64"):
        quack_cpp.rmsnorm(x.double())
    with pytest.raises(ValueError, match="weight has dtype float64"):
        quack_cpp.rmsnorm(x, torch.ones(256, device=DEVICE, dtype=torch.float64))
    with pytest.raises(ValueError, match="x has dtype int32"):
        quack_cpp.rmsnorm(x.int())
    with pytest.raises(ValueError, match="eps"):
        quack_cpp.rmsnorm(x, eps=-1.0)
    with pytest.raises(ValueError, match="residual has shape"):
        quack_cpp.rmsnorm(x, residual=randn(16, 128, dtype=bf16))
    # The dispatcher's own error for a CPU tensor given to the CUDA-only op.
    with pytest.raises((NotImplementedError, RuntimeError)):
        torch.ops.quack_cpp.rmsnorm_fwd(x.cpu(), None, None, None, 1e-6, 0.0, bf16, None, False)


# --------------------------------------------------------------------------------------------
# Determinism
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("M,N,dtype", [(8192, 4096, bf16), (4096, 65536, bf16),
                                       (1000, 4096, f32), (257, 500, f16)])
def test_dweight_deterministic(M, N, dtype):
    x = randn(M, N, dtype=dtype)
    w = randn(N, scale=0.5, shift=1.0)
    b = randn(N, scale=0.1)
    dy = randn(M, N, dtype=dtype)
    a = run(lib_rmsnorm, x, w, b, dy=dy, eps=1e-6)
    c = run(lib_rmsnorm, x, w, b, dy=dy, eps=1e-6)
    for k in ("out", "dx", "dw", "db"):
        assert torch.equal(a[k], c[k]), k


# --------------------------------------------------------------------------------------------
# Direct _C calls: NaN-poisoned outputs, in-place, workspace
# --------------------------------------------------------------------------------------------


def _ref_tuple(t):
    return tensor_arg(t, "test", "t")


@cuda_only
@pytest.mark.parametrize("M,N,dtype", [(257, 4096, bf16), (33, 1000, f32), (7, 65536, f16)])
def test_c_api_poisoned_outputs(M, N, dtype):
    x = randn(M, N, dtype=dtype)
    r = randn(M, N, dtype=dtype)
    w = randn(N, scale=0.5, shift=1.0)
    b = randn(N, scale=0.1)
    out = poison_(torch.empty(M, N, device=DEVICE, dtype=dtype))
    h = poison_(torch.empty(M, N, device=DEVICE, dtype=f32))
    rstd = poison_(torch.empty(M, device=DEVICE))
    stream = torch.cuda.current_stream().cuda_stream
    T = _ref_tuple
    quack_cpp._C.rmsnorm_fwd(T(x), T(w), T(b), T(r), T(out), T(h), T(rstd), 1e-6, stream)
    ref_out, ref_h = ref_rmsnorm(x.double(), w.double(), b.double(), r.double(), 1e-6, True)
    ref_rstd = torch.rsqrt(ref_h.pow(2).mean(-1) + 1e-6)
    tch_out = torch_rmsnorm(x, w, b, r, 1e-6)
    assert_rule("out", out, ref_out, tch_out, dtype=dtype)
    assert_rule("residual_out", h, ref_h, None, rtol_no_torch=1e-6)
    assert_rule("rstd", rstd, ref_rstd, None, rtol_no_torch=1e-5)

    dy = randn(M, N, dtype=dtype)
    dres_out = randn(M, N, dtype=f32)
    dx = poison_(torch.empty(M, N, device=DEVICE, dtype=dtype))
    dres = poison_(torch.empty(M, N, device=DEVICE, dtype=f32))
    dw = poison_(torch.empty(N, device=DEVICE))
    db = poison_(torch.empty(N, device=DEVICE))
    args = (T(h), T(w), T(dy), T(rstd), T(dres_out), T(dx), T(dres), T(dw), T(db))
    ws_bytes = quack_cpp._C.rmsnorm_bwd_workspace_size(*args)
    assert ws_bytes > 0
    ws = torch.full((ws_bytes,), 0xFF, device=DEVICE, dtype=torch.uint8)  # NaN floats
    quack_cpp._C.rmsnorm_bwd(*args, ws.data_ptr(), ws_bytes, stream)
    h64 = h.double().requires_grad_(True)
    w64 = w.double().requires_grad_(True)
    b64 = b.double().requires_grad_(True)
    y64 = ref_rmsnorm(h64, w64, b64, None, 1e-6)
    torch.autograd.backward([y64, h64], [dy.double(), dres_out.double()])
    tch = run(torch_rmsnorm, h, w, b, dy=dy, eps=1e-6)
    assert_rule("dx", dx, h64.grad, None, dtype=dtype, rtol_no_torch=2e-2 if dtype != f32 else 1e-5)
    assert_rule("dresidual", dres, h64.grad, None, rtol_no_torch=1e-5)
    assert_rule("dw", dw, w64.grad, tch["dw"], dtype=dtype)
    assert_rule("db", db, b64.grad, tch["db"], dtype=dtype)
    # Too small a workspace is refused, naming it.
    with pytest.raises(ValueError, match="workspace"):
        quack_cpp._C.rmsnorm_bwd(*args, ws.data_ptr(), ws_bytes - 16, stream)


@cuda_only
def test_c_api_in_place_out_equals_x():
    x = randn(64, 4096)
    x0 = x.clone()
    stream = torch.cuda.current_stream().cuda_stream
    T = _ref_tuple
    quack_cpp._C.rmsnorm_fwd(T(x), None, None, None, T(x), None, None, 1e-6, stream)
    ref = ref_rmsnorm(x0.double(), None, None, None, 1e-6)
    assert_rule("out (in place)", x, ref, torch_rmsnorm(x0, None, None, None, 1e-6))


@cuda_only
def test_opcheck():
    x = randn(37, 1024, dtype=bf16)
    w = randn(1024, scale=0.5, shift=1.0).requires_grad_(True)
    r = randn(37, 1024, dtype=bf16)
    torch.library.opcheck(torch.ops.quack_cpp.rmsnorm_fwd.default,
                          (x, w, None, r, 1e-6, 0.0, bf16, bf16, True))
    torch.library.opcheck(torch.ops.quack_cpp.rmsnorm_fwd.default,
                          (x, w, None, None, 1e-6, 1.0, bf16, None, True))
    rstd = torch.rand(37, device=DEVICE) + 0.5
    dy = randn(37, 1024, dtype=bf16)
    torch.library.opcheck(torch.ops.quack_cpp.rmsnorm_bwd.default,
                          (x, w.detach(), dy, rstd, None, 0.0, bf16, None, True, None))
    torch.library.opcheck(torch.ops.quack_cpp.rmsnorm_bwd.default,
                          (x, w.detach(), dy, rstd, None, 1.0, bf16, None, True, None))


# --------------------------------------------------------------------------------------------
# weight_offset (Gemma's zero-centred weights: y = h * rstd * (w + offset))
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [1.0, -0.5])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("M,N", [(257, 4096), (7, 65536), (33, 127)])
def test_weight_offset(M, N, dtype, offset):
    def lib_fn(x, w, b, r, eps, prenorm, rd, od):
        return quack_cpp.rmsnorm(x, w, b, r, eps=eps, prenorm=prenorm, residual_dtype=rd,
                                 out_dtype=od, weight_offset=offset)

    def ref_fn(x, w, b, r, eps, prenorm, rd, od):
        return ref_rmsnorm(x, w + offset, b, r, eps, prenorm, rd, od)

    def tch_fn(x, w, b, r, eps, prenorm, rd, od):
        return torch_rmsnorm(x, w + offset, b, r, eps, prenorm, rd, od)

    x = randn(M, N, dtype=dtype)
    w = randn(N, scale=0.3)  # zero-centred
    r = randn(M, N, dtype=dtype)
    dy = randn(M, N, dtype=dtype)
    for res in (None, r):
        lib = run(lib_fn, x, w, None, res, dy=dy)
        ref = run(ref_fn, x, w, None, res, dy=dy, f64=True)
        tch = run(tch_fn, x, w, None, res, dy=dy)
        compare_runs(lib, ref, tch, dtype)


def test_weight_offset_without_weight_is_unused():
    x = randn(33, 4096, dtype=bf16)
    a = quack_cpp.rmsnorm(x, None, weight_offset=1.0)
    b = quack_cpp.rmsnorm(x, None)
    assert torch.equal(a, b)


def test_module_weight_offset():
    N = 1024
    m = quack_cpp.nn.RMSNorm(N, weight_offset=1.0, device=DEVICE)
    assert torch.count_nonzero(m.weight) == 0  # 1 - offset
    plain = quack_cpp.nn.RMSNorm(N, device=DEVICE)
    x = randn(4, 9, N)
    torch.testing.assert_close(m(x), plain(x), rtol=0, atol=0)
    # The torch fallback (CPU) adds the offset too.
    torch.testing.assert_close(m.cpu()(x.cpu()), plain.cpu()(x.cpu()), rtol=1e-6, atol=1e-6)


@cuda_only
def test_weight_offset_not_finite_is_value_error():
    x = randn(4, 1024)
    with pytest.raises(ValueError, match="weight_offset"):
        quack_cpp.rmsnorm(x, torch.ones(1024, device=DEVICE), weight_offset=float("nan"))


# --------------------------------------------------------------------------------------------
# AMP
# --------------------------------------------------------------------------------------------


@cuda_only
@pytest.mark.parametrize("x_dtype", [f32, bf16], ids=str)
def test_autocast_matches_torch_module(x_dtype):
    N = 2048
    qm = quack_cpp.nn.RMSNorm(N, device=DEVICE)
    tm = torch.nn.RMSNorm(N, device=DEVICE)
    with torch.no_grad():
        qm.weight.copy_(randn(N, scale=0.5, shift=1.0))
        tm.weight.copy_(qm.weight)
    x = randn(16, 64, N, dtype=x_dtype)
    xq = x.clone().requires_grad_(True)
    xt = x.clone().requires_grad_(True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        yq = qm(xq)
        yt = tm(xt)
    assert yq.dtype == yt.dtype == x_dtype
    dy = randn(*yq.shape, dtype=yq.dtype)
    yq.backward(dy)
    yt.backward(dy)
    assert xq.grad.dtype == xt.grad.dtype and qm.weight.grad.dtype == tm.weight.grad.dtype
    eps = torch.finfo(torch.float32).eps
    ref = run(ref_rmsnorm, x, qm.weight.detach(), dy=dy, eps=eps, f64=True)
    assert_rule("out", yq, ref["out"], yt, dtype=x_dtype)
    assert_rule("dx", xq.grad, ref["dx"], xt.grad, dtype=x_dtype)
    assert_rule("dw", qm.weight.grad, ref["dw"], tm.weight.grad, dtype=x_dtype)


# --------------------------------------------------------------------------------------------
# Streams and devices
# --------------------------------------------------------------------------------------------


@cuda_only
def test_side_stream():
    x = randn(1024, 4096, dtype=bf16)
    w = randn(4096, scale=0.5, shift=1.0)
    expected = quack_cpp.rmsnorm(x, w)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        x2 = x * 1  # produced on s: a launch on another stream would race with it
        y = quack_cpp.rmsnorm(x2, w)
    torch.cuda.current_stream().wait_stream(s)
    assert torch.equal(y, expected)


def _two_gpus():
    return DEVICE == "cuda" and torch.cuda.is_available() and torch.cuda.device_count() >= 2


@pytest.mark.skipif(not _two_gpus(), reason="C07 needs 2 GPUs")
def test_c07_non_current_device():
    torch.cuda.set_device(0)
    torch.manual_seed(7)
    x0 = torch.randn(8, 4096, device="cuda:0").bfloat16()
    w0 = torch.randn(4096, device="cuda:0")
    r0 = torch.randn(8, 4096, device="cuda:0").bfloat16()
    dy0 = torch.randn(8, 4096, device="cuda:0").bfloat16()
    dr0 = torch.randn(8, 4096, device="cuda:0").bfloat16()

    def both(dev):
        x, w, r, dy, dr = (t.to(dev) for t in (x0, w0, r0, dy0, dr0))
        res = run(lib_rmsnorm, x, w, None, r, dy=dy, dr=dr, eps=1e-6, prenorm=True)
        return res

    on0 = both("cuda:0")
    on1 = both("cuda:1")
    assert torch.cuda.current_device() == 0
    for k, v in on1.items():
        if v is None:
            continue
        assert v.device == torch.device("cuda:1"), k
        assert torch.equal(v.cpu(), on0[k].cpu()), k
    # A side stream on cuda:1, current device still 0.
    s1 = torch.cuda.Stream(device="cuda:1")
    x1, w1 = x0.to("cuda:1"), w0.to("cuda:1")
    s1.wait_stream(torch.cuda.current_stream("cuda:1"))
    with torch.cuda.stream(s1):
        y1 = quack_cpp.rmsnorm(x1, w1)
    torch.cuda.current_stream("cuda:1").wait_stream(s1)
    assert torch.cuda.current_device() == 0
    assert torch.equal(y1.cpu(), quack_cpp.rmsnorm(x0, w0).cpu())
    # Mixed devices: a clear error naming the argument.
    with pytest.raises(ValueError, match="weight is on cuda:0"):
        quack_cpp.rmsnorm(x1, w0)
    torch.cuda.synchronize("cuda:0")
    torch.cuda.synchronize("cuda:1")
