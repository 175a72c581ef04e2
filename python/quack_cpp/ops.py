"""RMSNorm for torch tensors on QuACK-C++ kernels: op descriptions and the functional API.

Layers (top to bottom):

- ``rmsnorm(...)``: differentiable functional API (what most users call);
- ``rmsnorm_fwd`` / ``rmsnorm_bwd``: the ops, registered from one description each by
  ``quack_cpp._registrar`` as the custom ops ``torch.ops.quack_cpp.rmsnorm_fwd`` /
  ``rmsnorm_bwd`` (``torch.library.custom_op``, CUDA only) with fake kernels, so
  ``torch.compile`` (also ``fullgraph=True``) traces them without a graph break, and an
  autograd formula on the forward op, so compiled graphs see the backward; calling them takes
  the eager fast path where it is the same (see the registrar);
- ``quack_cpp._C``: the C++ API (``include/quack/norm.h``), called with data pointers, shapes,
  strides (in elements) and the current CUDA stream of the tensors' device.

Outputs are allocated with torch's caching allocator on the input's device; launches go to
``torch.cuda.current_stream(x.device)``. Nothing here synchronises with the host, so every call
can be captured in a CUDA graph.

Eager fast path (``quack_cpp._registrar``): in plain eager mode on CUDA tensors, ``rmsnorm``
runs the ops' implementations directly (no input requires grad) or through
``rmsnorm_fwd.Function`` (an autograd.Function with the op's setup_context and backward),
skipping the dispatcher; torch.compile, fake/meta/CPU tensors, subclasses, dispatch modes and
functorch transforms take the custom ops. ``QUACK_EAGER_CUSTOM_OP=1`` (any value but '' or '0')
in the environment when ``quack_cpp`` is first imported forces the custom ops everywhere (escape
hatch, A/B timing); at run time, set ``quack_cpp.ops.FORCE_CUSTOM_OP`` (it is the registrar's
flag).

Method: QuACK 0.2.0 (Dao-AILab/quack, ``quack/rmsnorm.py``), with the prenorm residual
gradient of QuACK >= 0.2.3 (0.2.0 added d(residual_out) before the norm's backward, and
returned no residual gradient when ``prenorm=False``; both are fixed here).
"""

import sys
import types
from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from . import _C
from . import _registrar as _reg
from . import _dtensor
from ._registrar import (CUSTOM, EAGER_GRAD, FLOAT_DTYPES, as_rows, check_float, dtype_code,
                         dtype_name, records_grad, register, route, rows_cols, stream,
                         tensor_arg)

__all__ = ["rmsnorm", "rmsnorm_fwd", "rmsnorm_bwd", "dtype_code", "eager_fast_path"]

try:  # the C++ eager path (python/torch_ext.cpp), built where torch is importable
    from . import _torch as _torch_ext

    _torch_ext_error = None
except ImportError as e:  # not built (the Python fast path runs), or built for another torch
    _torch_ext = None
    _torch_ext_error = str(e)

_FLOAT_DTYPES = FLOAT_DTYPES  # quack_cpp.nn reads it


def eager_fast_path(*tensors: Optional[Tensor]) -> bool:
    """Whether a call on these tensors (None: absent) takes the eager fast path (``_C`` called
    without the dispatcher): ``quack_cpp._registrar.route`` is not CUSTOM."""
    return route(*tensors) != CUSTOM


# --------------------------------------------------------------------------------------------
# Forward op
# --------------------------------------------------------------------------------------------


class RMSNormFwd:
    name = "quack_cpp::rmsnorm_fwd"
    sharding = _dtensor.ROW_NORM_FWD  # DTensor placements (quack_cpp._dtensor)
    absent = (None, None, torch.float32)  # placeholder dtypes: residual_out x's, rstd fp32
    # The fast path in C++ where built: outputs + launch + setup_context + backward below.
    eager = _torch_ext.rmsnorm_fwd if _torch_ext is not None else None
    eager_node = "RMSNormFn"

    def signature(
        x: Tensor,
        weight: Optional[Tensor],
        bias: Optional[Tensor],
        residual: Optional[Tensor],
        eps: float,
        weight_offset: float,
        out_dtype: torch.dtype,
        residual_out_dtype: Optional[torch.dtype],
        store_rstd: bool,
    ) -> Tuple[Tensor, Tensor, Tensor]:
        """RMSNorm forward as a functional custom op (``torch.ops.quack_cpp.rmsnorm_fwd``).

        Per row of x (M, N), in fp32 (``quack::rmsnorm_fwd``, QuACK 0.2.0's kernel)::

            h    = x + residual                    (x when residual is None)
            rstd = 1 / sqrt(mean_j(h_j^2) + eps)
            out  = h * rstd * (weight + weight_offset) + bias
                   (weight None: the factor is 1; bias None: 0)

        Args:
            x: (M, N), float32/float16/bfloat16, CUDA, any non-negative strides.
            weight, bias: (N,) or None; x's dtype or float32.
            residual: (M, N) or None; x's dtype or float32.
            eps: added to the mean square, inside the square root.
            weight_offset: added to the weight (1.0: Gemma's zero-centred weights).
            out_dtype: dtype of ``out`` (x's dtype or float32).
            residual_out_dtype: dtype of ``residual_out`` = h; None: not stored.
            store_rstd: store rstd (needed by the backward).

        Returns:
            ``(out, residual_out, rstd)``: out (M, N) contiguous; residual_out (M, N) or an empty
            placeholder of shape (0,) when not stored; rstd (M,) float32 or a (0,) placeholder.

        Raises:
            ValueError: a bad argument (shape, dtype, device, stride, eps < 0, a non-finite
                weight_offset); the message names the argument, what was expected and what came.
            RuntimeError: a CUDA error (the CUDA text is kept).
            NotImplementedError: x is not a CUDA tensor (from the dispatcher).
        """

    def outputs(x, weight, bias, residual, eps, weight_offset, out_dtype, residual_out_dtype,
                store_rstd):
        # Sizes as separate ints: torch parses a size tuple ~0.3 µs slower, a torch.Size ~0.8.
        M, N = rows_cols(x, "rmsnorm_fwd")
        return (
            x.new_empty(M, N, dtype=out_dtype),
            x.new_empty(M, N, dtype=residual_out_dtype)
            if residual_out_dtype is not None else None,
            x.new_empty(M, dtype=torch.float32) if store_rstd else None,
        )

    def launch(outs, x, weight, bias, residual, eps, weight_offset, out_dtype, residual_out_dtype,
               store_rstd):
        fn = "rmsnorm_fwd"
        out, residual_out, rstd = outs
        _C.rmsnorm_fwd(
            tensor_arg(x, fn, "x"),
            tensor_arg(weight, fn, "weight"),
            tensor_arg(bias, fn, "bias"),
            tensor_arg(residual, fn, "residual"),
            tensor_arg(out, fn, "out"),
            tensor_arg(residual_out, fn, "residual_out"),
            tensor_arg(rstd, fn, "rstd"),
            float(eps),
            stream(x),
            float(weight_offset),
        )

    def setup_context(ctx, inputs, output):
        _out, residual_out, rstd = output
        norm_setup_context(ctx, inputs, residual_out, (rstd,))

    def backward(ctx, dout, dresidual_out, _drstd):
        """Gradients only where ctx.needs_input_grad says; rmsnorm_bwd takes the fast path
        again in eager mode, the custom op under torch.compile."""
        h, weight, rstd = ctx.saved_tensors
        if not ctx.can_backward:
            raise RuntimeError(
                "quack_cpp::rmsnorm_fwd backward: the forward ran with store_rstd=False, or "
                "with a residual but residual_out_dtype=None; call it with store_rstd=True and "
                "a residual_out_dtype (quack_cpp.rmsnorm does this when a gradient is needed)"
            )
        return norm_grads(ctx, rmsnorm_bwd, h, weight, (rstd,), dout, dresidual_out)


def norm_prologue(name, x, weight, bias, residual, out_dtype, residual_dtype, prenorm):
    """The checks and choices of a norm's public call (rmsnorm, layernorm) before its forward
    op runs: (path, need_grad, x.dim(), residual_out's dtype or None). residual_out is stored
    when returned (prenorm) or when the backward needs h, and, without a residual, only for a
    prenorm call whose residual_dtype differs from x's. Raises ValueError naming the argument
    (``name`` leads the message)."""
    path = route(x, weight, bias, residual)
    if path == CUSTOM:  # on the fast path these hold: plain CUDA tensors of a float dtype
        check_float(name, x, "x")
        check_float(name, weight, "weight")
        check_float(name, bias, "bias")
        check_float(name, residual, "residual")
        need_grad = records_grad(x, weight, bias, residual)
    else:
        need_grad = path == EAGER_GRAD
    nd = x.dim()
    if nd == 0:
        raise ValueError(f"{name}: x is a 0-dimensional tensor, expected (..., N)")
    if residual is not None and residual.shape != x.shape:
        raise ValueError(
            f"{name}: residual has shape {tuple(residual.shape)}, expected x's shape "
            f"{tuple(x.shape)}"
        )
    if out_dtype is not None and out_dtype not in FLOAT_DTYPES:
        raise ValueError(f"{name}: out_dtype is {dtype_name(out_dtype)}, expected float32, "
                         "float16 or bfloat16")
    if residual_dtype is not None and residual_dtype not in FLOAT_DTYPES:
        raise ValueError(f"{name}: residual_dtype is {dtype_name(residual_dtype)}, expected "
                         "float32, float16 or bfloat16")
    if residual is not None:
        res_out_dtype = ((residual_dtype if residual_dtype is not None else residual.dtype)
                         if (prenorm or need_grad) else None)
    elif prenorm and residual_dtype is not None and residual_dtype != x.dtype:
        res_out_dtype = residual_dtype
    else:
        res_out_dtype = None
    return path, need_grad, nd, res_out_dtype


def norm_setup_context(ctx, inputs, residual_out, stats):
    """The context of a norm forward (RMSNorm's, LayerNorm's) that norm_grads reads. inputs:
    the forward op's (x, weight, bias, residual, eps, weight_offset, out_dtype,
    residual_out_dtype, store_stats); stats: (rstd,) or (mean, rstd), None when not stored.
    Saves (h, weight, *stats), h the norm's input (residual_out with a residual, else x). Unused
    outputs (residual_out without prenorm, the statistics) get None, not materialised zeros; the
    statistics are marked non-differentiable (as QuACK's and torch's)."""
    (x, weight, bias, residual, _eps, weight_offset, out_dtype, residual_out_dtype,
     store_stats) = inputs
    ctx.set_materialize_grads(False)
    ctx.x_dtype = x.dtype
    ctx.out_dtype = out_dtype
    ctx.weight_offset = weight_offset
    ctx.residual_dtype = residual.dtype if residual is not None else None
    ctx.bias_dtype = bias.dtype if bias is not None else None
    ctx.residual_out_stored = residual_out_dtype is not None
    ctx.can_backward = store_stats and (residual is None or residual_out_dtype is not None)
    h = residual_out if residual is not None else x
    ctx.save_for_backward(h, weight, *stats)
    stored = [t for t in stats if t is not None]
    if stored:
        ctx.mark_non_differentiable(*stored)


def norm_grads(ctx, bwd, h, weight, stats, dout, dresidual_out):
    """The backward of a norm forward (RMSNorm's, LayerNorm's): (dx, dweight, dbias,
    dresidual, None x 5) where ctx.needs_input_grad says, from ``bwd(h, weight, dout, *stats,
    dresidual_out, weight_offset, dx_dtype, dresidual_dtype, need_dweight, dbias_dtype)``;
    stats: (rstd,) or (mean, rstd). A dout of None (only residual_out was used) is a stride-0
    zero view; d(residual) = dh, a separate output only where its dtype differs from x's."""
    need_x, need_w, need_b, need_r = ctx.needs_input_grad[:4]
    if dout is None:
        dout = torch.zeros((), dtype=ctx.out_dtype, device=h.device).expand(h.shape)
    if not ctx.residual_out_stored:
        dresidual_out = None
    separate_dres = need_r and ctx.residual_dtype != ctx.x_dtype
    dx, dres, dw, db = bwd(h, weight, dout, *stats, dresidual_out, ctx.weight_offset, ctx.x_dtype,
                           ctx.residual_dtype if separate_dres else None,
                           bool(need_w and weight is not None),
                           ctx.bias_dtype if need_b else None)
    dresidual = (dres if separate_dres else dx) if need_r else None
    return (dx if need_x else None, dw if need_w else None, db if need_b else None,
            dresidual, None, None, None, None, None)


# --------------------------------------------------------------------------------------------
# Backward op
# --------------------------------------------------------------------------------------------


class RMSNormBwd:
    name = "quack_cpp::rmsnorm_bwd"
    sharding = _dtensor.ROW_NORM_BWD  # DTensor placements (quack_cpp._dtensor)

    def signature(
        x: Tensor,
        weight: Optional[Tensor],
        dout: Tensor,
        rstd: Tensor,
        dresidual_out: Optional[Tensor],
        weight_offset: float,
        dx_dtype: torch.dtype,
        dresidual_dtype: Optional[torch.dtype],
        need_dweight: bool,
        dbias_dtype: Optional[torch.dtype],
    ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """RMSNorm backward as a functional custom op (``torch.ops.quack_cpp.rmsnorm_bwd``).

        ``x`` is the norm's input h (residual_out when the forward had a residual), ``rstd`` the
        forward's. Per row, fp32 (``quack::rmsnorm_bwd``)::

            xhat = x * rstd;  g = dout * (weight + weight_offset)   (weight None: g = dout)
            dh   = rstd * (g - xhat * mean_j(g_j * xhat_j)) + dresidual_out
            dx   = dresidual = dh
            dweight = sum_rows dout * xhat;  dbias = sum_rows dout

        dweight and dbias are accumulated in fp32 in a fixed order (identical bits run to run) and
        stored in weight's dtype / ``dbias_dtype``. The workspace (fp32 partial sums) is allocated
        here with torch (uint8, size from ``_C.rmsnorm_bwd_workspace_size``).

        Args:
            x: (M, N) float32/float16/bfloat16, CUDA, any non-negative strides.
            weight: (N,) or None.
            dout: (M, N), any strides (0 too, as from ``y.sum().backward()``).
            rstd: (M,) float32.
            dresidual_out: (M, N) or None: the gradient of residual_out, added to dh.
            weight_offset: the forward's (dweight does not depend on it).
            dx_dtype: dtype of dx.
            dresidual_dtype: dtype of a second copy of dh; None: not produced (placeholder).
            need_dweight: produce dweight (needs weight).
            dbias_dtype: dtype of dbias; None: not produced (placeholder).

        Returns:
            ``(dx, dresidual, dweight, dbias)``: dx (M, N) contiguous; the others their shapes or
            (0,) placeholders when not asked for.

        Raises:
            ValueError: a bad argument (the message names it). RuntimeError: a CUDA error.
        """

    def outputs(x, weight, dout, rstd, dresidual_out, weight_offset, dx_dtype, dresidual_dtype,
                need_dweight, dbias_dtype):
        fn = "rmsnorm_bwd"
        M, N = rows_cols(x, fn)
        if need_dweight and weight is None:
            raise ValueError(f"{fn}: need_dweight is True but weight is None, expected a weight")
        return (
            x.new_empty(M, N, dtype=dx_dtype),
            x.new_empty(M, N, dtype=dresidual_dtype) if dresidual_dtype is not None else None,
            x.new_empty(N, dtype=weight.dtype) if need_dweight else None,
            x.new_empty(N, dtype=dbias_dtype) if dbias_dtype is not None else None,
        )

    def launch(outs, x, weight, dout, rstd, dresidual_out, weight_offset, dx_dtype,
               dresidual_dtype, need_dweight, dbias_dtype):
        fn = "rmsnorm_bwd"
        dx, dres, dw, db = outs
        args = (
            tensor_arg(x, fn, "x"),
            tensor_arg(weight, fn, "weight"),
            tensor_arg(dout, fn, "dout"),
            tensor_arg(rstd, fn, "rstd"),
            tensor_arg(dresidual_out, fn, "dresidual_out"),
            tensor_arg(dx, fn, "dx"),
            tensor_arg(dres, fn, "dresidual"),
            tensor_arg(dw, fn, "dweight"),
            tensor_arg(db, fn, "dbias"),
        )
        # The workspace (fp32 partial sums of dweight/dbias), allocated with torch.
        offset = float(weight_offset)
        ws_bytes = _C.rmsnorm_bwd_workspace_size(*args, offset)
        workspace = x.new_empty(ws_bytes, dtype=torch.uint8)
        _C.rmsnorm_bwd(*args, workspace.data_ptr(), ws_bytes, stream(x), offset)


rmsnorm_bwd = register(RMSNormBwd)
rmsnorm_fwd = register(RMSNormFwd)


# --------------------------------------------------------------------------------------------
# Functional API
# --------------------------------------------------------------------------------------------


def rmsnorm(
    x: Tensor,
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    residual: Optional[Tensor] = None,
    eps: float = 1e-6,
    prenorm: bool = False,
    residual_dtype: Optional[torch.dtype] = None,
    out_dtype: Optional[torch.dtype] = None,
    weight_offset: float = 0.0,
) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """RMSNorm over the last dimension, with optional fused residual add. Differentiable.

    For each row of x (..., N), in fp32 (QuACK 0.2.0's method, C++ API ``quack::rmsnorm_fwd``
    / ``quack::rmsnorm_bwd``)::

        h            = x + residual                (x when residual is None)
        rstd         = 1 / sqrt(mean_j(h_j^2) + eps)
        out          = h * rstd * (weight + weight_offset) + bias
                       (weight None: the factor is 1; bias None: 0)
        residual_out = h                           (returned when prenorm=True)

    Backward (through autograd; ``torch.compile`` sees it through the custom op's registered
    formula)::

        g = the norm's backward of d(out);  dh = g + d(residual_out)   (prenorm)
        d(x) = d(residual) = dh             (also with prenorm=False)
        d(weight) = sum_rows d(out) * h * rstd;  d(bias) = sum_rows d(out)

    d(weight) and d(bias) are accumulated in fp32 in a fixed order (bitwise reproducible) and
    returned in the parameter's dtype.

    Args:
        x: (..., N) float32, float16 or bfloat16 on a CUDA device; any strides (the leading
            dims are flattened with a view where possible, else a copy).
        weight: (N,) in x's dtype or float32, or None.
        bias: (N,) in x's dtype or float32, or None.
        residual: same shape as x, in x's dtype or float32, or None.
        eps: added to the mean square, inside the square root (default 1e-6, as QuACK).
        prenorm: also return residual_out = h (the pre-norm residual stream).
        residual_dtype: dtype of residual_out. Default: the residual's dtype; with no residual,
            residual_out is x itself unless residual_dtype differs from x's dtype, in which
            case it is a cast copy of x (e.g. an fp32 residual stream from bf16 activations).
        out_dtype: dtype of out (x's dtype or float32). Default: x's dtype.
        weight_offset: added to the weight (1.0 for Gemma's zero-centred weights; QuACK >= 0.6);
            d(weight) does not depend on it. Not used without a weight.

    Returns:
        out (same shape as x, contiguous), or ``(out, residual_out)`` when prenorm=True.

    Raises:
        ValueError: a tensor not on a CUDA device, a dtype other than float32/float16/bfloat16,
            a shape mismatch (e.g. ``rmsnorm_fwd: weight has shape (4095,) float32, expected
            (4096,)``), tensors on different devices, eps < 0, a non-finite weight_offset; the
            message names the argument.
        RuntimeError: a CUDA error.

    Runs on ``torch.cuda.current_stream(x.device)`` (x may live on a non-current device);
    no host synchronisation, so it can be captured in a CUDA graph. Under autocast it runs in
    the input's dtype, as ``torch.nn.RMSNorm`` does.

    Path: in plain eager mode on CUDA tensors, the eager fast path (``_C`` called directly,
    through ``rmsnorm_fwd.Function`` when a gradient is needed; see ``quack_cpp._registrar``);
    otherwise (torch.compile, fake tensors, CPU stand-ins, ``QUACK_EAGER_CUSTOM_OP=1``) the
    custom op ``quack_cpp::rmsnorm_fwd`` with its registered autograd. Both give the same
    results.
    """
    path, need_grad, nd, res_out_dtype = norm_prologue(
        "rmsnorm", x, weight, bias, residual, out_dtype, residual_dtype, prenorm)
    out, res_out, _rstd = rmsnorm_fwd.run(
        path,
        x if nd == 2 else as_rows(x),
        weight,
        bias,
        residual if residual is None or nd == 2 else as_rows(residual),
        float(eps),
        float(weight_offset),
        out_dtype if out_dtype is not None else x.dtype,
        res_out_dtype,
        need_grad,
    )
    if nd != 2:
        out = out.view(*x.shape)  # unpacked: view(torch.Size) parses ~1 µs slower
    if not prenorm:
        return out
    if res_out_dtype is None:
        return out, x
    return out, (res_out if nd == 2 else res_out.view(*x.shape))


# --------------------------------------------------------------------------------------------
# quack_cpp.ops.FORCE_CUSTOM_OP: the registrar's flag, readable and settable here
# --------------------------------------------------------------------------------------------


class _OpsModule(types.ModuleType):
    @property
    def FORCE_CUSTOM_OP(self) -> bool:
        """True: every call takes the custom ops (``quack_cpp._registrar.FORCE_CUSTOM_OP``)."""
        return _reg.FORCE_CUSTOM_OP

    @FORCE_CUSTOM_OP.setter
    def FORCE_CUSTOM_OP(self, value) -> None:
        _reg.FORCE_CUSTOM_OP = bool(value)


sys.modules[__name__].__class__ = _OpsModule
