"""quack_cpp.topk on the GPU against torch.topk and the documented order (issue 19).

Values must equal torch.topk's exactly (softmax off); indices must equal a stable sort's
(``torch.sort(stable=True)``: NaN largest, equal values lower index first: our documented
rule; torch.topk leaves ties unspecified). Covers shapes from N = 1 to 131072 (k = 1, k = N,
odd N, the sort path k > 256), dtypes fp32/fp16/bf16, largest and smallest, dim != -1 and 3-D
x, NaN / -inf / duplicates, int32 indices and values_dtype, the fused softmax (True and "pre")
against torch in float64, the backward through autograd against float64 autograd,
torch.compile(fullgraph=True), CUDA-graph capture, bad input and opcheck.

Skips without torch, quack_cpp or a CUDA GPU. QUACK_TEST_DEVICE=cpu runs the device-agnostic
tests against CPU stand-ins of the kernels (tests/python/cpu_stand_in.py): a self-check of this
file, not of the kernels.
"""

import os

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
topk_ops = pytest.importorskip("quack_cpp.topk_ops")

DEVICE = os.environ.get("QUACK_TEST_DEVICE", "cuda")
if DEVICE == "cuda":
    pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
cuda_only = pytest.mark.skipif(DEVICE != "cuda", reason="checks CUDA itself")

STAND_IN = True  # QUACK_TEST_DEVICE=cpu runs this module on the CPU stand-ins (conftest.py)

f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
DTYPES = [f32, f16, bf16]
# Softmax outputs (in [0, 1]) and gradients: 2x tests/cpp/reference/tolerance.h's rel per dtype.
TOL = {f32: 2e-5, f16: 2e-3, bf16: 1.6e-2}


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def randx(*shape, dtype=f32):
    x = torch.randn(*shape, device=DEVICE).to(dtype)
    x[x == 0] = 1.0  # no zeros: the stable-sort reference ranks -0 and +0 alike, we do not
    return x


def ref_order(x, k, dim=-1, largest=True):
    """Our documented order: a stable sort (NaN largest; ties: lower index first)."""
    s = torch.sort(x, dim=dim, descending=largest, stable=True)
    return s.values.narrow(dim, 0, k), s.indices.narrow(dim, 0, k)


def assert_same(got, want, what):
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    nan = got.isnan()
    assert torch.equal(nan, want.isnan()), what
    assert torch.equal(got[~nan], want[~nan]), what


def check(x, k, dim=-1, largest=True, **kw):
    got = quack_cpp.topk(x, k, dim=dim, largest=largest, **kw)
    ref_v, ref_i = ref_order(x, k, dim, largest)
    assert_same(got.indices, ref_i, "indices")
    assert_same(got.values, ref_v, "values")
    if x.numel() and k:
        tv = torch.topk(x, k, dim=dim, largest=largest).values
        assert_same(got.values, tv, "values vs torch.topk")
    return got


# --------------------------------------------------------------------------------------------
# Forward: shapes, dtypes, order
# --------------------------------------------------------------------------------------------

# 16-bit x with 16-byte rows, N <= 4096, k <= 32 and k <= 16 or N <= 2048 (here (1, 1, 1),
# (33, 1000, 8), (65, 256, 8), (300, 64, 2), (130, 2048, 16), (9, 2056, 8), (6, 4096, 16),
# (11, 1024, 24)) takes the register (bitonic) kernel by the plan's rule (src/topk/topk_plan.h);
# so does fp32 x with 16-byte rows, N <= 2048 and k <= 16 (here (1, 1, 1), (33, 1000, 8), (65,
# 256, 8), (300, 64, 2), (130, 2048, 16); the power-of-2 N by the fit instance, the others the
# generic one): truncated entries and an exactness fix-up. Past it, 16-bit rows of 16-byte
# multiples with 4096 < N <= 8192, or N = 4096 and k < 32, take the radix kernel ((16, 6000,
# 100), (13, 4096, 24); (3, 5000, 300) is past k <= 256); the others the queue kernel (k <= 256)
# or the sort path. The queue kernel's rows of 16-byte multiples with k >= 32 ((64, 4096, 32),
# (16, 4096, 128), (8, 32768, 64), (4, 131072, 256)) take its prefix bound of 32 iterations and
# its sparse offer.
SHAPES = [(1, 1, 1), (7, 127, 5), (33, 1000, 8), (64, 4096, 32), (16, 4096, 128),
          (8, 32768, 64), (4, 131072, 256), (3, 5000, 300), (5, 257, 257), (65, 256, 8),
          (300, 64, 2), (2, 70001, 17), (130, 2048, 16), (9, 2056, 8), (6, 4096, 16),
          (11, 1024, 24), (16, 6000, 100), (13, 4096, 24)]


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("M,N,k", SHAPES)
def test_matches_torch(M, N, k, dtype, largest):
    check(randx(M, N, dtype=dtype), k, largest=largest)


@pytest.mark.parametrize("dtype", [bf16, f32], ids=str)
def test_dim_and_3d(dtype):
    x = randx(3, 500, 7, dtype=dtype)
    check(x, 9, dim=1)
    check(x, 3, dim=-1, largest=False)
    check(randx(1000, dtype=dtype), 10)  # 1-D
    x = randx(4, 6, 300, dtype=dtype).transpose(1, 2)  # dim -1 of a strided view
    check(x, 5, dim=-1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("largest", [True, False])
def test_nan_inf_duplicates(dtype, largest):
    M, N = 6, 3000
    x = randx(M, N, dtype=dtype)
    x[0] = -float("inf")
    x[1, ::7] = float("nan")
    x[2] = float("nan")
    x[3] = torch.randint(-3, 4, (N,), device=DEVICE).to(dtype) + 0.5  # ties everywhere
    x[4, ::5] = float("inf")
    x[5, ::2] = -float("inf")
    for k in (1, 8, 40, 300):
        check(x, k, largest=largest)


@pytest.mark.parametrize("dtype", [bf16, f32], ids=str)
@pytest.mark.parametrize("k", [8, 256, 300])
def test_rows_beyond_262144(k, dtype):
    """Issue 19: correct beyond the speed range (N ≤ 262144): rows of 2^20 + 3 elements (odd),
    on the queue kernel (k ≤ 256) and the sort path (k = 300), with NaN and ties in them."""
    x = randx(3, (1 << 20) + 3, dtype=dtype)
    x[1, ::1000] = float("nan")
    x[2, : 1 << 19] = 0.5  # half the row one value: ties at the top
    check(x, k)
    check(x, k, largest=False)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("M,N,k", [(37, 1024, 8), (21, 2048, 16), (9, 1000, 32), (50, 1000, 13)])
def test_fp32_near_ties(M, N, k, largest):
    # fp32 rows that the register kernel's truncated entries (the column in the key's low bits)
    # cannot tell apart: values +-(1 + j ulp), j < 64 (the whole row one truncated key), and a
    # random row with 2k + 3 columns within 4 ulps of its k-th value (of the mode). Its fix-up must give the
    # exact values and order (src/topk/topk_bitonic_kernel.cuh, "fp32").
    j = torch.randint(0, 64, (M, N), device=DEVICE, dtype=torch.int32)
    x = (torch.ones(M, N, device=DEVICE, dtype=f32).view(torch.int32) + j).view(f32)
    x[1::2] *= -1
    check(x, k, largest=largest)
    y = randx(M, N)
    kth = torch.sort(y, dim=-1, descending=largest).values[:, k - 1:k]  # the mode's k-th
    cols = torch.randint(0, N, (M, 2 * k + 3), device=DEVICE)
    d = torch.randint(-4, 5, cols.shape, device=DEVICE, dtype=torch.int32)
    near = (kth.expand(-1, cols.shape[1]).contiguous().view(torch.int32) + d).view(f32)
    y.scatter_(1, cols, near)
    check(y, k, largest=largest)


def test_k_zero_and_empty():
    x = randx(5, 100, dtype=bf16)
    r = quack_cpp.topk(x, 0)
    assert r.values.shape == (5, 0) and r.indices.shape == (5, 0)
    e = randx(0, 100, dtype=bf16)
    r = quack_cpp.topk(e, 7)
    assert r.values.shape == (0, 7) and r.indices.dtype == torch.int64


def test_int32_indices_and_values_dtype():
    x = randx(17, 2048, dtype=bf16)
    r = quack_cpp.topk(x, 16, index_dtype=torch.int32, values_dtype=f32)
    ref_v, ref_i = ref_order(x, 16)
    assert r.indices.dtype == torch.int32 and r.values.dtype == f32
    assert torch.equal(r.indices.long(), ref_i)
    assert torch.equal(r.values, ref_v.float())


def test_sorted_false_same_set():
    x = randx(9, 4096, dtype=f16)
    r = quack_cpp.topk(x, 32, sorted=False)
    t = torch.topk(x, 32, sorted=False)
    assert torch.equal(r.values.sort(-1).values, t.values.sort(-1).values)


# --------------------------------------------------------------------------------------------
# Fused softmax and the backward, against float64
# --------------------------------------------------------------------------------------------


def ref_softmax_values(x, k, mode, largest=True):
    _, idx = ref_order(x, k, -1, largest)
    x64 = x.double()
    if mode is True:
        return torch.softmax(x64.gather(-1, idx), -1)
    return torch.softmax(x64, -1).gather(-1, idx)


@pytest.mark.parametrize("mode", [True, "pre"], ids=["selected", "pre"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
# (64, 64, 8), (33, 256, 8), (130, 2048, 16): the bitonic kernel (the plan's rule; fp32 too);
# (9, 4096, 32) and (4, 32768, 128) the queue kernel with its prefix bound and sparse offer
# (k >= 32); (13, 4096, 24) the radix kernel at 16 bits.
@pytest.mark.parametrize("M,N,k", [(64, 64, 8), (33, 256, 8), (130, 2048, 16), (9, 4096, 32),
                                   (4, 32768, 128), (3, 3000, 300), (13, 4096, 24)])
def test_softmax(M, N, k, dtype, mode):
    x = randx(M, N, dtype=dtype)
    for largest in (True, False):
        r = quack_cpp.topk(x, k, largest=largest, softmax=mode)
        _, idx = ref_order(x, k, -1, largest)
        assert torch.equal(r.indices, idx)
        want = ref_softmax_values(x, k, mode, largest)
        assert r.values.dtype == dtype
        torch.testing.assert_close(r.values.double(), want, rtol=0, atol=TOL[dtype])
        r32 = quack_cpp.topk(x, k, largest=largest, softmax=mode, values_dtype=f32)
        torch.testing.assert_close(r32.values.double(), want, rtol=0, atol=TOL[f32])


@pytest.mark.parametrize("mode", [False, True, "pre"], ids=["none", "selected", "pre"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("M,N,k", [(64, 64, 8), (7, 1000, 50), (5, 4096, 128), (3, 3000, 300)])
def test_backward(M, N, k, dtype, mode):
    x = randx(M, N, dtype=dtype).requires_grad_(True)
    r = quack_cpp.topk(x, k, softmax=mode)
    dv = torch.randn(M, k, device=DEVICE).to(dtype)
    (dx,) = torch.autograd.grad(r.values, x, dv)
    # float64 autograd at the same (documented-order) indices.
    x64 = x.detach().double().requires_grad_(True)
    _, idx = ref_order(x.detach(), k)
    if mode == "pre":
        v = torch.softmax(x64, -1).gather(-1, idx)
    else:
        v = x64.gather(-1, idx)
        if mode is True:
            v = torch.softmax(v, -1)
    (ref,) = torch.autograd.grad(v, x64, dv.double())
    assert dx.dtype == dtype and dx.shape == x.shape
    if mode is False:
        assert torch.equal(dx.double(), ref)
    else:
        scale = ref.abs().max().item()
        torch.testing.assert_close(dx.double(), ref, rtol=0, atol=TOL[dtype] * scale)


def test_backward_dim_and_sum():
    x = randx(4, 300, 6, dtype=f32).requires_grad_(True)
    quack_cpp.topk(x, 5, dim=1).values.sum().backward()  # stride-0 dvalues
    want = torch.zeros_like(x)
    want.scatter_(1, torch.topk(x.detach(), 5, dim=1).indices, 1.0)
    assert torch.equal(x.grad, want)


# --------------------------------------------------------------------------------------------
# torch.compile, CUDA graphs, opcheck
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [False, True, "pre"], ids=["none", "selected", "pre"])
def test_compile_fullgraph(mode):
    x = randx(64, 2048, dtype=bf16).requires_grad_(True)
    dv = torch.randn(64, 8, device=DEVICE).to(bf16)

    def f(x):
        r = quack_cpp.topk(x, 8, softmax=mode)
        return r.values, r.indices

    torch._dynamo.reset()
    cf = torch.compile(f, fullgraph=True, dynamic=False)
    v, i = cf(x)
    (dx,) = torch.autograd.grad(v, x, dv)
    ev, ei = f(x)
    (edx,) = torch.autograd.grad(ev, x, dv)
    assert torch.equal(i, ei) and torch.equal(v, ev) and torch.equal(dx, edx)


@cuda_only
def test_cuda_graph_capture_replay():
    M, N, k = 256, 4096, 16
    x = randx(M, N, dtype=bf16).requires_grad_(True)
    dv = torch.randn(M, k, device=DEVICE).to(bf16)

    def step():
        r = quack_cpp.topk(x, k, softmax="pre")
        (dx,) = torch.autograd.grad(r.values, x, dv)
        return r.values, r.indices, dx

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = step()
    with torch.no_grad():
        x.copy_(randx(M, N, dtype=bf16))
        dv.copy_(torch.randn(M, k, device=DEVICE).to(bf16))
    g.replay()
    torch.cuda.synchronize()
    eager = step()
    for a, b, name in zip(out, eager, ("values", "indices", "dx")):
        assert torch.equal(a, b), name


@cuda_only
def test_opcheck():
    x = randx(37, 1024, dtype=bf16)
    torch.library.opcheck(torch.ops.quack_cpp.topk_fwd.default,
                          (x, 8, True, 2, torch.int64, bf16, True))
    v, i, lse = torch.ops.quack_cpp.topk_fwd.default(x, 8, True, 2, torch.int64, bf16, True)
    dv = torch.randn(37, 8, device=DEVICE).to(bf16)
    torch.library.opcheck(torch.ops.quack_cpp.topk_bwd.default,
                          (dv, i, None, x, lse, 1024, bf16, 2))


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


def test_bad_input():
    x = randx(4, 10, dtype=bf16)
    with pytest.raises(ValueError, match="k is 11"):
        quack_cpp.topk(x, 11)
    with pytest.raises(ValueError, match="softmax is 'post'"):
        quack_cpp.topk(x, 2, softmax="post")
    with pytest.raises(ValueError, match="index_dtype"):
        quack_cpp.topk(x, 2, index_dtype=torch.int16)
    with pytest.raises(IndexError):
        quack_cpp.topk(x, 2, dim=2)
    with pytest.raises(ValueError, match="k is 2, expected 0 or 1 for a 0-dimensional x"):
        quack_cpp.topk(x[0, 0], 2)
    with pytest.raises(IndexError, match="dim is 1"):
        quack_cpp.topk(x[0, 0], 1, dim=1)
    # k must be an int: a float reached the op (a dispatcher error not naming topk), True ran as 1.
    with pytest.raises(TypeError, match=r"topk: k is 2\.5 \(float\), expected an int"):
        quack_cpp.topk(x, 2.5)
    with pytest.raises(TypeError, match=r"topk: k is True \(bool\), expected an int"):
        quack_cpp.topk(x, True)
    with pytest.raises(TypeError, match=r"topk: dim is -1\.0 \(float\), expected an int"):
        quack_cpp.topk(x, 2, dim=-1.0)
    np = pytest.importorskip("numpy")
    v, i = quack_cpp.topk(x, 2, dim=np.int64(0))
    torch.testing.assert_close(v, torch.topk(x, 2, dim=0).values, rtol=0, atol=0)


@pytest.mark.parametrize("softmax", [False, True])
@pytest.mark.parametrize("k", [0, 1])
def test_zero_dim_input(k, softmax):
    """A 0-d x as torch.topk takes it: 0-d values (the element, or 1 with the softmax) and index
    0, for k 0 or 1; the gradient flows back to the element. At k = 0 the element itself (ours, a
    documented choice): CUDA torch.topk leaves its 0-d value unwritten there (read as garbage on
    the H200, run AP), so torch is the reference at k = 1 only."""
    x = randx(1, dtype=f32)[0].requires_grad_(True)
    v, i = quack_cpp.topk(x, k, softmax=softmax)
    assert v.shape == () and i.shape == () and i.dtype == torch.int64 and int(i) == 0
    want = float(x) if k == 0 else float(torch.topk(x.detach(), k).values)
    assert float(v.detach()) == (1.0 if softmax else want)
    v.backward()
    assert x.grad.shape == () and float(x.grad) == (0.0 if softmax else 1.0)


@cuda_only
def test_bad_dtype_and_device():
    with pytest.raises(ValueError, match="dtype int32"):
        quack_cpp.topk(torch.ones(4, 10, dtype=torch.int32, device=DEVICE), 2)
    with pytest.raises(ValueError, match="expected a CUDA tensor"):
        quack_cpp.topk(torch.ones(4, 10), 2)
