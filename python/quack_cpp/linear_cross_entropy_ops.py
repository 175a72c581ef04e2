"""Linear + cross-entropy (an LM head and its loss) on QuACK-C++'s chunked C++ function: op
descriptions and the functional API ``quack_cpp.linear_cross_entropy``.

Layers (top to bottom):

- ``linear_cross_entropy``: the functional API (flattens x's leading dims, autocast, options);
- ``lce_fwd`` (``torch.ops.quack_cpp.linear_cross_entropy_fwd``): loss and lse, and for 'mean'
  and 'sum' (bfloat16) the gradients dx, dweight, dbias for grad_output 1 in the same call; its
  autograd rescales them by grad_output in the backward (``lce_scale``, in place, nothing when
  exactly 1). For 'none', and for float16 x, the forward computes loss and lse only and the
  backward recomputes the logits by vocabulary slices with the per-token grad_output
  (``lce_bwd``). Registered by
  ``quack_cpp._registrar`` (custom op + fake + autograd + eager fast path): one opaque op for
  torch.compile(fullgraph=True); no host sync, so CUDA graphs capture it;
- ``quack_cpp._C.linear_cross_entropy_*``: the C++ API (``include/quack/linear_cross_entropy.h``).

Memory: the op allocates its outputs and one workspace (a logits chunk and, with several chunks,
half of an fp32 dweight accumulator; the other half lives in dweight itself) with torch's caching
allocator. ``chunk_size=None`` lets the C++ rule pick the chunk from the shapes and the free
memory (torch's free and cached bytes; none during CUDA-graph capture).

Method: QuACK 0.2.0 ``chunked_linear_cross_entropy`` (``quack/linear_cross_entropy.py``).
"""

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _C, _dtensor
from . import _registrar as _reg
from ._registrar import (dtype_name, functional_context, graph_retained,
                         refuse_double_backward, register, route, route_index, scalar_arg,
                         stream, tensor_arg)
from .gemm_ops import _as_operand

__all__ = ["linear_cross_entropy"]

_REDUCTIONS = ("none", "sum", "mean")
_F32 = torch.float32
_COMPUTE_DTYPES = (torch.bfloat16, torch.float16)


def _free_bytes(device: torch.device) -> int:
    """Bytes the next allocations can get on device: the driver's free memory plus torch's
    cached, unallocated blocks; 0 (unknown) while a CUDA graph is being captured on device's
    current stream (device need not be the current device: the query runs under its guard)."""
    with torch.cuda.device(device):
        if torch.cuda.is_current_stream_capturing():
            return 0
    free, _ = torch.cuda.mem_get_info(device)
    return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))


def _workspace(nbytes: int, like: Tensor):
    ws = torch.empty(max(int(nbytes), 1), dtype=torch.uint8, device=like.device)
    return ws, ws.data_ptr(), int(nbytes)


class LinearCrossEntropyFwd:
    name = "quack_cpp::linear_cross_entropy_fwd"
    sharding = _dtensor.LINEAR_CROSS_ENTROPY_FWD  # DTensor placements (quack_cpp._dtensor)
    absent = (None, None, None, None, None)
    index_args = ("target",)

    def signature(x: Tensor, weight: Tensor, bias: Optional[Tensor], target: Tensor,
                  ignore_index: int, reduction: str, label_smoothing: float, z_loss: float,
                  logit_softcap: float, need_dx: bool, need_dw: bool, need_db: bool,
                  low_memory: bool, chunk_size: int, fuse_grad_accum: bool
                  ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """(loss, lse, dx, dweight, dbias) of ``cross_entropy(x @ weight^T + bias, target)``
        (``torch.ops.quack_cpp.linear_cross_entropy_fwd``).

        x (T, D) bfloat16 or float16 with 16-byte rows, weight (V, D) x's dtype or float32,
        bias (V) x's dtype, float32 or None, target (T) int32/int64. A float32 weight or bias
        (an fp32 master weight under autocast) is rounded to x's dtype for the GEMMs, and its
        gradient is accumulated and stored in float32 (no 16-bit rounding of dweight). loss:
        (T,) float32 for 'none', else a 0-d float32; lse (T,) float32. dx (T, D), dweight
        (V, D), dbias (V) in the inputs' dtypes when need_* (the gradients for grad_output 1;
        the functional API asks for none with 'none' or float16 x, whose autograd recomputes
        them in the backward), else absent.
        chunk_size 0: the C++ rule with the free memory. fuse_grad_accum is read by the
        autograd formula only. Raises ValueError with the C++ message for bad arguments."""

    def outputs(x, weight, bias, target, ignore_index, reduction, label_smoothing, z_loss,
                logit_softcap, need_dx, need_dw, need_db, low_memory, chunk_size,
                fuse_grad_accum):
        T = x.shape[0]
        loss = x.new_empty((T,) if reduction == "none" else (), dtype=_F32)
        lse = x.new_empty((T,), dtype=_F32)
        dx = x.new_empty(x.shape) if need_dx else None
        dw = weight.new_empty(weight.shape) if need_dw else None
        db = bias.new_empty(bias.shape) if (need_db and bias is not None) else None
        return loss, lse, dx, dw, db

    def launch(outs, x, weight, bias, target, ignore_index, reduction, label_smoothing, z_loss,
               logit_softcap, need_dx, need_dw, need_db, low_memory, chunk_size,
               fuse_grad_accum):
        fn = "linear_cross_entropy_fwd"
        loss, lse, dx, dw, db = outs
        T, D = x.shape
        weight, bias = _as_x(weight, x), _as_x(bias, x)  # before the free-memory query: its copy
        if chunk_size == 0 and T > 0:
            # x's dtype code (another dtype: the workspace query below raises the C++'s
            # ValueError); the fp32 accumulator's half in the workspace exists only for a
            # 16-bit dweight (an fp32 one accumulates in place).
            chunk_size = _C.linear_cross_entropy_chunk_size(
                T, D, weight.shape[0], _reg.DTYPE_CODE.get(x.dtype, 0), bool(low_memory),
                dw is not None and dw.dtype != _F32, _free_bytes(x.device))
        args = (tensor_arg(x, fn, "x"), tensor_arg(weight, fn, "weight"),
                tensor_arg(bias, fn, "bias"), tensor_arg(target, fn, "target"),
                tensor_arg(loss, fn, "loss") if reduction == "none" else scalar_arg(loss, fn, "loss"),
                tensor_arg(lse, fn, "lse"), None, tensor_arg(dx, fn, "dx"),
                tensor_arg(dw, fn, "dweight"), tensor_arg(db, fn, "dbias"), False,
                int(ignore_index), reduction, float(label_smoothing), float(z_loss),
                float(logit_softcap), bool(low_memory), int(chunk_size), 0)
        nbytes = _C.linear_cross_entropy_fwd_workspace_size(*args)
        ws, ptr, nbytes = _workspace(nbytes, x)
        _C.linear_cross_entropy_fwd(*args, ptr, nbytes, stream(x))

    def setup_context(ctx, inputs, output):
        (x, weight, bias, target, ignore_index, reduction, eps, zs, cap, need_dx, need_dw,
         need_db, low_memory, chunk_size, fuse) = inputs
        loss, lse, dx, dw, db = output
        ctx.set_materialize_grads(False)
        ctx.mark_non_differentiable(*(t for t in (lse, dx, dw, db) if t is not None))
        # 'none', and float16 x (whose gradient for grad_output 1 would underflow before a
        # loss scale could lift it): the backward recomputes with the real grad_output.
        ctx.recompute = reduction == "none" or x.dtype == torch.float16
        ctx.options = (int(ignore_index), float(eps), float(zs), float(cap), bool(low_memory))
        ctx.reduction = reduction
        ctx.has_bias = bias is not None
        # Fused accumulation reads weight.grad at backward time: eager only (as QuACK's Linear),
        # and only for a leaf weight (the only kind whose .grad AccumulateGrad fills).
        ctx.fuse = bool(fuse and need_dw and weight.is_leaf
                        and not torch.compiler.is_compiling())
        if ctx.recompute:
            ctx.save_for_backward(x, weight, bias, target, lse)
        else:
            ctx.save_for_backward(dx if need_dx else None, dw if need_dw else None,
                                  db if (need_db and bias is not None) else None,
                                  weight if ctx.fuse else None)

    def backward(ctx, dloss, dlse, ddx, ddw, ddb):
        """'mean'/'sum': the forward's gradients times grad_output: scaled in place on the
        device (nothing happens when it is exactly 1) and handed to autograd, unless the graph
        is retained or traced (then ``g * grad_output`` in fresh buffers, the saved ones left as
        they are, so every backward through the graph gets its own grad_output's gradients).
        'none' and float16: recomputed by vocabulary slices with the per-token grad_output
        (``lce_bwd``; 'mean' divides it by the count of targets in [0, V) other than
        ignore_index, the forward's denominator, or by 1 when there is none).
        Either way only the gradients the engine's current graph task computes
        (``_registrar.task_grads``: not weight's under ``torch.autograd.grad(loss, x)``)."""
        (need_x, need_w, need_b), fuse = _reg.task_grads(ctx, (0, 1, 2), 1, ctx.fuse)
        none = (None,) * 12
        if dloss is None:
            return (None, None, None) + none
        if ctx.recompute:
            x, weight, bias, target, lse = ctx.saved_tensors
            ignore_index, eps, zs, cap, low_memory = ctx.options
            if ctx.reduction == "mean":
                # per counted token (a target in [0, V), not ignore_index: the forward's
                # denominator): grad_output / their count (≥ 1: all ignored gives zeros)
                V = weight.shape[0]
                count = ((target != ignore_index) & (target >= 0) & (target < V)).sum()
                dloss = dloss.to(_F32) / count.clamp_min(1)
            path = route_index(route(x, weight, bias, lse, dloss), target)
            dx, dw, db = lce_bwd.run(path, x, weight, bias, target, lse, dloss, ignore_index,
                                     eps, zs, cap, bool(need_x), bool(need_w),
                                     bool(need_b and bias is not None), low_memory)
            return (dx if need_x else None, dw if need_w else None,
                    db if need_b else None) + none
        dx, dw, db, weight = ctx.saved_tensors
        # The saved gradients are constants of the forward: a graph recorded through them would
        # miss the loss's second derivative (zeros, silently).
        refuse_double_backward(
            "linear_cross_entropy", f"with reduction {ctx.reduction!r} the gradients are "
            "computed in the forward and saved, and are not differentiable")
        keep = functional_context(dx, dw, db, dloss) or graph_retained()

        def scaled(g):  # the gradient times grad_output (bf16 · fp32 0-d: fp32 math, bf16)
            if g is None:
                return None
            if keep:
                return g * dloss
            lce_scale(g, dloss)
            return g

        dx = scaled(dx) if need_x else None
        db = scaled(db) if need_b else None
        if need_w and dw is not None:
            # Fused accumulation only where AccumulateGrad will store what we return into
            # weight.grad (task_grads' fuse: loss.backward()); under torch.autograd.grad or
            # backward(inputs=...) without weight, weight.grad must stay as it is and the
            # result be dW alone.
            grad = weight.grad if fuse else None
            if grad is not None and grad.dtype == dw.dtype and grad.shape == dw.shape:
                # weight.grad += dweight * grad_output in one pass, fp32 math, one rounding (dw
                # itself untouched); handed to autograd with weight.grad cleared, so
                # AccumulateGrad stores it as it is.
                grad.addcmul_(dw, dloss.to(_F32))
                weight.grad = None
                dw = grad
            else:
                dw = scaled(dw)
        else:
            dw = None
        return (dx, dw, db) + none


class LinearCrossEntropyBwd:
    name = "quack_cpp::linear_cross_entropy_bwd"
    sharding = _dtensor.LINEAR_CROSS_ENTROPY_BWD  # DTensor placements (quack_cpp._dtensor)
    absent = (None, None, None)
    index_args = ("target",)

    def signature(x: Tensor, weight: Tensor, bias: Optional[Tensor], target: Tensor,
                  lse: Tensor, dloss: Tensor, ignore_index: int, label_smoothing: float,
                  z_loss: float, logit_softcap: float, need_dx: bool, need_dw: bool,
                  need_db: bool, low_memory: bool) -> Tuple[Tensor, Tensor, Tensor]:
        """(dx, dweight, dbias) from the forward's lse and a per-token dloss (T,)
        (``torch.ops.quack_cpp.linear_cross_entropy_bwd``): the logits recomputed by vocabulary
        slices; absent outputs when not need_*. Dtypes as linear_cross_entropy_fwd's (a float32
        weight or bias rounded to x's dtype for the GEMMs, its gradient float32). Not
        differentiable."""

    def outputs(x, weight, bias, target, lse, dloss, ignore_index, label_smoothing, z_loss,
                logit_softcap, need_dx, need_dw, need_db, low_memory):
        dx = x.new_empty(x.shape) if need_dx else None
        dw = weight.new_empty(weight.shape) if need_dw else None
        db = bias.new_empty(bias.shape) if (need_db and bias is not None) else None
        return dx, dw, db

    def launch(outs, x, weight, bias, target, lse, dloss, ignore_index, label_smoothing, z_loss,
               logit_softcap, need_dx, need_dw, need_db, low_memory):
        fn = "linear_cross_entropy_bwd"
        dx, dw, db = outs
        g = scalar_arg(dloss, fn, "dloss") if dloss.dim() == 0 else tensor_arg(dloss, fn, "dloss")
        weight, bias = _as_x(weight, x), _as_x(bias, x)
        args = (tensor_arg(x, fn, "x"), tensor_arg(weight, fn, "weight"),
                tensor_arg(bias, fn, "bias"), tensor_arg(target, fn, "target"),
                tensor_arg(lse, fn, "lse"), g, tensor_arg(dx, fn, "dx"),
                tensor_arg(dw, fn, "dweight"), tensor_arg(db, fn, "dbias"), False,
                int(ignore_index), float(label_smoothing), float(z_loss), float(logit_softcap),
                bool(low_memory), 0)
        nbytes = _C.linear_cross_entropy_bwd_workspace_size(*args)
        ws, ptr, nbytes = _workspace(nbytes, x)
        _C.linear_cross_entropy_bwd(*args, ptr, nbytes, stream(x))


class LinearCrossEntropyScaleGrad:
    name = "quack_cpp::linear_cross_entropy_scale_grad"
    mutates_args = ("grad",)

    def signature(grad: Tensor, grad_output: Tensor) -> None:
        """grad *= grad_output in place (``torch.ops.quack_cpp.linear_cross_entropy_scale_grad``):
        grad (T, D), (V, D) or (V,), grad_output one element (0-d or (1,)), read on the device;
        nothing is touched when it is exactly 1. Raises ValueError for a grad of another rank
        or a grad_output of more than one element."""

    def impl(grad, grad_output):
        fn = "linear_cross_entropy_scale_grad"
        _check_scale_args(grad, grad_output)
        g = tensor_arg(grad, fn, "grad")
        _C.linear_cross_entropy_scale_grad(g if grad.dim() == 2 else None, None,
                                           g if grad.dim() == 1 else None,
                                           scalar_arg(grad_output, fn, "grad_output"), stream(grad))

    def fake(grad, grad_output):
        _check_scale_args(grad, grad_output)
        return None


def _as_x(t: Optional[Tensor], x: Tensor) -> Optional[Tensor]:
    """t as the kernels read it: in x's dtype (a float32 weight or bias rounded, a copy)."""
    return t if t is None or t.dtype == x.dtype else t.to(x.dtype)


def _check_scale_args(grad: Tensor, grad_output: Tensor) -> None:
    """ValueError unless grad is 1-D or 2-D (the C++ takes a matrix or a vector; any other rank
    would be scaled by nothing) and grad_output has one element."""
    fn = "linear_cross_entropy_scale_grad"
    if grad.dim() not in (1, 2):
        raise ValueError(f"{fn}: grad has shape {tuple(grad.shape)}, expected (T, D), (V, D) "
                         "or (V,)")
    if grad_output.numel() != 1:
        raise ValueError(f"{fn}: grad_output has shape {tuple(grad_output.shape)} "
                         f"({grad_output.numel()} elements), expected one element (0-d or (1,))")


lce_bwd = register(LinearCrossEntropyBwd)
lce_scale = register(LinearCrossEntropyScaleGrad)
lce_fwd = register(LinearCrossEntropyFwd)


# --------------------------------------------------------------------------------------------
# Functional API
# --------------------------------------------------------------------------------------------


def _compute_dtype(x: Tensor, weight: Tensor) -> Optional[torch.dtype]:
    """The GEMMs' dtype when the kernels apply: an autocast's dtype on x's device type when it
    is bfloat16 or float16, or x's dtype when x and weight are both bfloat16 or both float16;
    else None."""
    dev = x.device.type
    if dev in ("cuda", "cpu") and torch.is_autocast_enabled(dev):
        dtype = torch.get_autocast_dtype(dev)
        return dtype if dtype in _COMPUTE_DTYPES else None
    if x.dtype == weight.dtype and x.dtype in _COMPUTE_DTYPES:
        return x.dtype
    return None


def linear_cross_entropy(x: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor] = None,
                         ignore_index: int = -100, reduction: str = "mean",
                         label_smoothing: float = 0.0, z_loss: float = 0.0,
                         logit_softcap: Optional[float] = None, chunk_size: Optional[int] = None,
                         *, low_memory: bool = False, fuse_grad_accum: bool = False) -> Tensor:
    """``cross_entropy(x @ weight^T + bias, target)`` without materialising the logits;
    differentiable in x, weight and bias.

    The LM head and its loss in one op: per chunk of tokens the logits chunk (our GEMM, in the
    compute dtype), the cross-entropy forward with its gradient written in place, then the dx
    and dweight GEMMs (dweight accumulated in fp32 across chunks, rounded once to weight's
    dtype); the backward only rescales the gradients by grad_output on the device. Equal to
    ``F.cross_entropy((x @ weight.T + bias).float(), target, ...)`` with the logits rounded to
    the compute dtype (as ``F.linear`` in it gives them), plus the options below.

    Compute dtype: bfloat16 or float16 (x and weight both of it, or an autocast to it). With
    float16 the forward computes the loss and lse only, and the backward recomputes the logits
    by vocabulary slices with the real grad_output (as for 'none'; one logits GEMM more): a
    gradient for grad_output 1, scaled later, would lose to float16's range what a loss scale
    (``torch.amp.GradScaler``) is there to keep (the 'mean' gradient of a 16384-token batch is
    below float16's smallest subnormal for most classes).

    Args:
        x: (..., D) CUDA, bfloat16 or float16 (or any float dtype under such an autocast); other
            layouts are copied to contiguous rows. D a multiple of 8 runs on x and weight as
            they are; any other D copies both, with zero columns up to the next multiple of 8,
            at each call (the GEMMs' 16-byte rows), and fuse_grad_accum does not fuse there.
        weight: (V, D), x's dtype (or under autocast any float dtype, rounded to the compute
            dtype for the GEMMs like ``nn.Linear``). A float32 weight (an fp32 master weight)
            gets its gradient in float32, accumulated in fp32 and never rounded to 16 bits
            (torch's autocast F.linear rounds it first); other dtypes get the compute dtype's
            gradient, cast.
        target: (...) int64/int32 class indices, x's leading shape; ``ignore_index`` rows are
            skipped (loss 0, no gradient); a target outside [0, V) that is not ignore_index
            gives that token NaN loss and gradients (no host check, no sync).
        bias: (V,) or None.
        ignore_index, label_smoothing: as ``torch.nn.functional.cross_entropy``.
        reduction: 'mean' (over the non-ignored tokens; NaN when there is none, as torch),
            'sum', or 'none' (the per-token losses, x's leading shape; its backward recomputes
            the logits once more by vocabulary slices).
        z_loss: z-loss scale zs ≥ 0: adds zs·lse² per token (averaged like the loss for 'mean').
        logit_softcap: c > 0 applies y = c·tanh(z / c) to the logits first (Gemma 2), or None.
        chunk_size: tokens per chunk, or None for the C++ rule (a logits budget of 1 GiB, 512 MiB
            with low_memory, at most a quarter of the free memory; one chunk when that needs no
            more memory).
        low_memory: no fp32 dweight accumulator spanning the weight (about a third of the
            vocabulary is accumulated inside dweight's own memory, the rest computed from the
            lse by vocabulary slices afterwards: ~1.2x the time; extra memory about one logits
            chunk of 512 MiB).
        fuse_grad_accum: QuACK's in-place accumulation, for ``loss.backward()``: when
            ``weight.grad`` exists (a leaf weight, weight's dtype and shape; eager mode;
            'mean'/'sum'), the backward adds grad_output * dweight into it in place (one pass,
            one rounding) and hands that tensor to autograd with ``weight.grad`` cleared for
            the moment, so AccumulateGrad stores it back as it is. Consequences: a hook on
            weight (``weight.register_hook``) sees the accumulated gradient, not this call's
            dweight; only where the running backward will accumulate into ``weight.grad``
            (``loss.backward()``, or ``backward(inputs=...)`` naming weight: asked of the
            autograd engine, no sync) is it fused: under ``torch.autograd.grad`` or
            ``backward(inputs=...)`` without weight, ``weight.grad`` is left untouched and the
            gradient is dweight alone, as without the option. Ignored under torch.compile,
            for 'none' and for float16.

    Returns:
        float32 loss: a 0-d tensor for 'mean' and 'sum', target's shape for 'none'.

    The backward of 'mean' and 'sum' (bfloat16) scales the gradients saved by the forward in
    place and hands them to autograd (no copy); where the graph is retained
    (``retain_graph=True``) or traced (torch.compile) it returns scaled copies instead, so every
    backward gets its own grad_output's gradients ('none' and float16 recompute the gradients
    in each backward). Bitwise
    reproducible for a fixed ``chunk_size``; with None the chunk may follow the free memory,
    which moves the fp32 summation order of dweight across chunks. No double backward: for
    'mean' and 'sum' a backward with ``create_graph=True`` raises RuntimeError (the saved
    gradients are not differentiable); for 'none' and float16 differentiating the gradient
    raises (its op has no autograd formula).

    Raises:
        ValueError: a shape, dtype (x and weight must compute in bfloat16 or float16), device,
            layout or option the C++ rejects (its message), a bad reduction or chunk_size.
        RuntimeError: a CUDA error; a bfloat16 'mean'/'sum' backward with
            ``create_graph=True``.

    Source: QuACK 0.2.0 ``chunked_linear_cross_entropy``; the options as Liger-Kernel's fused
    linear cross-entropy (z-loss ``lse_square_scale``, ``softcap``).
    """
    fn = "linear_cross_entropy"
    for name, t in (("x", x), ("weight", weight), ("target", target), ("bias", bias)):
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(f"{fn}: {name} is {type(t).__name__}, expected a torch.Tensor")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{fn}: reduction is {reduction!r}, expected 'none', 'sum' or 'mean'")
    if chunk_size is not None and (not isinstance(chunk_size, int) or isinstance(chunk_size, bool)
                                   or chunk_size < 1):
        raise ValueError(f"{fn}: chunk_size is {chunk_size!r}, expected an int ≥ 1 or None")
    if weight.dim() != 2 or x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"{fn}: x has shape {tuple(x.shape)} and weight {tuple(weight.shape)}, "
                         "expected (..., D) and (V, D)")
    if tuple(target.shape) != tuple(x.shape[:-1]):
        raise ValueError(f"{fn}: target has shape {tuple(target.shape)}, expected x's leading "
                         f"shape {tuple(x.shape[:-1])}")
    for name, t in (("x", x), ("weight", weight), ("target", target), ("bias", bias)):
        if t is not None and t.device.type not in _reg.DEVICE_TYPES:
            raise ValueError(f"{fn}: {name} is on {t.device}, expected a CUDA tensor")
    dtype = _compute_dtype(x, weight)
    if dtype is None:
        raise ValueError(f"{fn}: x has dtype {dtype_name(x.dtype)} and weight "
                         f"{dtype_name(weight.dtype)}, expected both bfloat16 or both float16 "
                         "(or a bfloat16 or float16 autocast)")
    # A float32 weight or bias goes to the op as it is: the op rounds it to the compute dtype
    # for the GEMMs and returns its gradient in float32 (accumulated in fp32, never rounded to
    # 16 bits, where a cast here would give a 16-bit gradient that autograd then widens).
    w = weight if weight.dtype in (dtype, _F32) else weight.to(dtype)
    b = bias if bias is None or bias.dtype in (dtype, _F32) else bias.to(dtype)
    D = weight.shape[1]
    x2 = x if x.dim() == 2 else x.reshape(-1, D)
    x2 = _as_operand(x2.to(dtype) if x2.dtype != dtype else x2)
    pad = -D % 8
    if pad:
        # The GEMMs read 16-byte rows: x and the weight get zero columns up to the next multiple
        # of 8 (a copy of each per call; zeros add nothing to the logits), and autograd slices
        # their gradients back through F.pad. fuse_grad_accum cannot write into weight.grad then.
        x2 = torch.nn.functional.pad(x2, (0, pad))
        w = torch.nn.functional.pad(w, (0, pad))
    t = target.reshape(-1)
    cap = 0.0 if logit_softcap is None else float(logit_softcap)
    # float16: no gradient in the forward (ctx.recompute: the backward computes it from lse).
    grad = torch.is_grad_enabled() and reduction != "none" and dtype != torch.float16
    need_dx = grad and x.requires_grad
    need_dw = grad and weight.requires_grad
    need_db = grad and b is not None and bias.requires_grad
    fuse = bool(fuse_grad_accum) and w is weight
    path = route_index(route(x2, w, b), t)
    loss = lce_fwd.run(path, x2, w, b, t, int(ignore_index), reduction, float(label_smoothing),
                       float(z_loss), cap, need_dx, need_dw, need_db, bool(low_memory),
                       int(chunk_size or 0), fuse)[0]
    if reduction == "none" and target.dim() != 1:
        loss = loss.view(target.shape)
    return loss


def linear_cross_entropy_torch(x: Tensor, weight: Tensor, target: Tensor,
                               bias: Optional[Tensor] = None, ignore_index: int = -100,
                               reduction: str = "mean", label_smoothing: float = 0.0,
                               z_loss: float = 0.0,
                               logit_softcap: Optional[float] = None) -> Tensor:
    """The same loss in plain torch (``F.linear``, then ``F.cross_entropy`` on float32 logits,
    the softcap and z-loss as ``linear_cross_entropy``): what ``nn.LinearCrossEntropy`` runs
    where the kernels do not apply (CPU, float32 compute)."""
    import torch.nn.functional as F

    z = F.linear(x, weight, bias).float()
    if logit_softcap is not None:
        z = logit_softcap * torch.tanh(z / logit_softcap)
    z2 = z.reshape(-1, z.shape[-1])
    t = target.reshape(-1)
    loss = F.cross_entropy(z2, t, ignore_index=ignore_index, reduction="none",
                           label_smoothing=label_smoothing)
    valid = t != ignore_index
    if z_loss:
        loss = loss + z_loss * torch.logsumexp(z2, -1).square() * valid
    if reduction == "none":
        return loss.view(target.shape)
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / valid.sum()  # NaN when no token counts, as F.cross_entropy
