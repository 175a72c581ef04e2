"""softmax and log_softmax for torch tensors on QuACK-C++ kernels (``include/quack/softmax.h``):
the op descriptions (one for both ops) and the functional API.

- ``softmax(x, dim=-1)``, ``log_softmax(x, dim=-1)``: differentiable, any ``dim`` (moved to the
  last axis when it is not), fp32/fp16/bf16;
- ``softmax_fwd`` / ``softmax_bwd`` / ``log_softmax_fwd`` / ``log_softmax_bwd``: the ops,
  registered by ``quack_cpp._registrar`` as the custom ops ``torch.ops.quack_cpp.<op>`` (fake
  kernels, the backward formula on the forward op: ``torch.compile(fullgraph=True)`` traces
  them, CUDA graphs capture them); calling them takes the eager fast path where it is the same.

Method: QuACK 0.2.0 (``quack/softmax.py``): each row read once while its max and sum of
exponentials are reduced together (online softmax), fp32 math; the row skeleton's kernels
(docs/architecture.md, "The row skeleton").
"""

import torch
from torch import Tensor

from . import _C
from .ops import _torch_ext  # the C++ fast path (python/torch_ext.cpp), where built
from . import _dtensor
from ._registrar import (CUSTOM, as_dim, autocast_fp32, check_float, from_rows, register,
                         route, rows_cols, stream, tensor_arg, to_rows)

__all__ = ["softmax", "log_softmax", "softmax_fwd", "softmax_bwd", "log_softmax_fwd",
           "log_softmax_bwd"]

_FORMULAS = {
    "softmax": ("y = exp(x - max) / sum(exp(x - max))", "dx = y * (dy - sum(y * dy))"),
    "log_softmax": ("y = x - max - log(sum(exp(x - max)))", "dx = dy - exp(y) * sum(dy)"),
}


def _describe(kind: str):
    """The forward and backward descriptions of ``kind`` (softmax or log_softmax): the two ops
    share shapes, dtypes and autograd; only the C++ function and the formula differ."""
    fwd, bwd = f"{kind}_fwd", f"{kind}_bwd"
    fwd_formula, bwd_formula = _FORMULAS[kind]

    class Bwd:
        name = f"quack_cpp::{bwd}"
        sharding = _dtensor.ROW  # DTensor placements (quack_cpp._dtensor)

        def signature(y: Tensor, dy: Tensor, dx_dtype: torch.dtype) -> Tensor:
            pass

        signature.__doc__ = f"""{kind} backward per row of y (M, N), the forward's output
        (``quack::{bwd}``), fp32 math::

            {bwd_formula}

        y, dy: (M, N) fp32/fp16/bf16, any non-negative strides (0 too); dx (M, N) contiguous in
        dx_dtype. Raises ValueError for a bad argument (the message names it)."""

        def outputs(y, dy, dx_dtype):
            M, N = rows_cols(y, bwd, "y")
            return y.new_empty(M, N, dtype=dx_dtype)

        def launch(dx, y, dy, dx_dtype):
            getattr(_C, bwd)(tensor_arg(y, bwd, "y"), tensor_arg(dy, bwd, "dy"),
                             tensor_arg(dx, bwd, "dx"), stream(y))

    bwd_op = register(Bwd)

    class Fwd:
        name = f"quack_cpp::{fwd}"
        sharding = _dtensor.ROW  # DTensor placements (quack_cpp._dtensor)
        # The fast path in C++ where built: outputs + launch + setup_context + backward below.
        eager = getattr(_torch_ext, fwd, None) if _torch_ext is not None else None
        eager_node = {"softmax": "SoftmaxFn", "log_softmax": "LogSoftmaxFn"}[kind]

        def signature(x: Tensor, out_dtype: torch.dtype) -> Tensor:
            pass

        signature.__doc__ = f"""{kind} per row of x (M, N) (``quack::{fwd}``; QuACK 0.2.0's
        online softmax), fp32 math::

            {fwd_formula}

        x: (M, N) fp32/fp16/bf16, any non-negative strides; y (M, N) contiguous in out_dtype
        (x's dtype, or fp32 under autocast). A row of all -inf gives NaN, as torch. Raises
        ValueError for a bad argument (the message names it)."""

        def outputs(x, out_dtype):
            M, N = rows_cols(x, fwd)
            return x.new_empty(M, N, dtype=out_dtype)

        def launch(y, x, out_dtype):
            getattr(_C, fwd)(tensor_arg(x, fwd, "x"), tensor_arg(y, fwd, "out"), stream(x))

        def setup_context(ctx, inputs, output):
            ctx.x_dtype = inputs[0].dtype
            ctx.save_for_backward(output)

        def backward(ctx, dy):
            (y,) = ctx.saved_tensors
            return bwd_op(y, dy, ctx.x_dtype), None

    return register(Fwd), bwd_op


softmax_fwd, softmax_bwd = _describe("softmax")
log_softmax_fwd, log_softmax_bwd = _describe("log_softmax")


def _run(op, fn: str, x: Tensor, dim: int) -> Tensor:
    if type(dim) is not int:
        dim = as_dim(fn, dim)
    path = route(x)
    if path == CUSTOM:  # on the fast path x is a plain CUDA tensor of a float dtype
        check_float(fn, x, "x")
    out_dtype = torch.float32 if autocast_fp32(x) else x.dtype
    if x.dim() == 0:  # a scalar is one row of one element
        if dim not in (0, -1):
            raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but "
                             f"got {dim})")
        return op.run(path, x.view(1, 1), out_dtype).view(())
    if dim == -1 and x.dim() == 2:
        return op.run(path, x, out_dtype)
    x2, shape = to_rows(x, dim)
    return from_rows(op.run(path, x2, out_dtype), shape, dim)


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Softmax along ``dim``, differentiable: ``exp(x - max) / sum(exp(x - max))`` with fp32
    math (``quack::softmax_fwd`` / ``softmax_bwd``; QuACK 0.2.0's online softmax: one read of
    each row, max and sum reduced together).

    Args:
        x: (..., N) float32, float16 or bfloat16 on a CUDA device (a 0-d tensor is one
            element), any strides.
        dim: the axis to normalise (any; moved to the last axis when it is not: a view where
            the strides allow, else a copy).

    Returns:
        y with x's shape, in x's dtype; under CUDA autocast in float32, as torch.softmax (an
        op of autocast's float32 list: torch casts a 16-bit x to float32 first; we read x as
        it is and write float32, the same result without the cast copy). With ``dim`` the last
        axis y is contiguous; for another ``dim`` it is the moved-back view of a contiguous
        result (torch returns x's layout).

    Backward: ``dx = y * (dy - sum(y * dy))``, in x's dtype. Rows of all -inf give NaN, as
    torch. No host synchronisation (CUDA-graph safe). Eager CUDA calls take the fast path: the
    C++ one of ``quack_cpp._torch`` (python/torch_ext.cpp, a C++ autograd node) where it is
    built, else ``_C`` called from Python (``QUACK_CPP_EAGER=0`` keeps this one); torch.compile,
    fake/meta tensors and ``QUACK_EAGER_CUSTOM_OP=1`` the custom ops
    ``quack_cpp::softmax_fwd`` / ``softmax_bwd``.

    Raises:
        ValueError: x not on a CUDA device, or not float32/float16/bfloat16.
        IndexError: ``dim`` out of range (torch's message). TypeError: ``dim`` a bool or a
            float.
    """
    return _run(softmax_fwd, "softmax", x, dim)


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """log_softmax along ``dim``, differentiable: ``x - max - log(sum(exp(x - max)))`` with fp32
    math (``quack::log_softmax_fwd`` / ``log_softmax_bwd``). Backward:
    ``dx = dy - exp(y) * sum(dy)``. Arguments, dtypes (float32 under CUDA autocast, as
    torch.log_softmax), layouts, paths and errors as ``softmax``."""
    return _run(log_softmax_fwd, "log_softmax", x, dim)
