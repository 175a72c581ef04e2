"""quack_cpp.distributed: vocabulary-parallel cross-entropy and column- / row-parallel Linear,
against the unsharded float64 reference (reference.ref_cross_entropy, which is checked against
torch's F.cross_entropy in test_cross_entropy.py; float64 torch ops for the MLP).

Two kinds of tests:

- in one process: the vocabulary split into shards (two, uneven, and with an empty shard) whose
  partials (``shard_partials``) are combined by the same code as the distributed path
  (``combine_partials`` drives ``_combine`` with the all-reduces done over the list) and whose
  gradients (``shard_grad``) are concatenated; the column/row split of an MLP's weights the
  same way; the one-rank function (torch.distributed not initialised) against
  quack_cpp.cross_entropy; bad arguments;
- in two processes (torch.multiprocessing spawn): gloo on the CPU with the CPU stand-ins of the
  kernels (QUACK_TEST_DEVICE=cpu), or NCCL on two GPUs (skipped with fewer than two); loss,
  lse and every rank's gradient against the unsharded run.

Skips without torch, quack_cpp or a CUDA GPU. QUACK_TEST_DEVICE=cpu runs everything against the
CPU stand-ins (tests/python/cpu_stand_in.py): a check of the combine math and of the Python
layer, not of the kernels.
"""

import os
import socket

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
qd = pytest.importorskip("quack_cpp.distributed")

from reference import ref_cross_entropy  # noqa: E402

DEVICE = os.environ.get("QUACK_TEST_DEVICE", "cuda")
if DEVICE == "cuda":
    pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
STAND_IN = True  # QUACK_TEST_DEVICE=cpu runs this module on the CPU stand-ins (conftest.py)

f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
NAN = float("nan")
TOL = {f32: dict(rtol=1e-5, atol=1e-6), f16: dict(rtol=2e-3, atol=1e-5),
       bf16: dict(rtol=1e-2, atol=1e-5)}


def _inputs(M, V, dtype, seed=0, bad_row=None):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(M, V, generator=g) * 2.0).to(dtype)
    t = torch.randint(0, V, (M,), generator=g)
    t[torch.rand(M, generator=g) < 0.25] = -100
    if bad_row is not None:
        t[bad_row] = V + 3
    return x, t


def _reference(x, t, reduction, eps, zs, dloss):
    """(loss, lse, dx) in float64 from the (rounded) logits x."""
    x64 = x.double().requires_grad_()
    loss, lse, _ = ref_cross_entropy(x64, t, reduction, ignore_index=-100, label_smoothing=eps,
                                     z_loss=zs)
    loss.backward(dloss.double())
    return loss.detach(), lse.detach(), x64.grad


def _poisoned_like(x):
    return torch.full_like(x, NAN)


SPLITS = {"two": lambda V: [V // 2, V], "uneven": lambda V: [5, V],
          "three_empty": lambda V: [7, 7, V]}


@pytest.mark.parametrize("dtype", [f32, bf16, f16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps,zs", [(0.0, 0.0), (0.1, 0.0), (0.0, 1e-3), (0.2, 1e-3)])
@pytest.mark.parametrize("split", list(SPLITS))
def test_combine_shards_in_one_process(dtype, reduction, eps, zs, split):
    """Sharded == unsharded (float64 reference): loss, lse, gradient; grad_output of both signs
    (per row for 'none', -1.3 for 'sum')."""
    M, V = 24, 37
    x, t = _inputs(M, V, dtype)
    dloss = {"none": torch.randn(M), "sum": torch.tensor(-1.3), "mean": torch.tensor(0.7)}[
        reduction]
    ref_loss, ref_lse, ref_dx = _reference(x, t, reduction, eps, zs, dloss)
    ends = SPLITS[split](V)
    starts = [0] + ends[:-1]
    xd, td = x.to(DEVICE), t.to(DEVICE)
    parts = [qd.shard_partials(xd[:, s:e], td, s, -100, eps) for s, e in zip(starts, ends)]
    loss, lse = qd.combine_partials(parts, td, V, -100, reduction, eps, zs)
    torch.testing.assert_close(loss.cpu().double(), ref_loss, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse.cpu().double(), ref_lse, rtol=1e-5, atol=1e-5)
    counted = ((t != -100) & (t >= 0) & (t < V)).sum(dtype=f32).to(DEVICE)
    g = qd._row_scale(dloss.to(DEVICE), td, counted, M, V, -100, reduction)
    dx = torch.cat([qd.shard_grad(xd[:, s:e], td, lse, g, s, V, -100, eps, zs)
                    for s, e in zip(starts, ends)], 1)
    assert dx.dtype == dtype and dx.shape == (M, V)
    torch.testing.assert_close(dx.cpu().double(), ref_dx, **TOL[dtype])
    assert (dx[t.to(DEVICE) == -100] == 0).all()


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_gradient_in_row_chunks(monkeypatch, reduction):
    """The backward's row chunks (2 rows each here) give the same gradient as one chunk."""
    M, V = 13, 30
    x, t = _inputs(M, V, bf16, seed=5)
    xd, td = x.to(DEVICE), t.to(DEVICE)
    parts = [qd.shard_partials(xd[:, s:e], td, s, -100, 0.1) for s, e in ((0, 12), (12, 30))]
    _, lse = qd.combine_partials(parts, td, V, -100, reduction, 0.1)
    g = torch.randn(M, device=DEVICE) if reduction == "none" else torch.full((M,), 0.1,
                                                                            device=DEVICE)
    g = torch.where(td == -100, 0.0, g)
    bounds = ((0, 12), (12, 30))
    whole = [qd.shard_grad(xd[:, s:e], td, lse, g, s, V, -100, 0.1) for s, e in bounds]
    monkeypatch.setattr(qd, "_CHUNK_ELEMS", 36)
    chunked = [qd.shard_grad(xd[:, s:e], td, lse, g, s, V, -100, 0.1) for s, e in bounds]
    for a, b in zip(whole, chunked):
        assert torch.equal(a, b)


def test_ignored_rows_with_inf_and_nan_logits():
    """Ignored rows holding inf / NaN logits: loss 0 there, gradient exactly 0, other rows
    unaffected (as quack_cpp.cross_entropy)."""
    M, V = 6, 16
    x, t = _inputs(M, V, f32, seed=2)
    t[1] = t[4] = -100
    t[0], t[2] = 3, 12
    x[1, 2], x[4, 9], x[4, 10] = float("inf"), NAN, float("-inf")
    ref_x = x.clone()
    ref_x[1] = ref_x[4] = 0.0
    ref_loss, _, ref_dx = _reference(ref_x, t, "sum", 0.1, 0.0, torch.tensor(1.0))
    xd, td = x.to(DEVICE), t.to(DEVICE)
    parts = [qd.shard_partials(xd[:, s:e], td, s, -100, 0.1) for s, e in ((0, 8), (8, 16))]
    loss, lse = qd.combine_partials(parts, td, V, -100, "sum", 0.1)
    torch.testing.assert_close(loss.cpu().double(), ref_loss, rtol=1e-5, atol=1e-5)
    g = torch.where(td == -100, 0.0, torch.ones(M, device=DEVICE))
    dx = torch.cat([qd.shard_grad(xd[:, s:e], td, lse, g, s, V, -100, 0.1)
                    for s, e in ((0, 8), (8, 16))], 1).cpu()
    assert (dx[[1, 4]] == 0).all()
    torch.testing.assert_close(dx.double(), ref_dx, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_matches_lse_partial_path(reduction):
    """The all-gather variant of the combine: quack_cpp.cross_entropy(None, target,
    lse_partial=(M, shards), target_logit, num_classes=V) on the shards' partials gives the
    same loss and lse as combine_partials (eps = 0: that path takes no label smoothing)."""
    M, V = 20, 33
    x, t = _inputs(M, V, f32, seed=4)
    xd, td = x.to(DEVICE), t.to(DEVICE)
    parts = [qd.shard_partials(xd[:, s:e], td, s) for s, e in ((0, 10), (10, 33))]
    loss, lse = qd.combine_partials(parts, td, V, -100, reduction, 0.0, 1e-3)
    lp = torch.stack([p[0] for p in parts], 1)
    tl = sum(p[1] for p in parts)
    loss2, lse2 = quack_cpp.cross_entropy(None, td, reduction=reduction, z_loss=1e-3,
                                          lse_partial=lp, target_logit=tl, num_classes=V,
                                          return_lse=True)
    torch.testing.assert_close(loss, loss2, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(lse, lse2, rtol=1e-6, atol=1e-6)


def test_bad_target_rows_are_nan():
    M, V = 8, 20
    x, t = _inputs(M, V, f32, bad_row=3)
    xd, td = x.to(DEVICE), t.to(DEVICE)
    parts = [qd.shard_partials(xd[:, s:e], td, s) for s, e in ((0, 9), (9, 20))]
    loss, lse = qd.combine_partials(parts, td, V, reduction="none")
    loss = loss.cpu()
    assert torch.isnan(loss[3]) and not torch.isnan(loss[torch.arange(M) != 3]).any()
    g = qd._row_scale(torch.ones(M, device=DEVICE), td, None, M, V, -100, "none")
    for s, e in ((0, 9), (9, 20)):
        dx = qd.shard_grad(xd[:, s:e], td, lse, g, s, V).cpu()
        assert torch.isnan(dx[3]).all() and not torch.isnan(dx[torch.arange(M) != 3]).any()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps,zs", [(0.0, 0.0), (0.1, 1e-3)])
def test_one_rank_matches_cross_entropy(reduction, eps, zs):
    """Without torch.distributed initialised: one rank with the whole vocabulary, against
    quack_cpp.cross_entropy (loss, lse and gradient)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        pytest.skip("torch.distributed is initialised in this process")
    M, V = 16, 40
    x, t = _inputs(M, V, f32, seed=1)
    dloss = torch.rand(M) + 0.5 if reduction == "none" else torch.tensor(0.7)
    a = x.to(DEVICE).requires_grad_()
    b = x.to(DEVICE).requires_grad_()
    la, lse_a = qd.vocab_parallel_cross_entropy(a, t.to(DEVICE), reduction=reduction,
                                                label_smoothing=eps, z_loss=zs, return_lse=True)
    lb, lse_b = quack_cpp.cross_entropy(b, t.to(DEVICE), reduction=reduction,
                                        label_smoothing=eps, z_loss=zs, return_lse=True)
    la.backward(dloss.to(DEVICE))
    lb.backward(dloss.to(DEVICE))
    torch.testing.assert_close(la, lb, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(lse_a, lse_b, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-7)


def test_empty_rows():
    x = torch.randn(0, 10, device=DEVICE).requires_grad_()
    t = torch.zeros(0, dtype=torch.int64, device=DEVICE)
    loss = qd.vocab_parallel_cross_entropy(x, t, reduction="sum")
    loss.backward()
    assert loss.item() == 0 and x.grad.shape == (0, 10)


@pytest.mark.parametrize("kw,name", [
    (dict(weight=torch.ones(10)), "weight"), (dict(logit_softcap=30.0), "logit_softcap"),
    (dict(inplace_backward=True), "inplace_backward"),
    (dict(lse_partial=torch.zeros(4, 2)), "lse_partial"),
    (dict(target_logit=torch.zeros(4)), "target_logit"), (dict(reduction="avg"), "reduction"),
    (dict(label_smoothing=1.5), "label_smoothing"), (dict(z_loss=-1.0), "z_loss"),
    (dict(vocab_start=5), "vocab_start"), (dict(group=object()), "group")])
def test_bad_arguments(kw, name):
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        pytest.skip("torch.distributed is initialised in this process")
    x = torch.randn(4, 10, device=DEVICE)
    t = torch.zeros(4, dtype=torch.int64, device=DEVICE)
    with pytest.raises(ValueError, match=name):
        qd.vocab_parallel_cross_entropy(x, t, **kw)


def test_bad_shapes():
    x = torch.randn(4, 10, device=DEVICE)
    t = torch.zeros(4, dtype=torch.int64, device=DEVICE)
    with pytest.raises(ValueError, match="logits_shard"):
        qd.vocab_parallel_cross_entropy(x[0], t)
    with pytest.raises(ValueError, match="target"):
        qd.vocab_parallel_cross_entropy(x, t[:3])
    with pytest.raises(ValueError, match="target"):
        qd.vocab_parallel_cross_entropy(x, t.float())


def _mlp_reference(case):
    import distributed_worker as w

    x, w1, b1, w2, b2, c = w.mlp_inputs(case)
    dt = case["dtype"]
    ts = [v.to(dt).double().requires_grad_() for v in (x, w1, b1, w2, b2)]
    xx, w1d, b1d, w2d, b2d = ts
    y = torch.nn.functional.gelu(xx @ w1d.T + b1d) @ w2d.T + b2d
    (y * c.double()).sum().backward()
    return y.detach(), [v.grad for v in ts]


def _lce_reference(case):
    """(loss, (dx, dW)) in float64 from the rounded x and W, the logits rounded to the compute
    dtype as the GEMM's output is."""
    import distributed_worker as w

    x, W, t, dl = w.lce_inputs(case)
    dt = case["dtype"]
    x64 = x.to(dt).double().requires_grad_()
    w64 = W.to(dt).double().requires_grad_()
    z = x64 @ w64.T
    z = z + (z.detach().to(dt).double() - z.detach())  # rounded values, float64 gradient
    loss, _, _ = ref_cross_entropy(z, t, case["reduction"], label_smoothing=case["eps"])
    loss.backward(dl.double())
    return loss.detach(), (x64.grad, w64.grad)


def test_linear_cross_entropy_shards_in_one_process():
    """Without torch.distributed: the one-rank composition against the float64 reference."""
    import torch.distributed as dist

    import distributed_worker as w

    if dist.is_available() and dist.is_initialized():
        pytest.skip("torch.distributed is initialised in this process")
    case = dict(kind="lce", seed=32, M=40, D=32, V=64, dtype=bf16, reduction="mean", eps=0.1)
    ref_loss, (rdx, rdw) = _lce_reference(case)
    x, W, t, dl = w.lce_inputs(case)
    xx = x.to(bf16).to(DEVICE).requires_grad_()
    ww = W.to(bf16).to(DEVICE).requires_grad_()
    loss = qd.vocab_parallel_linear_cross_entropy(xx, ww, t.to(DEVICE), label_smoothing=0.1)
    loss.backward(dl.to(DEVICE))
    torch.testing.assert_close(loss.cpu().double(), ref_loss, rtol=2e-3, atol=2e-3)
    _close_scaled(xx.grad.cpu().float(), rdx, 3e-2)
    _close_scaled(ww.grad.cpu().float(), rdw, 3e-2)


def _close_scaled(a, ref, rel):
    """|a - ref| <= rel * max|ref| + 1e-6 everywhere (bf16 GEMM chains: a norm-wise bound)."""
    err = (a.double() - ref).abs().max().item()
    bound = rel * ref.abs().max().item() + 1e-6
    assert err <= bound, f"max error {err:.3e} > {bound:.3e}"


def test_mlp_shards_in_one_process():
    """Column-parallel Linear then row-parallel Linear, the hidden dimension split in two, in
    one process: the concatenated column outputs and the summed row partials equal the
    unsharded MLP; dx is the sum of the shards' dx (what the backward's all-reduce forms)."""
    import distributed_worker as w

    case = dict(kind="mlp", seed=3, M=32, K=64, H=96, N=48, dtype=bf16)
    ref_y, ref_grads = _mlp_reference(case)
    x, w1, b1, w2, b2, c = w.mlp_inputs(case)
    xs, ys, dxs = [], 0, 0
    for s, e in ((0, 40), (40, 96)):
        xx = x.to(bf16).to(DEVICE).requires_grad_()
        w1r = w1[s:e].to(bf16).to(DEVICE).requires_grad_()
        w2r = w2[:, s:e].to(bf16).to(DEVICE).requires_grad_()
        h = qd.column_parallel_linear(xx, w1r, b1[s:e].to(bf16).to(DEVICE))
        y = qd.row_parallel_linear(torch.nn.functional.gelu(h), w2r)
        (y.float() * c.to(DEVICE)).sum().backward()
        ys = ys + y.float().cpu()
        dxs = dxs + xx.grad.float().cpu()
        _close_scaled(w1r.grad.cpu(), ref_grads[1][s:e], 3e-2)
        _close_scaled(w2r.grad.cpu(), ref_grads[3][:, s:e], 3e-2)
    _close_scaled(ys + b2.to(bf16).float(), ref_y, 3e-2)
    _close_scaled(dxs, ref_grads[0], 3e-2)


# --------------------------------------------------------------------------------------------
# Two processes
# --------------------------------------------------------------------------------------------


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_process_device():
    if DEVICE == "cpu":
        return "cpu"
    if torch.cuda.device_count() >= 2:
        return "cuda"
    return None


CE_CASES = [
    dict(kind="ce", seed=10, M=32, V=64, world=2, dtype=f32, reduction="mean", eps=0.0),
    dict(kind="ce", seed=11, M=32, V=64, world=2, dtype=bf16, reduction="sum", eps=0.1,
         z_loss=1e-3, target_dtype=torch.int32),
    dict(kind="ce", seed=12, M=20, V=50, world=2, dtype=f32, reduction="none", eps=0.2,
         splits=[13, 50], explicit_group=True, bad_row=4),
    dict(kind="ce", seed=13, M=16, V=48, world=2, dtype=f16, reduction="mean", eps=0.1,
         splits=[0, 48]),
]
LCE_CASES = [dict(kind="lce", seed=30, M=48, D=64, V=96, world=2, dtype=bf16, reduction="mean",
                  eps=0.1),
             dict(kind="lce", seed=31, M=32, D=32, V=80, world=2, dtype=bf16, reduction="sum",
                  eps=0.0, splits=[32, 80])]
MLP_CASES = [dict(kind="mlp", seed=20, M=32, K=64, H=96, N=48, dtype=bf16),
             dict(kind="mlp", seed=21, M=16, K=32, H=64, N=40, dtype=bf16,
                  explicit_group=True)]


def test_two_processes(tmp_path):
    """loss, lse and gradients of 2 ranks (gloo on the CPU, or NCCL on cuda:0 and cuda:1)
    against the unsharded float64 reference."""
    import distributed_worker as w

    device = _two_process_device()
    if device is None:
        pytest.skip("needs 2 CUDA GPUs (or QUACK_TEST_DEVICE=cpu for gloo on the CPU)")
    import torch.multiprocessing as mp

    for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                 ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ.setdefault(k, v)
    cases = CE_CASES + MLP_CASES + LCE_CASES
    mp.spawn(w.main, args=(2, _free_port(), cases, str(tmp_path), device), nprocs=2, join=True)
    checked = 0
    for i, case in enumerate(cases):
        outs = [torch.load(tmp_path / f"{i}_{r}.pt") for r in range(2)]
        if case["kind"] == "lce":
            ref_loss, (rdx, rdw) = _lce_reference(case)
            for r, o in enumerate(outs):
                s, e = w.bounds(case, r)
                torch.testing.assert_close(o["loss"].double(), ref_loss, rtol=2e-3, atol=2e-3)
                _close_scaled(o["dx"].float(), rdx, 3e-2)
                _close_scaled(o["dw"].float(), rdw[s:e], 3e-2)
            checked += 1
            continue
        if case["kind"] == "mlp":
            ref_y, (rdx, rw1, rb1, rw2, rb2) = _mlp_reference(case)
            H = case["H"]
            for r, o in enumerate(outs):
                s, e = r * H // 2, (r + 1) * H // 2
                _close_scaled(o["y"].float(), ref_y, 3e-2)
                _close_scaled(o["dx"].float(), rdx, 3e-2)
                _close_scaled(o["dw1"].float(), rw1[s:e], 3e-2)
                _close_scaled(o["db1"].float(), rb1[s:e], 3e-2)
                _close_scaled(o["dw2"].float(), rw2[:, s:e], 3e-2)
                _close_scaled(o["db2"].float(), rb2, 3e-2)
            checked += 1
            continue
        x, t, dl = w.ce_inputs(case)
        x = x.to(case["dtype"])
        ref_loss, ref_lse, ref_dx = _reference(x, t, case["reduction"], case["eps"],
                                               case.get("z_loss", 0.0), dl)
        bad = case.get("bad_row")
        for r, o in enumerate(outs):
            torch.testing.assert_close(o["loss"].double(), ref_loss, rtol=1e-5, atol=1e-5,
                                       equal_nan=True)
            torch.testing.assert_close(o["lse"].double(), ref_lse, rtol=1e-5, atol=1e-5)
            s, e = w.bounds(case, r)
            assert o["grad"].shape == (case["M"], e - s) and o["grad"].dtype == case["dtype"]
            g, ref = o["grad"].double(), ref_dx[:, s:e]
            if bad is not None:
                assert torch.isnan(g[bad]).all()
                keep = torch.arange(case["M"]) != bad
                g, ref = g[keep], ref[keep]
            torch.testing.assert_close(g, ref, **TOL[case["dtype"]])
        checked += 1
    assert checked == len(cases)
