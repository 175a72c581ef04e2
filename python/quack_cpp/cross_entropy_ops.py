"""Cross-entropy for torch tensors on QuACK-C++ kernels (``include/quack/cross_entropy.h``): the
op descriptions and the functional API ``cross_entropy``.

Ops (registered by ``quack_cpp._registrar``: custom ops ``torch.ops.quack_cpp.<op>`` with fakes,
the autograd formula on the forward op, the eager fast path):

- ``cross_entropy_fwd``: loss (and lse, the z-loss part, and the gradient for grad_output = 1
  when asked) in one read of the logits (``quack::cross_entropy_fwd``);
- ``cross_entropy_bwd``: the gradient from the logits and lse (``quack::cross_entropy_bwd``);
- ``cross_entropy_scale_grad``: dx *= grad_output in place, skipped on the device when
  grad_output is exactly 1 (``quack::cross_entropy_scale_grad``);
- ``cross_entropy_train_bwd``: the backward of a forward with ``predict_dx``
  (``quack::cross_entropy_train_bwd``): grad_output * dx where the forward wrote dx, else dx
  recomputed from the logits and lse, decided on the device.

Which path a differentiable call takes (decided on the host from the arguments alone, no
look at the data):

- reduction 'mean' or 'sum' (logits given, no lse_partial, no inplace_backward): the
  **predicted gradient in the forward**. The device keeps one int32 word per device (``dx_predict_word``): "the last
  training backward had grad_output == 1". The forward reads it on the device: 1: it writes
  dx for grad_output = 1 (with the mean's denominators, computed on the device) in the same
  read of the logits; 0: it writes no dx (one read of the logits). It records which in a
  (16,) state it returns. The backward (``cross_entropy_train_bwd``) reads the state and
  grad_output on the device: dx written and grad_output 1: nothing (``loss.backward()``);
  written and another grad_output: dx *= grad_output; not written: dx from the logits, lse and
  the forward's scales (the backward from lse's kernel); then it sets the word to
  (grad_output == 1). Traffic per element of the logits: grad_output 1 every step: 2·M·V
  (forward read + write); a scaled loss every step (loss * 0.5, gradient accumulation): 3·M·V
  (forward read; backward read + write: QuACK's), where writing dx in the forward and
  rescaling it moved 4·M·V; a step whose grad_output differs from the previous one's pays one
  pass more (a rescale, or a dx written in vain), never a wrong gradient. Memory: dx and the
  logits live from the forward to the backward. On
  DTensors the forward always writes dx and the backward rescales it (the rules of
  quack_cpp._dtensor).
- reduction 'none': the forward without dx, the **backward from lse** (``cross_entropy_bwd``
  with grad_output per row): a per-row grad_output cannot be applied by the scalar rescale, and
  forward-dx + a per-row rescale would move 4·M·V against 3·M·V, and hold dx in between.
- inplace_backward (any reduction): the backward from lse, writing into the logits (3·M·V),
  so the logits keep their values until the backward (cases/handed.md C08).
- lse_partial given (with the logits): the forward cannot write dx (the C++ rejects it): the
  backward from lse, the full lse combined from lse_partial ('mean': grad_output divided by the
  denominator, computed with torch ops on the device).
- logits None (lse_partial and target_logit given): the gradients of lse_partial and
  target_logit with torch ops on (M, K) and (M) tensors.

The saved dx and retain_graph: the training backward writes into the saved dx, so a backward
that may run again on the same graph must not. When the running backward keeps the graph
(retain_graph=True or create_graph=True: ``_registrar.graph_retained``) or is traced
(torch.compile: ``_registrar.functional_context``), it writes the gradient into a fresh buffer
(``cross_entropy_train_bwd`` without ``into_dx``: the saved dx and state untouched);
otherwise (the last backward through this graph) into the saved dx, which it returns. So any
number of retained backwards, then a last one, each get the gradient for their grad_output;
the fresh buffer costs a pass (a copy where grad_output is 1) only under retain_graph and
under compile.

The word is a hint shared by every call on the device, outside the ops' schemas (it changes
the cost of a call, never its result: the state records what the forward did): eager calls,
torch.compile and CUDA graphs read and set it on the device. It is made on the first
training call outside a CUDA-graph capture (inside one, before it exists, the forward writes
dx as with the word at 1).
"""

from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from . import _C
from . import _dtensor
from .ops import _torch_ext  # the C++ fast path (python/torch_ext.cpp), where built
from ._registrar import (CUSTOM, EAGER, EAGER_GRAD, check_float, check_index,
                         functional_context, graph_retained, records_grad, refuse_double_backward,
                         register, route, route_index, scalar_arg, stream, tensor_arg)

__all__ = ["cross_entropy", "cross_entropy_fwd", "cross_entropy_bwd", "cross_entropy_scale_grad",
           "cross_entropy_train_bwd", "dx_predict_word"]

_REDUCTIONS = ("none", "sum", "mean")
_f32 = torch.float32


DX_STATE_FLOATS = 16  # quack::kCrossEntropyDxStateFloats
_PREDICT = {}  # device -> its prediction word (int32 (1,))


def dx_predict_word(device: torch.device) -> Optional[Tensor]:
    """The device's dx prediction word (int32 (1,), created holding 1 on first use): read on
    the device by a training forward (``predict_dx``: 0 = do not write dx), set on the device
    by ``cross_entropy_train_bwd`` to (grad_output == 1). Shared by every call on the device
    and every stream; a wrong or stale value costs one pass over M*V, never correctness (the
    forward records what it did). None while the current stream is being captured into a CUDA
    graph and the word does not exist yet (it is then made by the first call outside a
    capture; until then dx is always written)."""
    key = (device.type, device.index)
    w = _PREDICT.get(key)
    if w is None:
        if device.type == "cuda" and device.index is None:  # "cuda": the current device's
            return dx_predict_word(torch.device("cuda", torch.cuda.current_device()))
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            return None
        w = torch.ones(1, dtype=torch.int32, device=device)
        _PREDICT[key] = w
    return w


if _torch_ext is not None and hasattr(_torch_ext, "_ce_set_predict_word"):
    _torch_ext._ce_set_predict_word(dx_predict_word)  # the C++ path's words are these


def _loss_arg(t: Optional[Tensor], fn: str, name: str):
    """A loss-shaped output for _C: (M) as it is, a 0-d scalar as (1)."""
    if t is None:
        return None
    return scalar_arg(t, fn, name) if t.dim() == 0 else tensor_arg(t, fn, name)


# --------------------------------------------------------------------------------------------
# Ops
# --------------------------------------------------------------------------------------------


class CrossEntropyScaleGrad:
    name = "quack_cpp::cross_entropy_scale_grad"
    mutates_args = ("dx",)

    def signature(dx: Tensor, grad_output: Tensor) -> None:
        """dx *= grad_output in place (``quack::cross_entropy_scale_grad``), skipped on the
        device when grad_output is exactly 1 (no pass over dx). dx (M, V) fp32/fp16/bf16;
        grad_output one element (0-d or (1,)), fp32/fp16/bf16."""

    def impl(dx, grad_output):
        fn = "cross_entropy_scale_grad"
        _C.cross_entropy_scale_grad(tensor_arg(dx, fn, "dx"),
                                    scalar_arg(grad_output, fn, "grad_output"), stream(dx))

    def fake(dx, grad_output):
        if grad_output.numel() != 1:
            raise ValueError(f"cross_entropy_scale_grad: grad_output has {grad_output.numel()} "
                             "elements, expected 1")


class CrossEntropyBwd:
    name = "quack_cpp::cross_entropy_bwd"
    sharding = _dtensor.CROSS_ENTROPY_BWD  # DTensor placements (quack_cpp._dtensor)
    index_args = ("target",)
    eager_only = ("dx_into_x",)

    def signature(x: Tensor, target: Tensor, lse: Tensor, dloss: Tensor,
                  weight: Optional[Tensor], ignore_index: int, label_smoothing: float,
                  z_loss: float, logit_softcap: float, dx_into_x: bool = False) -> Tensor:
        """Cross-entropy backward from the logits and the forward's lse
        (``quack::cross_entropy_bwd``)::

            dx_ij = dloss_i * d loss_i / d x_ij     (the forward's options; fp32 math)

        x (M, V) fp32/fp16/bf16; target (M) int32/int64; lse (M); dloss (M), any stride (0
        too), or one element for every row; weight (V) fp32 or None. dx (M, V) in x's dtype:
        ignored rows exactly 0, rows with a target outside [0, V) NaN. ``dx_into_x`` (eager
        fast path only; the custom op has no such argument): dx is written into x's storage
        and x itself is returned (x's version counter bumped)."""

    def impl(x, target, lse, dloss, weight, ignore_index, label_smoothing, z_loss,
             logit_softcap, dx_into_x=False):
        fn = "cross_entropy_bwd"
        if x.dim() != 2:
            raise ValueError(f"{fn}: x has {x.dim()} dimensions {tuple(x.shape)}, expected 2 "
                             "(M, V)")
        dx = x if dx_into_x else x.new_empty(x.shape[0], x.shape[1])
        _C.cross_entropy_bwd(
            tensor_arg(x, fn, "x"), tensor_arg(target, fn, "target"), tensor_arg(lse, fn, "lse"),
            _loss_arg(dloss, fn, "dloss"), tensor_arg(dx, fn, "dx"),
            tensor_arg(weight, fn, "weight"), ignore_index, label_smoothing, z_loss,
            logit_softcap, stream(x))
        if dx_into_x:
            torch.autograd.graph.increment_version(x)
        return dx

    def fake(x, target, lse, dloss, weight, ignore_index, label_smoothing, z_loss,
             logit_softcap, dx_into_x=False):
        if x.dim() != 2:
            raise ValueError(f"cross_entropy_bwd: x has {x.dim()} dimensions, expected 2 (M, V)")
        return x.new_empty(x.shape[0], x.shape[1])


class CrossEntropyTrainBwd:
    name = "quack_cpp::cross_entropy_train_bwd"
    index_args = ("target",)
    eager_only = ("into_dx",)

    def signature(x: Tensor, target: Tensor, lse: Tensor, grad_output: Tensor, dx: Tensor,
                  dx_state: Tensor, weight: Optional[Tensor], ignore_index: int,
                  label_smoothing: float, z_loss: float, logit_softcap: float,
                  into_dx: bool = False) -> Tensor:
        """The backward of a ``cross_entropy_fwd`` call with ``predict_dx``
        (``quack::cross_entropy_train_bwd``), decided on the device from dx_state::

            the forward wrote dx:   grad = grad_output * dx
            it did not:             grad = grad_output * d loss / d x   (from x, target, lse;
                                    the forward's options and 'mean' denominators)

        then the device's prediction word (``dx_predict_word``) is set to grad_output == 1.
        x, target, lse, weight, dx, dx_state: the forward's (x unchanged since, unless dx is
        x); grad_output one element. Returns the gradient (M, V) in dx's dtype, a new tensor;
        ``into_dx`` (eager fast path only; the custom op has no such argument): written into
        dx itself, which is returned (its version counter bumped; nothing touched when the
        forward wrote dx and grad_output is 1)."""

    def impl(x, target, lse, grad_output, dx, dx_state, weight, ignore_index, label_smoothing,
             z_loss, logit_softcap, into_dx=False):
        fn = "cross_entropy_train_bwd"
        T = tensor_arg
        out = None if into_dx else torch.empty_like(dx, memory_format=torch.contiguous_format)
        _C.cross_entropy_train_bwd(
            T(x, fn, "x"), T(target, fn, "target"), T(lse, fn, "lse"),
            scalar_arg(grad_output, fn, "grad_output"), T(dx, fn, "dx"),
            T(dx_state, fn, "dx_state"), T(out, fn, "dx_out"),
            T(dx_predict_word(dx.device), fn, "dx_predict"), T(weight, fn, "weight"),
            ignore_index, label_smoothing, z_loss, logit_softcap, stream(dx))
        if into_dx:
            torch.autograd.graph.increment_version(dx)
            return dx
        return out

    def fake(x, target, lse, grad_output, dx, dx_state, weight, ignore_index, label_smoothing,
             z_loss, logit_softcap, into_dx=False):
        if grad_output.numel() != 1:
            raise ValueError(f"cross_entropy_train_bwd: grad_output has {grad_output.numel()} "
                             "elements, expected 1")
        return torch.empty_like(dx, memory_format=torch.contiguous_format)


class CrossEntropyFwd:
    name = "quack_cpp::cross_entropy_fwd"
    sharding = _dtensor.CROSS_ENTROPY_FWD  # DTensor placements (quack_cpp._dtensor)
    index_args = ("target",)
    eager_only = ("dx_into_x",)
    absent = (None, _f32, _f32, None, _f32)  # placeholder dtypes: lse, z, state fp32, dx x's
    # The C++ fast path (quack_cpp._torch.cross_entropy_fwd, node CrossEntropyFn): calls with
    # the logits and without lse_partial / target_logit; NotImplemented (this description's
    # Python fast path) for the rest and for a recorded backward from lse with 'mean'.
    eager = getattr(_torch_ext, "cross_entropy_fwd", None) if _torch_ext is not None else None
    eager_node = "CrossEntropyFn"

    def signature(x: Optional[Tensor], target: Tensor, weight: Optional[Tensor],
                  lse_partial: Optional[Tensor], target_logit: Optional[Tensor],
                  ignore_index: int, reduction: str, label_smoothing: float, z_loss: float,
                  logit_softcap: float, num_classes: int, want_lse: bool, want_z_loss: bool,
                  want_dx: bool, predict_dx: bool = False, dx_into_x: bool = False,
                  ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """Cross-entropy forward (``quack::cross_entropy_fwd``; formula, options and edge
        cases in include/quack/cross_entropy.h): per row i of the logits x (M, V), fp32 math::

            y = c*tanh(x/c) (logit_softcap c > 0, else y = x);  lse_i = log sum_j exp(y_ij)
            loss_i = (1-eps)*w[t_i]*(lse_i - y_i,t_i) + eps/V*sum_j w_j*(lse_i - y_ij)
                     + z_loss*lse_i^2

        ignored rows (t_i == ignore_index) 0; a target outside [0, V) gives a NaN row.
        'none': loss (M); 'sum' / 'mean': a 0-d loss ('mean': the CE part over the summed
        weights of the counted rows, the z part over their count; on the device). fp32.

        Returns ``(loss, lse, z_loss_part, dx, dx_state)``: lse (M) fp32 when ``want_lse``,
        the z-loss part (loss's shape, fp32) when ``want_z_loss``, dx (M, V) in x's dtype when
        ``want_dx`` (the gradient of loss for grad_output 1); a (0,) placeholder each when not
        asked. ``predict_dx`` (with want_dx, want_lse and 'sum'/'mean'): dx is written only
        where the device's prediction word (``dx_predict_word``, set by the last
        ``cross_entropy_train_bwd`` to grad_output == 1) is not 0, and dx_state (16,) fp32
        records what was done, for ``cross_entropy_train_bwd`` (else a placeholder).
        ``dx_into_x`` (eager fast path only; the custom op has no such argument): the gradient
        goes into x's storage: with ``want_dx`` here (dx returned as None; x's version counter
        bumped), else by the backward from lse (or ``cross_entropy_train_bwd``).

        x may be None when lse_partial (M, K) and target_logit (M) are given (num_classes is
        then V). Raises ValueError for a bad argument (the message names it)."""

    def outputs(x, target, weight, lse_partial, target_logit, ignore_index, reduction,
                label_smoothing, z_loss, logit_softcap, num_classes, want_lse, want_z_loss,
                want_dx, predict_dx=False, dx_into_x=False):
        fn = "cross_entropy_fwd"
        if target.dim() != 1:
            raise ValueError(f"{fn}: target has shape {tuple(target.shape)}, expected (M,)")
        M = target.shape[0]
        if x is not None and (x.dim() != 2 or x.shape[0] != M):
            raise ValueError(f"{fn}: x has shape {tuple(x.shape)}, expected (M, V) with M = "
                             f"{M} (target's length)")
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{fn}: reduction is '{reduction}', expected 'none', 'sum' or "
                             "'mean'")
        if want_dx and x is None:
            raise ValueError(f"{fn}: want_dx without x, expected the (M, V) logits")
        if predict_dx and not (want_dx and want_lse and reduction != "none"):
            raise ValueError(f"{fn}: predict_dx without want_dx, want_lse and reduction 'sum' "
                             "or 'mean', expected all three")
        new = target.new_empty
        loss = new(M, dtype=_f32) if reduction == "none" else new((), dtype=_f32)
        return (
            loss,
            new(M, dtype=_f32) if want_lse else None,
            (new(M, dtype=_f32) if reduction == "none" else new((), dtype=_f32))
            if want_z_loss else None,
            x.new_empty(M, x.shape[1]) if want_dx and not dx_into_x else None,
            new(DX_STATE_FLOATS, dtype=_f32) if predict_dx else None,
        )

    def launch(outs, x, target, weight, lse_partial, target_logit, ignore_index, reduction,
               label_smoothing, z_loss, logit_softcap, num_classes, want_lse, want_z_loss,
               want_dx, predict_dx=False, dx_into_x=False):
        fn = "cross_entropy_fwd"
        loss, lse, z, dx, state = outs
        predict = dx_predict_word(target.device) if predict_dx else None
        if dx_into_x and want_dx:
            dx = x
        T = tensor_arg
        t_target, t_weight = T(target, fn, "target"), T(weight, fn, "weight")
        ws_bytes = _C.cross_entropy_fwd_workspace_size(t_target, reduction, label_smoothing,
                                                       z_loss, t_weight)
        ws = target.new_empty(ws_bytes, dtype=torch.uint8) if ws_bytes else None
        _C.cross_entropy_fwd(
            T(x, fn, "x"), t_target, _loss_arg(loss, fn, "loss"), t_weight,
            T(lse_partial, fn, "lse_partial"), T(target_logit, fn, "target_logit"),
            T(lse, fn, "lse"), _loss_arg(z, fn, "z_loss"), T(dx, fn, "dx"), ignore_index,
            reduction, label_smoothing, z_loss, logit_softcap, num_classes,
            ws.data_ptr() if ws is not None else 0, ws_bytes, stream(target),
            T(state, fn, "dx_state"), T(predict, fn, "dx_predict"))
        if dx_into_x and want_dx:
            torch.autograd.graph.increment_version(x)

    def setup_context(ctx, inputs, output):
        (x, target, weight, lse_partial, target_logit, ignore_index, reduction, eps, zs, cap,
         V, want_lse, want_z, want_dx, predict_dx, dx_into_x) = inputs
        loss, lse, z, dx, state = output
        ctx.set_materialize_grads(False)
        ctx.mark_non_differentiable(*(t for t in (lse, z, dx, state) if t is not None))
        ctx.opts = (ignore_index, reduction, eps, zs, cap)
        ctx.inplace = dx_into_x
        if predict_dx:  # dx written or not (decided on the device): the training backward
            ctx.mode = "predict"
            ctx.save_for_backward(x, target, lse, weight, x if dx_into_x else dx, state)
        elif want_dx:  # the gradient for grad_output 1, in its own buffer or in x's storage
            ctx.mode = "dx"
            ctx.save_for_backward(x if dx_into_x else dx)
        elif x is not None:  # lse output asked by the caller (cross_entropy does)
            ctx.mode = "lse"
            ctx.V = x.shape[1]
            ctx.save_for_backward(x, target, lse, weight)
        else:
            ctx.mode = "partial"
            ctx.V = V
            ctx.save_for_backward(target, lse, weight, lse_partial)
            ctx.tl_dtype = target_logit.dtype if target_logit is not None else None

    def backward(ctx, dloss, _dlse, _dz, _ddx, _dstate):
        nones = (None,) * 15
        if dloss is None:
            return (None,) + nones
        ignore_index, reduction, eps, zs, cap = ctx.opts
        if ctx.mode == "predict":
            x, target, lse, weight, dx, state = ctx.saved_tensors
            if torch.is_grad_enabled():  # create_graph: a gradient that does not require
                x, dx = x.detach(), dx.detach()  # grad (differentiating it raises, never
                #                                  silently)
            # In place into the saved dx only in the last backward through this graph.
            into = not (functional_context(dx, dloss) or graph_retained())
            return (cross_entropy_train_bwd(x, target, lse, dloss, dx, state, weight,
                                            ignore_index, eps, zs, cap, into),) + nones
        if ctx.mode == "dx":
            (dx,) = ctx.saved_tensors
            # dx is a constant of the forward: a graph recorded through dx * dloss would miss
            # the loss's second derivative (zeros, silently).
            refuse_double_backward("cross_entropy", "the gradient was computed in the forward "
                                   "(want_dx) and saved, and is not differentiable")
            if functional_context(dx, dloss) or graph_retained():
                # The graph may be used again (or is traced): dx stays unscaled.
                return (dx * dloss,) + nones
            cross_entropy_scale_grad(dx, dloss)
            return (dx,) + nones
        if ctx.mode == "lse":
            x, target, lse, weight = ctx.saved_tensors
            g = dloss
            if reduction == "mean":
                g = dloss / _denominator(target, weight, ignore_index, ctx.V)
            inplace = (ctx.inplace and not functional_context(x, dloss)
                       and not graph_retained())
            dx = cross_entropy_bwd(x, target, lse, g, weight, ignore_index, eps, zs, cap,
                                   inplace)
            return (dx,) + nones
        target, lse, weight, lse_partial = ctx.saved_tensors
        dL, dtl = _partial_grads(dloss, target, lse, weight, lse_partial, ignore_index,
                                 reduction, zs, ctx.V)
        return (None, None, None, dL.to(lse_partial.dtype),
                dtl.to(ctx.tl_dtype) if ctx.tl_dtype is not None else None) + (None,) * 11


cross_entropy_scale_grad = register(CrossEntropyScaleGrad)
cross_entropy_bwd = register(CrossEntropyBwd)
cross_entropy_train_bwd = register(CrossEntropyTrainBwd)
cross_entropy_fwd = register(CrossEntropyFwd)


def _counted(target: Tensor, ignore_index: int, V: int) -> Tuple[Tensor, Tensor]:
    """(counted, bad) row masks: a target in [0, V) that is not ignore_index; a target outside
    [0, V) that is not ignore_index."""
    kept = target != ignore_index
    inside = (target >= 0) & (target < V)
    return kept & inside, kept & ~inside


def _denominator(target: Tensor, weight: Optional[Tensor], ignore_index: int, V: int) -> Tensor:
    """The mean's denominator on the device (0-d fp32): the summed class weights of the counted
    rows, their count without weights."""
    counted, _ = _counted(target, ignore_index, V)
    if weight is None:
        return counted.sum(dtype=_f32)
    w_t = weight.float()[target.clamp(0, max(V - 1, 0))]
    return torch.where(counted, w_t, 0.0).sum(dtype=_f32)


def _partial_grads(dloss, target, lse, weight, lse_partial, ignore_index, reduction, zs, V):
    """Gradients of lse_partial (M, K) and target_logit (M) when the logits are absent
    (loss_i = w[t_i]*(lse_i - tl_i) + zs*lse_i^2, lse_i = logsumexp_k lse_partial_ik), with
    torch ops on the device: d lse_partial_ik = a_i * softmax_k(lse_partial_i), d tl_i = -b_i,
    b_i = s_ce_i * w[t_i], a_i = b_i + s_z_i * 2*zs*lse_i over counted rows; NaN rows for
    targets outside [0, V), as the kernels."""
    counted, bad = _counted(target, ignore_index, V)
    g = dloss.float()
    if reduction == "mean":
        s_ce = g / _denominator(target, weight, ignore_index, V)
        s_z = g / counted.sum(dtype=_f32)
    else:
        s_ce = s_z = g
    w_t = weight.float()[target.clamp(0, max(V - 1, 0))] if weight is not None else 1.0
    b = torch.where(counted, s_ce * w_t, 0.0)
    a = b + torch.where(counted, s_z * (2.0 * zs) * lse, 0.0) if zs != 0.0 else b
    nan = float("nan")
    a, b = torch.where(bad, nan, a), torch.where(bad, nan, b)
    p = torch.exp(lse_partial.float() - lse[:, None])
    return a[:, None] * p, -b


# --------------------------------------------------------------------------------------------
# Functional API
# --------------------------------------------------------------------------------------------


def cross_entropy(
    logits: Optional[Tensor],
    target: Tensor,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    weight: Optional[Tensor] = None,
    z_loss: float = 0.0,
    return_z_loss: bool = False,
    logit_softcap: Optional[float] = None,
    return_lse: bool = False,
    inplace_backward: bool = False,
    lse_partial: Optional[Tensor] = None,
    target_logit: Optional[Tensor] = None,
    num_classes: Optional[int] = None,
) -> Union[Tensor, Tuple[Tensor, ...]]:
    """Cross-entropy loss of logits (M, V) against class indices (M), differentiable, with the
    options of ``torch.nn.functional.cross_entropy`` (ignore_index, reduction, label_smoothing,
    weight), Liger-Kernel's (z-loss, logit softcap) and QuACK's (lse_partial, target_logit,
    inplace_backward). One read of the logits (online logsumexp), fp32 math
    (``quack::cross_entropy_fwd``; the formula and every edge case: include/quack/cross_entropy.h)::

        y_ij   = c*tanh(x_ij/c)   (logit_softcap = c), else y = x
        lse_i  = log sum_j exp(y_ij)
        CE_i   = (1-eps)*w[t_i]*(lse_i - y_i,t_i) + (eps/V)*sum_j w_j*(lse_i - y_ij)
        z_i    = z_loss * lse_i^2
        'none': CE_i + z_i;  'sum': sum_i (CE_i + z_i);
        'mean': sum_i CE_i / sum_counted w[t_i] + sum_i z_i / #counted

    A row counts when its target is in [0, V) and is not ignore_index; ignored rows have loss 0
    and a gradient row of exactly 0. A target outside [0, V) that is not ignore_index gives that
    row a NaN loss and a NaN gradient row (so 'sum'/'mean' are NaN; the host cannot see it
    without a sync); nothing is read out of bounds. No counted row: 'mean' NaN (torch's 0/0),
    'sum' 0, and the gradient is exactly 0.

    Args:
        logits: (M, V) float32/float16/bfloat16 on a CUDA device, any strides (None only with
            lse_partial and target_logit, see below).
        target: (M,) int32 or int64 class indices (torch's (N, C) case; class probabilities
            and (N, C, d1, ...) inputs are not taken).
        ignore_index: rows with this target are ignored (default -100).
        reduction: 'none' | 'sum' | 'mean' (default).
        label_smoothing: eps in [0, 1] (torch's definition).
        weight: (V,) class weights (torch's semantics; cast to float32), or None.
        z_loss: scale of the z-loss lse^2 added per counted row (0: none).
        return_z_loss: also return the z-loss part (the same reduction; included in the loss).
        logit_softcap: c > 0: every logit becomes c*tanh(x/c) first (Gemma-2); None: none.
        return_lse: also return lse (M,) float32, the true logsumexp of every row (of the
            softcapped logits), ignored rows included.
        inplace_backward: write the gradient into the logits' storage instead of a new (M, V)
            buffer (QuACK's and Liger-Kernel's option; saves M*V memory). Eager mode only. The
            backward writes it, from the logits and lse (QuACK's scheme: the forward reads the
            logits, the backward reads and writes them; every reduction), so the logits keep
            their values until the backward and then hold the gradient; their version counter
            is bumped there, so autograd raises (never a silent wrong gradient) if another op
            saved them for a backward that runs later (cases/handed.md C08). Without it,
            'mean'/'sum' take the predicted gradient in the forward. Under torch.compile, in
            a backward that keeps the graph (retain_graph), and for 'mean' with class weights
            and a z-loss together (two denominators the backward from lse cannot apply), a
            fresh buffer is used.
        lse_partial: (M, K) partial logsumexps of K column chunks of the row (e.g. from a GEMM
            epilogue): lse = log sum_k exp(lse_partial_ik) (QuACK's semantics); the target's
            logit is read from the logits (or target_logit). With it, label_smoothing and
            logit_softcap raise (they need every logit). The gradient goes to the logits as if
            lse had been computed from them (lse_partial is a summary of the logits and gets
            none); 'mean' with both class weights and a z-loss raises (two device-side
            denominators the backward from lse cannot apply at once).
        target_logit: (M,) the target's logit supplied instead of read from the logits (the
            building block of vocabulary-parallel cross-entropy). With logits given it is taken
            as logits[i, t_i] (the gradient goes to the logits; it gets none).
        num_classes: V when logits is None (then lse_partial and target_logit are required and
            receive the gradients: d lse_partial = a_i*softmax(lse_partial_i),
            d target_logit = -w[t_i]*s_i); ignored otherwise (V is the logits').

    Returns:
        loss (0-d for 'sum'/'mean', (M,) for 'none'), float32 whatever the logits' dtype (as
        QuACK and Liger-Kernel; torch returns the logits' dtype outside autocast, float32 under
        it); then lse if ``return_lse``; then the z-loss part if ``return_z_loss`` (a tuple
        when either is asked). lse and the z-loss part are not differentiable (for logging and
        reuse; a loss built from them gets no gradient through them).

    Gradient: d logits in the logits' dtype (float32 math). 'mean'/'sum': computed in the
    forward for grad_output = 1 when the previous training backward on the device had
    grad_output 1 (then the backward does not touch it when grad_output is exactly 1, and
    rescales it otherwise), else computed in the backward from the logits (decided on the
    device; see quack_cpp.cross_entropy_ops); 'none': the backward from lse. No ``.item()``
    and no host sync anywhere: CUDA-graph capturable. Under autocast it behaves as torch's cross_entropy (an op
    of autocast's float32 list): float32 loss, gradient in the logits' dtype; the kernels read
    16-bit logits as they are (no float32 copy). See quack_cpp.cross_entropy_ops for the paths.

    Raises:
        ValueError: a bad argument (shape, dtype, device, option value or combination); the
            message names it.
    """
    fn = "cross_entropy"
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{fn}: reduction is '{reduction}', expected 'none', 'sum' or 'mean'")
    if torch.is_tensor(weight) and weight.dtype == torch.float64:
        weight = weight.float()  # the documented cast to float32, on every path (the kernels
        # read float32, float16 or bfloat16 weights)
    path = route_index(route(logits, lse_partial, target_logit, weight), target)
    x_given = logits is not None
    if path == CUSTOM:  # on the fast path these hold: plain CUDA tensors of the right dtypes
        check_float(fn, logits, "logits")
        check_float(fn, lse_partial, "lse_partial")
        check_float(fn, target_logit, "target_logit")
        check_float(fn, weight, "weight")
        check_index(fn, target, "target")
        need_grad = (records_grad(logits) if x_given
                     else records_grad(lse_partial, target_logit))
        # The inputs that get no gradient are detached, as on the eager paths: else autograd
        # would record the op for one of them alone (weight, or lse_partial / target_logit
        # beside the logits), and its backward would find no lse saved (want_lse follows
        # need_grad).
        if weight is not None:
            weight = weight.detach()
        if x_given:
            lse_partial = lse_partial.detach() if lse_partial is not None else None
            target_logit = target_logit.detach() if target_logit is not None else None
    elif path == EAGER_GRAD:
        need_grad = (logits.requires_grad if x_given
                     else records_grad(lse_partial, target_logit))
        if not need_grad:  # only the weight requires grad: it gets none (as torch's); detached,
            path = EAGER   # the C++ fast path records nothing either
            if weight is not None:
                weight = weight.detach()
    else:
        need_grad = False
    if x_given:
        if logits.dim() != 2:
            raise ValueError(f"{fn}: logits has shape {tuple(logits.shape)}, expected (M, V) "
                             "(flatten leading dims: logits.view(-1, V), target.view(-1))")
        V = -1
    else:
        if lse_partial is None or target_logit is None or num_classes is None:
            raise ValueError(f"{fn}: logits is None, expected lse_partial, target_logit and "
                             "num_classes (V) given")
        V = int(num_classes)
    if weight is not None and weight.dtype != _f32:
        weight = weight.float()
    cap = 0.0 if logit_softcap is None else float(logit_softcap)
    if logit_softcap is not None and not cap > 0.0:
        raise ValueError(f"{fn}: logit_softcap is {logit_softcap}, expected > 0 or None")
    # inplace_backward: the gradient goes into the logits in the backward only (from lse), so
    # they keep their values until then, and an op that saved them for its own backward raises
    # at the version bump instead of reading the gradient (cases/handed.md C08).
    # 'mean' with class weights and a z-loss is left to the predicted path in a fresh buffer:
    # the backward from lse divides both parts by one denominator (the CE part's summed weights),
    # where the z part's is the count.
    inplace = (bool(inplace_backward) and path != CUSTOM
               and not (reduction == "mean" and weight is not None and z_loss != 0.0))
    want_dx = (need_grad and x_given and reduction != "none" and lse_partial is None
               and not inplace)
    # The predicted gradient (dx written in the forward only where the last backward had
    # grad_output 1): everywhere but on DTensors (their rules keep the rescale path).
    predict = want_dx and not _dtensor.is_dtensor(logits)
    want_lse = return_lse or (need_grad and not want_dx) or predict
    if (need_grad and x_given and lse_partial is not None and reduction == "mean"
            and weight is not None and z_loss != 0.0):
        raise ValueError(f"{fn}: a gradient through lse_partial with reduction='mean', class "
                         "weights and z_loss together is not supported (the CE and z parts "
                         "have different device-side denominators); drop one of them or use "
                         "reduction='sum' and divide")
    dx_into_x = inplace and need_grad and x_given
    loss, lse, z, _, _ = cross_entropy_fwd.run(
        path, logits, target, weight, lse_partial, target_logit, int(ignore_index), reduction,
        float(label_smoothing), float(z_loss), cap, V, want_lse, bool(return_z_loss), want_dx,
        predict, dx_into_x)
    if not (return_lse or return_z_loss):
        return loss
    out = (loss,)
    if return_lse:
        out += (lse,)
    if return_z_loss:
        out += (z,)
    return out
