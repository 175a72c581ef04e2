"""The eager fast path's plumbing without a GPU (``quack_cpp._registrar.route``,
``ops.rmsnorm_fwd`` / ``rmsnorm_bwd``, ``gemm_ops.gemm_op`` / ``gemm_add_inplace_op`` /
``linear_op``: the registered ops and their ``Function``).

Checks which path a call takes: the custom ops for CPU, meta and fake tensors, subclasses,
dispatch modes, functorch transforms, jit tracing, torch.compile and ``FORCE_CUSTOM_OP``
(``QUACK_EAGER_CUSTOM_OP=1``). Then, with CPU tensors let through the predicate ("as if CUDA")
and the custom ops' own bodies registered as their CPU kernels, that both paths make the same
``_C`` calls (a recording ``_C``), give the same values bit for bit (CPU stand-in
implementations), bump the same version counters and raise the same errors. The CUDA side
(real kernels, CUDA graphs) is test_fastpath.py. Needs torch (any build) and quack_cpp."""

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
ops = pytest.importorskip("quack_cpp.ops")
gemm_ops = pytest.importorskip("quack_cpp.gemm_ops")
reg = pytest.importorskip("quack_cpp._registrar")

import cpu_stand_in  # noqa: E402

f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16


def _cpu_as_cuda(t):
    # _registrar._is_plain_cuda with the CPU in the CUDA device's place.
    return (type(t) in reg._PLAIN_TYPES and t.device.type == "cpu" and t.layout == torch.strided
            and not t.is_nested and t.dtype in reg.KERNEL_DTYPES and not reg._is_wrapped(t))


class RecordingC:
    """Stands in for quack_cpp._C: records the launches with each call's pointers renamed p0,
    p1, ... in order of appearance (aliasing shows, addresses do not), writes nothing; any
    other attribute (gemm_can_implement, ...) is the real extension's."""

    def __init__(self, real):
        self._real = real
        self.calls = []

    def __getattr__(self, name):
        return getattr(self._real, name)

    def _record(self, name, args, ptr_slots=()):
        names = {}

        def tag(p):
            return names.setdefault(p, f"p{len(names)}") if p else 0

        rec = [(tag(a[0]),) + tuple(a[1:]) if isinstance(a, tuple) else
               tag(a) if i in ptr_slots else a for i, a in enumerate(args)]
        self.calls.append((name, tuple(rec)))

    def rmsnorm_fwd(self, *a):
        self._record("rmsnorm_fwd", a)

    def rmsnorm_bwd_workspace_size(self, *a):
        self._record("rmsnorm_bwd_workspace_size", a)
        return 64

    def rmsnorm_bwd(self, *a):
        self._record("rmsnorm_bwd", a, ptr_slots=(9,))

    def gemm(self, *a):
        self._record("gemm", a, ptr_slots=(8, 9))


@pytest.fixture
def as_cuda(monkeypatch):
    """CPU tensors pass eager_fast_path and the functional API's device check, and the custom
    ops' CPU kernels are their own bodies (what runs for CUDA tensors)."""
    monkeypatch.setattr(reg, "_is_plain_cuda", _cpu_as_cuda)
    monkeypatch.setattr(reg, "DEVICE_TYPES", reg.DEVICE_TYPES + ("cpu",))
    monkeypatch.setattr(ops, "FORCE_CUSTOM_OP", False)
    monkeypatch.setattr(reg, "CPP_EAGER", False)  # the Python fast path (C++ one: test_torch_ext)
    lib = torch.library.Library("quack_cpp", "IMPL")
    for op in (ops.rmsnorm_fwd, ops.rmsnorm_bwd, gemm_ops.gemm_op, gemm_ops.gemm_add_inplace_op):
        lib.impl(op.__name__, op.kernel, "CPU")
    yield
    lib._destroy()


@pytest.fixture
def recorder(as_cuda, monkeypatch):
    rec = RecordingC(ops._C)
    monkeypatch.setattr(ops, "_C", rec)
    monkeypatch.setattr(gemm_ops, "_C", rec)
    return rec


@pytest.fixture
def stand_in(as_cuda, monkeypatch):
    """The ops' implementations replaced by the CPU stand-ins (both paths call ``op.impl``)."""
    for op, fn in ((ops.rmsnorm_fwd, cpu_stand_in.rmsnorm_fwd_cpu),
                   (ops.rmsnorm_bwd, cpu_stand_in.rmsnorm_bwd_cpu),
                   (gemm_ops.gemm_op, cpu_stand_in.gemm_cpu),
                   (gemm_ops.gemm_add_inplace_op, cpu_stand_in.gemm_add_inplace_cpu)):
        monkeypatch.setattr(op, "impl", fn)


def _both(fn, monkeypatch):
    """fn() on the fast path, then on the custom ops."""
    fast = fn()
    monkeypatch.setattr(ops, "FORCE_CUSTOM_OP", True)
    try:
        slow = fn()
    finally:
        monkeypatch.setattr(ops, "FORCE_CUSTOM_OP", False)
    return fast, slow


def _meta(t):
    return None if t is None else (t.dtype, tuple(t.shape), t.stride(), t.requires_grad)


def _assert_same(fast, slow, values):
    assert len(fast) == len(slow)
    for i, (a, b) in enumerate(zip(fast, slow)):
        assert _meta(a) == _meta(b), i
        if values and a is not None:
            assert torch.equal(a, b), i


# --------------------------------------------------------------------------------------------
# The predicate
# --------------------------------------------------------------------------------------------


def test_predicate_real_tensors_without_cuda():
    assert not ops.eager_fast_path(torch.randn(4))
    assert not ops.eager_fast_path(torch.empty(4, device="meta"))
    assert not ops.eager_fast_path(None, torch.randn(4, dtype=bf16))
    assert ops.eager_fast_path() and ops.eager_fast_path(None)  # nothing to refuse


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
def test_predicate_rules(as_cuda, monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    x = torch.randn(4, 8)
    p = torch.nn.Parameter(torch.randn(8))
    assert ops.eager_fast_path(x, p, None) and ops.eager_fast_path(x.to(bf16), x.to(f16))

    class Sub(torch.Tensor):
        pass

    for bad in (x.double(), x.int(), x.as_subclass(Sub), x.to_sparse(),
                torch.nested.nested_tensor([x, x])):
        assert not ops.eager_fast_path(x, bad), bad.__class__
    monkeypatch.setattr(ops, "FORCE_CUSTOM_OP", True)
    assert not ops.eager_fast_path(x)
    monkeypatch.setattr(ops, "FORCE_CUSTOM_OP", False)

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Mode():
        assert not ops.eager_fast_path(x)
    with FakeTensorMode():
        assert not ops.eager_fast_path(x)
    seen = []

    def probe(t):
        seen.append(ops.eager_fast_path(t))
        return t * 2

    torch.vmap(probe)(x)
    torch.func.grad(lambda t: probe(t).sum())(x)
    torch.func.functionalize(probe)(x)
    torch.jit.trace(probe, (x,), check_trace=False)
    assert seen == [False] * 4
    torch._dynamo.reset()
    f = torch.compile(lambda t: t + 1 if ops.eager_fast_path(t) else t - 1, fullgraph=True,
                      backend="eager")
    assert torch.equal(f(x), x - 1)


def test_env_switch_read_at_import():
    code = "import quack_cpp.ops as o; print(o.FORCE_CUSTOM_OP)"
    for value, want in (("1", "True"), ("0", "False")):
        env = dict(os.environ, QUACK_EAGER_CUSTOM_OP=value, PYTHONPATH=os.pathsep.join(sys.path))
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert res.returncode == 0, (value, res.returncode, res.stderr[-2000:])
        assert res.stdout.split()[-1] == want, (value, res.stdout)


# --------------------------------------------------------------------------------------------
# RMSNorm: the same _C calls and the same values on both paths
# --------------------------------------------------------------------------------------------

RMS_CASES = [
    # shape, x dtype, weight dtype, residual, its dtype, bias, prenorm, residual_dtype arg,
    # which of x, w, b, r require grad
    ((4, 3, 64), f32, f32, False, None, False, False, None, "xw"),
    ((4, 3, 64), bf16, f32, False, None, True, False, None, "xwb"),
    ((5, 64), bf16, bf16, True, None, False, False, None, "xwr"),
    ((5, 64), bf16, f32, True, None, True, True, None, "xwbr"),
    ((2, 5, 64), bf16, f32, True, f32, False, True, None, "xr"),
    ((2, 5, 64), f16, f32, True, None, False, True, f32, "w"),
    ((7, 64), bf16, f32, False, None, False, True, f32, "x"),
    ((7, 64), bf16, None, False, None, False, True, None, "x"),
    ((64,), f32, f32, False, None, False, False, None, ""),
    ((5, 64), bf16, f32, True, f32, True, True, None, ""),
]


def _rms_run(case):
    """rmsnorm forward and backward (random dy for each differentiable output); returns the
    outputs, the grads of x, w, b, r, and whether the fast path's Function recorded it."""
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
    base = outs[0] if outs[0]._base is None else outs[0]._base  # (..., N): a view
    fast = ops.rmsnorm_fwd.is_fast_node(base.grad_fn)
    diff = [o for o in outs if o.requires_grad]
    if diff:
        torch.autograd.backward(diff, [torch.randn(o.shape, generator=g).to(o.dtype)
                                       for o in diff])
    return list(outs) + [t.grad if t is not None else None for t in leaves], fast


@pytest.mark.parametrize("case", RMS_CASES, ids=lambda c: f"{c[0]}-{c[1]}-w{c[2]}-r{c[3]}{c[4]}"
                         f"-b{c[5]}-pre{c[6]}-rd{c[7]}-grad{c[8] or 'none'}")
def test_rmsnorm_same_c_calls(recorder, monkeypatch, case):
    def go():
        recorder.calls.clear()
        res, fast = _rms_run(case)
        return res, fast, list(recorder.calls)

    (fres, ffast, fcalls), (sres, sfast, scalls) = _both(go, monkeypatch)
    assert ffast == bool(case[-1]) and not sfast  # Function only where autograd records
    assert fcalls == scalls and fcalls[0][0] == "rmsnorm_fwd"
    assert (fcalls[-1][0] == "rmsnorm_bwd") == bool(case[-1])
    _assert_same(fres, sres, values=False)


@pytest.mark.parametrize("case", RMS_CASES, ids=lambda c: f"{c[0]}-{c[1]}-grad{c[8] or 'none'}")
def test_rmsnorm_same_values(stand_in, monkeypatch, case):
    (fres, _), (sres, _) = _both(lambda: _rms_run(case), monkeypatch)
    _assert_same(fres, sres, values=True)


def test_rmsnorm_only_residual_out_used(recorder, monkeypatch):
    # d(out) is None: the backward's stride-0 zeros go to _C on both paths alike.
    def go():
        recorder.calls.clear()
        x, r = (torch.randn(6, 64).requires_grad_(True) for _ in range(2))
        _, h = quack_cpp.rmsnorm(x, torch.ones(64), residual=r, prenorm=True)
        h.backward(torch.ones_like(h))
        return list(recorder.calls)

    fast, slow = _both(go, monkeypatch)
    assert fast == slow and fast[-1][1][2][3] == (0, 0)  # dout strides


def test_create_graph_double_backward(stand_in, monkeypatch):
    # rmsnorm_bwd has no autograd formula: double backward fails alike on both paths; the
    # GEMM's backward is differentiable on both and gives the same second derivatives.
    def rms():
        x = torch.randn(4, 64, generator=torch.Generator().manual_seed(1)).requires_grad_(True)
        y = quack_cpp.rmsnorm(x, torch.ones(64))
        gx, = torch.autograd.grad(y.square().sum(), x, create_graph=True)
        with pytest.raises(RuntimeError) as e:
            gx.sum().backward()
        return str(e.value)

    fast, slow = _both(rms, monkeypatch)
    assert fast == slow and "no autograd formula" in fast

    def mm():
        g = torch.Generator().manual_seed(2)
        A, B = (torch.randn(s, generator=g).requires_grad_(True) for s in ((8, 16), (16, 24)))
        gA, = torch.autograd.grad(quack_cpp.gemm(A, B, out_dtype=f32).square().sum(), A,
                                  create_graph=True)
        gA.square().sum().backward()
        return [gA.detach(), A.grad, B.grad]

    fast, slow = _both(mm, monkeypatch)
    _assert_same(fast, slow, values=True)


# --------------------------------------------------------------------------------------------
# GEMM, gemm_add, gemm_add_inplace, linear
# --------------------------------------------------------------------------------------------


def _rand(g, *shape, dtype=bf16, grad=False):
    return torch.randn(*shape, generator=g).to(dtype).requires_grad_(grad)


def _gemm_scenarios():
    def gemm(g):
        A, B = _rand(g, 5, 16, grad=True), _rand(g, 16, 24, grad=True)
        D = quack_cpp.gemm(A, B, out_dtype=f32, alpha=2.0)
        D.sum().backward()  # stride-0 dD
        return [D, A.grad, B.grad]

    def gemm_batched_colmajor_b(g):
        A, Bt = _rand(g, 2, 8, 16, grad=True), _rand(g, 2, 24, 16)
        D = quack_cpp.gemm(A, Bt.mT)
        D.backward(_rand(g, 2, 8, 24))
        return [D, A.grad]

    def gemm_add(g):
        A, B = _rand(g, 5, 16, grad=True), _rand(g, 16, 24, grad=True)
        C = _rand(g, 5, 24, dtype=f32, grad=True)
        D = quack_cpp.gemm_add(A, B, C, alpha=0.5, beta=-3.0, out_dtype=f32)
        D.backward(torch.randn(5, 24, generator=g))
        return [D, A.grad, B.grad, C.grad]

    def gemm_add_device_scalars(g):
        A, B, C = _rand(g, 5, 16, grad=True), _rand(g, 16, 24), _rand(g, 5, 24, grad=True)
        alpha, beta = torch.tensor(0.5), torch.tensor(2.0)
        D = quack_cpp.gemm_add(A, B, C, alpha=alpha, beta=beta)
        D.backward(_rand(g, 5, 24))
        return [D, A.grad, C.grad]

    def gemm_no_grad(g):
        A, B = _rand(g, 5, 16, grad=True), _rand(g, 16, 24)
        with torch.no_grad():
            return [quack_cpp.gemm(A, B)]

    def gemm_add_inplace(g):
        A, B, out = _rand(g, 5, 16), _rand(g, 16, 24), _rand(g, 5, 24, dtype=f32)
        v = out._version
        quack_cpp.gemm_add_inplace(A, B, out, alpha=2.0, beta=torch.tensor(0.5))
        return [out, torch.tensor(out._version - v)]

    def linear_fused(g):
        q = quack_cpp.nn.Linear(16, 24, dtype=bf16, fuse_grad_accum=True)
        with torch.no_grad():
            q.weight.copy_(_rand(g, 24, 16))
        x = _rand(g, 3, 4, 16, grad=True)
        res = []
        for _ in range(2):  # the second backward accumulates into weight.grad in place
            y = q(x)
            y.backward(_rand(g, 3, 4, 24))
            res += [y, x.grad.clone(), q.weight.grad.clone()]
        return res

    def linear_autocast_frozen(g):
        w = torch.randn(24, 16, generator=g)
        x = torch.randn(6, 16, generator=g).requires_grad_(True)
        with torch.autocast("cpu", dtype=bf16):
            y = quack_cpp.linear(x, w)
        y.float().sum().backward()
        return [y, x.grad]

    def _linear_module(g, bias=True, dtype=bf16):
        q = quack_cpp.nn.Linear(16, 24, bias=bias, dtype=dtype)
        with torch.no_grad():
            q.weight.copy_(_rand(g, 24, 16, dtype=dtype))
            if bias:
                q.bias.copy_(_rand(g, 24, dtype=dtype))
        return q

    def linear_needs_input_grad(g):
        # Every subset of x, weight and bias requiring grad (needs_input_grad: which of the
        # dgrad, wgrad and bias-grad run), a 3-D x; no subset: the forward without a node.
        res = []
        for mask in range(8):
            q = _linear_module(g)
            q.weight.requires_grad_(bool(mask & 2))
            q.bias.requires_grad_(bool(mask & 4))
            x = _rand(g, 3, 4, 16, grad=bool(mask & 1))
            y = q(x)
            if mask:
                y.backward(_rand(g, 3, 4, 24))
            res += [y, x.grad, q.weight.grad, q.bias.grad]
        return res

    def linear_autocast_fp32_weight(g):
        # fp32 weight and bias under autocast: dW in fp32 (weight_grad's _accepts queries), db
        # cast to fp32; 2-D x
        q = _linear_module(g, dtype=f32)
        x = torch.randn(6, 16, generator=g).requires_grad_(True)
        with torch.autocast("cpu", dtype=bf16):
            y = q(x)
        y.float().sum().backward()
        return [y, x.grad, q.weight.grad, q.bias.grad]

    def linear_create_graph(g):
        # A backward that records its GEMMs (dy requires grad), then differentiated again.
        q = _linear_module(g)
        x, dy = _rand(g, 5, 16, grad=True), _rand(g, 5, 24, grad=True)
        dx, dw, db = torch.autograd.grad(q(x), (x, q.weight, q.bias), dy, create_graph=True)
        (dx.float().sum() + dw.float().sum() + db.float().sum()).backward()
        return [dx, dw, db, dy.grad]

    return [gemm, gemm_batched_colmajor_b, gemm_add, gemm_add_device_scalars, gemm_no_grad,
            gemm_add_inplace, linear_fused, linear_autocast_frozen, linear_needs_input_grad,
            linear_autocast_fp32_weight, linear_create_graph]


GEMM_SCENARIOS = _gemm_scenarios()


@pytest.mark.parametrize("scenario", GEMM_SCENARIOS, ids=lambda f: f.__name__)
def test_gemm_same_c_calls(recorder, monkeypatch, scenario):
    monkeypatch.setattr(gemm_ops, "_can_implement", lambda *a: True)  # as the full C++

    def go():
        recorder.calls.clear()
        res = scenario(torch.Generator().manual_seed(0))
        return res, list(recorder.calls)

    (fres, fcalls), (sres, scalls) = _both(go, monkeypatch)
    assert fcalls and fcalls == scalls
    _assert_same(fres, sres, values=False)
    if scenario.__name__ == "gemm_add_inplace":
        assert int(fres[-1]) == int(sres[-1]) == 1  # one version bump, as the op's


@pytest.mark.parametrize("scenario", GEMM_SCENARIOS, ids=lambda f: f.__name__)
def test_gemm_same_values(stand_in, monkeypatch, scenario):
    monkeypatch.setattr(gemm_ops, "_can_implement", lambda *a: True)
    fast, slow = _both(lambda: scenario(torch.Generator().manual_seed(0)), monkeypatch)
    _assert_same(fast, slow, values=True)


def test_gemm_paths_taken(recorder, monkeypatch):
    A, B = _rand(torch.Generator(), 5, 16, grad=True), torch.randn(16, 24).to(bf16)
    assert type(quack_cpp.gemm(A, B).grad_fn) is gemm_ops.gemm_op.Function._backward_cls
    monkeypatch.setattr(ops, "FORCE_CUSTOM_OP", True)
    assert type(quack_cpp.gemm(A, B).grad_fn) is not gemm_ops.gemm_op.Function._backward_cls


def test_inplace_with_grad_or_saved_out(recorder, monkeypatch):
    """An input that requires grad sends gemm_add_inplace to the custom op (autograd would
    record it); out saved by autograd and then modified is caught on both paths."""
    calls = []
    op = gemm_ops.gemm_add_inplace_op
    real = op.custom_op
    monkeypatch.setattr(op, "custom_op", lambda *a: calls.append(1) or real(*a))
    A, B, out = torch.randn(5, 16).to(bf16), torch.randn(16, 24).to(bf16), torch.randn(5, 24)
    quack_cpp.gemm_add_inplace(A, B, out)
    assert calls == []
    quack_cpp.gemm_add_inplace(A.requires_grad_(True), B, out)
    assert calls == [1]

    def saved_then_modified():
        w = torch.randn(5, 24, requires_grad=True)
        y = (out * w).sum()  # saves out
        quack_cpp.gemm_add_inplace(A.detach(), B, out)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()

    _both(saved_then_modified, monkeypatch)


def test_same_errors_from_cpp(as_cuda, monkeypatch):
    # The real _C with host tensors: both paths reach it and raise its error unchanged.
    def err(f):
        with pytest.raises(ValueError) as e:
            f()
        return str(e.value)

    x, w = torch.randn(4, 64, requires_grad=True), torch.ones(63)
    A, B = torch.randn(8, 16).to(bf16), torch.randn(16, 24).to(bf16)
    for f in (lambda: quack_cpp.rmsnorm(x, w), lambda: quack_cpp.rmsnorm(x.detach()),
              lambda: quack_cpp.gemm(A.requires_grad_(True), B),
              lambda: quack_cpp.gemm_add_inplace(A.detach(), B, torch.randn(8, 24))):
        fast, slow = _both(lambda: err(f), monkeypatch)
        assert fast == slow


def test_compile_takes_the_custom_ops(recorder, monkeypatch):
    # Traced with fake tensors: the fast path there would read a FakeTensor's data_ptr and
    # fail. The compiled graph's custom ops then run their CPU kernels (recorded).
    torch._dynamo.reset()
    monkeypatch.setattr(gemm_ops, "_can_implement", lambda *a: True)

    def f(x, w, A, B):
        return quack_cpp.rmsnorm(x, w).sum() + quack_cpp.gemm(A, B, out_dtype=f32).sum()

    args = [torch.randn(4, 64, requires_grad=True), torch.ones(64, requires_grad=True),
            torch.randn(8, 16).to(bf16).requires_grad_(True), torch.randn(16, 24).to(bf16)]
    torch.compile(f, fullgraph=True, backend="aot_eager", dynamic=False)(*args).backward()
    names = [n for n, _ in recorder.calls]
    assert names.count("rmsnorm_fwd") == 1 and names.count("rmsnorm_bwd") == 1
    assert names.count("gemm") == 2
