"""CPU stand-in kernels for the custom ops quack_cpp::rmsnorm_fwd / rmsnorm_bwd,
quack_cpp::layernorm_fwd / layernorm_bwd, quack_cpp::gemm / gemm_add_inplace,
quack_cpp::gemm_act / gemm_dact / gemm_gated / gemm_dgated and
quack_cpp::topk_fwd / topk_bwd, written in torch after the C++ API's contract
(include/quack/norm.h, include/quack/gemm.h, include/quack/topk.h: fp32 math, same outputs and
placeholders; the GEMM stand-in accepts every layout, it does not mimic can_implement). They
let the torch layer and the test code run without a GPU:
test_plumbing_cpu.py uses them, and QUACK_TEST_DEVICE=cpu runs the GPU test files against
them (a self-check of the tests, not of the kernels). Needs torch."""

import contextlib

import torch


def _empty(x, dtype=None):
    return x.new_empty((0,), dtype=dtype or x.dtype)


def rmsnorm_fwd_cpu(x, weight, bias, residual, eps, out_dtype, residual_out_dtype, store_rstd):
    h = x.float() + (residual.float() if residual is not None else 0)
    rstd = torch.rsqrt(h.pow(2).mean(-1) + eps)
    out = h * rstd[:, None]
    if weight is not None:
        out = out * weight.float()
    if bias is not None:
        out = out + bias.float()
    res_out = h.to(residual_out_dtype) if residual_out_dtype is not None else _empty(x)
    return out.to(out_dtype), res_out, rstd if store_rstd else _empty(x, torch.float32)


def rmsnorm_bwd_cpu(x, weight, dout, rstd, dresidual_out, dx_dtype, dresidual_dtype,
                    need_dweight, dbias_dtype):
    xhat = x.float() * rstd[:, None]
    dy = dout.float()
    g = dy * weight.float() if weight is not None else dy
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


def gemm_cpu(A, B, C, alpha, beta, out_dtype, tuned=False, alpha_t=None, beta_t=None,
             bias=None):
    from quack_cpp.gemm_ops import _new_out

    beta_t = beta_t if C is not None else None
    D = _new_out(A, B, C, 1.0 if beta_t is not None else (beta if C is not None else 0.0),
                 out_dtype)  # the real op's layout
    alpha, beta = _device_scalars(alpha, beta, alpha_t, beta_t)
    acc = _gemm_f32(A, B, C, alpha, beta)
    if bias is not None:
        acc = acc + (bias.float() if bias.dim() == 1 else bias.float()[:, None, :])
    D.copy_(acc)
    return D


def _preact_f32(A, B, C, bias, alpha, beta):
    acc = _gemm_f32(A, B, C, alpha, beta)
    if bias is not None:
        acc = acc + (bias.float() if bias.dim() == 1 else bias.float()[:, None, :])
    return acc


def gemm_act_cpu(A, B, C, bias, activation, alpha, beta, store_preact, out_dtype, postact_dtype,
                 tuned=False):
    from quack_cpp.gemm_act_ops import GemmAct, act_torch

    preact, postact = GemmAct.outputs(A, B, C, bias, activation, alpha, beta, store_preact,
                                      out_dtype, postact_dtype)
    pre = _preact_f32(A, B, C, bias, alpha, beta)
    postact.copy_(act_torch(activation, pre))
    if preact is None:
        return A.new_empty((0,)), postact
    preact.copy_(pre)
    return preact, postact


def gemm_gated_cpu(A, B, C, bias, activation, alpha, beta, store_preact, out_dtype,
                   postact_dtype, concat_layout=False, tuned=False):
    from quack_cpp.gemm_act_ops import GemmGated, gated_torch

    preact, postact = GemmGated.outputs(A, B, C, bias, activation, alpha, beta, store_preact,
                                        out_dtype, postact_dtype)
    if concat_layout:  # b's columns [gate | up], bias [b_gate; b_up]: as the interleaved ones
        def inter(t):
            h = t.shape[-1] // 2
            return torch.stack((t[..., :h], t[..., h:]), dim=-1).flatten(-2)
        B = inter(B)
        bias = inter(bias) if bias is not None else None
    pre = _preact_f32(A, B, C, bias, alpha, beta)
    postact.copy_(gated_torch(activation, pre[..., 0::2], pre[..., 1::2]))
    if preact is None:
        return A.new_empty((0,)), postact
    preact.copy_(pre)
    return preact, postact


def gemm_dact_cpu(A, B, preact, activation, out_dtype, postact_dtype, store_postact=True,
                  tuned=False):
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
                    tuned=False):
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


def gemm_add_inplace_cpu(A, B, out, alpha, beta, tuned=False, alpha_t=None, beta_t=None):
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


@contextlib.contextmanager
def registered():
    """Registers the stand-ins as the ops' CPU kernels and lets quack_cpp's functions and
    modules accept CPU tensors, for the duration of the block."""
    import quack_cpp._registrar as reg
    import quack_cpp.gemm_act_ops  # noqa: F401 (defines the fused GEMM ops)
    import quack_cpp.gemm_ops  # noqa: F401 (defines the GEMM ops)
    import quack_cpp.layernorm_ops  # noqa: F401 (defines the LayerNorm ops)
    import quack_cpp.ops  # noqa: F401 (defines the RMSNorm ops)
    import quack_cpp.topk_ops  # noqa: F401 (defines the top-k ops)

    lib = torch.library.Library("quack_cpp", "IMPL")
    lib.impl("rmsnorm_fwd", rmsnorm_fwd_cpu, "CPU")
    lib.impl("rmsnorm_bwd", rmsnorm_bwd_cpu, "CPU")
    lib.impl("layernorm_fwd", layernorm_fwd_cpu, "CPU")
    lib.impl("layernorm_bwd", layernorm_bwd_cpu, "CPU")
    lib.impl("gemm", gemm_cpu, "CPU")
    lib.impl("gemm_add_inplace", gemm_add_inplace_cpu, "CPU")
    lib.impl("gemm_act", gemm_act_cpu, "CPU")
    lib.impl("gemm_gated", gemm_gated_cpu, "CPU")
    lib.impl("gemm_dact", gemm_dact_cpu, "CPU")
    lib.impl("gemm_dgated", gemm_dgated_cpu, "CPU")
    lib.impl("topk_fwd", topk_fwd_cpu, "CPU")
    lib.impl("topk_bwd", topk_bwd_cpu, "CPU")
    saved = reg.DEVICE_TYPES
    reg.DEVICE_TYPES = saved + ("cpu",)
    try:
        yield
    finally:
        reg.DEVICE_TYPES = saved
        lib._destroy()
