"""quack_cpp.linear_rotary_qkv (the qkv GEMM with q and k rotated in its epilogue, interleaved
pairs; quack::gemm_rotary) against float64: x @ W^T, then flash-attn's interleaved rotation of
q's and k's heads. The rule of shared/cases/handed.md (error_lib <= 2 * error_torch + atol;
torch's bf16 Linear + the interleaved rotation in bf16 as the same-dtype peer).

Covers: forward q, k, v (the demo's head dim 128, hd 64, a table longer than T, odd token
counts per sequence), the backward through autograd (dx, dW against float64; None gradients
for unused outputs), the unused-k case, autocast with an fp32 weight, the permuted
(rotate_half) weight giving torch_rotary's attention scores, torch.compile(fullgraph=True),
opcheck of the op, the gemm_rotary op's own outputs for rotary_cols < N and bad inputs
(ValueError naming the argument).

Skips without torch, quack_cpp or a CUDA GPU. QUACK_TEST_DEVICE=cpu runs it on the CPU
stand-ins (cpu_stand_in.py: the formula in torch, fp32 math), checking the Python layer: the
op's wiring, the autograd (the interleaved rotary_qkv_pack and the Linear's GEMMs), fakes and
errors.
"""

import os

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
grot = pytest.importorskip("quack_cpp.gemm_rotary_ops")

from reference import assert_rule  # noqa: E402

DEVICE = os.environ.get("QUACK_TEST_DEVICE", "cuda")
if DEVICE == "cuda":
    pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
STAND_IN = True  # QUACK_TEST_DEVICE=cpu runs this module on the CPU stand-ins (conftest.py)

bf16 = torch.bfloat16


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def tables(seqlen_ro, hd, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, hd, 2, device=DEVICE).double() / hd))
    ang = torch.outer(torch.arange(seqlen_ro, device=DEVICE).double(), inv)
    return ang.cos().float(), ang.sin().float()


def rotate_interleaved(t, cos, sin, dt):
    """t (B, T, h, hd) in dtype dt: pairs (2i, 2i + 1) rotated by angle i."""
    T = t.shape[1]
    c = cos[:T].to(dt)[None, :, None, :]
    s = sin[:T].to(dt)[None, :, None, :]
    t = t.to(dt)
    t0, t1 = t[..., 0::2], t[..., 1::2]
    return torch.stack((t0 * c - t1 * s, t1 * c + t0 * s), -1).flatten(-2)


def ref_qkv(x, w, cos, sin, h, dt=torch.float64):
    """(q, k, v) of x @ W^T in dt with q and k rotated (interleaved)."""
    B, T, _ = x.shape
    hd = w.shape[0] // (3 * h)
    qkv = (x.to(dt) @ w.to(dt).T).view(B, T, 3, h, hd)
    q, k, v = qkv.unbind(2)
    return rotate_interleaved(q, cos, sin, dt), rotate_interleaved(k, cos, sin, dt), v


def inputs(B, T, h, hd, K):
    x = torch.randn(B, T, K, device=DEVICE).to(bf16)
    w = (torch.randn(3 * h * hd, K, device=DEVICE) * K ** -0.5).to(bf16)
    return x, w


SHAPES = [  # B, T, h, hd, K, table rows
    (2, 64, 4, 128, 256, 64),
    (1, 40, 3, 64, 128, 48),
    (3, 17, 2, 128, 64, 17),
]


@pytest.mark.parametrize("shape", SHAPES)
def test_forward_backward(shape):
    B, T, h, hd, K, S_ro = shape
    cos, sin = tables(S_ro, hd)
    x, w = inputs(B, T, h, hd, K)
    xs = x.clone().requires_grad_()
    ws = w.clone().requires_grad_()
    q, k, v = quack_cpp.linear_rotary_qkv(xs, ws, cos, sin, h)
    for t in (q, k, v):
        assert t.shape == (B, T, h, hd) and t.dtype == bf16 and t.stride(-1) == 1
    assert q.data_ptr() + h * hd * 2 == k.data_ptr()  # views of one packed output
    dys = [torch.randn(B, T, h, hd, device=DEVICE).to(bf16) for _ in range(3)]
    torch.autograd.backward((q, k, v), dys)

    def grads(dt):
        xr = x.detach().to(dt).requires_grad_()
        wr = w.detach().to(dt).requires_grad_()
        outs = ref_qkv(xr, wr, cos, sin, h, dt)
        torch.autograd.backward(outs, [d.to(dt) for d in dys])
        return [o.detach() for o in outs] + [xr.grad, wr.grad]

    ref, tch = grads(torch.float64), grads(bf16)
    for name, lib, r, t in zip(("q", "k", "v", "dx", "dW"), (q, k, v, xs.grad, ws.grad), ref, tch):
        assert_rule(name, lib, r, t)


@pytest.mark.parametrize("how", ["grad", "inputs"])
def test_fuse_grad_accum_partial_backward(how):
    """fuse_grad_accum with a backward that computes one gradient (autograd.grad, or
    backward(inputs=...)) once weight.grad exists: x's alone leaves weight.grad bit for bit;
    weight's alone is the new dW (autograd.grad, weight.grad kept) or dW accumulated into
    weight.grad (backward(inputs=[weight])); against float64 and bf16 torch run the same way."""
    B, T, h, hd, K, S_ro = SHAPES[0]
    cos, sin = tables(S_ro, hd)
    x, w = inputs(B, T, h, hd, K)
    dys = [torch.randn(B, T, h, hd, device=DEVICE).to(bf16) for _ in range(3)]
    old = torch.randn_like(w)
    for target in ("x", "weight"):
        out = []
        for dt in (None, torch.float64, bf16):  # ours, the reference, torch in bf16
            xs = x.detach().to(dt or bf16).requires_grad_(True)
            ws = w.detach().to(dt or bf16).requires_grad_(True)
            ws.grad = old.to(ws.dtype, copy=True)  # ours accumulates into it in place
            if dt is None:
                outs = quack_cpp.linear_rotary_qkv(xs, ws, cos, sin, h, fuse_grad_accum=True)
            else:
                outs = ref_qkv(xs, ws, cos, sin, h, dt)
            wanted = xs if target == "x" else ws
            grads = [d.to(ws.dtype) for d in dys]
            if how == "grad":
                (g,) = torch.autograd.grad(outs, wanted, grads)
            else:
                torch.autograd.backward(outs, grads, inputs=[wanted])
                g = wanted.grad
            out.append((g, ws.grad))
        (g, wg), (rg, rwg), (tg, twg) = out
        if target == "weight" and how == "inputs":
            assert_rule("weight.grad accumulated", wg, rwg, twg)
        else:
            assert torch.equal(wg, old.to(bf16)), f"{how} {target}: weight.grad changed"
        assert_rule(f"{how} d{target}", g, rg, tg)


def test_unused_outputs_and_autocast():
    """Only q and v used (k's gradient None: zeros in the packed gradient); an fp32 weight
    under bf16 autocast gets an fp32 gradient."""
    B, T, h, hd, K = 2, 32, 2, 64, 128
    cos, sin = tables(T, hd)
    x, w = inputs(B, T, h, hd, K)
    w32 = w.float().requires_grad_()
    xs = x.clone().requires_grad_()
    with torch.autocast(device_type=DEVICE, dtype=bf16):
        q, k, v = quack_cpp.linear_rotary_qkv(xs, w32, cos, sin, h)
    assert q.dtype == bf16
    (q.float().sum() + 2 * v.float().sum()).backward()
    assert w32.grad.dtype == torch.float32

    xr = x.double().requires_grad_()
    wr = w.double().requires_grad_()
    qr, kr, vr = ref_qkv(xr, wr, cos, sin, h)
    (qr.sum() + 2 * vr.sum()).backward()
    xt = x.clone().requires_grad_()
    wt = w.clone().requires_grad_()
    qt, kt, vt = ref_qkv(xt, wt, cos, sin, h, bf16)
    (qt.float().sum() + 2 * vt.float().sum()).backward()
    assert_rule("dx", xs.grad, xr.grad, xt.grad)
    assert_rule("dW", w32.grad, wr.grad, wt.grad.float(), dtype=bf16)


def test_permuted_weight_gives_rotate_half_scores():
    """interleave_rotary_rows(W) through the fused op: q and k are torch's rotate_half q and k
    (from W unpermuted) in one permutation of the head dim, so q · kᵀ agrees."""
    B, T, h, hd, K = 1, 48, 2, 64, 128
    cos, sin = tables(T, hd)
    x, w = inputs(B, T, h, hd, K)
    wp = grot.interleave_rotary_rows(w, h, hd)
    q, k, v = quack_cpp.linear_rotary_qkv(x, wp, cos, sin, h)
    qkv = (x.double() @ w.double().T).view(B, T, 3, h, hd)
    c = torch.cat((cos, cos), -1)[:T].double()[None, :, None, :]
    s = torch.cat((sin, sin), -1)[:T].double()[None, :, None, :]

    def rotate_half(t):
        t1, t2 = t.chunk(2, -1)
        return torch.cat((-t2, t1), -1)
    qr, kr, vr = [t * c + rotate_half(t) * s for t in qkv.unbind(2)[:2]] + [qkv[:, :, 2]]
    scores = q.double().transpose(1, 2) @ k.double().transpose(1, 2).transpose(-1, -2)
    ref = qr.transpose(1, 2) @ kr.transpose(1, 2).transpose(-1, -2)
    assert_rule("q·kᵀ", scores, ref, rtol_no_torch=2e-2)
    assert_rule("v", v, vr, rtol_no_torch=1e-2)


def test_gemm_rotary_partial_columns():
    """gemm_rotary with rotary_cols < N (only the first head of 3 rotated), seqlen 8."""
    M, K, hd = 32, 64, 16
    cos, sin = tables(8, hd)
    A = torch.randn(M, K, device=DEVICE).to(bf16)
    W = torch.randn(3 * hd, K, device=DEVICE).to(bf16)
    out = grot.gemm_rotary(A, W.mT, cos, sin, hd, hd, 8, bf16)
    y = A.double() @ W.double().T
    r = rotate_interleaved(y[:, :hd].view(M // 8, 8, 1, hd), cos, sin, torch.float64)
    ref = torch.cat((r.reshape(M, hd), y[:, hd:]), 1)
    tch = (A @ W.T).float()
    tch = torch.cat((rotate_interleaved(tch[:, :hd].view(M // 8, 8, 1, hd).to(bf16), cos, sin,
                                        bf16).reshape(M, hd).float(), tch[:, hd:]), 1)
    assert_rule("d", out, ref, tch.to(bf16))


def test_compile_and_opcheck():
    B, T, h, hd, K = 2, 16, 2, 64, 64
    cos, sin = tables(T, hd)
    x, w = inputs(B, T, h, hd, K)

    def f(x, w):
        q, k, v = quack_cpp.linear_rotary_qkv(x, w, cos, sin, h)
        return (q.float() * k.float()).sum() + v.float().sum()
    xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
    xe, we = x.clone().requires_grad_(), w.clone().requires_grad_()
    out_c = torch.compile(f, fullgraph=True)(xs, ws)
    out_e = f(xe, we)
    out_c.backward()
    out_e.backward()
    torch.testing.assert_close(out_c, out_e)
    torch.testing.assert_close(xs.grad, xe.grad)
    torch.testing.assert_close(ws.grad, we.grad)
    torch.library.opcheck(torch.ops.quack_cpp.gemm_rotary.default,
                          (x.view(-1, K), w.mT, cos, sin, 2 * h * hd, hd, T, bf16))


def test_bad_inputs():
    B, T, h, hd, K = 1, 8, 2, 16, 32
    cos, sin = tables(T, hd)
    x, w = inputs(B, T, h, hd, K)
    with pytest.raises(ValueError, match="expected \\(B, T, K\\)"):
        quack_cpp.linear_rotary_qkv(x[0], w, cos, sin, h)
    with pytest.raises(ValueError, match="3 \\* n_heads"):
        quack_cpp.linear_rotary_qkv(x, w, cos, sin, 5)
    with pytest.raises(ValueError, match="cos has shape"):
        quack_cpp.linear_rotary_qkv(x, w, cos[:, :4], sin[:, :4], h)
    with pytest.raises(ValueError, match="cos has shape"):
        quack_cpp.linear_rotary_qkv(x, w, cos[:4], sin[:4], h)
    with pytest.raises(ValueError, match="head_dim"):
        grot.gemm_rotary(x.view(-1, K), w.mT, cos, sin, 2 * h * hd, 7, T, bf16)
    with pytest.raises(ValueError, match="rotary_cols"):
        grot.gemm_rotary(x.view(-1, K), w.mT, cos, sin, 8, hd, T, bf16)
    with pytest.raises(ValueError, match="seqlen"):
        grot.gemm_rotary(x.view(-1, K), w.mT, cos, sin, 2 * h * hd, hd, 3, bf16)


def test_paired_tables():
    """The epilogue's table layout: cos[:T] and sin[:T] as the two columns of one (T, hd / 2, 2)
    tensor (column stride 2, sin one element after cos), made once per unchanged set of tables
    in eager mode; an in-place change of cos (version counter) makes a new one."""
    T, hd = 12, 16
    cos, sin = tables(20, hd)
    c, s = grot._paired_tables(cos, sin, T)
    assert c.shape == s.shape == (T, hd // 2) and c.stride() == s.stride() == (hd, 2)
    assert s.data_ptr() == c.data_ptr() + 4
    assert torch.equal(c, cos[:T]) and torch.equal(s, sin[:T])
    c2, _ = grot._paired_tables(cos, sin, T)
    assert c2.data_ptr() == c.data_ptr()  # cached
    cos.mul_(2)
    c3, s3 = grot._paired_tables(cos, sin, T)
    assert c3.data_ptr() != c.data_ptr()
    assert torch.equal(c3, cos[:T]) and torch.equal(s3, sin[:T])
    view = torch.cat((cos, cos), 1)[:, : hd // 2]  # a strided view (the demo's half tables)
    c4, _ = grot._paired_tables(view, sin, T)
    assert torch.equal(c4, cos[:T])


def test_backward_gemm_calls_match_linear(monkeypatch):
    """The fused op's backward runs the GEMMs of quack_cpp.linear's backward behind the split
    rotary (the same operands' shapes, strides and dtypes, out dtype, alpha, beta, tuned): the
    two paths differ only in the rotary_qkv_pack's pair layout."""
    import quack_cpp.gemm_ops as gops
    B, T, h, hd, K = 2, 16, 2, 64, 128
    cos, sin = tables(T, hd)
    x, w = inputs(B, T, h, hd, K)
    dys = [torch.randn(B, T, h, hd, device=DEVICE).to(bf16) for _ in range(3)]
    calls = []
    real = gops.gemm_op

    def record(A, Bm, rest):
        # (C, alpha, beta, out dtype, tuned, alpha tensor, beta tensor), then a bias: none here
        assert all(r is None for r in rest[7:])
        calls.append((tuple(A.shape), A.stride(), A.dtype, tuple(Bm.shape), Bm.stride(), Bm.dtype)
                     + tuple(r if not isinstance(r, torch.Tensor) else "tensor" for r in rest[:7]))

    class Recording:  # gemm_op's call and its .run(path, ...), each recorded then forwarded
        def __call__(self, A, Bm, *rest):
            record(A, Bm, rest)
            return real(A, Bm, *rest)

        def run(self, path, A, Bm, *rest):
            record(A, Bm, rest)
            return real.run(path, A, Bm, *rest)

    monkeypatch.setattr(gops, "gemm_op", Recording())
    monkeypatch.setattr(grot, "gemm_op", Recording())
    # linear's Python Function, whose GEMMs pass through gemm_op (its C++ node LinearFn launches
    # the same GEMMs from C++: test_torch_ext_cpu compares the two launch by launch).
    monkeypatch.setattr(gops.linear_op, "eager", None)

    def backward_calls(fn):
        xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
        outs = fn(xs, ws)
        calls.clear()
        torch.autograd.grad(outs, (xs, ws), dys)
        return list(calls)

    fused = backward_calls(lambda xs, ws: quack_cpp.linear_rotary_qkv(xs, ws, cos, sin, h))
    separate = backward_calls(lambda xs, ws: quack_cpp.apply_rotary_emb_qkv_split(
        quack_cpp.linear(xs, ws).view(B, T, 3, h, hd), cos, sin, interleaved=True))
    assert len(fused) == 2 and fused == separate
