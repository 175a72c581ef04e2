"""An attention layer's fused qkv projection with rotary position embedding in the GEMM's
epilogue (include/quack/gemm_rotary.h), for torch tensors.

- ``linear_rotary_qkv(x, weight, cos, sin, n_heads)`` -> (q, k, v): qkv = x @ W^T with q and k
  rotated in the interleaved pair layout (pairs (2i, 2i + 1) of a head by angle i, flash-attn's
  interleaved=True) inside the GEMM, v as computed; q, k, v are (B, T, H, D) views of one
  packed (B, T, 3, H, D) output. Differentiable: the backward packs dq, dk, dv with the inverse
  rotation into the packed gradient in one launch (``rotary_qkv_pack``, interleaved) and runs
  the Linear's dgrad and wgrad GEMMs (as ``quack_cpp.linear``);
- ``gemm_rotary``: the op, registered by ``quack_cpp._registrar`` as the custom op
  ``torch.ops.quack_cpp.gemm_rotary`` (fake kernel: torch.compile treats it as opaque; not
  differentiable on its own: ``linear_rotary_qkv`` carries the autograd).

A model trained with the non-interleaved (rotate_half) layout gets the same function by
permuting each head's rows of W_q and W_k once (``interleave_rotary_rows``): q·k is unchanged
when q and k share one permutation of the head dimension.
"""

from typing import Tuple

import torch
from torch import Tensor

from . import _C
from . import _registrar as _reg
from ._registrar import dtype_name, register, register_function, stream, tensor_arg
from .gemm_ops import (_as_operand, _cast, _check, _row_major, _rows, _tma_ok, gemm_op,
                       linear_dtype, weight_grad)
from .rotary_ops import rotary_qkv_pack

__all__ = ["linear_rotary_qkv", "gemm_rotary", "interleave_rotary_rows"]


def _rotary_check(fn: str, A: Tensor, B: Tensor, cos: Tensor, sin: Tensor, rotary_cols: int,
                  head_dim: int, seqlen: int) -> Tuple[int, int]:
    """(M, N) of A @ B after the checks the fake kernel must raise too (the C++ checks the
    rest on real tensors)."""
    if A.dim() != 2 or B.dim() != 2 or B.shape[0] != A.shape[1]:
        raise ValueError(f"{fn}: a {tuple(A.shape)} and b {tuple(B.shape)}, expected (M, K) and "
                         "(K, N)")
    M, N = A.shape[0], B.shape[1]
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"{fn}: head_dim is {head_dim}, expected an even head_dim >= 2")
    if N % head_dim:
        raise ValueError(f"{fn}: b has N = {N} columns, expected a multiple of head_dim = "
                         f"{head_dim}")
    if rotary_cols < 0 or rotary_cols > N or rotary_cols % head_dim:
        raise ValueError(f"{fn}: rotary_cols is {rotary_cols}, expected a multiple of head_dim = "
                         f"{head_dim} in [0, N = {N}]")
    if seqlen < 1 or M % seqlen:
        raise ValueError(f"{fn}: seqlen is {seqlen}, expected seqlen >= 1 dividing M = {M}")
    for name, t in (("cos", cos), ("sin", sin)):
        if t.dim() != 2 or t.shape[1] != head_dim // 2 or t.shape[0] < seqlen:
            raise ValueError(f"{fn}: {name} has shape {tuple(t.shape)}, expected (S_ro >= "
                             f"{seqlen}, head_dim / 2 = {head_dim // 2})")
        if t.dtype != torch.float32:
            raise ValueError(f"{fn}: {name} has dtype {dtype_name(t.dtype)}, expected float32")
    return M, N


class GemmRotary:
    name = "quack_cpp::gemm_rotary"

    def signature(A: Tensor, B: Tensor, cos: Tensor, sin: Tensor, rotary_cols: int,
                  head_dim: int, seqlen: int, out_dtype: torch.dtype,
                  tuned: bool = False) -> Tensor:
        """D = rot(A @ B) (``torch.ops.quack_cpp.gemm_rotary``; quack::gemm_rotary): for row m
        (position t = m % seqlen) and each column pair (n, n + 1), n even, n < rotary_cols,
        p = (n % head_dim) / 2: D[m, n] = y[m, n] cos[t, p] - y[m, n+1] sin[t, p],
        D[m, n+1] = y[m, n+1] cos[t, p] + y[m, n] sin[t, p]; the other columns y. fp32 math,
        one rounding to out_dtype. A (M, K) row-major bf16, B (K, N) column-major (W.T), cos,
        sin (S_ro >= seqlen, head_dim / 2) fp32 with unit column stride, or the two columns of
        one (S_ro, head_dim / 2, 2) fp32 tensor (``t[..., 0]``, ``t[..., 1]``: the epilogue then
        reads each (cos, sin) pair with one 8-byte load; ``linear_rotary_qkv`` passes that;
        other layouts are first copied into that one, seqlen rows); D (M, N) row-major. Not differentiable. Raises ValueError for a bad argument."""

    def outputs(A, B, cos, sin, rotary_cols, head_dim, seqlen, out_dtype, tuned=False):
        M, N = _rotary_check("gemm_rotary", A, B, cos, sin, rotary_cols, head_dim, seqlen)
        return _row_major((M, N), out_dtype, A)

    def launch(out, A, B, cos, sin, rotary_cols, head_dim, seqlen, out_dtype, tuned=False):
        fn = "gemm_rotary"
        if not _tables_layout_ok(cos, sin):  # e.g. the paired views, realised apart by Inductor
            t = _pair(cos, sin, seqlen)
            cos, sin = t[..., 0], t[..., 1]
        args = (tensor_arg(A, fn, "a"), tensor_arg(B, fn, "b"), tensor_arg(out, fn, "d"),
                tensor_arg(cos, fn, "cos"), tensor_arg(sin, fn, "sin"), int(rotary_cols),
                int(head_dim), int(seqlen), 1.0)
        ws, nbytes = None, 0
        if not (_tma_ok(A) and _tma_ok(B)):
            nbytes = _C.gemm_rotary_workspace_size(*args)
            if nbytes:
                ws = torch.empty(nbytes, dtype=torch.uint8, device=A.device)
        _C.gemm_rotary(*args, stream(A), bool(tuned), ws.data_ptr() if ws is not None else 0,
                       nbytes)


gemm_rotary = register(GemmRotary)


# _paired_tables's tables by (device, data pointers, shapes, strides and version counters of cos
# and sin, T), each entry holding cos and sin themselves: while an entry lives their storage
# cannot be freed and reused, and an in-place change through any view bumps the shared version
# counter. A write the version counters do not see (a raw kernel on their memory) is not noticed.
_PAIRED = {}
_PAIRED_MAX = 4


def _tables_layout_ok(cos: Tensor, sin: Tensor) -> bool:
    """Whether the C++ takes cos and sin as they are: unit column stride (sin with cos's
    strides), or the two columns of one 8-byte aligned (S_ro, D / 2, 2) tensor (src/gemm/gemm.cpp,
    the rotary checks). Shapes and dtypes are checked before (_rotary_check)."""
    if cos.shape[1] <= 1 or (cos.stride(1) == 1 and sin.stride() == cos.stride()):
        return True
    return (cos.stride(1) == 2 and sin.stride() == cos.stride()
            and (cos.shape[0] <= 1 or cos.stride(0) % 2 == 0)
            and cos.data_ptr() % 8 == 0 and sin.data_ptr() == cos.data_ptr() + 4)


def _pair(cos: Tensor, sin: Tensor, T: int) -> Tensor:
    return torch.stack((cos[:T], sin[:T]), -1)


def _paired_tables(cos: Tensor, sin: Tensor, T: int) -> Tuple[Tensor, Tensor]:
    """The first T rows of cos and sin (S_ro, D / 2) fp32 as the two columns of one contiguous
    (T, D / 2, 2) tensor (``t[..., 0]``, ``t[..., 1]``: column stride 2, sin one element after
    cos), the layout in which the rotary epilogue reads (cos, sin) with one 8-byte load per pair
    (quack/gemm_rotary.h). One small copy (T · D · 4 bytes), made once per set of tables in eager
    mode (cached while cos and sin are unchanged, see _PAIRED), per call under torch.compile."""
    if torch.compiler.is_compiling():
        t = _pair(cos, sin, T)
        return t[..., 0], t[..., 1]
    try:
        key = (cos.device, cos.data_ptr(), cos.shape, cos.stride(), cos._version, sin.data_ptr(),
               sin.shape, sin.stride(), sin._version, T)
    except RuntimeError:  # inference tensors keep no version counter: no caching
        t = _pair(cos, sin, T)
        return t[..., 0], t[..., 1]
    hit = _PAIRED.get(key)
    if hit is None:
        if len(_PAIRED) >= _PAIRED_MAX:
            _PAIRED.pop(next(iter(_PAIRED)))
        hit = (cos, sin, _pair(cos, sin, T))
        _PAIRED[key] = hit
    t = hit[2]
    return t[..., 0], t[..., 1]


class LinearRotaryQkv:
    """(q, k, v) of qkv = x @ W^T with q and k rotated (interleaved pairs) in the GEMM's
    epilogue. See ``linear_rotary_qkv``."""

    name = "quack_cpp::linear_rotary_qkv"

    def forward(ctx, x: Tensor, weight: Tensor, cos: Tensor, sin: Tensor, n_heads: int,
                dtype: torch.dtype, fuse_grad_accum: bool, tuned: bool):
        B, T, K = x.shape
        N = weight.shape[0]
        D = N // (3 * n_heads)
        x2 = _as_operand(_rows(_cast(x, dtype), K))
        w = _cast(weight, dtype)
        cs, sn = _paired_tables(cos, sin, T)  # (cos, sin) as one float2 per pair for the epilogue
        qkv = gemm_rotary(x2, w.mT, cs, sn, 2 * n_heads * D, D, T, dtype, bool(tuned))
        need_x, need_w = ctx.needs_input_grad[:2]
        ctx.dtype, ctx.shape = dtype, (B, T, n_heads, D)
        ctx.fuse = bool(fuse_grad_accum and need_w and not torch.compiler.is_compiling())
        ctx.set_materialize_grads(False)  # an unused q, k or v: None, no zeros tensor
        ctx.save_for_backward(x2 if need_w else None, w if need_x else None,
                              weight if need_w else None, cos, sin)
        q, k, v = qkv.view(B, T, 3, n_heads, D).unbind(2)
        return q, k, v

    def backward(ctx, dq, dk, dv):
        x2, w, weight, cos, sin = ctx.saved_tensors
        (need_x, need_w), fuse = _reg.task_grads(ctx, (0, 1), 1, ctx.fuse)
        if dq is None and dk is None and dv is None or not (need_x or need_w):
            return None, None, None, None, None, None, None, None
        dt = ctx.dtype
        grads = [None if g is None else _cast(g, dt) for g in (dq, dk, dv)]
        # d(qkv) with the rotation inverted (conjugate), interleaved pairs: (B, T, 3, H, D)
        dqkv = rotary_qkv_pack(grads[0], grads[1], grads[2], cos, sin, 0, True, True)
        B, T, H, D = ctx.shape
        g = dqkv.view(B * T, 3 * H * D)
        dx = dw = None
        if need_x:  # dgrad: dx = g @ W
            dx = gemm_op(g, w, None, 1.0, 0.0, dt, False, None, None).view(B, T, w.shape[1])
        if need_w:  # wgrad: dW = g^T @ x2, in weight's dtype where the C++ has that instance
            dw = weight_grad(g, x2, weight, dt, fuse)
        return dx, dw, None, None, None, None, None, None


linear_rotary_qkv_op = register_function(LinearRotaryQkv)


def linear_rotary_qkv(x: Tensor, weight: Tensor, cos: Tensor, sin: Tensor, n_heads: int,
                      fuse_grad_accum: bool = False,
                      tuned: bool = False) -> Tuple[Tensor, Tensor, Tensor]:
    """An attention layer's fused qkv projection with rotary position embedding of q and k in
    the GEMM's epilogue (``quack::gemm_rotary``), differentiable.

    qkv = x @ weight^T (fp32 accumulation) viewed as (B, T, 3, H, D), D = weight.shape[0] /
    (3 * n_heads); for token t of each sequence and each head of q and of k, the pairs
    (2i, 2i + 1) are rotated by angle i (the interleaved layout, flash-attn's
    interleaved=True)::

        q[b, t, h, 2i]   = y[2i] * cos[t, i] - y[2i+1] * sin[t, i]
        q[b, t, h, 2i+1] = y[2i+1] * cos[t, i] + y[2i] * sin[t, i]

    in fp32, one rounding to the compute dtype; v = its columns of qkv. The GEMM reads the
    first T rows of cos and sin as one interleaved (T, D / 2, 2) table (a copy made once per
    set of tables in eager mode: cached while cos and sin are the same, unchanged tensors).
    Equal to ``apply_rotary_emb_qkv_split(linear(x, weight).view(B, T, 3, H, D), cos, sin,
    interleaved=True)`` up to that one rounding (the separate form rounds qkv first). A model
    whose weights follow the non-interleaved (rotate_half) layout permutes its W_q and W_k rows
    once with ``interleave_rotary_rows`` (q·k unchanged).

    Backward: dq, dk, dv (a None one counts as zeros) are packed with the inverse rotation into
    d(qkv) in one launch (``rotary_qkv_pack``, interleaved), then dx = d(qkv) @ W and
    dW = d(qkv)^T @ x (our GEMMs, dW in weight's dtype as ``linear``); no gradient for cos and
    sin. Under ``torch.autocast`` x and weight are cast to the autocast dtype first.

    Args:
        x: (B, T, K) CUDA; bfloat16 (or any float dtype under a bfloat16 autocast).
        weight: (3 * n_heads * D, K) [W_q; W_k; W_v], x's dtype (or any under autocast).
        cos, sin: (S_ro >= T, D / 2) (float32; other float dtypes are upcast), row t the
            angles of position t.
        n_heads: H; weight.shape[0] must be a multiple of 3 * H with D even.
        fuse_grad_accum, tuned: as ``quack_cpp.linear``.

    Returns:
        (q, k, v), each (B, T, H, D) in the compute dtype: views of one packed (B, T, 3, H, D)
        tensor (``q.transpose(1, 2)`` is SDPA's (B, H, T, D) layout with D contiguous).

    Raises:
        ValueError: a bad shape, dtype or device (the message names it); what ``gemm_rotary``
            raises. RuntimeError: a CUDA error.
    """
    fn = "linear_rotary_qkv"
    path = _reg.route(x, weight, cos, sin)
    if path == _reg.CUSTOM:
        _check(fn, x=x, weight=weight, cos=cos, sin=sin)
    if x.dim() != 3 or weight.dim() != 2 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"{fn}: x has shape {tuple(x.shape)} and weight {tuple(weight.shape)}, "
                         "expected (B, T, K) and (3 * n_heads * D, K)")
    if n_heads < 1 or weight.shape[0] % (3 * n_heads) or (weight.shape[0] // (3 * n_heads)) % 2:
        raise ValueError(f"{fn}: weight has {weight.shape[0]} rows, expected 3 * n_heads * D = "
                         f"3 * {n_heads} * D with D even")
    dtype = linear_dtype(x, weight)
    if dtype is None:
        raise ValueError(f"{fn}: x {x.dtype} and weight {weight.dtype}: expected both bfloat16 "
                         "or both float16 (or autocast to one of them)")
    cos = cos if cos.dtype == torch.float32 else cos.float()
    sin = sin if sin.dtype == torch.float32 else sin.float()
    return linear_rotary_qkv_op.run(path, x, weight, cos, sin, int(n_heads), dtype,
                                    bool(fuse_grad_accum), bool(tuned))


def interleave_rotary_rows(w: Tensor, n_heads: int, head_dim: int) -> Tensor:
    """The rows of a [W_q; W_k; W_v] weight (3 * n_heads * head_dim, K) with each q and k
    head's rows reordered from the non-interleaved (rotate_half) layout to the interleaved one:
    new row 2i of a head is old row i, new row 2i + 1 old row i + head_dim / 2 (v unchanged).
    With tables of head_dim / 2 angles, rotating the interleaved pairs of the permuted
    projection gives the same q·k as rotate_half on the original one (both q and k are permuted
    alike); v and the output projection are untouched.

    Args:
        w: (3 * n_heads * head_dim, K), any dtype and device: W_q, W_k, W_v stacked by rows,
            each (n_heads * head_dim, K); q, k and v have the same head count (no GQA: a
            grouped k / v has fewer rows, and ``linear_rotary_qkv`` takes equal heads).
        n_heads: heads of each of q, k, v (> 0). head_dim: D, even (> 0).

    Returns:
        A new tensor of w's shape, dtype and device (rows permuted; a bias (3 * n_heads *
        head_dim,) permutes the same way with K = 1: ``interleave_rotary_rows(b[:, None], ...)``).

    Raises:
        ValueError: w not 2-D, n_heads or head_dim not positive, head_dim odd, or w.shape[0] not
            3 * n_heads * head_dim (each message names the argument).
    """
    if w.dim() != 2:
        raise ValueError(f"interleave_rotary_rows: w has shape {tuple(w.shape)}, expected 2 "
                         "dimensions (3 * n_heads * head_dim, K)")
    if n_heads <= 0 or head_dim <= 0:
        raise ValueError(f"interleave_rotary_rows: n_heads is {n_heads} and head_dim "
                         f"{head_dim}, expected both > 0")
    if head_dim % 2 != 0:
        raise ValueError(f"interleave_rotary_rows: head_dim is {head_dim}, expected an even "
                         "number (pairs of rows)")
    if w.shape[0] != 3 * n_heads * head_dim:
        raise ValueError(f"interleave_rotary_rows: w has {w.shape[0]} rows {tuple(w.shape)}, "
                         f"expected 3 * n_heads * head_dim = 3 * {n_heads} * {head_dim} = "
                         f"{3 * n_heads * head_dim} (q, k, v of equal heads; no GQA)")
    half = head_dim // 2
    perm = torch.arange(head_dim, device=w.device).view(2, half).t().reshape(-1)
    qk = w[:2 * n_heads * head_dim].view(2 * n_heads, head_dim, -1)[:, perm]
    return torch.cat((qk.reshape(2 * n_heads * head_dim, -1), w[2 * n_heads * head_dim:]), 0)
