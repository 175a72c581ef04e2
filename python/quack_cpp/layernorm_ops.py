"""LayerNorm for torch tensors on QuACK-C++ kernels: op descriptions and the functional API.

Layers (top to bottom), as ``quack_cpp.ops`` (RMSNorm):

- ``layernorm(...)``: differentiable functional API;
- ``layernorm_fwd`` / ``layernorm_bwd``: the ops, registered from one description each by
  ``quack_cpp._registrar`` as the custom ops ``torch.ops.quack_cpp.layernorm_fwd`` /
  ``layernorm_bwd`` (fake kernels: ``torch.compile(fullgraph=True)`` and CUDA graphs; an
  autograd formula on the forward op), taking the eager fast path in plain eager mode;
- ``quack_cpp._C.layernorm_fwd`` / ``layernorm_bwd`` / ``layernorm_bwd_workspace_size``: the
  C++ API (``include/quack/norm.h``).

Outputs and the backward's workspace are allocated with torch's caching allocator on x's
device; launches go to the current stream of that device; nothing synchronises with the host.

Method: QuACK (``quack/layernorm.py``: mean and variance from on-chip rows, fp32; the backward
and ``weight_offset`` of its later releases) on the row skeleton (docs/architecture.md,
"LayerNorm"); statistics from per-thread (count, sum, M2) combined by two sum stages, never
E[h²] − E[h]².
"""

from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from . import _C
from .ops import _torch_ext  # the C++ fast path (python/torch_ext.cpp), where built
from .ops import norm_grads, norm_prologue, norm_setup_context
from . import _dtensor
from ._registrar import as_rows, register, rows_cols, stream, tensor_arg

__all__ = ["layernorm", "layernorm_fwd", "layernorm_bwd"]


# --------------------------------------------------------------------------------------------
# Forward op
# --------------------------------------------------------------------------------------------


class LayerNormFwd:
    name = "quack_cpp::layernorm_fwd"
    sharding = _dtensor.ROW_NORM_FWD  # DTensor placements (quack_cpp._dtensor)
    absent = (None, None, torch.float32, torch.float32)  # residual_out x's; mean, rstd fp32
    # The fast path in C++ where built: outputs + launch + setup_context + backward below.
    eager = getattr(_torch_ext, "layernorm_fwd", None) if _torch_ext is not None else None
    eager_node = "LayerNormFn"

    def signature(
        x: Tensor,
        weight: Optional[Tensor],
        bias: Optional[Tensor],
        residual: Optional[Tensor],
        eps: float,
        weight_offset: float,
        out_dtype: torch.dtype,
        residual_out_dtype: Optional[torch.dtype],
        store_stats: bool,
    ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """LayerNorm forward as a functional custom op (``torch.ops.quack_cpp.layernorm_fwd``).

        Per row of x (M, N), in fp32 (``quack::layernorm_fwd``)::

            h    = x + residual                          (x when residual is None)
            mean = mean_j h_j
            rstd = 1 / sqrt(mean_j (h_j - mean)^2 + eps) (biased variance, stable)
            out  = (h - mean) * rstd * (weight + weight_offset) + bias
                   (weight None: the factor is 1; bias None: 0)

        Args:
            x: (M, N), float32/float16/bfloat16, CUDA, any non-negative strides.
            weight, bias: (N,) or None; any of the three float dtypes.
            residual: (M, N) or None.
            eps: added to the variance, inside the square root.
            weight_offset: added to the weight (1.0: Gemma's zero-centred weights).
            out_dtype: dtype of ``out``.
            residual_out_dtype: dtype of ``residual_out`` = h; None: not stored.
            store_stats: store mean and rstd (the backward needs them).

        Returns:
            ``(out, residual_out, mean, rstd)``: out (M, N) contiguous; residual_out (M, N);
            mean and rstd (M,) float32; absent ones are empty (0,) placeholders.

        Raises:
            ValueError: a bad argument (the message names it, what was expected and what came).
            RuntimeError: a CUDA error (the CUDA text is kept).
            NotImplementedError: x is not a CUDA tensor (from the dispatcher).
        """

    def outputs(x, weight, bias, residual, eps, weight_offset, out_dtype, residual_out_dtype,
                store_stats):
        M, N = rows_cols(x, "layernorm_fwd")
        return (
            x.new_empty(M, N, dtype=out_dtype),
            x.new_empty(M, N, dtype=residual_out_dtype)
            if residual_out_dtype is not None else None,
            x.new_empty(M, dtype=torch.float32) if store_stats else None,
            x.new_empty(M, dtype=torch.float32) if store_stats else None,
        )

    def launch(outs, x, weight, bias, residual, eps, weight_offset, out_dtype, residual_out_dtype,
               store_stats):
        fn = "layernorm_fwd"
        out, residual_out, mean, rstd = outs
        _C.layernorm_fwd(
            tensor_arg(x, fn, "x"),
            tensor_arg(weight, fn, "weight"),
            tensor_arg(bias, fn, "bias"),
            tensor_arg(residual, fn, "residual"),
            tensor_arg(out, fn, "out"),
            tensor_arg(residual_out, fn, "residual_out"),
            tensor_arg(mean, fn, "mean"),
            tensor_arg(rstd, fn, "rstd"),
            float(eps),
            float(weight_offset),
            stream(x),
        )

    def setup_context(ctx, inputs, output):
        _out, residual_out, mean, rstd = output
        norm_setup_context(ctx, inputs, residual_out, (mean, rstd))

    def backward(ctx, dout, dresidual_out, _dmean, _drstd):
        """Gradients where ctx.needs_input_grad says (mean and rstd are non-differentiable).
        layernorm_bwd takes the fast path again in eager mode, the custom op when compiled."""
        h, weight, mean, rstd = ctx.saved_tensors
        if not ctx.can_backward:
            raise RuntimeError(
                "quack_cpp::layernorm_fwd backward: the forward ran with store_stats=False, or "
                "with a residual but residual_out_dtype=None; call it with store_stats=True and "
                "a residual_out_dtype (quack_cpp.layernorm does this when a gradient is needed)"
            )
        return norm_grads(ctx, layernorm_bwd, h, weight, (mean, rstd), dout, dresidual_out)


# --------------------------------------------------------------------------------------------
# Backward op
# --------------------------------------------------------------------------------------------


class LayerNormBwd:
    name = "quack_cpp::layernorm_bwd"
    sharding = _dtensor.ROW_NORM_BWD  # DTensor placements (quack_cpp._dtensor)

    def signature(
        x: Tensor,
        weight: Optional[Tensor],
        dout: Tensor,
        mean: Tensor,
        rstd: Tensor,
        dresidual_out: Optional[Tensor],
        weight_offset: float,
        dx_dtype: torch.dtype,
        dresidual_dtype: Optional[torch.dtype],
        need_dweight: bool,
        dbias_dtype: Optional[torch.dtype],
    ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """LayerNorm backward as a functional custom op (``torch.ops.quack_cpp.layernorm_bwd``).

        ``x`` is the norm's input h (residual_out when the forward had a residual), ``mean``
        and ``rstd`` the forward's. Per row, fp32 (``quack::layernorm_bwd``)::

            xhat = (x - mean) * rstd;  g = dout * (weight + weight_offset)
            dh   = rstd * (g - mean_j g_j - xhat * mean_j(g_j * xhat_j)) + dresidual_out
            dx   = dresidual = dh
            dweight = sum_rows dout * xhat;  dbias = sum_rows dout

        dweight and dbias are accumulated in fp32 in a fixed order (identical bits run to run)
        and stored in weight's dtype / ``dbias_dtype``. The workspace (fp32 partial sums) is
        allocated here with torch (uint8, size from ``_C.layernorm_bwd_workspace_size``).

        Args:
            x: (M, N) float32/float16/bfloat16, CUDA, any non-negative strides.
            weight: (N,) or None.
            dout: (M, N), any strides (0 too, as from ``y.sum().backward()``).
            mean, rstd: (M,) float32.
            dresidual_out: (M, N) or None: the gradient of residual_out, added to dh.
            weight_offset: the forward's.
            dx_dtype: dtype of dx.
            dresidual_dtype: dtype of a second copy of dh; None: not produced (placeholder).
            need_dweight: produce dweight (needs weight).
            dbias_dtype: dtype of dbias; None: not produced (placeholder).

        Returns:
            ``(dx, dresidual, dweight, dbias)``: dx (M, N) contiguous; the others their shapes
            or (0,) placeholders when not asked for.

        Raises:
            ValueError: a bad argument (the message names it). RuntimeError: a CUDA error.
        """

    def outputs(x, weight, dout, mean, rstd, dresidual_out, weight_offset, dx_dtype,
                dresidual_dtype, need_dweight, dbias_dtype):
        fn = "layernorm_bwd"
        M, N = rows_cols(x, fn)
        if need_dweight and weight is None:
            raise ValueError(f"{fn}: need_dweight is True but weight is None, expected a weight")
        return (
            x.new_empty(M, N, dtype=dx_dtype),
            x.new_empty(M, N, dtype=dresidual_dtype) if dresidual_dtype is not None else None,
            x.new_empty(N, dtype=weight.dtype) if need_dweight else None,
            x.new_empty(N, dtype=dbias_dtype) if dbias_dtype is not None else None,
        )

    def launch(outs, x, weight, dout, mean, rstd, dresidual_out, weight_offset, dx_dtype,
               dresidual_dtype, need_dweight, dbias_dtype):
        fn = "layernorm_bwd"
        dx, dres, dw, db = outs
        args = (
            tensor_arg(x, fn, "x"),
            tensor_arg(weight, fn, "weight"),
            tensor_arg(dout, fn, "dout"),
            tensor_arg(mean, fn, "mean"),
            tensor_arg(rstd, fn, "rstd"),
            tensor_arg(dresidual_out, fn, "dresidual_out"),
            tensor_arg(dx, fn, "dx"),
            tensor_arg(dres, fn, "dresidual"),
            tensor_arg(dw, fn, "dweight"),
            tensor_arg(db, fn, "dbias"),
            float(weight_offset),
        )
        # The workspace (fp32 partial sums of dweight/dbias), allocated with torch.
        ws_bytes = _C.layernorm_bwd_workspace_size(*args)
        workspace = x.new_empty(ws_bytes, dtype=torch.uint8)
        _C.layernorm_bwd(*args, workspace.data_ptr(), ws_bytes, stream(x))


layernorm_bwd = register(LayerNormBwd)
layernorm_fwd = register(LayerNormFwd)


# --------------------------------------------------------------------------------------------
# Functional API
# --------------------------------------------------------------------------------------------


_autocast_enabled = torch.is_autocast_enabled  # no argument: CUDA's autocast


def _autocast_fp32(x: Tensor) -> bool:
    """Whether autocast is on for x's device type, CUDA or CPU (torch runs layer_norm in
    float32 there). Without building x.device (~1 µs less per call)."""
    if x.is_cuda:
        return _autocast_enabled()
    return x.is_cpu and _autocast_enabled("cpu")


def layernorm(
    x: Tensor,
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    residual: Optional[Tensor] = None,
    eps: float = 1e-5,
    prenorm: bool = False,
    residual_dtype: Optional[torch.dtype] = None,
    out_dtype: Optional[torch.dtype] = None,
    weight_offset: float = 0.0,
    return_mean: bool = False,
    return_rstd: bool = False,
) -> Union[Tensor, Tuple[Tensor, ...]]:
    """LayerNorm over the last dimension, with optional fused residual add. Differentiable.

    For each row of x (..., N), in fp32 (C++ API ``quack::layernorm_fwd`` /
    ``quack::layernorm_bwd``)::

        h            = x + residual                          (x when residual is None)
        mean         = mean_j h_j
        rstd         = 1 / sqrt(mean_j (h_j - mean)^2 + eps) (biased variance, as torch)
        out          = (h - mean) * rstd * (weight + weight_offset) + bias
                       (weight None: the factor is 1; bias None: 0)
        residual_out = h                                     (returned when prenorm=True)

    The statistics come from each thread's own elements (count, sum, squared deviations about
    its own mean) combined exactly over the row; never E[h²] − E[h]².

    Backward (through autograd; ``torch.compile`` sees the custom op's formula)::

        xhat = (h - mean) * rstd;  g = d(out) * (weight + weight_offset)
        dh = rstd * (g - mean(g) - xhat * mean(g * xhat)) + d(residual_out)   (prenorm)
        d(x) = d(residual) = dh;  d(weight) = sum_rows d(out) * xhat;  d(bias) = sum_rows d(out)

    d(weight) and d(bias) are accumulated in fp32 in a fixed order (bitwise reproducible) and
    returned in the parameter's dtype. mean and rstd, when returned, are non-differentiable.

    Args:
        x: (..., N) float32, float16 or bfloat16 on a CUDA device; any strides (leading dims
            flattened with a view where possible, else a copy).
        weight, bias: (N,) in any of the three float dtypes, or None.
        residual: same shape as x, or None.
        eps: added to the variance inside the square root (default 1e-5, as torch).
        prenorm: also return residual_out = h (the pre-norm residual stream).
        residual_dtype: dtype of residual_out. Default: the residual's dtype; with no residual,
            residual_out is x itself unless residual_dtype differs from x's dtype (a cast copy).
        out_dtype: dtype of out. Default: x's dtype.
        weight_offset: added to the weight (1.0 for Gemma's zero-centred weights); d(weight)
            does not depend on it. Ignored without a weight.
        return_mean, return_rstd: also return mean and rstd ((...,) float32, the leading shape
            of x).

    Returns:
        out (x's shape, contiguous), or a tuple ``(out[, residual_out][, mean][, rstd])`` in that
        order when prenorm, return_mean or return_rstd ask for more.

    Raises:
        ValueError: a tensor not on a CUDA device, a dtype other than float32/float16/bfloat16,
            a shape mismatch (e.g. ``layernorm_fwd: weight has shape (4095,) float32, expected
            (4096,)``), tensors on different devices, eps < 0, a non-finite weight_offset; the
            message names the argument.
        RuntimeError: a CUDA error.

    Autocast: as ``torch.nn.functional.layer_norm`` (float32 in autocast's lists), inside an
    enabled autocast region x, weight, bias and residual are cast to float32 and out is
    float32 (out_dtype, when given, still wins); residual_out, in the residual's dtype unless
    residual_dtype says otherwise, is then float32 too (with prenorm and no residual: x's
    float32 copy). Runs on ``torch.cuda.current_stream(x.device)``;
    no host synchronisation (CUDA graphs work).

    Path: in plain eager mode on CUDA tensors, the eager fast path (``quack_cpp._torch``'s C++
    ``layernorm_fwd`` with its C++ autograd node where built, else ``_C`` called directly,
    through ``layernorm_fwd.Function`` when a gradient is needed); otherwise (torch.compile,
    fake tensors, ``QUACK_EAGER_CUSTOM_OP=1``) the custom op ``quack_cpp::layernorm_fwd`` with
    its registered autograd. Both give the same results.
    """
    if _autocast_fp32(x):
        cast = lambda t: t if t is None or t.dtype == torch.float32 else t.float()  # noqa: E731
        x, weight, bias, residual = cast(x), cast(weight), cast(bias), cast(residual)
    path, need_grad, nd, res_out_dtype = norm_prologue(
        "layernorm", x, weight, bias, residual, out_dtype, residual_dtype, prenorm)
    out, res_out, mean, rstd = layernorm_fwd.run(
        path,
        x if nd == 2 else as_rows(x),
        weight,
        bias,
        residual if residual is None or nd == 2 else as_rows(residual),
        float(eps),
        float(weight_offset),
        out_dtype if out_dtype is not None else x.dtype,
        res_out_dtype,
        need_grad or return_mean or return_rstd,
    )
    if nd != 2:
        out = out.view(*x.shape)
    if not (prenorm or return_mean or return_rstd):
        return out
    result = [out]
    if prenorm:
        if res_out_dtype is None:
            result.append(x)
        else:
            result.append(res_out if nd == 2 else res_out.view(*x.shape))
    lead = x.shape[:-1]
    if return_mean:
        result.append(mean if nd == 2 else mean.view(lead))
    if return_rstd:
        result.append(rstd if nd == 2 else rstd.view(lead))
    return tuple(result)
