"""CPU stand-in kernels for the custom ops quack_cpp::rmsnorm_fwd / rmsnorm_bwd, written in
torch after the C++ API's contract (include/quack/norm.h: fp32 math, same outputs and
placeholders). They let the torch layer and the test code run without a GPU:
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


@contextlib.contextmanager
def registered():
    """Registers the stand-ins as the ops' CPU kernels and lets quack_cpp.rmsnorm accept CPU
    tensors, for the duration of the block."""
    import quack_cpp.ops as ops

    lib = torch.library.Library("quack_cpp", "IMPL")
    lib.impl("rmsnorm_fwd", rmsnorm_fwd_cpu, "CPU")
    lib.impl("rmsnorm_bwd", rmsnorm_bwd_cpu, "CPU")
    saved = ops._DEVICE_TYPES
    ops._DEVICE_TYPES = saved + ("cpu",)
    try:
        yield
    finally:
        ops._DEVICE_TYPES = saved
        lib._destroy()
