"""CPU stand-in kernels for the custom ops quack_cpp::rmsnorm_fwd / rmsnorm_bwd,
quack_cpp::layernorm_fwd / layernorm_bwd, quack_cpp::gemm / gemm_add_inplace,
quack_cpp::gemm_act / gemm_dact / gemm_gated / gemm_dgated,
quack_cpp::topk_fwd / topk_bwd, softmax / log_softmax fwd and bwd, the cross-entropy ops
(cross_entropy_fwd / _bwd / _scale_grad) and the linear cross-entropy ops
(linear_cross_entropy_fwd / _bwd / _scale_grad) and the rotary ops (rotary, rotary_qkv_split,
rotary_qkv_pack) and quack_cpp::gemm_rotary, written in torch after the C++ API's contract
(include/quack/norm.h, gemm.h, gemm_act.h, topk.h, softmax.h, cross_entropy.h,
linear_cross_entropy.h: fp32 math, same outputs and placeholders, the cross-entropy's NaN rows for
bad targets and exact zeros for ignored ones; the GEMM stand-ins accept every layout, they do not
mimic can_implement). They
let the torch layer and the test code run without a GPU:
test_plumbing_cpu.py uses them, and QUACK_TEST_DEVICE=cpu runs the GPU test files against
them (a self-check of the tests, not of the kernels). Needs torch."""

import contextlib

import torch


def _empty(x, dtype=None):
    return x.new_empty((0,), dtype=dtype or x.dtype)


def rmsnorm_fwd_cpu(x, weight, bias, residual, eps, weight_offset, out_dtype, residual_out_dtype,
                    store_rstd):
    h = x.float() + (residual.float() if residual is not None else 0)
    rstd = torch.rsqrt(h.pow(2).mean(-1) + eps)
    out = h * rstd[:, None]
    if weight is not None:
        out = out * (weight.float() + weight_offset)
    if bias is not None:
        out = out + bias.float()
    res_out = h.to(residual_out_dtype) if residual_out_dtype is not None else _empty(x)
    return out.to(out_dtype), res_out, rstd if store_rstd else _empty(x, torch.float32)


def rmsnorm_bwd_cpu(x, weight, dout, rstd, dresidual_out, weight_offset, dx_dtype,
                    dresidual_dtype, need_dweight, dbias_dtype):
    xhat = x.float() * rstd[:, None]
    dy = dout.float()
    g = dy * (weight.float() + weight_offset) if weight is not None else dy
    dh = rstd[:, None] * (g - xhat * (g * xhat).mean(-1, keepdim=True))
    if dresidual_out is not None:
        dh = dh + dresidual_out.float()
    dres = dh.to(dresidual_dtype) if dresidual_dtype is not None else _empty(x)
    dw = (dy * xhat).sum(0).to(weight.dtype) if need_dweight else _empty(x)
    db = dy.sum(0).to(dbias_dtype) if dbias_dtype is not None else _empty(x)
    return dh.to(dx_dtype), dres, dw, db


def layernorm_fwd_cpu(x, weight, bias, residual, eps, weight_offset, out_dtype,
                      residual_out_dtype, store_stats):
    h = x.float() + (residual.float() if residual is not None else 0)
    mean = h.mean(-1)
    rstd = torch.rsqrt((h - mean[:, None]).pow(2).mean(-1) + eps)
    out = (h - mean[:, None]) * rstd[:, None]
    if weight is not None:
        out = out * (weight.float() + weight_offset)
    if bias is not None:
        out = out + bias.float()
    res_out = h.to(residual_out_dtype) if residual_out_dtype is not None else _empty(x)
    f32 = torch.float32
    return (out.to(out_dtype), res_out, mean if store_stats else _empty(x, f32),
            rstd if store_stats else _empty(x, f32))


def layernorm_bwd_cpu(x, weight, dout, mean, rstd, dresidual_out, weight_offset, dx_dtype,
                      dresidual_dtype, need_dweight, dbias_dtype):
    xhat = (x.float() - mean[:, None]) * rstd[:, None]
    dy = dout.float()
    g = dy * (weight.float() + weight_offset) if weight is not None else dy
    dh = rstd[:, None] * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
    if dresidual_out is not None:
        dh = dh + dresidual_out.float()
    dres = dh.to(dresidual_dtype) if dresidual_dtype is not None else _empty(x)
    dw = (dy * xhat).sum(0).to(weight.dtype) if need_dweight else _empty(x)
    db = dy.sum(0).to(dbias_dtype) if dbias_dtype is not None else _empty(x)
    return dh.to(dx_dtype), dres, dw, db


def _gemm_f32(A, B, C, alpha, beta):
    acc = alpha * torch.matmul(A.float(), B.float())
    if C is not None and beta != 0:  # beta = 0: C is never read (NaN in C must not leak)
        acc = acc + beta * C.float()
    return acc


def _device_scalars(alpha, beta, alpha_t, beta_t):
    # Device scalars replace the host values (the C++ reads them in the kernel).
    return (float(alpha_t) if alpha_t is not None else alpha,
            float(beta_t) if beta_t is not None else beta)


def _add_biases(acc, bias, colvec_bias):
    # quack::GemmBias: out[l][m][n] += row[l][n] + col[l][m] (a 1-D vector shared by the
    # batches), in fp32.
    if bias is not None:
        acc = acc + (bias.float() if bias.dim() == 1 else bias.float()[:, None, :])
    if colvec_bias is not None:
        acc = acc + colvec_bias.float()[..., :, None]
    return acc


def gemm_cpu(A, B, C, alpha, beta, out_dtype, tuned=False, alpha_t=None, beta_t=None,
             bias=None, colvec_bias=None, dynamic_scheduler=False):
    # dynamic_scheduler: which CTA computes a tile, not what it computes (nothing to stand in).
    from quack_cpp.gemm_ops import Gemm

    # The real op's layout and checks (the fake: _new_out, colvec_bias's check_colvec_bias).
    D = Gemm.fake(A, B, C, alpha, beta, out_dtype, tuned, alpha_t, beta_t, bias, colvec_bias)
    alpha, beta = _device_scalars(alpha, beta, alpha_t, beta_t if C is not None else None)
    D.copy_(_add_biases(_gemm_f32(A, B, C, alpha, beta), bias, colvec_bias))
    return D


def _preact_f32(A, B, C, bias, alpha, beta, colvec_bias=None):
    return _add_biases(_gemm_f32(A, B, C, alpha, beta), bias, colvec_bias)


def gemm_act_cpu(A, B, C, bias, activation, alpha, beta, store_preact, out_dtype, postact_dtype,
                 tuned=False, colvec_bias=None):
    from quack_cpp.gemm_act_ops import GemmAct, act_torch

    preact, postact = GemmAct.outputs(A, B, C, bias, activation, alpha, beta, store_preact,
                                      out_dtype, postact_dtype, tuned, colvec_bias)
    pre = _preact_f32(A, B, C, bias, alpha, beta, colvec_bias)
    postact.copy_(act_torch(activation, pre))
    if preact is None:
        return A.new_empty((0,)), postact
    preact.copy_(pre)
    return preact, postact


def gemm_gated_cpu(A, B, C, bias, activation, alpha, beta, store_preact, out_dtype,
                   postact_dtype, concat_layout=False, tuned=False, colvec_bias=None):
    from quack_cpp.gemm_act_ops import GemmGated, gated_torch

    preact, postact = GemmGated.outputs(A, B, C, bias, activation, alpha, beta, store_preact,
                                        out_dtype, postact_dtype, concat_layout, tuned,
                                        colvec_bias)
    if concat_layout:  # b's columns [gate | up], bias [b_gate; b_up]: as the interleaved ones
        def inter(t):
            h = t.shape[-1] // 2
            return torch.stack((t[..., :h], t[..., h:]), dim=-1).flatten(-2)
        B = inter(B)
        bias = inter(bias) if bias is not None else None
    pre = _preact_f32(A, B, C, bias, alpha, beta, colvec_bias)  # colvec: per row, either layout
    postact.copy_(gated_torch(activation, pre[..., 0::2], pre[..., 1::2]))
    if preact is None:
        return A.new_empty((0,)), postact
    preact.copy_(pre)
    return preact, postact


def gemm_dact_cpu(A, B, preact, activation, out_dtype, postact_dtype, store_postact=True,
                  tuned=False, dynamic_scheduler=False):
    from quack_cpp.gemm_act_ops import GemmDAct, act_torch, dact_torch

    dpreact, postact = GemmDAct.outputs(A, B, preact, activation, out_dtype, postact_dtype,
                                        store_postact)
    d = torch.matmul(A.float(), B.float())
    x = preact.float()
    dpreact.copy_(dact_torch(activation, x, d))
    if postact is None:
        return dpreact, A.new_empty((0,))
    postact.copy_(act_torch(activation, x))
    return dpreact, postact


def gemm_dgated_cpu(A, B, preact, activation, out_dtype, postact_dtype, store_postact=True,
                    tuned=False, dynamic_scheduler=False):
    from quack_cpp.gemm_act_ops import GemmDGated, dgated_torch, gated_torch

    dpreact, postact = GemmDGated.outputs(A, B, preact, activation, out_dtype, postact_dtype,
                                          store_postact)
    d = torch.matmul(A.float(), B.float())
    x = preact.float()
    g, u = x[..., 0::2], x[..., 1::2]
    dg, du = dgated_torch(activation, g, u, d)
    dpreact.copy_(torch.stack((dg, du), dim=-1).reshape(x.shape))
    if postact is None:
        return dpreact, A.new_empty((0,))
    postact.copy_(gated_torch(activation, g, u))
    return dpreact, postact


def gemm_add_inplace_cpu(A, B, out, alpha, beta, tuned=False, alpha_t=None, beta_t=None,
                         dynamic_scheduler=False):
    alpha, beta = _device_scalars(alpha, beta, alpha_t, beta_t)
    # Through .data (a separate version counter), as the CUDA kernel writes through a raw
    # pointer: the version bump is the op's (or the eager fast path's), exactly once.
    out.data.copy_(_gemm_f32(A, B, out, alpha, beta))


def topk_fwd_cpu(x, k, largest, softmax, index_dtype, values_dtype, store_lse):
    # torch.sort (stable): NaN first when descending, last when ascending; ties keep the lower
    # index first (+0 and -0 count as equal here: the kernels rank +0 first; tests avoid zeros).
    order = torch.sort(x, dim=-1, descending=largest, stable=True).indices[:, :k].contiguous()
    values = x.gather(1, order).float()
    lse = torch.logsumexp(x.float(), dim=-1)
    if softmax == 1:
        values = torch.softmax(values, dim=-1)
    elif softmax == 2:
        values = torch.exp(values - lse[:, None])
    return (values.to(values_dtype), order.to(index_dtype),
            lse if store_lse else _empty(x, torch.float32))


def topk_bwd_cpu(dvalues, indices, values, x, lse, N, dx_dtype, softmax):
    M = dvalues.shape[0]
    dv = dvalues.float()
    idx = indices.long()
    dx = torch.zeros(M, N, dtype=torch.float32)
    if softmax == 0:
        g = dv
    elif softmax == 1:
        p = values.float()
        g = p * (dv - (p * dv).sum(-1, keepdim=True))
    else:
        y = torch.exp(x.float() - lse[:, None])
        p = y.gather(1, idx)
        s = (p * dv).sum(-1, keepdim=True)
        dx = -y * s
        g = p * (dv - s)
    dx.scatter_(1, idx, g)
    return dx.to(dx_dtype)


def softmax_fwd_cpu(x, out_dtype):
    return torch.softmax(x.float(), -1).to(out_dtype)


def softmax_bwd_cpu(y, dy, dx_dtype):
    y32, dy32 = y.float(), dy.float()
    return (y32 * (dy32 - (y32 * dy32).sum(-1, keepdim=True))).to(dx_dtype)


def log_softmax_fwd_cpu(x, out_dtype):
    return torch.log_softmax(x.float(), -1).to(out_dtype)


def log_softmax_bwd_cpu(y, dy, dx_dtype):
    dy32 = dy.float()
    return (dy32 - torch.exp(y.float()) * dy32.sum(-1, keepdim=True)).to(dx_dtype)


def _ce_grad(x, target, lse, s_ce, s_z, weight, ignore_index, eps, zs, cap):
    """dx (fp32) of sum_i s_ce_i*CE_i + s_z_i*z_i (include/quack/cross_entropy.h's backward
    formula, closed form): ignored rows exactly 0, bad-target rows NaN."""
    from reference import ce_parts

    x32 = x.float()
    M, V = x32.shape
    p = ce_parts(x32, target, weight, ignore_index, logit_softcap=cap or None)
    y, counted, bad, w_t = p["y"], p["counted"], p["bad"], p["w_t"]
    s_ce = s_ce.float().expand(M) if torch.is_tensor(s_ce) else torch.full((M,), float(s_ce))
    s_z = s_z.float().expand(M) if torch.is_tensor(s_z) else torch.full((M,), float(s_z))
    w = weight.float() if weight is not None else None
    W = w.sum() if w is not None else float(V)
    prob = torch.exp(y - lse.float()[:, None])
    coef = s_ce * ((1 - eps) * w_t + (eps / V) * W) + s_z * 2.0 * zs * lse.float()
    dx = coef[:, None] * prob
    if eps:
        dx = dx - (s_ce * eps / V)[:, None] * (w[None, :] if w is not None else 1.0)
    tc = target.long().clamp(0, max(V - 1, 0))
    dx = dx - torch.nn.functional.one_hot(tc, V).float() * (s_ce * (1 - eps) * w_t)[:, None]
    if cap:
        dx = dx * (1 - (y / cap) ** 2)
    dx = torch.where(counted[:, None], dx, 0.0)
    return torch.where(bad[:, None], float("nan"), dx)


def cross_entropy_fwd_cpu(x, target, weight, lse_partial, target_logit, ignore_index, reduction,
                          label_smoothing, z_loss, logit_softcap, num_classes, want_lse,
                          want_z_loss, want_dx, predict_dx=False, dx_into_x=False):
    from reference import ref_cross_entropy

    fn = "cross_entropy_fwd"
    if (lse_partial is not None or target_logit is not None) and (label_smoothing or
                                                                 logit_softcap):
        raise ValueError(f"{fn}: label_smoothing / logit_softcap with lse_partial or "
                         "target_logit, expected neither")
    if want_dx and (lse_partial is not None or x is None):
        raise ValueError(f"{fn}: dx is given with lse_partial, expected no dx")
    M = target.shape[0]
    f32 = lambda t: None if t is None else t.float()  # noqa: E731
    loss, lse, z = ref_cross_entropy(
        f32(x), target, reduction, weight=weight, ignore_index=ignore_index,
        label_smoothing=label_smoothing, z_loss=z_loss, logit_softcap=logit_softcap or None,
        lse_partial=f32(lse_partial), target_logit=f32(target_logit), num_classes=num_classes)
    dx = _empty(x if x is not None else target, x.dtype if x is not None else torch.float32)
    state = _empty(target, torch.float32)
    write = True
    if predict_dx:  # the kernels' contract: dx only where the device's word is not 0
        import quack_cpp.cross_entropy_ops as ceo
        word = ceo.dx_predict_word(x.device)
        write = word is None or int(word[0]) != 0
        state = torch.zeros(ceo.DX_STATE_FLOATS, dtype=torch.float32)
        state[5] = 1.0 if write else 0.0  # kDxOn
    if want_dx:
        if reduction == "mean":
            counted = ((target != ignore_index) & (target >= 0) & (target < x.shape[1]))
            w_t = (weight.float()[target.long().clamp(0, x.shape[1] - 1)]
                   if weight is not None else torch.ones(M))
            s_ce = 1.0 / torch.where(counted, w_t, 0.0).sum()
            s_z = 1.0 / counted.float().sum()
        else:
            s_ce = s_z = 1.0
        if predict_dx:
            state[2], state[3] = float(s_ce), float(s_z)  # kScaleCe, kScaleZ
        g = _ce_grad(x, target, lse, s_ce, s_z, weight, ignore_index, label_smoothing, z_loss,
                     logit_softcap).to(x.dtype)
        if not write:  # dx not written: poison (the backward must not read it)
            g = torch.full_like(g, float("nan"))
        if dx_into_x:  # the eager fast path's in-place gradient (through .data, version bumped)
            if write:
                x.data.copy_(g)
            torch.autograd.graph.increment_version(x)
        else:
            dx = g
    return (loss.float(), lse.float() if want_lse else _empty(target, torch.float32),
            z.float() if want_z_loss else _empty(target, torch.float32), dx, state)


def cross_entropy_train_bwd_cpu(x, target, lse, grad_output, dx, dx_state, weight, ignore_index,
                                label_smoothing, z_loss, logit_softcap, into_dx=False):
    """quack::cross_entropy_train_bwd's contract: g*dx where the forward wrote dx (kDxOn of
    dx_state), else the recompute with the state's scales; the word set to (g == 1)."""
    import quack_cpp.cross_entropy_ops as ceo
    g = grad_output.float().reshape(())
    if float(dx_state[5]) != 0.0:
        out = (dx.float() * g).to(dx.dtype)
    else:
        s_ce, s_z = g * dx_state[2], g * dx_state[3]
        out = _ce_grad(x, target, lse, s_ce, s_z, weight, ignore_index, label_smoothing, z_loss,
                       logit_softcap).to(dx.dtype)
    word = ceo.dx_predict_word(dx.device)
    if word is not None:
        word.fill_(1 if float(g) == 1.0 else 0)
    if into_dx:
        dx.data.copy_(out)
        torch.autograd.graph.increment_version(dx)
        return dx
    return out


def cross_entropy_bwd_cpu(x, target, lse, dloss, weight, ignore_index, label_smoothing, z_loss,
                          logit_softcap, dx_into_x=False):
    dl = dloss.float().reshape(-1)
    g = _ce_grad(x, target, lse, dl, dl, weight, ignore_index, label_smoothing, z_loss,
                 logit_softcap).to(x.dtype)
    if dx_into_x:
        x.data.copy_(g)
        torch.autograd.graph.increment_version(x)
        return x
    return g


def cross_entropy_scale_grad_cpu(dx, grad_output):
    # Through .data: the version bump is the op's (or the fast path's), exactly once.
    g = grad_output.float().reshape(())
    if g.item() != 1.0:
        dx.data.copy_((dx.float() * g).to(dx.dtype))


def _lce_grad_rows(x, weight, bias, target, ignore_index, eps, zs, cap, scale):
    """(loss rows CE + z, CE rows, z rows, lse, R) of quack/linear_cross_entropy.h in fp32
    from logits rounded to x's dtype; R for per-row scales `scale` (T) of both parts."""
    # The GEMMs read weight and bias in x's dtype (a float32 one rounded first, the op's rule).
    z = x.float() @ weight.to(x.dtype).float().T
    if bias is not None:
        z = z + bias.to(x.dtype).float()
    z = z.to(x.dtype).float()  # the logits chunk in x's dtype
    V = z.shape[1]
    th = torch.tanh(z / cap) if cap else None
    y = cap * th if cap else z
    lse = torch.logsumexp(y, -1)
    t = target.long()
    counted = (t != ignore_index) & (t >= 0) & (t < V)
    bad = (t != ignore_index) & ~counted
    tc = torch.where(counted, t, torch.zeros_like(t))
    yt = y.gather(1, tc[:, None])[:, 0]
    ce = (1 - eps) * (lse - yt) + eps * (lse - y.mean(-1))
    zp = zs * lse * lse
    zero = torch.zeros_like(ce)
    ce = torch.where(counted, ce, zero)
    zp = torch.where(counted, zp, zero)
    ce[bad] = float("nan")
    zp[bad] = float("nan")
    p = torch.exp(y - lse[:, None])
    onehot = torch.nn.functional.one_hot(tc, V).float()
    g = (1 + 2 * zs * lse)[:, None] * p - eps / V - (1 - eps) * onehot
    if cap:
        g = g * (1 - th * th)
    g = g * scale[:, None]
    g = torch.where(counted[:, None], g, torch.zeros_like(g))
    g[bad] = float("nan")
    return ce + zp, ce, zp, lse, g.to(x.dtype).float(), counted


@torch.autocast("cpu", enabled=False)  # fp32 math, as the kernel's, inside a CPU autocast
def linear_cross_entropy_fwd_cpu(x, weight, bias, target, ignore_index, reduction,
                                 label_smoothing, z_loss, logit_softcap, need_dx, need_dw,
                                 need_db, low_memory, chunk_size, fuse_grad_accum):
    T, V = x.shape[0], weight.shape[0]
    t = target.long()
    n = ((t != ignore_index) & (t >= 0) & (t < V)).sum().float()
    scale = torch.ones(T) / (n if reduction == "mean" else 1.0)  # 1/0 = inf: no row counted
    rows, ce, zp, lse, R, counted = _lce_grad_rows(x, weight, bias, target, ignore_index,
                                                   label_smoothing, z_loss, logit_softcap, scale)
    if reduction == "none":
        loss = rows
    elif reduction == "sum":
        loss = rows.sum()
    else:
        loss = ce.sum() / n + zp.sum() / n
    dx = (R @ weight.to(x.dtype).float()).to(x.dtype) if need_dx else _empty(x)
    dw = (R.T @ x.float()).to(weight.dtype) if need_dw else _empty(x)
    db = R.sum(0).to(bias.dtype) if (need_db and bias is not None) else _empty(x)
    return loss.float(), lse, dx, dw, db


@torch.autocast("cpu", enabled=False)
def linear_cross_entropy_bwd_cpu(x, weight, bias, target, lse, dloss, ignore_index,
                                 label_smoothing, z_loss, logit_softcap, need_dx, need_dw,
                                 need_db, low_memory):
    T = x.shape[0]
    scale = dloss.float().expand(T) if dloss.dim() == 0 else dloss.float()
    R = _lce_grad_rows(x, weight, bias, target, ignore_index, label_smoothing, z_loss,
                       logit_softcap, scale)[4]
    dx = (R @ weight.to(x.dtype).float()).to(x.dtype) if need_dx else _empty(x)
    dw = (R.T @ x.float()).to(weight.dtype) if need_dw else _empty(x)
    db = R.sum(0).to(bias.dtype) if (need_db and bias is not None) else _empty(x)
    return dx, dw, db


def linear_cross_entropy_scale_grad_cpu(grad, grad_output):
    g = float(grad_output)
    if g != 1.0:  # exactly 1: untouched (the kernel returns at once)
        grad.data.copy_(grad.float() * g)


def _rotate_cpu(x, cos, sin, offset, conjugate, interleaved=False):
    """include/quack/rotary.h's formula on x (B, S, H, D): fp32 math, one rounding to x's
    dtype, columns R.. passed through; interleaved: the pairs (2i, 2i + 1)."""
    S, half = x.shape[1], cos.shape[1]
    c = cos[offset:offset + S].float()[None, :, None, :]
    s = sin[offset:offset + S].float()[None, :, None, :]
    if conjugate:
        s = -s
    xf = x.float()
    if interleaved:
        x1, x2 = xf[..., 0:2 * half:2], xf[..., 1:2 * half:2]
        out = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), -1).flatten(-2).to(x.dtype)
    else:
        x1, x2 = xf[..., :half], xf[..., half:2 * half]
        out = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1).to(x.dtype)
    return torch.cat((out, x[..., 2 * half:]), -1)


def rotary_cpu(x, cos, sin, seqlen_offset, conjugate, qkv, interleaved=False):
    if not qkv:
        return _rotate_cpu(x, cos, sin, seqlen_offset, conjugate, interleaved)
    q, k, v = x.unbind(2)
    return torch.stack((_rotate_cpu(q, cos, sin, seqlen_offset, conjugate, interleaved),
                        _rotate_cpu(k, cos, sin, seqlen_offset, conjugate, interleaved), v), 2)


def rotary_qkv_split_cpu(qkv, cos, sin, seqlen_offset, conjugate, interleaved=False):
    from quack_cpp.rotary_ops import _check
    _check("rotary_qkv_split", qkv, cos, sin, True)  # what the real kernel's outputs() raises
    q, k, v = qkv.unbind(2)
    return (_rotate_cpu(q, cos, sin, seqlen_offset, conjugate, interleaved).contiguous(),
            _rotate_cpu(k, cos, sin, seqlen_offset, conjugate, interleaved).contiguous(),
            v.clone(memory_format=torch.contiguous_format))


def rotary_qkv_pack_cpu(dq, dk, dv, cos, sin, seqlen_offset, conjugate, interleaved=False):
    from quack_cpp.rotary_ops import _pack_like
    like = _pack_like(dq, dk, dv, cos, sin)  # what the real kernel's outputs() raises
    z = torch.zeros_like(like, memory_format=torch.contiguous_format)
    return torch.stack((
        _rotate_cpu(dq, cos, sin, seqlen_offset, conjugate, interleaved) if dq is not None else z,
        _rotate_cpu(dk, cos, sin, seqlen_offset, conjugate, interleaved) if dk is not None else z,
        dv if dv is not None else z), 2)


def gemm_rotary_cpu(A, B, cos, sin, rotary_cols, head_dim, seqlen, out_dtype, tuned=False):
    """include/quack/gemm_rotary.h's formula: y = A @ B in fp32, the columns n < rotary_cols
    rotated in interleaved pairs per head at position row % seqlen, one rounding."""
    from quack_cpp.gemm_rotary_ops import _rotary_check
    M, N = _rotary_check("gemm_rotary", A, B, cos, sin, rotary_cols, head_dim, seqlen)
    y = A.float() @ B.float()
    if rotary_cols:
        r = y[:, :rotary_cols].view(M // seqlen, seqlen, rotary_cols // head_dim, head_dim)
        r = _rotate_cpu(r, cos[:seqlen], sin[:seqlen], 0, False, True).reshape(M, rotary_cols)
        y = torch.cat((r, y[:, rotary_cols:]), 1)
    return y.to(out_dtype).contiguous()


STAND_INS = {  # custom op name -> its CPU stand-in
    "rmsnorm_fwd": rmsnorm_fwd_cpu, "rmsnorm_bwd": rmsnorm_bwd_cpu,
    "layernorm_fwd": layernorm_fwd_cpu, "layernorm_bwd": layernorm_bwd_cpu, "gemm": gemm_cpu,
    "gemm_add_inplace": gemm_add_inplace_cpu, "softmax_fwd": softmax_fwd_cpu,
    "softmax_bwd": softmax_bwd_cpu, "log_softmax_fwd": log_softmax_fwd_cpu,
    "log_softmax_bwd": log_softmax_bwd_cpu, "cross_entropy_fwd": cross_entropy_fwd_cpu,
    "cross_entropy_bwd": cross_entropy_bwd_cpu,
    "cross_entropy_scale_grad": cross_entropy_scale_grad_cpu,
    "cross_entropy_train_bwd": cross_entropy_train_bwd_cpu,
    "topk_fwd": topk_fwd_cpu, "topk_bwd": topk_bwd_cpu,
    "linear_cross_entropy_fwd": linear_cross_entropy_fwd_cpu,
    "linear_cross_entropy_bwd": linear_cross_entropy_bwd_cpu,
    "linear_cross_entropy_scale_grad": linear_cross_entropy_scale_grad_cpu,
    "gemm_act": gemm_act_cpu, "gemm_gated": gemm_gated_cpu, "gemm_dact": gemm_dact_cpu,
    "gemm_dgated": gemm_dgated_cpu, "rotary": rotary_cpu,
    "rotary_qkv_split": rotary_qkv_split_cpu, "rotary_qkv_pack": rotary_qkv_pack_cpu,
    "gemm_rotary": gemm_rotary_cpu,
}


@contextlib.contextmanager
def registered():
    """Registers the stand-ins as the ops' CPU kernels and lets quack_cpp's functions and
    modules accept CPU tensors, for the duration of the block."""
    import quack_cpp._registrar as reg
    import quack_cpp.cross_entropy_ops  # noqa: F401 (defines the cross-entropy ops)
    import quack_cpp.gemm_act_ops  # noqa: F401 (defines the fused GEMM ops)
    import quack_cpp.gemm_ops  # noqa: F401 (defines the GEMM ops)
    import quack_cpp.gemm_rotary_ops  # noqa: F401 (defines the rotary GEMM op)
    import quack_cpp.layernorm_ops  # noqa: F401 (defines the LayerNorm ops)
    import quack_cpp.linear_cross_entropy_ops  # noqa: F401 (defines the linear CE ops)
    import quack_cpp.ops  # noqa: F401 (defines the RMSNorm ops)
    import quack_cpp.rotary_ops  # noqa: F401 (defines the rotary ops)
    import quack_cpp.topk_ops  # noqa: F401 (defines the top-k ops)

    import quack_cpp.softmax_ops  # noqa: F401 (defines the softmax ops)

    lib = torch.library.Library("quack_cpp", "IMPL")
    for name, fn in STAND_INS.items():
        lib.impl(name, fn, "CPU")
    saved = reg.DEVICE_TYPES
    reg.DEVICE_TYPES = saved + ("cpu",)
    try:
        yield
    finally:
        reg.DEVICE_TYPES = saved
        lib._destroy()
