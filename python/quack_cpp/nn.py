"""torch.nn modules on QuACK-C++ kernels."""

import numbers
from typing import List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Module, Parameter, init

from . import _registrar as _reg
from .cross_entropy_ops import cross_entropy
from .gemm_act_ops import (GATED_ACTIVATIONS, _postact_torch, act_linear, activation_name,
                           deinterleave_gate_up, interleave_gate_up, is_gated, linear_act, mlp)
from .gemm_ops import _linear, _linear_dtype, _linear_eager, linear, linear_dtype
from .layernorm_ops import layernorm
from .linear_cross_entropy_ops import (_compute_dtype, linear_cross_entropy,
                                       linear_cross_entropy_torch)
from .ops import _FLOAT_DTYPES, rmsnorm

__all__ = ["RMSNorm", "LayerNorm", "Linear", "LinearAct", "DActLinear", "MLP", "CrossEntropyLoss",
           "LinearCrossEntropy"]

_shape_t = Union[int, List[int], Tuple[int, ...], torch.Size]


class RMSNorm(Module):
    r"""Root-mean-square layer normalisation; a drop-in for ``torch.nn.RMSNorm``.

    Same signature, defaults, parameter (``weight``, initialised to ones), state dict,
    ``reset_parameters`` and ``extra_repr`` as ``torch.nn.RMSNorm``, so the two load each
    other's state dicts. Over the last ``len(normalized_shape)`` dimensions (flattened to
    N = prod(normalized_shape)), per row, in fp32::

        y = x / sqrt(mean(x^2) + eps) * (weight + weight_offset)

    Args:
        normalized_shape: int or tuple: the trailing shape of the input to normalise over.
        eps: added to the mean square inside the square root. None (default): as torch, the
            machine epsilon of the computation type, ``torch.finfo(torch.float32).eps`` for
            float32/float16/bfloat16 inputs (float64 inputs: float64's).
        elementwise_affine: learnable per-element weight (ones at init). Default True.
        device, dtype: of the weight.
        weight_offset: keyword-only, default 0.0: added to the weight in the forward (Gemma's
            zero-centred weights use 1.0); the weight is then initialised to 1 - weight_offset
            (zeros for 1.0), so a fresh module is the plain normalisation either way. A state
            dict from ``torch.nn.RMSNorm`` holds w, which this module reads as
            w - weight_offset only when weight_offset is 0.

    Shape: input (*, *normalized_shape); output the same shape, in the input's dtype.

    Kernels: QuACK 0.2.0's RMSNorm through the C++ API (``quack_cpp.rmsnorm``) for CUDA inputs
    of dtype float32/float16/bfloat16 (weight float32 or the input's dtype); the backward gives
    d(input) and d(weight) (fp32-accumulated, bitwise reproducible). Any other input (CPU,
    meta, float64) goes to ``torch.nn.functional.rms_norm`` (with weight + weight_offset) so
    the module stays a drop-in.
    Under autocast it runs in the input's dtype, like ``torch.nn.RMSNorm``.

    Raises:
        ValueError: the input's trailing dims differ from ``normalized_shape``; a weight dtype
            or device the kernels reject (the message names the argument).
    """

    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]
    normalized_shape: Tuple[int, ...]
    eps: Optional[float]
    elementwise_affine: bool

    def __init__(
        self,
        normalized_shape: _shape_t,
        eps: Optional[float] = None,
        elementwise_affine: bool = True,
        device=None,
        dtype=None,
        *,
        weight_offset: float = 0.0,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.weight_offset = float(weight_offset)
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if self.elementwise_affine:
            self.weight = Parameter(torch.empty(self.normalized_shape, **factory_kwargs))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Resets the weight to 1 - weight_offset (ones by default, as ``torch.nn.RMSNorm``)."""
        if self.elementwise_affine:
            if self.weight_offset == 0.0:
                init.ones_(self.weight)
            else:
                with torch.no_grad():
                    self.weight.fill_(1.0 - self.weight_offset)

    def forward(self, x: Tensor) -> Tensor:
        """Normalises ``x`` (*, *normalized_shape); returns the same shape and dtype."""
        nd = len(self.normalized_shape)
        # The kernels on CUDA (_reg.DEVICE_TYPES: also the CPU while the tests' CPU stand-ins
        # are registered); meta and anything else through torch, as documented above.
        dev = x.device.type
        if (nd == 0 or dev == "meta" or dev not in _reg.DEVICE_TYPES
                or x.dtype not in _FLOAT_DTYPES):
            weight = self.weight
            if self.weight_offset != 0.0 and weight is not None:
                weight = weight + self.weight_offset
            return F.rms_norm(x, self.normalized_shape, weight, self.eps)
        if x.dim() < nd or tuple(x.shape[x.dim() - nd :]) != self.normalized_shape:
            raise ValueError(
                f"RMSNorm: input has shape {tuple(x.shape)}, expected trailing dims "
                f"{self.normalized_shape} (normalized_shape)"
            )
        eps = self.eps if self.eps is not None else torch.finfo(torch.float32).eps
        weight = self.weight.reshape(-1) if self.weight is not None else None
        offset = self.weight_offset
        if nd == 1:
            return rmsnorm(x, weight, eps=eps, weight_offset=offset)
        # Several normalised dims: one row of N = prod(normalized_shape) elements.
        return rmsnorm(x.flatten(x.dim() - nd), weight, eps=eps,
                       weight_offset=offset).view(x.shape)

    def extra_repr(self) -> str:
        return (
            "{normalized_shape}, eps={eps}, "
            "elementwise_affine={elementwise_affine}".format(**self.__dict__)
        )


class LayerNorm(torch.nn.LayerNorm):
    r"""Layer normalisation; a drop-in for ``torch.nn.LayerNorm``.

    A subclass of ``torch.nn.LayerNorm``: same signature, defaults, parameters (``weight``
    initialised to ones, ``bias`` to zeros), state dict, ``reset_parameters`` and
    ``extra_repr``, so the two load each other's state dicts. Over the last
    ``len(normalized_shape)`` dimensions (flattened to N = prod(normalized_shape)), per row, in
    fp32::

        y = (x - mean) / sqrt(var + eps) * (weight + weight_offset) + bias   (biased variance)

    Args:
        normalized_shape, eps (default 1e-5), elementwise_affine (default True), bias (default
            True), device, dtype: as ``torch.nn.LayerNorm``.
        weight_offset: keyword-only, default 0.0: added to the weight in the forward (Gemma's
            zero-centred weights use 1.0); the weight is then initialised to 1 - weight_offset
            (zeros for 1.0), so a fresh module is the identity normalisation either way. A
            state dict from ``torch.nn.LayerNorm`` holds w, which this module reads as
            w - weight_offset only when weight_offset is 0.

    Shape: input (*, *normalized_shape); output the same shape, in the input's dtype (float32
    under autocast, as ``torch.nn.LayerNorm``: layer_norm is on autocast's float32 list).

    Kernels: ``quack_cpp.layernorm`` (the C++ API's LayerNorm) for CUDA inputs of dtype
    float32/float16/bfloat16 with float parameters; the backward gives d(input), d(weight) and
    d(bias) (fp32-accumulated, bitwise reproducible). Any other input (CPU, meta, float64)
    goes to ``torch.nn.functional.layer_norm``, so the module stays a drop-in.

    Raises:
        ValueError: the input's trailing dims differ from ``normalized_shape`` (CUDA inputs).
    """

    def __init__(self, normalized_shape: _shape_t, eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, device=None, dtype=None,
                 *, weight_offset: float = 0.0) -> None:
        self.weight_offset = float(weight_offset)
        super().__init__(normalized_shape, eps=eps, elementwise_affine=elementwise_affine,
                         bias=bias, device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        """weight = 1 - weight_offset (ones by default), bias = zeros (as torch)."""
        super().reset_parameters()
        if self.elementwise_affine and self.weight_offset != 0.0:
            with torch.no_grad():
                self.weight.fill_(1.0 - self.weight_offset)

    def forward(self, input: Tensor) -> Tensor:
        """Normalises ``input`` (*, *normalized_shape); returns the same shape."""
        weight, bias = self.weight, self.bias
        nd = len(self.normalized_shape)
        if (nd == 0 or input.device.type not in _reg.DEVICE_TYPES
                or input.dtype not in _FLOAT_DTYPES
                or (weight is not None and weight.dtype not in _FLOAT_DTYPES)
                or (bias is not None and bias.dtype not in _FLOAT_DTYPES)):
            if self.weight_offset != 0.0 and weight is not None:
                weight = weight + self.weight_offset
            return F.layer_norm(input, self.normalized_shape, weight, bias, self.eps)
        if input.dim() < nd or tuple(input.shape[input.dim() - nd :]) != self.normalized_shape:
            raise ValueError(
                f"LayerNorm: input has shape {tuple(input.shape)}, expected trailing dims "
                f"{self.normalized_shape} (normalized_shape)"
            )
        w = weight.reshape(-1) if weight is not None and nd > 1 else weight
        b = bias.reshape(-1) if bias is not None and nd > 1 else bias
        if nd == 1:
            return layernorm(input, w, b, eps=self.eps, weight_offset=self.weight_offset)
        y = layernorm(input.flatten(input.dim() - nd), w, b, eps=self.eps,
                      weight_offset=self.weight_offset)
        return y.view(input.shape)


class Linear(torch.nn.Linear):
    r"""``y = x W^T + b`` on QuACK-C++'s GEMM; a drop-in for ``torch.nn.Linear`` (bias=False).

    A subclass of ``torch.nn.Linear``: same parameters (``weight`` (out_features, in_features),
    ``bias`` (out_features,) when bias=True, same initialisation), state dict,
    ``reset_parameters`` and ``extra_repr``. One difference: the default is ``bias=False``
    (QuACK's ``Linear``; torch.nn.Linear's is True), so ``Linear(i, o)`` has no bias and cannot
    load a ``torch.nn.Linear(i, o)`` state dict (unexpected key "bias"); pass ``bias=True`` to
    load a ``torch.nn.Linear(bias=True)`` state dict. With the same bias flag the two load each
    other's state dicts.

    Forward ``y = x W^T + b`` for x (*, in_features) (leading dims flattened to M rows), output
    (*, out_features), the bias added in the GEMM's epilogue; backward dgrad ``dx = dy W``, wgrad
    ``dW = dy^T x`` (``quack_cpp.gemm_ops``: fp32 accumulation; dW produced directly in
    weight's dtype) and ``db = dy.sum(0)`` (fp32, torch's deterministic reduction). Under
    ``torch.autocast`` x and weight are cast to the autocast dtype, like ``nn.Linear``; the bias
    is added in fp32 without being rounded to the autocast dtype first.

    The kernels run when x is a CUDA tensor and the compute dtype (autocast's, else x's =
    weight's) is bfloat16 or float16 (with or without a bias), for any in_features and
    out_features (sizes that are not multiples of 8, e.g.
    a 50257-word vocabulary, take the GEMM's unaligned paths: padded operand copies, plain
    stores); otherwise ``torch.nn.functional.linear`` runs (an fp32 module outside autocast, a
    CPU input), so the module stays a drop-in.

    Args:
        in_features, out_features: sizes of the last dim of x and y.
        bias: learnable bias (default False, QuACK's; torch.nn.Linear's default is True).
        device, dtype: of the parameters.
        fuse_grad_accum: when ``weight.grad`` exists, accumulate the wgrad into it in place
            with ``gemm_add_inplace`` (beta = 1) instead of producing a new tensor that autograd
            then adds (QuACK's semantics; eager mode only: under ``torch.compile`` the plain
            wgrad is used). Saves one (out, in) buffer and one add per micro-batch.
        tuned: autotune the forward GEMM's tile configuration on first use per shape class
            (``quack_cpp.gemm``'s ``tuned``; default False, QuACK's default is True).

    Raises:
        ValueError, RuntimeError: as ``quack_cpp.gemm`` (e.g. a layout the C++ does not yet
            support), with the C++ message.

    Source: QuACK 0.2.0 ``quack/linear.py`` (``Linear``, ``LinearFunc``); the bias as QuACK 0.6.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = False, device=None,
                 dtype=None, fuse_grad_accum: bool = False, tuned: bool = False) -> None:
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.fuse_grad_accum = fuse_grad_accum
        self.tuned = tuned

    def forward(self, input: Tensor) -> Tensor:
        """y = input W^T + b; input (*, in_features), y (*, out_features)."""
        weight, bias = _weight_bias(self)
        path = _reg.route(input, weight, bias)
        if path != _reg.CUSTOM:  # the C++ path first: it computes the dtype itself
            y = _linear_eager(input, weight, bias, self.fuse_grad_accum, self.tuned, path)
            if y is not NotImplemented:
                return y
        dev = input.device.type
        if dev in _reg.DEVICE_TYPES:
            dtype = _kernel_dtype(input, weight, bias, dev)
            if dtype is not None:  # linear's call, given the dtype it computes
                return _linear(input, weight, bias, dtype, self.fuse_grad_accum, self.tuned,
                               path, cpp_tried=path != _reg.CUSTOM)
        return F.linear(input, weight, bias)


def _weight_bias(m: torch.nn.Module):
    """(m.weight, m.bias), read from m._parameters where both are registered parameters
    (nn.Module.__getattr__ costs ~0.5 µs a name; a registered parameter is what it returns),
    else as attributes (a parametrization or a plain tensor in the parameter's place)."""
    p = m._parameters
    if "weight" in p and "bias" in p:
        return p["weight"], p["bias"]
    return m.weight, m.bias


def _kernel_dtype(x: Tensor, weight: Tensor, bias: Optional[Tensor],
                  dev: Optional[str] = None) -> Optional[torch.dtype]:
    """The compute dtype (``linear_dtype``) when the GEMM kernels compute this layer, else None:
    a bfloat16/float16 compute dtype (the plain, bias and fused-activation epilogues are
    compiled for both, outputs in the compute dtype) and a float bias. dev: x.device.type
    where the caller has it."""
    dtype = _linear_dtype(x, weight, x.device.type if dev is None else dev)
    if dtype is None or (bias is not None and bias.dtype not in _FLOAT_DTYPES):
        return None
    return dtype


def _interleave_columns(y: Tensor) -> Tensor:
    """[gate | up] halves of y's last dim (2H) -> columns gate_0, up_0, gate_1, up_1, ... (the
    kernels' preact layout; differentiable)."""
    h = y.shape[-1] // 2
    return torch.stack((y[..., :h], y[..., h:]), dim=-1).flatten(-2)


def _torch_act(activation: str, y: Tensor, concat: bool = False) -> Tensor:
    """act(y), or for a gated activation glu of y's gate/up (interleaved, or halves)."""
    if is_gated(activation) and concat:
        y = _interleave_columns(y)
    return _postact_torch(activation, y)


class LinearAct(torch.nn.Linear):
    r"""``(preact, postact) = (x W^T + b, act(preact))`` with the activation fused into the
    GEMM's epilogue: the first layer of an MLP (QuACK's ``linear_act_func``).

    A subclass of ``torch.nn.Linear`` (same parameters and state dict). ``forward(x)`` returns
    ``(preact, postact)``: preact (*, out_features), None when not stored (``store_preact``
    False and no gradient recorded; the torch fallback too); postact (*, out_features), or
    (*, out_features / 2) for a gated activation, whose weight rows hold gate and up interleaved
    (row 2j gate_j, row 2j + 1 up_j; ``concat_layout=True``: the halves [W_gate; W_up]). A gated
    preact is interleaved (column 2j gate_j, 2j + 1 up_j) with either weight layout and on
    either path, the layout ``DActLinear`` reads. Both are differentiable: the backward takes
    preact's gradient (what ``DActLinear`` gives) and turns a gradient of postact into one with
    the activation's derivative (torch), then dgrad, wgrad and the bias's column sum. The
    kernels run for CUDA bfloat16 or float16 compute (autocast or the module's dtype; preact and
    postact in that dtype) with in_features, out_features (and out_features / 2) multiples of 8;
    otherwise torch computes the same (``F.linear``, then the activation).

    Args:
        in_features, out_features: x's and preact's last dims.
        activation: ``quack_cpp.gemm_act_ops.ACTIVATIONS`` or ``GATED_ACTIVATIONS`` (default
            "gelu_tanh_approx", QuACK's).
        bias: learnable bias (default False). device, dtype: of the parameters.
        store_preact, fuse_grad_accum, tuned, concat_layout: see ``quack_cpp.gemm_act_ops.
            linear_act``.
    """

    def __init__(self, in_features: int, out_features: int,
                 activation: Optional[str] = "gelu_tanh_approx", bias: bool = False, device=None,
                 dtype=None, store_preact: bool = True, fuse_grad_accum: bool = False,
                 tuned: bool = False, concat_layout: bool = False) -> None:
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.activation = activation_name(activation, "LinearAct")
        if is_gated(self.activation) and out_features % 2 != 0:
            raise ValueError(f"LinearAct: out_features is {out_features}, expected an even "
                             f"number for the gated activation {self.activation!r}")
        if concat_layout and not is_gated(self.activation):
            raise ValueError("LinearAct: concat_layout is for gated activations")
        self.store_preact = store_preact
        self.fuse_grad_accum = fuse_grad_accum
        self.tuned = tuned
        self.concat_layout = concat_layout

    def _kernels(self, x: Tensor) -> bool:
        n_post = self.out_features // 2 if is_gated(self.activation) else self.out_features
        return (x.device.type in _reg.DEVICE_TYPES and self.in_features % 8 == 0
                and self.out_features % 8 == 0 and n_post % 8 == 0
                and _kernel_dtype(x, self.weight, self.bias) is not None)

    def forward(self, input: Tensor) -> Tuple[Optional[Tensor], Tensor]:
        if self._kernels(input):
            return linear_act(input, self.weight, self.activation, self.bias,
                              store_preact=self.store_preact,
                              fuse_grad_accum=self.fuse_grad_accum, tuned=self.tuned,
                              concat_layout=self.concat_layout)
        weight, bias = self.weight, self.bias
        preact = F.linear(input, weight, bias)
        if self.concat_layout:
            # The kernels' preact is interleaved whatever the weight's layout, and DActLinear
            # reads it so: the fallback gives the same layout, so either path pairs with either.
            preact = _interleave_columns(preact)
        postact = _torch_act(self.activation, preact)
        if not self.store_preact and not _reg.records_grad(input, weight, bias):
            return None, postact  # as linear_act: not stored without a recorded gradient
        return preact, postact

    def extra_repr(self) -> str:
        return super().extra_repr() + f", activation={self.activation!r}"


class DActLinear(torch.nn.Linear):
    r"""``out = postact W^T + b`` where ``postact = act(preact)``: the second layer of an MLP,
    whose backward fuses the activation's gradient into the dgrad GEMM (QuACK's
    ``act_linear_func``).

    A subclass of ``torch.nn.Linear`` (same parameters and state dict). ``forward(preact,
    postact)`` takes both outputs of ``LinearAct`` and returns out (*, out_features). The
    backward runs ``gemm_dact`` (``gemm_dgated``): dpreact = (dout W) * act'(preact) and the
    recomputed postact in one GEMM, then the wgrad from that postact and the bias's column sum;
    postact is not saved and gets no gradient of its own (preact's holds it), so postact must be
    act(preact). Kernels as ``LinearAct``; otherwise ``F.linear`` (postact then gets torch's
    gradient). preact None (``LinearAct`` with store_preact=False and no gradient recorded):
    out = ``quack_cpp.linear(postact, W, b)`` (``F.linear`` where ``Linear`` would use it),
    postact then getting the plain linear's gradient.

    Args:
        in_features: postact's last dim (H). out_features: the output's.
        activation: as ``LinearAct``'s (for a gated one preact has 2 * in_features columns).
        bias, device, dtype, fuse_grad_accum, tuned: as ``Linear``.
    """

    def __init__(self, in_features: int, out_features: int,
                 activation: Optional[str] = "gelu_tanh_approx", bias: bool = False, device=None,
                 dtype=None, fuse_grad_accum: bool = False, tuned: bool = False) -> None:
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.activation = activation_name(activation, "DActLinear")
        self.fuse_grad_accum = fuse_grad_accum
        self.tuned = tuned

    def forward(self, preact: Optional[Tensor], postact: Tensor) -> Tensor:
        kernels = (postact.device.type in _reg.DEVICE_TYPES
                   and _kernel_dtype(postact, self.weight, self.bias) is not None)
        if preact is None:  # LinearAct's store_preact=False without a gradient: a plain linear
            if kernels:
                return linear(postact, self.weight, self.bias,
                              fuse_grad_accum=self.fuse_grad_accum, tuned=self.tuned)
            return F.linear(postact, self.weight, self.bias)
        if kernels and self.in_features % 8 == 0 and self.out_features % 8 == 0:
            return act_linear(preact, self.weight, postact, self.activation, self.bias,
                              fuse_grad_accum=self.fuse_grad_accum, tuned=self.tuned)
        return F.linear(postact, self.weight, self.bias)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", activation={self.activation!r}"


class MLP(Module):
    r"""``fc2(act(fc1(x)))`` with the activation fused into fc1's GEMM and its gradient into
    fc2's dgrad GEMM (QuACK's ``quack.mlp.MLP``); a drop-in for a two-Linear block.

    Parameters: ``fc1`` = ``torch.nn.Linear(in_features, hidden_features)`` (``2 *
    hidden_features`` outputs for a gated activation) and ``fc2`` = ``torch.nn.Linear(
    hidden_features, out_features)``, so the state dict (``fc1.weight``, ``fc1.bias``,
    ``fc2.weight``, ``fc2.bias``) is that of a torch block of two Linears.

    Gated activations (swiglu, swiglu_oai, reglu, geglu, glu): fc1's rows hold gate and up
    **interleaved** — row 2j is gate_j, row 2j + 1 is up_j (QuACK's layout: the epilogue pairs
    adjacent columns of preact) — unless ``concat_layout=True``: rows [0, H) the gate, [H, 2H)
    the up projection (a Llama block's ``cat([gate_proj.weight, up_proj.weight])``; the
    forward reads it through the kernel's concat view, the backward interleaves W1 once per
    step for the dgrad). ``MLP.from_llama(gate_proj, up_proj, down_proj)`` or
    ``load_llama_weights`` take a Llama / Mistral block's three Linears (or weights) with one
    call; ``llama_weights()`` gives them back.

    Forward: ``quack_cpp.gemm_act_ops.mlp`` (two GEMMs; preact stored only when a gradient is
    recorded); backward four GEMMs (fc2's dgrad with the activation's gradient and the
    recomputed postact fused, fc2's wgrad, fc1's dgrad and wgrad) and the biases' column sums.
    The kernels run for CUDA inputs with a bfloat16 or float16 compute dtype (the module's dtype
    or autocast's) and in_features, hidden_features, out_features multiples of 8; anything else
    computes the same block with torch (``F.linear``, the activation in fp32).

    Args:
        in_features: x's last dim. hidden_features: the activation's width H (default: 8/3 ·
            in_features for a gated activation, 4 · in_features else, QuACK's), rounded up to
            ``multiple_of``. out_features: default in_features.
        activation: default "gelu_tanh_approx" (QuACK's); see ``quack_cpp.gemm_act_ops``.
        bias: both Linears get a bias (default False); ``bias1`` / ``bias2`` (QuACK's names)
            set them one by one.
        device, dtype: of the parameters.
        fuse_grad_accum, tuned: as ``quack_cpp.nn.Linear``.
        concat_layout: fc1's gated rows as halves (above).
    """

    def __init__(self, in_features: int, hidden_features: Optional[int] = None,
                 out_features: Optional[int] = None,
                 activation: Optional[str] = "gelu_tanh_approx", bias: bool = False,
                 device=None, dtype=None, *, bias1: Optional[bool] = None,
                 bias2: Optional[bool] = None, multiple_of: int = 1,
                 fuse_grad_accum: bool = False, tuned: bool = False,
                 concat_layout: bool = False) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.activation = activation_name(activation, "MLP")
        self.gated = is_gated(self.activation)
        if concat_layout and not self.gated:
            raise ValueError("MLP: concat_layout is for gated activations "
                             f"({', '.join(GATED_ACTIVATIONS)})")
        out_features = out_features if out_features is not None else in_features
        if hidden_features is None:
            hidden_features = int(8 / 3 * in_features) if self.gated else 4 * in_features
        if multiple_of > 1:
            hidden_features = -(-hidden_features // multiple_of) * multiple_of
        self.in_features, self.hidden_features, self.out_features = (
            in_features, hidden_features, out_features)
        b1 = bias if bias1 is None else bias1
        b2 = bias if bias2 is None else bias2
        fc1_out = 2 * hidden_features if self.gated else hidden_features
        self.fc1 = torch.nn.Linear(in_features, fc1_out, bias=b1, **factory)
        self.fc2 = torch.nn.Linear(hidden_features, out_features, bias=b2, **factory)
        self.fuse_grad_accum = fuse_grad_accum
        self.tuned = tuned
        self.concat_layout = concat_layout

    def _kernels(self, x: Tensor) -> bool:
        w1, b1 = self.fc1.weight, self.fc1.bias
        return (x.device.type in _reg.DEVICE_TYPES and self.in_features % 8 == 0
                and self.hidden_features % 8 == 0 and self.out_features % 8 == 0
                and _kernel_dtype(x, w1, b1) is not None
                and (self.fc2.bias is None or self.fc2.bias.dtype in _FLOAT_DTYPES)
                and linear_dtype(x, self.fc2.weight) == linear_dtype(x, w1))

    def forward(self, x: Tensor) -> Tensor:
        """x (*, in_features) -> (*, out_features)."""
        if self._kernels(x):
            return mlp(x, self.fc1.weight, self.fc2.weight, self.activation, self.fc1.bias,
                       self.fc2.bias, fuse_grad_accum=self.fuse_grad_accum, tuned=self.tuned,
                       concat_layout=self.concat_layout)
        y = _torch_act(self.activation, self.fc1(x), self.concat_layout)
        return self.fc2(y)

    # -- Llama / Mistral weights ---------------------------------------------------------------

    @staticmethod
    def _weight_of(m):
        return m.weight if isinstance(m, Module) else m

    @staticmethod
    def _bias_of(m):
        return getattr(m, "bias", None) if isinstance(m, Module) else None

    @torch.no_grad()
    def load_llama_weights(self, gate_proj, up_proj, down_proj) -> "MLP":
        """Copies a Llama / Mistral MLP block (``down_proj(act(gate_proj(x)) * up_proj(x))``)
        into this gated MLP: ``gate_proj`` and ``up_proj`` (H, in) become fc1 (interleaved, or
        the halves with concat_layout), ``down_proj`` (out, H) becomes fc2; each argument an
        ``nn.Linear`` or its weight tensor (biases are copied where both sides have one).
        Returns self. Raises ValueError for a non-gated MLP or mismatched shapes."""
        if not self.gated:
            raise ValueError(f"MLP.load_llama_weights: activation is {self.activation!r}, "
                             "expected a gated one (swiglu for Llama / Mistral)")
        wg, wu, wd = (self._weight_of(m) for m in (gate_proj, up_proj, down_proj))
        H, d, o = self.hidden_features, self.in_features, self.out_features
        for name, w, shape in (("gate_proj", wg, (H, d)), ("up_proj", wu, (H, d)),
                               ("down_proj", wd, (o, H))):
            if tuple(w.shape) != shape:
                raise ValueError(f"MLP.load_llama_weights: {name} has weight shape "
                                 f"{tuple(w.shape)}, expected {shape}")
        cat = torch.cat((wg, wu), dim=0)
        self.fc1.weight.copy_(cat if self.concat_layout else interleave_gate_up(cat))
        self.fc2.weight.copy_(wd)
        bg, bu, bd = (self._bias_of(m) for m in (gate_proj, up_proj, down_proj))
        if self.fc1.bias is not None and bg is not None and bu is not None:
            bcat = torch.cat((bg, bu))
            self.fc1.bias.copy_(bcat if self.concat_layout else interleave_gate_up(bcat))
        if self.fc2.bias is not None and bd is not None:
            self.fc2.bias.copy_(bd)
        return self

    @classmethod
    def from_llama(cls, gate_proj, up_proj, down_proj, activation: str = "swiglu",
                   **kwargs) -> "MLP":
        """A gated MLP holding a Llama / Mistral block's weights (see ``load_llama_weights``):
        sizes, device and dtype from the weights; ``kwargs`` go to the constructor (e.g.
        ``concat_layout=True``, ``fuse_grad_accum=True``)."""
        wg, wd = cls._weight_of(gate_proj), cls._weight_of(down_proj)
        H, d = wg.shape
        bias = cls._bias_of(gate_proj) is not None
        kwargs.setdefault("device", wg.device)
        kwargs.setdefault("dtype", wg.dtype)
        kwargs.setdefault("bias1", bias)
        kwargs.setdefault("bias2", cls._bias_of(down_proj) is not None)
        m = cls(d, H, wd.shape[0], activation=activation, **kwargs)
        return m.load_llama_weights(gate_proj, up_proj, down_proj)

    def llama_weights(self):
        """(gate weight (H, in), up weight (H, in), down weight (out, H)): fc1 split back."""
        w1 = self.fc1.weight
        cat = w1 if self.concat_layout else deinterleave_gate_up(w1)
        H = self.hidden_features
        return cat[:H], cat[H:], self.fc2.weight

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, hidden_features={self.hidden_features}, "
                f"out_features={self.out_features}, activation={self.activation!r}"
                + (", concat_layout=True" if self.concat_layout else ""))



class CrossEntropyLoss(torch.nn.CrossEntropyLoss):
    r"""Cross-entropy loss on QuACK-C++'s kernel (``quack_cpp.cross_entropy``); for
    ``torch.nn.CrossEntropyLoss`` on (N, C) logits with class-index targets.

    A subclass of ``torch.nn.CrossEntropyLoss``: same signature and defaults (``weight``,
    ``size_average``, ``ignore_index``, ``reduce``, ``reduction``, ``label_smoothing``), the
    ``weight`` buffer, state dict and (with the defaults) repr. Extra keyword-only options of
    our kernel: ``z_loss`` (scale of lse^2 per counted row), ``logit_softcap`` and
    ``inplace_backward`` (see ``quack_cpp.cross_entropy``).

    Our kernel runs for (N, C) logits of dtype float32/float16/bfloat16 on a CUDA device with
    (N,) int32/int64 targets; the loss is then float32 (torch's is the logits' dtype outside
    autocast, float32 under it) and the gradient is in the logits' dtype. Anything else — (C,)
    or (N, C, d1, ...) inputs, class-probability targets, CPU or float64 tensors — goes to
    ``torch.nn.functional.cross_entropy`` unchanged (then ``z_loss``, ``logit_softcap`` and
    ``inplace_backward`` must be left at their defaults: ValueError otherwise).
    """

    def __init__(self, weight: Optional[Tensor] = None, size_average=None,
                 ignore_index: int = -100, reduce=None, reduction: str = "mean",
                 label_smoothing: float = 0.0, *, z_loss: float = 0.0,
                 logit_softcap: Optional[float] = None, inplace_backward: bool = False) -> None:
        super().__init__(weight, size_average, ignore_index, reduce, reduction, label_smoothing)
        self.z_loss = z_loss
        self.logit_softcap = logit_softcap
        self.inplace_backward = inplace_backward

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of input (N, C) against target (N,) (see the class docstring)."""
        if (input.dim() == 2 and target.dim() == 1 and input.device.type in _reg.DEVICE_TYPES
                and input.dtype in _FLOAT_DTYPES and target.dtype in _reg.INDEX_DTYPES):
            return cross_entropy(input, target, ignore_index=self.ignore_index,
                                 reduction=self.reduction, label_smoothing=self.label_smoothing,
                                 weight=self.weight, z_loss=self.z_loss,
                                 logit_softcap=self.logit_softcap,
                                 inplace_backward=self.inplace_backward)
        if self.z_loss or self.logit_softcap is not None or self.inplace_backward:
            raise ValueError(
                f"CrossEntropyLoss: z_loss, logit_softcap and inplace_backward need (N, C) "
                f"float32/float16/bfloat16 CUDA logits and (N,) integer targets; got input "
                f"{tuple(input.shape)} {input.dtype} on {input.device}, target "
                f"{tuple(target.shape)} {target.dtype}")
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)

    def extra_repr(self) -> str:
        """Our extra options where set (torch's module prints none: the default repr is the
        same)."""
        extra = []
        if self.z_loss:
            extra.append(f"z_loss={self.z_loss}")
        if self.logit_softcap is not None:
            extra.append(f"logit_softcap={self.logit_softcap}")
        if self.inplace_backward:
            extra.append("inplace_backward=True")
        return ", ".join(extra)


class LinearCrossEntropy(torch.nn.Linear):
    r"""An LM head and its loss, ``cross_entropy(x W^T + b, target)``, without the logits; a
    drop-in for ``torch.nn.Linear(in_features, out_features, bias)`` followed by
    ``torch.nn.CrossEntropyLoss``.

    A subclass of ``torch.nn.Linear``: same parameters (``weight`` (out_features, in_features),
    optional ``bias``, same initialisation), state dict, ``reset_parameters``; so a head's state
    dict loads as it is. ``forward(input, target)`` returns the loss (float32): a 0-d tensor
    for 'mean' and 'sum', target's shape for 'none'. The default ``bias=False`` follows QuACK's
    ``LinearCrossEntropy`` (LM heads have none).

    Kernels: ``quack_cpp.linear_cross_entropy`` (chunked logits GEMM, the cross-entropy with its
    gradient in the forward, the dx and dW GEMMs; see there) when input is a CUDA tensor and
    the compute dtype is bfloat16 or float16 (input and weight of it, or an autocast to it; an
    in_features that is not a multiple of 8 costs a padded copy of input and weight a call);
    otherwise ``linear_cross_entropy_torch`` (``F.linear`` +
    ``F.cross_entropy`` on float32 logits), so the module stays a drop-in.

    Args:
        in_features, out_features, bias, device, dtype: as ``torch.nn.Linear`` (bias default
            False).
        ignore_index, reduction, label_smoothing: as ``torch.nn.CrossEntropyLoss``.
        z_loss, logit_softcap, chunk_size, low_memory: as ``quack_cpp.linear_cross_entropy``.
        fuse_grad_accum: as ``quack_cpp.linear_cross_entropy``: meant for
            ``loss.backward()``: the backward adds this step's weight gradient into an existing
            ``weight.grad`` in place (hooks on weight see the sum); under
            ``torch.autograd.grad`` or ``backward(inputs=...)`` without weight it is not fused
            (``weight.grad`` untouched). Eager only; not for the torch fallback.

    Shape: input (*, in_features), target (*) int64; output as ``reduction`` says.

    Source: QuACK 0.2.0 ``quack/linear_cross_entropy.py`` (``LinearCrossEntropy``).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = False, device=None,
                 dtype=None, *, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0, z_loss: float = 0.0,
                 logit_softcap: Optional[float] = None, chunk_size: Optional[int] = None,
                 low_memory: bool = False, fuse_grad_accum: bool = False) -> None:
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        if reduction not in ("none", "sum", "mean"):
            raise ValueError(f"LinearCrossEntropy: reduction is {reduction!r}, expected "
                             "'none', 'sum' or 'mean'")
        self.ignore_index = ignore_index
        self.reduction = reduction
        self.label_smoothing = label_smoothing
        self.z_loss = z_loss
        self.logit_softcap = logit_softcap
        self.chunk_size = chunk_size
        self.low_memory = low_memory
        self.fuse_grad_accum = fuse_grad_accum

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """The loss of ``input @ weight^T + bias`` against ``target``."""
        weight, bias = self.weight, self.bias
        if (input.device.type in _reg.DEVICE_TYPES
                and _compute_dtype(input, weight) is not None
                and (bias is None or bias.dtype in _FLOAT_DTYPES)):
            return linear_cross_entropy(
                input, weight, target, bias, self.ignore_index, self.reduction,
                self.label_smoothing, self.z_loss, self.logit_softcap, self.chunk_size,
                low_memory=self.low_memory, fuse_grad_accum=self.fuse_grad_accum)
        return linear_cross_entropy_torch(input, weight, target, bias, self.ignore_index,
                                          self.reduction, self.label_smoothing, self.z_loss,
                                          self.logit_softcap)

    def extra_repr(self) -> str:
        s = super().extra_repr() + f", reduction={self.reduction!r}"
        if self.ignore_index != -100:
            s += f", ignore_index={self.ignore_index}"
        for name in ("label_smoothing", "z_loss"):
            if getattr(self, name):
                s += f", {name}={getattr(self, name)}"
        if self.logit_softcap is not None:
            s += f", logit_softcap={self.logit_softcap}"
        if self.low_memory:
            s += ", low_memory=True"
        return s
