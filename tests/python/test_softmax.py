"""quack_cpp.softmax and quack_cpp.log_softmax on the GPU against float64 torch, with the
tolerance rule of shared/cases/handed.md (error_lib <= 2*error_torch + atol; torch eager in the
same dtype).

Covers: shapes (rows 1 to 8192, N from 1 to 262144, chosen pairs), fp32/fp16/bf16, (..., N)
inputs and every ``dim`` (moved to the last axis), 0-d and 1-d inputs, strided inputs, rows with
-inf and rows of all -inf (NaN like torch), uniform rows (exactly 1/N), M = 0 and N = 0,
forward and backward through autograd (dy of every layout, stride 0 from .sum()), eager and
torch.compile(fullgraph=True), CUDA-graph capture, autocast (float32 out, as torch's), the fast
path against the custom op bit for bit, no host sync, opcheck, direct _C calls on NaN-poisoned
outputs, C07 (2 GPUs).

Skips without torch, quack_cpp or a CUDA GPU. QUACK_TEST_DEVICE=cpu runs the device-agnostic
tests against the CPU stand-ins (tests/python/cpu_stand_in.py).
"""

import os

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
sm_ops = pytest.importorskip("quack_cpp.softmax_ops")
reg = pytest.importorskip("quack_cpp._registrar")

from reference import assert_rule, poison_  # noqa: E402

DEVICE = os.environ.get("QUACK_TEST_DEVICE", "cuda")
if DEVICE == "cuda":
    pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
cuda_only = pytest.mark.skipif(DEVICE != "cuda", reason="checks CUDA itself")
STAND_IN = True  # QUACK_TEST_DEVICE=cpu runs this module on the CPU stand-ins (conftest.py)

f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
DTYPES = [f32, f16, bf16]
KINDS = {"softmax": (quack_cpp.softmax, torch.softmax),
         "log_softmax": (quack_cpp.log_softmax, torch.log_softmax)}


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def randn(*shape, dtype=f32, scale=2.0):
    return (torch.randn(*shape, device=DEVICE) * scale).to(dtype)


def run(fn, x, dy, dim=-1, f64=False):
    """y and dx of fn(x, dim) for upstream dy (None: no backward)."""
    xl = (x.detach().double() if f64 else x.detach().clone()).requires_grad_(True)
    y = fn(xl, dim)
    if dy is not None:
        y.backward(dy.double() if f64 else dy)
    return y.detach(), xl.grad


def check(kind, x, dy, dim=-1):
    ours, ref = KINDS[kind]
    y, dx = run(ours, x, dy, dim)
    y_ref, dx_ref = run(ref, x, dy, dim, f64=True)
    y_t, dx_t = run(ref, x, dy, dim)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert_rule("y", y, y_ref, y_t)
    if dy is not None:
        assert dx.dtype == x.dtype
        assert_rule("dx", dx, dx_ref, dx_t)
    return y, dx


SHAPES = [(7, 1), (1, 127), (7, 127), (257, 500), (8192, 127), (257, 4096), (64, 32768),
          (7, 65536), (4, 131072), (3, 262144)]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("M,N", SHAPES)
def test_fwd_bwd(M, N, dtype, kind):
    check(kind, randn(M, N, dtype=dtype), randn(M, N, dtype=dtype))


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("shift", [100.0, 1000.0, -3000.0])
@pytest.mark.parametrize("N", [4096, 65536])
def test_offset_rows_fp32(N, shift, kind):
    """fp32 rows offset far from 0 (logits of a large scale): x − max is exact near the maximum,
    so the outputs keep torch's accuracy (log_softmax as (x − m) − ln s: x − (m + ln s) loses
    ~30× torch's error at an offset of 1000)."""
    check(kind, randn(64, N) + shift, randn(64, N))


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2, -3])
def test_dim_moves(dim, kind):
    x = randn(6, 33, 40, dtype=bf16)
    y, _ = check(kind, x, randn(6, 33, 40, dtype=bf16), dim)
    assert y.shape == x.shape


@pytest.mark.parametrize("kind", list(KINDS))
def test_1d_0d_and_dim_errors(kind):
    ours, ref = KINDS[kind]
    check(kind, randn(1000, dtype=f32), randn(1000, dtype=f32), 0)
    s = torch.tensor(3.0, device=DEVICE)
    assert ours(s).shape == ()
    torch.testing.assert_close(ours(s), ref(s, 0), rtol=0, atol=1e-6)
    with pytest.raises(IndexError):
        ours(randn(4, 5), 2)
    with pytest.raises(IndexError):
        ours(s, 1)
    # dim must be an int, as torch's: -1.0 == -1 ran along the last axis, 1.0 along axis 1.
    for bad in (-1.0, 1.0, True):
        with pytest.raises(TypeError, match=f"{kind}: dim is {bad!r} \\({type(bad).__name__}\\),"
                           " expected an int"):
            ours(randn(4, 5), bad)
    np = pytest.importorskip("numpy")
    check(kind, randn(4, 5, dtype=f32), randn(4, 5, dtype=f32), np.int64(0))


@pytest.mark.parametrize("layout", ["row_strided", "col_strided", "transposed"])
def test_strided_input_and_dy(layout):
    if layout == "row_strided":
        x = randn(96, 1100, dtype=bf16)[:, 50:1074]
    elif layout == "col_strided":
        x = randn(96, 2048, dtype=bf16)[:, ::2]
    else:
        x = randn(1024, 96, dtype=bf16).t()
    assert not x.is_contiguous()
    for kind in KINDS:
        check(kind, x, randn(*x.shape, dtype=bf16).t().contiguous().t()
              if layout == "transposed" else randn(*x.shape, dtype=bf16))


@pytest.mark.parametrize("kind", list(KINDS))
def test_sum_backward_stride0_dy(kind):
    ours, ref = KINDS[kind]
    x = randn(64, 4096, dtype=bf16)
    xl = x.clone().requires_grad_(True)
    ours(xl, -1).sum().backward()  # dy expanded (stride 0)
    x64 = x.double().requires_grad_(True)
    ref(x64, -1).sum().backward()
    xt = x.clone().requires_grad_(True)
    ref(xt, -1).sum().backward()
    assert_rule("dx", xl.grad, x64.grad, xt.grad)


@pytest.mark.parametrize("kind", list(KINDS))
def test_neg_inf_rows(kind):
    ours, ref = KINDS[kind]
    x = randn(6, 1024, dtype=f32)
    x[0, :512] = float("-inf")
    x[1, 5] = float("-inf")
    x[2] = float("-inf")  # all -inf: NaN, as torch
    x[3, :-1] = float("-inf")  # one finite element: softmax 1, log_softmax 0
    y = ours(x)
    want = ref(x.double(), -1)
    assert torch.isnan(y[2]).all() and torch.isnan(want[2]).all()
    keep = [0, 1, 3, 4, 5]
    assert torch.equal(torch.isinf(y[keep]), torch.isinf(want[keep]))
    finite = torch.isfinite(want[keep])
    assert_rule("y", y[keep][finite], want[keep][finite], ref(x, -1)[keep][finite])


def test_uniform_rows_exact():
    for N in (1024, 4096, 128):
        x = torch.full((8, N), 0.7, device=DEVICE)
        assert torch.equal(quack_cpp.softmax(x), torch.full_like(x, 1.0 / N))
    x = torch.full((8, 1000), -3.0, device=DEVICE, dtype=bf16)  # 1/1000: one bf16 ulp
    torch.testing.assert_close(quack_cpp.softmax(x).float(),
                               torch.full((8, 1000), 1e-3, device=DEVICE), rtol=2**-8, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_single_finite_element_exact(dtype):
    """A row of one element, or with one finite element: softmax exactly 1, log_softmax
    exactly 0 (ln s = 0 for s = 1), gradients exactly 0 for dy = 1."""
    x = randn(6, 1, dtype=dtype)
    assert torch.equal(quack_cpp.softmax(x), torch.ones_like(x))
    assert torch.equal(quack_cpp.log_softmax(x), torch.zeros_like(x))
    x = torch.full((4, 4096), float("-inf"), device=DEVICE, dtype=dtype)
    x[torch.arange(4), torch.tensor([0, 17, 4000, 4095])] = torch.tensor(
        [3.0, -2.0, 0.5, 100.0], device=DEVICE, dtype=dtype)
    ls = quack_cpp.log_softmax(x)
    assert torch.equal(ls[torch.isfinite(x)], torch.zeros(4, device=DEVICE, dtype=dtype))
    assert torch.equal(quack_cpp.softmax(x), torch.isfinite(x).to(dtype))


@pytest.mark.parametrize("kind", list(KINDS))
def test_empty(kind):
    ours, _ = KINDS[kind]
    for shape in ((0, 1000), (3, 0, 64), (5, 0)):
        x = torch.randn(*shape, device=DEVICE, dtype=bf16, requires_grad=True)
        y = ours(x)
        assert y.shape == x.shape
        y.sum().backward()
        assert x.grad.shape == x.shape


# --------------------------------------------------------------------------------------------
# torch.compile, CUDA graphs, autocast, fast path
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("dim", [-1, 1])
def test_compile_fullgraph(kind, dim):
    ours, _ = KINDS[kind]
    x = randn(4, 256, 1024, dtype=bf16)
    dy = randn(4, 256, 1024, dtype=bf16)
    torch._dynamo.reset()
    compiled = torch.compile(ours, fullgraph=True, dynamic=False)
    y, dx = run(compiled, x, dy, dim)
    ye, dxe = run(ours, x, dy, dim)
    ref = KINDS[kind][1]
    assert_rule("y", y, run(ref, x, None, dim, f64=True)[0], run(ref, x, None, dim)[0])
    assert_rule("dx", dx, run(ref, x, dy, dim, f64=True)[1], run(ref, x, dy, dim)[1])
    if dim == -1:  # the same kernels on the same layouts: the same bits
        assert torch.equal(y, ye) and torch.equal(dx, dxe)


def test_compile_in_a_graph_with_torch_ops():
    def f(q, k):
        return quack_cpp.softmax(q @ k.transpose(-1, -2) * 0.125, -1).sum(-1)

    q = randn(2, 64, 32, dtype=f32).requires_grad_(True)
    k = randn(2, 64, 32, dtype=f32)
    torch._dynamo.reset()
    out = torch.compile(f, fullgraph=True, dynamic=False)(q, k)
    out.sum().backward()
    q2 = q.detach().clone().requires_grad_(True)
    torch.softmax(q2 @ k.transpose(-1, -2) * 0.125, -1).sum(-1).sum().backward()
    torch.testing.assert_close(out, torch.ones_like(out), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(q.grad, q2.grad, rtol=1e-4, atol=1e-5)


@cuda_only
@pytest.mark.parametrize("kind", list(KINDS))
def test_cuda_graph_capture_replay(kind):
    ours, _ = KINDS[kind]
    x = randn(512, 4096, dtype=bf16).requires_grad_(True)
    dy = randn(512, 4096, dtype=bf16)

    def step():
        y = ours(x, -1)
        y.backward(dy)
        return y

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            x.grad = None
            step()
    torch.cuda.current_stream().wait_stream(s)
    x.grad = None
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y_s = step()
    with torch.no_grad():
        x.copy_(randn(512, 4096, dtype=bf16))
        dy.copy_(randn(512, 4096, dtype=bf16))
    g.replay()
    torch.cuda.synchronize()
    y, dx = run(ours, x, dy)
    assert torch.equal(y_s, y) and torch.equal(x.grad, dx)


@cuda_only
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("x_dtype", [f32, bf16, f16], ids=str)
def test_autocast_matches_torch(kind, x_dtype):
    """Under CUDA autocast torch's softmax computes in float32 (an op of autocast's float32
    list: a 16-bit input is cast first) and returns float32; ours does the same without the
    cast copy; the gradient comes back in x's dtype."""
    ours, ref = KINDS[kind]
    x = randn(64, 2048, dtype=x_dtype)
    xq, xt = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    with torch.autocast("cuda", dtype=bf16):
        yq, yt = ours(xq, -1), ref(xt, -1)
    assert yq.dtype == yt.dtype == f32
    dy = randn(64, 2048, dtype=f32)
    yq.backward(dy)
    yt.backward(dy)
    assert xq.grad.dtype == xt.grad.dtype == x_dtype
    x64 = x.double().requires_grad_(True)
    ref(x64, -1).backward(dy.double())
    assert_rule("y", yq, ref(x.double(), -1), yt, dtype=f32)
    assert_rule("dx", xq.grad, x64.grad, xt.grad, dtype=x_dtype)


@cuda_only
@pytest.mark.parametrize("cpp", [True, False], ids=["cpp_fast_path", "python_fast_path"])
def test_fast_path_matches_custom_op(monkeypatch, cpp):
    if cpp and sm_ops.softmax_fwd.eager is None:
        pytest.skip("quack_cpp._torch not built")
    monkeypatch.setattr(reg, "CPP_EAGER", cpp)

    def go():
        torch.manual_seed(1)
        res = []
        for kind, (ours, _) in KINDS.items():
            x = randn(3, 100, 1024, dtype=bf16).requires_grad_(True)
            y = ours(x, 1)
            base = y._base if y._base is not None else y
            res.append((sm_ops.softmax_fwd.is_fast_node(base.grad_fn)
                        or sm_ops.log_softmax_fwd.is_fast_node(base.grad_fn), y.detach()))
            y.backward(randn(3, 100, 1024, dtype=bf16))
            res.append((None, x.grad))
        return res

    fast = go()
    monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", True)
    slow = go()
    for (fa, a), (fb, b) in zip(fast, slow):
        assert fa in (None, True) and fb in (None, False)
        assert torch.equal(a, b)


@cuda_only
def test_no_host_sync():
    x = randn(64, 4096, dtype=bf16).requires_grad_(True)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for ours, _ in KINDS.values():
            ours(x, 0).sum().backward()
            ours(x, -1).backward(torch.ones_like(x))
    finally:
        torch.cuda.set_sync_debug_mode(0)


def test_bad_input():
    with pytest.raises(ValueError, match="x has dtype float64"):
        quack_cpp.softmax(randn(4, 8).double())
    with pytest.raises(ValueError, match="x has dtype int64"):
        quack_cpp.log_softmax(torch.ones(4, 8, dtype=torch.int64, device=DEVICE))


@cuda_only
def test_bad_device():
    with pytest.raises(ValueError, match="x is on cpu"):
        quack_cpp.softmax(torch.randn(4, 8))


@pytest.mark.parametrize("kind", list(KINDS))
def test_opcheck(kind):
    fwd = getattr(torch.ops.quack_cpp, f"{kind}_fwd").default
    bwd = getattr(torch.ops.quack_cpp, f"{kind}_bwd").default
    x = randn(37, 1000, dtype=bf16)
    torch.library.opcheck(fwd, (x, bf16))
    torch.library.opcheck(fwd, (x, f32))
    y = KINDS[kind][0](x)
    torch.library.opcheck(bwd, (y, randn(37, 1000, dtype=bf16), bf16))


@cuda_only
@pytest.mark.parametrize("kind", list(KINDS))
def test_c_api_poisoned_outputs(kind):
    from quack_cpp._registrar import stream, tensor_arg

    _, ref = KINDS[kind]
    T = lambda a: tensor_arg(a, "test", "t")  # noqa: E731
    x = randn(257, 4096, dtype=bf16)
    y = poison_(torch.empty(257, 4096, device=DEVICE, dtype=f32))  # bf16 x, fp32 out
    getattr(quack_cpp._C, f"{kind}_fwd")(T(x), T(y), stream(x))
    assert_rule("y", y, ref(x.double(), -1), ref(x.float(), -1), dtype=f32)
    dy = randn(257, 4096, dtype=f32)
    dx = poison_(torch.empty(257, 4096, device=DEVICE, dtype=bf16))
    getattr(quack_cpp._C, f"{kind}_bwd")(T(y), T(dy), T(dx), stream(x))
    x64 = x.double().requires_grad_(True)
    ref(x64, -1).backward(dy.double())
    xt = x.float().requires_grad_(True)
    ref(xt, -1).backward(dy)
    assert_rule("dx", dx, x64.grad, xt.grad.to(bf16), dtype=bf16)


def _two_gpus():
    return DEVICE == "cuda" and torch.cuda.is_available() and torch.cuda.device_count() >= 2


@pytest.mark.skipif(not _two_gpus(), reason="C07 needs 2 GPUs")
@pytest.mark.parametrize("kind", list(KINDS))
def test_c07_non_current_device(kind):
    ours, _ = KINDS[kind]
    torch.cuda.set_device(0)
    x0 = randn(8, 4096, dtype=bf16)
    dy0 = randn(8, 4096, dtype=bf16)
    y0, dx0 = run(ours, x0, dy0)
    y1, dx1 = run(ours, x0.to("cuda:1"), dy0.to("cuda:1"))
    assert torch.cuda.current_device() == 0
    assert y1.device == dx1.device == torch.device("cuda:1")
    assert torch.equal(y1.cpu(), y0.cpu()) and torch.equal(dx1.cpu(), dx0.cpu())
    s1 = torch.cuda.Stream(device="cuda:1")
    x1 = x0.to("cuda:1")
    s1.wait_stream(torch.cuda.current_stream("cuda:1"))
    with torch.cuda.stream(s1):
        y = ours(x1)
    torch.cuda.current_stream("cuda:1").wait_stream(s1)
    assert torch.equal(y.cpu(), y0.cpu()) and torch.cuda.current_device() == 0
