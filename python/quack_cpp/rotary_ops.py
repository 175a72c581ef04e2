"""Rotary position embedding (RoPE) for torch tensors on the QuACK-C++ kernel
(``include/quack/rotary.h``): the op descriptions and the functional API.

- ``apply_rotary_emb(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0)``: x
  (B, S, H, D), differentiable;
- ``apply_rotary_emb_qkv(qkv, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0)``:
  a packed qkv (B, S, 3, H, D) (the fused qkv Linear's output viewed so): q and k rotated, v
  copied, one launch, differentiable;
- ``apply_rotary_emb_qkv_split(qkv, cos, sin, interleaved=False, seqlen_offsets=0)``: the same
  rotation of a packed qkv returned as three separate contiguous (B, S, H, D) tensors q, k, v
  (``q.transpose(1, 2)`` is SDPA's (B, H, S, D) view, no copy); its backward writes the packed
  (B, S, 3, H, D) gradient from dq, dk, dv in one launch (no unbind / stack of the gradients);
- ``rotary`` / ``rotary_inplace``: the ops, registered by ``quack_cpp._registrar`` as the custom
  ops ``torch.ops.quack_cpp.rotary`` (functional; its backward is itself with the rotation
  inverted) and ``torch.ops.quack_cpp.rotary_inplace`` (mutates x; not differentiable);
- ``rotary_qkv_split`` / ``rotary_qkv_pack``: the custom ops ``torch.ops.quack_cpp.
  rotary_qkv_split`` (packed qkv -> q, k, v; backward: rotary_qkv_pack) and ``rotary_qkv_pack``
  (dq, dk, dv, each optional -> the packed gradient, ``quack::rotary_qkv_pack``; backward:
  rotary_qkv_split), each the other's transpose.

The names and argument conventions are flash-attn's ``flash_attn.layers.rotary``
(``apply_rotary_emb``, ``apply_rotary_emb_qkv_``) and QuACK's rotary ops: cos and sin of shape
(seqlen_ro, rotary_dim / 2), the leading rotary_dim of each head rotated, the rest passed
through; ``interleaved=True`` rotates adjacent pairs (x[2i], x[2i+1]) by angle i (GPT-J)
instead of the halves (x[i], x[i + R/2]). Differences: ``seqlen_offsets`` an int (no per-batch tensor, no cu_seqlens), no gradient for cos and sin, ``apply_rotary_emb_qkv``
out of place by default (flash-attn's ``apply_rotary_emb_qkv_`` is in place) and for MHA
only (equal heads for q, k, v; GQA layouts go through the C++ API with separate k and v).
"""

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _C
from . import _registrar as _reg
from ._registrar import (FLOAT_DTYPES, dtype_name, records_grad, register, stream,
                         tensor_arg)

__all__ = ["apply_rotary_emb", "apply_rotary_emb_qkv", "apply_rotary_emb_qkv_split", "rotary",
           "rotary_inplace", "rotary_qkv_split", "rotary_qkv_pack"]

_FORMULA = """With R = 2 * cos.shape[1] (rotary_dim), for each head vector x (D) at position
        p = s + seqlen_offset, x1 = x[:R/2], x2 = x[R/2:R], c = cos[p], s = sin[p] (-sin[p] when
        conjugate)::

            out[:R/2]  = x1 * c - x2 * s
            out[R/2:R] = x2 * c + x1 * s
            out[R:]    = x[R:]

        or with ``interleaved`` the adjacent pairs, for i < R/2::

            out[2i]   = x[2i] * c[i] - x[2i+1] * s[i]
            out[2i+1] = x[2i+1] * c[i] + x[2i] * s[i]

        fp32 math, one rounding to x's dtype."""


def _check(fn: str, x: Tensor, cos: Tensor, sin: Tensor, qkv: bool, x_name: str = "x") -> None:
    """What the fake kernel must raise too (the C++ checks the rest on real tensors). fn and
    x_name: the function and argument the caller called and passed (apply_rotary_emb_qkv's
    qkv), or the op's own ("rotary", x)."""
    nd = 5 if qkv else 4
    if x.dim() != nd:
        want = "(B, S, 3, H, D)" if qkv else "(B, S, H, D)"
        raise ValueError(f"{fn}: {x_name} has {x.dim()} dimensions {tuple(x.shape)}, expected "
                         f"{nd} {want}")
    if qkv and x.shape[2] != 3:
        raise ValueError(f"{fn}: {x_name} has shape {tuple(x.shape)}, expected (B, S, 3, H, D)")
    if x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"{fn}: {x_name} has dtype {dtype_name(x.dtype)}, expected float32, "
                         "float16 or bfloat16")
    for name, t in (("cos", cos), ("sin", sin)):
        if t.dim() != 2:
            raise ValueError(f"{fn}: {name} has {t.dim()} dimensions {tuple(t.shape)}, expected "
                             "2 (seqlen_ro, rotary_dim / 2)")
        if t.dtype != torch.float32:
            raise ValueError(f"{fn}: {name} has dtype {dtype_name(t.dtype)}, expected float32")
    if 2 * cos.shape[1] > x.shape[-1]:
        raise ValueError(f"{fn}: cos has shape {tuple(cos.shape)}: rotary_dim = "
                         f"{2 * cos.shape[1]}, expected rotary_dim <= D = {x.shape[-1]}")


def _unit_last(t: Tensor) -> Tensor:
    return t if t.shape[-1] <= 1 or t.stride(-1) == 1 else t.contiguous()


def _launch(fn: str, x: Tensor, out: Tensor, cos: Tensor, sin: Tensor, seqlen_offset: int,
            conjugate: bool, qkv: bool, interleaved: bool) -> None:
    if qkv:  # q, k, v: the three (B, S, H, D) slices (the C++ API's tensors are 4-D at most)
        xs = [tensor_arg(x.select(2, i), fn, n) for i, n in enumerate(("q", "k", "v"))]
        os = [tensor_arg(out.select(2, i), fn, n) for i, n in enumerate(("q_out", "k_out",
                                                                          "v_out"))]
    else:
        xs = [tensor_arg(x, fn, "q"), None, None]
        os = [tensor_arg(out, fn, "q_out"), None, None]
    _C.apply_rotary(xs[0], os[0], xs[1], os[1], xs[2], os[2], tensor_arg(cos, fn, "cos"),
                    tensor_arg(sin, fn, "sin"), seqlen_offset, conjugate, stream(x), interleaved)


class Rotary:
    name = "quack_cpp::rotary"

    def signature(x: Tensor, cos: Tensor, sin: Tensor, seqlen_offset: int, conjugate: bool,
                  qkv: bool, interleaved: bool = False) -> Tensor:
        pass

    signature.__doc__ = f"""Rotary position embedding (``quack::apply_rotary``), out of place. x: (B, S, H, D), or with ``qkv`` (B, S, 3, H, D) whose slice 2 (v) is
        copied unchanged; fp32/fp16/bf16, any strides (a D stride other than 1 is copied
        first). cos, sin: (seqlen_ro, rotary_dim / 2) fp32, S + seqlen_offset <= seqlen_ro.
        Returns a contiguous tensor of x's shape and dtype. {_FORMULA}
        Backward: the same op on the gradient with ``conjugate`` flipped (the inverse
        rotation); no gradient for cos and sin. Raises ValueError for a bad argument."""

    def outputs(x, cos, sin, seqlen_offset, conjugate, qkv, interleaved):
        _check("rotary", x, cos, sin, qkv)
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    def launch(out, x, cos, sin, seqlen_offset, conjugate, qkv, interleaved):
        _launch("rotary", _unit_last(x), out, cos, sin, seqlen_offset, conjugate, qkv,
                interleaved)

    def setup_context(ctx, inputs, output):
        _, cos, sin, seqlen_offset, conjugate, qkv, interleaved = inputs
        ctx.save_for_backward(cos, sin)
        ctx.args = (seqlen_offset, not conjugate, qkv, interleaved)

    def backward(ctx, dy):
        cos, sin = ctx.saved_tensors
        dx = rotary(dy, cos, sin, *ctx.args) if ctx.needs_input_grad[0] else None
        return dx, None, None, None, None, None, None


rotary = register(Rotary)


class RotaryInplace:
    name = "quack_cpp::rotary_inplace"
    mutates_args = ("x",)

    def signature(x: Tensor, cos: Tensor, sin: Tensor, seqlen_offset: int, conjugate: bool,
                  qkv: bool, interleaved: bool = False) -> None:
        """``rotary`` written into x itself (``torch.ops.quack_cpp.rotary_inplace``); with
        ``qkv`` the v slice is left as it is. x needs a D stride of 1. Not differentiable.
        Raises ValueError for a bad argument."""

    def impl(x, cos, sin, seqlen_offset, conjugate, qkv, interleaved):
        _check("rotary_inplace", x, cos, sin, qkv)
        if x.shape[-1] > 1 and x.stride(-1) != 1:
            raise ValueError(f"rotary_inplace: x has strides {tuple(x.stride())}, expected a "
                             "last (D) stride of 1")
        _launch("rotary_inplace", x, x, cos, sin, seqlen_offset, conjugate, qkv, interleaved)

    def fake(x, cos, sin, seqlen_offset, conjugate, qkv, interleaved):
        _check("rotary_inplace", x, cos, sin, qkv)


rotary_inplace = register(RotaryInplace)


class RotaryQkvSplit:
    name = "quack_cpp::rotary_qkv_split"

    def signature(qkv: Tensor, cos: Tensor, sin: Tensor, seqlen_offset: int,
                  conjugate: bool, interleaved: bool = False) -> Tuple[Tensor, Tensor, Tensor]:
        pass

    signature.__doc__ = f"""Rotary position embedding of a packed qkv, split
        (``quack::apply_rotary`` with q, k, v the slices of qkv and three separate outputs),
        one launch. qkv: (B, S, 3, H, D) fp32/fp16/bf16, any strides (a D stride other than 1
        is copied first). cos, sin: (seqlen_ro, rotary_dim / 2) fp32, S + seqlen_offset <=
        seqlen_ro. Returns q, k, v: three contiguous (B, S, H, D) tensors in qkv's dtype, q and
        k rotated, v a copy. {_FORMULA}
        Backward: ``rotary_qkv_pack`` of (dq, dk, dv) with ``conjugate`` flipped (one launch
        writing the packed gradient; a None gradient counts as zeros); no gradient for cos and
        sin. Raises ValueError for a bad argument."""

    def outputs(qkv, cos, sin, seqlen_offset, conjugate, interleaved):
        _check("rotary_qkv_split", qkv, cos, sin, True)
        B, S, _, H, D = qkv.shape
        return tuple(torch.empty((B, S, H, D), dtype=qkv.dtype, device=qkv.device)
                     for _ in range(3))

    def launch(out, qkv, cos, sin, seqlen_offset, conjugate, interleaved):
        fn = "rotary_qkv_split"
        x = _unit_last(qkv)
        xs = [tensor_arg(x.select(2, i), fn, n) for i, n in enumerate(("q", "k", "v"))]
        os = [tensor_arg(o, fn, n) for o, n in zip(out, ("q_out", "k_out", "v_out"))]
        _C.apply_rotary(xs[0], os[0], xs[1], os[1], xs[2], os[2], tensor_arg(cos, fn, "cos"),
                        tensor_arg(sin, fn, "sin"), seqlen_offset, conjugate, stream(qkv),
                        interleaved)

    def setup_context(ctx, inputs, output):
        _, cos, sin, seqlen_offset, conjugate, interleaved = inputs
        ctx.save_for_backward(cos, sin)
        ctx.args = (seqlen_offset, not conjugate, interleaved)
        ctx.set_materialize_grads(False)  # an unused q, k or v: None, no zeros tensor

    def backward(ctx, dq, dk, dv):
        cos, sin = ctx.saved_tensors
        dqkv = None
        if ctx.needs_input_grad[0] and (dq is not None or dk is not None or dv is not None):
            dqkv = rotary_qkv_pack(dq, dk, dv, cos, sin, *ctx.args)
        return dqkv, None, None, None, None, None


rotary_qkv_split = register(RotaryQkvSplit)


def _pack_like(dq: Optional[Tensor], dk: Optional[Tensor], dv: Optional[Tensor],
               cos: Tensor, sin: Tensor) -> Tensor:
    """The first gradient given, after the checks the fake kernel must raise too."""
    fn = "rotary_qkv_pack"
    given = [(n, t) for n, t in (("dq", dq), ("dk", dk), ("dv", dv)) if t is not None]
    if not given:
        raise ValueError(f"{fn}: dq, dk and dv are all None, expected at least one tensor")
    name0, like = given[0]
    _check(fn, like, cos, sin, False)
    for name, t in given[1:]:
        if t.shape != like.shape or t.dtype != like.dtype or t.device != like.device:
            raise ValueError(f"{fn}: {name} is {tuple(t.shape)} {dtype_name(t.dtype)} on "
                             f"{t.device}, expected {name0}'s {tuple(like.shape)} "
                             f"{dtype_name(like.dtype)} on {like.device}")
    return like


class RotaryQkvPack:
    name = "quack_cpp::rotary_qkv_pack"

    def signature(dq: Optional[Tensor], dk: Optional[Tensor], dv: Optional[Tensor], cos: Tensor,
                  sin: Tensor, seqlen_offset: int, conjugate: bool,
                  interleaved: bool = False) -> Tensor:
        pass

    signature.__doc__ = f"""The packed gradient of ``rotary_qkv_split``
        (``quack::rotary_qkv_pack``), one launch: out[:, :, 0] = rot(dq), out[:, :, 1] =
        rot(dk), out[:, :, 2] = dv, a None input giving zeros (at least one given). dq, dk, dv:
        (B, S, H, D), one shape, dtype (fp32/fp16/bf16) and device, any strides (a D stride
        other than 1 is copied first). cos, sin as ``rotary``; rot is its formula with
        ``conjugate`` (True for the backward of a forward rotation) and ``interleaved`` (the
        pair layout). Returns a contiguous
        (B, S, 3, H, D) tensor. {_FORMULA}
        Backward: ``rotary_qkv_split`` with ``conjugate`` flipped. Raises ValueError for a bad
        argument."""

    def outputs(dq, dk, dv, cos, sin, seqlen_offset, conjugate, interleaved):
        like = _pack_like(dq, dk, dv, cos, sin)
        B, S, H, D = like.shape
        return torch.empty((B, S, 3, H, D), dtype=like.dtype, device=like.device)

    def launch(out, dq, dk, dv, cos, sin, seqlen_offset, conjugate, interleaved):
        fn = "rotary_qkv_pack"
        B, S, _, H, D = out.shape
        grads = [None if t is None else tensor_arg(_unit_last(t), fn, n)
                 for t, n in ((dq, "dq"), (dk, "dk"), (dv, "dv"))]
        _C.rotary_qkv_pack(grads[0], grads[1], grads[2],
                           tensor_arg(out.view(B, S, 3 * H, D), fn, "dqkv"),
                           tensor_arg(cos, fn, "cos"), tensor_arg(sin, fn, "sin"),
                           seqlen_offset, conjugate, stream(out), interleaved)

    def setup_context(ctx, inputs, output):
        _, _, _, cos, sin, seqlen_offset, conjugate, interleaved = inputs
        ctx.save_for_backward(cos, sin)
        ctx.args = (seqlen_offset, not conjugate, interleaved)

    def backward(ctx, dqkv):
        cos, sin = ctx.saved_tensors
        need = ctx.needs_input_grad
        if not (need[0] or need[1] or need[2]):
            return None, None, None, None, None, None, None, None
        d = rotary_qkv_split(dqkv, cos, sin, *ctx.args)
        return (d[0] if need[0] else None, d[1] if need[1] else None,
                d[2] if need[2] else None, None, None, None, None, None)


rotary_qkv_pack = register(RotaryQkvPack)


def _tables(fn: str, x: Tensor, cos: Tensor, sin: Tensor, seqlen_offsets, qkv: bool,
            x_name: str):
    """The functional APIs' checks, named by the public function fn and x's argument name
    x_name (the ops would name themselves and x); cos and sin as fp32."""
    if isinstance(seqlen_offsets, Tensor) or not isinstance(seqlen_offsets, int):
        raise ValueError(f"{fn}: seqlen_offsets is {type(seqlen_offsets).__name__}, expected an "
                         "int (per-batch offsets are not supported)")
    for name, t in ((x_name, x), ("cos", cos), ("sin", sin)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}: {name} is {type(t).__name__}, expected a torch.Tensor")
        if t.device.type not in _reg.DEVICE_TYPES:  # read per call (the CPU stand-ins add cpu)
            raise ValueError(f"{fn}: {name} is on {t.device}, expected a CUDA tensor")
    if cos.dtype != torch.float32 and cos.dtype in FLOAT_DTYPES:
        cos = cos.float()  # exact
    if sin.dtype != torch.float32 and sin.dtype in FLOAT_DTYPES:
        sin = sin.float()
    _check(fn, x, cos, sin, qkv, x_name)
    return cos, sin


def _run(fn: str, x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool, inplace: bool,
         seqlen_offsets, conjugate: bool, qkv: bool, x_name: str) -> Optional[Tensor]:
    cos, sin = _tables(fn, x, cos, sin, seqlen_offsets, qkv, x_name)
    if inplace:
        if records_grad(x):
            raise ValueError(f"{fn}: inplace=True is not differentiable and {x_name} requires "
                             "grad; use inplace=False")
        rotary_inplace(x, cos, sin, seqlen_offsets, conjugate, qkv, bool(interleaved))
        return x
    return rotary(x, cos, sin, seqlen_offsets, conjugate, qkv, bool(interleaved))


def apply_rotary_emb(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False,
                     inplace: bool = False, seqlen_offsets: int = 0,
                     conjugate: bool = False) -> Tensor:
    """Rotary position embedding of x, non-interleaved (GPT-NeoX / Llama ``rotate_half``) or
    interleaved (GPT-J: adjacent pairs), on one kernel (``quack::apply_rotary``; flash-attn's ``apply_rotary_emb`` conventions).

    With R = 2 * cos.shape[1] (rotary_dim <= D), for each head vector x[b, s, h] at position
    p = s + seqlen_offsets, x1 = x[..., :R/2], x2 = x[..., R/2:R]::

        out[..., :R/2]  = x1 * cos[p] - x2 * sin[p]
        out[..., R/2:R] = x2 * cos[p] + x1 * sin[p]
        out[..., R:]    = x[..., R:]

    i.e. ``x * cat(cos, cos) + rotate_half(x) * cat(sin, sin)`` over the first R columns, in fp32
    (one rounding to x's dtype). ``interleaved=True`` rotates the adjacent pairs instead: for
    i < R/2, out[..., 2i] = x[..., 2i] * cos[p, i] - x[..., 2i+1] * sin[p, i] and
    out[..., 2i+1] = x[..., 2i+1] * cos[p, i] + x[..., 2i] * sin[p, i] (flash-attn's
    interleaved=True). ``conjugate=True`` rotates by -angle (the inverse).

    Args:
        x: (B, S, H, D) float32, float16 or bfloat16 on a CUDA device; any strides (fastest
            with D contiguous and 16-byte aligned rows: D and R/2 multiples of 8 for 16-bit
            dtypes, of 4 for float32).
        cos, sin: (seqlen_ro, R/2), float32 (a 16-bit table is upcast, exactly), any strides;
            S + seqlen_offsets <= seqlen_ro.
        interleaved: rotate adjacent pairs (x[2i], x[2i+1]) by angle i (GPT-J) instead of the
            halves (x[i], x[i + R/2]).
        inplace: write the result into x and return x (not differentiable).
        seqlen_offsets: an int, the position of s = 0 (KV-cache decoding).
        conjugate: rotate by -angle.

    Returns:
        out, (B, S, H, D) contiguous in x's dtype (x itself when ``inplace``). Backward: the
        inverse rotation of the gradient (the same kernel); no gradient for cos and sin.

    Raises:
        ValueError: a bad shape, dtype, device or option (the message names it).
    """
    return _run("apply_rotary_emb", x, cos, sin, interleaved, inplace, seqlen_offsets,
                conjugate, False, "x")


def apply_rotary_emb_qkv(qkv: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False,
                         inplace: bool = False, seqlen_offsets: int = 0) -> Tensor:
    """Rotary position embedding of q and k in a packed qkv (B, S, 3, H, D) tensor, v copied,
    in one kernel launch (``quack::apply_rotary`` with q, k, v the three slices; QuACK's QKV
    rotary, flash-attn's ``apply_rotary_emb_qkv_`` conventions). The formula is
    ``apply_rotary_emb``'s, applied to qkv[:, :, 0] and qkv[:, :, 1].

    Args:
        qkv: (B, S, 3, H, D) float32, float16 or bfloat16 on a CUDA device, any strides (e.g.
            the fused qkv Linear's (B, S, 3 * H * D) output viewed so, or autograd's stacked
            gradient); fastest with D contiguous and 16-byte aligned rows.
        cos, sin, interleaved, seqlen_offsets: as ``apply_rotary_emb``.
        inplace: rotate q and k inside qkv (v untouched) and return qkv (not differentiable).

    Returns:
        (B, S, 3, H, D) contiguous in qkv's dtype: rotated q, rotated k, v (qkv itself when
        ``inplace``); ``out.transpose(1, 3).unbind(2)`` gives q, k, v as (B, H, S, D) views
        for ``F.scaled_dot_product_attention``. Backward: the inverse rotation of dq and dk,
        dv passed through, in one launch.

    Raises:
        ValueError: a bad shape, dtype, device or option (the message names it).
    """
    return _run("apply_rotary_emb_qkv", qkv, cos, sin, interleaved, inplace, seqlen_offsets,
                False, True, "qkv")


def apply_rotary_emb_qkv_split(qkv: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False,
                               seqlen_offsets: int = 0) -> Tuple[Tensor, Tensor, Tensor]:
    """``apply_rotary_emb_qkv``'s rotation of a packed qkv (B, S, 3, H, D), returned as three
    separate tensors, one kernel launch each way (``quack::apply_rotary`` forward,
    ``quack::rotary_qkv_pack`` backward).

    Layout: q, k, v are contiguous (B, S, H, D), the layout of the packed input without its 3
    axis, so ``q.transpose(1, 2)`` is the (B, H, S, D) view that
    ``F.scaled_dot_product_attention`` takes (D contiguous: no copy) and that the packed op's
    ``out.transpose(1, 3).unbind(2)`` gave. The point is the backward: the packed op's
    callers unbind, and autograd then stacks dq, dk, dv into a (B, S, 3, H, D) gradient (a
    copy of all three) before the rotary backward reads it again; here the backward reads dq,
    dk, dv where they are and writes the packed gradient once (the qkv Linear's output
    gradient). An unused output's gradient (None) counts as zeros, with no zeros tensor made.

    Args:
        qkv: (B, S, 3, H, D) float32, float16 or bfloat16 on a CUDA device, any strides (e.g.
            the fused qkv Linear's (B, S, 3 * H * D) output viewed so); fastest with D
            contiguous and 16-byte aligned rows.
        cos, sin, interleaved, seqlen_offsets: as ``apply_rotary_emb``.

    Returns:
        (q, k, v), each (B, S, H, D) contiguous in qkv's dtype: q and k rotated, v a copy of
        qkv[:, :, 2] (bit for bit). The values equal ``apply_rotary_emb_qkv(qkv, ...)
        .unbind(2)`` bit for bit (the same kernel and formula).

    Raises:
        ValueError: a bad shape, dtype, device or option (the message names it).
    """
    fn = "apply_rotary_emb_qkv_split"
    cos, sin = _tables(fn, qkv, cos, sin, seqlen_offsets, True, "qkv")
    return rotary_qkv_split(qkv, cos, sin, seqlen_offsets, False, bool(interleaved))
