"""The demo's fixed language model in plain PyTorch, with pluggable parts.

A Llama-style decoder (issue 21, fixed so the figures compare across commits):

    12 layers, d 2048, 16 heads (head dim 128), SwiGLU MLP hidden 5632, pre-norm RMSNorm
    (eps 1e-5) before attention and MLP plus a final norm, rotary positions (base 10000),
    causal attention by F.scaled_dot_product_attention, untied embedding and output head,
    vocabulary 32768, no biases, no dropout; fp32 parameters and residual stream, bf16 autocast.
    About 751 M parameters.

One model class serves every run; what differs is the ``Parts`` it is built with: the
factories of the RMSNorm, the bias-free Linear, the SwiGLU MLP and the head with its loss, the
rotary embedding of q and k (``rotary``; torch's formula by default), and
optionally ``add_norm``, a residual add fused with the next norm. Without it (run (a)) a block
is the plain pre-norm form ``x = x + attn(norm(x)); x = x + mlp(norm(x))``; with it the
residual stream is carried as QuACK / Liger / Transformer Engine users run it: each block's
output delta is added to the stream by the next norm, ``h, x = add_norm(norm, delta, x)``
(h = norm(x + delta), x = x + delta), the last one by the final norm. The same function up to
rounding: the stream stays in its dtype (fp32, as in (a)); h comes out in delta's dtype (bf16
under autocast: the rounding the next Linear's autocast cast does in (a)).
``torch_parts`` gives run (a)'s all-torch model; ``demo/ours.py`` builds the ``Parts`` of runs
(c) and (d) from what quack_cpp offers. Every MLP and head here holds its weights in its own
layout and converts from the canonical one (``set_weights``): the SwiGLU's first weight is
(2 * hidden, d) with the gate rows first and the up rows after them ([gate; up]); a fused MLP
whose kernel wants gate and up interleaved converts on the way in. ``init_weights`` draws the
canonical tensors from a seeded generator in a fixed order, so every variant built from one
seed starts from the same function; ``load_canonical`` copies one variant's weights into
another through the same layout (the demo's reference evaluator: every run's final weights in
run (a)'s all-torch model).
"""

import math
from dataclasses import dataclass, field
from typing import Callable, List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG = dict(n_layers=12, d_model=2048, n_heads=16, d_mlp=5632, vocab=32768, seq_len=2048,
              batch=8, eps=1e-5, rope_base=10000.0,
              lr=3e-4, warmup=20, min_lr_frac=0.1, weight_decay=0.1, betas=(0.9, 0.95),
              adam_eps=1e-8, clip=1.0, val_seqs=None)
# The CPU smoke test's model: same code, 2 layers at a toy width (vocabulary kept: the data's
# ids go up to the tokenizer's size).
TINY = dict(CONFIG, n_layers=2, d_model=64, n_heads=4, d_mlp=176, seq_len=64, batch=4,
            val_seqs=16)


# ------------------------------------------------------------------------------ the parts
class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)) with gate and up in one Linear of 2 * hidden outputs
    ([gate; up], the canonical layout) and torch's silu and mul."""

    def __init__(self, d, hidden, linear: Callable):
        super().__init__()
        self.hidden = hidden
        self.fc1 = linear(d, 2 * hidden)
        self.fc2 = linear(hidden, d)

    def forward(self, x):
        gate, up = self.fc1(x).chunk(2, dim=-1)
        return self.fc2(F.silu(gate) * up)

    @torch.no_grad()
    def set_weights(self, w_gate_up, w_down):
        self.fc1.weight.copy_(w_gate_up)
        self.fc2.weight.copy_(w_down)

    def canonical_weights(self):
        return self.fc1.weight, self.fc2.weight

    def canonical_grads(self):
        return self.fc1.weight.grad, self.fc2.weight.grad


class Head(nn.Module):
    """Output projection (vocab, d) and the mean cross-entropy over the tokens.

    ``ce``: "torch_fp32" (run (a): F.cross_entropy on the logits cast to fp32, as a plain
    training loop does), "torch_lowp" (F.cross_entropy on the logits in their compute dtype,
    outside autocast: no fp32 copy of the logits, log-softmax in fp32 registers but stored in
    bf16; per-token losses averaged in fp32), or a
    callable ``ce(logits_2d, targets_1d) -> mean loss`` (e.g. quack_cpp.cross_entropy)."""

    def __init__(self, d, vocab, linear: Callable, ce="torch_fp32"):
        super().__init__()
        self.proj = linear(d, vocab)
        self.ce = ce

    @property
    def weight(self):
        return self.proj.weight

    def forward(self, h, targets):
        logits = self.proj(h)
        if self.ce == "torch_fp32":
            return F.cross_entropy(logits.float(), targets)
        if self.ce == "torch_lowp":
            # Per-token losses in the logits' dtype (rounded once each, unbiased), their mean
            # in fp32: a bf16 mean would round the loss itself to ~0.4 %.
            with torch.autocast(device_type=h.device.type, enabled=False):
                return F.cross_entropy(logits, targets, reduction="none").float().mean()
        return self.ce(logits, targets)

    def logits(self, h):
        return self.proj(h)


@dataclass
class Parts:
    """The factories one variant of the model is built from, and what they are (for the
    report). ``norm(d, eps)``, ``linear(in, out)`` (bias-free), ``mlp(d, hidden)`` (an
    ``SwiGLU``-like module with ``set_weights``), ``head(d, vocab)`` (a ``Head``-like module:
    ``forward(h, targets) -> loss``, ``logits(h)``, ``weight``); ``rotary`` (optional, None:
    ``torch_rotary``) ``rotary(qkv, cos, sin) -> (q, k, v)`` with qkv the (B, T, 3, h, hd) view
    of the qkv Linear's output, cos and sin the model's (T, hd) tables (halves repeated), and
    q, k, v (B, h, T, hd) for SDPA, q and k rotated; ``add_norm`` (optional, None:
    the plain form) ``add_norm(norm, delta, residual, prenorm=True)`` with ``norm`` a module
    built by ``norm`` (its ``weight`` and ``eps`` are used) returns ``(norm(residual + delta),
    residual + delta)`` with the sum kept in residual's dtype and the first in delta's dtype,
    or only the first when ``prenorm`` is False (``torch_add_norm`` is the torch form);
    ``qkv_rotary`` (optional, None: ``linear`` + ``rotary``) ``qkv_rotary(d, h)`` a module
    that is the qkv Linear and the rotary together: ``forward(x, cos, sin) -> (q, k, v)`` in
    SDPA's (B, h, T, hd) layout, q and k rotated, with ``weight`` (its parameter, in a layout
    of its own) and ``set_weight(w)`` / ``canonical_weight()`` / ``canonical_grad()`` taking
    and giving the (3d, d) weight in the canonical [W_q; W_k; W_v] rotate_half layout."""
    name: str
    norm: Callable
    linear: Callable
    mlp: Callable
    head: Callable
    add_norm: Optional[Callable] = None
    rotary: Optional[Callable] = None   # None: torch_rotary
    qkv_rotary: Optional[Callable] = None  # None: linear + rotary
    ops: List[str] = field(default_factory=list)   # one line per part: what runs there
    used: List[str] = field(default_factory=list)  # our ops in use (demo/ours.py's OPS names)


def torch_add_norm(norm, delta, residual, prenorm=True):
    """The ``add_norm`` contract in torch (for tests and CPU stand-ins; run (a) uses the plain
    form instead): h = residual + delta in fp32, stored in residual's dtype; out =
    rms_norm(h) * weight in fp32, returned in delta's dtype."""
    with torch.autocast(device_type=delta.device.type, enabled=False):
        h = residual.float() + delta.float()
        out = F.rms_norm(h, (h.shape[-1],), None if norm.weight is None else norm.weight.float(),
                         norm.eps).to(delta.dtype)
    return (out, h.to(residual.dtype)) if prenorm else out


def torch_parts(device) -> Parts:
    """Run (a): torch.nn.RMSNorm, torch.nn.Linear, torch's silu * mul, F.cross_entropy."""
    def linear(i, o):
        return nn.Linear(i, o, bias=False, device=device)
    return Parts(
        name="torch",
        norm=lambda d, eps: nn.RMSNorm(d, eps=eps, device=device),
        linear=linear,
        mlp=lambda d, h: SwiGLU(d, h, linear),
        head=lambda d, v: Head(d, v, linear, "torch_fp32"),
        ops=["norm: torch.nn.RMSNorm", "linear: torch.nn.Linear (cuBLAS)",
             "mlp: torch.nn.Linear + F.silu * mul", "head + loss: torch.nn.Linear + "
             "F.cross_entropy (fp32 logits)"])


# ------------------------------------------------------------------------------ the model
def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def torch_rotary(qkv, cos, sin):
    """Parts.rotary in torch (runs (a), (b), (e)): q and k of qkv (B, T, 3, h, hd) rotated by
    ``x * cos + rotate_half(x) * sin`` with the (T, hd) tables cast to their dtype."""
    q, k, v = qkv.transpose(1, 3).unbind(2)                  # (B, h, T, hd) each
    cos, sin = cos.to(q.dtype), sin.to(q.dtype)              # (T, hd), broadcast
    q = q * cos + _rotate_half(q) * sin
    k = k * cos + _rotate_half(k) * sin
    return q, k, v


class Attention(nn.Module):
    def __init__(self, cfg, parts: Parts):
        super().__init__()
        d = cfg["d_model"]
        self.h, self.hd = cfg["n_heads"], d // cfg["n_heads"]
        self.fused = parts.qkv_rotary is not None
        self.qkv = parts.qkv_rotary(d, self.h) if self.fused else parts.linear(d, 3 * d)
        self.proj = parts.linear(d, d)
        self.rotary = parts.rotary or torch_rotary

    def forward(self, x, cos, sin):
        B, T, d = x.shape
        if self.fused:
            q, k, v = self.qkv(x, cos, sin)
        else:
            q, k, v = self.rotary(self.qkv(x).view(B, T, 3, self.h, self.hd), cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)   # (B, h, T, hd)
        return self.proj(y.transpose(1, 2).reshape(B, T, d))


class Block(nn.Module):
    def __init__(self, cfg, parts: Parts):
        super().__init__()
        d = cfg["d_model"]
        self.attn_norm = parts.norm(d, cfg["eps"])
        self.attn = Attention(cfg, parts)
        self.mlp_norm = parts.norm(d, cfg["eps"])
        self.mlp = parts.mlp(d, cfg["d_mlp"])
        self.add_norm = parts.add_norm

    def forward(self, x, cos, sin, delta=None):
        """Plain form (no ``add_norm``): the block's output stream. With ``add_norm``: ``x`` is
        the stream before the previous block's MLP output ``delta`` (None in the first block)
        is added; returns (stream before this block's MLP output, that output)."""
        if self.add_norm is None:
            x = x + self.attn(self.attn_norm(x), cos, sin)
            return x + self.mlp(self.mlp_norm(x))
        if delta is None:
            h = self.attn_norm(x)
        else:
            h, x = self.add_norm(self.attn_norm, delta, x)
        h, x = self.add_norm(self.mlp_norm, self.attn(h, cos, sin), x)
        return x, self.mlp(h)


class LM(nn.Module):
    """Decoder-only LM. ``forward(idx, targets)`` returns the mean cross-entropy of the
    next-token predictions (the loss is part of the module so torch.compile sees it);
    ``logits(idx)`` the last position's logits (generation)."""

    def __init__(self, cfg, parts: Parts, device):
        super().__init__()
        d, hd = cfg["d_model"], cfg["d_model"] // cfg["n_heads"]
        self.cfg = cfg
        self.embed = nn.Embedding(cfg["vocab"], d, device=device)
        self.blocks = nn.ModuleList(Block(cfg, parts) for _ in range(cfg["n_layers"]))
        self.final_norm = parts.norm(d, cfg["eps"])
        self.head = parts.head(d, cfg["vocab"])
        self.add_norm = parts.add_norm
        inv = 1.0 / (cfg["rope_base"] ** (torch.arange(0, hd, 2, device=device).float() / hd))
        ang = torch.outer(torch.arange(cfg["seq_len"], device=device).float(), inv)
        ang = torch.cat((ang, ang), dim=-1)                                      # (T, hd)
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    def hidden(self, idx):
        T = idx.shape[1]
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.embed(idx)                                   # fp32 residual stream
        if self.add_norm is None:
            for blk in self.blocks:
                x = blk(x, cos, sin)
            return self.final_norm(x)
        delta = None
        for blk in self.blocks:
            x, delta = blk(x, cos, sin, delta)
        return self.add_norm(self.final_norm, delta, x, prenorm=False)

    def forward(self, idx, targets):
        h = self.hidden(idx)
        return self.head(h.reshape(-1, h.shape[-1]), targets.reshape(-1))

    def logits(self, idx):
        h = self.hidden(idx)
        return self.head.logits(h[:, -1, :].contiguous())


def _qkv_weight(attn: Attention):
    """The qkv weight in the canonical layout (a fused qkv_rotary module converts)."""
    return attn.qkv.canonical_weight() if attn.fused else attn.qkv.weight


def _qkv_grad(attn: Attention):
    return attn.qkv.canonical_grad() if attn.fused else attn.qkv.weight.grad


def _set_qkv(attn: Attention, w):
    if attn.fused:
        attn.qkv.set_weight(w)
    else:
        attn.qkv.weight.copy_(w)


def canonical_tensors(model: LM):
    """(name, tensor) of every parameter in the canonical layout and a fixed order."""
    out = [("embed", model.embed.weight)]
    for i, b in enumerate(model.blocks):
        w1, w2 = b.mlp.canonical_weights()
        out += [(f"{i}.attn_norm", b.attn_norm.weight), (f"{i}.qkv", _qkv_weight(b.attn)),
                (f"{i}.proj", b.attn.proj.weight), (f"{i}.mlp_norm", b.mlp_norm.weight),
                (f"{i}.fc1", w1), (f"{i}.fc2", w2)]
    return out + [("final_norm", model.final_norm.weight), ("head", model.head.weight)]


def canonical_grads(model: LM):
    """(name, gradient) of every parameter in ``canonical_tensors``' names, layout and order
    (None where a parameter has no gradient); the MLP's through its ``canonical_grads()``."""
    out = [("embed", model.embed.weight.grad)]
    for i, b in enumerate(model.blocks):
        g1, g2 = b.mlp.canonical_grads()
        out += [(f"{i}.attn_norm", b.attn_norm.weight.grad), (f"{i}.qkv", _qkv_grad(b.attn)),
                (f"{i}.proj", b.attn.proj.weight.grad), (f"{i}.mlp_norm", b.mlp_norm.weight.grad),
                (f"{i}.fc1", g1), (f"{i}.fc2", g2)]
    return out + [("final_norm", model.final_norm.weight.grad), ("head", model.head.weight.grad)]


@torch.no_grad()
def load_canonical(dst: LM, src: LM):
    """dst's weights <- src's, through the canonical layout: ``canonical_tensors(src)`` copied
    into dst's parameters (the MLP's through its ``set_weights``), so models of different
    ``Parts`` exchange weights (e.g. run (c)'s interleaved fc1 into torch's [gate; up] SwiGLU
    for the reference evaluator of demo/train_lm.py). Exact: copies only (a dtype cast where
    the dtypes differ; the demo's parameters are fp32 on both sides). Raises ValueError when
    the two models' parameter names or canonical shapes differ (copy_ would broadcast)."""
    s = dict(canonical_tensors(src))
    d = canonical_tensors(dst)
    if [n for n, _ in d] != list(s):
        raise ValueError(f"load_canonical: parameter names differ ({len(d)} in dst, {len(s)} "
                         "in src)")
    for n, t in d:
        if tuple(t.shape) != tuple(s[n].shape):
            raise ValueError(f"load_canonical: {n} is {tuple(s[n].shape)} in src, "
                             f"{tuple(t.shape)} in dst")
    dst.embed.weight.copy_(s["embed"])
    for i, b in enumerate(dst.blocks):
        b.attn_norm.weight.copy_(s[f"{i}.attn_norm"])
        _set_qkv(b.attn, s[f"{i}.qkv"])
        b.attn.proj.weight.copy_(s[f"{i}.proj"])
        b.mlp_norm.weight.copy_(s[f"{i}.mlp_norm"])
        b.mlp.set_weights(s[f"{i}.fc1"], s[f"{i}.fc2"])
    dst.final_norm.weight.copy_(s["final_norm"])
    dst.head.weight.copy_(s["head"])


@torch.no_grad()
def init_weights(model: LM, seed: int):
    """Seeded init, the same for every variant: normal(0, 0.02) for the embedding, qkv, fc1 and
    the head; normal(0, 0.02 / sqrt(2 * n_layers)) for the projections into the residual
    stream (attention proj, fc2); norm weights ones. Drawn in canonical layout and order from
    one generator on the model's device."""
    cfg = model.cfg
    dev = model.embed.weight.device
    g = torch.Generator(device=dev)
    g.manual_seed(seed)
    resid = 0.02 / math.sqrt(2 * cfg["n_layers"])

    def draw(t, std):
        return torch.empty(t.shape, dtype=t.dtype, device=dev).normal_(0.0, std, generator=g)

    model.embed.weight.copy_(draw(model.embed.weight, 0.02))
    for b in model.blocks:
        b.attn_norm.weight.fill_(1.0)
        b.mlp_norm.weight.fill_(1.0)
        _set_qkv(b.attn, draw(_qkv_weight(b.attn), 0.02))
        b.attn.proj.weight.copy_(draw(b.attn.proj.weight, resid))
        w1, w2 = b.mlp.canonical_weights()
        b.mlp.set_weights(draw(w1, 0.02), draw(w2, resid))
    model.final_norm.weight.fill_(1.0)
    model.head.weight.copy_(draw(model.head.weight, 0.02))


@torch.no_grad()
def checksum(model: LM) -> float:
    """Sum of |w| over every parameter (layout-independent: equal for variants that start from
    the same weights)."""
    return float(sum(t.double().abs().sum() for _, t in canonical_tensors(model)))
