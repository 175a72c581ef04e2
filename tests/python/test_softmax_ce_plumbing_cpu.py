"""The eager fast path of softmax, log_softmax and cross-entropy without a GPU: CPU tensors let
through the fast path's predicate ("as if CUDA", as test_fastpath_cpu.py does), the custom ops'
CPU kernels their own bodies. Checks that the fast path and the custom ops make the same ``_C``
calls (a recording ``_C``), which path each reduction takes, the retain_graph scheme of the
saved gradient (rescaled in place only by a backward that does not keep the graph, never under
tracing), inplace_backward (version bump, refusal when the logits were saved elsewhere, a fresh
buffer on the custom op), the same values on both paths (CPU stand-ins), torch.compile
(aot_eager) and the autocast rule. The kernels themselves: test_softmax.py,
test_cross_entropy.py. Needs torch (any build) and quack_cpp."""

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
reg = pytest.importorskip("quack_cpp._registrar")
sm = pytest.importorskip("quack_cpp.softmax_ops")
ce = pytest.importorskip("quack_cpp.cross_entropy_ops")

import cpu_stand_in  # noqa: E402
from reference import assert_rule, ref_cross_entropy  # noqa: E402

f32, bf16 = torch.float32, torch.bfloat16
OPS = (sm.softmax_fwd, sm.softmax_bwd, sm.log_softmax_fwd, sm.log_softmax_bwd,
       ce.cross_entropy_fwd, ce.cross_entropy_bwd, ce.cross_entropy_scale_grad,
       ce.cross_entropy_train_bwd)


def _cpu_as_cuda(t):
    return (type(t) in reg._PLAIN_TYPES and t.device.type == "cpu" and t.layout == torch.strided
            and not t.is_nested and t.dtype in reg.KERNEL_DTYPES and not reg._is_wrapped(t))


def _cpu_as_cuda_index(t):
    return (type(t) in reg._PLAIN_TYPES and t.device.type == "cpu" and t.layout == torch.strided
            and not t.is_nested and t.dtype in reg.INDEX_DTYPES and not reg._is_wrapped(t))


@pytest.fixture
def as_cuda(monkeypatch):
    monkeypatch.setattr(reg, "_is_plain_cuda", _cpu_as_cuda)
    monkeypatch.setattr(reg, "_is_plain_cuda_index", _cpu_as_cuda_index)
    monkeypatch.setattr(reg, "DEVICE_TYPES", reg.DEVICE_TYPES + ("cpu",))
    monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", False)
    monkeypatch.setattr(reg, "CPP_EAGER", False)
    lib = torch.library.Library("quack_cpp", "IMPL")
    for op in OPS:
        lib.impl(op.__name__, op.kernel, "CPU")
    yield
    lib._destroy()


class RecordingC:
    """Stands in for quack_cpp._C: records the calls (pointers renamed p0, p1, ... in order of
    appearance), writes nothing; the workspace query answers 64 bytes for 'sum'/'mean'."""

    def __init__(self, real):
        self._real = real
        self.calls = []

    def __getattr__(self, name):
        if name.startswith(("softmax_", "log_softmax_", "cross_entropy_")):
            return lambda *a: self._record(name, a)
        return getattr(self._real, name)

    def _record(self, name, args):
        names = {}

        def tag(p):
            return names.setdefault(p, f"p{len(names)}") if p else 0

        ptr_slots = (15,) if name == "cross_entropy_fwd" else ()  # the workspace pointer
        rec = tuple((tag(a[0]),) + tuple(a[1:]) if isinstance(a, tuple) else
                    tag(a) if i in ptr_slots else a for i, a in enumerate(args))
        self.calls.append((name, rec))
        if name == "cross_entropy_fwd_workspace_size":
            return 64 if args[1] != "none" else 0
        return None


@pytest.fixture
def recorder(as_cuda, monkeypatch):
    rec = RecordingC(sm._C)
    monkeypatch.setattr(sm, "_C", rec)
    monkeypatch.setattr(ce, "_C", rec)
    return rec


SCALE_CALLS = []
TRAIN_CALLS = []  # (grad_output, into_dx) of each training backward


@pytest.fixture
def stand_in(as_cuda, monkeypatch):
    """The ops' implementations replaced by the CPU stand-ins (both paths call ``op.impl``);
    the in-place rescale's and the training backward's calls counted."""
    SCALE_CALLS.clear()
    TRAIN_CALLS.clear()

    def scale(dx, g):
        SCALE_CALLS.append(float(g))
        cpu_stand_in.cross_entropy_scale_grad_cpu(dx, g)

    def train(*args):
        TRAIN_CALLS.append((float(args[3]), bool(args[11]) if len(args) > 11 else False))
        return cpu_stand_in.cross_entropy_train_bwd_cpu(*args)

    for op, fn in ((sm.softmax_fwd, cpu_stand_in.softmax_fwd_cpu),
                   (sm.softmax_bwd, cpu_stand_in.softmax_bwd_cpu),
                   (sm.log_softmax_fwd, cpu_stand_in.log_softmax_fwd_cpu),
                   (sm.log_softmax_bwd, cpu_stand_in.log_softmax_bwd_cpu),
                   (ce.cross_entropy_fwd, cpu_stand_in.cross_entropy_fwd_cpu),
                   (ce.cross_entropy_bwd, cpu_stand_in.cross_entropy_bwd_cpu),
                   (ce.cross_entropy_scale_grad, scale),
                   (ce.cross_entropy_train_bwd, train)):
        monkeypatch.setattr(op, "impl", fn)


def _both(fn, monkeypatch):
    """fn() on the fast path, then on the custom ops."""
    fast = fn()
    monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", True)
    try:
        slow = fn()
    finally:
        monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", False)
    return fast, slow


def _meta(t):
    return None if t is None else (t.dtype, tuple(t.shape), t.stride(), t.requires_grad)


def _inputs(M=6, V=40, dtype=bf16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (2 * torch.randn(M, V, generator=g)).to(dtype)
    t = torch.randint(0, V, (M,), generator=g)
    t[1] = -100
    return x, t


# --------------------------------------------------------------------------------------------
# Which path each call takes, and the same _C calls on both paths
# --------------------------------------------------------------------------------------------

CE_SCENARIOS = {
    # name: (cross_entropy kwargs, grad_output, expected _C calls)
    "mean": (dict(), 1.0, ["cross_entropy_fwd_workspace_size", "cross_entropy_fwd",
                           "cross_entropy_train_bwd"]),
    "sum_scaled": (dict(reduction="sum", weight=True), 0.5,
                   ["cross_entropy_fwd_workspace_size", "cross_entropy_fwd",
                    "cross_entropy_train_bwd"]),
    "none": (dict(reduction="none", label_smoothing=0.1), None,
             ["cross_entropy_fwd_workspace_size", "cross_entropy_fwd", "cross_entropy_bwd"]),
    "lse_partial_mean": (dict(lse_partial=True), 1.0,
                         ["cross_entropy_fwd_workspace_size", "cross_entropy_fwd",
                          "cross_entropy_bwd"]),
    "no_grad": (dict(reduction="sum", z_loss=1e-3, return_z_loss=True), "nograd",
                ["cross_entropy_fwd_workspace_size", "cross_entropy_fwd"]),
}


def _ce_run(kw, g, seed=0, inplace=False):
    x, t = _inputs(seed=seed)
    kw = dict(kw)
    if kw.pop("weight", False):
        kw["weight"] = torch.rand(x.shape[1], generator=torch.Generator().manual_seed(1)) + 0.5
    if kw.pop("lse_partial", False):
        kw["lse_partial"] = x.float().view(x.shape[0], 4, -1).logsumexp(-1)
    leaf = x.clone().requires_grad_(g != "nograd")
    z = leaf * 1.0 if g != "nograd" else leaf
    out = quack_cpp.cross_entropy(z, t, inplace_backward=inplace, **kw)
    loss = out[0] if isinstance(out, tuple) else out
    node = loss.grad_fn
    if g != "nograd":
        gt = torch.full_like(loss, g) if g is not None else torch.randn(
            loss.shape, generator=torch.Generator().manual_seed(9))
        loss.backward(gt)
    outs = list(out) if isinstance(out, tuple) else [out]
    return outs + [leaf.grad], node


@pytest.mark.parametrize("name", list(CE_SCENARIOS))
def test_ce_paths_same_c_calls(recorder, monkeypatch, name):
    kw, g, want = CE_SCENARIOS[name]

    def go():
        recorder.calls.clear()
        res, node = _ce_run(kw, g)
        return res, node, list(recorder.calls)

    (fres, fnode, fcalls), (sres, snode, scalls) = _both(go, monkeypatch)
    assert [c[0] for c in fcalls] == want
    train = want[-1] == "cross_entropy_train_bwd"
    if train:
        # The fast path writes into the forward's dx (dx_out None), the custom op into a new
        # buffer: the same call otherwise.
        def plain(rec):
            return [a[1:] if isinstance(a, tuple) else a for i, a in enumerate(rec) if i != 6]
        assert fcalls[-1][1][6] is None and scalls[-1][1][6] is not None
        assert plain(fcalls[-1][1]) == plain(scalls[-1][1])
        fcalls, scalls = fcalls[:-1], scalls[:-1]
    assert fcalls == scalls
    fwd = fcalls[1][1]
    has_dx, has_lse = fwd[8] is not None, fwd[6] is not None
    has_state, has_word = fwd[18] is not None, fwd[19] is not None
    assert has_dx == train and has_state == train and has_word == train  # predicted dx
    assert has_lse == (want[-1] in ("cross_entropy_bwd", "cross_entropy_train_bwd"))
    if g != "nograd":
        assert ce.cross_entropy_fwd.is_fast_node(fnode)
        assert not ce.cross_entropy_fwd.is_fast_node(snode)
    else:
        assert fnode is None and snode is None
    for a, b in zip(fres, sres):
        assert _meta(a) == _meta(b)


def test_softmax_same_c_calls(recorder, monkeypatch):
    def go():
        recorder.calls.clear()
        x = torch.randn(3, 5, 64).to(bf16).requires_grad_(True)
        y = quack_cpp.softmax(x, 1)
        y.backward(torch.randn(3, 5, 64).to(bf16))
        z = quack_cpp.log_softmax(x.detach())
        return [y, x.grad, z], list(recorder.calls)

    (fres, fcalls), (sres, scalls) = _both(go, monkeypatch)
    assert [c[0] for c in fcalls] == ["softmax_fwd", "softmax_bwd", "log_softmax_fwd"]
    assert fcalls == scalls
    for a, b in zip(fres, sres):
        assert _meta(a) == _meta(b)


def test_weight_alone_requires_grad_records_nothing(recorder):
    x, t = _inputs()
    w = (torch.rand(40) + 0.5).requires_grad_(True)
    loss = quack_cpp.cross_entropy(x, t, weight=w)
    assert loss.grad_fn is None and recorder.calls[1][1][8] is None  # no dx asked


# --------------------------------------------------------------------------------------------
# Values: both paths the same; the retain_graph scheme; inplace_backward
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CE_SCENARIOS))
def test_ce_same_values(stand_in, monkeypatch, name):
    kw, g, _ = CE_SCENARIOS[name]
    (fres, _), (sres, _) = _both(lambda: _ce_run(kw, g), monkeypatch)
    for a, b in zip(fres, sres):
        assert _meta(a) == _meta(b) and (a is None or torch.equal(a, b))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ce_values_against_reference(stand_in, reduction):
    x, t = _inputs(V=64, dtype=f32)
    t[3] = 70  # a bad target: NaN row
    xl = x.clone().requires_grad_(True)
    loss = quack_cpp.cross_entropy(xl, t, reduction=reduction, label_smoothing=0.1)
    g = torch.randn(loss.shape)
    loss.backward(g)
    x64 = x.double().requires_grad_(True)
    t_ok = t.clone()
    t_ok[3] = -100  # a bad row counts in no denominator: the others as with it ignored
    ref, _, _ = ref_cross_entropy(x64, t_ok, reduction, label_smoothing=0.1)
    (ref * g.double()).sum().backward()
    good = [i for i in range(6) if i != 3]
    assert torch.isnan(xl.grad[3]).all()
    assert_rule("dx", xl.grad[good], x64.grad[good], None, rtol_no_torch=1e-5)
    if reduction == "none":
        assert_rule("loss", loss[good], ref[good], None, rtol_no_torch=1e-5)


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_retain_graph_rescales_once(stand_in, monkeypatch, reduction, inplace):
    """Retained backwards leave the saved dx unscaled (fresh dx * g); only the last one
    rescales in place (mean/sum); every one gets g * dx."""
    def go():
        SCALE_CALLS.clear()
        TRAIN_CALLS.clear()
        x, t = _inputs(dtype=f32)
        leaf = x.clone().requires_grad_(True)
        z = leaf * 1.0
        loss = quack_cpp.cross_entropy(z, t, reduction=reduction, inplace_backward=inplace)
        g = torch.full_like(loss, 0.5)
        grads = [torch.autograd.grad(loss, leaf, g, retain_graph=True)[0] for _ in range(2)]
        grads.append(torch.autograd.grad(loss, leaf, g)[0])
        with pytest.raises(RuntimeError, match="second time"):
            torch.autograd.grad(loss, leaf, g)
        return grads, list(TRAIN_CALLS) + list(SCALE_CALLS), x, t

    fast = True
    for grads, calls, x, t in _both(go, monkeypatch):
        # The training backward: retained ones into a new buffer, the last one into the
        # forward's dx (fast path; the custom op always a new buffer). The fast path with
        # inplace_backward takes the backward from lse instead (no training backward).
        from_lse = fast and inplace
        want = ([(0.5, False), (0.5, False), (0.5, fast)]
                if reduction != "none" and not from_lse else [])
        assert calls == want
        fast = False
        x64 = x.double().requires_grad_(True)
        ref, _, _ = ref_cross_entropy(x64, t, reduction)
        ref.backward(torch.full_like(ref, 0.5))
        for d in grads:
            assert_rule("dx", d, x64.grad, None, rtol_no_torch=1e-5)
        assert torch.equal(grads[0], grads[1]) and torch.equal(grads[1], grads[2])


def test_grad_output_one_not_rescaled(stand_in):
    x, t = _inputs(dtype=f32)
    leaf = x.clone().requires_grad_(True)
    quack_cpp.cross_entropy(leaf, t).backward()
    # The training backward is called (into the forward's dx); it decides on the device.
    assert TRAIN_CALLS == [(1.0, True)] and SCALE_CALLS == []


def test_create_graph_does_not_differentiate_silently(stand_in, monkeypatch):
    def go():
        x, t = _inputs(dtype=f32)
        leaf = x.clone().requires_grad_(True)
        gx, = torch.autograd.grad(quack_cpp.cross_entropy(leaf, t), leaf, create_graph=True)
        with pytest.raises(RuntimeError, match="does not require grad"):
            gx.square().sum().backward()
        return [gx.detach()]

    fast, slow = _both(go, monkeypatch)
    assert torch.equal(fast[0], slow[0])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_inplace_backward_fast_path(stand_in, monkeypatch, reduction):
    def go(inplace):
        x, t = _inputs(dtype=f32)
        leaf = x.clone().requires_grad_(True)
        z = leaf * 1.0
        v0 = z._version
        loss = quack_cpp.cross_entropy(z, t, reduction=reduction, inplace_backward=inplace)
        bumped_fwd = z._version - v0
        loss.backward(torch.full_like(loss, 0.5))
        return leaf.grad, bumped_fwd, z.detach().clone(), x

    plain = go(False)
    fast = go(True)
    assert torch.equal(fast[0], plain[0])
    assert fast[1] == 0  # the backward writes the gradient (from lse), not the forward
    assert torch.equal(fast[2], fast[0])  # the logits hold the gradient after the backward
    monkeypatch.setattr(reg, "FORCE_CUSTOM_OP", True)
    slow = go(True)  # the custom op: a fresh buffer, the logits untouched
    assert torch.equal(slow[0], plain[0]) and slow[1] == 0 and torch.equal(slow[2], slow[3])


def test_inplace_backward_refuses_saved_logits(stand_in):
    x, t = _inputs(dtype=f32)
    leaf = x.clone().requires_grad_(True)
    z = leaf * 1.0
    sq = z.square().mean()  # saves z
    loss = quack_cpp.cross_entropy(z, t, inplace_backward=True) + sq
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    s = quack_cpp.softmax(leaf)  # saves its output
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        quack_cpp.cross_entropy(s, t, inplace_backward=True).backward()


def test_softmax_values_both_paths(stand_in, monkeypatch):
    def go():
        x = torch.randn(4, 6, 32, generator=torch.Generator().manual_seed(2)).to(bf16)
        res = []
        for fn in (quack_cpp.softmax, quack_cpp.log_softmax):
            for dim in (0, 1, -1):
                xl = x.clone().requires_grad_(True)
                y = fn(xl, dim)
                y.backward(torch.ones_like(y))
                res += [y, xl.grad]
        return res

    fast, slow = _both(go, monkeypatch)
    for a, b in zip(fast, slow):
        assert _meta(a) == _meta(b) and torch.equal(a, b)


def test_autocast_rule(stand_in, monkeypatch):
    monkeypatch.setattr(sm, "autocast_fp32", lambda x: True)  # as CUDA autocast on CUDA x

    def go():
        g = torch.Generator().manual_seed(3)
        x = torch.randn(5, 64, generator=g).to(bf16).requires_grad_(True)
        y = quack_cpp.softmax(x)
        y.backward(torch.randn(5, 64, generator=g))
        return [y, x.grad]

    fast, slow = _both(go, monkeypatch)
    assert fast[0].dtype == f32 and fast[1].dtype == bf16
    for a, b in zip(fast, slow):
        assert _meta(a) == _meta(b) and torch.equal(a, b)


# --------------------------------------------------------------------------------------------
# torch.compile (the custom ops, their CPU kernels: the stand-ins)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_compile_aot_eager(stand_in, reduction):
    x, t = _inputs(dtype=f32)

    def f(z, t):
        return quack_cpp.cross_entropy(quack_cpp.log_softmax(z) * 2.0, t, reduction=reduction,
                                       inplace_backward=True)

    torch._dynamo.reset()
    cf = torch.compile(f, fullgraph=True, backend="aot_eager", dynamic=False)
    leaf = x.clone().requires_grad_(True)
    loss = cf(leaf, t)
    loss.backward(torch.full_like(loss, 0.5))
    assert SCALE_CALLS == []  # traced: no in-place rescale
    assert all(not into for _, into in TRAIN_CALLS)  # nor a write into the forward's dx
    leaf2 = x.clone().requires_grad_(True)
    loss2 = f(leaf2, t)
    loss2.backward(torch.full_like(loss2, 0.5))
    torch.testing.assert_close(loss, loss2)
    torch.testing.assert_close(leaf.grad, leaf2.grad)


def test_eager_only_not_in_schema():
    schema = str(torch.ops.quack_cpp.cross_entropy_fwd.default._schema)
    assert "dx_into_x" not in schema and "want_dx" in schema
    assert "dx_into_x" not in str(torch.ops.quack_cpp.cross_entropy_bwd.default._schema)
    assert ce.cross_entropy_fwd.index_positions == (1,)
    assert ce.cross_entropy_fwd.n_custom == 15
    assert "into_dx" not in str(torch.ops.quack_cpp.cross_entropy_train_bwd.default._schema)
