"""Float64 references, same-dtype torch baselines and the tolerance rule of the acceptance
cases (shared/cases/handed.md, "Float64 reference and tolerance rules"). Needs torch."""

import warnings

import torch
import torch.nn.functional as F

LOW_PRECISION = (torch.float16, torch.bfloat16)


# --------------------------------------------------------------------------------------------
# Implementations with one signature: fn(x, w, b, r, eps, prenorm, residual_dtype, out_dtype)
# --------------------------------------------------------------------------------------------


def ref_rmsnorm(x, w, b, r, eps, prenorm=False, residual_dtype=None, out_dtype=None):
    """Float64 RMSNorm (inputs are cast to float64 by the caller): h = x + r; rstd =
    1/sqrt(mean(h^2) + eps); out = h*rstd*w + b; returns out or (out, h)."""
    h = x if r is None else x + r
    rstd = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    out = h * rstd
    if w is not None:
        out = out * w
    if b is not None:
        out = out + b
    return (out, h) if prenorm else out


def torch_rmsnorm(x, w, b, r, eps, prenorm=False, residual_dtype=None, out_dtype=None):
    """PyTorch eager in the inputs' dtypes (torch_same_dtype of the tolerance rule)."""
    if r is not None:
        h = (x + r).to(residual_dtype or r.dtype)
    elif residual_dtype is not None and residual_dtype != x.dtype:
        h = x.to(residual_dtype)
    else:
        h = x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Mismatch dtype between input and weight"
        out = F.rms_norm(h, (h.shape[-1],), w, eps)
    if b is not None:
        out = out + b
    out = out.to(out_dtype or x.dtype)
    return (out, h) if prenorm else out


def run(fn, x, w=None, b=None, r=None, dy=None, dr=None, eps=1e-6, prenorm=False,
        residual_dtype=None, out_dtype=None, f64=False):
    """Runs fn forward and (when dy or dr is given) backward; returns a dict out,
    residual_out, dx, dw, db, dr (None where absent). Inputs become fresh leaves (f64: cast
    to float64), except tensors that already require grad, which are used as they are."""
    def leaf(t):
        if t is None:
            return None
        if f64:
            return t.detach().double().requires_grad_(True)
        if t.requires_grad:  # the caller's own (possibly strided, non-leaf) tensor: keep it
            if not t.is_leaf:
                t.retain_grad()
            return t
        return t.detach().clone().requires_grad_(True)

    xl, wl, bl, rl = leaf(x), leaf(w), leaf(b), leaf(r)
    res = fn(xl, wl, bl, rl, eps, prenorm, residual_dtype, out_dtype)
    out, res_out = (res if prenorm else (res, None))
    outs, grads = [], []
    if dy is not None:
        outs.append(out)
        grads.append(dy.double() if f64 else dy)
    if dr is not None:
        outs.append(res_out)
        grads.append(dr.double() if f64 else dr)
    if outs:
        torch.autograd.backward(outs, grads)
    g = lambda t: None if t is None else t.grad
    return dict(out=out.detach(), residual_out=None if res_out is None else res_out.detach(),
                dx=g(xl), dw=g(wl), db=g(bl), dr=g(rl))


# --------------------------------------------------------------------------------------------
# Tolerance rule
# --------------------------------------------------------------------------------------------


def atol_for(dtype, max_ref):
    """atol of the rule: 1e-6 (fp32), 1e-3*max|ref| (bf16/fp16). For fp32 we scale by
    max(1, max|ref|) so fp32-accumulated sums over many rows (dweight ~ sqrt(M)) get the
    same relative slack as normalised outputs."""
    if dtype in LOW_PRECISION:
        return 1e-3 * max_ref
    return 1e-6 * max(1.0, max_ref)


def assert_rule(name, lib, ref, tch=None, dtype=None, rtol_no_torch=None):
    """error_lib <= 2*error_torch + atol (handed.md), with error = max|t - ref| over float64.
    dtype picks atol (default: lib's dtype). Without a torch result: error_lib <=
    rtol_no_torch * max(1, max|ref|). Any NaN/Inf where ref is finite fails."""
    assert lib is not None, f"{name}: missing"
    assert tuple(lib.shape) == tuple(ref.shape), f"{name}: shape {tuple(lib.shape)} != {tuple(ref.shape)}"
    if ref.numel() == 0:
        return
    lib64, ref64 = lib.detach().double(), ref.detach().double()
    finite = torch.isfinite(ref64)
    bad = finite & ~torch.isfinite(lib64)
    assert not bad.any(), f"{name}: {int(bad.sum())} non-finite values where the reference is finite"
    max_ref = ref64[finite].abs().max().item() if finite.any() else 0.0
    err_lib = (lib64 - ref64)[finite].abs().max().item()
    dtype = dtype or lib.dtype
    if tch is None:
        tol = (rtol_no_torch or 1e-2) * max(1.0, max_ref)
        assert err_lib <= tol, f"{name}: error {err_lib:.3e} > {tol:.3e} (max|ref| {max_ref:.3e})"
        return
    err_torch = (tch.detach().double() - ref64)[finite].abs().max().item()
    bound = 2 * err_torch + atol_for(dtype, max_ref)
    assert err_lib <= bound, (
        f"{name}: error_lib {err_lib:.3e} > 2*error_torch {err_torch:.3e} + atol "
        f"= {bound:.3e} (max|ref| {max_ref:.3e}, {dtype})")


def compare_runs(lib, ref, tch, x_dtype, keys=("out", "residual_out", "dx", "dw", "db", "dr")):
    """assert_rule for each key present in lib; atol from the lower of x's and the tensor's
    precision."""
    for k in keys:
        if ref.get(k) is None:
            assert lib.get(k) is None, f"{k}: expected None, got a tensor"
            continue
        t = lib.get(k)
        assert t is not None, f"{k}: missing"
        low = x_dtype if x_dtype in LOW_PRECISION else t.dtype
        assert_rule(k, t, ref[k], None if tch is None else tch.get(k), dtype=low)


def poison_(t):
    """Fills a float tensor with NaN (so an unwritten element fails)."""
    return t.fill_(float("nan"))


# --------------------------------------------------------------------------------------------
# Cross-entropy (include/quack/cross_entropy.h's formula), in the inputs' dtype
# --------------------------------------------------------------------------------------------


def ce_parts(x, target, weight=None, ignore_index=-100, label_smoothing=0.0, z_loss=0.0,
             logit_softcap=None, lse_partial=None, target_logit=None, num_classes=None):
    """Per-row parts of the cross-entropy in the dtype of x (or lse_partial): dict with ce, z,
    lse (every row), counted (target in [0, V), not ignore_index), bad (outside [0, V), not
    ignored), w_t (the target's class weight, 1 without weights), y (softcapped logits or
    None). Ignored and bad rows have ce = z = 0 here (callers put the NaN of bad rows).
    Differentiable with respect to x, lse_partial and target_logit."""
    V = x.shape[1] if x is not None else num_classes
    y = None
    if x is not None:
        y = x if not logit_softcap else logit_softcap * torch.tanh(x / logit_softcap)
    lse = torch.logsumexp(lse_partial if lse_partial is not None else y, -1)
    t = target.long()
    kept = t != ignore_index
    inside = (t >= 0) & (t < V)
    counted, bad = kept & inside, kept & ~inside
    tc = t.clamp(0, max(V - 1, 0))
    if target_logit is not None:
        y_t = target_logit.to(lse.dtype)
    else:
        y_t = y.gather(1, tc[:, None])[:, 0]
    w = weight.to(lse.dtype) if weight is not None else None
    w_t = w[tc] if w is not None else torch.ones_like(lse)
    eps = label_smoothing
    ce = (1 - eps) * w_t * (lse - y_t)
    if eps:
        ce = ce + (eps / V) * ((w if w is not None else 1.0) * (lse[:, None] - y)).sum(-1)
    z = z_loss * lse * lse
    zero = torch.zeros_like(lse)
    return dict(ce=torch.where(counted, ce, zero), z=torch.where(counted, z, zero), lse=lse,
                counted=counted, bad=bad, w_t=w_t, y=y)


def ref_cross_entropy(x, target, reduction="mean", **opts):
    """(loss, lse, z part) of the cross-entropy with the C++ contract, in the inputs' dtype
    (float64 for a reference): 'none' per row; 'sum'; 'mean' = sum CE / sum_counted w[t] +
    sum z / #counted (0/0 = NaN); a bad target makes its row (and so sum/mean) NaN.
    Differentiable (autograd gives the reference gradient; bad rows' gradients are not
    NaN here: check those rows apart)."""
    p = ce_parts(x, target, **opts)
    ce, z, counted, bad = p["ce"], p["z"], p["counted"], p["bad"]
    nan_rows = torch.where(bad, float("nan"), 0.0).to(ce.dtype)
    if reduction == "none":
        return ce + z + nan_rows, p["lse"], z + nan_rows
    if reduction == "sum":
        zs = z.sum() + nan_rows.sum()
        return ce.sum() + zs, p["lse"], zs
    d_ce = torch.where(counted, p["w_t"], 0.0).sum()
    d_z = counted.to(ce.dtype).sum()
    zs = z.sum() / d_z + nan_rows.sum()
    return ce.sum() / d_ce + zs, p["lse"], zs


C01_LAYOUTS = ("expanded", "col_strided", "row_strided", "transposed")


def c01_dy(layout, shape, device, dtype=torch.bfloat16):
    """cases/handed.md C01's upstream gradients of ``shape`` (2-D for "transposed"): expanded
    ones (all strides 0, what y.sum().backward() hands over), column-strided (every other
    column of a wider buffer), row-strided (a slice of a wider buffer), a transposed view."""
    def randn(*sh):
        return torch.randn(*sh, device=device).to(dtype)
    if layout == "expanded":
        return torch.ones((), device=device, dtype=dtype).expand(*shape)
    if layout == "col_strided":
        return randn(*shape[:-1], 2 * shape[-1])[..., ::2]
    if layout == "row_strided":
        return randn(*shape[:-1], shape[-1] + 128)[..., 64:64 + shape[-1]]
    if layout == "transposed":
        return randn(shape[1], shape[0]).t()
    raise AssertionError(layout)
