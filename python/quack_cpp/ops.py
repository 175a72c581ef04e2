"""RMSNorm for torch tensors on QuACK-C++ kernels: custom ops, autograd, the functional API.

Layers (top to bottom):

- ``rmsnorm(...)``: differentiable functional API (what most users call);
- ``torch.ops.quack_cpp.rmsnorm_fwd`` / ``torch.ops.quack_cpp.rmsnorm_bwd``: functional custom
  ops (``torch.library.custom_op``, CUDA only) with fake kernels, so ``torch.compile`` (also
  ``fullgraph=True``) traces them without a graph break, and an autograd formula registered on
  the forward op (``torch.library.register_autograd``), so compiled graphs see the backward;
- ``quack_cpp._C``: the C++ API (``include/quack/norm.h``), called with data pointers, shapes,
  strides (in elements) and the current CUDA stream of the tensors' device.

Outputs are allocated with torch's caching allocator on the input's device; launches go to
``torch.cuda.current_stream(x.device)``. Nothing here synchronises with the host, so every call
can be captured in a CUDA graph.

Eager fast path: the custom-op machinery (dispatcher, generated autograd Function) about doubles
the host time of a forward + backward (CPU, ``_C`` stubbed: 215 µs against 99 µs through an
autograd.Function), and the demo is host-bound. So when ``eager_fast_path`` says the call is
plain eager work (not compiling, no jit trace, no torch dispatch mode such as FakeTensorMode /
FunctionalTensorMode, no functorch transform, every tensor a dense CUDA tensor of class Tensor
or Parameter in a kernel dtype), ``rmsnorm`` runs the same implementation
functions the custom ops run (``_rmsnorm_fwd_impl`` / ``_rmsnorm_bwd_impl``) inside a
``torch.autograd.Function`` (``_RMSNormFn``) with the same setup_context and backward formula,
skipping the dispatcher. Anything else (torch.compile, fake/meta tensors, CPU tensors, tensor
subclasses) takes the custom ops, which stay exactly as registered. Same outputs, errors,
streams and graph-capture behaviour on both paths. ``QUACK_EAGER_CUSTOM_OP=1`` (any value but
'' or '0') in the environment when ``quack_cpp.ops`` is first imported forces the custom ops
everywhere (escape hatch, A/B timing); at run time, set ``quack_cpp.ops.FORCE_CUSTOM_OP``.
Only the custom-op path shows as ``quack_cpp::*`` rows in profiler traces and to Python
TorchFunctionModes.

Method: QuACK 0.2.0 (Dao-AILab/quack, ``quack/rmsnorm.py``), with the prenorm residual
gradient of QuACK >= 0.2.3 (0.2.0 added d(residual_out) before the norm's backward, and
returned no residual gradient when ``prenorm=False``; both are fixed here).
"""

import os
from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from . import _C

__all__ = ["rmsnorm", "rmsnorm_fwd", "rmsnorm_bwd", "dtype_code", "eager_fast_path"]

# quack::DType codes (include/quack/tensor.h).
_DTYPE_CODE = {
    torch.float32: 0,
    torch.float16: 1,
    torch.bfloat16: 2,
    torch.int32: 3,
    torch.int64: 4,
}
_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# Device types the functional API accepts: CUDA tensors run the kernels; meta (and fake)
# tensors only propagate shapes through the fake kernels.
_DEVICE_TYPES = ("cuda", "meta")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def dtype_code(dtype: torch.dtype, fn: str = "quack_cpp", name: str = "tensor") -> int:
    """The ``quack::DType`` code of a torch dtype (0 float32, 1 float16, 2 bfloat16, 3 int32,
    4 int64). Raises ValueError naming ``fn`` and ``name`` for any other dtype."""
    code = _DTYPE_CODE.get(dtype)
    if code is None:
        raise ValueError(
            f"{fn}: {name} has dtype {_dtype_name(dtype)}, expected float32, float16 or bfloat16"
        )
    return code


def _tensor_arg(t: Optional[Tensor], fn: str, name: str):
    """A tensor as the extension takes it: (data_ptr, dtype_code, shape, strides, device), device
    the CUDA ordinal or -1. Hot (up to 9 per launch): no torch.device objects (get_device), the
    dtype code from the dict (``dtype_code`` only to raise), stride() is already a tuple."""
    if t is None:
        return None
    ptr = t.data_ptr()
    code = _DTYPE_CODE.get(t.dtype)
    if code is None:
        dtype_code(t.dtype, fn, name)  # raises
    return (ptr, code, tuple(t.shape), t.stride(), t.get_device() if t.is_cuda else -1)


# torch.cuda.current_stream(d).cuda_stream without building a Stream object (what
# torch._inductor's get_raw_stream calls); absent from CPU-only builds.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(t: Tensor) -> int:
    # The current stream of t's device; 0 for host tensors, which the C++ rejects by name.
    if not t.is_cuda:
        return 0
    if _raw_stream is not None:
        return _raw_stream(t.get_device())
    return torch.cuda.current_stream(t.device).cuda_stream


def _rows_cols(x: Tensor, fn: str):
    if x.dim() != 2:
        raise ValueError(f"{fn}: x has {x.dim()} dimensions {tuple(x.shape)}, expected 2 (M, N)")
    return x.shape  # (M, N), unpacked by the callers (one torch.Size, not two)


def _placeholder(x: Tensor, dtype: Optional[torch.dtype] = None) -> Tensor:
    # An absent output: the ops are functional (no None outputs, no aliasing of inputs).
    # Sizes as separate ints, here and in the impls: torch parses a size tuple ~0.5 µs slower.
    return x.new_empty(0) if dtype is None else x.new_empty(0, dtype=dtype)


# --------------------------------------------------------------------------------------------
# Which path: the eager fast path or the custom ops
# --------------------------------------------------------------------------------------------

# True: every call takes the custom ops (QUACK_EAGER_CUSTOM_OP, read once: an environment
# lookup per call would cost more than the rest of eager_fast_path).
FORCE_CUSTOM_OP = os.environ.get("QUACK_EAGER_CUSTOM_OP", "") not in ("", "0")
_PLAIN_TYPES = (Tensor, torch.nn.Parameter)
_KERNEL_DTYPES = frozenset(_FLOAT_DTYPES)
_STRIDED = torch.strided
# The mode / trace / transform queries of eager_fast_path, bound once (attribute lookups).
_dispatch_modes = torch._C._len_torch_dispatch_stack
_jit_tracing_state = torch._C._get_tracing_state
_functorch_level = torch._C._functorch.peek_interpreter_stack


def _is_plain_cuda(t: Tensor) -> bool:
    """A dense CUDA tensor of a kernel dtype whose class is exactly Tensor or Parameter (a
    subclass may wrap or intercept: FakeTensor, FunctionalTensor, DTensor, ...)."""
    return (type(t) in _PLAIN_TYPES and t.is_cuda and t.layout == _STRIDED
            and not t.is_nested and t.dtype in _KERNEL_DTYPES)


def eager_fast_path(*tensors: Optional[Tensor]) -> bool:
    """Whether a call on these tensors (None: absent) may skip the custom ops and call ``_C``
    directly: not compiling (checked first: Dynamo folds it, so nothing below is traced), not
    ``FORCE_CUSTOM_OP``, no jit trace, no torch dispatch mode (FakeTensorMode,
    FunctionalTensorMode, a user's mode: they must see the op), no functorch transform (vmap,
    grad, functionalize), and every tensor ``_is_plain_cuda``. Host-only, about 1-2 µs."""
    if torch.compiler.is_compiling() or FORCE_CUSTOM_OP:
        return False
    if (_dispatch_modes() or _jit_tracing_state() is not None
            or _functorch_level() is not None):
        return False
    for t in tensors:
        if t is not None and not _is_plain_cuda(t):
            return False
    return True


def _records_grad(*tensors: Optional[Tensor]) -> bool:
    """Whether autograd would record a call on these tensors (the custom op's rule)."""
    if torch.is_grad_enabled():
        for t in tensors:
            if t is not None and t.requires_grad:
                return True
    return False


# --------------------------------------------------------------------------------------------
# Forward op
# --------------------------------------------------------------------------------------------


def _rmsnorm_fwd_impl(x, weight, bias, residual, eps, out_dtype, residual_out_dtype,
                      store_rstd):
    """The forward's implementation, shared by the custom op (its CUDA kernel) and the eager
    fast path: allocates the outputs with torch and calls ``_C.rmsnorm_fwd``."""
    fn = "rmsnorm_fwd"
    M, N = _rows_cols(x, fn)
    dev = x.device
    out = torch.empty(M, N, dtype=out_dtype, device=dev)
    residual_out = (
        torch.empty(M, N, dtype=residual_out_dtype, device=dev)
        if residual_out_dtype is not None
        else _placeholder(x)
    )
    rstd = (
        torch.empty(M, dtype=torch.float32, device=dev)
        if store_rstd
        else _placeholder(x, torch.float32)
    )
    _C.rmsnorm_fwd(
        _tensor_arg(x, fn, "x"),
        _tensor_arg(weight, fn, "weight"),
        _tensor_arg(bias, fn, "bias"),
        _tensor_arg(residual, fn, "residual"),
        _tensor_arg(out, fn, "out"),
        _tensor_arg(residual_out if residual_out_dtype is not None else None, fn, "residual_out"),
        _tensor_arg(rstd if store_rstd else None, fn, "rstd"),
        float(eps),
        _stream(x),
    )
    return out, residual_out, rstd


@torch.library.custom_op("quack_cpp::rmsnorm_fwd", mutates_args=(), device_types="cuda")
def rmsnorm_fwd(
    x: Tensor,
    weight: Optional[Tensor],
    bias: Optional[Tensor],
    residual: Optional[Tensor],
    eps: float,
    out_dtype: torch.dtype,
    residual_out_dtype: Optional[torch.dtype],
    store_rstd: bool,
) -> Tuple[Tensor, Tensor, Tensor]:
    """RMSNorm forward as a functional custom op (``torch.ops.quack_cpp.rmsnorm_fwd``).

    Per row of x (M, N), in fp32 (``quack::rmsnorm_fwd``, QuACK 0.2.0's kernel)::

        h    = x + residual                    (x when residual is None)
        rstd = 1 / sqrt(mean_j(h_j^2) + eps)
        out  = h * rstd * weight + bias        (weight = 1, bias = 0 when None)

    Args:
        x: (M, N), float32/float16/bfloat16, CUDA, any non-negative strides.
        weight, bias: (N,) or None; x's dtype or float32.
        residual: (M, N) or None; x's dtype or float32.
        eps: added to the mean square, inside the square root.
        out_dtype: dtype of ``out`` (x's dtype or float32).
        residual_out_dtype: dtype of ``residual_out`` = h; None: not stored.
        store_rstd: store rstd (needed by the backward).

    Returns:
        ``(out, residual_out, rstd)``: out (M, N) contiguous; residual_out (M, N) or an empty
        placeholder of shape (0,) when not stored; rstd (M,) float32 or a (0,) placeholder.

    Raises:
        ValueError: a bad argument (shape, dtype, device, stride, eps < 0); the message names
            the argument, what was expected and what came.
        RuntimeError: a CUDA error (the CUDA text is kept).
        NotImplementedError: x is not a CUDA tensor (from the dispatcher).
    """
    return _rmsnorm_fwd_impl(x, weight, bias, residual, eps, out_dtype, residual_out_dtype,
                             store_rstd)


@rmsnorm_fwd.register_fake
def _rmsnorm_fwd_fake(x, weight, bias, residual, eps, out_dtype, residual_out_dtype, store_rstd):
    M, N = _rows_cols(x, "rmsnorm_fwd")
    out = x.new_empty((M, N), dtype=out_dtype)
    residual_out = (
        x.new_empty((M, N), dtype=residual_out_dtype)
        if residual_out_dtype is not None
        else _placeholder(x)
    )
    rstd = x.new_empty((M,), dtype=torch.float32) if store_rstd else _placeholder(x, torch.float32)
    return out, residual_out, rstd


# --------------------------------------------------------------------------------------------
# Backward op
# --------------------------------------------------------------------------------------------


def _rmsnorm_bwd_impl(x, weight, dout, rstd, dresidual_out, dx_dtype, dresidual_dtype,
                      need_dweight, dbias_dtype):
    """The backward's implementation, shared by the custom op and the eager fast path:
    allocates the outputs and the workspace with torch and calls ``_C.rmsnorm_bwd``."""
    fn = "rmsnorm_bwd"
    M, N = _rows_cols(x, fn)
    if need_dweight and weight is None:
        raise ValueError(f"{fn}: need_dweight is True but weight is None, expected a weight")
    dev = x.device
    dx = torch.empty(M, N, dtype=dx_dtype, device=dev)
    dres = (
        torch.empty(M, N, dtype=dresidual_dtype, device=dev)
        if dresidual_dtype is not None
        else _placeholder(x)
    )
    dw = torch.empty(N, dtype=weight.dtype, device=dev) if need_dweight else _placeholder(x)
    db = (
        torch.empty(N, dtype=dbias_dtype, device=dev)
        if dbias_dtype is not None
        else _placeholder(x)
    )
    args = (
        _tensor_arg(x, fn, "x"),
        _tensor_arg(weight, fn, "weight"),
        _tensor_arg(dout, fn, "dout"),
        _tensor_arg(rstd, fn, "rstd"),
        _tensor_arg(dresidual_out, fn, "dresidual_out"),
        _tensor_arg(dx, fn, "dx"),
        _tensor_arg(dres if dresidual_dtype is not None else None, fn, "dresidual"),
        _tensor_arg(dw if need_dweight else None, fn, "dweight"),
        _tensor_arg(db if dbias_dtype is not None else None, fn, "dbias"),
    )
    ws_bytes = _C.rmsnorm_bwd_workspace_size(*args)
    workspace = torch.empty(ws_bytes, dtype=torch.uint8, device=dev)
    _C.rmsnorm_bwd(*args, workspace.data_ptr(), ws_bytes, _stream(x))
    return dx, dres, dw, db


@torch.library.custom_op("quack_cpp::rmsnorm_bwd", mutates_args=(), device_types="cuda")
def rmsnorm_bwd(
    x: Tensor,
    weight: Optional[Tensor],
    dout: Tensor,
    rstd: Tensor,
    dresidual_out: Optional[Tensor],
    dx_dtype: torch.dtype,
    dresidual_dtype: Optional[torch.dtype],
    need_dweight: bool,
    dbias_dtype: Optional[torch.dtype],
) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """RMSNorm backward as a functional custom op (``torch.ops.quack_cpp.rmsnorm_bwd``).

    ``x`` is the norm's input h (residual_out when the forward had a residual), ``rstd`` the
    forward's. Per row, fp32 (``quack::rmsnorm_bwd``)::

        xhat = x * rstd;  g = dout * weight
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
    return _rmsnorm_bwd_impl(x, weight, dout, rstd, dresidual_out, dx_dtype, dresidual_dtype,
                             need_dweight, dbias_dtype)


@rmsnorm_bwd.register_fake
def _rmsnorm_bwd_fake(
    x, weight, dout, rstd, dresidual_out, dx_dtype, dresidual_dtype, need_dweight, dbias_dtype
):
    M, N = _rows_cols(x, "rmsnorm_bwd")
    if need_dweight and weight is None:
        raise ValueError("rmsnorm_bwd: need_dweight is True but weight is None, expected a weight")
    dx = x.new_empty((M, N), dtype=dx_dtype)
    dres = (
        x.new_empty((M, N), dtype=dresidual_dtype)
        if dresidual_dtype is not None
        else _placeholder(x)
    )
    dw = x.new_empty((N,), dtype=weight.dtype) if need_dweight else _placeholder(x)
    db = x.new_empty((N,), dtype=dbias_dtype) if dbias_dtype is not None else _placeholder(x)
    return dx, dres, dw, db


# --------------------------------------------------------------------------------------------
# Autograd of the forward op
# --------------------------------------------------------------------------------------------


def _fwd_setup_context(ctx, inputs, output):
    x, weight, bias, residual, eps, out_dtype, residual_out_dtype, store_rstd = inputs
    _out, residual_out, rstd = output
    # Unused outputs (residual_out when prenorm=False, rstd) get None, not materialised zeros.
    ctx.set_materialize_grads(False)
    ctx.x_dtype = x.dtype
    ctx.out_dtype = out_dtype
    ctx.residual_dtype = residual.dtype if residual is not None else None
    ctx.bias_dtype = bias.dtype if bias is not None else None
    ctx.residual_out_stored = residual_out_dtype is not None
    # The norm's input h: residual_out with a residual, else x itself.
    ctx.can_backward = store_rstd and (residual is None or residual_out_dtype is not None)
    h = residual_out if residual is not None else x
    ctx.save_for_backward(h, weight, rstd)


def _rmsnorm_grads(ctx, dout, dresidual_out, bwd):
    """The backward formula of both paths; ``bwd`` runs rmsnorm_bwd (the custom op, or
    ``_rmsnorm_bwd_call`` on the fast path). Gradients only where ctx.needs_input_grad says."""
    h, weight, rstd = ctx.saved_tensors
    if not ctx.can_backward:
        raise RuntimeError(
            "quack_cpp::rmsnorm_fwd backward: the forward ran with store_rstd=False, or with a "
            "residual but residual_out_dtype=None; call it with store_rstd=True and a "
            "residual_out_dtype (quack_cpp.rmsnorm does this when a gradient is needed)"
        )
    need_x, need_w, need_b, need_r = ctx.needs_input_grad[:4]
    if dout is None:  # only residual_out was used: d(out) = 0, as a stride-0 view (no memory)
        dout = torch.zeros((), dtype=ctx.out_dtype, device=h.device).expand(h.shape)
    if not ctx.residual_out_stored:
        dresidual_out = None
    # d(residual) = dh; a separate copy only where its dtype differs from x's.
    separate_dres = need_r and ctx.residual_dtype != ctx.x_dtype
    dx, dres, dw, db = bwd(
        h,
        weight,
        dout,
        rstd,
        dresidual_out,
        ctx.x_dtype,
        ctx.residual_dtype if separate_dres else None,
        bool(need_w and weight is not None),
        ctx.bias_dtype if need_b else None,
    )
    dresidual = (dres if separate_dres else dx) if need_r else None
    return (
        dx if need_x else None,
        dw if need_w else None,
        db if need_b else None,
        dresidual,
        None,
        None,
        None,
        None,
    )


def _fwd_backward(ctx, dout, dresidual_out, _drstd):
    # The custom op's backward: through the rmsnorm_bwd custom op.
    return _rmsnorm_grads(ctx, dout, dresidual_out, rmsnorm_bwd)


torch.library.register_autograd(
    "quack_cpp::rmsnorm_fwd", _fwd_backward, setup_context=_fwd_setup_context
)


# --------------------------------------------------------------------------------------------
# Eager fast path: the same implementation, setup_context and formula without the dispatcher
# --------------------------------------------------------------------------------------------


def _rmsnorm_bwd_call(*args):
    """rmsnorm_bwd's semantics from the fast path's backward: ``_rmsnorm_bwd_impl`` directly
    when ``eager_fast_path`` holds and autograd would not record the call; else the custom op
    (under compiled autograd, or create_graph=True: then double backward fails as on the
    custom-op path, since rmsnorm_bwd has no autograd formula)."""
    x, weight, dout, rstd, dresidual_out = args[:5]
    if eager_fast_path(x, weight, dout, rstd, dresidual_out) and not _records_grad(
            x, weight, dout, rstd, dresidual_out):
        return _rmsnorm_bwd_impl(*args)
    return rmsnorm_bwd(*args)


class _RMSNormFn(torch.autograd.Function):
    """rmsnorm_fwd with its registered autograd, as an autograd.Function: the eager fast path
    (``rmsnorm`` uses it when ``eager_fast_path`` holds and a gradient is needed). Forward:
    ``_rmsnorm_fwd_impl``, then the op's ``_fwd_setup_context``; backward: the op's formula
    with ``_rmsnorm_bwd_call``. (A separate ``setup_context`` staticmethod would make every
    ``apply`` bind the arguments with inspect.signature: ~40 µs.)"""

    @staticmethod
    def forward(ctx, *inputs):
        output = _rmsnorm_fwd_impl(*inputs)
        _fwd_setup_context(ctx, inputs, output)
        return output

    @staticmethod
    def backward(ctx, dout, dresidual_out, _drstd):
        return _rmsnorm_grads(ctx, dout, dresidual_out, _rmsnorm_bwd_call)


def _rmsnorm_fwd_call(*args):
    """rmsnorm_fwd's semantics (args as the op's) on the cheapest path that is the same: the
    custom op unless ``eager_fast_path``; else ``_RMSNormFn`` when autograd records the call,
    ``_rmsnorm_fwd_impl`` when it does not (inference, no_grad)."""
    x, weight, bias, residual = args[:4]
    if not eager_fast_path(x, weight, bias, residual):
        return rmsnorm_fwd(*args)
    if _records_grad(x, weight, bias, residual):
        return _RMSNormFn.apply(*args)
    return _rmsnorm_fwd_impl(*args)


# --------------------------------------------------------------------------------------------
# Functional API
# --------------------------------------------------------------------------------------------


def _check_input(t: Optional[Tensor], name: str) -> None:
    if t is None:
        return
    if t.device.type not in _DEVICE_TYPES:
        raise ValueError(f"rmsnorm: {name} is on {t.device}, expected a CUDA tensor")
    if t.dtype not in _FLOAT_DTYPES:
        raise ValueError(
            f"rmsnorm: {name} has dtype {_dtype_name(t.dtype)}, "
            "expected float32, float16 or bfloat16"
        )


def _as_rows(t: Tensor) -> Tensor:
    # (..., N) -> (M, N): a view where the strides allow it (a row stride wider than N is
    # kept), else a copy. 2-D: t itself (what flatten(0, 0) returns, without its ~0.6 µs).
    nd = t.dim()
    if nd == 2:
        return t
    if nd == 1:
        return t.unsqueeze(0)
    return t.flatten(0, -2)


def rmsnorm(
    x: Tensor,
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    residual: Optional[Tensor] = None,
    eps: float = 1e-6,
    prenorm: bool = False,
    residual_dtype: Optional[torch.dtype] = None,
    out_dtype: Optional[torch.dtype] = None,
) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """RMSNorm over the last dimension, with optional fused residual add. Differentiable.

    For each row of x (..., N), in fp32 (QuACK 0.2.0's method, C++ API ``quack::rmsnorm_fwd``
    / ``quack::rmsnorm_bwd``)::

        h            = x + residual                (x when residual is None)
        rstd         = 1 / sqrt(mean_j(h_j^2) + eps)
        out          = h * rstd * weight + bias    (weight = 1, bias = 0 when None)
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

    Returns:
        out (same shape as x, contiguous), or ``(out, residual_out)`` when prenorm=True.

    Raises:
        ValueError: a tensor not on a CUDA device, a dtype other than float32/float16/bfloat16,
            a shape mismatch (e.g. ``rmsnorm_fwd: weight has shape (4095,) float32, expected
            (4096,)``), tensors on different devices, eps < 0; the message names the argument.
        RuntimeError: a CUDA error.

    Runs on ``torch.cuda.current_stream(x.device)`` (x may live on a non-current device);
    no host synchronisation, so it can be captured in a CUDA graph. Under autocast it runs in
    the input's dtype, as ``torch.nn.RMSNorm`` does.

    Path: in plain eager mode on CUDA tensors, the eager fast path (``_RMSNormFn``, ``_C``
    called directly; see the module docstring); otherwise (torch.compile, fake tensors, CPU
    stand-ins, ``QUACK_EAGER_CUSTOM_OP=1``) the custom op ``quack_cpp::rmsnorm_fwd`` with its
    registered autograd. Both give the same results.
    """
    _check_input(x, "x")
    _check_input(weight, "weight")
    _check_input(bias, "bias")
    _check_input(residual, "residual")
    if x.dim() == 0:
        raise ValueError("rmsnorm: x is a 0-dimensional tensor, expected (..., N)")
    if residual is not None and residual.shape != x.shape:
        raise ValueError(
            f"rmsnorm: residual has shape {tuple(residual.shape)}, expected x's shape "
            f"{tuple(x.shape)}"
        )
    for name, dt in (("out_dtype", out_dtype), ("residual_dtype", residual_dtype)):
        if dt is not None and dt not in _FLOAT_DTYPES:
            raise ValueError(
                f"rmsnorm: {name} is {_dtype_name(dt)}, expected float32, float16 or bfloat16"
            )
    need_grad = _records_grad(x, weight, bias, residual)
    if residual is not None:
        # Stored when returned (prenorm) or when the backward needs h.
        res_out_dtype = (
            (residual_dtype if residual_dtype is not None else residual.dtype)
            if (prenorm or need_grad)
            else None
        )
    elif prenorm and residual_dtype is not None and residual_dtype != x.dtype:
        res_out_dtype = residual_dtype
    else:
        res_out_dtype = None
    x2 = _as_rows(x)
    r2 = _as_rows(residual) if residual is not None else None
    out, res_out, _rstd = _rmsnorm_fwd_call(
        x2,
        weight,
        bias,
        r2,
        float(eps),
        out_dtype if out_dtype is not None else x.dtype,
        res_out_dtype,
        need_grad,
    )
    out = out.view(*x.shape)  # unpacked: view(torch.Size) parses ~1.5 µs slower
    if not prenorm:
        return out
    residual_out = res_out.view(*x.shape) if res_out_dtype is not None else x
    return out, residual_out
