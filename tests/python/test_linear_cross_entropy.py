"""quack_cpp.linear_cross_entropy and nn.LinearCrossEntropy on the GPU (issue 20).

Against a float64 reference (logits, loss and autograd in float64 from the same bf16 inputs)
by cases/handed.md's rule: error ≤ 2 × torch's own error in bfloat16 (``F.linear`` in bf16,
then the loss on float32 logits, autograd) + atol. Covers odd token counts, vocabularies that are
not multiples of 8, ignore_index rows, every reduction (with grad_output ≠ 1), bias, label
smoothing, z-loss, softcap, both modes, forced chunk sizes, 3-D x, float16 (the recompute
backward, a GradScaler-sized grad_output, the mean's count), the handed cases C02, C04,
C06, C10 (C03 is the C++ LceLarge test), fused gradient accumulation, the nn module (state dict,
fallbacks), torch.compile(fullgraph=True), CUDA-graph capture, opcheck, and a parity test
against torch at 8192 × 4096 × 128256.

Skips without torch, quack_cpp or a CUDA GPU. QUACK_TEST_DEVICE=cpu runs the device-agnostic
tests against CPU stand-ins of the kernels (tests/python/cpu_stand_in.py): a self-check of this
file, not of the kernels.
"""

import math
import os

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
lce_ops = pytest.importorskip("quack_cpp.linear_cross_entropy_ops")
qnn = pytest.importorskip("quack_cpp.nn")

DEVICE = os.environ.get("QUACK_TEST_DEVICE", "cuda")
if DEVICE == "cuda":
    pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
cuda_only = pytest.mark.skipif(DEVICE != "cuda", reason="checks CUDA itself")

STAND_IN = True  # QUACK_TEST_DEVICE=cpu runs this module on the CPU stand-ins (conftest.py)

bf16, f16, f32, f64 = torch.bfloat16, torch.float16, torch.float32, torch.float64
lce = quack_cpp.linear_cross_entropy


def make(T, D, V, bias=False, ignore_frac=0.2, ignore_index=-100, seed=0, lead=None, dtype=bf16):
    g = torch.Generator().manual_seed(seed)
    x = ((torch.rand(T, D, generator=g) * 2 - 1)).to(dtype)
    w = ((torch.rand(V, D, generator=g) * 2 - 1) * (2 / max(D, 1) ** 0.5)).to(dtype)
    b = (torch.rand(V, generator=g) * 2 - 1).to(dtype) if bias else None
    t = torch.randint(0, V, (T,), generator=g)
    t[torch.rand(T, generator=g) < ignore_frac] = ignore_index
    if lead is not None:
        x, t = x.view(*lead, D), t.view(*lead)
    dev = lambda v: None if v is None else v.to(DEVICE)  # noqa: E731
    return dev(x), dev(w), dev(b), dev(t)


def loss_rows64(z, t, ignore_index, eps, zs, cap):
    """Per-token loss (CE + z part) in float64 and the counted mask; out-of-range targets that
    are not ignore_index count nowhere (the library gives them NaN; tests check that apart)."""
    y = cap * torch.tanh(z / cap) if cap else z
    lse = torch.logsumexp(y, -1)
    V = y.shape[-1]
    counted = (t != ignore_index) & (t >= 0) & (t < V)
    tc = torch.where(counted, t, torch.zeros_like(t))
    yt = y.gather(-1, tc.unsqueeze(-1)).squeeze(-1)
    ce = (1 - eps) * (lse - yt) + eps * (lse - y.mean(-1))
    rows = torch.where(counted, ce + zs * lse * lse, torch.zeros_like(ce))
    return rows, counted


def reduce(rows, counted, reduction):
    if reduction == "none":
        return rows
    if reduction == "sum":
        return rows.sum()
    return rows.sum() / counted.sum()


def run(fn, x, w, b, t, g_out, reduction, **kw):
    """loss and (dx, dW, db) of fn(x, w, b, t) with grad_output g_out."""
    x = x.detach().requires_grad_(True)
    w = w.detach().requires_grad_(True)
    b = b.detach().requires_grad_(True) if b is not None else None
    loss = fn(x, w, b, t, reduction)
    loss.backward(g_out.to(loss.dtype) if g_out is not None else None)
    return loss.detach(), x.grad, w.grad, (b.grad if b is not None else None)


def ref64(x, w, b, t, g_out, reduction, ignore_index=-100, eps=0.0, zs=0.0, cap=0.0):
    def fn(x, w, b, t, red):
        z = x.to(f64) @ w.to(f64).T
        if b is not None:
            z = z + b.to(f64)
        rows, counted = loss_rows64(z.reshape(-1, z.shape[-1]), t.reshape(-1), ignore_index, eps,
                                    zs, cap)
        out = reduce(rows, counted, red)
        return out.view(t.shape) if red == "none" else out

    return run(fn, x.to(f64), w.to(f64), None if b is None else b.to(f64), t,
               None if g_out is None else g_out.to(f64), reduction)


def torch_bf16(x, w, b, t, g_out, reduction, ignore_index=-100, eps=0.0, zs=0.0, cap=0.0):
    def fn(x, w, b, t, red):
        return lce_ops.linear_cross_entropy_torch(x, w, t, b, ignore_index, red, eps, zs,
                                                  cap or None)

    return run(fn, x, w, b, t, g_out, reduction)


def ours(x, w, b, t, g_out, reduction, ignore_index=-100, eps=0.0, zs=0.0, cap=0.0, **kw):
    def fn(x, w, b, t, red):
        return lce(x, w, t, b, ignore_index, red, eps, zs, cap or None, **kw)

    return run(fn, x, w, b, t, g_out, reduction)


def assert_rule(got, ref, tor, what, atol_rel=1e-3):
    """cases/handed.md: max|got − ref| ≤ 2·max|torch − ref| + atol (atol = atol_rel·max|ref|);
    NaN/inf only where the reference has them."""
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    g, r, o = got.to(f64), ref.to(f64), tor.to(f64)
    fin = torch.isfinite(r)
    assert torch.equal(torch.isfinite(g), fin), f"{what}: non-finite values where the reference " \
                                                f"is finite (or the other way round)"
    if not fin.any():
        return
    scale = r[fin].abs().max().item()
    err = (g - r)[fin].abs().max().item()
    err_t = (o - r)[fin].abs().max().item()
    bound = 2 * err_t + atol_rel * scale + 1e-12
    assert err <= bound, f"{what}: max error {err:.3e} > {bound:.3e} (torch's own {err_t:.3e})"


def check(T, D, V, reduction="mean", bias=False, seed=0, g=None, lead=None, ignore_index=-100,
          ignore_frac=0.2, eps=0.0, zs=0.0, cap=0.0, dtype=bf16, **kw):
    x, w, b, t = make(T, D, V, bias, ignore_frac, ignore_index, seed, lead, dtype)
    if g is None and reduction == "none":
        g = torch.randn(t.shape, device=DEVICE)
    elif g is not None and reduction != "none":
        g = torch.tensor(float(g), device=DEVICE)
    opts = dict(ignore_index=ignore_index, eps=eps, zs=zs, cap=cap)
    got = ours(x, w, b, t, g, reduction, **opts, **kw)
    ref = ref64(x, w, b, t, g, reduction, **opts)
    tor = torch_bf16(x, w, b, t, g, reduction, **opts)
    assert got[0].dtype == f32
    for name, gg, rr, oo in zip(("loss", "dx", "dweight", "dbias"), got, ref, tor):
        if rr is None:
            assert gg is None, name
            continue
        assert gg.dtype == (f32 if name == "loss" else dtype), (name, gg.dtype)
        assert_rule(gg, rr, oo, name, 1e-5 if name == "loss" else 1e-3)
    return got


# --------------------------------------------------------------------------------------------
# Shapes, reductions, options, modes
# --------------------------------------------------------------------------------------------

SHAPES = [(1, 64, 15), (7, 64, 1000), (129, 128, 1001), (257, 64, 4099), (1000, 64, 333),
          (64, 8, 8)]


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("T,D,V", SHAPES)
def test_matches_reference(T, D, V, reduction, bias):
    check(T, D, V, reduction, bias, seed=T + V)


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("D", [1, 20, 61])
def test_d_not_multiple_of_8(D, reduction):
    """D not a multiple of 8: x and the weight padded with zero columns (a copy each call), the
    gradients sliced back to (T, D) and (V, D); the module runs the kernels too."""
    got = check(37, D, 301, reduction, bias=True, seed=D)
    assert got[1].shape == (37, D) and got[2].shape == (301, D)
    m = qnn.LinearCrossEntropy(D, 301, device=DEVICE, dtype=bf16, reduction=reduction)
    x, _, _, t = make(37, D, 301, seed=D + 1)
    torch.testing.assert_close(m(x, t), lce(x, m.weight, t, reduction=reduction), rtol=0, atol=0)


@pytest.mark.parametrize("low_memory", [False, True], ids=["default", "lowmem"])
@pytest.mark.parametrize("chunk", [1, 3, 64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_chunks_and_modes(reduction, chunk, low_memory):
    check(200, 64, 1003, reduction, bias=True, seed=chunk, chunk_size=chunk,
          low_memory=low_memory)


@pytest.mark.parametrize("low_memory", [False, True], ids=["default", "lowmem"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("opt", ["smooth", "zloss", "softcap", "all"])
def test_options(opt, reduction, low_memory):
    kw = {"smooth": dict(eps=0.1), "zloss": dict(zs=1e-2), "softcap": dict(cap=3.0),
          "all": dict(eps=0.1, zs=1e-2, cap=3.0)}[opt]
    check(97, 64, 515, reduction, bias=opt == "all", seed=len(opt), chunk_size=32,
          low_memory=low_memory, **kw)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_grad_output_and_3d(reduction):
    check(24, 32, 500, reduction, bias=True, g=3.7 if reduction != "none" else None,
          lead=(2, 12), chunk_size=5)


def test_ignore_index_inside_vocabulary():
    check(60, 32, 300, "mean", ignore_index=7, chunk_size=16)


# --------------------------------------------------------------------------------------------
# Handed cases
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("T,D,V", [(7, 64, 1000), (129, 128, 1001), (1000, 64, 333)])
def test_float16(T, D, V, reduction):
    """float16 x, weight and bias: the forward's loss and lse, the backward's recompute by
    vocabulary slices with the real grad_output; gradients in float16, within the rule of
    torch's own float16 error."""
    check(T, D, V, reduction, bias=True, g=None if reduction == "none" else 0.7, dtype=f16,
          chunk_size=64)


@cuda_only
def test_float16_loss_scale():
    """A GradScaler's grad_output (65536) on a 'mean' over ~1600 tokens of V = 16384: the
    gradient for grad_output 1 is ~4e-8 a logit, below float16's smallest normal (6.1e-5) and
    near its smallest subnormal (6e-8), so one computed in the forward and scaled later would
    lose most of its bits; the backward's recompute with the real grad_output keeps them (dx and
    dweight within the rule of torch's float16, whose autograd scales before it rounds)."""
    check(2048, 64, 16384, "mean", bias=True, g=65536.0, dtype=f16)


def test_float16_mean_counts_as_the_forward():
    """float16 'mean' (the recompute backward): a target outside [0, V) gives NaN loss and its
    own NaN gradient row, and leaves the other tokens' gradients as when it is ignored (the
    mean's count is the forward's: targets in [0, V) other than ignore_index)."""
    x, w, _, t = make(34, 64, 300, ignore_frac=0.0, seed=12, dtype=f16)
    t_bad, t_ign = t.clone(), t.clone()
    t_bad[3], t_ign[3] = 1000, -100
    l_bad, dx_bad, _, _ = ours(x, w, None, t_bad, None, "mean")
    l_ign, dx_ign, _, _ = ours(x, w, None, t_ign, None, "mean")
    assert torch.isnan(l_bad) and not torch.isnan(l_ign)
    keep = torch.arange(34, device=DEVICE) != 3
    assert torch.isnan(dx_bad[3]).all() and not torch.isnan(dx_bad[keep]).any()
    assert torch.equal(dx_bad[keep], dx_ign[keep])


def test_float16_module_takes_the_kernels(monkeypatch):
    def fallback(*args, **kwargs):
        raise AssertionError("nn.LinearCrossEntropy took the torch fallback for float16")

    monkeypatch.setattr(qnn, "linear_cross_entropy_torch", fallback)
    m = qnn.LinearCrossEntropy(64, 300, bias=True, device=DEVICE, dtype=f16, chunk_size=16)
    x, _, _, t = make(40, 64, 300, seed=4, dtype=f16)
    assert torch.equal(m(x, t), lce(x, m.weight, t, m.bias, chunk_size=16))


@pytest.mark.parametrize("chunk", [None, 3])
@pytest.mark.parametrize("reduction", ["none", "sum"])
def test_c06_per_token_grad_output(reduction, chunk):
    # B·T = 8 tokens (B = 2, T = 4), H = 16 (the GEMM needs 16-byte rows), V = 15, 2 ignored;
    # 'none' with g = randn(8); 'sum' with grad_output 3.7; a chunk that does not divide 8.
    x, w, b, t = make(8, 16, 15, bias=True, ignore_frac=0.0, seed=6, lead=(2, 4))
    t.view(-1)[[2, 5]] = -100
    g = torch.randn(2, 4, device=DEVICE) if reduction == "none" else torch.tensor(3.7, device=DEVICE)
    got = ours(x, w, b, t, g, reduction, chunk_size=chunk)
    ref = ref64(x, w, b, t, g, reduction)
    tor = torch_bf16(x, w, b, t, g, reduction)
    for name, gg, rr, oo in zip(("loss", "dx", "dweight", "dbias"), got, ref, tor):
        assert_rule(gg, rr, oo, name, 1e-5 if name == "loss" else 1e-3)
    assert torch.equal(got[1].view(8, 16)[[2, 5]], torch.zeros(2, 16, dtype=bf16, device=DEVICE))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_c04_all_ignored(reduction):
    x, w, b, t = make(5, 16, 10, bias=True, ignore_frac=1.0)
    g = torch.randn(5, device=DEVICE) if reduction == "none" else None
    loss, dx, dw, db = ours(x, w, b, t, g, reduction, chunk_size=2)
    if reduction == "none":
        assert torch.equal(loss, torch.zeros(5, device=DEVICE))
    elif reduction == "sum":
        assert loss.item() == 0.0
    else:
        assert math.isnan(loss.item())  # 0/0, as torch
    for v in (dx, dw, db):  # the gradient never carries the 0/0
        assert torch.equal(v, torch.zeros_like(v))


@pytest.mark.parametrize("low_memory", [False, True], ids=["default", "lowmem"])
def test_c10_out_of_range_targets(low_memory):
    x, w, b, t = make(6, 16, 5, ignore_frac=0.0, seed=10)
    t.copy_(torch.tensor([1, 0, 5, -1, 2, -100], device=DEVICE))
    g = torch.ones(6, device=DEVICE)
    loss, dx, dw, _ = ours(x, w, b, t, g, "none", chunk_size=2, low_memory=low_memory)
    good = torch.tensor([0, 1, 4], device=DEVICE)
    assert torch.isnan(loss[2]) and torch.isnan(loss[3])
    assert not torch.isnan(loss[[0, 1, 4, 5]]).any() and loss[5].item() == 0.0
    t2 = t.clone()
    t2[[2, 3]] = -100
    ref = ref64(x, w, b, t2, g, "none")
    tor = torch_bf16(x, w, b, t2, g, "none")
    assert_rule(loss[good], ref[0][good], tor[0][good], "loss", 1e-5)
    assert torch.isnan(dx[[2, 3]]).all() and torch.equal(dx[5], torch.zeros_like(dx[5]))
    assert_rule(dx[good], ref[1][good], tor[1][good], "dx")
    assert torch.isnan(dw).all()  # the NaN rows reach every dweight entry (documented)
    t3 = torch.tensor([1, 254, 0, 255, 2, 1], device=DEVICE)  # ignore_index 255, V = 3
    x3, w3, _, _ = make(6, 16, 3, seed=11)
    l3 = lce(x3, w3, t3, ignore_index=255, reduction="none")
    assert torch.isnan(l3[1]) and l3[3].item() == 0.0 and not torch.isnan(l3[[0, 2, 4, 5]]).any()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_c02_empty(reduction):
    x = torch.randn(3, 0, 16, device=DEVICE).to(bf16).requires_grad_(True)
    t = torch.zeros(3, 0, dtype=torch.long, device=DEVICE)
    w = torch.randn(40, 16, device=DEVICE).to(bf16).requires_grad_(True)
    b = torch.randn(40, device=DEVICE).to(bf16).requires_grad_(True)
    loss = lce(x, w, t, b, reduction=reduction)
    if reduction == "none":
        assert loss.shape == (3, 0)
        loss.sum().backward()
    else:
        assert loss.shape == ()
        assert (loss.item() == 0.0) if reduction == "sum" else math.isnan(loss.item())
        loss.backward()
    # Sums over no token: zero dW and db for every reduction ('mean' too: the NaN loss's
    # gradient has no row to reach), as torch's F.linear + F.cross_entropy give.
    assert x.grad.shape == (3, 0, 16)
    assert torch.equal(w.grad, torch.zeros_like(w))
    assert torch.equal(b.grad, torch.zeros_like(b))


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_retain_graph_backward_twice(reduction):
    # 'mean' returns scaled copies while the graph is retained and scales the saved gradients
    # in place on the last backward; 'none' recomputes. Either way each backward adds its own.
    x, w, b, t = make(40, 32, 100, seed=13)
    x = x.detach().requires_grad_(True)
    w = w.detach().requires_grad_(True)
    loss = lce(x, w, t, reduction=reduction)
    g1 = torch.randn(40, device=DEVICE) if reduction == "none" else torch.tensor(2.0, device=DEVICE)
    loss.backward(g1, retain_graph=True)
    first_x, first_w = x.grad.clone(), w.grad.clone()
    loss.backward(g1 * 0.5)
    torch.testing.assert_close(x.grad.float(), 1.5 * first_x.float(), atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(w.grad.float(), 1.5 * first_w.float(), atol=1e-2, rtol=1e-2)
    ref = ours(x.detach(), w.detach(), None, t, g1, reduction)
    assert_rule(first_x, ref[1], ref[1], "dx of the retained backward", 1e-2)


# --------------------------------------------------------------------------------------------
# Fused gradient accumulation, nn module
# --------------------------------------------------------------------------------------------


def test_fuse_grad_accum():
    x, w, b, t = make(50, 32, 200, seed=3)
    w = w.detach().requires_grad_(True)
    w.grad = torch.randn(200, 32, device=DEVICE).to(bf16)
    old = w.grad.clone()
    grad_id = w.grad.data_ptr()
    loss = lce(x, w, t, fuse_grad_accum=True, chunk_size=16)
    loss.backward(torch.tensor(2.0, device=DEVICE))
    assert w.grad.data_ptr() == grad_id  # accumulated in place
    w2 = w.detach().clone().requires_grad_(True)
    lce(x, w2, t, chunk_size=16).backward(torch.tensor(2.0, device=DEVICE))
    torch.testing.assert_close(w.grad.float(), (old.float() + w2.grad.float()), atol=2e-2,
                               rtol=2e-2)


def test_fuse_grad_accum_only_where_autograd_accumulates():
    """fuse_grad_accum under torch.autograd.grad: weight.grad is left as it is and the result
    is this call's dweight alone (no fusion); loss.backward(inputs=[x]) likewise."""
    x, w, b, t = make(50, 32, 200, seed=3)
    x = x.detach().requires_grad_(True)
    w = w.detach().requires_grad_(True)
    w.grad = torch.randn(200, 32, device=DEVICE).to(bf16)
    old = w.grad.clone()
    w2 = w.detach().clone().requires_grad_(True)
    x2 = x.detach().clone().requires_grad_(True)
    lce(x2, w2, t, chunk_size=16).backward()
    gx, gw = torch.autograd.grad(lce(x, w, t, fuse_grad_accum=True, chunk_size=16), [x, w])
    assert torch.equal(w.grad, old)
    assert torch.equal(gw, w2.grad) and torch.equal(gx, x2.grad)
    (gx,) = torch.autograd.grad(lce(x, w, t, fuse_grad_accum=True, chunk_size=16), [x])
    assert torch.equal(w.grad, old) and torch.equal(gx, x2.grad)
    lce(x, w, t, fuse_grad_accum=True, chunk_size=16).backward(inputs=[x])
    assert torch.equal(w.grad, old)


def test_none_backward_computes_only_the_task_gradients(monkeypatch):
    """reduction='none' recomputes in the backward: torch.autograd.grad(loss, x) asks lce_bwd
    for dx alone (no dweight GEMMs), (x, weight) for both; dx the same either way."""
    x, w, b, t = make(50, 32, 200, seed=3)
    x = x.detach().requires_grad_(True)
    w = w.detach().requires_grad_(True)
    seen = []
    real = lce_ops.lce_bwd.run
    monkeypatch.setattr(lce_ops.lce_bwd, "run",
                        lambda path, *a: seen.append(tuple(a[10:13])) or real(path, *a))
    loss = lce(x, w, t, reduction="none", chunk_size=16)
    g = torch.rand(loss.shape, device=DEVICE)
    (gx,) = torch.autograd.grad(loss, x, g, retain_graph=True)
    assert seen == [(True, False, False)]
    gx2, gw = torch.autograd.grad(loss, (x, w), g)
    assert seen[-1] == (True, True, False) and gw is not None
    assert torch.equal(gx, gx2)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_create_graph_refused(reduction):
    """'mean'/'sum': the gradients are saved by the forward and not differentiable; a backward
    that records a graph raises rather than giving a zero second derivative."""
    x, w, b, t = make(24, 32, 100, seed=5)
    x = x.detach().requires_grad_(True)
    with pytest.raises(RuntimeError, match="create_graph"):
        torch.autograd.grad(lce(x, w, t, reduction=reduction, chunk_size=8), x,
                            create_graph=True)


def test_nn_module_state_dict_and_fallback():
    torch.manual_seed(0)
    m = qnn.LinearCrossEntropy(64, 300, bias=True, device=DEVICE, dtype=bf16, chunk_size=16)
    lin = torch.nn.Linear(64, 300, bias=True, device=DEVICE, dtype=bf16)
    lin.load_state_dict(m.state_dict())
    m.load_state_dict(lin.state_dict())
    assert set(m.state_dict()) == {"weight", "bias"}
    x, _, _, t = make(40, 64, 300, seed=4)
    got = m(x, t)
    want = lce(x, m.weight, t, m.bias, chunk_size=16)
    assert torch.equal(got, want)
    # Not a kernel case (float32 module): the torch path, the same loss.
    m32 = qnn.LinearCrossEntropy(64, 300, bias=True, device=DEVICE)
    m32.load_state_dict({k: v.float() for k, v in m.state_dict().items()})
    ref = torch.nn.functional.cross_entropy(
        torch.nn.functional.linear(x.float(), m32.weight, m32.bias), t)
    torch.testing.assert_close(m32(x.float(), t), ref)
    assert "reduction='mean'" in repr(m)


@pytest.mark.parametrize("chunk", [None, 7])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_fp32_master_weight_gradient(reduction, chunk):
    """An fp32 weight and bias under a bf16 autocast (master weights): the op reads them rounded
    to bf16 and returns their gradients in float32, accumulated in fp32 and never rounded to
    bf16, where torch's autocast F.linear rounds them (dW = Σ_t R_t x_t over ~32 counted tokens
    holds more bits than bf16: most elements lie off its grid). Within the rule of the bf16
    weight's gradients."""
    x, w, b, t = make(40, 64, 300, bias=True, seed=11)
    g = torch.randn(t.shape, device=DEVICE) if reduction == "none" else None
    with torch.autocast(DEVICE, dtype=bf16):
        got = ours(x, w.float(), b.float(), t, g, reduction, chunk_size=chunk)
    ref = ref64(x, w, b, t, g, reduction)
    tor = torch_bf16(x, w, b, t, g, reduction)
    for name, gg, rr, oo in zip(("dweight", "dbias"), got[2:], ref[2:], tor[2:]):
        assert gg.dtype == f32, (name, gg.dtype)
        assert_rule(gg, rr, oo, name)
        off_grid = (gg.to(bf16).to(f32) != gg).float().mean().item()
        assert off_grid > 0.3, f"{name}: only {off_grid:.2f} of the elements off the bf16 grid"


@cuda_only
def test_autocast():
    x, w, b, t = make(33, 64, 257, bias=True, seed=5)
    w32 = w.float().requires_grad_(True)
    x32 = x.float().requires_grad_(True)
    with torch.autocast("cuda", dtype=bf16):
        loss = lce(x32, w32, t)
    loss.backward()
    assert w32.grad.dtype == f32 and x32.grad.dtype == f32
    ref = lce(x, w, t)
    torch.testing.assert_close(loss, ref)


# --------------------------------------------------------------------------------------------
# torch.compile, CUDA graphs, opcheck, bad input
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_compile_fullgraph(reduction):
    x, w, b, t = make(64, 64, 500, bias=True, seed=7)

    def f(x, w, b, t):
        return lce(x, w, t, b, reduction=reduction, chunk_size=16)

    cf = torch.compile(f, fullgraph=True, dynamic=False)
    g = torch.randn(64, device=DEVICE) if reduction == "none" else None
    got = run(lambda x, w, b, t, r: cf(x, w, b, t), x, w, b, t, g, reduction)
    want = run(lambda x, w, b, t, r: f(x, w, b, t), x, w, b, t, g, reduction)
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, atol=0, rtol=0)


@cuda_only
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cuda_graph(reduction):
    x, w, b, t = make(96, 64, 700, bias=True, seed=8)
    x, w, b = (v.detach().requires_grad_(True) for v in (x, w, b))
    g = torch.randn(96, device=DEVICE) if reduction == "none" else torch.tensor(1.5, device=DEVICE)

    def step():
        for v in (x, w, b):
            v.grad = None
        loss = lce(x, w, t, b, reduction=reduction)
        loss.backward(g)
        return loss

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = step()
    x2, w2, b2, t2 = make(96, 64, 700, bias=True, seed=9)
    with torch.no_grad():
        x.copy_(x2)
        w.copy_(w2)
        b.copy_(b2)
        t.copy_(t2)
    graph.replay()
    torch.cuda.synchronize()
    ref = ours(x2, w2, b2, t2, g, reduction)
    torch.testing.assert_close(loss, ref[0], atol=1e-5, rtol=1e-5)
    for v, r in zip((x.grad, w.grad, b.grad), ref[1:]):
        torch.testing.assert_close(v, r, atol=1e-2, rtol=1e-2)


@cuda_only
def test_opcheck():
    x, w, b, t = make(37, 64, 300, bias=True, seed=12)
    torch.library.opcheck(torch.ops.quack_cpp.linear_cross_entropy_fwd.default,
                          (x, w, b, t, -100, "mean", 0.0, 0.0, 0.0, True, True, True, False, 8,
                           False))
    loss, lse, _, _, _ = torch.ops.quack_cpp.linear_cross_entropy_fwd.default(
        x, w, b, t, -100, "none", 0.0, 0.0, 0.0, False, False, False, False, 8, False)
    g = torch.randn(37, device=DEVICE)
    torch.library.opcheck(torch.ops.quack_cpp.linear_cross_entropy_bwd.default,
                          (x, w, b, t, lse, g, -100, 0.0, 0.0, 0.0, True, True, True, False))


def test_bad_input():
    x, w, b, t = make(8, 64, 100)
    with pytest.raises(ValueError, match="reduction"):
        lce(x, w, t, reduction="avg")
    with pytest.raises(ValueError, match="chunk_size"):
        lce(x, w, t, chunk_size=0)
    with pytest.raises(ValueError, match="chunk_size is True"):  # a bool is no chunk size (not 1)
        lce(x, w, t, chunk_size=True)
    with pytest.raises(ValueError, match="target has shape"):
        lce(x, w, t[:5])
    with pytest.raises(ValueError, match="expected both bfloat16"):
        lce(x.float(), w.float(), t)
    with pytest.raises(ValueError, match=r"\(\.\.\., D\)"):
        lce(x, w[:, :32], t)


@cuda_only
def test_c_api_errors_reach_python():
    x, w, b, t = make(8, 64, 100)
    with pytest.raises(ValueError, match="linear_cross_entropy_fwd: target has dtype float32"):
        lce(x, w, t.float())


# --------------------------------------------------------------------------------------------
# Parity with torch at an LM head's size
# --------------------------------------------------------------------------------------------


@cuda_only
@pytest.mark.parametrize("low_memory", [False, True], ids=["default", "lowmem"])
def test_parity_8192x4096x128256(low_memory):
    T, D, V = 8192, 4096, 128256
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    x = torch.randn(T, D, device=DEVICE, generator=gen).to(bf16)
    w = (torch.randn(V, D, device=DEVICE, generator=gen) * 0.02).to(bf16)
    t = torch.randint(0, V, (T,), device=DEVICE, generator=gen)
    t[::17] = -100
    got = ours(x, w, None, t, None, "mean", low_memory=low_memory)
    torch.cuda.empty_cache()
    tor = torch_bf16(x, w, None, t, None, "mean")
    torch.cuda.empty_cache()
    ref = ref64(x, w, None, t, None, "mean")
    for name, gg, rr, oo in zip(("loss", "dx", "dweight"), got[:3], ref[:3], tor[:3]):
        assert_rule(gg, rr, oo, name, 1e-5 if name == "loss" else 1e-3)
