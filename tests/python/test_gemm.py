"""quack_cpp.gemm / gemm_add / gemm_add_inplace on the GPU against a float64 reference, with the
tolerance rule of shared/cases/handed.md (error_lib <= 2*error_torch + atol; torch = cuBLAS in
the same dtypes, one rounding to the output dtype).

Covers: majors (A and B as transposed views, C and the in-place out column-major), batched
(L = 3, also padded batch strides), tails (M, N, K not multiples of the 128x256x64 tile; N not a
multiple of 8 -> padded output rows), K padded in memory, alpha/beta incl. beta = 0 with NaN/Inf
in C (C09), in place, out dtypes, empty M/N and K = 0 (C02), autograd (dA, dB, dC; stride-0
dD), torch.compile(fullgraph=True) with no graph break, CUDA-graph capture, a side stream, a
non-current device (C07, 2 GPUs), the C++ error surfaced unchanged, direct calls on a
NaN-poisoned padded D (nothing written outside (M, N)), opcheck.

Layouts other than A row-major / B column-major / C, D row-major carry the marker all_majors,
and so does every backward (it multiplies by A^T and B^T). Until the C++ supports them:
-m 'not all_majors'.

Skips without torch, quack_cpp or a CUDA GPU. QUACK_TEST_DEVICE=cpu runs the device-agnostic
tests against CPU stand-ins (tests/python/cpu_stand_in.py): a self-check of this file, not of
the kernels.
"""

import os

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
gemm_ops = pytest.importorskip("quack_cpp.gemm_ops")

from reference import assert_rule  # noqa: E402

DEVICE = os.environ.get("QUACK_TEST_DEVICE", "cuda")
if DEVICE == "cuda":
    pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
cuda_only = pytest.mark.skipif(DEVICE != "cuda", reason="checks CUDA itself")
all_majors = pytest.mark.all_majors

f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16


STAND_IN = True  # QUACK_TEST_DEVICE=cpu runs this module on the CPU stand-ins (conftest.py)


@pytest.fixture(autouse=True)
def _seed_no_tf32_poison():
    torch.manual_seed(0)
    if DEVICE == "cuda":
        # Blocks the caching allocator hands out next hold NaN (0xFF bytes: NaN in bf16, fp16
        # and fp32), so an output element the kernel leaves unwritten fails the comparison.
        for nbytes in (1 << 26, 1 << 20, 1 << 20, 1 << 16):
            torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(0xFF)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # torch's fp32 peer: true fp32
    yield
    torch.backends.cuda.matmul.allow_tf32 = saved


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def mat(rows, cols, major="row", dtype=bf16, L=None, scale=1.0, batch_pad=0):
    """Random (rows, cols) or (L, rows, cols) in dtype. major 'row': stride 1 along cols;
    'col': stride 1 along rows (a transposed view). The contiguous run is padded in memory to
    a multiple of 8 elements (TMA: 16-byte leading strides); batch_pad adds elements between
    batches."""
    inner, outer = (cols, rows) if major == "row" else (rows, cols)
    ld = -(-max(inner, 1) // 8) * 8
    if L is None:
        t = (torch.randn(outer, ld, device=DEVICE) * scale).to(dtype)[:, :inner]
    else:
        flat = (torch.randn(L, outer * ld + batch_pad, device=DEVICE) * scale).to(dtype)
        t = flat[:, : outer * ld].view(L, outer, ld)[..., :inner]
    return t if major == "row" else t.mT


def ref_gemm(A, B, C=None, alpha=1.0, beta=0.0):
    """Float64: alpha * A @ B + beta * C (C not read when beta == 0)."""
    acc = alpha * torch.matmul(A.double(), B.double())
    if C is not None and beta != 0:
        acc = acc + beta * C.double()
    return acc


def torch_gemm(A, B, C=None, alpha=1.0, beta=0.0, out_dtype=None, grad=False):
    """PyTorch in the same dtypes (addmm/baddbmm: one rounding; out_dtype= where torch has it
    and grad is False, else an fp32 product rounded once)."""
    out_dtype = out_dtype or A.dtype
    use_c = C is not None and beta != 0
    shape = A.shape[:-1] + (B.shape[-1],)
    base = C if use_c else torch.zeros(shape, dtype=out_dtype, device=A.device)
    fn = torch.addmm if A.dim() == 2 else torch.baddbmm
    kw = dict(alpha=alpha, beta=beta if use_c else 0.0)
    if out_dtype == A.dtype:
        return fn(base, A, B, **kw)
    if grad:
        return fn(base.float(), A.float(), B.float(), **kw).to(out_dtype)
    try:
        return fn(base, A, B, out_dtype=out_dtype, **kw)
    except Exception:  # no out_dtype overload here (CPU, older torch)
        return fn(base.float(), A.float(), B.float(), **kw).to(out_dtype)


def check(name, D, ref, tch):
    assert_rule(name, D, ref, tch, dtype=D.dtype)


def layout(D):
    """'row' or 'col' when D has a documented output layout (stride 1 along N, rows padded to
    16 bytes; or stride 1 along M, columns padded), else None."""
    align = 16 // D.dtype.itemsize
    M, N = D.shape[-2], D.shape[-1]
    ldn, ldm = -(-N // align) * align, -(-M // align) * align
    row = (ldn, 1) if D.dim() == 2 else (M * ldn, ldn, 1)
    col = (1, ldm) if D.dim() == 2 else (N * ldm, 1, ldm)
    return "row" if D.stride() == row else "col" if D.stride() == col else None


def expect_layout(D, A, B):
    """Row-major, or column-major only for A and B both column-major (where the C++ has no
    row-major D kernel for that pair and dtype, the layer picks column-major)."""
    lay = layout(D)
    if min(D.shape[-2:]) <= 1:
        return
    assert lay == "row" or (lay == "col" and A.stride(-2) == 1 and B.stride(-2) == 1), D.stride()


def p(*values, majors=("row", "col")):
    """pytest.param(*values, A major, B major), marked all_majors unless A is row-major and B
    column-major."""
    marks = () if tuple(majors) == ("row", "col") else (all_majors,)
    ident = "-".join(map(str, values + tuple(f"{n}{m}" for n, m in zip("AB", majors))))
    return pytest.param(*values, *majors, marks=marks, id=ident)


MAJORS = [("row", "col"), ("col", "col"), ("row", "row"), ("col", "row")]
# (M, N, K): exact tile, tails just past 128/256/64, N not a multiple of 8, M = 1, long K.
SHAPES = [(128, 256, 64), (1, 1, 8), (7, 24, 40), (129, 264, 72), (257, 520, 200),
          (33, 131, 64), (1, 131, 24), (300, 136, 1000), (1024, 1000, 504)]


# --------------------------------------------------------------------------------------------
# Forward: shapes x majors x dtypes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("M,N,K,amaj,bmaj", [p(*s, majors=m) for s in SHAPES for m in MAJORS])
def test_gemm_shapes_majors(M, N, K, amaj, bmaj):
    A, B = mat(M, K, amaj), mat(K, N, bmaj)
    D = quack_cpp.gemm(A, B)
    assert D.shape == (M, N) and D.dtype == bf16
    expect_layout(D, A, B)
    check("D", D, ref_gemm(A, B), torch_gemm(A, B))


@pytest.mark.parametrize("dtype,out_dtype", [(bf16, None), (bf16, f32), (f16, None), (f16, f32),
                                             (bf16, bf16), (f16, f16)], ids=str)
@pytest.mark.parametrize("M,N,K", [(257, 264, 136), (33, 131, 64), (1, 8, 1000)])
def test_out_dtypes(M, N, K, dtype, out_dtype):
    A, B = mat(M, K, dtype=dtype), mat(K, N, "col", dtype=dtype)
    D = quack_cpp.gemm(A, B, out_dtype=out_dtype, alpha=0.75)
    assert D.dtype == (out_dtype or dtype) and layout(D) == "row"
    check("D", D, ref_gemm(A, B, alpha=0.75), torch_gemm(A, B, alpha=0.75, out_dtype=out_dtype))


@pytest.mark.parametrize("amaj,bmaj", [pytest.param(*m, marks=p(majors=m).marks,
                                                      id=f"A{m[0]}-B{m[1]}") for m in MAJORS])
@pytest.mark.parametrize("batch_pad", [0, 64])
def test_batched(amaj, bmaj, batch_pad):
    L, M, N, K = 3, 129, 264, 72
    A = mat(M, K, amaj, L=L, batch_pad=batch_pad)
    B = mat(K, N, bmaj, L=L, batch_pad=batch_pad)
    # D takes C's layout; A and B both column-major have a kernel only for a column-major D.
    cmaj = "col" if (amaj, bmaj) == ("col", "col") else "row"
    C = mat(M, N, cmaj, dtype=f32, L=L)
    D = quack_cpp.gemm_add(A, B, C, alpha=1.5, beta=-0.5, out_dtype=f32)
    assert D.shape == (L, M, N) and layout(D) == cmaj
    check("D", D, ref_gemm(A, B, C, 1.5, -0.5), torch_gemm(A, B, C, 1.5, -0.5, f32))


@pytest.mark.parametrize("M,N,K,amaj,bmaj", [
    p(64, 1001, 63, majors=("row", "row")), p(200, 264, 63), p(130, 50257, 72, majors=("row", "row")),
    p(129, 1001, 1001, majors=("col", "row")), p(257, 131, 1000), p(33, 1003, 999, majors=("col", "col"))])
def test_unaligned_operands(M, N, K, amaj, bmaj):
    # Issue 16: operands exactly as torch makes them (contiguous, or transposed views of
    # contiguous tensors), with K and N not multiples of 8: the C++ copies A / B into padded
    # rows (workspace from torch's allocator) and stores D... here D comes from this layer
    # (padded rows); gemm_add with a contiguous C reads C by plain loads.
    def dense(rows, cols, major):
        t = torch.randn(rows, cols, device=DEVICE).to(bf16) if major == "row" else \
            torch.randn(cols, rows, device=DEVICE).to(bf16).T
        return t
    A, B = dense(M, K, amaj), dense(K, N, bmaj)
    D = quack_cpp.gemm(A, B)
    check("D", D, ref_gemm(A, B), torch_gemm(A, B))
    C = torch.randn(M, N, device=DEVICE).to(bf16)
    D = quack_cpp.gemm_add(A, B, C, alpha=0.5, beta=-1.0)
    check("D", D, ref_gemm(A, B, C, 0.5, -1.0), torch_gemm(A, B, C, 0.5, -1.0))
    # A view one element into its storage: a base TMA cannot address.
    A1 = dense(M, K + 1, "row")[:, 1:]
    D = quack_cpp.gemm(A1, B)
    check("D", D, ref_gemm(A1, B), torch_gemm(A1, B))


@cuda_only
def test_unaligned_d_from_the_c_api():
    # D contiguous with N = 1001 (rows of 2002 bytes) through the C API: plain stores; nothing
    # written past its elements (the NaN guard row after it stays NaN).
    M, N, K = 300, 1001, 136
    A, B = mat(M, K), mat(K, N, "col")
    Dp = torch.full((M * N + 64,), float("nan"), device="cuda", dtype=bf16)
    D = Dp[:M * N].view(M, N)
    gemm_ops._launch(A, B, None, D, 1.0, 0.0)
    check("D", D, ref_gemm(A, B), torch_gemm(A, B))
    assert torch.isnan(Dp[M * N:]).all()


def test_k_padded_in_memory():
    # K = 63: rows of A and columns of B padded to 64 in memory (the C++ needs 16-byte
    # leading strides); the padding holds NaN and must not be read.
    M, N, K = 200, 264, 63
    Ap = torch.full((M, 64), float("nan"), device=DEVICE, dtype=bf16)
    Bp = torch.full((N, 64), float("nan"), device=DEVICE, dtype=bf16)
    Ap[:, :K] = torch.randn(M, K, device=DEVICE).to(bf16)
    Bp[:, :K] = torch.randn(N, K, device=DEVICE).to(bf16)
    A, B = Ap[:, :K], Bp[:, :K].T
    D = quack_cpp.gemm(A, B)
    check("D", D, ref_gemm(A, B), torch_gemm(A, B))


# --------------------------------------------------------------------------------------------
# gemm_add: alpha / beta, C09 (beta = 0 never reads C)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, -1.5), (-1.0, 0.25), (2.0, 0.0)])
@pytest.mark.parametrize("c_dtype", [bf16, f32], ids=str)
@pytest.mark.parametrize("c_major", ["row", pytest.param("col", marks=all_majors)])
def test_gemm_add_alpha_beta(alpha, beta, c_dtype, c_major):
    M, N, K = 257, 264, 136
    A, B = mat(M, K), mat(K, N, "col")
    C = mat(M, N, c_major, dtype=c_dtype)
    D = quack_cpp.gemm_add(A, B, C, alpha=alpha, beta=beta, out_dtype=c_dtype)
    assert D.dtype == c_dtype and layout(D) == (c_major if beta != 0 else "row")
    check("D", D, ref_gemm(A, B, C, alpha, beta), torch_gemm(A, B, C, alpha, beta, c_dtype))


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, -1.5)])
@pytest.mark.parametrize("c_major", ["row", pytest.param("col", marks=all_majors)])
def test_gemm_add_fp32_c_into_bf16_d(alpha, beta, c_major):
    """C in float32 (e.g. a residual stream kept in fp32) added into a bf16 D: one rounding."""
    M, N, K = 257, 264, 136
    A, B = mat(M, K), mat(K, N, "col")
    C = mat(M, N, c_major, dtype=f32)
    D = quack_cpp.gemm_add(A, B, C, alpha=alpha, beta=beta)
    assert D.dtype == bf16 and layout(D) == c_major
    ref = ref_gemm(A, B, C, alpha, beta)
    tch = (alpha * (A.float() @ B.float()) + beta * C).to(bf16)
    check("D", D, ref, tch)


@pytest.mark.parametrize("fill", [float("nan"), float("inf")])
@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_c09_beta0_never_reads_c(fill, alpha):
    A, B = mat(512, 512), mat(512, 512, "col")
    C = torch.full((512, 512), fill, device=DEVICE, dtype=bf16)
    D = quack_cpp.gemm_add(A, B, C, alpha=alpha, beta=0.0)
    assert torch.isfinite(D).all()
    assert torch.equal(D, quack_cpp.gemm(A, B, alpha=alpha))  # the same path: exact
    check("D", D, ref_gemm(A, B, alpha=alpha), torch_gemm(A, B, alpha=alpha))
    out = C.clone()
    quack_cpp.gemm_add_inplace(A, B, out, alpha=alpha, beta=0.0)
    assert torch.equal(out, D)


def test_c09_nan_in_c_shows_with_beta():
    A, B = mat(128, 256), mat(256, 256, "col")
    C = mat(128, 256)
    C[3, 5] = float("nan")
    C[100, 255] = float("inf")
    D = quack_cpp.gemm_add(A, B, C, beta=0.5)
    assert torch.isnan(D[3, 5]) and torch.isinf(D[100, 255])
    assert torch.isfinite(D).sum() == D.numel() - 2


# --------------------------------------------------------------------------------------------
# Device scalars: alpha / beta as one-element fp32 tensors (read by the kernel)
# --------------------------------------------------------------------------------------------


def dev_scalar(v):
    return torch.tensor(v, device=DEVICE, dtype=f32)


@pytest.mark.parametrize("alpha,beta", [(0.5, -1.5), (2.0, 0.0), (-1.0, 1.0)])
def test_device_scalars(alpha, beta):
    M, N, K = 257, 264, 136
    A, B, C = mat(M, K), mat(K, N, "col"), mat(M, N)
    if beta == 0.0:
        C[7, 9] = float("nan")  # a device beta of 0 must not read C either
    D = quack_cpp.gemm_add(A, B, C, alpha=dev_scalar(alpha), beta=dev_scalar(beta))
    assert torch.isfinite(D).all()
    check("D", D, ref_gemm(A, B, C, alpha, beta), torch_gemm(A, B, C, alpha, beta))
    # The device values replace the host ones exactly: same bits as host scalars.
    assert torch.equal(D, quack_cpp.gemm_add(A, B, C, alpha=alpha, beta=beta))
    G = quack_cpp.gemm(A, B, alpha=dev_scalar(alpha))
    assert torch.equal(G, quack_cpp.gemm(A, B, alpha=alpha))
    out = C.clone()
    quack_cpp.gemm_add_inplace(A, B, out, alpha=dev_scalar(alpha), beta=dev_scalar(beta))
    assert torch.equal(out, D)


def test_device_scalar_gradients():
    M, N, K = 129, 136, 72
    A = mat(M, K).requires_grad_(True)
    B = mat(K, N, "col").requires_grad_(True)
    C = mat(M, N).requires_grad_(True)
    dD = mat(M, N)
    D = quack_cpp.gemm_add(A, B, C, alpha=dev_scalar(-0.5), beta=dev_scalar(2.0))
    D.backward(dD)
    grads_dev = [t.grad.clone() for t in (A, B, C)]
    for t in (A, B, C):
        t.grad = None
    quack_cpp.gemm_add(A, B, C, alpha=-0.5, beta=2.0).backward(dD)
    for name, g_dev, t in zip("ABC", grads_dev, (A, B, C)):
        assert torch.equal(g_dev, t.grad), name


def test_device_scalar_errors():
    A, B = mat(128, 64), mat(64, 128, "col")
    for bad, what in [(torch.tensor([1.0, 2.0], device=DEVICE), r"shape \(2,\)"),
                      (torch.tensor(1.0, device=DEVICE, dtype=bf16), "bfloat16"),
                      (torch.tensor(1.0, device="cpu") if DEVICE == "cuda" else None, "cpu")]:
        if bad is None:
            continue
        with pytest.raises(ValueError, match=r"gemm: alpha is a tensor .*" + what):
            quack_cpp.gemm(A, B, alpha=bad)


@cuda_only
def test_device_scalars_in_cuda_graph():
    """A captured graph reads the device scalars at replay: new values, no re-capture."""
    A, B, C = mat(257, 200), mat(200, 264, "col"), mat(257, 264)
    alpha, beta = dev_scalar(1.0), dev_scalar(1.0)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up outside the capture
        quack_cpp.gemm_add(A, B, C, alpha=alpha, beta=beta)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        D = quack_cpp.gemm_add(A, B, C, alpha=alpha, beta=beta)
    for a, b in [(0.5, -2.0), (3.0, 0.0), (-1.0, 0.25)]:
        alpha.fill_(a)
        beta.fill_(b)
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(D, quack_cpp.gemm_add(A, B, C, alpha=a, beta=b)), (a, b)


# --------------------------------------------------------------------------------------------
# gemm_add_inplace
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("out_dtype", [bf16, f32], ids=str)
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (-0.5, 2.0)])
@pytest.mark.parametrize("L", [None, 2])
@pytest.mark.parametrize("out_major", ["row", pytest.param("col", marks=all_majors)])
def test_inplace(out_dtype, alpha, beta, L, out_major):
    M, N, K = 129, 264, 200
    A, B = mat(M, K, L=L), mat(K, N, "col", L=L)
    out = mat(M, N, out_major, dtype=out_dtype, L=L)
    before, ptr, strides = out.clone(), out.data_ptr(), out.stride()
    assert quack_cpp.gemm_add_inplace(A, B, out, alpha=alpha, beta=beta) is None
    assert out.data_ptr() == ptr and out.stride() == strides
    check("out", out, ref_gemm(A, B, before, alpha, beta),
          torch_gemm(A, B, before, alpha, beta, out_dtype))


# --------------------------------------------------------------------------------------------
# Empty (C02)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("M,N,K", [(0, 256, 64), (128, 0, 64), (0, 0, 0), (128, 256, 0),
                                   (1, 131, 0)])
def test_c02_empty_and_k0(M, N, K):
    A, B = mat(M, K), mat(K, N, "col")
    D = quack_cpp.gemm(A, B)
    assert D.shape == (M, N)
    assert torch.equal(D, torch.zeros(M, N, device=DEVICE, dtype=bf16))
    C = mat(M, N, dtype=f32)
    D = quack_cpp.gemm_add(A, B, C, beta=0.5, out_dtype=f32)
    assert torch.equal(D, 0.5 * C)  # K = 0: beta * C exactly
    out = C.clone()
    quack_cpp.gemm_add_inplace(A, B, out, beta=2.0)
    assert torch.equal(out, 2 * C)
    if DEVICE == "cuda":
        torch.cuda.synchronize()  # no deferred launch error (an empty grid)


@all_majors
def test_c02_empty_backward():
    A = mat(0, 64).requires_grad_(True)
    B = mat(64, 256, "col").requires_grad_(True)
    quack_cpp.gemm(A, B).sum().backward()
    assert A.grad.shape == (0, 64)
    assert torch.equal(B.grad, torch.zeros_like(B))


# --------------------------------------------------------------------------------------------
# Autograd (every backward multiplies by transposed operands: all_majors)
# --------------------------------------------------------------------------------------------


def _grads(fn, leaves, dD):
    leaves = [t.detach().clone().requires_grad_(True) if t is not None else None for t in leaves]
    out = fn(*leaves)
    out.backward(dD)
    return out.detach(), [t.grad if t is not None else None for t in leaves]


@all_majors
@pytest.mark.parametrize("with_c,out_dtype", [(False, None), (True, None), (False, f32),
                                              (True, f32)], ids=str)
@pytest.mark.parametrize("L", [None, 3])
def test_autograd(with_c, out_dtype, L):
    M, N, K = 129, 264, 72
    A, B = mat(M, K, L=L), mat(K, N, "col", L=L)
    od = out_dtype or bf16
    C = mat(M, N, dtype=od, L=L) if with_c else None
    dD = mat(M, N, dtype=od, L=L)
    alpha, beta = 0.5, 1.5

    def lib(A, B, C=None):
        if C is None:
            return quack_cpp.gemm(A, B, out_dtype=out_dtype, alpha=alpha)
        return quack_cpp.gemm_add(A, B, C, alpha=alpha, beta=beta, out_dtype=out_dtype)

    def ref(A, B, C=None):
        return ref_gemm(A, B, C, alpha, beta)

    def tch(A, B, C=None):  # torch autograd in the same dtypes
        return torch_gemm(A, B, C, alpha, beta, out_dtype, grad=True)

    leaves = [A, B] + ([C] if with_c else [])
    out_l, g_l = _grads(lib, leaves, dD)
    out_r, g_r = _grads(ref, [t.double() for t in leaves], dD.double())
    out_t, g_t = _grads(tch, leaves, dD)
    check("D", out_l, out_r, out_t)
    for name, gl, gr, gt in zip(["dA", "dB", "dC"], g_l, g_r, g_t):
        assert gl.dtype == leaves[["dA", "dB", "dC"].index(name)].dtype
        check(name, gl, gr, gt)


@all_majors
def test_autograd_stride0_and_sliced_dD():
    # y.sum().backward() hands a stride-0 dD; a sliced dD has an odd offset and row stride.
    A = mat(129, 72).requires_grad_(True)
    B = mat(72, 264, "col").requires_grad_(True)
    quack_cpp.gemm(A, B).sum().backward()
    ones = torch.ones(129, 264, device=DEVICE, dtype=bf16)
    check("dA", A.grad, ones.double() @ B.detach().double().T, ones @ B.detach().T)
    check("dB", B.grad, A.detach().double().T @ ones.double(), A.detach().T @ ones)
    A.grad = B.grad = None
    dD = mat(129, 265)[:, 1:]
    quack_cpp.gemm(A, B).backward(dD)
    check("dA", A.grad, dD.double() @ B.detach().double().T, dD @ B.detach().T)
    check("dB", B.grad, A.detach().double().T @ dD.double(), A.detach().T @ dD)


# --------------------------------------------------------------------------------------------
# torch.compile(fullgraph=True)
# --------------------------------------------------------------------------------------------


def _reset_dynamo():
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()


def _no_graph_breaks():
    from torch._dynamo.utils import counters

    return sum(counters["graph_break"].values()) == 0


def test_compile_fullgraph_forward_and_inplace():
    _reset_dynamo()
    A, B = mat(129, 72), mat(72, 264, "col")
    C = mat(129, 264, dtype=f32)

    def f(A, B, C, out):
        D = quack_cpp.gemm(A, B, alpha=0.5)
        E = quack_cpp.gemm_add(A, B, C, beta=2.0, out_dtype=f32)
        quack_cpp.gemm_add_inplace(A, B, out, alpha=-1.0, beta=1.0)
        return D.float() * 2 + E

    out_e, out_c = C.clone(), C.clone()
    eager = f(A, B, C, out_e)
    compiled = torch.compile(f, fullgraph=True, dynamic=False)(A, B, C, out_c)
    assert _no_graph_breaks()
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out_c, out_e, rtol=0, atol=0)


@all_majors
def test_compile_fullgraph_backward():
    _reset_dynamo()
    A, B = mat(129, 72), mat(72, 264, "col")
    C = mat(129, 264)

    def f(A, B, C):
        return (quack_cpp.gemm_add(A, B, C, alpha=0.5, beta=1.5).float().square()).sum()

    def grads(fn):
        leaves = [t.detach().clone().requires_grad_(True) for t in (A, B, C)]
        loss = fn(*leaves)
        loss.backward()
        return [loss.detach()] + [t.grad for t in leaves]

    eager = grads(f)
    compiled = grads(torch.compile(f, fullgraph=True, dynamic=False))
    assert _no_graph_breaks()
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c, e, rtol=1e-2, atol=1e-2)


# --------------------------------------------------------------------------------------------
# CUDA-specific: graphs, streams, devices, the C++'s errors, the raw binding
# --------------------------------------------------------------------------------------------


@cuda_only
def test_cuda_graph_capture_replay():
    A, B = mat(257, 200), mat(200, 264, "col")
    C = mat(257, 264, dtype=f32)
    out = C.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up outside the capture
        quack_cpp.gemm(A, B)
        quack_cpp.gemm_add_inplace(A, B, out.clone(), beta=1.0)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        D = quack_cpp.gemm(A, B, alpha=2.0)
        E = quack_cpp.gemm_add(A, B, C, beta=-1.0, out_dtype=f32)
        quack_cpp.gemm_add_inplace(A, B, out, beta=1.0)
    for _ in range(2):
        A.copy_(torch.randn_like(A, dtype=f32).to(bf16))
        B.copy_(torch.randn_like(B, dtype=f32).to(bf16))
        out.copy_(C)
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(D, quack_cpp.gemm(A, B, alpha=2.0))
        assert torch.equal(E, quack_cpp.gemm_add(A, B, C, beta=-1.0, out_dtype=f32))
        check("out", out, ref_gemm(A, B, C, 1.0, 1.0), torch_gemm(A, B, C, 1.0, 1.0, f32))


@cuda_only
def test_side_stream():
    A, B = mat(1024, 1000, scale=0.5), mat(1000, 1024, "col")
    expect = quack_cpp.gemm(A, B)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        D = quack_cpp.gemm(A, B)
    torch.cuda.current_stream().wait_stream(s)
    assert torch.equal(D, expect)


@cuda_only
@pytest.mark.skipif(DEVICE == "cuda" and torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_c07_non_current_device():
    A0, B0 = mat(257, 200), mat(200, 264, "col")
    C0 = mat(257, 264, dtype=f32)
    A1, B1, C1 = A0.to("cuda:1"), B0.T.contiguous().to("cuda:1").T, C0.to("cuda:1")
    torch.cuda.set_device(0)
    D1 = quack_cpp.gemm_add(A1, B1, C1, beta=0.5, out_dtype=f32)
    assert D1.device == torch.device("cuda:1") and torch.cuda.current_device() == 0
    assert torch.equal(D1.cpu(), quack_cpp.gemm_add(A0, B0, C0, beta=0.5, out_dtype=f32).cpu())
    with pytest.raises(ValueError, match="gemm: b is on cuda:0, expected cuda:1"):
        quack_cpp.gemm(A1, B0)


@cuda_only
@pytest.mark.parametrize("call,match", [
    (lambda: quack_cpp.gemm(mat(64, 64, dtype=f32), mat(64, 64, "col", dtype=f32)),
     r"^gemm: a has dtype float32, expected bfloat16 or float16"),
    (lambda: quack_cpp.gemm(mat(64, 64, dtype=f16), mat(64, 64, "col", dtype=f16),
                            out_dtype=bf16), r"^gemm: d has dtype bfloat16, expected float16"),
    (lambda: quack_cpp.gemm(mat(64, 64), mat(64, 64, "col", dtype=f16)),
     r"^gemm: b has dtype float16, expected bfloat16"),
    (lambda: quack_cpp.gemm_add(mat(64, 64), mat(64, 64, "col"), mat(64, 64, dtype=f16)),
     r"^gemm: c has dtype float16, expected bfloat16"),
    (lambda: quack_cpp.gemm_add(mat(64, 64), mat(64, 64, "col"), mat(63, 64)),
     r"^gemm: c has shape \(63, 64\) bfloat16, expected \(M, N\) = \(64, 64\)"),
    (lambda: quack_cpp.gemm(mat(64, 64), mat(65, 64, "col")),
     r"^gemm: b has shape \(65, 64\) bfloat16, expected \(K, N\) = \(64, \*\)"),
    (lambda: quack_cpp.gemm(mat(64, 64, L=2), mat(64, 64, "col")),
     r"^gemm: b has 2 dimensions \(64, 64\) bfloat16, expected 3 like a"),
])
def test_cpp_errors_surface_unchanged(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@cuda_only
def test_python_level_errors():
    A, B = mat(64, 64), mat(64, 64, "col")
    with pytest.raises(ValueError, match=r"gemm: B is on cpu, expected a CUDA tensor"):
        quack_cpp.gemm(A, B.cpu())
    with pytest.raises(ValueError, match=r"gemm: out_dtype is torch.float64"):
        quack_cpp.gemm(A, B, out_dtype=torch.float64)
    with pytest.raises(TypeError, match=r"gemm_add: C is NoneType"):
        quack_cpp.gemm_add(A, B, None)


@cuda_only
@pytest.mark.parametrize("M,N,K", [(129, 131, 72), (300, 264, 1000), (1, 131, 64), (7, 9, 8)])
@pytest.mark.parametrize("dtype", [bf16, f32], ids=str)
def test_c_api_poisoned_padded_d(M, N, K, dtype):
    # D with NaN everywhere, rows padded past N: every (M, N) element is written, and nothing
    # in the padding (the exact-N-tail contract of the C++).
    A, B = mat(M, K), mat(K, N, "col")
    ld = -(-N // 8) * 8 + 8
    Dp = torch.full((M, ld), float("nan"), device="cuda", dtype=dtype)
    D = Dp[:, :N]
    gemm_ops._launch(A, B, None, D, 1.0, 0.0)
    check("D", D, ref_gemm(A, B), torch_gemm(A, B, out_dtype=dtype))
    assert torch.isnan(Dp[:, N:]).all(), "the kernel wrote into the row padding"


@pytest.mark.parametrize("grad", [False, pytest.param(True, marks=all_majors)])
def test_opcheck(grad):
    A = mat(33, 72).requires_grad_(grad)
    B = mat(72, 136, "col").requires_grad_(grad)
    C = mat(33, 136, dtype=f32).requires_grad_(grad)
    torch.library.opcheck(torch.ops.quack_cpp.gemm.default, (A, B, C, 0.5, 2.0, f32))
    torch.library.opcheck(torch.ops.quack_cpp.gemm.default, (A, B, None, 1.0, 0.0, bf16))
    if not grad:
        out = mat(33, 136, dtype=f32)
        torch.library.opcheck(torch.ops.quack_cpp.gemm_add_inplace.default,
                              (A, B, out, 1.0, 1.0))


# dynamic_scheduler (QuACK's keyword; GemmArgs::tile_counter): which cluster computes a tile
# changes, not what it computes, so the result equals the static schedule's bit for bit. Shapes
# of several waves (4096 x 4096 x 256: ~8 waves of 128x128 pingpong tiles), a batch, C read, in
# place; each launch must leave the stream's counter at 0 (the next call reuses it as is), and
# every dynamic call must hand _C.gemm a counter (bitwise equality alone would pass if the flag
# were dropped: a null counter is the static schedule).
@pytest.mark.parametrize("M,N,K,layout,L", [
    (4096, 4096, 256, "rc", None), (3000, 4608, 384, "rr", None), (2048, 1536, 256, "rc", 3)])
def test_dynamic_scheduler_bitwise(M, N, K, layout, L, monkeypatch):
    from quack_cpp import gemm_ops as gm

    handed = []
    real = gm._C

    class Spy:  # _C with gemm's tile_counter argument recorded
        def __getattr__(self, name):
            return getattr(real, name)

        def gemm(self, *args):
            handed.append(args[16])  # tile_counter
            return real.gemm(*args)

    monkeypatch.setattr(gm, "_C", Spy())
    A, B = mat(M, K, L=L), mat(K, N, "col" if layout[1] == "c" else "row", L=L)
    C = mat(M, N, dtype=f32, L=L)
    static = quack_cpp.gemm(A, B)
    runs = [quack_cpp.gemm(A, B, dynamic_scheduler=True) for _ in range(2)]  # kept alive
    for D in runs:
        assert torch.equal(D, static)
    check("D", static, ref_gemm(A, B), torch_gemm(A, B))
    added = quack_cpp.gemm_add(A, B, C, beta=0.5, out_dtype=f32)
    assert torch.equal(quack_cpp.gemm_add(A, B, C, beta=0.5, out_dtype=f32,
                                          dynamic_scheduler=True), added)
    out = C.clone()
    quack_cpp.gemm_add_inplace(A, B, out, beta=1.0, dynamic_scheduler=True)
    expect = C.clone()
    quack_cpp.gemm_add_inplace(A, B, expect, beta=1.0)
    assert torch.equal(out, expect)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
        key = (A.get_device(), torch.cuda.current_stream().cuda_stream)
        counter = gm._TILE_COUNTERS[key]
        assert counter.item() == 0, "a launch left the tile counter off 0"
        dyn = [h for h in handed if h]
        assert dyn == [counter.data_ptr()] * 4, f"tile counters handed: {handed}"


def test_dynamic_scheduler_backward():
    A = mat(512, 384).detach().requires_grad_()
    B = mat(384, 640, "col").detach().requires_grad_()
    g = mat(512, 640)
    grads = []
    for dyn in (False, True):
        A.grad = B.grad = None
        D = quack_cpp.gemm(A, B, dynamic_scheduler=dyn)
        D.backward(g)
        grads.append((D.detach(), A.grad, B.grad))
    for x, y in zip(*grads):
        assert torch.equal(x, y)


@cuda_only
def test_dynamic_scheduler_streams_and_graph():
    from quack_cpp import gemm_ops as gm

    A, B = mat(4096, 256), mat(256, 4096, "col")  # ~8 waves of tiles
    static = quack_cpp.gemm(A, B)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # another stream: its own counter
        D = quack_cpp.gemm(A, B, dynamic_scheduler=True)
    torch.cuda.current_stream().wait_stream(s)
    assert torch.equal(D, static)
    # Inside a capture: a counter per captured call, zeroed by the graph itself, none cached.
    cached = dict(gm._TILE_COUNTERS)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        E = quack_cpp.gemm(A, B, dynamic_scheduler=True)
    assert gm._TILE_COUNTERS == cached
    for _ in range(3):
        A.copy_(torch.randn_like(A, dtype=f32).to(bf16))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(E, quack_cpp.gemm(A, B))


def test_dynamic_scheduler_compile():
    _reset_dynamo()
    A, B = mat(512, 256), mat(256, 768, "col")
    f = torch.compile(lambda a, b: quack_cpp.gemm(a, b, dynamic_scheduler=True), fullgraph=True,
                      dynamic=False)
    assert torch.equal(f(A, B), quack_cpp.gemm(A, B))
