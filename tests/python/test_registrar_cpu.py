"""The registrar itself (quack_cpp._registrar), without a GPU: toy op descriptions, written as a
new op would be, become a custom op with its schema, fake and autograd, and an eager fast path
that is taken exactly where it should be.

The toy ops compute in torch, so they run on CPU tensors. The "fast path" cases let CPU tensors
through ``_registrar._is_plain_cuda`` (the ``as_cuda`` fixture, as test_fastpath_cpu.py does)
and register each op's CUDA kernel for the CPU too (what runs for CUDA tensors). Needs torch (any
build) and an importable quack_cpp."""

import sys
from typing import Optional, Tuple

import pytest

torch = pytest.importorskip("torch")
reg = pytest.importorskip("quack_cpp._registrar")
ops = pytest.importorskip("quack_cpp.ops")

from torch import Tensor  # noqa: E402

f32, bf16 = torch.float32, torch.bfloat16
CALLS = {"launch": 0, "backward": 0, "setup": 0, "inplace": 0}


# --------------------------------------------------------------------------------------------
# Toy descriptions (as a new op would be written)
# --------------------------------------------------------------------------------------------


class ToyScale:
    """y = x * s * w (w = 1 when None), per row; aux = sum of each row of y when asked."""

    name = "quack_cpp_test::toy_scale"
    absent = (None, torch.float32)  # aux's placeholder is fp32

    def signature(x: Tensor, w: Optional[Tensor], s: float, want_aux: bool,
                  out_dtype: Optional[torch.dtype] = None) -> Tuple[Tensor, Tensor]:
        """Toy: (y, aux)."""

    def outputs(x, w, s, want_aux, out_dtype=None):
        M, N = reg.rows_cols(x, "toy_scale")
        return (x.new_empty(M, N, dtype=out_dtype or x.dtype),
                x.new_empty(M, dtype=torch.float32) if want_aux else None)

    def launch(outs, x, w, s, want_aux, out_dtype=None):
        CALLS["launch"] += 1
        y, aux = outs
        v = x.float() * s * (w.float() if w is not None else 1.0)
        y.copy_(v)
        if aux is not None:
            aux.copy_(v.sum(-1))

    def setup_context(ctx, inputs, output):
        CALLS["setup"] += 1
        x, w, s, want_aux, out_dtype = inputs
        ctx.s, ctx.want_aux = s, want_aux
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, w)

    def backward(ctx, dy, daux):
        CALLS["backward"] += 1
        x, w = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad[:2]
        g = dy.float() if dy is not None else torch.zeros_like(x, dtype=torch.float32)
        if daux is not None and ctx.want_aux:  # an absent aux's grad (placeholder) is ignored
            g = g + daux.float()[:, None]
        wf = w.float() if w is not None else 1.0
        dx = (g * ctx.s * wf).to(x.dtype) if need_x else None
        dw = (g * ctx.s * x.float()).sum(0).to(w.dtype) if need_w else None
        return dx, dw, None, None, None


class ToyAddInplace:
    name = "quack_cpp_test::toy_add_inplace"
    mutates_args = ("out",)

    def signature(x: Tensor, out: Tensor, alpha: float) -> None:
        """out += alpha * x, in place."""

    def impl(x, out, alpha):
        CALLS["inplace"] += 1
        out.data.add_(x, alpha=alpha)  # through .data: the version bump is the registrar's

    def fake(x, out, alpha):
        if x.shape != out.shape:
            raise ValueError("toy_add_inplace: shapes differ")


class ToyComposite:
    """y = toy_scale(x, w, 2.0) with its own backward (a composite, no custom op)."""

    name = "quack_cpp_test::toy_composite"

    def forward(ctx, x: Tensor, w: Tensor, flag: bool) -> Tensor:
        y, _ = toy_scale(x, w, 2.0, False)
        ctx.save_for_backward(x, w)
        ctx.flag = flag
        return y

    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        dx = dy * 2.0 * w if ctx.needs_input_grad[0] else None
        dw = (dy * 2.0 * x).sum(0) if ctx.needs_input_grad[1] else None
        return dx, dw, None


class ToyPick:
    """y = x[i, idx_i] * s per row (an index tensor), written into x's row 0 instead of a new
    buffer when ``into_x`` (an eager-only argument)."""

    name = "quack_cpp_test::toy_pick"
    index_args = ("idx",)
    eager_only = ("into_x",)
    SEEN = []

    def signature(x: Tensor, idx: Tensor, s: float, into_x: bool = False) -> Tensor:
        """Toy: y (M,)."""

    def impl(x, idx, s, into_x=False):
        y = x.gather(1, idx.long()[:, None])[:, 0] * s
        if into_x:
            x.data[0, : y.shape[0]] = y
            return x[0, : y.shape[0]]
        return y

    def fake(x, idx, s, into_x=False):
        return x.new_empty(idx.shape[0])

    def setup_context(ctx, inputs, output):
        ToyPick.SEEN.append(len(inputs))
        x, idx, s, into_x = inputs
        ctx.s, ctx.V = s, x.shape[1]
        ctx.save_for_backward(idx)

    def backward(ctx, dy):
        (idx,) = ctx.saved_tensors
        dx = torch.zeros(idx.shape[0], ctx.V, dtype=dy.dtype)
        dx.scatter_(1, idx.long()[:, None], dy[:, None] * ctx.s)
        return dx, None, None, None  # one entry per argument, the eager-only one included


toy_scale = reg.register(ToyScale)
toy_add_inplace = reg.register(ToyAddInplace)
toy_composite = reg.register_function(ToyComposite)
toy_pick = reg.register(ToyPick)

# The custom ops' kernels for CPU tensors: the same functions run for CUDA tensors.
_LIB = torch.library.Library("quack_cpp_test", "IMPL")
for _op in (toy_scale, toy_add_inplace, toy_pick):
    _LIB.impl(_op.__name__, _op.kernel, "CPU")


def _cpu_as_cuda(t):
    return (type(t) in reg._PLAIN_TYPES and t.device.type == "cpu" and t.layout == torch.strided
            and not t.is_nested and t.dtype in reg.KERNEL_DTYPES and not reg._is_wrapped(t))


def _cpu_as_cuda_index(t):
    return (type(t) in reg._PLAIN_TYPES and t.device.type == "cpu" and t.layout == torch.strided
            and t.dtype in reg.INDEX_DTYPES)


@pytest.fixture
def as_cuda(monkeypatch):
    monkeypatch.setattr(reg, "_is_plain_cuda", _cpu_as_cuda)
    monkeypatch.setattr(reg, "_is_plain_cuda_index", _cpu_as_cuda_index)
    monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", False)
    monkeypatch.setattr(reg, "CPP_EAGER", False)


@pytest.fixture(autouse=True)
def _reset_calls():
    for k in CALLS:
        CALLS[k] = 0


def _data(grad=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(5, 16, generator=g).requires_grad_(grad)
    w = (1 + 0.5 * torch.randn(16, generator=g)).requires_grad_(grad)
    return x, w


def _node(t):
    return type(t.grad_fn)


# --------------------------------------------------------------------------------------------
# Registration: custom op, schema, fake, autograd
# --------------------------------------------------------------------------------------------


def test_custom_op_registered_with_schema():
    op = torch.ops.quack_cpp_test.toy_scale.default
    assert toy_scale.default is op
    assert str(op._schema) == ("quack_cpp_test::toy_scale(Tensor x, Tensor? w, float s, "
                               "bool want_aux, ScalarType? out_dtype=None) -> (Tensor, Tensor)")
    schema = str(torch.ops.quack_cpp_test.toy_add_inplace.default._schema)
    assert schema.startswith("quack_cpp_test::toy_add_inplace(Tensor x, Tensor(a")
    assert schema.endswith("!) out, float alpha) -> ()")
    assert toy_scale.tensor_positions == (0, 1) and toy_add_inplace.mutated_positions == (1,)
    assert toy_scale.__doc__ == "Toy: (y, aux)."
    assert toy_scale.Function is not None and toy_add_inplace.Function is None


def test_fake_under_fake_tensor_mode_and_meta():
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    with FakeTensorMode():
        x, w = torch.empty(7, 32, dtype=bf16), torch.empty(32)
        y, aux = toy_scale(x, w, 2.0, False, f32)
        assert isinstance(y, FakeTensor) and y.shape == (7, 32) and y.dtype == f32
        assert aux.shape == (0,) and aux.dtype == f32  # the placeholder of an absent output
        y, aux = toy_scale(x, None, 2.0, True)
        assert y.dtype == bf16 and aux.shape == (7,)
        with pytest.raises(ValueError, match="toy_scale: x has 3 dimensions"):
            toy_scale(torch.empty(2, 3, 4), None, 1.0, False)
    y, aux = toy_scale(torch.empty(3, 8, device="meta"), None, 1.0, True)
    assert y.device.type == "meta" and aux.shape == (3,)
    assert CALLS["launch"] == 0  # no real kernel ran


def test_opcheck():
    x, w = _data()
    for args in [(x, w, 2.0, True), (x, None, 0.5, False, f32),
                 (x.requires_grad_(True), w.requires_grad_(True), 3.0, True)]:
        torch.library.opcheck(toy_scale.default, args)
    torch.library.opcheck(toy_add_inplace.default, (torch.randn(4, 4), torch.randn(4, 4), 2.0))


def test_autograd_formula_on_the_custom_op():
    x, w = _data(grad=True)
    y, aux = toy_scale.custom_op(x, w, 3.0, True)  # always the dispatcher
    assert _node(y) is not toy_scale.Function._backward_cls
    (y.sum() + aux.sum()).backward()
    assert CALLS["backward"] == 1
    xe, we = _data(grad=True)
    ye = xe * 3.0 * we
    (ye.sum() + ye.sum(-1).sum()).backward()
    torch.testing.assert_close(x.grad, xe.grad)
    torch.testing.assert_close(w.grad, we.grad)


# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------


def test_route_rules(as_cuda, monkeypatch):
    x, w = _data()
    assert reg.route(x, w, None) == reg.EAGER
    assert reg.route(x, w.requires_grad_(True)) == reg.EAGER_GRAD
    with torch.no_grad():
        assert reg.route(x, w) == reg.EAGER
    assert reg.route(x.double()) == reg.CUSTOM
    monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", True)
    assert reg.route(x) == reg.CUSTOM
    monkeypatch.setattr(ops, "FORCE_CUSTOM_OP", False)  # ops' flag is the registrar's
    assert not reg.FORCE_CUSTOM_OP and reg.route(x) == reg.EAGER


def test_fast_path_no_grad(as_cuda):
    x, w = _data()
    y, aux = toy_scale(x, w, 2.0, False)
    assert aux is None  # the fast path allocates no placeholder
    assert y.grad_fn is None and CALLS == dict(CALLS, launch=1, setup=0)
    torch.testing.assert_close(y, x * 2.0 * w)


def test_fast_path_with_grad_uses_the_function_and_the_formula(as_cuda):
    x, w = _data(grad=True)
    y, aux = toy_scale(x, w, 3.0, True)
    assert _node(y) is toy_scale.Function._backward_cls
    assert CALLS["setup"] == 1
    (y.sum() + aux.sum()).backward()
    assert CALLS["backward"] == 1
    xs, ws = _data(grad=True)
    ys, auxs = toy_scale.custom_op(xs, ws, 3.0, True)
    (ys.sum() + auxs.sum()).backward()
    assert torch.equal(x.grad, xs.grad) and torch.equal(w.grad, ws.grad)


def test_keywords_and_defaults(as_cuda):
    x, w = _data()
    a, _ = toy_scale(x, w=w, s=2.0, want_aux=False)
    b, _ = toy_scale(x, w, 2.0, False, None)
    assert torch.equal(a, b)
    with pytest.raises(TypeError):
        toy_scale(x, w)  # missing arguments: the signature's TypeError


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
def test_custom_op_taken_where_the_fast_path_must_not_run(as_cuda, monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    x, w = _data()

    class Sub(torch.Tensor):
        pass

    # A subclass and a dtype without a kernel: the custom op (its placeholder shows it).
    assert toy_scale(x.as_subclass(Sub), w, 1.0, False)[1] is not None
    assert toy_scale(x.double(), None, 1.0, False)[1] is not None
    seen = []

    class Spy(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    with Spy():
        toy_scale(x, w, 1.0, False)
    assert toy_scale.default in seen
    with FakeTensorMode():
        fx = torch.empty(3, 4)
        assert toy_scale(fx, None, 1.0, False)[1].shape == (0,)
    # vmap: the custom op's batching rule is torch's fallback; the fast path does not run.
    out = torch.vmap(lambda t: toy_scale(t, None, 2.0, False)[0])(torch.randn(2, 3, 4))
    assert out.shape == (2, 3, 4)
    monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", True)
    assert toy_scale(x, w, 1.0, False)[1] is not None


def test_compile_takes_the_custom_op(as_cuda):
    torch._dynamo.reset()
    x, w = _data(grad=True)

    def f(x, w):
        y, aux = toy_scale(x, w, 2.0, True)
        return y.square().sum() + aux.sum()

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager", dynamic=False)
    loss = compiled(x, w)
    loss.backward()
    assert CALLS["backward"] == 1  # the formula, traced by AOTAutograd and run
    xe, we = _data(grad=True)
    f(xe, we).backward()
    torch.testing.assert_close(x.grad, xe.grad)
    torch.testing.assert_close(w.grad, we.grad)


def test_inductor_fallbacks_registered_before_the_lowering():
    """Each op's Inductor fallback comes from the registrar (quack_cpp._inductor), with the
    layout constraint of the op's tags, not from Inductor's implicit path, whose INFO log formats
    every argument's IR on torch 2.11 (pytorch/pytorch#185937: minutes on a deep graph)."""
    lowering = pytest.importorskip("torch._inductor.lowering")
    from torch._library.utils import get_layout_constraint_tag
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        toy_scale(torch.empty(3, 8), None, 1.0, True)  # any fake call, once Inductor is loaded
    for op in (toy_scale, toy_add_inplace, toy_pick):
        assert op.default in lowering.lowerings, op.name
        want = lowering.tag_to_layout_constraint(get_layout_constraint_tag(op.default))
        assert lowering.maybe_layout_constraints(op.default) is want, op.name


def test_inductor_compiles_the_custom_op(as_cuda):
    """torch.compile with Inductor (CPU) runs the op as a fallback after a deep pointwise chain
    (what made torch 2.11's implicit-fallback log take minutes); values and grads as eager."""
    torch._dynamo.reset()

    def f(x, w):
        h = x
        for _ in range(24):
            h = h * 1.01 + 0.01
        y, aux = toy_scale(h, w, 2.0, True)
        return y.square().sum() + aux.sum()

    x, w = _data(grad=True)
    loss = torch.compile(f, fullgraph=True, backend="inductor", dynamic=False)(x, w)
    loss.backward()
    xe, we = _data(grad=True)
    le = f(xe, we)
    le.backward()
    assert toy_scale.default in sys.modules["torch._inductor.lowering"].lowerings
    torch.testing.assert_close(loss, le)
    torch.testing.assert_close(x.grad, xe.grad)
    torch.testing.assert_close(w.grad, we.grad)


def test_inplace_op_bumps_the_version_once_on_both_paths(as_cuda, monkeypatch):
    for force in (False, True):
        monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", force)
        x, out = torch.ones(3, 4), torch.zeros(3, 4)
        v = out._version
        assert toy_add_inplace(x, out, 2.0) is None
        assert out._version == v + 1 and torch.equal(out, torch.full((3, 4), 2.0))
    # An input that requires grad goes to the custom op (it has no autograd formula).
    monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", False)
    calls = []
    real = toy_add_inplace.custom_op
    monkeypatch.setattr(toy_add_inplace, "custom_op", lambda *a: calls.append(1) or real(*a))
    toy_add_inplace(torch.ones(3, 4), torch.zeros(3, 4), 1.0)
    assert calls == []
    toy_add_inplace(torch.ones(3, 4, requires_grad=True), torch.zeros(3, 4), 1.0)
    assert calls == [1]


def test_impl_is_looked_up_per_call(as_cuda, monkeypatch):
    x, w = _data()
    monkeypatch.setattr(toy_scale, "impl", lambda *a: (torch.zeros(5, 16), None))
    assert torch.equal(toy_scale(x, w, 2.0, False)[0], torch.zeros(5, 16))
    y, aux = toy_scale.custom_op(x, w, 2.0, False)  # the custom op's kernel too
    assert torch.equal(y, torch.zeros(5, 16)) and aux.shape == (0,)


# --------------------------------------------------------------------------------------------
# Composite ops (register_function)
# --------------------------------------------------------------------------------------------


def test_composite_paths(as_cuda):
    x, w = _data()
    y = toy_composite(x, w, True)
    assert y.grad_fn is None and CALLS["launch"] == 1  # no node; the inner op ran eagerly
    x, w = _data(grad=True)
    y = toy_composite(x, w, True)
    assert _node(y) is toy_composite.Function._backward_cls
    y.sum().backward()
    torch.testing.assert_close(x.grad, (2.0 * w).expand(5, 16).detach())


def test_composite_compiles(as_cuda):
    torch._dynamo.reset()
    x, w = _data(grad=True)
    f = torch.compile(lambda x, w: toy_composite(x, w, False).sum(), fullgraph=True,
                      backend="aot_eager", dynamic=False)
    f(x, w).backward()
    torch.testing.assert_close(w.grad, (2.0 * x).sum(0).detach())


# --------------------------------------------------------------------------------------------
# Argument helpers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,dim", [((4, 6), -1), ((4, 6), 0), ((2, 3, 5), 1), ((2, 3, 5), -3),
                                       ((7,), 0), ((2, 3, 5), 2)])
def test_to_rows_from_rows(shape, dim):
    x = torch.randn(shape)
    x2, moved = reg.to_rows(x, dim)
    assert x2.dim() == 2 and x2.shape[1] == shape[dim]
    ref = torch.softmax(x, dim)
    y2 = torch.softmax(x2, -1).contiguous()  # what a row kernel returns: (M, N) contiguous
    torch.testing.assert_close(reg.from_rows(y2, moved, dim), ref)
    with pytest.raises(IndexError):
        reg.to_rows(x, len(shape))


def test_tensor_arg_and_dtype_code():
    t = torch.randn(3, 8)[:, ::2]
    assert reg.tensor_arg(t, "f", "t") == (t.data_ptr(), 0, (3, 4), (8, 2), -1)
    assert reg.tensor_arg(None, "f", "t") is None
    with pytest.raises(ValueError, match="f: t has dtype float64"):
        reg.tensor_arg(t.double(), "f", "t")
    assert [reg.dtype_code(d) for d in (f32, torch.float16, bf16)] == [0, 1, 2]


def test_description_errors():
    class NoLaunch:
        name = "quack_cpp_test::bad"

        def signature(x: Tensor) -> Tensor: ...

        def outputs(x):
            return x.new_empty(x.shape)

    with pytest.raises(TypeError, match="outputs \\+ launch, or impl"):
        reg.register(NoLaunch)


# --------------------------------------------------------------------------------------------
# index_args and eager_only
# --------------------------------------------------------------------------------------------


def test_index_args_and_eager_only_schema():
    schema = str(torch.ops.quack_cpp_test.toy_pick.default._schema)
    assert schema == "quack_cpp_test::toy_pick(Tensor x, Tensor idx, float s) -> Tensor"
    assert toy_pick.tensor_positions == (0,) and toy_pick.index_positions == (1,)
    assert toy_pick.n_custom == 3

    class BadTail:
        name = "quack_cpp_test::bad_tail"
        eager_only = ("flag",)

        def signature(x: Tensor, flag: bool, s: float = 1.0) -> Tensor: ...

        def impl(x, flag, s=1.0):
            return x

    with pytest.raises(TypeError, match="eager_only"):
        reg.register(BadTail)


def test_index_tensor_keeps_the_fast_path(as_cuda, monkeypatch):
    x = torch.randn(4, 6)
    idx = torch.tensor([0, 5, 2, 1])
    args = (x, idx, 2.0, False)
    assert toy_pick.route(args) == reg.EAGER
    assert toy_pick.route((x.requires_grad_(True), idx, 2.0, False)) == reg.EAGER_GRAD
    assert toy_pick.route((x, idx.float(), 2.0, False)) == reg.CUSTOM  # not an index dtype
    assert reg.route_index(reg.EAGER, idx, None) == reg.EAGER
    assert reg.route_index(reg.EAGER, idx.to(torch.int16)) == reg.CUSTOM
    assert reg.route_index(reg.CUSTOM, idx) == reg.CUSTOM


def test_eager_only_honoured_on_the_fast_path_only(as_cuda, monkeypatch):
    def go(force):
        monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", force)
        ToyPick.SEEN.clear()
        x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0)).requires_grad_(True)
        idx = torch.tensor([0, 5, 2, 1])
        xc = x.detach().clone()
        y = toy_pick(xc, idx, 2.0, True)  # no grad: EAGER (or the custom op)
        wrote = not torch.equal(xc, x.detach())
        y2 = toy_pick(x, idx, 3.0)  # with grad: the Function (or the custom op's autograd)
        y2.sum().backward()
        return wrote, y.detach(), x.grad, list(ToyPick.SEEN)

    fast, slow = go(False), go(True)
    assert fast[0] and not slow[0]  # the custom op leaves x alone (its schema lacks into_x)
    assert torch.equal(fast[1], slow[1])
    assert torch.equal(fast[2], slow[2])
    assert fast[3] == slow[3] == [4]  # setup_context sees every argument on both paths
    monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", False)
    torch._dynamo.reset()
    f = torch.compile(lambda x, i: toy_pick(x, i, 2.0, True), fullgraph=True, backend="eager")
    x = torch.randn(4, 6)
    x0 = x.clone()
    torch.testing.assert_close(f(x, torch.tensor([0, 1, 2, 3])),
                               x0.gather(1, torch.tensor([[0], [1], [2], [3]]))[:, 0] * 2.0)
    assert torch.equal(x, x0)  # under compile: the custom op, no write into x


def test_helpers_scalar_arg_check_index_functional_context():
    t = torch.tensor(2.5)
    assert reg.scalar_arg(t, "f", "g") == (t.data_ptr(), 0, (1,), (1,), -1)
    with pytest.raises(ValueError, match="f: g has dtype float64"):
        reg.scalar_arg(t.double(), "f", "g")
    reg.check_index("f", None, "t")
    with pytest.raises(ValueError, match="f: t has dtype float32, expected int32 or int64"):
        reg.check_index("f", torch.ones(3, device="meta"), "t")
    with pytest.raises(ValueError, match="f: t is on cpu"):
        reg.check_index("f", torch.ones(3, dtype=torch.int64), "t")
    assert not reg.functional_context(torch.ones(2), None)
    assert reg.graph_retained()  # outside a backward: the safe answer
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        assert reg.functional_context()
    seen = []

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            seen.append((reg.graph_retained(), reg.functional_context(g)))
            return g

    x = torch.ones(2, requires_grad=True)
    y = Probe.apply(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert seen == [(True, False), (False, False)]
    # (Under torch.compile: test_softmax_ce_plumbing_cpu.py::test_compile_aot_eager.)
