"""Tensor-parallel pieces on QuACK-C++ kernels over ``torch.distributed`` (no communication layer
of our own): vocabulary-parallel cross-entropy (and the LM head with a vocabulary-sharded
weight) and column- / row-parallel Linear.

Vocabulary-parallel cross-entropy (``vocab_parallel_cross_entropy``). Every rank of ``group``
holds the same M rows and the same targets, and a vocabulary shard of the logits: columns
[vocab_start, vocab_start + V_r) of the (M, V) logits. Per rank r and row i (fp32):

    lse_r,i = log sum_{j in shard r} exp(x_ij)          (quack_cpp.cross_entropy, return_lse)
    tl_r,i  = x_i,t_i if t_i is in shard r, else 0       (a gather of M elements)
    S_r,i   = sum_{j in shard r} x_ij                    (label smoothing only; same kernel pass)

combined by two all-reduces (``_combine``): MAX of lse_r (M floats), then SUM of the stacked
(exp(lse_r - max), tl_r, S_r) (3·M floats):

    lse_i  = max_i + log sum_r exp(lse_r,i - max_i),   y_i,t_i = sum_r tl_r,i,   S_i = sum_r S_r,i
    loss_i = lse_i - (1-eps)·y_i,t_i - (eps/V)·S_i + zs·lse_i^2

(= (1-eps)(lse_i - y_i,t_i) + eps·(lse_i - S_i/V) + zs·lse_i^2, quack_cpp.cross_entropy's
formula without class weights). The backward is local to each shard (no communication):

    dx_ij = g_i · ((1 + 2·zs·lse_i)·exp(x_ij - lse_i) - eps/V - (1-eps)·[j == t_i])

with g_i = grad_output ('sum'), grad_output_i ('none'), grad_output / #counted ('mean').

What runs on our kernels and what in torch ops: the one pass over the shard in the forward is
``quack_cpp.cross_entropy(..., reduction='none', return_lse=True)`` (without label smoothing: all
rows ignored, which gives the shard's lse; with it: label_smoothing=1 and target 0 for every row,
whose loss is lse_r - S_r/V_r, so S_r = V_r·(lse_r - loss) comes from the same pass). The
combine works on (M)-sized tensors in torch ops. The backward is torch ops over row chunks
(four passes, see ``shard_grad``; an fp32 temporary of at most ``_CHUNK_ELEMS`` elements):
``quack::cross_entropy_bwd``'s public arguments do not fit: a row whose target lies on another
shard needs the softmax term without the one-hot term, and ε/V needs the global V, while the
public call counts a row only for 0 <= t < V_r (x's columns) and divides ε by V_r. The row
kernel itself already does the shard case: its class count is a parameter apart from the row
length (``RowParams::iscalar[ce::kClasses]``, which linear + cross-entropy's vocabulary slices
set to the whole V), so with the class count V and the targets shifted to (t - vocab_start) mod
V (ignored rows to the ignore_index, out-of-range ones outside [0, V): linear + CE's
``lce_shift_kernel``) one launch gives this gradient with the combined lse and a per-row dloss.
What is missing is a ``num_classes`` field in ``quack::CrossEntropyBwdArgs`` (and the custom
op's schema) that sets it; not done.
"""

from typing import Callable, Optional, Tuple

import torch
from torch import Tensor

__all__ = ["vocab_parallel_cross_entropy", "vocab_parallel_linear_cross_entropy",
           "shard_partials", "combine_partials", "shard_grad", "column_parallel_linear",
           "row_parallel_linear"]

_REDUCTIONS = ("none", "sum", "mean")
_f32 = torch.float32
_CHUNK_ELEMS = 1 << 24  # fp32 temporary of the backward: at most 64 MB per chunk of rows
_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


# --------------------------------------------------------------------------------------------
# The pieces (no communication): per-shard partials, their combination, per-shard gradient
# --------------------------------------------------------------------------------------------


def _row_masks(target: Tensor, ignore_index: int, vocab_size: int) -> Tuple[Tensor, Tensor]:
    """(counted, bad): target in [0, V) and not ignore_index; not ignore_index and outside."""
    kept = target != ignore_index
    inside = (target >= 0) & (target < vocab_size)
    return kept & inside, kept & ~inside


def shard_partials(logits_shard: Tensor, target: Tensor, vocab_start: int,
                   ignore_index: int = -100, label_smoothing: float = 0.0
                   ) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """The per-shard partials of vocabulary-parallel cross-entropy, no communication.

    logits_shard (M, V_r) fp32/fp16/bf16 (columns [vocab_start, vocab_start + V_r) of the
    logits); target (M,) int32/int64 global class indices. Returns fp32 (M,) tensors
    ``(lse_r, tl_r, S_r)``: the shard's logsumexp per row (-inf for V_r = 0), the target's logit
    where the target lies in this shard (else 0), and the row sum of the shard's logits when
    ``label_smoothing`` is not 0 (else None). One pass over the shard with
    ``quack_cpp.cross_entropy`` (see the module doc)."""
    from .cross_entropy_ops import cross_entropy

    M, Vr = logits_shard.shape
    dev = logits_shard.device
    t = target.long()
    local = t - vocab_start
    owned = (t != ignore_index) & (local >= 0) & (local < Vr)
    with torch.no_grad():
        if Vr == 0:
            lse = torch.full((M,), float("-inf"), dtype=_f32, device=dev)
            tl = torch.zeros(M, dtype=_f32, device=dev)
            return lse, tl, (torch.zeros(M, dtype=_f32, device=dev) if label_smoothing else None)
        if label_smoothing:
            # eps = 1, every row's target 0: loss_i = lse_i - S_i / V_r (no target term).
            loss, lse = cross_entropy(logits_shard, torch.zeros_like(target), ignore_index=-1,
                                      reduction="none", label_smoothing=1.0, return_lse=True)
            S = (lse - loss) * Vr
        else:
            # Every row ignored: loss 0, lse the true logsumexp of the row.
            _, lse = cross_entropy(logits_shard, torch.full_like(target, -1), ignore_index=-1,
                                   reduction="none", return_lse=True)
            S = None
        tl = logits_shard.gather(1, local.clamp(0, Vr - 1)[:, None])[:, 0].float()
        tl = torch.where(owned, tl, 0.0)
    return lse.float(), tl, S


AllReduce = Callable[[Tensor], None]


def _combine(lse_r: Tensor, tl_r: Tensor, S_r: Optional[Tensor], all_reduce_max: AllReduce,
             all_reduce_sum: AllReduce) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """(lse, y_t, S) of the whole vocabulary from this shard's partials and two in-place
    all-reduces over the shards: MAX of (M), SUM of (2, M) or (3, M) fp32."""
    m = lse_r.clone()
    all_reduce_max(m)
    ms = torch.where(torch.isinf(m), 0.0, m)  # a row of -inf everywhere: lse -inf, no NaN
    parts = [torch.exp(lse_r - ms), tl_r] + ([S_r] if S_r is not None else [])
    packed = torch.stack(parts)
    all_reduce_sum(packed)
    return ms + torch.log(packed[0]), packed[1], (packed[2] if S_r is not None else None)


def combine_partials(partials, target: Tensor, vocab_size: int, ignore_index: int = -100,
                     reduction: str = "mean", label_smoothing: float = 0.0,
                     z_loss: float = 0.0) -> Tuple[Tensor, Tensor]:
    """Loss and lse from the partials of every shard, in one process (the same combine as the
    distributed path, with the all-reduces done over the list): ``partials`` a sequence of
    ``shard_partials`` results. Returns (loss, lse) as ``vocab_parallel_cross_entropy``."""
    lses = torch.stack([p[0] for p in partials])
    rest = [torch.stack([p[k] for p in partials]) for k in (1, 2) if partials[0][k] is not None]

    state = {}

    def reduce_max(t):
        t.copy_(lses.max(0).values)
        state["ms"] = torch.where(torch.isinf(t), 0.0, t)

    def reduce_sum(packed):
        ms = state["ms"]
        sums = [torch.exp(lses - ms).sum(0)] + [r.sum(0) for r in rest]
        packed.copy_(torch.stack(sums))

    lse, tl, S = _combine(partials[0][0], partials[0][1], partials[0][2], reduce_max, reduce_sum)
    loss, _ = _loss(lse, tl, S, target, vocab_size, ignore_index, reduction, label_smoothing,
                    z_loss)
    return loss, lse


def _loss(lse, tl, S, target, V, ignore_index, reduction, eps, zs) -> Tuple[Tensor, Tensor]:
    """(loss, #counted) from the combined (M) tensors: ignored rows 0, bad rows NaN."""
    counted, bad = _row_masks(target, ignore_index, V)
    rows = lse - (1.0 - eps) * tl
    if eps:
        rows = rows - (eps / V) * S
    if zs:
        rows = rows + zs * lse * lse
    rows = torch.where(counted, rows, 0.0)
    rows = torch.where(bad, float("nan"), rows)
    n = counted.sum(dtype=_f32)
    if reduction == "none":
        return rows, n
    total = rows.sum()
    return (total / n if reduction == "mean" else total), n


def _row_scale(dloss: Tensor, target, n, M, V, ignore_index, reduction) -> Tensor:
    """g_i of the backward (fp32 (M)): 0 on ignored rows, NaN on bad ones."""
    counted, bad = _row_masks(target, ignore_index, V)
    g = dloss.float()
    if reduction == "mean":
        g = g / n
    g = g.expand(M) if g.dim() == 0 else g
    g = torch.where(counted, g, 0.0)
    return torch.where(bad, float("nan"), g)


def shard_grad(logits_shard: Tensor, target: Tensor, lse: Tensor, g: Tensor, vocab_start: int,
               vocab_size: int, ignore_index: int = -100, label_smoothing: float = 0.0,
               z_loss: float = 0.0) -> Tensor:
    """The gradient of one shard, no communication::

        dx_ij = g_i·((1 + 2·zs·lse_i)·exp(x_ij - lse_i) - eps/V - (1-eps)·[j == t_i - start])

    (start = vocab_start) with lse the combined (M,) fp32 logsumexp and g (M,) fp32 the per-row
    scale (0 on ignored rows, NaN on bad ones: those rows come out exactly 0 / NaN). Returns
    (M, V_r) in the logits' dtype, contiguous.

    fp32 math in torch ops over chunks of rows (an fp32 temporary of at most ``_CHUNK_ELEMS``
    elements), four passes over a chunk: with c_i = g_i·(1 + 2·zs·lse_i) and s_i = sign(c_i)
    (+1 for 0), u = exp(x - (lse - log|c|)) (= |c|·softmax; a subtraction that reads the logits
    and writes fp32, then exp in place), u[i, t_i] += s_i·(-(1-eps)·g_i) for the rows whose
    target lies in this shard (one element per row), dx = s·u - g·eps/V written in the logits'
    dtype (one rounding), then the ignored rows set to exactly 0 (their logits may hold inf or
    NaN)."""
    M, Vr = logits_shard.shape
    dx = torch.empty((M, Vr), dtype=logits_shard.dtype, device=logits_shard.device)
    if M == 0 or Vr == 0:
        return dx
    eps, V = float(label_smoothing), int(vocab_size)
    t = target.long()
    local = t - vocab_start
    owned = (t != ignore_index) & (local >= 0) & (local < Vr)
    ignored = t == ignore_index
    coef = g * (1.0 + 2.0 * z_loss * lse) if z_loss else g
    sign = torch.where(coef < 0, -1.0, 1.0)
    shift = lse - torch.log(coef.abs())  # coef 0: +inf, so u = 0 for finite logits
    hit = torch.where(owned, -(1.0 - eps) * g, 0.0) * sign
    const = (-(eps / V) * g)[:, None] if eps else None
    col = local.clamp(0, Vr - 1)
    step = max(1, _CHUNK_ELEMS // Vr)
    for r0 in range(0, M, step):
        r1 = min(M, r0 + step)
        u = torch.sub(logits_shard[r0:r1], shift[r0:r1, None])  # fp32 (type promotion)
        u.exp_()
        rows = torch.arange(r1 - r0, device=u.device)
        u.index_put_((rows, col[r0:r1]), hit[r0:r1], accumulate=True)
        out = dx[r0:r1]
        if const is not None:
            torch.addcmul(const[r0:r1], u, sign[r0:r1, None], out=out)
        else:
            torch.mul(u, sign[r0:r1, None], out=out)
        out.masked_fill_(ignored[r0:r1, None], 0.0)  # exactly 0, even for inf / NaN logits
    return dx


# --------------------------------------------------------------------------------------------
# The distributed function
# --------------------------------------------------------------------------------------------


def _group_info(group):
    """(world size, rank, all_reduce_max, all_reduce_sum) of group; size 1 without
    torch.distributed initialised (and group None)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        if group is not None:
            raise ValueError("vocab_parallel_cross_entropy: group is given, but "
                             "torch.distributed is not initialised")
        return 1, 0, (lambda t: None), (lambda t: None)
    world, rank = dist.get_world_size(group), dist.get_rank(group)

    def reduce_max(t):
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)

    def reduce_sum(t):
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)

    return world, rank, reduce_max, reduce_sum


class _VocabParallelCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits_shard, target, vocab_start, V, ignore_index, reduction, eps, zs,
                reduce_max, reduce_sum):
        lse_r, tl_r, S_r = shard_partials(logits_shard, target, vocab_start, ignore_index, eps)
        lse, tl, S = _combine(lse_r, tl_r, S_r, reduce_max, reduce_sum)
        loss, n = _loss(lse, tl, S, target, V, ignore_index, reduction, eps, zs)
        ctx.save_for_backward(logits_shard, target, lse, n)
        ctx.opts = (vocab_start, V, ignore_index, reduction, eps, zs)
        ctx.mark_non_differentiable(lse)
        return loss, lse

    @staticmethod
    def backward(ctx, dloss, _dlse):
        logits_shard, target, lse, n = ctx.saved_tensors
        vocab_start, V, ignore_index, reduction, eps, zs = ctx.opts
        if dloss is None:
            return (None,) * 10
        g = _row_scale(dloss, target, n, target.shape[0], V, ignore_index, reduction)
        dx = shard_grad(logits_shard, target, lse, g, vocab_start, V, ignore_index, eps, zs)
        return (dx,) + (None,) * 9


def vocab_parallel_cross_entropy(logits_shard: Tensor, target: Tensor, group=None, *,
                                 vocab_start: Optional[int] = None,
                                 vocab_size: Optional[int] = None, ignore_index: int = -100,
                                 reduction: str = "mean", label_smoothing: float = 0.0,
                                 z_loss: float = 0.0, return_lse: bool = False,
                                 weight: Optional[Tensor] = None,
                                 logit_softcap: Optional[float] = None,
                                 inplace_backward: bool = False,
                                 lse_partial: Optional[Tensor] = None,
                                 target_logit: Optional[Tensor] = None):
    """Cross-entropy of logits sharded over the vocabulary across the ranks of ``group``
    (Megatron-LM's vocab-parallel cross-entropy), differentiable; the loss equals
    ``quack_cpp.cross_entropy`` of the full (M, V) logits on every rank.

    Every rank passes the same target and its own shard: columns [vocab_start, vocab_start +
    V_r) of the logits. Forward: one pass over the shard (``quack_cpp.cross_entropy``), then
    two all-reduces over ``group``: MAX of M floats, SUM of 2·M (3·M with label smoothing)
    floats. Backward: local to each shard, no communication. Formulas: the module doc
    (quack_cpp.distributed).

    Args:
        logits_shard: (M, V_r) float32/float16/bfloat16, CUDA (the kernels run on CUDA only;
            the group's backend must move CUDA tensors: NCCL). V_r may differ between ranks
            (then pass vocab_start and vocab_size) and may be 0.
        target: (M,) int32/int64 global class indices, the same on every rank.
        group: a torch.distributed process group, or None for the default group (without
            torch.distributed initialised: one rank holding the whole vocabulary).
        vocab_start: first global column of this shard; default rank · V_r (equal shards).
        vocab_size: V, the global vocabulary; default world_size · V_r (equal shards). The
            shards must partition [0, V) with the same V on every rank (not checked across
            ranks: a wrong partition gives wrong or NaN losses, no error).
        ignore_index: rows with this target have loss 0 and a zero gradient (default -100).
        reduction: 'none' (M,) | 'sum' | 'mean' (default; over the counted rows, which are the
            same on every rank: no communication for the denominator; NaN when none counts).
        label_smoothing: eps in [0, 1] (torch's definition, eps/V per class).
        z_loss: zs >= 0, adds zs·lse_i^2 per counted row (the 'mean' divides it by the count).
        return_lse: also return lse (M,) fp32, the logsumexp of the whole row (not
            differentiable).
        weight, logit_softcap, inplace_backward, lse_partial, target_logit: not supported here
            (ValueError when given).

    Returns:
        loss float32 (0-d for 'sum'/'mean', (M,) for 'none'), identical on every rank; with
        return_lse, (loss, lse). A target outside [0, V) that is not ignore_index gives a NaN
        loss row and NaN gradient rows on every shard.

    Gradient: d logits_shard in the shard's dtype (fp32 math), from the loss's grad_output on
    this rank (each rank back-propagates its replica of the loss; no all-reduce).

    Raises:
        ValueError: a bad or unsupported argument (the message names it); group given without
            torch.distributed initialised.
    """
    fn = "vocab_parallel_cross_entropy"
    for name, given, default in (("weight", weight is not None, "None"),
                                 ("logit_softcap", logit_softcap is not None, "None"),
                                 ("inplace_backward", bool(inplace_backward), "False"),
                                 ("lse_partial", lse_partial is not None, "None"),
                                 ("target_logit", target_logit is not None, "None")):
        if given:
            raise ValueError(f"{fn}: {name} is given, expected {default} (not supported with "
                             "vocabulary-sharded logits)")
    if not torch.is_tensor(logits_shard) or logits_shard.dim() != 2:
        shape = tuple(logits_shard.shape) if torch.is_tensor(logits_shard) else type(logits_shard)
        raise ValueError(f"{fn}: logits_shard has shape {shape}, expected (M, V_r)")
    if logits_shard.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"{fn}: logits_shard has dtype {logits_shard.dtype}, expected float32, "
                         "float16 or bfloat16")
    M, Vr = logits_shard.shape
    if not torch.is_tensor(target) or target.dim() != 1 or target.shape[0] != M:
        shape = tuple(target.shape) if torch.is_tensor(target) else type(target)
        raise ValueError(f"{fn}: target has shape {shape}, expected ({M},) (logits_shard's M)")
    if target.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{fn}: target has dtype {target.dtype}, expected int32 or int64")
    if target.device != logits_shard.device:
        raise ValueError(f"{fn}: target is on {target.device}, expected {logits_shard.device} "
                         "(logits_shard's device)")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{fn}: reduction is '{reduction}', expected 'none', 'sum' or 'mean'")
    eps, zs = float(label_smoothing), float(z_loss)
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"{fn}: label_smoothing is {label_smoothing}, expected in [0, 1]")
    if not zs >= 0.0:
        raise ValueError(f"{fn}: z_loss is {z_loss}, expected >= 0")
    world, rank, reduce_max, reduce_sum = _group_info(group)
    start = rank * Vr if vocab_start is None else int(vocab_start)
    V = world * Vr if vocab_size is None else int(vocab_size)
    if start < 0 or start + Vr > V:
        raise ValueError(f"{fn}: vocab_start is {start} with V_r = {Vr}, expected 0 <= "
                         f"vocab_start and vocab_start + V_r <= vocab_size = {V}")
    loss, lse = _VocabParallelCE.apply(logits_shard, target, start, V, int(ignore_index),
                                       reduction, eps, zs, reduce_max, reduce_sum)
    return (loss, lse) if return_lse else loss


# --------------------------------------------------------------------------------------------
# Column- and row-parallel Linear
# --------------------------------------------------------------------------------------------


class _AllReduceInBackward(torch.autograd.Function):
    """Identity forward; the gradient all-reduced (SUM) over the group in the backward."""

    @staticmethod
    def forward(ctx, x, reduce_sum):
        ctx.reduce_sum = reduce_sum
        return x.view_as(x)

    @staticmethod
    def backward(ctx, dy):
        dy = dy.contiguous().clone()
        ctx.reduce_sum(dy)
        return dy, None


class _AllReduceInForward(torch.autograd.Function):
    """All-reduce (SUM) over the group in the forward; identity backward."""

    @staticmethod
    def forward(ctx, x, reduce_sum):
        y = x.contiguous().clone()
        reduce_sum(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        return dy, None


def _linear_group(group, fn):
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        if group is not None:
            raise ValueError(f"{fn}: group is given, but torch.distributed is not initialised")
        return lambda t: None

    def reduce_sum(t):
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)

    return reduce_sum


def column_parallel_linear(x: Tensor, weight_shard: Tensor, bias_shard: Optional[Tensor] = None,
                           group=None) -> Tensor:
    """Column-parallel Linear (Megatron-LM): ``y_r = x @ W_r^T + b_r`` with W_r (N_r, K) the rows
    of the weight (N, K) that produce output columns of shard r; x (..., K) replicated on every
    rank; y_r (..., N_r). The forward gathers nothing; the backward all-reduces (SUM) dx over
    ``group`` (each rank holds the part of dx from its N_r columns); dW_r, db_r stay local.
    GEMMs: ``quack_cpp.linear`` (dtypes and errors as there)."""
    from .gemm_ops import linear

    reduce_sum = _linear_group(group, "column_parallel_linear")
    return linear(_AllReduceInBackward.apply(x, reduce_sum), weight_shard, bias_shard)


def row_parallel_linear(x_shard: Tensor, weight_shard: Tensor, bias: Optional[Tensor] = None,
                        group=None) -> Tensor:
    """Row-parallel Linear (Megatron-LM): ``y = sum_r x_r @ W_r^T + b`` with W_r (N, K_r) the
    columns of the weight (N, K) that read input features of shard r, x_r (..., K_r) this
    rank's features (e.g. a column-parallel layer's output); y (..., N) replicated. The forward
    all-reduces (SUM) the partial products over ``group`` (then adds the bias, replicated, once);
    the backward is local (dx_r = dy @ W_r, dW_r = dy^T x_r; db = sum of dy, the same on every
    rank). GEMMs: ``quack_cpp.linear`` (dtypes and errors as there)."""
    from .gemm_ops import linear

    reduce_sum = _linear_group(group, "row_parallel_linear")
    y = _AllReduceInForward.apply(linear(x_shard, weight_shard), reduce_sum)
    return y + bias if bias is not None else y


def vocab_parallel_linear_cross_entropy(x: Tensor, weight_shard: Tensor, target: Tensor,
                                        group=None, *, bias_shard: Optional[Tensor] = None,
                                        vocab_start: Optional[int] = None,
                                        vocab_size: Optional[int] = None,
                                        ignore_index: int = -100, reduction: str = "mean",
                                        label_smoothing: float = 0.0, z_loss: float = 0.0,
                                        return_lse: bool = False):
    """An LM head with a vocabulary-sharded weight and its cross-entropy: the composition
    ``vocab_parallel_cross_entropy(column_parallel_linear(x, weight_shard, bias_shard, group),
    target, group, ...)``::

        logits_r = x @ W_r^T (+ b_r)   (M, V_r), x's compute dtype (quack_cpp.linear)
        loss     = cross-entropy of [logits_0 | logits_1 | ...] (vocab_parallel_cross_entropy)

    x (..., D) replicated on every rank (bfloat16/float16, as quack_cpp.linear); weight_shard
    (V_r, D): rows [vocab_start, vocab_start + V_r) of the (V, D) head weight; target (...)
    matching x's leading dimensions (ValueError otherwise), the same on every rank; with
    reduction='none' the loss (and with return_lse the lse) has target's shape. The backward: dlogits_r local, dW_r
    and db_r local, dx all-reduced (SUM) over ``group``. The logits shard is materialised
    (M·V_r elements of x's dtype per rank, and its gradient): the chunked, logit-free form of
    quack_cpp.linear_cross_entropy needs the cross-entropy gradient without the one-hot term
    for rows whose target lies on another shard, which its kernels do not have. Options,
    returns and errors: as ``vocab_parallel_cross_entropy`` and ``quack_cpp.linear``."""
    if not torch.is_tensor(x) or x.dim() < 1:
        raise ValueError("vocab_parallel_linear_cross_entropy: x is not a tensor of shape "
                         "(..., D)")
    if not torch.is_tensor(target) or tuple(target.shape) != tuple(x.shape[:-1]):
        got = tuple(target.shape) if torch.is_tensor(target) else type(target).__name__
        raise ValueError(f"vocab_parallel_linear_cross_entropy: target has shape {got}, "
                         f"expected x's leading shape {tuple(x.shape[:-1])}")
    D = x.shape[-1]
    logits = column_parallel_linear(x.reshape(-1, D), weight_shard, bias_shard, group)
    out = vocab_parallel_cross_entropy(
        logits, target.reshape(-1), group, vocab_start=vocab_start, vocab_size=vocab_size,
        ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing,
        z_loss=z_loss, return_lse=return_lse)
    loss, lse = out if return_lse else (out, None)
    if reduction == "none":  # per token: target's (x's leading) shape, as linear_cross_entropy
        loss = loss.view(target.shape)
    if lse is not None:
        return loss, lse.view(target.shape)
    return loss
