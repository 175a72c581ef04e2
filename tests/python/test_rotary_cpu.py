"""The torch layer of the split rotary without a GPU: the custom ops quack_cpp::rotary_qkv_split
and rotary_qkv_pack get CPU kernels written in torch after include/quack/rotary.h's contract
(cpu_stand_in.py), so the wrapper (apply_rotary_emb_qkv_split), the autograd wiring (the
split's backward is the pack with the rotation flipped, None gradients, the pack's backward
the split), the fake kernels (torch.library.opcheck), torch.compile(fullgraph=True) and the
Python argument errors are checked on CPU. The kernels themselves are tested in
test_rotary.py. Needs torch (any build) and an importable quack_cpp."""

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
rot = pytest.importorskip("quack_cpp.rotary_ops")

import cpu_stand_in  # noqa: E402
from reference import assert_rule  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def cpu_kernels():
    with cpu_stand_in.registered():
        yield


def tables(seqlen_ro, rotary_dim, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, rotary_dim, 2).double() / rotary_dim))
    ang = torch.outer(torch.arange(seqlen_ro).double(), inv)
    return ang.cos().float(), ang.sin().float()


def ref_rotary(x, cos, sin, offset=0, dtype=torch.float64):
    """The demo's formula (x * cat(cos, cos) + rotate_half(x) * cat(sin, sin)) on x
    (B, S, H, D) over its first 2 * cos.shape[1] columns, in ``dtype``."""
    S, R = x.shape[1], 2 * cos.shape[1]
    c = torch.cat((cos, cos), -1)[offset:offset + S].to(dtype)[None, :, None, :]
    s = torch.cat((sin, sin), -1)[offset:offset + S].to(dtype)[None, :, None, :]
    xr = x.to(dtype)
    x1, x2 = xr[..., :R // 2], xr[..., R // 2:R]
    return torch.cat((xr[..., :R] * c + torch.cat((-x2, x1), -1) * s, xr[..., R:]), -1)


def ref_split(qkv, cos, sin, offset=0, dtype=torch.float64):
    q, k, v = qkv.unbind(2)
    return (ref_rotary(q, cos, sin, offset, dtype), ref_rotary(k, cos, sin, offset, dtype),
            v.to(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2, 9, 3, 16, 16), (1, 6, 2, 12, 8)])  # B, S, H, D, R
def test_split_forward_backward(dtype, shape):
    B, S, H, D, R = shape
    g = torch.Generator().manual_seed(0)
    cos, sin = tables(S + 2, R)
    qkv = torch.randn(B, S, 3, H, D, generator=g).to(dtype).requires_grad_()
    dys = [torch.randn(B, S, H, D, generator=g).to(dtype) for _ in range(3)]
    outs = quack_cpp.apply_rotary_emb_qkv_split(qkv, cos, sin, seqlen_offsets=2)
    assert len(outs) == 3
    for o in outs:
        assert o.shape == (B, S, H, D) and o.dtype == dtype and o.is_contiguous()
    (gr,) = torch.autograd.grad(outs, qkv, dys)
    qd = qkv.detach().double().requires_grad_()
    ref = ref_split(qd, cos, sin, 2)
    (gd,) = torch.autograd.grad(ref, qd, [d.double() for d in dys])
    qt = qkv.detach().clone().requires_grad_()
    tch = ref_split(qt, cos, sin, 2, dtype)
    (gt,) = torch.autograd.grad(tch, qt, dys)
    for name, o, r, t in zip("qkv", outs, ref, tch):
        assert_rule(name, o, r, t)
    assert gr.shape == qkv.shape and gr.is_contiguous()
    assert_rule("dqkv", gr, gd, gt)
    assert torch.equal(gr[:, :, 2], dys[2])


@pytest.mark.parametrize("used", ["q", "kv", "v"])
def test_split_none_grads(used):
    """Outputs that do not reach the loss: their slice of the packed gradient is zeros."""
    cos, sin = tables(5, 8)
    qkv = torch.randn(1, 5, 3, 2, 8, requires_grad=True)
    outs = dict(zip("qkv", quack_cpp.apply_rotary_emb_qkv_split(qkv, cos, sin)))
    dys = {n: torch.randn(1, 5, 2, 8) for n in "qkv"}
    (g,) = torch.autograd.grad([outs[n] for n in used], qkv, [dys[n] for n in used])
    qd = qkv.detach().double().requires_grad_()
    ref = dict(zip("qkv", ref_split(qd, cos, sin)))
    (gd,) = torch.autograd.grad([ref[n] for n in used], qd, [dys[n].double() for n in used])
    torch.testing.assert_close(g.double(), gd, rtol=1e-5, atol=1e-6)
    for i, n in enumerate("qkv"):
        if n not in used:
            assert (g[:, :, i] == 0).all()


def test_split_backward_calls_pack(monkeypatch):
    """The split's backward is one rotary_qkv_pack call with the rotation flipped and None
    for the unused gradients (no zeros tensor, no stack)."""
    calls = []
    pack = rot.rotary_qkv_pack

    def spy(*args):
        calls.append(args)
        return pack(*args)
    monkeypatch.setattr(rot, "rotary_qkv_pack", spy)
    cos, sin = tables(4, 8)
    qkv = torch.randn(1, 4, 3, 2, 8, requires_grad=True)
    q, k, v = quack_cpp.apply_rotary_emb_qkv_split(qkv, cos, sin)
    (q * 2).sum().backward()
    assert len(calls) == 1
    dq, dk, dv, _, _, offset, conjugate, interleaved = calls[0]
    assert dq is not None and dk is None and dv is None
    assert offset == 0 and conjugate is True and interleaved is False


def test_pack_double_backward():
    cos, sin = tables(4, 8)
    ds = [torch.randn(1, 4, 2, 8, requires_grad=True) for _ in range(3)]
    w = torch.randn(1, 4, 3, 2, 8)
    out = rot.rotary_qkv_pack(ds[0], None, ds[2], cos, sin, 0, True)
    assert out.shape == (1, 4, 3, 2, 8)
    assert (out[:, :, 1] == 0).all()
    gq, gv = torch.autograd.grad((out * w).sum(), (ds[0], ds[2]))
    torch.testing.assert_close(gq.double(), ref_rotary(w[:, :, 0], cos, sin), rtol=1e-5,
                               atol=1e-6)
    assert torch.equal(gv, w[:, :, 2])


@pytest.mark.parametrize("unused_v", [False, True])
def test_compile_fullgraph(unused_v):
    cos, sin = tables(6, 8)

    def f(qkv):
        q, k, v = quack_cpp.apply_rotary_emb_qkv_split(qkv, cos, sin)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        return (q, k) if unused_v else (q, k, v)

    qkv = torch.randn(2, 6, 3, 2, 8, requires_grad=True)
    dys = [torch.randn(2, 2, 6, 8) for _ in range(3)]
    eager = f(qkv)
    (ge,) = torch.autograd.grad(eager, qkv, dys[:len(eager)])
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager", dynamic=False)
    out = compiled(qkv)
    (gc,) = torch.autograd.grad(out, qkv, dys[:len(out)])
    for o, e in zip(out, eager):
        assert torch.equal(o, e)
    assert torch.equal(gc, ge)


def test_opcheck():
    cos, sin = tables(4, 8)
    qkv = torch.randn(1, 4, 3, 2, 8)
    torch.library.opcheck(torch.ops.quack_cpp.rotary_qkv_split.default,
                          (qkv, cos, sin, 0, False))
    ds = [torch.randn(1, 4, 2, 8) for _ in range(3)]
    op = torch.ops.quack_cpp.rotary_qkv_pack.default
    torch.library.opcheck(op, (ds[0], ds[1], ds[2], cos, sin, 0, True))
    torch.library.opcheck(op, (None, ds[1], None, cos, sin, 0, True))


def test_meta_shapes():
    """The fake kernels on meta tensors: shapes and dtypes without a kernel."""
    cos, sin = tables(4, 8)
    qkv = torch.empty(2, 4, 3, 5, 8, device="meta", dtype=torch.bfloat16)
    q, k, v = torch.ops.quack_cpp.rotary_qkv_split(qkv, cos.to("meta"), sin.to("meta"), 0,
                                                   False)
    assert q.shape == k.shape == v.shape == (2, 4, 5, 8) and q.dtype == torch.bfloat16
    out = torch.ops.quack_cpp.rotary_qkv_pack(None, k, None, cos.to("meta"), sin.to("meta"), 0,
                                              True)
    assert out.shape == (2, 4, 3, 5, 8)


def test_empty():
    cos, sin = tables(4, 8)
    for shape in [(0, 4, 3, 2, 8), (2, 0, 3, 2, 8), (2, 4, 3, 0, 8)]:
        qkv = torch.randn(*shape, requires_grad=True)
        q, k, v = quack_cpp.apply_rotary_emb_qkv_split(qkv, cos, sin)
        assert q.shape == (shape[0], shape[1], shape[3], shape[4])
        (q.sum() + k.sum() + v.sum()).backward()
        assert qkv.grad.shape == qkv.shape


def test_bad_inputs():
    cos, sin = tables(8, 8)
    qkv = torch.randn(2, 8, 3, 2, 8)
    split = quack_cpp.apply_rotary_emb_qkv_split
    with pytest.raises(ValueError, match="seqlen_offsets"):
        split(qkv, cos, sin, seqlen_offsets=torch.zeros(2))
    # Named by the public function and its argument (qkv), not the op's (rotary_qkv_split, x).
    with pytest.raises(TypeError, match="^apply_rotary_emb_qkv_split: qkv is list"):
        split([qkv], cos, sin)
    with pytest.raises(ValueError, match="^apply_rotary_emb_qkv_split: qkv has 4 dimensions"):
        split(qkv[:, :, 0], cos, sin)
    with pytest.raises(ValueError, match="^apply_rotary_emb_qkv_split: qkv has shape"):
        split(qkv[:, :, :2], cos, sin)
    with pytest.raises(ValueError, match="dtype int32"):
        split(qkv.to(torch.int32), cos, sin)
    with pytest.raises(ValueError, match="rotary_dim"):
        c2, s2 = tables(8, 10)
        split(qkv, c2, s2)
    d = torch.randn(2, 8, 2, 8)
    with pytest.raises(ValueError, match="all None"):
        rot.rotary_qkv_pack(None, None, None, cos, sin, 0, True)
    with pytest.raises(ValueError, match="dk is"):
        rot.rotary_qkv_pack(d, d[:, :4], None, cos, sin, 0, True)
    with pytest.raises(ValueError, match="dv is"):
        rot.rotary_qkv_pack(d, None, d.to(torch.bfloat16), cos, sin, 0, True)
    with pytest.raises(ValueError, match="expected 4"):
        rot.rotary_qkv_pack(None, qkv, None, cos, sin, 0, True)


def ref_interleaved(x, cos, sin, offset=0, conjugate=False):
    """flash-attn's interleaved=True in float64 over the first 2 * cos.shape[1] columns."""
    S, half = x.shape[1], cos.shape[1]
    c = cos[offset:offset + S].double()[None, :, None, :]
    s = sin[offset:offset + S].double()[None, :, None, :]
    s = -s if conjugate else s
    xr = x.double()
    x0, x1 = xr[..., 0:2 * half:2], xr[..., 1:2 * half:2]
    return torch.cat((torch.stack((x0 * c - x1 * s, x1 * c + x0 * s), -1).flatten(-2),
                      xr[..., 2 * half:]), -1)


def test_split_interleaved_forward_backward():
    """interleaved=True through the split: the flag reaches both ops (forward rotation, the
    backward's pack with the inverse rotation), against float64."""
    B, S, H, D, R = 2, 7, 3, 12, 8
    cos, sin = tables(S + 1, R)
    qkv = torch.randn(B, S, 3, H, D, dtype=torch.float64).float().requires_grad_()
    q, k, v = quack_cpp.apply_rotary_emb_qkv_split(qkv, cos, sin, interleaved=True,
                                                   seqlen_offsets=1)
    torch.testing.assert_close(q.double(), ref_interleaved(qkv[:, :, 0].detach(), cos, sin, 1))
    torch.testing.assert_close(k.double(), ref_interleaved(qkv[:, :, 1].detach(), cos, sin, 1))
    assert torch.equal(v, qkv[:, :, 2].detach())
    ds = [torch.randn(B, S, H, D) for _ in range(3)]
    torch.autograd.backward((q, k, v), ds)
    want = torch.stack((ref_interleaved(ds[0], cos, sin, 1, True),
                        ref_interleaved(ds[1], cos, sin, 1, True), ds[2].double()), 2)
    torch.testing.assert_close(qkv.grad.double(), want)


def test_interleave_rotary_rows_permutes_and_validates():
    """interleave_rotary_rows on CPU (torch only): row 2i of each q / k head is old row i, 2i + 1
    old row i + hd / 2, v unchanged; bad shapes raise ValueError naming the argument."""
    grot = pytest.importorskip("quack_cpp.gemm_rotary_ops")
    h, hd, K = 2, 4, 3
    w = torch.arange(3 * h * hd * K, dtype=torch.float32).view(3 * h * hd, K)
    p = grot.interleave_rotary_rows(w, h, hd)
    head = w[:hd]
    assert torch.equal(p[:hd], torch.stack((head[:2], head[2:]), 1).reshape(hd, K))
    assert torch.equal(p[2 * h * hd:], w[2 * h * hd:])
    with pytest.raises(ValueError, match=r"interleave_rotary_rows: w has shape \(24,\)"):
        grot.interleave_rotary_rows(w[:, 0], h, hd)
    with pytest.raises(ValueError, match="head_dim is 3, expected an even"):
        grot.interleave_rotary_rows(w[:18], h, 3)
    with pytest.raises(ValueError, match=r"w has 20 rows .* = 24 \(q, k, v of equal heads"):
        grot.interleave_rotary_rows(w[:20], h, hd)
    with pytest.raises(ValueError, match="n_heads is 0"):
        grot.interleave_rotary_rows(w, 0, hd)
