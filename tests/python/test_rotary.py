"""quack_cpp.apply_rotary_emb and apply_rotary_emb_qkv on the GPU against a float64 torch
reference (the demo's formula, demo/lm.py: ``x * cat(cos, cos) + rotate_half(x) * cat(sin,
sin)``), with the tolerance rule of shared/cases/handed.md (error_lib <= 2 * error_torch +
atol; torch eager in the same dtype, cos/sin cast to it as the demo does).

Covers: fp32/fp16/bf16, head dims 64/128 and off the vector path (40, 6), rotary_dim < D,
seqlen_offsets, odd S, non-contiguous qkv (the Linear output's view, autograd's stacked
gradient), forward and backward through autograd (dx against the float64 gradient), a
gradcheck-like check (backward = transpose of the forward map), in place, eager and
torch.compile(fullgraph=True), the fast path against the custom op bit for bit, opcheck,
empty inputs, and bad inputs (ValueError naming the argument).

apply_rotary_emb_qkv_split (the packed qkv's q, k, v as three tensors; backward
quack_cpp::rotary_qkv_pack writing the packed gradient in one launch): forward bit for bit
equal to the packed op's and against float64, backward against autograd through the float64
reference and bit for bit equal to the packed op's, None gradients (zeros), non-contiguous
inputs and gradients, a NaN-poisoned packed output, rotary_dim < D with an offset, empty
inputs, the demo's SDPA pattern, torch.compile(fullgraph=True), opcheck, the fast path against
the custom ops, double backward, bad inputs.

interleaved=True (pairs (2i, 2i + 1)): forward, packed and split, and the split's backward
(rotary_qkv_pack with the inverse rotation) against a float64 reference, on and off the vector
path.

Skips without torch, quack_cpp or a CUDA GPU.
"""

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
rot = pytest.importorskip("quack_cpp.rotary_ops")
reg = pytest.importorskip("quack_cpp._registrar")

from reference import assert_rule, poison_  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
DEV = "cuda"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def tables(seqlen_ro, rotary_dim, base=10000.0):
    """(seqlen_ro, rotary_dim / 2) fp32 cos and sin of RoPE angles."""
    inv = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, device=DEV).double() / rotary_dim))
    ang = torch.outer(torch.arange(seqlen_ro, device=DEV).double(), inv)
    return ang.cos().float(), ang.sin().float()


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def ref_rotary(x, cos, sin, offset=0, conjugate=False, dtype=None):
    """The demo's formula on x (B, S, H, D) over its first R = 2 * cos.shape[1] columns, in
    ``dtype`` (None: float64) with cos/sin cast to it."""
    dt = dtype or torch.float64
    S, R = x.shape[1], 2 * cos.shape[1]
    c = torch.cat((cos, cos), -1)[offset:offset + S].to(dt)[None, :, None, :]
    s = torch.cat((sin, sin), -1)[offset:offset + S].to(dt)[None, :, None, :]
    if conjugate:
        s = -s
    xr = x.to(dt)
    rotated = xr[..., :R] * c + _rotate_half(xr[..., :R]) * s
    return torch.cat((rotated, xr[..., R:]), -1)


def ref_qkv(qkv, cos, sin, offset=0, dtype=None):
    q, k, v = qkv.unbind(2)
    dt = dtype or torch.float64
    return torch.stack((ref_rotary(q, cos, sin, offset, dtype=dtype),
                        ref_rotary(k, cos, sin, offset, dtype=dtype), v.to(dt)), 2)


SHAPES = [  # B, S, H, D, rotary_dim
    (2, 128, 4, 128, 128),
    (1, 37, 3, 64, 64),
    (2, 9, 2, 128, 64),
    (1, 5, 3, 40, 40),     # R/2 = 20: element-at-a-time kernel for 16-bit dtypes
    (2, 3, 5, 6, 6),
]


@pytest.mark.parametrize("dtype", [f32, f16, bf16])
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_backward(dtype, shape):
    B, S, H, D, R = shape
    offset = 3
    cos, sin = tables(S + offset + 2, R)
    x = torch.randn(B, S, H, D, device=DEV).to(dtype).requires_grad_()
    dy = torch.randn(B, S, H, D, device=DEV).to(dtype)
    out = quack_cpp.apply_rotary_emb(x, cos, sin, seqlen_offsets=offset)
    out.backward(dy)
    xd = x.detach().double().requires_grad_()
    ref = ref_rotary(xd, cos, sin, offset)
    ref.backward(dy.double())
    xt = x.detach().clone().requires_grad_()
    tch = ref_rotary(xt, cos, sin, offset, dtype=dtype)
    tch.backward(dy)
    assert out.dtype == dtype and out.is_contiguous()
    assert_rule("out", out, ref, tch)
    assert_rule("dx", x.grad, xd.grad, xt.grad)


@pytest.mark.parametrize("dtype", [f32, bf16])
@pytest.mark.parametrize("layout", ["linear_view", "grad_stack", "contiguous"])
def test_qkv(dtype, layout):
    B, S, H, D = 2, 33, 4, 128
    cos, sin = tables(S, D)
    if layout == "linear_view":  # a (B, S, 3 * H * D) Linear output viewed
        qkv = torch.randn(B, S, 3 * H * D, device=DEV).to(dtype).view(B, S, 3, H, D)
    elif layout == "grad_stack":  # (B, H, 3, S, D) contiguous, seen as (B, S, 3, H, D)
        qkv = torch.randn(B, H, 3, S, D, device=DEV).to(dtype).transpose(1, 3)
    else:
        qkv = torch.randn(B, S, 3, H, D, device=DEV).to(dtype)
    qkv = qkv.detach().requires_grad_()  # a leaf with the layout above
    assert qkv.stride(-1) == 1 and (layout == "grad_stack") != qkv.is_contiguous()
    out = quack_cpp.apply_rotary_emb_qkv(qkv, cos, sin)
    dy = torch.randn(B, S, 3, H, D, device=DEV).to(dtype)
    out.backward(dy)
    qd = qkv.detach().double().requires_grad_()
    ref = ref_qkv(qd, cos, sin)
    ref.backward(dy.double())
    qt = qkv.detach().clone().requires_grad_()
    tch = ref_qkv(qt, cos, sin, dtype=dtype)
    tch.backward(dy)
    assert out.shape == qkv.shape and out.is_contiguous()
    assert_rule("out", out, ref, tch)
    assert_rule("dqkv", qkv.grad, qd.grad, qt.grad)
    assert torch.equal(out[:, :, 2], qkv.detach()[:, :, 2])  # v copied exactly
    assert torch.equal(qkv.grad[:, :, 2], dy[:, :, 2])


def test_demo_attention_pattern():
    """The demo's use: Linear output viewed (B, T, 3, h, hd), rotated, then
    out.transpose(1, 3).unbind(2) into SDPA; gradient against float64."""
    B, T, h, hd = 2, 64, 4, 64
    cos_full, sin_full = tables(T, hd)
    w = (torch.randn(3 * h * hd, h * hd, device=DEV) * 0.05).requires_grad_()
    x = torch.randn(B, T, h * hd, device=DEV)

    def attn(fn, w, x):
        qkv = (x @ w.T).view(B, T, 3, h, hd)
        q, k, v = fn(qkv).transpose(1, 3).unbind(2)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    y = attn(lambda t: quack_cpp.apply_rotary_emb_qkv(t, cos_full, sin_full), w, x)
    y.sum().backward()
    wd = w.detach().double().requires_grad_()
    yr = attn(lambda t: ref_qkv(t, cos_full, sin_full), wd, x.double())
    yr.sum().backward()
    torch.testing.assert_close(y.double(), yr, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(w.grad.double(), wd.grad, rtol=1e-4, atol=1e-5)


def test_backward_is_transpose():
    """gradcheck-like: <rot(x), y> == <x, rot^T(y)> in float64 terms (fp32 inputs), and the
    backward undoes the forward (rotation orthogonal)."""
    B, S, H, D = 1, 17, 2, 64
    cos, sin = tables(S, D)
    x = torch.randn(B, S, H, D, device=DEV, requires_grad=True)
    y = torch.randn(B, S, H, D, device=DEV)
    out = quack_cpp.apply_rotary_emb(x, cos, sin)
    (g,) = torch.autograd.grad(out, x, y)
    lhs = (out.double() * y.double()).sum()
    rhs = (x.detach().double() * g.double()).sum()
    assert abs(lhs - rhs) <= 1e-4 * (out.double().abs() * y.double().abs()).sum()
    back = quack_cpp.apply_rotary_emb(out.detach(), cos, sin, conjugate=True)
    torch.testing.assert_close(back, x.detach(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("qkv", [False, True])
def test_inplace(qkv):
    B, S, H, D = 2, 7, 3, 128
    cos, sin = tables(S, 64)  # rotary_dim 64 < D: columns 64.. untouched
    shape = (B, S, 3, H, D) if qkv else (B, S, H, D)
    x = torch.randn(*shape, device=DEV).to(bf16)
    expect = quack_cpp.apply_rotary_emb_qkv(x, cos, sin) if qkv else \
        quack_cpp.apply_rotary_emb(x, cos, sin)
    y = x.clone()
    fn = quack_cpp.apply_rotary_emb_qkv if qkv else quack_cpp.apply_rotary_emb
    r = fn(y, cos, sin, inplace=True)
    assert r is y
    torch.testing.assert_close(y, expect, rtol=0, atol=0)
    with pytest.raises(ValueError, match="inplace=True is not differentiable"):
        fn(x.clone().requires_grad_(), cos, sin, inplace=True)


@pytest.mark.parametrize("interleaved", [False, True])
def test_poisoned_direct_call(interleaved):
    """_C.apply_rotary writes every element of a NaN-poisoned output (both pair layouts)."""
    B, S, H, D = 2, 5, 3, 128
    cos, sin = tables(S, D)
    x = torch.randn(B, S, H, D, device=DEV).to(bf16)
    out = poison_(torch.empty_like(x))
    rot._launch("t", x, out, cos, sin, 0, False, False, interleaved)
    torch.cuda.synchronize()
    if interleaved:
        ref = ref_rotary_interleaved(x.double(), cos, sin)
        assert not out.isnan().any()
        torch.testing.assert_close(out.double(), ref, rtol=1e-2, atol=2e-2)
    else:
        assert_rule("out", out, ref_rotary(x.double(), cos, sin),
                    ref_rotary(x, cos, sin, dtype=bf16))


def test_compile_fullgraph():
    B, S, H, D = 2, 16, 4, 64
    cos, sin = tables(S, D)

    def f(qkv):
        q, k, v = quack_cpp.apply_rotary_emb_qkv(qkv, cos, sin).transpose(1, 3).unbind(2)
        return q, k, v

    # The op's outputs and its gradient bit for bit (ops around it would be fused by inductor
    # with other roundings than eager's, so none are compared here).
    qkv = torch.randn(B, S, 3, H, D, device=DEV).to(bf16).requires_grad_()
    dys = [torch.randn(B, H, S, D, device=DEV).to(bf16) for _ in range(3)]
    eager = f(qkv)
    (ge,) = torch.autograd.grad(eager, qkv, dys)
    compiled = torch.compile(f, fullgraph=True, dynamic=False)
    out = compiled(qkv)
    (gc,) = torch.autograd.grad(out, qkv, dys)
    for o, e in zip(out, eager):
        torch.testing.assert_close(o, e, rtol=0, atol=0)
    torch.testing.assert_close(gc, ge, rtol=0, atol=0)


def test_fast_path_equals_custom_op():
    B, S, H, D = 2, 8, 4, 128
    cos, sin = tables(S, D)
    qkv = torch.randn(B, S, 3, H, D, device=DEV).to(bf16)
    a = rot.rotary(qkv, cos, sin, 0, False, True)
    b = torch.ops.quack_cpp.rotary(qkv, cos, sin, 0, False, True)
    assert torch.equal(a, b)


def test_opcheck():
    B, S, H, D = 1, 8, 2, 64
    cos, sin = tables(S, D)
    x = torch.randn(B, S, H, D, device=DEV).to(bf16)
    op = torch.ops.quack_cpp.rotary.default
    torch.library.opcheck(op, (x, cos, sin, 0, False, False))
    qkv = torch.randn(B, S, 3, H, D, device=DEV)
    torch.library.opcheck(op, (qkv, cos, sin, 0, True, True))


def test_empty():
    cos, sin = tables(4, 64)
    for shape in [(0, 4, 2, 64), (2, 0, 2, 64), (2, 4, 0, 64)]:
        x = torch.randn(*shape, device=DEV, requires_grad=True)
        out = quack_cpp.apply_rotary_emb(x, cos, sin)
        assert out.shape == x.shape
        out.sum().backward()
        assert x.grad.shape == x.shape


def test_bad_inputs():
    cos, sin = tables(8, 64)
    x = torch.randn(2, 8, 2, 64, device=DEV)
    with pytest.raises(ValueError, match="seqlen_offsets"):
        quack_cpp.apply_rotary_emb(x, cos, sin, seqlen_offsets=torch.zeros(2, device=DEV))
    with pytest.raises(ValueError, match="^apply_rotary_emb: x has 3 dimensions"):
        quack_cpp.apply_rotary_emb(x[0], cos, sin)
    with pytest.raises(ValueError, match="^apply_rotary_emb_qkv: qkv has shape"):
        quack_cpp.apply_rotary_emb_qkv(x.view(2, 8, 2, 1, 64), cos, sin)
    with pytest.raises(ValueError, match="rotary_dim"):
        c2, s2 = tables(8, 130)
        quack_cpp.apply_rotary_emb(x, c2, s2)
    with pytest.raises(ValueError, match="cos has 8 rows"):
        quack_cpp.apply_rotary_emb(x, cos, sin, seqlen_offsets=1)
    with pytest.raises(ValueError, match="expected a CUDA tensor"):
        quack_cpp.apply_rotary_emb(x.cpu(), cos, sin)
    with pytest.raises(ValueError, match="dtype"):
        quack_cpp.apply_rotary_emb(x.to(torch.int32), cos, sin)
    with pytest.raises(ValueError, match="sin has shape"):
        quack_cpp.apply_rotary_emb(x, cos, sin[:, :16])


def test_16bit_tables_upcast():
    cos, sin = tables(8, 64)
    x = torch.randn(1, 8, 2, 64, device=DEV).to(bf16)
    a = quack_cpp.apply_rotary_emb(x, cos.to(bf16), sin.to(bf16))
    b = quack_cpp.apply_rotary_emb(x, cos.to(bf16).float(), sin.to(bf16).float())
    assert torch.equal(a, b)


# --------------------------------------------------------------------------------------------
# apply_rotary_emb_qkv_split / quack_cpp::rotary_qkv_pack
# --------------------------------------------------------------------------------------------


def _qkv(B, S, H, D, dtype, layout="linear_view"):
    """A leaf qkv (B, S, 3, H, D) in one of test_qkv's layouts."""
    if layout == "linear_view":
        x = torch.randn(B, S, 3 * H * D, device=DEV).to(dtype).view(B, S, 3, H, D)
    elif layout == "grad_stack":
        x = torch.randn(B, H, 3, S, D, device=DEV).to(dtype).transpose(1, 3)
    else:
        raise ValueError(layout)
    return x.detach().requires_grad_()


@pytest.mark.parametrize("dtype", [f32, f16, bf16])
@pytest.mark.parametrize("shape", SHAPES)
def test_split_forward_backward(dtype, shape):
    """Forward: the packed op's q, k, v bit for bit and the float64 reference; backward: the
    float64 gradient (handed.md rule) and the packed op's gradient bit for bit."""
    B, S, H, D, R = shape
    offset = 2
    cos, sin = tables(S + offset + 1, R)
    qkv = _qkv(B, S, H, D, dtype)
    dys = [torch.randn(B, S, H, D, device=DEV).to(dtype) for _ in range(3)]
    q, k, v = quack_cpp.apply_rotary_emb_qkv_split(qkv, cos, sin, seqlen_offsets=offset)
    for t in (q, k, v):
        assert t.shape == (B, S, H, D) and t.dtype == dtype and t.is_contiguous()
    (g,) = torch.autograd.grad((q, k, v), qkv, dys)

    x2 = qkv.detach().clone().requires_grad_()
    packed = quack_cpp.apply_rotary_emb_qkv(x2, cos, sin, seqlen_offsets=offset)
    for a, b in zip((q, k, v), packed.unbind(2)):
        assert torch.equal(a, b)
    (g2,) = torch.autograd.grad(packed.unbind(2), x2, dys)
    assert torch.equal(g, g2)

    qd = qkv.detach().double().requires_grad_()
    ref = ref_qkv(qd, cos, sin, offset).unbind(2)
    (gd,) = torch.autograd.grad(ref, qd, [d.double() for d in dys])
    qt = qkv.detach().clone().requires_grad_()
    tch = ref_qkv(qt, cos, sin, offset, dtype=dtype).unbind(2)
    (gt,) = torch.autograd.grad(tch, qt, dys)
    for name, a, r, t in zip("qkv", (q, k, v), ref, tch):
        assert_rule(name, a, r, t)
    assert torch.equal(v, qkv.detach()[:, :, 2])
    assert g.shape == qkv.shape and g.is_contiguous()
    assert_rule("dqkv", g, gd, gt)
    assert torch.equal(g[:, :, 2], dys[2])


@pytest.mark.parametrize("used", ["q", "k", "v", "qk", "kv", "qv"])
def test_split_none_grads(used):
    """Outputs that do not reach the loss get a None gradient: their slice of dqkv is zeros
    (exactly), the others as with every gradient given."""
    B, S, H, D = 2, 24, 4, 128
    cos, sin = tables(S, D)
    qkv = _qkv(B, S, H, D, bf16)
    outs = dict(zip("qkv", quack_cpp.apply_rotary_emb_qkv_split(qkv, cos, sin)))
    dys = {n: torch.randn(B, S, H, D, device=DEV).to(bf16) for n in "qkv"}
    (g,) = torch.autograd.grad([outs[n] for n in used], qkv, [dys[n] for n in used])
    full = [dys[n] if n in used else torch.zeros_like(dys[n]) for n in "qkv"]
    x2 = qkv.detach().clone().requires_grad_()
    (g2,) = torch.autograd.grad(quack_cpp.apply_rotary_emb_qkv(x2, cos, sin).unbind(2), x2, full)
    assert torch.equal(g, g2)
    for i, n in enumerate("qkv"):
        if n not in used:
            assert (g[:, :, i] == 0).all()


@pytest.mark.parametrize("dtype", [f32, bf16])
def test_split_noncontiguous(dtype):
    """A strided qkv (autograd's stacked layout), gradients that are transposed views (SDPA's
    backward), expanded (a .sum()'s gradient, D stride 0) and sliced."""
    B, S, H, D = 2, 33, 4, 128
    cos, sin = tables(S, D)
    qkv = _qkv(B, S, H, D, dtype, "grad_stack")
    assert not qkv.is_contiguous()
    q, k, v = quack_cpp.apply_rotary_emb_qkv_split(qkv, cos, sin)
    dq = torch.randn(B, H, S, D, device=DEV).to(dtype).transpose(1, 2)   # (B, S, H, D) view
    dk = torch.randn(B, S, H, 2 * D, device=DEV).to(dtype)[..., D:]        # sliced rows
    dv = torch.ones(1, device=DEV, dtype=dtype).expand(B, S, H, D)         # all strides 0
    (g,) = torch.autograd.grad((q, k, v), qkv, (dq, dk, dv))
    qd = qkv.detach().double().requires_grad_()
    ref = ref_qkv(qd, cos, sin).unbind(2)
    (gd,) = torch.autograd.grad(ref, qd, (dq.double(), dk.double(), dv.double()))
    qt = qkv.detach().clone().requires_grad_()
    tch = ref_qkv(qt, cos, sin, dtype=dtype).unbind(2)
    (gt,) = torch.autograd.grad(tch, qt, (dq, dk, dv))
    for name, a, r, t in zip("qkv", (q, k, v), ref, tch):
        assert_rule(name, a, r, t)
    assert_rule("dqkv", g, gd, gt)
    assert (g[:, :, 2] == 1).all()


@pytest.mark.parametrize("given", ["qkv", "q", "kv", ""])
@pytest.mark.parametrize("shape", [(2, 5, 3, 128, 128), (1, 7, 2, 40, 40), (2, 6, 2, 128, 64)])
def test_pack_poisoned(given, shape):
    """_C.rotary_qkv_pack writes every element of a NaN-poisoned packed output (zeros for
    the absent gradients), the vector and element-at-a-time kernels, rotary_dim < D."""
    B, S, H, D, R = shape
    cos, sin = tables(S + 3, R)
    ds = {n: torch.randn(B, S, H, D, device=DEV).to(bf16) for n in "qkv"}
    out = poison_(torch.empty(B, S, 3, H, D, device=DEV, dtype=bf16))
    args = [rot.tensor_arg(ds[n], "t", n) if n in given else None for n in "qkv"]
    rot._C.rotary_qkv_pack(*args, rot.tensor_arg(out.view(B, S, 3 * H, D), "t", "dqkv"),
                           rot.tensor_arg(cos, "t", "cos"), rot.tensor_arg(sin, "t", "sin"), 3,
                           True, rot.stream(out))
    torch.cuda.synchronize()
    for i, n in enumerate("qkv"):
        if n not in given:
            assert (out[:, :, i] == 0).all(), n
        elif n == "v":
            assert torch.equal(out[:, :, 2], ds["v"])
        else:
            ref = ref_rotary(ds[n].double(), cos, sin, 3, conjugate=True)
            tch = ref_rotary(ds[n], cos, sin, 3, conjugate=True, dtype=bf16)
            assert_rule(n, out[:, :, i], ref, tch)


def test_split_demo_attention_pattern():
    """The demo's use: Linear output viewed (B, T, 3, h, hd), split, each .transpose(1, 2)
    into SDPA; gradient of the Linear weight against float64."""
    B, T, h, hd = 2, 64, 4, 64
    cos, sin = tables(T, hd)
    w = (torch.randn(3 * h * hd, h * hd, device=DEV) * 0.05).requires_grad_()
    x = torch.randn(B, T, h * hd, device=DEV)

    def attn(rotary, w, x):
        q, k, v = (t.transpose(1, 2) for t in rotary((x @ w.T).view(B, T, 3, h, hd)))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    y = attn(lambda t: quack_cpp.apply_rotary_emb_qkv_split(t, cos, sin), w, x)
    y.sum().backward()
    wd = w.detach().double().requires_grad_()
    yr = attn(lambda t: ref_qkv(t, cos, sin).unbind(2), wd, x.double())
    yr.sum().backward()
    torch.testing.assert_close(y.double(), yr, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(w.grad.double(), wd.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("unused_v", [False, True])
def test_split_compile_fullgraph(unused_v):
    B, S, H, D = 2, 16, 4, 64
    cos, sin = tables(S, D)

    def f(qkv):
        q, k, v = quack_cpp.apply_rotary_emb_qkv_split(qkv, cos, sin)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        return (q, k) if unused_v else (q, k, v)

    qkv = torch.randn(B, S, 3, H, D, device=DEV).to(bf16).requires_grad_()
    dys = [torch.randn(B, H, S, D, device=DEV).to(bf16) for _ in range(3)]
    eager = f(qkv)
    (ge,) = torch.autograd.grad(eager, qkv, dys[:len(eager)])
    compiled = torch.compile(f, fullgraph=True, dynamic=False)
    out = compiled(qkv)
    (gc,) = torch.autograd.grad(out, qkv, dys[:len(out)])
    for o, e in zip(out, eager):
        torch.testing.assert_close(o, e, rtol=0, atol=0)
    torch.testing.assert_close(gc, ge, rtol=0, atol=0)
    if unused_v:
        assert (gc[:, :, 2] == 0).all()


def test_split_fast_path_equals_custom_op():
    B, S, H, D = 2, 8, 4, 128
    cos, sin = tables(S + 1, D)
    qkv = torch.randn(B, S, 3, H, D, device=DEV).to(bf16)
    a = rot.rotary_qkv_split(qkv, cos, sin, 1, False)
    b = torch.ops.quack_cpp.rotary_qkv_split(qkv, cos, sin, 1, False)
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    ds = [torch.randn(B, S, H, D, device=DEV).to(bf16) for _ in range(3)]
    a = rot.rotary_qkv_pack(ds[0], None, ds[2], cos, sin, 1, True)
    b = torch.ops.quack_cpp.rotary_qkv_pack(ds[0], None, ds[2], cos, sin, 1, True)
    assert torch.equal(a, b)


def test_split_opcheck():
    B, S, H, D = 1, 8, 2, 64
    cos, sin = tables(S, D)
    qkv = torch.randn(B, S, 3, H, D, device=DEV).to(bf16)
    torch.library.opcheck(torch.ops.quack_cpp.rotary_qkv_split.default,
                          (qkv, cos, sin, 0, False))
    ds = [torch.randn(B, S, H, D, device=DEV) for _ in range(3)]
    op = torch.ops.quack_cpp.rotary_qkv_pack.default
    torch.library.opcheck(op, (ds[0], ds[1], ds[2], cos, sin, 0, True))
    torch.library.opcheck(op, (None, ds[1], None, cos, sin, 0, True))


def test_split_double_backward():
    """rotary_qkv_pack's backward is rotary_qkv_split with the rotation flipped: the gradient
    of <pack(dq, dk, dv), w> (pack rotating by -angle) is w's q and k slices rotated by +angle
    and its v slice."""
    B, S, H, D = 1, 9, 2, 64
    cos, sin = tables(S, D)
    ds = [torch.randn(B, S, H, D, device=DEV, requires_grad=True) for _ in range(3)]
    w = torch.randn(B, S, 3, H, D, device=DEV)
    out = rot.rotary_qkv_pack(ds[0], ds[1], ds[2], cos, sin, 0, True)
    gs = torch.autograd.grad((out * w).sum(), ds)
    for i, n in enumerate("qkv"):
        want = ref_rotary(w[:, :, i].double(), cos, sin) if n != "v" else w[:, :, 2].double()
        torch.testing.assert_close(gs[i].double(), want, rtol=1e-5, atol=1e-5)


def test_split_empty():
    cos, sin = tables(4, 64)
    for shape in [(0, 4, 3, 2, 64), (2, 0, 3, 2, 64), (2, 4, 3, 0, 64)]:
        qkv = torch.randn(*shape, device=DEV, requires_grad=True)
        q, k, v = quack_cpp.apply_rotary_emb_qkv_split(qkv, cos, sin)
        assert q.shape == (shape[0], shape[1], shape[3], shape[4])
        (q.sum() + k.sum() + v.sum()).backward()
        assert qkv.grad.shape == qkv.shape


def test_split_bad_inputs():
    cos, sin = tables(8, 64)
    qkv = torch.randn(2, 8, 3, 2, 64, device=DEV)
    with pytest.raises(ValueError, match="expected 5"):
        quack_cpp.apply_rotary_emb_qkv_split(qkv[:, :, 0], cos, sin)
    with pytest.raises(ValueError, match="qkv has shape"):
        quack_cpp.apply_rotary_emb_qkv_split(qkv[:, :, :2], cos, sin)
    with pytest.raises(ValueError, match="cos has 8 rows"):
        quack_cpp.apply_rotary_emb_qkv_split(qkv, cos, sin, seqlen_offsets=1)
    with pytest.raises(ValueError, match="expected a CUDA tensor"):
        quack_cpp.apply_rotary_emb_qkv_split(qkv.cpu(), cos, sin)
    d = torch.randn(2, 8, 2, 64, device=DEV)
    with pytest.raises(ValueError, match="all None"):
        rot.rotary_qkv_pack(None, None, None, cos, sin, 0, True)
    with pytest.raises(ValueError, match="dk is"):
        rot.rotary_qkv_pack(d, d[:, :4], None, cos, sin, 0, True)
    with pytest.raises(ValueError, match="dv is"):
        rot.rotary_qkv_pack(d, None, d.to(bf16), cos, sin, 0, True)


def ref_rotary_interleaved(x, cos, sin, offset=0, conjugate=False):
    """flash-attn's interleaved=True in float64: pairs (x[2i], x[2i+1]) rotated by angle i
    over the first R = 2 * cos.shape[1] columns."""
    S, half = x.shape[1], cos.shape[1]
    c = cos[offset:offset + S].double()[None, :, None, :]
    s = sin[offset:offset + S].double()[None, :, None, :]
    if conjugate:
        s = -s
    xr = x.double()
    x0, x1 = xr[..., 0:2 * half:2], xr[..., 1:2 * half:2]
    rotated = torch.stack((x0 * c - x1 * s, x1 * c + x0 * s), -1).flatten(-2)
    return torch.cat((rotated, xr[..., 2 * half:]), -1)


@pytest.mark.parametrize("dtype", [f32, f16, bf16])
@pytest.mark.parametrize("shape", [(2, 33, 3, 128, 128), (1, 9, 2, 64, 32), (2, 5, 2, 6, 6)])
def test_interleaved(dtype, shape):
    """interleaved=True against float64: apply_rotary_emb, the packed and the split qkv forms
    (forward), the split's backward (the packed gradient, inverse rotation) and in place."""
    B, S, H, D, R = shape
    off = 3
    cos, sin = tables(S + off, R)
    tol = {f32: 1e-5, f16: 2e-3, bf16: 1.6e-2}[dtype]
    x = torch.randn(B, S, H, D, device=DEV, dtype=dtype)
    out = quack_cpp.apply_rotary_emb(x, cos, sin, interleaved=True, seqlen_offsets=off)
    torch.testing.assert_close(out.double(), ref_rotary_interleaved(x, cos, sin, off),
                               rtol=tol, atol=tol)
    qkv = torch.randn(B, S, 3, H, D, device=DEV, dtype=dtype, requires_grad=True)
    packed = quack_cpp.apply_rotary_emb_qkv(qkv.detach(), cos, sin, interleaved=True,
                                            seqlen_offsets=off)
    q, k, v = quack_cpp.apply_rotary_emb_qkv_split(qkv, cos, sin, interleaved=True,
                                                   seqlen_offsets=off)
    for i, t in enumerate((q, k)):
        want = ref_rotary_interleaved(qkv.detach()[:, :, i], cos, sin, off)
        torch.testing.assert_close(t.double(), want, rtol=tol, atol=tol)
        assert torch.equal(t, packed[:, :, i])
    assert torch.equal(v, qkv.detach()[:, :, 2])
    ds = [torch.randn_like(q) for _ in range(3)]
    torch.autograd.backward((q, k, v), ds)
    want = torch.stack((ref_rotary_interleaved(ds[0], cos, sin, off, conjugate=True),
                        ref_rotary_interleaved(ds[1], cos, sin, off, conjugate=True),
                        ds[2].double()), 2)
    torch.testing.assert_close(qkv.grad.double(), want, rtol=tol, atol=tol)
    y = x.clone()
    quack_cpp.apply_rotary_emb(y, cos, sin, interleaved=True, inplace=True, seqlen_offsets=off)
    assert torch.equal(y, out)
