"""The GEMM torch layer's plumbing without a GPU: quack_cpp::gemm / gemm_add_inplace get CPU
kernels written in torch after the C++ contract (cpu_stand_in.py), so the wrappers (output
layout, dtype defaults, which gradients are computed and how, fused gradient accumulation),
the fake kernels (opcheck, FakeTensorMode, meta), torch.compile(fullgraph=True) tracing and
nn.Linear compatibility are checked on CPU; the C++'s own errors are reached through the real
launch path with host tensors. The CUDA kernels are tested in test_gemm.py / test_linear.py.
Needs torch (any build) and an importable quack_cpp."""

import inspect

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
gemm_ops = pytest.importorskip("quack_cpp.gemm_ops")
qnn = pytest.importorskip("quack_cpp.nn")

import cpu_stand_in  # noqa: E402

f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16


@pytest.fixture
def cpu_kernels():
    with cpu_stand_in.registered():
        yield


def rand(*shape, dtype=bf16):
    return torch.randn(*shape).to(dtype)


# --------------------------------------------------------------------------------------------
# nn.Linear: a drop-in (no kernels needed)
# --------------------------------------------------------------------------------------------


def test_linear_signature_state_dict_repr():
    params = list(inspect.signature(qnn.Linear.__init__).parameters)
    assert params[:6] == ["self", "in_features", "out_features", "bias", "device", "dtype"]
    q = qnn.Linear(64, 32)
    t = torch.nn.Linear(64, 32, bias=False)
    assert isinstance(q, torch.nn.Linear) and q.bias is None
    assert repr(q) == repr(t) and list(q.state_dict()) == ["weight"]
    q.load_state_dict(t.state_dict(), strict=True)
    assert torch.equal(q.weight, t.weight) and q.weight.shape == (32, 64)
    t.load_state_dict(q.state_dict(), strict=True)
    qb = qnn.Linear(64, 32, bias=True)
    tb = torch.nn.Linear(64, 32)
    assert repr(qb) == repr(tb) and list(qb.state_dict()) == ["weight", "bias"]
    qb.load_state_dict(tb.state_dict(), strict=True)
    x = torch.randn(5, 64)  # fp32 on the CPU: torch's own linear
    assert torch.equal(qb(x), tb(x))


def test_linear_cpu_without_stand_in_is_torch():
    q = qnn.Linear(64, 32, dtype=bf16)
    x = rand(5, 64)
    assert torch.equal(q(x), torch.nn.functional.linear(x, q.weight))


@pytest.mark.parametrize("act", ["gelu_tanh_approx", "swiglu"])
def test_linear_act_fallback_store_preact(act):
    # The torch fallback (CPU, fp32): preact None when not stored (store_preact=False and no
    # gradient recorded), as linear_act; DActLinear takes that None as a plain linear of postact.
    fc1 = qnn.LinearAct(16, 24, activation=act, store_preact=False)
    fc2 = qnn.DActLinear(12 if act == "swiglu" else 24, 8, activation=act)
    x = torch.randn(5, 16)
    with torch.no_grad():
        pre, post = fc1(x)
        assert pre is None and post.shape == (5, fc2.in_features)
        assert torch.equal(fc2(pre, post), torch.nn.functional.linear(post, fc2.weight))
    pre, post = fc1(x)  # fc1.weight requires grad: preact is kept for a backward
    assert pre is not None and pre.shape == (5, 24)
    fc1.store_preact = True
    with torch.no_grad():
        assert fc1(x)[0] is not None


def test_docstrings():
    for fn in (quack_cpp.gemm, quack_cpp.gemm_add, quack_cpp.gemm_add_inplace, quack_cpp.linear,
               qnn.Linear):
        doc = fn.__doc__
        assert doc and "Raises" in doc and "QuACK 0.2.0" in doc, fn


# --------------------------------------------------------------------------------------------
# Layout helpers, shapes, Python-level errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,dtype,strides", [((5, 16), bf16, (16, 1)), ((5, 13), bf16, (16, 1)),
                                                 ((5, 13), f32, (16, 1)), ((2, 3, 6), f32, (24, 8, 1)),
                                                 ((1, 1), bf16, (8, 1))])
def test_output_layout(shape, dtype, strides):
    assert gemm_ops._row_major(shape, dtype, torch.empty(0)).stride() == strides


def test_as_operand():
    t = rand(8, 16)
    assert gemm_ops._as_operand(t) is t
    padded = rand(8, 24)[:, :13]
    assert gemm_ops._as_operand(padded) is padded
    for bad in (rand(1, 16).expand(8, 16), rand(8, 17)[:, 1:], rand(16, 8).T, rand(8, 13)):
        out = gemm_ops._as_operand(bad)
        assert out is not bad and torch.equal(out, bad) and out.stride(-1) == 1
        assert out.stride(0) % 8 == 0


def test_python_level_errors(cpu_kernels):
    A, B = rand(4, 16), rand(16, 8)
    with pytest.raises(ValueError, match=r"^gemm: b has shape \(15, 8\) bfloat16, expected "
                                         r"\(K, N\) = \(16, \*\)$"):
        quack_cpp.gemm(A, rand(15, 8))
    with pytest.raises(ValueError, match=r"^gemm: b has 3 dimensions"):
        quack_cpp.gemm(A, rand(1, 16, 8))
    with pytest.raises(ValueError, match=r"^gemm: a has 1 dimensions \(16,\) bfloat16"):
        quack_cpp.gemm(rand(16), B)
    with pytest.raises(ValueError, match=r"^gemm: b has shape \(3, 16, 8\) bfloat16, expected "
                                         r"\(L, K, N\) = \(2, 16, \*\)"):
        quack_cpp.gemm(rand(2, 4, 16), rand(3, 16, 8))
    with pytest.raises(ValueError, match="out_dtype is torch.int32"):
        quack_cpp.gemm(A, B, out_dtype=torch.int32)
    with pytest.raises(ValueError, match="linear: x .* expected both bfloat16 or both float16"):
        quack_cpp.linear(rand(4, 16, dtype=f32), rand(8, 16))
    # Device scalars: one float32 element on A's device, else a clear error before any launch.
    with pytest.raises(ValueError, match=r"^gemm: alpha is a tensor of shape \(2,\) float32 on cpu, "
                                         r"expected one float32 element on cpu"):
        quack_cpp.gemm(A, B, alpha=torch.ones(2))
    with pytest.raises(ValueError, match=r"^gemm_add: beta is a tensor of shape \(1,\) bfloat16"):
        quack_cpp.gemm_add(A, B, rand(4, 8), beta=torch.ones(1, dtype=bf16))


def test_ops_check_device_scalars():
    # torch.ops.quack_cpp.gemm / gemm_add_inplace called directly (no functional API): the impls
    # and the fakes check alpha_t / beta_t themselves, before anything reaches the kernel.
    A, B, out = rand(4, 16), rand(16, 8), rand(4, 8)
    with pytest.raises(ValueError, match=r"^gemm: alpha_t is a tensor of shape \(1,\) bfloat16 on "
                                         r"cpu, expected one float32 element on cpu \(or None\)$"):
        gemm_ops._gemm_impl(A, B, None, 1.0, 0.0, bf16, False, torch.ones(1, dtype=bf16), None)
    with pytest.raises(ValueError, match=r"^gemm_add_inplace: beta_t is a tensor of shape \(2,\) "
                                         r"float32 on cpu, expected one float32 element"):
        gemm_ops.GemmAddInplace.impl(A, B, out, 1.0, 1.0, False, None, torch.ones(2))
    meta = dict(device="meta")
    Am, Bm, Cm = (torch.empty(*t.shape, dtype=t.dtype, **meta) for t in (A, B, out))
    with pytest.raises(ValueError, match=r"^gemm: beta_t is a tensor of shape \(1,\) bfloat16 on "
                                         r"meta, expected one float32 element on meta"):
        torch.ops.quack_cpp.gemm(Am, Bm, Cm, 1.0, 1.0, bf16, False, None,
                                 torch.ones(1, dtype=bf16, **meta))
    with pytest.raises(ValueError, match=r"^gemm_add_inplace: alpha_t is a tensor of shape \(2,\)"):
        torch.ops.quack_cpp.gemm_add_inplace(Am, Bm, Cm, 1.0, 1.0, False,
                                             torch.ones(2, **meta), None)
    D = torch.ops.quack_cpp.gemm(Am, Bm, None, 1.0, 0.0, bf16, False, torch.ones(1, **meta), None)
    assert D.shape == (4, 8)


def test_cpu_tensors_rejected_without_stand_in():
    with pytest.raises(ValueError, match=r"^gemm: A is on cpu, expected a CUDA tensor"):
        quack_cpp.gemm(rand(4, 16), rand(16, 8))
    with pytest.raises(ValueError, match=r"^gemm_add_inplace: out is on cpu"):
        quack_cpp.gemm_add_inplace(rand(4, 16).to("meta"), rand(16, 8).to("meta"), rand(4, 8))


@pytest.mark.skipif(not hasattr(quack_cpp._C, "gemm"), reason="extension built before gemm")
def test_cpp_errors_reach_python_unchanged():
    # The real launch path with host tensors: the C++ validates before any CUDA call.
    A, B, D = rand(4, 16), rand(16, 8), torch.empty(4, 8, dtype=bf16)
    with pytest.raises(ValueError, match=r"^gemm: a is in host memory, expected a CUDA tensor$"):
        gemm_ops._launch(A, B, None, D, 1.0, 0.0)
    with pytest.raises(ValueError, match=r"^gemm: a has dtype float64, expected"):  # the tuple
        gemm_ops._launch(A.double(), B, None, D, 1.0, 0.0)


@pytest.mark.skipif(not hasattr(quack_cpp._C, "gemm"), reason="extension built before gemm")
def test_layout_caches_match_uncached(monkeypatch):
    """_accepts and _gemm_impl's plans (_new_out_and_args: D's layout, the _C.gemm tensor
    arguments) are cached by layout metadata: a hit gives the uncached answer for every major,
    padding, misalignment, batch and dtype tried; errors are not cached; a replaced
    _can_implement is asked again."""
    M, K, N = 8, 16, 24
    As = [rand(M, K), rand(K, M).mT, rand(M, K + 8)[:, :K], rand(M, K + 1)[:, :K],
          rand(M, K, dtype=f16)]
    Bs = [rand(K, N), rand(N, K).mT, rand(K, N + 8)[:, :N], rand(N, K + 1)[:, :K].mT]
    cases = [(a, b) for a in As for b in Bs] + [(rand(2, M, K), rand(2, N, K).mT),
                                                (rand(2, M, K), rand(2, K, N))]
    for A, B in cases:
        for dtype in (A.dtype, f32):
            shape = (A.shape[0], M, N) if A.dim() == 3 else (M, N)
            for col in (False, True):
                want = gemm_ops._accepts_uncached(A, B, None, (shape, dtype, col), 0.0)
                for _ in range(2):  # miss, then hit
                    assert gemm_ops._accepts(A, B, None, (shape, dtype, col), 0.0) == want
            want = gemm_ops._new_out(A, B, None, 0.0, dtype)
            for _ in range(2):
                got, args = gemm_ops._new_out_and_args(A, B, None, dtype)
                assert (got.shape, got.stride(), got.dtype) == (want.shape, want.stride(), dtype)
                assert args == tuple(gemm_ops.tensor_arg(t, "gemm", n)
                                     for t, n in ((A, "a"), (B, "b"), (None, "c"), (got, "d")))
    for _ in range(2):
        with pytest.raises(ValueError, match=r"^gemm: b has shape \(15, 24\) bfloat16"):
            gemm_ops._new_out_and_args(rand(M, K), rand(K - 1, N), None, bf16)
    A, B, spec = rand(M, K), rand(K, N), ((M, N), bf16, False)
    monkeypatch.setattr(gemm_ops, "_can_implement", lambda *a: False)
    assert not gemm_ops._accepts(A, B, None, spec)
    monkeypatch.setattr(gemm_ops, "_can_implement", lambda *a: True)
    assert gemm_ops._accepts(A, B, None, spec)


# --------------------------------------------------------------------------------------------
# Fake kernels, opcheck, meta
# --------------------------------------------------------------------------------------------


def test_fake_and_meta_shapes(cpu_kernels):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        D = quack_cpp.gemm_add(torch.empty(3, 5, 16, dtype=bf16), torch.empty(3, 16, 13, dtype=bf16),
                               torch.empty(3, 5, 13), out_dtype=f32)
        assert D.shape == (3, 5, 13) and D.dtype == f32 and D.stride() == (80, 16, 1)
    D = quack_cpp.gemm(torch.empty(5, 16, dtype=bf16, device="meta"),
                       torch.empty(16, 24, dtype=bf16, device="meta"))
    assert D.device.type == "meta" and D.shape == (5, 24) and D.is_contiguous()
    m = qnn.Linear(16, 24, dtype=bf16, device="meta")
    assert m(torch.empty(2, 7, 16, dtype=bf16, device="meta")).shape == (2, 7, 24)


def test_opcheck(cpu_kernels):
    A = rand(5, 16).requires_grad_(True)
    B = rand(16, 13).requires_grad_(True)
    C = rand(5, 13, dtype=f32).requires_grad_(True)
    dyn = (False, None, None, None, None, True)  # tuned .. colvec_bias, dynamic_scheduler
    for args in [(A, B, C, 0.5, 2.0, f32), (A, B, None, 1.0, 0.0, bf16),
                 (A.detach(), B.detach(), C.detach(), 1.0, 0.0, f32), (A, B.detach(), None, 2.0, 0.0, f32),
                 (A, B, C, 0.5, 2.0, f32) + dyn]:
        torch.library.opcheck(torch.ops.quack_cpp.gemm.default, args)
    out = rand(5, 13, dtype=f32)
    torch.library.opcheck(torch.ops.quack_cpp.gemm_add_inplace.default,
                          (A.detach(), B.detach(), out, 1.0, 1.0))
    torch.library.opcheck(torch.ops.quack_cpp.gemm_add_inplace.default,
                          (A.detach(), B.detach(), out, 1.0, 1.0, False, None, None, True))


# --------------------------------------------------------------------------------------------
# Autograd plumbing
# --------------------------------------------------------------------------------------------


def _spy(monkeypatch):
    """Records (op name, args) of the GEMM ops the layer calls; tensors as (dtype, stride,
    data_ptr) so that no reference is kept (AccumulateGrad steals only unshared gradients)."""
    calls = []

    def light(a):
        return (a.dtype, a.stride(), a.data_ptr()) if isinstance(a, torch.Tensor) else a

    for name in ("gemm_op", "gemm_add_inplace_op"):
        real = getattr(gemm_ops, name)
        monkeypatch.setattr(gemm_ops, name, lambda *a, _r=real, _n=name:
                            calls.append((_n, tuple(map(light, a)))) or _r(*a))
    return calls


def test_backward_computes_only_needed_grads(cpu_kernels, monkeypatch):
    A, B = rand(5, 16).requires_grad_(True), rand(16, 24)
    D = quack_cpp.gemm(A, B, out_dtype=f32, alpha=2.0)
    calls = _spy(monkeypatch)
    D.sum().backward()  # fp32 stride-0 dD: cast to A's dtype, made a row-major operand
    assert len(calls) == 1 and B.grad is None
    (_, (dD, Bt, c, alpha, beta, out_dtype, tuned, alpha_t, beta_t)), = calls
    assert (tuned, alpha_t, beta_t) == (False, None, None)
    assert dD[:2] == (bf16, (24, 1)) and Bt[:2] == (bf16, (1, 24))
    assert (c, alpha, beta, out_dtype) == (None, 2.0, 0.0, bf16)
    torch.testing.assert_close(A.grad, (2 * torch.ones(5, 24) @ B.float().T).to(bf16))


def test_gemm_add_grads(cpu_kernels):
    A, B = rand(5, 16).requires_grad_(True), rand(16, 24).requires_grad_(True)
    C = rand(5, 24, dtype=f32).requires_grad_(True)
    dD = torch.randn(5, 24)
    quack_cpp.gemm_add(A, B, C, alpha=0.5, beta=-3.0, out_dtype=f32).backward(dD)
    assert C.grad.dtype == f32 and torch.equal(C.grad, -3.0 * dD)
    torch.testing.assert_close(A.grad.float(), 0.5 * dD @ B.detach().float().T, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(B.grad.float(), 0.5 * A.detach().float().T @ dD, rtol=2e-2, atol=2e-2)


def test_linear_fuse_semantics(cpu_kernels, monkeypatch):
    # As if the C++ accepted every layout (the extension here may predate that).
    monkeypatch.setattr(gemm_ops, "_can_implement", lambda *a: True)
    q = qnn.Linear(16, 24, dtype=bf16, fuse_grad_accum=True)
    x = rand(3, 4, 16)
    calls = _spy(monkeypatch)
    q(x).sum().backward()  # no weight.grad yet: plain wgrad
    assert [n for n, _ in calls] == ["gemm_op", "gemm_op"]
    g1, ptr = q.weight.grad.clone(), q.weight.grad.data_ptr()
    calls.clear()
    q(x).sum().backward()
    assert [n for n, _ in calls] == ["gemm_op", "gemm_add_inplace_op"]
    assert calls[1][1][2][2] == ptr and q.weight.grad.data_ptr() == ptr
    torch.testing.assert_close(q.weight.grad, (2 * g1.float()).to(bf16))
    # x without grad: no dgrad; weight frozen: no wgrad.
    calls.clear()
    q.weight.requires_grad_(False)
    xr = x.clone().requires_grad_(True)
    q(xr).sum().backward()
    assert [n for n, _ in calls] == ["gemm_op", "gemm_op"] and xr.grad.shape == x.shape


def test_linear_wgrad_without_kernel_for_weight_dtype(cpu_kernels, monkeypatch):
    # A C++ without an fp16 -> fp32 instance for the wgrad's layouts: dW in fp16, then cast;
    # weight.grad (fp32) is then accumulated by autograd, not in place.
    monkeypatch.setattr(gemm_ops, "_can_implement", lambda a, b, c, d, beta: d[1] != 0)
    q = qnn.Linear(16, 24, fuse_grad_accum=True)
    x = torch.randn(3, 16)
    calls = _spy(monkeypatch)
    for _ in range(2):
        with torch.autocast("cpu", dtype=f16):
            y = q(x)
        y.float().sum().backward()
    assert [n for n, _ in calls].count("gemm_add_inplace_op") == 0
    assert all(a[5] == f16 for n, a in calls)  # every GEMM output in fp16
    assert q.weight.grad.dtype == f32
    ref = 2 * (torch.ones(3, 24).half().float().T @ x.half().float())
    torch.testing.assert_close(q.weight.grad, ref, rtol=1e-2, atol=1e-2)


def test_linear_autocast_cpu(cpu_kernels):
    q = qnn.Linear(16, 24)
    x = torch.randn(4, 16, requires_grad=True)
    with torch.autocast("cpu", dtype=bf16):
        y = q(x)
    assert y.dtype == bf16
    y.float().sum().backward()
    assert q.weight.grad.dtype == f32 and x.grad.dtype == f32


# --------------------------------------------------------------------------------------------
# torch.compile(fullgraph=True)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph(cpu_kernels, backend):
    torch._dynamo.reset()
    A, B, C = rand(8, 16), rand(16, 24), rand(8, 24, dtype=f32)
    q = qnn.Linear(24, 32, dtype=bf16, fuse_grad_accum=True)

    def f(A, B, C, out):
        D = quack_cpp.gemm_add(A, B, C, alpha=0.5, beta=2.0, out_dtype=f32)
        quack_cpp.gemm_add_inplace(A, B, out, beta=-1.0)
        return (q(D.to(bf16)).float().square().sum() + out.sum())

    def grads(fn):
        q.weight.grad = torch.ones_like(q.weight)  # compiled: never fused, still accumulated
        leaves = [t.detach().clone().requires_grad_(True) for t in (A, B, C)]
        out = C.detach().clone()
        loss = fn(*leaves, out)
        loss.backward()
        return [loss.detach(), out, q.weight.grad.clone()] + [t.grad for t in leaves]

    eager = grads(f)
    compiled = grads(torch.compile(f, fullgraph=True, backend=backend, dynamic=False))
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c, e, rtol=2e-2, atol=2e-2)


def test_tuned_flag_reaches_the_op(cpu_kernels):
    """tuned=True is part of the custom ops' schema and does not change the result (the C++
    picks a tile configuration; the CPU stand-in ignores it)."""
    assert "tuned" in str(torch.ops.quack_cpp.gemm.default._schema)
    assert "tuned" in str(torch.ops.quack_cpp.gemm_add_inplace.default._schema)
    a, b = rand(33, 40), rand(40, 24)
    c = rand(33, 24)
    torch.testing.assert_close(quack_cpp.gemm(a, b, tuned=True), quack_cpp.gemm(a, b))
    torch.testing.assert_close(quack_cpp.gemm_add(a, b, c, beta=0.5, tuned=True),
                               quack_cpp.gemm_add(a, b, c, beta=0.5))
    x, w = rand(6, 40).requires_grad_(True), rand(24, 40).requires_grad_(True)
    y = quack_cpp.linear(x, w, tuned=True)
    y.backward(torch.ones_like(y))
    assert x.grad is not None and w.grad is not None
    m = qnn.Linear(40, 24, dtype=bf16, tuned=True)
    assert m.tuned and m(rand(3, 40)).shape == (3, 24)
    out, ref = c.clone(), c.clone()
    quack_cpp.gemm_add_inplace(a, b, out, tuned=True)
    quack_cpp.gemm_add_inplace(a, b, ref)
    torch.testing.assert_close(out, ref)
