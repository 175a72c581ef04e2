"""torch.nn modules on QuACK-C++ kernels."""

import numbers
from typing import List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Module, Parameter, init

from . import _registrar as _reg
from .cross_entropy_ops import cross_entropy
from .gemm_ops import linear, linear_dtype
from .layernorm_ops import layernorm
from .linear_cross_entropy_ops import (_compute_dtype, linear_cross_entropy,
                                       linear_cross_entropy_torch)
from .ops import _FLOAT_DTYPES, rmsnorm

__all__ = ["RMSNorm", "LayerNorm", "Linear", "CrossEntropyLoss", "LinearCrossEntropy"]

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
        if nd == 0 or x.device.type != "cuda" or x.dtype not in _FLOAT_DTYPES:
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
    r"""``y = x W^T`` on QuACK-C++'s GEMM; a drop-in for ``torch.nn.Linear(..., bias=False)``.

    A subclass of ``torch.nn.Linear``: same parameter (``weight`` (out_features, in_features),
    same initialisation), state dict, ``reset_parameters`` and ``extra_repr``, so the two load
    each other's state dicts. The default ``bias=False`` follows QuACK's ``Linear``.

    Forward ``y = x W^T`` for x (*, in_features) (leading dims flattened to M rows), output
    (*, out_features); backward dgrad ``dx = dy W`` and wgrad ``dW = dy^T x``, all three with
    ``quack_cpp.gemm_ops`` (fp32 accumulation; dW produced directly in weight's dtype). Under
    ``torch.autocast`` x and weight are cast to the autocast dtype, like ``nn.Linear``.

    The kernels run when x is a CUDA tensor and the compute dtype (autocast's, else x's =
    weight's) is bfloat16 or float16, for any in_features and out_features (sizes that are not
    multiples of 8, e.g. a 50257-word vocabulary, take the GEMM's unaligned paths: padded
    operand copies, plain stores); otherwise ``torch.nn.functional.linear`` runs (an fp32 module
    outside autocast, a CPU input), so the module stays a drop-in.

    Args:
        in_features, out_features: sizes of the last dim of x and y.
        bias: must be False. True raises NotImplementedError (the GEMM has no bias epilogue
            yet; use ``torch.nn.Linear``).
        device, dtype: of the weight.
        fuse_grad_accum: when ``weight.grad`` exists, accumulate the wgrad into it in place
            with ``gemm_add_inplace`` (beta = 1) instead of producing a new tensor that autograd
            then adds (QuACK's semantics; eager mode only: under ``torch.compile`` the plain
            wgrad is used). Saves one (out, in) buffer and one add per micro-batch.
        tuned: autotune the forward GEMM's tile configuration on first use per shape class
            (``quack_cpp.gemm``'s ``tuned``; default False, QuACK's default is True).

    Raises:
        NotImplementedError: bias=True.
        ValueError, RuntimeError: as ``quack_cpp.gemm`` (e.g. a layout the C++ does not yet
            support), with the C++ message.

    Source: QuACK 0.2.0 ``quack/linear.py`` (``Linear``, ``LinearFunc``).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = False, device=None,
                 dtype=None, fuse_grad_accum: bool = False, tuned: bool = False) -> None:
        if bias:
            raise NotImplementedError(
                "quack_cpp.nn.Linear: bias=True is not supported yet (the GEMM has no bias "
                "epilogue); use bias=False or torch.nn.Linear")
        super().__init__(in_features, out_features, bias=False, device=device, dtype=dtype)
        self.fuse_grad_accum = fuse_grad_accum
        self.tuned = tuned

    def forward(self, input: Tensor) -> Tensor:
        """y = input W^T; input (*, in_features), y (*, out_features)."""
        weight = self.weight  # one nn.Module.__getattr__
        if input.device.type in _reg.DEVICE_TYPES and linear_dtype(input, weight) is not None:
            return linear(input, weight, fuse_grad_accum=self.fuse_grad_accum, tuned=self.tuned)
        return F.linear(input, weight)



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
    gradient in the forward, the dx and dW GEMMs; see there) when input is a CUDA tensor, the
    compute dtype is bfloat16 (input and weight bfloat16, or a bfloat16 autocast) and
    in_features is a multiple of 8; otherwise ``linear_cross_entropy_torch`` (``F.linear`` +
    ``F.cross_entropy`` on float32 logits), so the module stays a drop-in.

    Args:
        in_features, out_features, bias, device, dtype: as ``torch.nn.Linear`` (bias default
            False).
        ignore_index, reduction, label_smoothing: as ``torch.nn.CrossEntropyLoss``.
        z_loss, logit_softcap, chunk_size, low_memory, fuse_grad_accum: as
            ``quack_cpp.linear_cross_entropy``.

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
        if (input.device.type in _reg.DEVICE_TYPES and self.in_features % 8 == 0
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
