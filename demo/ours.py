"""The model's parts on quack_cpp, chosen by what the installed package offers.

Each of our ops joins the demo's model (demo/lm.py) as it lands, found by feature detection:

  op           used when                         else
  rmsnorm      quack_cpp.nn.RMSNorm              torch.nn.RMSNorm
  add_rmsnorm  quack_cpp.rmsnorm(delta, weight,  the plain form: x = x + delta (torch's add,
               residual=x, prenorm=True): the    fp32 stream), then the norm above
               residual add fused with the next
               norm (lm.py's add_norm; the
               stream stays fp32, h is bf16)
  linear       quack_cpp.nn.Linear               torch.nn.Linear
  rotary       with QUACK_DEMO_FUSED_ROTARY=1:   lm.py's torch_rotary (x * cos +
               quack_cpp.linear_rotary_qkv (the  rotate_half(x) * sin on the transposed q, k)
               qkv Linear with q and k rotated
               in its GEMM's epilogue, in the
               interleaved pair layout: each
               head's W_q / W_k rows permuted
               once, see FusedQkvRotary;
               backward one kernel packing
               dq, dk, dv, then the Linear's
               GEMMs; off by default: not
               faster, run Y); else
               apply_rotary_emb_qkv_split
               (one kernel after the qkv
               Linear, three tensors); else
               apply_rotary_emb_qkv + unbind
  mlp          quack_cpp.nn.MLP (activation      SwiGLU of the linear above + torch's silu * mul
               "swiglu": the GEMM's fused
               epilogue; fc1 holds gate and up
               interleaved)
  ce           quack_cpp.cross_entropy           run (a)'s loss: F.cross_entropy on the
                                                 logits cast to fp32 (lm.Head "torch_fp32"),
                                                 so a run without our ce / lce is not
                                                 credited with a torch-only saving
  lce          quack_cpp.nn.LinearCrossEntropy   the linear above + the ce above
               (head and loss fused: no logits)

Before the model is built, every op found is probed once at the model's shapes on a few rows:
forward and backward against a float64 reference, next to torch's own error in the same
dtype (the rule of shared/cases/handed.md: ours within a small multiple of torch's error). A
probe that raises (a missing keyword, a layout the kernels refuse) drops that op, with the
reason printed; one that computes a wrong result stops the demo (``ProbeMismatch``): a wrong
kernel is never timed. ``--ours`` restricts the ops tried; an op named there that cannot run
is an error.

``cpu_stand_ins()`` gives a namespace shaped like quack_cpp whose ops are written in torch (the
MLP with interleaved gate/up, the fused head as an ``nn.Linear`` subclass, ``rmsnorm`` with a
residual, ``apply_rotary_emb_qkv``, ``apply_rotary_emb_qkv_split`` and ``linear_rotary_qkv``), for the CPU smoke test: it runs this module's detection,
probes and weight conversions without a GPU.
"""

import inspect
import os
import types
from typing import Dict, List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from lm import Head, Parts, SwiGLU, torch_rotary

OPS = ("rmsnorm", "add_rmsnorm", "linear", "rotary", "mlp", "ce", "lce")
PROBE_ROWS = 64          # tokens in each probe (a multiple of 8: TMA rows)


class ProbeMismatch(RuntimeError):
    """One of our ops computed a result outside the tolerance (the demo stops)."""


class OpUnavailable(RuntimeError):
    """An op asked for with --ours cannot run."""


# ---------------------------------------------------------------------------- our modules
def _interleave(w_gate_up):
    """[gate; up] (2h, d) -> rows gate_0, up_0, gate_1, up_1, ... (the gated GEMM's layout:
    postact[:, j] = silu(preact[:, 2j]) * preact[:, 2j + 1])."""
    h = w_gate_up.shape[0] // 2
    return torch.stack((w_gate_up[:h], w_gate_up[h:]), dim=1).reshape(2 * h, -1)


def _deinterleave(w):
    h = w.shape[0] // 2
    v = w.reshape(h, 2, -1)
    return torch.cat((v[:, 0], v[:, 1]), dim=0)


def _make_mlp(cls, d, hidden, device):
    """cls(d, hidden, activation="swiglu") with fc1 (2 * hidden, d) and fc2 (d, hidden); the
    keywords of QuACK's MLP first, then the bare ones."""
    tries = (dict(out_features=d, bias1=False, bias2=False, activation="swiglu", device=device),
             dict(activation="swiglu", device=device))
    err = None
    for kw in tries:
        try:
            m = cls(d, hidden, **kw)
            break
        except TypeError as e:
            err = e
    else:
        raise err
    fc1, fc2 = getattr(m, "fc1", None), getattr(m, "fc2", None)
    if fc1 is None or fc2 is None:
        raise AttributeError(f"{type(m).__name__} has no fc1/fc2 Linear modules")
    if tuple(fc1.weight.shape) == (hidden, d) and tuple(fc2.weight.shape) == (d, hidden // 2):
        # hidden_features counted gate and up together: ask for twice as many.
        return _make_mlp(cls, d, 2 * hidden, device)
    if tuple(fc1.weight.shape) != (2 * hidden, d) or tuple(fc2.weight.shape) != (d, hidden):
        raise ValueError(f"{type(m).__name__}(d={d}, hidden={hidden}) has fc1 "
                         f"{tuple(fc1.weight.shape)} and fc2 {tuple(fc2.weight.shape)}, expected "
                         f"({2 * hidden}, {d}) and ({d}, {hidden})")
    return m


class FusedSwiGLU(nn.Module):
    """quack_cpp.nn.MLP(activation="swiglu") behind the demo's MLP interface (``set_weights``
    from the canonical [gate; up] layout). ``layout``: how fc1 holds gate and up,
    "interleaved" (the kernel's documented layout) or "concat" (tried when the probe finds
    the interleaved reading wrong)."""

    def __init__(self, cls, d, hidden, device, layout="interleaved"):
        super().__init__()
        self.inner = _make_mlp(cls, d, hidden, device)
        self.layout = layout

    def forward(self, x):
        # (tokens, d) in and out, as the kernels' tests call it; the model's (B, T, d) is a view.
        return self.inner(x.reshape(-1, x.shape[-1])).view(*x.shape[:-1], -1)

    @torch.no_grad()
    def set_weights(self, w_gate_up, w_down):
        w = _interleave(w_gate_up) if self.layout == "interleaved" else w_gate_up
        self.inner.fc1.weight.copy_(w)
        self.inner.fc2.weight.copy_(w_down)

    def canonical_weights(self):
        w1 = self.inner.fc1.weight
        return (_deinterleave(w1) if self.layout == "interleaved" else w1), self.inner.fc2.weight

    def canonical_grads(self):
        g1 = self.inner.fc1.weight.grad
        if g1 is not None and self.layout == "interleaved":
            g1 = _deinterleave(g1)
        return g1, self.inner.fc2.weight.grad


def make_add_norm(rmsnorm_fn):
    """lm.py's ``add_norm`` on ``rmsnorm_fn`` (quack_cpp.rmsnorm's signature): one kernel
    reads delta and the residual stream, writes the stream (in its own dtype: fp32 in the demo,
    as the plain form keeps it) and the normalised rows (in delta's dtype); the backward gives
    d(delta) and d(residual) from one kernel too."""
    def add_norm(norm, delta, residual, prenorm=True):
        eps = norm.eps if norm.eps is not None else torch.finfo(torch.float32).eps
        return rmsnorm_fn(delta, norm.weight, residual=residual, eps=eps, prenorm=prenorm,
                          residual_dtype=residual.dtype)
    return add_norm


class FusedHead(nn.Module):
    """quack_cpp.nn.LinearCrossEntropy (head and loss in one; no logits tensor) behind the
    demo's head interface. ``logits`` (generation) uses ``logits_fn(h, weight)``."""

    def __init__(self, cls, d, vocab, device, logits_fn):
        super().__init__()
        try:
            self.proj = cls(d, vocab, bias=False, device=device)
        except TypeError:
            self.proj = cls(d, vocab, device=device)
        self.logits_fn = logits_fn

    @property
    def weight(self):
        return self.proj.weight

    def forward(self, h, targets):
        return self.proj(h, targets)

    def logits(self, h):
        return self.logits_fn(h, self.proj.weight)


# ---------------------------------------------------------------------------------- probes
def _err(a, ref):
    a, ref = a.detach().double(), ref.detach().double()
    return float((a - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def _judge(name, rows, floor):
    """rows: (what, ours, torch_same_dtype, reference). Passes when every ours error is within
    4 x torch's + floor. Returns a one-line summary; raises ProbeMismatch otherwise."""
    parts, bad = [], []
    for what, ours, tor, ref in rows:
        eo, et = _err(ours, ref), _err(tor, ref)
        parts.append(f"{what} {eo:.1e} (torch {et:.1e})")
        if not (eo <= 4 * et + floor):       # NaN fails too
            bad.append(what)
    line = f"{name}: max rel. error vs float64: " + ", ".join(parts)
    if bad:
        raise ProbeMismatch(f"probe {line}: {', '.join(bad)} outside 4 x torch's error + "
                            f"{floor:g}")
    return line


def _grads(fn, inputs, params, dy):
    """Output and the gradients of sum(out * dy) w.r.t. inputs + params."""
    for t in list(inputs) + list(params):
        t.grad = None
    out = fn()
    (out.float() * dy).sum().backward() if out.dim() else out.backward()
    return [out] + [t.grad.clone() for t in list(inputs) + list(params)]


def _autocast(device):
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def probe_rmsnorm(cls, cfg, device, g):
    d, eps = cfg["d_model"], cfg["eps"]
    m = cls(d, eps=eps, device=device)
    ref_m = nn.RMSNorm(d, eps=eps, device=device)
    w = 1 + 0.1 * torch.randn(d, device=device, generator=g)
    with torch.no_grad():
        m.weight.copy_(w)
        ref_m.weight.copy_(w)
    x = torch.randn(PROBE_ROWS, d, device=device, generator=g).requires_grad_()
    dy = torch.randn(PROBE_ROWS, d, device=device, generator=g)
    xd, wd = x.detach().double().requires_grad_(), w.double().requires_grad_()
    ours = _grads(lambda: m(x), [x], [m.weight], dy)
    tor = _grads(lambda: ref_m(x), [x], [ref_m.weight], dy)
    ref = _grads(lambda: F.rms_norm(xd, (d,), wd, eps), [xd], [wd], dy.double())
    return _judge("rmsnorm", list(zip(("out", "dx", "dw"), ours, tor, ref)), 1e-4)


def probe_add_rmsnorm(add_norm, cfg, device, g):
    """add_norm(norm, delta, residual) (make_add_norm's) at the model's dtypes: delta bf16
    (a block's output under autocast), residual fp32 (the stream), weight fp32; the gradients
    of sum(out * dy) + sum(residual_out * dr) against float64, beside torch's plain form
    (residual + delta, torch.nn.RMSNorm, its output cast to bf16 as the next Linear does)."""
    d, eps = cfg["d_model"], cfg["eps"]
    bf = torch.bfloat16
    norm = nn.RMSNorm(d, eps=eps, device=device)
    ref_norm = nn.RMSNorm(d, eps=eps, device=device)
    w = 1 + 0.1 * torch.randn(d, device=device, generator=g)
    with torch.no_grad():
        norm.weight.copy_(w)
        ref_norm.weight.copy_(w)
    delta = torch.randn(PROBE_ROWS, d, device=device, generator=g).to(bf)
    res = 4 * torch.randn(PROBE_ROWS, d, device=device, generator=g)
    dy = torch.randn(PROBE_ROWS, d, device=device, generator=g).to(bf).float()
    dr = torch.randn(PROBE_ROWS, d, device=device, generator=g)

    def run(fn, ins, weight):
        for t in list(ins) + [weight]:
            t.grad = None
        out, h = fn(*ins)
        ((out.to(dy.dtype) * dy).sum() + (h.to(dr.dtype) * dr).sum()).backward()
        return [out, h] + [t.grad.clone() for t in list(ins) + [weight]]

    dl, rl = delta.clone().requires_grad_(), res.clone().requires_grad_()
    ours = run(lambda a, b: add_norm(norm, a, b), (dl, rl), norm.weight)
    if ours[0].dtype != bf or ours[1].dtype != torch.float32:
        raise ProbeMismatch(f"probe add_rmsnorm: out {ours[0].dtype} and residual_out "
                            f"{ours[1].dtype}, expected torch.bfloat16 and torch.float32")

    def plain(a, b):
        h = b + a
        return ref_norm(h).to(bf), h
    dt, rt = delta.clone().requires_grad_(), res.clone().requires_grad_()
    tor = run(plain, (dt, rt), ref_norm.weight)
    dd, rd = delta.double().requires_grad_(), res.double().requires_grad_()
    wd = w.double().requires_grad_()

    def ref_fn(a, b):
        h = b + a
        return F.rms_norm(h, (d,), wd, eps), h
    dy, dr = dy.double(), dr.double()
    ref = run(ref_fn, (dd, rd), wd)
    names = ("out", "residual_out", "d(delta)", "d(residual)", "dw")
    return _judge("add_rmsnorm", list(zip(names, ours, tor, ref)), 1e-4)


def make_rotary(rotary_qkv_fn, split=False):
    """lm.py's ``Parts.rotary`` on ``rotary_qkv_fn``: with ``split``,
    quack_cpp.apply_rotary_emb_qkv_split's signature (qkv (B, T, 3, h, hd), cos and sin
    (T, hd / 2) fp32 -> q, k, v each (B, T, h, hd) contiguous; each ``.transpose(1, 2)`` is
    SDPA's (B, h, T, hd) view, no copy; the backward writes the packed gradient in one kernel),
    else quack_cpp.apply_rotary_emb_qkv's (-> rotated (B, T, 3, h, hd), unbound into views;
    autograd then stacks dq, dk, dv into a packed gradient, a copy, before the rotary
    backward). The model's (T, hd) tables repeat their halves, so their first halves are the
    kernel's tables (a view, no copy)."""
    if split:
        def rotary(qkv, cos, sin):
            half = cos.shape[-1] // 2
            q, k, v = rotary_qkv_fn(qkv, cos[:, :half], sin[:, :half])
            return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        return rotary

    def rotary(qkv, cos, sin):
        half = cos.shape[-1] // 2
        out = rotary_qkv_fn(qkv, cos[:, :half], sin[:, :half])
        return out.transpose(1, 3).unbind(2)
    return rotary


def interleave_heads(w, n_heads, hd):
    """[W_q; W_k; W_v] (3 d, K) with each q and k head's rows reordered from rotate_half's
    layout to the interleaved one (new row 2i = old row i, new row 2i + 1 = old row i + hd / 2),
    v unchanged: the rotation of adjacent output pairs (2i, 2i + 1) of the permuted projection
    is then rotate_half's rotation of (i, i + hd / 2) of the original one, so q and k come out
    with one permutation of the head dimension, which q · k does not see."""
    perm = torch.arange(hd, device=w.device).view(2, hd // 2).t().reshape(-1)
    qk = w[:2 * n_heads * hd].reshape(2 * n_heads, hd, -1)[:, perm].reshape(2 * n_heads * hd, -1)
    return torch.cat((qk, w[2 * n_heads * hd:]), 0)


def deinterleave_heads(w, n_heads, hd):
    """The inverse of interleave_heads (the canonical layout back)."""
    inv = torch.arange(hd, device=w.device).view(hd // 2, 2).t().reshape(-1)
    qk = w[:2 * n_heads * hd].reshape(2 * n_heads, hd, -1)[:, inv].reshape(2 * n_heads * hd, -1)
    return torch.cat((qk, w[2 * n_heads * hd:]), 0)


class FusedQkvRotary(nn.Module):
    """lm.py's ``Parts.qkv_rotary`` on ``linear_rotary_qkv`` (quack_cpp's: the qkv GEMM with q
    and k rotated in its epilogue, interleaved pairs). ``weight`` holds [W_q; W_k; W_v] with
    each q and k head's rows in the interleaved order (``interleave_heads``), so the model
    computes run (a)'s function from the same canonical weights: q and k come out in one
    permutation of the head dimension (SDPA's q · k and its output, which depends on v only
    besides, are unchanged). The model's (T, hd) tables repeat their halves: their first
    halves are the kernel's (T, hd / 2) tables (a view)."""

    def __init__(self, fn, d, n_heads, device):
        super().__init__()
        self.fn, self.h, self.hd = fn, n_heads, d // n_heads
        self.weight = nn.Parameter(torch.empty(3 * d, d, device=device))

    def forward(self, x, cos, sin):
        half = self.hd // 2
        q, k, v = self.fn(x, self.weight, cos[:, :half], sin[:, :half], self.h)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    @torch.no_grad()
    def set_weight(self, w):
        self.weight.copy_(interleave_heads(w, self.h, self.hd))

    def canonical_weight(self):
        return deinterleave_heads(self.weight, self.h, self.hd)

    def canonical_grad(self):
        g = self.weight.grad
        return None if g is None else deinterleave_heads(g, self.h, self.hd)


def probe_qkv_rotary(make, cfg, device, g):
    """A FusedQkvRotary (make()) on bf16 x of PROBE_ROWS tokens under autocast, weights set
    from a canonical W: q, k, v, the attention scores q · kᵀ (layout-independent), dx and the
    canonical dW of sum(q * dq) + sum(k * dk) + sum(v * dv) (dq, dk permuted like q, k) against
    float64 (torch's Linear + torch_rotary), beside the torch path in bf16."""
    d, h = cfg["d_model"], cfg["n_heads"]
    hd = d // h
    T = PROBE_ROWS
    inv = 1.0 / (cfg["rope_base"] ** (torch.arange(0, hd, 2, device=device).float() / hd))
    ang = torch.outer(torch.arange(T, device=device).float(), inv)
    ang = torch.cat((ang, ang), dim=-1)
    cos, sin = ang.cos(), ang.sin()
    bf = torch.bfloat16
    x0 = torch.randn(1, T, d, device=device, generator=g).to(bf)
    w0 = (torch.randn(3 * d, d, device=device, generator=g) * 0.02).float()
    dys = [torch.randn(1, h, T, hd, device=device, generator=g).to(bf) for _ in range(3)]
    perm = torch.arange(hd, device=device).view(2, hd // 2).t().reshape(-1)
    mod = make()
    mod.set_weight(w0)

    def finish(q, k, v, x, w_grad, dt):
        scores = (q.to(dt) @ k.to(dt).transpose(-1, -2)).detach()
        return [q.detach(), k.detach(), v.detach(), scores, x.grad, w_grad]

    def run_ours():
        x = x0.detach().clone().requires_grad_()
        mod.weight.grad = None
        with _autocast(device):
            q, k, v = mod(x, cos, sin)
        sum((o.float() * dy[..., p].float()).sum() for o, dy, p in
            zip((q, k, v), dys, (perm, perm, slice(None)))).backward()
        return finish(q[..., _inverse(perm)], k[..., _inverse(perm)], v, x,
                      mod.canonical_grad(), torch.float32)

    def run_torch(dt):
        x = x0.detach().to(dt).requires_grad_()
        w = w0.detach().to(dt).requires_grad_()
        c, s = (cos.to(dt), sin.to(dt))
        q, k, v = torch_rotary(F.linear(x, w).view(1, T, 3, h, hd), c, s)
        sum((o * dy.to(dt)).sum() for o, dy in zip((q, k, v), dys)).backward()
        return finish(q, k, v, x, w.grad, dt)

    ours = run_ours()
    if ours[0].dtype != bf:
        raise ProbeMismatch(f"probe rotary: q comes out in {ours[0].dtype}, expected bf16")
    tor = run_torch(bf)
    ref = run_torch(torch.float64)
    names = ("q", "k", "v", "q·kᵀ", "dx", "dW")
    return _judge("rotary (fused qkv)", list(zip(names, ours, tor, ref)), 1e-4)


def _inverse(perm):
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel(), device=perm.device)
    return inv


def probe_rotary(rotary, cfg, device, g):
    """rotary(qkv, cos, sin) (make_rotary's) on a bf16 qkv of PROBE_ROWS tokens at the model's
    heads and head dim: q, k, v and the gradient of sum(q * dq) + sum(k * dk) + sum(v * dv)
    against float64, beside torch_rotary in bf16 (the tables cast to bf16, as run (a) does)."""
    h, hd = cfg["n_heads"], cfg["d_model"] // cfg["n_heads"]
    T = PROBE_ROWS
    inv = 1.0 / (cfg["rope_base"] ** (torch.arange(0, hd, 2, device=device).float() / hd))
    ang = torch.outer(torch.arange(T, device=device).float(), inv)
    ang = torch.cat((ang, ang), dim=-1)
    cos, sin = ang.cos(), ang.sin()
    bf = torch.bfloat16
    qkv = torch.randn(1, T, 3, h, hd, device=device, generator=g).to(bf)
    dys = [torch.randn(1, h, T, hd, device=device, generator=g).to(bf) for _ in range(3)]

    def run(fn, x, dt):
        x = x.detach().to(dt).requires_grad_()
        outs = fn(x)
        sum((o.to(dt) * dy.to(dt)).sum() for o, dy in zip(outs, dys)).backward()
        return [o.detach() for o in outs] + [x.grad]

    ours = run(lambda x: rotary(x, cos, sin), qkv, bf)
    if ours[0].dtype != bf:
        raise ProbeMismatch(f"probe rotary: q comes out in {ours[0].dtype}, expected bf16")
    tor = run(lambda x: torch_rotary(x, cos, sin), qkv, bf)
    ref = run(lambda x: torch_rotary(x, cos.double(), sin.double()), qkv, torch.float64)
    return _judge("rotary", list(zip(("q", "k", "v", "dqkv"), ours, tor, ref)), 1e-4)


def _ref_linear_bf16(x, w):
    return x.to(torch.bfloat16).double() @ w.to(torch.bfloat16).double().T


def probe_linear(cls, cfg, device, g):
    d = cfg["d_model"]
    o = 3 * d
    m = cls(d, o, bias=False, device=device)
    ref_m = nn.Linear(d, o, bias=False, device=device)
    with torch.no_grad():
        m.weight.normal_(0, 0.02, generator=g)
        ref_m.weight.copy_(m.weight)
    x = torch.randn(PROBE_ROWS, d, device=device, generator=g).requires_grad_()
    dy = torch.randn(PROBE_ROWS, o, device=device, generator=g)
    with _autocast(device):
        ours = _grads(lambda: m(x), [x], [m.weight], dy)
        tor = _grads(lambda: ref_m(x), [x], [ref_m.weight], dy)
    xd = x.detach().to(torch.bfloat16).double().requires_grad_()
    wd = m.weight.detach().to(torch.bfloat16).double().requires_grad_()
    ref = _grads(lambda: xd @ wd.T, [xd], [wd], dy.to(torch.bfloat16).double())
    return _judge("linear", list(zip(("out", "dx", "dw"), ours, tor, ref)), 2e-3)


def _swiglu_ref(x, w1, w2):
    gate, up = (x @ w1.T).chunk(2, dim=-1)
    return (F.silu(gate) * up) @ w2.T


def probe_mlp(make, cfg, device, g):
    """make() -> an MLP module with set_weights / canonical_weights (ours)."""
    d, h = cfg["d_model"], cfg["d_mlp"]
    m = make()
    ref_m = SwiGLU(d, h, lambda i, o: nn.Linear(i, o, bias=False, device=device))
    w1 = torch.randn(2 * h, d, device=device, generator=g) * 0.02
    w2 = torch.randn(d, h, device=device, generator=g) * 0.02
    m.set_weights(w1, w2)
    ref_m.set_weights(w1, w2)
    x = torch.randn(PROBE_ROWS, d, device=device, generator=g).requires_grad_()
    dy = torch.randn(PROBE_ROWS, d, device=device, generator=g)
    ow1, ow2 = m.canonical_weights()
    with _autocast(device):
        ours = _grads(lambda: m(x), [x], [], dy)
        tor = _grads(lambda: ref_m(x), [x], [], dy)
    ours_dw = _deinterleave(m.inner.fc1.weight.grad) if getattr(m, "layout", "") == \
        "interleaved" else m.inner.fc1.weight.grad
    bf = torch.bfloat16
    xd = x.detach().to(bf).double().requires_grad_()
    w1d = w1.to(bf).double().requires_grad_()
    w2d = w2.to(bf).double().requires_grad_()
    ref = _grads(lambda: _swiglu_ref(xd, w1d, w2d), [xd], [w1d, w2d], dy.to(bf).double())
    ok_w = _err(ow1, w1) == 0 and _err(ow2, w2) == 0
    if not ok_w:
        raise ProbeMismatch("probe mlp: canonical_weights() does not return what set_weights() "
                            "was given")
    rows = [("out", ours[0], tor[0], ref[0]), ("dx", ours[1], tor[1], ref[1]),
            ("dW1", ours_dw, ref_m.fc1.weight.grad, ref[2]),
            ("dW2", m.inner.fc2.weight.grad, ref_m.fc2.weight.grad, ref[3])]
    return _judge("mlp", rows, 5e-3)


def probe_ce(ce, cfg, device, g):
    V = cfg["vocab"]
    logits = (3 * torch.randn(PROBE_ROWS, V, device=device, generator=g)).to(torch.bfloat16)
    t = torch.randint(0, V, (PROBE_ROWS,), device=device, generator=g)
    lo = logits.clone().requires_grad_()
    lt = logits.clone().requires_grad_()
    ld = logits.double().requires_grad_()
    ours = _grads(lambda: ce(lo, t), [lo], [], None)
    tor = _grads(lambda: F.cross_entropy(lt.float(), t), [lt], [], None)
    ref = _grads(lambda: F.cross_entropy(ld, t), [ld], [], None)
    return _judge("cross_entropy", list(zip(("loss", "dlogits"), ours, tor, ref)), 1e-3)


def probe_lce(make, cfg, device, g):
    d, V = cfg["d_model"], cfg["vocab"]
    m = make()
    w = torch.randn(V, d, device=device, generator=g) * 0.02
    with torch.no_grad():
        m.weight.copy_(w)
    wt = w.clone().requires_grad_()
    x = torch.randn(PROBE_ROWS, d, device=device, generator=g).requires_grad_()
    t = torch.randint(0, V, (PROBE_ROWS,), device=device, generator=g)
    with _autocast(device):
        ours = _grads(lambda: m(x, t), [x], [m.weight], None)
        tor = _grads(lambda: F.cross_entropy(F.linear(x, wt).float(), t), [x], [wt], None)
    bf = torch.bfloat16
    xd = x.detach().to(bf).double().requires_grad_()
    wd = w.to(bf).double().requires_grad_()
    ref = _grads(lambda: F.cross_entropy(xd @ wd.T, t), [xd], [wd], None)
    return _judge("linear_cross_entropy", list(zip(("loss", "dx", "dW"), ours, tor, ref)), 2e-3)


# ---------------------------------------------------------------------------------- choice
def _has(ns, path):
    obj = ns
    for p in path.split("."):
        obj = getattr(obj, p, None)
        if obj is None:
            return None
    return obj


def ours_parts(qc, cfg, device, want: Optional[List[str]] = None, log=print,
               label="quack_cpp") -> Parts:
    """The Parts of runs (c) and (d) on ``qc`` (quack_cpp, or ``cpu_stand_ins()``): each op of
    OPS that ``qc`` has, that ``want`` names (None: all) and whose probe passes. Prints one
    line per op. Raises ProbeMismatch (a wrong result) or OpUnavailable (an op named in
    ``want`` cannot run)."""
    explicit = want is not None
    want = list(OPS) if want is None else list(want)
    g = torch.Generator(device=device)
    g.manual_seed(1234)
    qnn = _has(qc, "nn")
    used: Dict[str, object] = {}

    def attempt(op, found, probe):
        if op not in want:
            log(f"  {op:11s} not asked for (--ours)")
            return False
        if found is None:
            if explicit:
                raise OpUnavailable(f"--ours names {op}, but {label} has no {OPS_API[op]}")
            log(f"  {op:11s} not in {label} yet: {OPS_API[op]}")
            return False
        try:
            line = probe()
        except ProbeMismatch:
            raise
        except Exception as e:  # noqa: BLE001 - any failure to run drops the op, said aloud
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            if explicit:
                raise OpUnavailable(f"--ours names {op}, but its probe failed: {msg}") from e
            log(f"  {op:11s} found but not used: its probe raised {msg}")
            return False
        log(f"  {op:11s} ok  {line}")
        return True

    norm_cls = _has(qnn, "RMSNorm")
    if attempt("rmsnorm", norm_cls, lambda: probe_rmsnorm(norm_cls, cfg, device, g)):
        used["rmsnorm"] = norm_cls
    rms_fn = _has(qc, "rmsnorm")
    if rms_fn is not None and not {"residual", "prenorm", "residual_dtype"} <= set(
            _params_of(rms_fn)):
        rms_fn = None      # an rmsnorm without the fused residual add
    add_norm = make_add_norm(rms_fn) if rms_fn is not None else None
    if attempt("add_rmsnorm", rms_fn, lambda: probe_add_rmsnorm(add_norm, cfg, device, g)):
        used["add_rmsnorm"] = add_norm
    lin_cls = _has(qnn, "Linear")
    if attempt("linear", lin_cls, lambda: probe_linear(lin_cls, cfg, device, g)):
        used["linear"] = lin_cls
    # The fused qkv + rotary only on request: run Y measured it at the demo's shape against
    # linear + the split rotary at 0.994 × the time forward and 1.021 × forward + backward (the
    # epilogue's cos / sin reads cost what the separate pass saved).
    fused_fn = (_has(qc, "linear_rotary_qkv")
                if os.environ.get("QUACK_DEMO_FUSED_ROTARY", "0") == "1" else None)

    def make_fused(d=cfg["d_model"], h=cfg["n_heads"]):
        return FusedQkvRotary(fused_fn, d, h, device)
    qkv_rotary = None
    rot_fn, rot_split = None, False
    if fused_fn is not None and attempt("rotary", fused_fn,
                                        lambda: probe_qkv_rotary(make_fused, cfg, device, g)):
        qkv_rotary = make_fused
        used["rotary"] = make_fused
    else:
        rot_fn = _has(qc, "apply_rotary_emb_qkv_split")
        rot_split = rot_fn is not None
        if not rot_split:
            rot_fn = _has(qc, "apply_rotary_emb_qkv")
        rotary = make_rotary(rot_fn, rot_split) if rot_fn is not None else None
        if attempt("rotary", rot_fn, lambda: probe_rotary(rotary, cfg, device, g)):
            used["rotary"] = rotary
    mlp_cls = _has(qnn, "MLP")
    layout = ["interleaved"]

    def mlp_probe():
        try:
            return probe_mlp(lambda: FusedSwiGLU(mlp_cls, cfg["d_model"], cfg["d_mlp"], device,
                                                 "interleaved"), cfg, device, g)
        except ProbeMismatch as e:
            try:  # a kernel reading gate and up as two halves instead
                line = probe_mlp(lambda: FusedSwiGLU(mlp_cls, cfg["d_model"], cfg["d_mlp"],
                                                     device, "concat"), cfg, device, g)
            except ProbeMismatch:
                raise e from None
            layout[0] = "concat"
            return line + " [fc1 holds gate and up as two halves, not interleaved]"
    if attempt("mlp", mlp_cls, mlp_probe):
        used["mlp"] = mlp_cls
    ce_fn = _has(qc, "cross_entropy")

    def ce(logits, targets):
        return ce_fn(logits, targets, reduction="mean")
    if attempt("ce", ce_fn, lambda: probe_ce(ce, cfg, device, g)):
        used["ce"] = ce
    lce_cls = _has(qnn, "LinearCrossEntropy")
    lin_fn = _has(qc, "linear")

    def logits_fn(h, w):
        if lin_fn is not None and h.is_cuda:
            return lin_fn(h, w)
        return F.linear(h, w)

    def make_head():
        return FusedHead(lce_cls, cfg["d_model"], cfg["vocab"], device, logits_fn)
    if attempt("lce", lce_cls, lambda: probe_lce(make_head, cfg, device, g)):
        used["lce"] = lce_cls

    # The factories.
    ops = []
    if "rmsnorm" in used:
        norm = lambda d, eps: norm_cls(d, eps=eps, device=device)  # noqa: E731
        ops.append(f"norm: {label}.nn.RMSNorm")
    else:
        norm = lambda d, eps: nn.RMSNorm(d, eps=eps, device=device)  # noqa: E731
        ops.append("norm: torch.nn.RMSNorm")
    if "add_rmsnorm" in used:
        ops.append(f"residual add + next norm: {label}.rmsnorm(delta, weight, residual=x, "
                   "prenorm=True), one kernel (fp32 stream, bf16 out)")
    else:
        ops.append("residual add + next norm: torch add (fp32 stream), then the norm above")
    if "linear" in used:
        linear = lambda i, o: lin_cls(i, o, bias=False, device=device)  # noqa: E731
        lin_name = f"{label}.nn.Linear"
    else:
        linear = lambda i, o: nn.Linear(i, o, bias=False, device=device)  # noqa: E731
        lin_name = "torch.nn.Linear (cuBLAS)"
    if qkv_rotary is not None:
        ops.append(f"linear (attention proj): {lin_name}")
        ops.append(f"qkv linear + rotary (q, k): {label}.linear_rotary_qkv (the GEMM rotates q "
                   "and k in its epilogue, interleaved pairs: W_q / W_k rows permuted per head "
                   "once; backward one kernel packing dq, dk, dv, then dgrad and wgrad GEMMs)")
    else:
        ops.append(f"linear (qkv, attention proj): {lin_name}")
    if qkv_rotary is not None:
        pass
    elif "rotary" in used:
        if rot_split:
            ops.append(f"rotary (q, k): {label}.apply_rotary_emb_qkv_split (one kernel: q, k "
                       "rotated, v copied, as three tensors; backward one kernel writing the "
                       "packed gradient, no stack)")
        else:
            ops.append(f"rotary (q, k): {label}.apply_rotary_emb_qkv (one kernel: q, k "
                       "rotated, v copied)")
    else:
        ops.append("rotary (q, k): torch x * cos + rotate_half(x) * sin")
    if "mlp" in used:
        mlp = lambda d, h: FusedSwiGLU(mlp_cls, d, h, device, layout[0])  # noqa: E731
        ops.append(f"mlp: {label}.nn.MLP(activation='swiglu') (GEMM with the SwiGLU epilogue, "
                   f"fc1 {layout[0]})")
    else:
        mlp = lambda d, h: SwiGLU(d, h, linear)  # noqa: E731
        ops.append(f"mlp: {lin_name} + torch F.silu * mul")
    if "lce" in used:
        head = lambda d, v: FusedHead(lce_cls, d, v, device, logits_fn)  # noqa: E731
        ops.append(f"head + loss: {label}.nn.LinearCrossEntropy (no logits tensor)")
    elif "ce" in used:
        head = lambda d, v: Head(d, v, linear, used["ce"])  # noqa: E731
        ops.append(f"head + loss: {lin_name} + {label}.cross_entropy (bf16 logits)")
    else:
        # Run (a)'s loss (fp32 logits): "torch_lowp" (torch's CE on the bf16 logits, no fp32
        # copy) would credit this run with a saving that torch alone gives.
        head = lambda d, v: Head(d, v, linear, "torch_fp32")  # noqa: E731
        ops.append(f"head + loss: {lin_name} + F.cross_entropy (fp32 logits, as run (a))")
    in_model = [o for o in OPS if o in used and not (o == "ce" and "lce" in used)]
    return Parts(name="ours", norm=norm, linear=linear, mlp=mlp, head=head, ops=ops,
                 used=in_model, add_norm=used.get("add_rmsnorm"),
                 rotary=None if qkv_rotary is not None else used.get("rotary"),
                 qkv_rotary=(None if qkv_rotary is None else
                             lambda d, h: FusedQkvRotary(fused_fn, d, h, device)))


def _params_of(fn):
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


OPS_API = {"rmsnorm": "nn.RMSNorm", "add_rmsnorm": "rmsnorm(..., residual=, prenorm=, "
           "residual_dtype=)", "linear": "nn.Linear", "rotary": "linear_rotary_qkv, apply_rotary_emb_qkv_split or apply_rotary_emb_qkv",
           "mlp": "nn.MLP",
           "ce": "cross_entropy", "lce": "nn.LinearCrossEntropy"}


# --------------------------------------------------------------------- CPU stand-ins (smoke)
def cpu_stand_ins():
    """A namespace shaped like quack_cpp whose ops are torch code (for --cpu-smoke): the
    torch modules under our names, an MLP whose fc1 holds gate and up interleaved, a fused
    head as an nn.Linear subclass taking (x, target), and cross_entropy(logits, target,
    reduction)."""

    class Linear(nn.Linear):
        def __init__(self, i, o, bias=False, device=None, dtype=None):
            super().__init__(i, o, bias=bias, device=device, dtype=dtype)

    class MLP(nn.Module):
        def __init__(self, in_features, hidden_features, out_features=None, bias1=False,
                     bias2=False, activation="swiglu", device=None, dtype=None):
            super().__init__()
            assert activation == "swiglu" and not bias1 and not bias2
            out_features = out_features or in_features
            self.fc1 = nn.Linear(in_features, 2 * hidden_features, bias=False, device=device)
            self.fc2 = nn.Linear(hidden_features, out_features, bias=False, device=device)

        def forward(self, x):
            y = self.fc1(x)
            return self.fc2(F.silu(y[..., 0::2]) * y[..., 1::2])

    class LinearCrossEntropy(nn.Linear):
        def __init__(self, in_features, out_features, bias=False, device=None, dtype=None,
                     ignore_index=-100, reduction="mean"):
            super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
            self.ignore_index, self.reduction = ignore_index, reduction

        def forward(self, x, target):
            return F.cross_entropy(F.linear(x, self.weight).float(), target,
                                   ignore_index=self.ignore_index, reduction=self.reduction)

    def cross_entropy(logits, target, ignore_index=-100, reduction="mean"):
        return F.cross_entropy(logits.float(), target, ignore_index=ignore_index,
                               reduction=reduction)

    def rmsnorm(x, weight=None, bias=None, residual=None, eps=1e-6, prenorm=False,
                residual_dtype=None, out_dtype=None, weight_offset=0.0):
        # quack_cpp.rmsnorm's formula (h = x + residual and the norm in fp32; out in
        # out_dtype or x's, residual_out in residual_dtype or the residual's) in torch.
        with torch.autocast(device_type=x.device.type, enabled=False):
            h = x.float() + (residual.float() if residual is not None else 0)
            w = None if weight is None else weight.float() + weight_offset
            out = F.rms_norm(h, (h.shape[-1],), w, eps)
            if bias is not None:
                out = out + bias.float()
            out = out.to(out_dtype or x.dtype)
        if not prenorm:
            return out
        rd = residual_dtype or (residual.dtype if residual is not None else x.dtype)
        return out, h.to(rd)

    def apply_rotary_emb_qkv(qkv, cos, sin, interleaved=False, inplace=False,
                             seqlen_offsets=0):
        # quack_cpp.apply_rotary_emb_qkv's contract in torch: q and k of (B, T, 3, h, hd)
        # rotated over the first 2 * cos.shape[1] columns, v copied. The tables are cast to
        # qkv's dtype as run (a) casts them (the kernel keeps them fp32), so the stand-in
        # computes run (a)'s numbers exactly (the grad-check test compares the two).
        assert not interleaved and not inplace and seqlen_offsets == 0
        T, r = qkv.shape[1], 2 * cos.shape[1]
        c = torch.cat((cos, cos), -1)[:T, None, :].to(qkv.dtype)
        s = torch.cat((sin, sin), -1)[:T, None, :].to(qkv.dtype)
        q, k, v = qkv.unbind(2)

        def rot(x):
            xr = x[..., :r]
            x1, x2 = xr.chunk(2, dim=-1)
            y = xr * c + torch.cat((-x2, x1), dim=-1) * s
            return torch.cat((y, x[..., r:]), -1)
        return torch.stack((rot(q), rot(k), v), 2)

    def apply_rotary_emb_qkv_split(qkv, cos, sin, interleaved=False, seqlen_offsets=0):
        # quack_cpp.apply_rotary_emb_qkv_split's contract in torch: the packed form's q, k, v
        # as three contiguous (B, T, h, hd) tensors.
        out = apply_rotary_emb_qkv(qkv, cos, sin, interleaved, False, seqlen_offsets)
        return tuple(t.contiguous() for t in out.unbind(2))

    def linear_rotary_qkv(x, weight, cos, sin, n_heads):
        # quack_cpp.linear_rotary_qkv's contract in torch: qkv = x @ W^T (autocast's dtype),
        # q and k rotated in adjacent pairs (2i, 2i + 1) by angle i with the (T, hd / 2)
        # tables cast to qkv's dtype (as the rotate_half stand-in above), v as computed; (B,
        # T, h, hd) views of one packed tensor.
        B, T, _ = x.shape
        hd = weight.shape[0] // (3 * n_heads)
        qkv = F.linear(x, weight).view(B, T, 3, n_heads, hd)
        c = cos[:T, None, :].to(qkv.dtype)
        s = sin[:T, None, :].to(qkv.dtype)
        q, k, v = qkv.unbind(2)

        def rot(t):
            t0, t1 = t[..., 0::2], t[..., 1::2]
            return torch.stack((t0 * c - t1 * s, t1 * c + t0 * s), -1).flatten(-2)
        return rot(q), rot(k), v

    nn_ns = types.SimpleNamespace(RMSNorm=nn.RMSNorm, Linear=Linear, MLP=MLP,
                                  LinearCrossEntropy=LinearCrossEntropy)
    return types.SimpleNamespace(nn=nn_ns, cross_entropy=cross_entropy, rmsnorm=rmsnorm,
                                 apply_rotary_emb_qkv=apply_rotary_emb_qkv,
                                 apply_rotary_emb_qkv_split=apply_rotary_emb_qkv_split,
                                 linear_rotary_qkv=linear_rotary_qkv, linear=None, __version__="(torch code for the CPU smoke)")


def signature_of(obj) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "?"
