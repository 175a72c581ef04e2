"""GEMMs with a fused activation for torch tensors (include/quack/gemm_act.h), and the layers
built on them: an MLP's fc1 (``linear_act``) and fc2 (``act_linear``).

Functional API (QuACK's signatures where it has them):

- ``gemm_act(A, B, activation, C=None, bias=None, store_preact=True, out_dtype=None,
  postact_dtype=None, ..., *, colvec_bias=None) -> (preact or None, postact)``: preact =
  alpha * A @ B + C + bias + colvec_bias (bias: the row vector (N,) / (L, N) added to every row,
  QuACK's rowvec ``bias``; colvec_bias: the column vector (M,) / (L, M) added to every column,
  QuACK's ``colvec_bias``), postact = act(preact); a gated activation name goes to
  ``gemm_gated`` (QuACK's ``gemm_gated = gemm_act``);
- ``gemm_dact(A, B, preact, activation, ...) -> (dpreact, postact)``: D = A @ B (the gradient of
  postact), dpreact = D * act'(preact), postact = act(preact); no bias (quack::GemmDActArgs has
  none);
- ``gemm_gated(A, B, activation="swiglu", ..., concat_layout=False, *, colvec_bias=None) ->
  (preact or None, postact)``: postact[:, j] = glu(preact[:, 2j], preact[:, 2j + 1]) (N / 2
  columns);
- ``gemm_dgated(A, B, preact, activation="swiglu", ...) -> (dpreact, postact)`` (no bias).

Each is a custom op registered by ``quack_cpp._registrar`` (``torch.ops.quack_cpp.gemm_act``,
``gemm_dact``, ``gemm_gated``, ``gemm_dgated``: fake kernels, so torch.compile(fullgraph=True)
traces them; no host synchronisation, so CUDA graphs capture them) with the eager fast path.
Like QuACK's, they are not differentiable on their own (a backward through them raises): the
layers below carry the autograd.

Layers (composites of those ops and ``gemm_op``, ``_registrar.register_function``; QuACK's
``linear.LinearActFunc`` / ``DActLinearFunc``):

- ``linear_act(x, weight, activation, bias=None, store_preact=True, ...) -> (preact, postact)``:
  fc1 of an MLP. Backward from dpreact: dgrad, wgrad, the bias's column sum. postact is
  differentiable too (a gradient arriving for it is turned into dpreact with the activation's
  derivative in torch: the standalone use; inside an MLP none arrives);
- ``act_linear(preact, weight, postact, activation, bias=None, ...) -> out`` = postact @ W^T +
  bias: fc2 of an MLP. Its backward runs gemm_dact / gemm_dgated (dout @ W with the activation's
  gradient in the epilogue), which gives dpreact and the recomputed postact for fc2's wgrad, so
  postact is never saved; postact must be act(preact) (it gets no gradient of its own);
- ``mlp(x, w1, w2, activation, b1=None, b2=None, ...)``: the two.

Gated layout: fc1's weight W1 (2H, K) holds gate and up rows interleaved (row 2j: gate_j, row
2j + 1: up_j; QuACK's layout, what the epilogue pairs) or, with ``concat_layout=True``, as two
halves [W_gate; W_up] (a Llama gate_proj / up_proj stacked): the forward reads those through the
kernel's concat view of B; preact is interleaved either way; the backward interleaves W1 (one copy
of the weight) for the dgrad and de-interleaves dW1 and db1.

Bias gradients are column sums of the output gradient over the rows, taken by torch in fp32
(deterministic, one read of the gradient; QuACK does the same). A fused epilogue column sum is not
used: fc2's and Linear's dout is not produced by any of our epilogues (it arrives from the next
layer), and fc1's would need a cross-CTA reduction (atomics or partials and a second pass).
"""

from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from . import _C
from . import _registrar as _reg
from . import _dtensor
from ._registrar import dtype_name, register, register_function, stream, tensor_arg
from .gemm_ops import (_as_operand, _cast, _check, _row_major, _rows, _schedule,
                       _streamk_workspace, _tma_ok, check_colvec_bias, gemm_op, linear_dtype,
                       weight_grad)

__all__ = ["gemm_act", "gemm_dact", "gemm_gated", "gemm_dgated", "linear_act", "act_linear",
           "mlp", "ACTIVATIONS", "GATED_ACTIVATIONS", "activation_name", "is_gated",
           "act_torch", "gated_torch", "interleave_gate_up", "deinterleave_gate_up"]

ACTIVATIONS = ("identity", "relu", "relu_sq", "gelu_tanh_approx", "silu", "tanh", "gelu_erf",
               "quick_gelu")
GATED_ACTIVATIONS = ("swiglu", "swiglu_oai", "reglu", "geglu", "glu")
_INPUT_DTYPES = (torch.float16, torch.bfloat16)
_SWIGLU_OAI_ALPHA = 1.702
_QUICK_GELU_ALPHA = 1.702


def activation_name(activation: Optional[str], fn: str = "gemm_act") -> str:
    """The canonical name: None and "none" are "identity" (QuACK's None); ValueError for a
    name of neither table."""
    if activation is None or activation == "none":
        return "identity"
    if activation in ACTIVATIONS or activation in GATED_ACTIVATIONS:
        return activation
    raise ValueError(f"{fn}: activation is {activation!r}, expected one of None, "
                     f"{', '.join(ACTIVATIONS)}, or a gated one: {', '.join(GATED_ACTIVATIONS)}")


def is_gated(activation: Optional[str]) -> bool:
    return activation in GATED_ACTIVATIONS


# --------------------------------------------------------------------------------------------
# torch references of the activations (the fallbacks and a postact gradient; fp32 math)
# --------------------------------------------------------------------------------------------


def act_torch(name: str, x: Tensor) -> Tensor:
    """act(x) in torch (the formulas of quack/gemm_act.h; QuACK's act_to_pytorch_fn_map).
    name: a canonical name of ACTIVATIONS (``activation_name``'s); ValueError otherwise."""
    if name == "relu":
        return F.relu(x)
    if name == "relu_sq":
        return F.relu(x).square()  # 0 at x = −inf (relu(x)·x would be NaN), as the kernel
    if name == "gelu_tanh_approx":
        return F.gelu(x, approximate="tanh")
    if name == "silu":
        return F.silu(x)
    if name == "tanh":
        return torch.tanh(x)
    if name == "gelu_erf":
        return F.gelu(x)
    if name == "quick_gelu":
        return x * torch.sigmoid(_QUICK_GELU_ALPHA * x)
    if name == "identity":
        return x
    # A name missing here would otherwise pass as the identity: a wrong fallback, not an error.
    raise ValueError(f"act_torch: activation is {name!r}, expected one of "
                     f"{', '.join(ACTIVATIONS)}")


def dact_torch(name: str, x: Tensor, dy: Tensor) -> Tensor:
    """dy * act'(x) in torch. name: as ``act_torch``'s; ValueError otherwise."""
    if name == "relu":
        return torch.where(x > 0, dy, torch.zeros_like(dy))
    if name == "relu_sq":
        return 2.0 * dy * F.relu(x)
    if name == "gelu_tanh_approx":
        c = 0.7978845608028654
        t = torch.tanh(c * (x + 0.044715 * x * x * x))
        return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x))
    if name == "silu":
        s = torch.sigmoid(x)
        return dy * s * (1.0 + x * (1.0 - s))
    if name == "tanh":
        t = torch.tanh(x)
        return dy * (1.0 - t * t)
    if name == "gelu_erf":
        cdf = 0.5 * (1.0 + torch.erf(x * 0.7071067811865476))
        pdf = 0.3989422804014327 * torch.exp(-0.5 * x * x)
        return dy * (cdf + x * pdf)
    if name == "quick_gelu":
        s = torch.sigmoid(_QUICK_GELU_ALPHA * x)
        return dy * (s + _QUICK_GELU_ALPHA * x * s * (1.0 - s))
    if name == "identity":
        return dy
    raise ValueError(f"dact_torch: activation is {name!r}, expected one of "
                     f"{', '.join(ACTIVATIONS)}")


def gated_torch(name: str, g: Tensor, u: Tensor) -> Tensor:
    """glu(g, u) in torch (QuACK's gated_to_pytorch_fn_map)."""
    if name == "swiglu":
        return F.silu(g) * u
    if name == "swiglu_oai":
        return g * torch.sigmoid(_SWIGLU_OAI_ALPHA * g) * (u + 1)
    if name == "reglu":
        return F.relu(g) * u
    if name == "geglu":
        return F.gelu(g, approximate="tanh") * u
    if name == "glu":
        return torch.sigmoid(g) * u
    raise ValueError(f"gated_torch: activation is {name!r}, expected one of "
                     f"{', '.join(GATED_ACTIVATIONS)}")


def dgated_torch(name: str, g: Tensor, u: Tensor, dy: Tensor) -> Tuple[Tensor, Tensor]:
    """(dy * d glu/dg, dy * d glu/du) in torch."""
    if name in ("swiglu", "swiglu_oai"):
        a = 1.0 if name == "swiglu" else _SWIGLU_OAI_ALPHA
        s = torch.sigmoid(a * g)
        silu = g * s
        up = u if name == "swiglu" else u + 1
        return dy * up * (s + a * silu * (1.0 - s)), dy * silu
    if name == "reglu":
        return torch.where(g > 0, dy * u, torch.zeros_like(dy)), dy * F.relu(g)
    if name == "geglu":
        return dact_torch("gelu_tanh_approx", g, dy * u), dy * F.gelu(g, approximate="tanh")
    if name == "glu":
        s = torch.sigmoid(g)
        return dy * u * s * (1.0 - s), dy * s
    raise ValueError(f"dgated_torch: activation is {name!r}, expected one of "
                     f"{', '.join(GATED_ACTIVATIONS)}")


def interleave_gate_up(t: Tensor) -> Tensor:
    """[gate; up] (2H, ...) -> rows gate_0, up_0, gate_1, up_1, ... (a copy; dim 0)."""
    h = t.shape[0] // 2
    return torch.stack((t[:h], t[h:]), dim=1).reshape(t.shape)


def deinterleave_gate_up(t: Tensor) -> Tensor:
    """The inverse of interleave_gate_up: interleaved rows (2H, ...) -> [gate; up] (a copy)."""
    h = t.shape[0] // 2
    v = t.reshape(h, 2, *t.shape[1:])
    return torch.cat((v[:, 0], v[:, 1]), dim=0)


def _math(t: Tensor) -> Tensor:
    # fp32 math for 16-bit tensors (float64 stays float64).
    return t.to(torch.promote_types(t.dtype, torch.float32))


def _postact_torch(name: str, preact: Tensor) -> Tensor:
    """postact from preact (interleaved pairs for a gated name), fp32 math, preact's dtype."""
    p = _math(preact)
    out = gated_torch(name, p[..., 0::2], p[..., 1::2]) if is_gated(name) else act_torch(name, p)
    return out.to(preact.dtype)


def _dpreact_torch(name: str, preact: Tensor, dpostact: Tensor) -> Tensor:
    """dpreact from a postact gradient (interleaved pairs for a gated name), fp32 math."""
    p, dy = _math(preact), _math(dpostact)
    if not is_gated(name):
        return dact_torch(name, p, dy)
    dg, du = dgated_torch(name, p[..., 0::2], p[..., 1::2], dy)
    return torch.stack((dg, du), dim=-1).reshape(p.shape)


# --------------------------------------------------------------------------------------------
# Shapes (the C++'s rank, L and K checks with each function's prefix, so fake tensors raise the
# same errors)
# --------------------------------------------------------------------------------------------


def _shape_str(t: Tensor) -> str:
    return f"{tuple(t.shape)} {dtype_name(t.dtype)}"


def _mn(fn: str, A: Tensor, B: Tensor) -> Tuple[int, ...]:
    """(M, N) or (L, M, N) of A @ B."""
    nd = A.dim()
    if nd not in (2, 3):
        raise ValueError(f"{fn}: a has {nd} dimensions {_shape_str(A)}, expected 2 (M, K) or "
                         "3 (L, M, K)")
    if B.dim() != nd:
        raise ValueError(f"{fn}: b has {B.dim()} dimensions {_shape_str(B)}, expected {nd} like a")
    a, b = A.shape, B.shape
    if b[-2] != a[-1] or (nd == 3 and b[0] != a[0]):
        want = f"(K, N) = ({a[-1]}, *)" if nd == 2 else f"(L, K, N) = ({a[0]}, {a[-1]}, *)"
        raise ValueError(f"{fn}: b has shape {_shape_str(B)}, expected {want}")
    return (a[0], b[1]) if nd == 2 else (a[0], a[1], b[2])


def _cols(shape, n: int) -> Tuple[int, ...]:
    return tuple(shape[:-1]) + (n,)


def _bias_args(bias: Optional[Tensor], fn: str):
    return tensor_arg(bias, fn, "bias.row")


# --------------------------------------------------------------------------------------------
# The ops
# --------------------------------------------------------------------------------------------


def _workspace(A: Tensor, B: Tensor, size_fn, *args):
    """(buffer or None, bytes): the workspace of the padded copies of A or B that TMA cannot
    address (K or N not a multiple of 8 in memory, an odd offset), as ``gemm_ops._launch``:
    allocated with torch's caching allocator on A's device, only when one is needed."""
    if _tma_ok(A) and _tma_ok(B):
        return None, 0
    nbytes = size_fn(*args)
    if not nbytes:
        return None, 0
    return torch.empty(nbytes, dtype=torch.uint8, device=A.device), nbytes


class GemmAct:
    name = "quack_cpp::gemm_act"
    sharding = _dtensor.GEMM_ACT  # DTensor placements (quack_cpp._dtensor)

    def signature(A: Tensor, B: Tensor, C: Optional[Tensor], bias: Optional[Tensor],
                  activation: str, alpha: float, beta: float, store_preact: bool,
                  out_dtype: torch.dtype, postact_dtype: torch.dtype,
                  tuned: bool = False,
                  colvec_bias: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        """(preact, postact) = (alpha * A @ B + beta * C + bias + colvec_bias, act(preact))
        (``torch.ops.quack_cpp.gemm_act``; quack::gemm_act). preact absent (a (0,) placeholder
        on the custom-op path) unless store_preact. A (M, K) / (L, M, K) row-major, B (K, N)
        column-major (W.T), C, preact, postact (M, N) row-major (rows padded to 16 bytes); bias
        (N,) / (L, N) added to every row (quack::GemmBias::row); colvec_bias (M,) / (L, M)
        added to every column (quack::GemmBias::col; checked here, ``check_colvec_bias``, also
        in the fake). Biases fp32, bf16 or fp16. activation: one of ACTIVATIONS. Not
        differentiable."""

    def outputs(A, B, C, bias, activation, alpha, beta, store_preact, out_dtype, postact_dtype,
                tuned=False, colvec_bias=None):
        shape = _mn("gemm_act", A, B)
        check_colvec_bias("gemm_act", colvec_bias, A)
        return (_row_major(shape, out_dtype, A) if store_preact else None,
                _row_major(shape, postact_dtype, A))

    def launch(outs, A, B, C, bias, activation, alpha, beta, store_preact, out_dtype,
               postact_dtype, tuned=False, colvec_bias=None):
        fn = "gemm_act"
        preact, postact = outs
        args = (tensor_arg(A, fn, "a"), tensor_arg(B, fn, "b"), tensor_arg(C, fn, "c"),
                tensor_arg(preact, fn, "preact"), tensor_arg(postact, fn, "postact"),
                activation, float(alpha), float(beta) if C is not None else 0.0)
        bias_row = _bias_args(bias, fn)
        bias_col = tensor_arg(colvec_bias, fn, "colvec_bias")
        ws, nbytes = _workspace(A, B, _C.gemm_act_workspace_size, *args, bias_row, bias_col)
        _C.gemm_act(*args, stream(A), bool(tuned), 0, ws.data_ptr() if ws is not None else 0,
                    nbytes, bias_row, bias_col, *_streamk_workspace(A))


class GemmGated:
    name = "quack_cpp::gemm_gated"
    sharding = _dtensor.GEMM_GATED  # DTensor placements (quack_cpp._dtensor)

    def signature(A: Tensor, B: Tensor, C: Optional[Tensor], bias: Optional[Tensor],
                  activation: str, alpha: float, beta: float, store_preact: bool,
                  out_dtype: torch.dtype, postact_dtype: torch.dtype, concat_layout: bool = False,
                  tuned: bool = False,
                  colvec_bias: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        """(preact, postact): preact = alpha * A @ B + beta * C + bias + colvec_bias (M, N),
        postact[:, j] = glu(preact[:, 2j], preact[:, 2j + 1]) (M, N/2)
        (``torch.ops.quack_cpp.gemm_gated``; quack::gemm_gated). concat_layout: B's columns are
        [gate | up] (and bias [b_gate; b_up]); preact is interleaved either way. colvec_bias
        (M,) / (L, M): one value per row m, added to its gate and up columns alike (checked
        here, ``check_colvec_bias``, also in the fake). N even. Not differentiable."""

    def outputs(A, B, C, bias, activation, alpha, beta, store_preact, out_dtype, postact_dtype,
                concat_layout=False, tuned=False, colvec_bias=None):
        shape = _mn("gemm_gated", A, B)
        if shape[-1] % 2 != 0:
            raise ValueError(f"gemm_gated: b has shape {_shape_str(B)} with N = {shape[-1]} "
                             "columns, expected an even N (gate and up columns in pairs)")
        check_colvec_bias("gemm_gated", colvec_bias, A)
        return (_row_major(shape, out_dtype, A) if store_preact else None,
                _row_major(_cols(shape, shape[-1] // 2), postact_dtype, A))

    def launch(outs, A, B, C, bias, activation, alpha, beta, store_preact, out_dtype,
               postact_dtype, concat_layout=False, tuned=False, colvec_bias=None):
        fn = "gemm_gated"
        preact, postact = outs
        args = (tensor_arg(A, fn, "a"), tensor_arg(B, fn, "b"), tensor_arg(C, fn, "c"),
                tensor_arg(preact, fn, "preact"), tensor_arg(postact, fn, "postact"),
                activation, float(alpha), float(beta) if C is not None else 0.0,
                bool(concat_layout))
        bias_row = _bias_args(bias, fn)
        bias_col = tensor_arg(colvec_bias, fn, "colvec_bias")
        ws, nbytes = _workspace(A, B, _C.gemm_gated_workspace_size, *args, bias_row, bias_col)
        _C.gemm_gated(*args, stream(A), bool(tuned), 0, ws.data_ptr() if ws is not None else 0,
                      nbytes, bias_row, bias_col, *_streamk_workspace(A))


class GemmDAct:
    name = "quack_cpp::gemm_dact"
    sharding = _dtensor.GEMM_DACT  # DTensor placements (quack_cpp._dtensor)

    def signature(A: Tensor, B: Tensor, preact: Tensor, activation: str,
                  out_dtype: torch.dtype, postact_dtype: torch.dtype, store_postact: bool = True,
                  tuned: bool = False, dynamic_scheduler: bool = False) -> Tuple[Tensor, Tensor]:
        """(dpreact, postact) = ((A @ B) * act'(preact), act(preact))
        (``torch.ops.quack_cpp.gemm_dact``; quack::gemm_dact). A (M, K) row-major (dout), B
        (K, N) row-major (a weight W), preact (M, N) row-major in out_dtype. postact absent (a
        placeholder on the custom-op path) unless store_postact. dynamic_scheduler: the stream's
        tile counter as GemmDActArgs::tile_counter (no stream-K then). Not differentiable."""

    def outputs(A, B, preact, activation, out_dtype, postact_dtype, store_postact=True,
                tuned=False, dynamic_scheduler=False):
        shape = _mn("gemm_dact", A, B)
        return (_row_major(shape, out_dtype, A),
                _row_major(shape, postact_dtype, A) if store_postact else None)

    def launch(outs, A, B, preact, activation, out_dtype, postact_dtype, store_postact=True,
               tuned=False, dynamic_scheduler=False):
        fn = "gemm_dact"
        dpreact, postact = outs
        args = (tensor_arg(A, fn, "a"), tensor_arg(B, fn, "b"),
                tensor_arg(preact, fn, "preact"), tensor_arg(dpreact, fn, "dpreact"),
                tensor_arg(postact, fn, "postact"), activation)
        ws, nbytes = _workspace(A, B, _C.gemm_dact_workspace_size, *args)
        counter, sk = _schedule(dpreact, dynamic_scheduler)
        _C.gemm_dact(*args, stream(A), bool(tuned), counter,
                     ws.data_ptr() if ws is not None else 0, nbytes, *sk)


class GemmDGated:
    name = "quack_cpp::gemm_dgated"
    sharding = _dtensor.GEMM_DGATED  # DTensor placements (quack_cpp._dtensor)

    def signature(A: Tensor, B: Tensor, preact: Tensor, activation: str,
                  out_dtype: torch.dtype, postact_dtype: torch.dtype, store_postact: bool = True,
                  tuned: bool = False, dynamic_scheduler: bool = False) -> Tuple[Tensor, Tensor]:
        """(dpreact, postact): D = A @ B (M, H); dpreact (M, 2H) = the gradients of the gate/up
        pairs of preact (M, 2H) for D; postact (M, H) = glu(pairs) (``torch.ops.quack_cpp.
        gemm_dgated``; quack::gemm_dgated). A row-major (dout), B (K, H) row-major (fc2's
        weight), preact and dpreact of A's dtype (packed pairs). dynamic_scheduler: as
        gemm_dact's. Not differentiable."""

    def outputs(A, B, preact, activation, out_dtype, postact_dtype, store_postact=True,
                tuned=False, dynamic_scheduler=False):
        shape = _mn("gemm_dgated", A, B)
        return (_row_major(_cols(shape, 2 * shape[-1]), out_dtype, A),
                _row_major(shape, postact_dtype, A) if store_postact else None)

    def launch(outs, A, B, preact, activation, out_dtype, postact_dtype, store_postact=True,
               tuned=False, dynamic_scheduler=False):
        fn = "gemm_dgated"
        dpreact, postact = outs
        args = (tensor_arg(A, fn, "a"), tensor_arg(B, fn, "b"),
                tensor_arg(preact, fn, "preact"), tensor_arg(dpreact, fn, "dpreact"),
                tensor_arg(postact, fn, "postact"), activation)
        ws, nbytes = _workspace(A, B, _C.gemm_dgated_workspace_size, *args)
        counter, sk = _schedule(dpreact, dynamic_scheduler)
        _C.gemm_dgated(*args, stream(A), bool(tuned), counter,
                       ws.data_ptr() if ws is not None else 0, nbytes, *sk)


gemm_act_op = register(GemmAct)
gemm_gated_op = register(GemmGated)
gemm_dact_op = register(GemmDAct)
gemm_dgated_op = register(GemmDGated)


# --------------------------------------------------------------------------------------------
# Functional API
# --------------------------------------------------------------------------------------------


def _dtype_arg(fn: str, name: str, dtype: Optional[torch.dtype], default: torch.dtype):
    if dtype is None:
        return default
    if dtype not in _reg.FLOAT_DTYPES:
        raise ValueError(f"{fn}: {name} is {dtype}, expected float32, float16 or bfloat16")
    return dtype


def _checks(fn: str, path: int, **tensors) -> None:
    if path == _reg.CUSTOM:
        _check(fn, **{k: v for k, v in tensors.items() if v is not None})


def gemm_act(A: Tensor, B: Tensor, activation: Optional[str] = None, C: Optional[Tensor] = None,
             bias: Optional[Tensor] = None, store_preact: bool = True,
             out_dtype: Optional[torch.dtype] = None,
             postact_dtype: Optional[torch.dtype] = None, alpha: float = 1.0,
             tuned: bool = False, concat_layout: bool = False, *,
             colvec_bias: Optional[Tensor] = None) -> Tuple[Optional[Tensor], Tensor]:
    """GEMM with an activation fused into its epilogue (QuACK's ``gemm_act``)::

        preact  = alpha * A @ B + C + bias + colvec_bias       (fp32)
        postact = act(preact)                                  (from the unrounded preact)

    i.e. ``preact[l, m, n] = alpha * (A[l] @ B[l])[m, n] + C[l, m, n] + bias[l, n] +
    colvec_bias[l, m]`` (a 1-D bias the same for every l; 2-D A: drop l).

    Args:
        A: (M, K) or (L, M, K), bfloat16 or float16, CUDA, row-major (x).
        B: (K, N) or (L, K, N), A's dtype, column-major (``W.T`` of a weight W (N, K)).
        activation: None / "identity", "relu", "relu_sq", "gelu_tanh_approx", "silu", "tanh",
            "gelu_erf", "quick_gelu" (quack/gemm_act.h has the formulas); a gated name ("swiglu", "swiglu_oai", "reglu",
            "geglu", "glu") runs ``gemm_gated`` (QuACK's ``gemm_gated = gemm_act``).
        C: None or (M, N) / (L, M, N) in out_dtype, row-major, added (beta = 1).
        bias: None or the row vector (N,) / (L, N) (QuACK's ``bias``, its rowvec_bias),
            float32 or A's dtype, contiguous, added to every row.
        colvec_bias: keyword-only; None or the column vector (M,) / (L, M) (QuACK's
            ``colvec_bias``), added to every column (``preact[.., m, :] += colvec_bias[.., m]``),
            alone or with bias. float32, bfloat16 or float16 (fp32 or the output dtype are the
            usual ones), stride 1 along M (any batch stride, 0 included), on A's device; added
            in fp32 before the activation. Not differentiable (as the op).
        store_preact: return preact (QuACK's store_preact); False: None, nothing stored.
        out_dtype: preact's dtype (and C's), default A's; postact_dtype: postact's, default
            out_dtype (QuACK's rule). Compiled: both A's dtype (bfloat16 or float16), or, for
            bfloat16 A, both float32 (an fp32-master model's ``out_dtype=torch.float32``; with
            store_preact=False postact_dtype alone decides). Other pairs raise ValueError naming
            the compiled ones.
        alpha: scales A @ B (fp32).
        tuned: autotune the tile configuration (as ``quack_cpp.gemm``).
        concat_layout: gated activations only (see ``gemm_gated``); True with an elementwise
            activation raises ValueError.

    Returns:
        (preact or None, postact), row-major with rows padded to 16 bytes (contiguous when N *
        itemsize is a multiple of 16). Not differentiable (the layers ``linear_act`` /
        ``act_linear`` carry the autograd).

    Raises:
        ValueError: an unknown activation, concat_layout with an elementwise one, a tensor not
            on a CUDA device, an unsupported out_dtype / postact_dtype, mismatched ranks / K / L,
            a colvec_bias that is not (M,) / (L, M) (L only with 3-D A), not float32 / float16 /
            bfloat16, not on A's device or not of stride 1 along M (before any launch, naming
            ``colvec_bias``: ``gemm_act: colvec_bias has shape ...``), or what
            quack::can_implement rejects (its message, ``gemm_act: ...``).
        TypeError: A, B, C, bias or colvec_bias not a tensor. RuntimeError: a CUDA error.
    """
    name = activation_name(activation, "gemm_act")
    if is_gated(name):
        return gemm_gated(A, B, name, C, bias, store_preact, out_dtype, postact_dtype, alpha,
                          tuned, concat_layout, colvec_bias=colvec_bias)
    if concat_layout:
        # The concat view pairs gate and up columns: it has no meaning for an elementwise act.
        raise ValueError(f"gemm_act: concat_layout is True with the activation {name!r}, "
                         f"expected False (concat_layout is for gated activations: "
                         f"{', '.join(GATED_ACTIVATIONS)})")
    if colvec_bias is None:
        path = _reg.route(A, B, C, bias)
        _checks("gemm_act", path, A=A, B=B, C=C, bias=bias)
    else:
        path = _colvec_route("gemm_act", A, B, C, bias, colvec_bias)
    od = _dtype_arg("gemm_act", "out_dtype", out_dtype, A.dtype)
    pd = _dtype_arg("gemm_act", "postact_dtype", postact_dtype, od)
    preact, postact = gemm_act_op.run(path, A, B, C, bias, name, float(alpha),
                                      1.0 if C is not None else 0.0, bool(store_preact), od, pd,
                                      bool(tuned), colvec_bias)
    return (preact if store_preact else None), postact


def _colvec_route(fn: str, A, B, C, bias, colvec_bias) -> int:
    """route and checks of a gemm_act / gemm_gated call with a column bias: the device checks
    of the custom-op path, then colvec_bias's (``check_colvec_bias``, after the rank, K and L
    checks), before the op runs."""
    if not isinstance(colvec_bias, Tensor):
        check_colvec_bias(fn, colvec_bias, A)  # the TypeError
    path = _reg.route(A, B, C, bias, colvec_bias)
    _checks(fn, path, A=A, B=B, C=C, bias=bias, colvec_bias=colvec_bias)
    _mn(fn, A, B)  # the rank, K and L errors first
    check_colvec_bias(fn, colvec_bias, A)
    return path


def gemm_gated(A: Tensor, B: Tensor, activation: str = "swiglu", C: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, store_preact: bool = True,
               out_dtype: Optional[torch.dtype] = None,
               postact_dtype: Optional[torch.dtype] = None, alpha: float = 1.0,
               tuned: bool = False, concat_layout: bool = False, *,
               colvec_bias: Optional[Tensor] = None) -> Tuple[Optional[Tensor], Tensor]:
    """GEMM with a gated activation fused into its epilogue (QuACK's ``gemm_gated``)::

        preact          = alpha * A @ B + C + bias + colvec_bias      (M, N), fp32
        postact[:, j]   = glu(preact[:, 2j], preact[:, 2j + 1])       (M, N / 2)

    glu: "swiglu" (silu(g) * u), "swiglu_oai" (g * sigmoid(1.702 g) * (u + 1)), "reglu",
    "geglu" (gelu_tanh(g) * u), "glu" (sigmoid(g) * u). Gate and up are interleaved column
    pairs of preact (and of B's columns, i.e. W's rows); with ``concat_layout=True`` B's columns
    are the two halves [gate | up] (W = [W_gate; W_up], e.g. a Llama gate_proj and up_proj
    stacked) and bias is [b_gate; b_up]; the kernel reads them through an interleaving view, so
    preact is interleaved in both layouts (what ``gemm_dgated`` reads). colvec_bias (M,) /
    (L, M) (keyword-only, QuACK's ``colvec_bias``) is one value per row m of preact, added to
    its gate and up columns alike, in either layout; bias (N,) / (L, N) is the row vector
    (QuACK's rowvec ``bias``, in B's column order).

    Args, Returns, Raises: as ``gemm_act`` (N even; postact (M, N / 2); colvec_bias's rules and
    errors, ``gemm_gated: colvec_bias ...``); the same dtypes (A bfloat16 or float16 with
    outputs of A's dtype; bfloat16 A with float32 preact and postact, interleaved layout only).
    Not differentiable.
    """
    name = activation_name(activation, "gemm_gated")
    if not is_gated(name):
        raise ValueError(f"gemm_gated: activation is {activation!r}, expected a gated one: "
                         f"{', '.join(GATED_ACTIVATIONS)}")
    if colvec_bias is None:
        path = _reg.route(A, B, C, bias)
        _checks("gemm_gated", path, A=A, B=B, C=C, bias=bias)
    else:
        path = _colvec_route("gemm_gated", A, B, C, bias, colvec_bias)
    od = _dtype_arg("gemm_gated", "out_dtype", out_dtype, A.dtype)
    pd = _dtype_arg("gemm_gated", "postact_dtype", postact_dtype, od)
    preact, postact = gemm_gated_op.run(path, A, B, C, bias, name, float(alpha),
                                        1.0 if C is not None else 0.0, bool(store_preact), od,
                                        pd, bool(concat_layout), bool(tuned), colvec_bias)
    return (preact if store_preact else None), postact


def gemm_dact(A: Tensor, B: Tensor, preact: Tensor, activation: Optional[str] = None,
              out_dtype: Optional[torch.dtype] = None,
              postact_dtype: Optional[torch.dtype] = None, store_postact: bool = True,
              tuned: bool = False, *, dynamic_scheduler: bool = False
              ) -> Tuple[Tensor, Optional[Tensor]]:
    """The activation's gradient fused into the GEMM that produces its input gradient (QuACK's
    ``gemm_dact``)::

        D       = A @ B                  (e.g. dout @ W2: the gradient of postact)
        dpreact = D * act'(preact)
        postact = act(preact)            (recomputed, e.g. for fc2's weight gradient)

    A gated name runs ``gemm_dgated`` (QuACK's ``gemm_dgated = gemm_dact``).

    Args:
        A: (M, K) / (L, M, K) bfloat16 or float16, row-major. B: (K, N) / (L, K, N), row-major
            (a weight W (out, in) as it is stored). preact: (M, N) row-major, out_dtype.
        out_dtype: dpreact's dtype (default preact's); postact_dtype: default preact's.
            Compiled: preact, dpreact and postact all of A's dtype.
        store_postact: False: postact is None (not computed into memory).
        dynamic_scheduler: keyword-only (QuACK's keyword; its default there is True, ours
            False: the results are the same bit for bit, and plain GEMMs on it read no faster
            at the LLM shapes, docs/performance.md, issue 16): persistent clusters take output
            tiles from a counter (the stream's, as ``gemm``'s) instead of the static schedule;
            stream-K off for the call.

    Returns:
        (dpreact, postact or None), row-major. Not differentiable.

    Raises:
        ValueError: an unknown activation, a tensor not on a CUDA device, an unsupported
            out_dtype / postact_dtype, mismatched ranks / K / L, or what quack::can_implement
            rejects (its message, ``gemm_dact: ...``; e.g. preact not (M, N) of A's dtype).
        TypeError: A, B or preact not a tensor. RuntimeError: a CUDA error.
    """
    name = activation_name(activation, "gemm_dact")
    if is_gated(name):
        return gemm_dgated(A, B, preact, name, out_dtype, postact_dtype, store_postact, tuned,
                           dynamic_scheduler=dynamic_scheduler)
    path = _reg.route(A, B, preact)
    _checks("gemm_dact", path, A=A, B=B, preact=preact)
    od = _dtype_arg("gemm_dact", "out_dtype", out_dtype, preact.dtype)
    pd = _dtype_arg("gemm_dact", "postact_dtype", postact_dtype, preact.dtype)
    dpreact, postact = gemm_dact_op.run(path, A, B, preact, name, od, pd, bool(store_postact),
                                        bool(tuned), bool(dynamic_scheduler))
    return dpreact, (postact if store_postact else None)


def gemm_dgated(A: Tensor, B: Tensor, preact: Tensor, activation: str = "swiglu",
                out_dtype: Optional[torch.dtype] = None,
                postact_dtype: Optional[torch.dtype] = None, store_postact: bool = True,
                tuned: bool = False, *, dynamic_scheduler: bool = False
                ) -> Tuple[Tensor, Optional[Tensor]]:
    """The gated activation's gradient fused into a GEMM (QuACK's ``gemm_dgated``)::

        D                  = A @ B                               (M, H)
        g, u               = preact[:, 2j], preact[:, 2j + 1]    (preact (M, 2H), interleaved)
        dpreact[:, 2j]     = D[:, j] * dglu/dg (g, u)
        dpreact[:, 2j + 1] = D[:, j] * dglu/du (g, u)
        postact[:, j]      = glu(g, u)

    Args: as ``gemm_dact`` (dynamic_scheduler included); preact and dpreact of A's dtype
    (bfloat16 or float16: read and written as packed 16-bit pairs), postact of A's dtype.
    Returns (dpreact (M, 2H), postact (M, H) or None). Not differentiable.

    Raises:
        ValueError: an activation that is not gated, and as ``gemm_dact`` (``gemm_dgated: ...``;
            e.g. preact not (M, 2H), or not in 4-byte pairs: an odd base or leading stride).
        TypeError: A, B or preact not a tensor. RuntimeError: a CUDA error.
    """
    name = activation_name(activation, "gemm_dgated")
    if not is_gated(name):
        raise ValueError(f"gemm_dgated: activation is {activation!r}, expected a gated one: "
                         f"{', '.join(GATED_ACTIVATIONS)}")
    path = _reg.route(A, B, preact)
    _checks("gemm_dgated", path, A=A, B=B, preact=preact)
    od = _dtype_arg("gemm_dgated", "out_dtype", out_dtype, preact.dtype)
    pd = _dtype_arg("gemm_dgated", "postact_dtype", postact_dtype, preact.dtype)
    dpreact, postact = gemm_dgated_op.run(path, A, B, preact, name, od, pd,
                                          bool(store_postact), bool(tuned),
                                          bool(dynamic_scheduler))
    return dpreact, (postact if store_postact else None)


# --------------------------------------------------------------------------------------------
# Layers: fc1 (linear_act) and fc2 (act_linear) of an MLP
# --------------------------------------------------------------------------------------------


def _colsum(g: Tensor, dtype: torch.dtype) -> Tensor:
    """The bias gradient: the column sums of g (M, N) in fp32, in the bias's dtype."""
    return g.sum(0, dtype=torch.float32).to(dtype)


class LinearAct:
    """(preact, postact) = (x @ W^T + b, act(preact)) with W (N, K); gated: postact (..., N/2).
    The fc1 of an MLP (QuACK's LinearActFunc). See ``linear_act``."""

    name = "quack_cpp::linear_act"

    def forward(ctx, x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: str,
                dtype: torch.dtype, store_preact: bool, fuse_grad_accum: bool, tuned: bool,
                concat_layout: bool, postact_grad: bool):
        K, N = weight.shape[1], weight.shape[0]
        gated = is_gated(activation)
        x2 = _as_operand(_rows(_cast(x, dtype), K))
        w = _cast(weight, dtype)
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        any_grad = need_x or need_w or need_b
        keep = True  # linear_act calls the op directly for an inference without preact
        if gated:
            preact, postact = gemm_gated_op(x2, w.mT, None, bias, activation, 1.0, 0.0, keep,
                                            dtype, dtype, bool(concat_layout), bool(tuned))
        else:
            preact, postact = gemm_act_op(x2, w.mT, None, bias, activation, 1.0, 0.0, keep,
                                          dtype, dtype, bool(tuned))
        lead = x.shape[:-1]
        ctx.activation, ctx.dtype, ctx.lead, ctx.k = activation, dtype, lead, K
        ctx.concat = bool(concat_layout and gated)
        ctx.bias_dtype = bias.dtype if bias is not None else None
        ctx.fuse = bool(fuse_grad_accum and need_w and not ctx.concat
                        and not torch.compiler.is_compiling())
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x2 if need_w else None, w if need_x else None,
                              weight if need_w else None, preact if any_grad else None)
        post = postact if x.dim() == 2 else postact.view(*lead, postact.shape[-1])
        # Inside mlp, postact feeds act_linear alone, whose backward gives preact's gradient:
        # postact gets none. Marked, so that a zero gradient a compiled graph materializes for
        # it (torch.compile does not honour set_materialize_grads(False)) is not pushed
        # through act' in torch (run X: a 4.6 ms Triton kernel a step in the demo's run (d)).
        ctx.postact_grad = bool(postact_grad)
        if not postact_grad:
            ctx.mark_non_differentiable(post)
        return (preact if x.dim() == 2 else preact.view(*lead, N)), post

    def backward(ctx, dpreact, dpostact):
        x2, w, weight, preact = ctx.saved_tensors
        (need_x, need_w, need_b), fuse = _reg.task_grads(ctx, (0, 1, 2), 1, ctx.fuse)
        n = preact.shape[-1]
        g = None
        if dpreact is not None:
            g = _rows(_cast(dpreact, ctx.dtype), n)
        if dpostact is not None and ctx.postact_grad:  # postact's gradient through act'
            gp = _dpreact_torch(ctx.activation, preact,
                                _rows(dpostact, dpostact.shape[-1])).to(ctx.dtype)
            g = gp if g is None else g + gp
        if g is None:
            return None, None, None, None, None, None, None, None, None, None
        g = _as_operand(g)
        dx = dw = db = None
        if need_x:  # dgrad: dx = g @ W (interleaved rows for the concat layout)
            wi = interleave_gate_up(w) if ctx.concat else w
            dx = gemm_op(g, wi, None, 1.0, 0.0, ctx.dtype, False, None, None)
            if len(ctx.lead) != 1:
                dx = dx.view(*ctx.lead, ctx.k)
        if need_w:
            dw = weight_grad(g, x2, weight, ctx.dtype, fuse)
            if ctx.concat:
                dw = deinterleave_gate_up(dw)
        if need_b:
            db = _colsum(g, ctx.bias_dtype)
            if ctx.concat:
                db = deinterleave_gate_up(db)
        return dx, dw, db, None, None, None, None, None, None, None


class ActLinear:
    """out = postact @ W^T + b where postact = act(preact): the fc2 of an MLP (QuACK's
    DActLinearFunc). See ``act_linear``."""

    name = "quack_cpp::act_linear"

    def forward(ctx, preact: Tensor, weight: Tensor, postact: Tensor, bias: Optional[Tensor],
                activation: str, dtype: torch.dtype, fuse_grad_accum: bool, tuned: bool):
        K, N = weight.shape[1], weight.shape[0]
        x2 = _as_operand(_rows(_cast(postact, dtype), K))
        w = _cast(weight, dtype)
        if bias is None:
            y = gemm_op(x2, w.mT, None, 1.0, 0.0, dtype, bool(tuned), None, None)
        else:
            y = gemm_op(x2, w.mT, None, 1.0, 0.0, dtype, bool(tuned), None, None, bias)
        need_pre, need_w = ctx.needs_input_grad[:2]
        lead = postact.shape[:-1]
        ctx.activation, ctx.dtype, ctx.lead, ctx.n = activation, dtype, lead, N
        ctx.bias_dtype = bias.dtype if bias is not None else None
        ctx.fuse = bool(fuse_grad_accum and need_w and not torch.compiler.is_compiling())
        # preact instead of postact: postact comes back from gemm_dact in the backward.
        pre2 = _rows(preact, preact.shape[-1]) if (need_pre or need_w) else None
        ctx.save_for_backward(pre2, w if need_pre else None, weight if need_w else None)
        return y if postact.dim() == 2 else y.view(*lead, N)

    def backward(ctx, dout):
        pre2, w, weight = ctx.saved_tensors
        (need_pre, need_w, need_b), fuse = _reg.task_grads(ctx, (0, 1, 3), 1, ctx.fuse)
        g = _as_operand(_rows(_cast(dout, ctx.dtype), ctx.n))
        dpre = dw = db = None
        post = None
        if need_pre:  # gemm_dact / gemm_dgated: dpreact and the recomputed postact
            pre = _as_operand(_cast(pre2, ctx.dtype))
            if is_gated(ctx.activation):
                dpre, post = gemm_dgated_op(g, w, pre, ctx.activation, ctx.dtype, ctx.dtype,
                                            need_w, False)
            else:
                dpre, post = gemm_dact_op(g, w, pre, ctx.activation, ctx.dtype, ctx.dtype,
                                          need_w, False)
            if len(ctx.lead) != 1:
                dpre = dpre.view(*ctx.lead, dpre.shape[-1])
        if need_w:
            if post is None:  # only dW: postact from preact in torch (no GEMM needed)
                post = _postact_torch(ctx.activation, _cast(pre2, ctx.dtype))
            dw = weight_grad(g, _as_operand(post), weight, ctx.dtype, fuse)
        if need_b:
            db = _colsum(g, ctx.bias_dtype)
        return dpre, dw, None, db, None, None, None, None


linear_act_op = register_function(LinearAct)
act_linear_op = register_function(ActLinear)


def _compute_dtype(fn: str, x: Tensor, weight: Tensor) -> torch.dtype:
    dtype = linear_dtype(x, weight)
    if dtype is None:
        raise ValueError(f"{fn}: x {_shape_str(x)} and weight {_shape_str(weight)}: expected "
                         "both bfloat16 or both float16 (or autocast to one of them)")
    return dtype


def linear_act(x: Tensor, weight: Tensor, activation: Optional[str], bias: Optional[Tensor] = None,
               store_preact: bool = True, fuse_grad_accum: bool = False, tuned: bool = False,
               concat_layout: bool = False) -> Tuple[Optional[Tensor], Tensor]:
    """fc1 of an MLP: ``preact = x @ weight^T + bias``, ``postact = act(preact)`` in one GEMM
    (``gemm_act``, or ``gemm_gated`` for a gated activation: postact has N / 2 columns),
    differentiable (QuACK's ``linear_act_func`` / ``linear_gated_func``).

    Backward: from dpreact (what ``act_linear``'s backward gives) the dgrad ``dx = dpreact @ W``,
    the wgrad ``dW = dpreact^T @ x`` (fused accumulation into ``weight.grad`` with
    fuse_grad_accum, eager only) and the bias's column sum. A gradient arriving for postact
    (postact used elsewhere) is turned into dpreact with the activation's derivative in torch.

    Args:
        x: (..., K) CUDA, bfloat16 or float16 (or autocast to one). weight: (N, K); gated:
            N = 2H with gate and up rows interleaved, or [W_gate; W_up] with concat_layout.
            bias: None or (N,).
        activation: a name of ACTIVATIONS or GATED_ACTIVATIONS, or None ("identity").
        store_preact: keep preact (needed for a backward; stored anyway when a gradient is
            recorded); False without grad: preact is None.
        fuse_grad_accum: accumulate dW into ``weight.grad`` in the wgrad GEMM (eager only; not
            with ``concat_layout=True``: the wgrad gives dW1 interleaved, de-interleaved after,
            so dW comes back apart and autograd adds it; not in a backward that does not store
            into ``weight.grad``, as ``quack_cpp.linear``).
        tuned: autotune the GEMMs' tiles. concat_layout: gated only, weight's halves (above).

    Returns:
        (preact (..., N) or None, postact (..., N or N/2)), the compute dtype; a gated preact is
        interleaved (column 2j gate_j, 2j + 1 up_j) with either weight layout.

    Raises:
        ValueError: an unknown activation, x and weight not both bfloat16 or both float16 (after
            autocast), x not (..., K) or weight not (N, K), a tensor not on a CUDA device, or
            what the GEMM rejects (``gemm_act: ...`` / ``gemm_gated: ...``, e.g. an odd N for a
            gated activation). RuntimeError: a CUDA error.
    """
    return _linear_act(x, weight, activation, bias, store_preact, fuse_grad_accum, tuned,
                       concat_layout, True)


def _linear_act(x, weight, activation, bias, store_preact, fuse_grad_accum, tuned, concat_layout,
                postact_grad: bool):
    """linear_act; postact_grad=False (mlp): postact is marked non-differentiable."""
    name = activation_name(activation, "linear_act")
    path = _reg.route(x, weight, bias)
    _checks("linear_act", path, x=x, weight=weight, bias=bias)
    dtype = _compute_dtype("linear_act", x, weight)
    if weight.dim() != 2 or x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear_act: x has shape {tuple(x.shape)} and weight "
                         f"{tuple(weight.shape)}, expected (..., K) and (N, K)")
    if not store_preact and not _reg.records_grad(x, weight, bias):
        # Inference: the fused GEMM alone, preact not stored (no autograd node to build).
        K = weight.shape[1]
        x2 = _as_operand(_rows(_cast(x, dtype), K))
        w = _cast(weight, dtype)
        if is_gated(name):
            _, post = gemm_gated(x2, w.mT, name, None, bias, False, dtype, dtype, 1.0, tuned,
                                 concat_layout)
        else:
            _, post = gemm_act(x2, w.mT, name, None, bias, False, dtype, dtype, 1.0, tuned)
        return None, (post if x.dim() == 2 else post.view(*x.shape[:-1], post.shape[-1]))
    return linear_act_op.run(path, x, weight, bias, name, dtype, True, bool(fuse_grad_accum),
                             bool(tuned), bool(concat_layout), bool(postact_grad))


def act_linear(preact: Tensor, weight: Tensor, postact: Tensor, activation: Optional[str],
               bias: Optional[Tensor] = None, fuse_grad_accum: bool = False,
               tuned: bool = False) -> Tensor:
    """fc2 of an MLP: ``out = postact @ weight^T + bias`` where ``postact = act(preact)`` came
    from ``linear_act`` (QuACK's ``act_linear_func`` / ``gated_linear_func``).

    Backward: ``gemm_dact`` (``gemm_dgated``) computes ``dpreact = (dout @ W) * act'(preact)``
    and the recomputed postact in one GEMM; then the wgrad ``dW = dout^T @ postact`` and the
    bias's column sum. postact itself gets no gradient (it is act(preact): preact's gradient
    holds it), and is not saved for the backward.

    Args:
        preact: linear_act's preact: (..., H), or (..., 2H) for a gated activation with gate and
            up interleaved (column 2j gate_j, 2j + 1 up_j: the kernels' layout whatever fc1's
            weight layout); postact's leading dims; bfloat16 or float16 (cast to the compute
            dtype for the backward).
        weight: (N, H), bfloat16 or float16 (or autocast to one).
        postact: (..., H) = act(preact), the compute dtype (or autocast to it). bias: None or
            (N,), float32 or the compute dtype.
        activation: preact's, a name of ACTIVATIONS or GATED_ACTIVATIONS, or None.
        fuse_grad_accum: accumulate dW into ``weight.grad`` (eager only; as
            ``quack_cpp.linear``). tuned: autotune.

    Returns:
        out (..., N) in the compute dtype.

    Raises:
        ValueError: an unknown activation, postact and weight not both bfloat16 or both float16
            (after autocast), postact not (..., H) or weight not (N, H), preact not postact's
            leading dims with H (2H gated) columns, a tensor not on a CUDA device, or what the
            GEMM rejects (``gemm: ...``; in the backward ``gemm_dact`` / ``gemm_dgated``'s).
            RuntimeError: a CUDA error.
    """
    name = activation_name(activation, "act_linear")
    path = _reg.route(preact, weight, postact, bias)
    _checks("act_linear", path, preact=preact, weight=weight, postact=postact, bias=bias)
    dtype = _compute_dtype("act_linear", postact, weight)
    if weight.dim() != 2 or postact.shape[-1] != weight.shape[1]:
        raise ValueError(f"act_linear: postact has shape {tuple(postact.shape)} and weight "
                         f"{tuple(weight.shape)}, expected (..., H) and (N, H)")
    # The backward reads preact against postact's rows: a mismatch found there would name
    # gemm_dact's tensors, not the ones the caller passed.
    n_pre = 2 * postact.shape[-1] if is_gated(name) else postact.shape[-1]
    if preact.shape[:-1] != postact.shape[:-1] or preact.shape[-1] != n_pre:
        raise ValueError(f"act_linear: preact has shape {tuple(preact.shape)}, expected "
                         f"{tuple(postact.shape[:-1]) + (n_pre,)} (postact's leading dims and "
                         f"{'2H' if is_gated(name) else 'H'} = {n_pre} columns for {name!r})")
    return act_linear_op.run(path, preact, weight, postact, bias, name, dtype,
                             bool(fuse_grad_accum), bool(tuned))


def mlp(x: Tensor, weight1: Tensor, weight2: Tensor, activation: Optional[str],
        bias1: Optional[Tensor] = None, bias2: Optional[Tensor] = None,
        fuse_grad_accum: bool = False, tuned: bool = False, concat_layout: bool = False) -> Tensor:
    """``fc2(act(fc1(x)))`` with fc1 = ``linear_act`` and fc2 = ``act_linear`` (QuACK's
    ``mlp_func``): forward two GEMMs (the activation in fc1's epilogue, preact stored when a
    gradient is recorded), backward four (fc2's dgrad with the activation's gradient fused,
    fc2's wgrad from the recomputed postact, fc1's dgrad and wgrad). Without a recorded gradient
    preact is not stored and fc2 is a plain linear::

        out = act(x @ weight1^T + bias1) @ weight2^T + bias2

    Args:
        x: (..., D) CUDA, bfloat16 or float16 (or autocast to one).
        weight1: (H, D), or (2H, D) for a gated activation with gate and up rows interleaved
            (row 2j gate_j, 2j + 1 up_j), or the halves [W_gate; W_up] with concat_layout;
            x's dtype (the compute dtype). bias1: None or (H,) / (2H,) in weight1's row order,
            float32 or the compute dtype.
        weight2: (O, H), the compute dtype. bias2: None or (O,), float32 or the compute dtype.
        activation: a name of ACTIVATIONS or GATED_ACTIVATIONS, or None ("identity").
        fuse_grad_accum: accumulate dW1 and dW2 into the weights' ``.grad`` (eager only; as
            ``quack_cpp.linear``).
        tuned: autotune the GEMMs' tiles. concat_layout: weight1's halves (gated only).

    Returns:
        out (..., O) in the compute dtype; differentiable in x, the weights and the biases.

    Raises:
        ValueError: an unknown activation, x and the weights not all bfloat16 or all float16
            (after autocast), mismatched shapes (x's D against weight1's, H against weight2's),
            a tensor not on a CUDA device, or what the GEMMs reject (``gemm_act: ...`` /
            ``gemm_gated: ...`` / ``gemm: ...``). RuntimeError: a CUDA error.
    """
    name = activation_name(activation, "mlp")
    grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (x, weight1, weight2, bias1, bias2))
    preact, postact = _linear_act(x, weight1, name, bias1, grad, fuse_grad_accum, tuned,
                                  concat_layout, False)
    if preact is None:
        from .gemm_ops import linear
        return linear(postact, weight2, bias2, tuned=tuned)
    return act_linear(preact, weight2, postact, name, bias2, fuse_grad_accum=fuse_grad_accum,
                      tuned=tuned)
