"""GEMM for torch tensors on QuACK-C++'s Hopper kernel: op descriptions, functional API.

Layers (top to bottom):

- ``gemm``, ``gemm_add``, ``gemm_add_inplace``, ``linear``: the functional API;
- ``gemm_op`` (``torch.ops.quack_cpp.gemm``: functional, differentiable) and
  ``gemm_add_inplace_op`` (``torch.ops.quack_cpp.gemm_add_inplace``, ``mutates_args=("out",)``):
  registered from one description each by ``quack_cpp._registrar`` (custom op with its fake
  and autograd, and the eager fast path), so ``torch.compile(fullgraph=True)`` traces them
  without a graph break; ``linear_op``: a composite of them (``_registrar.register_function``);
- ``quack_cpp._C.gemm``: the C++ API (``include/quack/gemm.h``), called with data pointers,
  shapes, strides (in elements), alpha, beta and the current CUDA stream of the tensors' device.

What the kernel supports (dtypes, majors, alignment) is decided by the C++ ``can_implement``;
its ``ValueError`` (message starting with ``gemm: `` and naming ``a``, ``b``, ``c`` or ``d``, d
being the output) reaches the caller unchanged. Strides are passed through: a transposed view
is a column-major operand, never a copy. Outputs are allocated with torch's caching allocator
on A's device (row-major unless C or the operands' layouts call for column-major, see
``gemm_op``); launches go to ``torch.cuda.current_stream(A.device)``; nothing here synchronises
with the host, so every call can be captured in a CUDA graph.

Eager fast path (``quack_cpp._registrar``): in plain eager mode on CUDA tensors the ops run
their implementations directly (``gemm_op.Function`` when autograd records the call; the
in-place op bumps ``out``'s version counter as the custom op does); ``gemm``, ``gemm_add``,
``gemm_add_inplace`` and ``linear`` (forward and backward GEMMs) all go through them. Under
torch.compile, on fake, meta or CPU tensors, or with ``QUACK_EAGER_CUSTOM_OP=1`` (or
``quack_cpp.ops.FORCE_CUSTOM_OP = True``), the custom ops run. Where ``quack_cpp._torch`` is
built, gemm's unrecorded calls run in C++ (``Gemm.eager``), and so does ``linear``, forward and
backward, with a C++ autograd node (``Linear.eager``).

Method: QuACK 0.2.0's GEMM interface (``quack/gemm_interface.py``: gemm, gemm_add,
gemm_add_inplace; ``quack/linear.py``: LinearFunc with fused gradient accumulation) on a
CUTLASS 3.x-style sm90 warp-specialised TMA + WGMMA kernel (``src/gemm/sm90/``).
"""

import os
from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from . import _C
from . import _registrar as _reg
from . import _dtensor
from ._registrar import (DTYPE_CODE, FLOAT_DTYPES, dtype_name, register, register_function,
                         stream, tensor_arg)
from .ops import _torch_ext  # the C++ fast path (python/torch_ext.cpp), where built

_CPP_GEMM = os.environ.get("QUACK_CPP_EAGER_GEMM", "1") != "0"
_CPP_LINEAR = os.environ.get("QUACK_CPP_EAGER_LINEAR", "1") != "0"

__all__ = ["gemm", "gemm_add", "gemm_add_inplace", "linear", "linear_dtype", "weight_grad"]

_FLOAT_DTYPES = FLOAT_DTYPES
_INPUT_DTYPES = (torch.float16, torch.bfloat16)  # the kernels' A/B dtypes


def _shape(t: Tensor) -> str:
    return f"{tuple(t.shape)} {dtype_name(t.dtype)}"


def _out_shape(A: Tensor, B: Tensor) -> Tuple[int, ...]:
    """(M, N) or (L, M, N) of A @ B. Repeats the C++'s rank, L and K checks with its messages,
    so that fake tensors (torch.compile, meta) raise the same errors."""
    nd = A.dim()
    if nd not in (2, 3):
        raise ValueError(f"gemm: a has {nd} dimensions {_shape(A)}, expected 2 (M, K) or "
                         "3 (L, M, K)")
    if B.dim() != nd:
        raise ValueError(f"gemm: b has {B.dim()} dimensions {_shape(B)}, expected {nd} "
                         "like a")
    a, b = A.shape, B.shape  # indexed, not sliced (a torch.Size slice is a new Size)
    if b[-2] != a[-1] or (nd == 3 and b[0] != a[0]):
        want = (f"(K, N) = ({a[-1]}, *)" if nd == 2
                else f"(L, K, N) = ({a[0]}, {a[-1]}, *)")
        raise ValueError(f"gemm: b has shape {_shape(B)}, expected {want}")
    return (a[0], b[1]) if nd == 2 else (a[0], a[1], b[2])


def _strides(shape, dtype: torch.dtype, col: bool) -> Tuple[int, ...]:
    """Strides of a row-major (col=False) or column-major (M, N) / (L, M, N) matrix whose
    contiguous run (N, or M) is padded to 16 bytes (TMA's leading-stride rule)."""
    align = 16 // dtype.itemsize
    m, n = shape[-2], shape[-1]
    if col:
        ld = -(-m // align) * align
        return (1, ld) if len(shape) == 2 else (n * ld, 1, ld)
    ld = -(-n // align) * align
    return (ld, 1) if len(shape) == 2 else (m * ld, ld, 1)


def _new_matrix(shape, dtype: torch.dtype, like: Tensor, col: bool = False) -> Tensor:
    """An uninitialised matrix with _strides's layout on like's device (contiguous when the run
    needs no padding and col is False)."""
    return like.new_empty_strided(shape, _strides(shape, dtype, col), dtype=dtype)


def _row_major(shape, dtype: torch.dtype, like: Tensor) -> Tensor:
    return _new_matrix(shape, dtype, like, col=False)


def _is_col_major(t: Tensor) -> bool:
    """The C++'s reading of a layout (quack/gemm.h): row-major when the last dim (extent > 1)
    has stride 1, else column-major when the one before has; extents of 1 decide the rest."""
    rows, cols = t.shape[-2], t.shape[-1]
    s = t.stride()
    if cols > 1 and s[-1] == 1:
        return False
    if rows > 1 and s[-2] == 1:
        return True
    return cols != 1 and rows == 1


# Dummy addresses of A, B, C and D for can_implement: aligned, and 1 TiB apart, so the C++'s
# overlap checks (d against the inputs) see separate memory; C at D's address when C is D.
_META_PTR = {"a": 1 << 40, "b": 2 << 40, "c": 3 << 40, "d": 4 << 40}


def _meta(shape, strides, dtype: torch.dtype, ptr: int):
    code = DTYPE_CODE.get(dtype)
    return (ptr, -1 if code is None else code, tuple(int(v) for v in shape),
            tuple(int(v) for v in strides), 0)


@torch._dynamo.assume_constant_result
def _can_implement(a, b, c, d, beta: float) -> bool:
    # Pure in its tuple arguments: Dynamo evaluates it while tracing and keeps the answer.
    try:
        _C.gemm_can_implement(a, b, c, d, 1.0, beta)
    except ValueError:
        return False
    return True


def _layout_key(t: Optional[Tensor]):
    return None if t is None else (t.dtype, t.shape, t.stride())


# _accepts's answers by _can_implement (the function that answered: tests replace it), the
# (dtype, shape, strides) of A, B, C, D (or D's spec) and beta: a pure function of these (the
# pointer and device it passes are fixed dummies). Bounded: cleared when full (a new M every
# step, say).
_ACCEPTS = {}
_ACCEPTS_MAX = 1024


def _accepts(A: Tensor, B: Tensor, C: Optional[Tensor], D, beta: float = 0.0) -> bool:
    """Whether the C++ can_implement accepts these operands; D is a tensor or a (shape, dtype,
    col) spec of a _new_matrix. A host-only check on metadata (dummy aligned pointers apart,
    _META_PTR, device 0), so it also runs on fake tensors and while torch.compile traces. Cached in _ACCEPTS
    (~1 µs a hit against ~8 µs) except while Dynamo traces and for symbolic sizes."""
    if torch.compiler.is_compiling():
        return _accepts_uncached(A, B, C, D, beta)
    key = (_can_implement, _layout_key(A), _layout_key(B), _layout_key(C),
           _layout_key(D) if isinstance(D, Tensor) else D, beta)
    try:
        ok = _ACCEPTS.get(key)
    except TypeError:  # an unhashable SymInt (fake tensors with dynamic shapes)
        return _accepts_uncached(A, B, C, D, beta)
    if ok is None:
        ok = _accepts_uncached(A, B, C, D, beta)
        if len(_ACCEPTS) >= _ACCEPTS_MAX:
            _ACCEPTS.clear()
        _ACCEPTS[key] = ok
    return ok


def _accepts_uncached(A, B, C, D, beta):
    def of(t, name):
        return None if t is None else _meta(t.shape, t.stride(), t.dtype, _META_PTR[name])

    d = (of(D, "d") if isinstance(D, Tensor)
         else _meta(D[0], _strides(*D), D[1], _META_PTR["d"]))
    return _can_implement(of(A, "a"), of(B, "b"), of(C, "d" if C is D else "c"), d,
                          float(beta))


def _new_out(A: Tensor, B: Tensor, C: Optional[Tensor], beta: float,
             dtype: torch.dtype) -> Tensor:
    """D for gemm_op: C's layout when C is read (the C++ needs c and d alike); otherwise
    row-major, or column-major when only that is supported for A's and B's layouts (e.g. both
    column-major). Same result for real and fake tensors."""
    shape = _out_shape(A, B)
    if C is not None and beta != 0:
        col = _is_col_major(C)
    elif not _is_col_major(A) and _is_col_major(B):  # the usual case: no need to ask
        col = False
    else:
        col = (not _accepts(A, B, None, (shape, dtype, False))
               and _accepts(A, B, None, (shape, dtype, True)))
    return _new_matrix(shape, dtype, A, col)


# _gemm_impl's plans for calls that read no C, by _can_implement (as _ACCEPTS), the (dtype,
# shape, strides) of A and B, and the out dtype: the (dtype code, shape, strides) parts of the
# _C.gemm arguments of A, B and D (D's shape and strides as _new_out decides them). Real
# tensors only.
_PLANS = {}


def _new_out_and_args(A: Tensor, B: Tensor, C: Optional[Tensor], dtype: torch.dtype):
    """(D, (a, b, c, d)) for a call that reads no C: D as ``_new_out(A, B, None, 0.0, dtype)``
    and the _C.gemm tensor arguments as ``tensor_arg`` makes them, with all but pointers and
    devices cached per plan (the rank, K and L checks, majors, can_implement queries and
    metadata reads run once per key; ~2 µs a hit against 5-8 µs). A miss runs the uncached
    code, so errors come in the same order."""
    key = (_can_implement, A.dtype, A.shape, A.stride(), B.dtype, B.shape, B.stride(), dtype)
    plan = _PLANS.get(key)
    if plan is None:
        D = _new_out(A, B, None, 0.0, dtype)
        args = (tensor_arg(A, "gemm", "a"), tensor_arg(B, "gemm", "b"),
                tensor_arg(C, "gemm", "c"), tensor_arg(D, "gemm", "d"))
        if len(_PLANS) >= _ACCEPTS_MAX:
            _PLANS.clear()
        _PLANS[key] = (args[0][1:4], args[1][1:4], args[3][1:4])
        return D, args
    a, b, d = plan
    D = A.new_empty_strided(d[1], d[2], dtype=dtype)
    dev = A.get_device() if A.is_cuda else -1  # D's too
    return D, ((A.data_ptr(),) + a + (dev,),
               (B.data_ptr(),) + b + (B.get_device() if B.is_cuda else -1,),
               tensor_arg(C, "gemm", "c"), (D.data_ptr(),) + d + (dev,))


def _as_operand(t: Tensor) -> Tensor:
    """t itself when it is a row-major TMA operand (stride 1 along the last dim, leading and
    batch strides multiples of 16 bytes, 16-byte aligned offset), else a row-major copy. For
    tensors this layer receives from autograd (stride-0 or sliced gradients). The offset is
    not checked while Dynamo traces (it cannot read it); the tensors there are fresh."""
    align = 16 // t.dtype.itemsize
    sh, s = t.shape, t.stride()  # each t.shape builds a torch.Size: read once
    ok = sh[-1] <= 1 or s[-1] == 1
    if not torch.compiler.is_compiling():
        ok = ok and t.storage_offset() % align == 0
    ok = ok and (sh[-2] <= 1 or (s[-2] % align == 0 and s[-2] >= sh[-1]))
    if len(sh) == 3 and sh[0] > 1:
        ok = ok and s[0] % align == 0 and s[0] > 0
    if ok:
        return t
    out = _row_major(tuple(t.shape), t.dtype, t)
    out.copy_(t)
    return out


def _tma_ok(t: Tensor) -> bool:
    """Whether TMA can address t as a GEMM operand as far as its metadata tells: 16-byte aligned
    data and every stride other than 1 a multiple of 16 bytes (conservative: a stride along an
    extent of 1 counts too; the C++ has the last word)."""
    align = 16 // t.element_size()
    if t.data_ptr() % 16:
        return False
    for s in t.stride():
        if s != 1 and s % align:
            return False
    return True


def _launch(A: Tensor, B: Tensor, C: Optional[Tensor], D: Tensor, alpha: float,
            beta: float, tuned: bool = False, alpha_t: Optional[Tensor] = None,
            beta_t: Optional[Tensor] = None, args=None, bias: Optional[Tensor] = None,
            colvec_bias: Optional[Tensor] = None, dynamic_scheduler: bool = False) -> None:
    # args: the four tensor arguments when already made (_new_out_and_args). bias and
    # colvec_bias: quack::GemmBias's row and col vectors. dynamic_scheduler: the stream's tile
    # counter (_tile_counter) as GemmArgs::tile_counter.
    fn = "gemm"
    a, b, c, d = args or (tensor_arg(A, fn, "a"), tensor_arg(B, fn, "b"),
                          tensor_arg(C, fn, "c"), tensor_arg(D, fn, "d"))
    bias_row = tensor_arg(bias, fn, "bias.row") if bias is not None else None
    bias_col = tensor_arg(colvec_bias, fn, "colvec_bias") if colvec_bias is not None else None
    # A or B that TMA cannot address (K or N not a multiple of 8 in memory, an odd offset): the
    # C++ copies it into a workspace with padded rows; allocated here with torch's caching
    # allocator on D's stream (kept alive by the stream-ordered allocator until the kernel ran).
    ws, ws_bytes = None, 0
    if not (_tma_ok(A) and _tma_ok(B)):
        ws_bytes = _C.gemm_workspace_size(a, b, c, d, float(alpha), float(beta), bias_row,
                                          bias_col)
        if ws_bytes:
            ws = torch.empty(ws_bytes, dtype=torch.uint8, device=D.device)
    s = stream(D)
    counter, (sk_ptr, sk_bytes) = _schedule(D, dynamic_scheduler, s)
    _C.gemm(a, b, c, d, float(alpha), float(beta), s, bool(tuned),
            alpha_t.data_ptr() if alpha_t is not None else 0,
            beta_t.data_ptr() if beta_t is not None else 0,
            ws.data_ptr() if ws is not None else 0, ws_bytes, bias_row, bias_col, sk_ptr,
            sk_bytes, counter)


def _schedule(D: Tensor, dynamic_scheduler: bool,
              s: Optional[int] = None) -> Tuple[int, Tuple[int, int]]:
    """(tile counter pointer, stream-K workspace (pointer, bytes)) of a launch writing D on the
    stream s (default: D's current stream): on the dynamic scheduler the stream's counter and
    no stream-K workspace (the scheduler asked for schedules every tile; the C++ would drop the
    counter where stream-K runs), else no counter and the stream's workspace."""
    s = stream(D) if s is None else s
    if not dynamic_scheduler:
        return 0, _streamk_workspace(D, s)
    counter = _tile_counter(D, s)
    return (counter.data_ptr() if counter is not None else 0), (0, 0)


# Tile counters of the dynamic scheduler (GemmArgs::tile_counter; QuACK's tile_count_semaphore),
# one per (device, stream): zeroed once when made (every completed launch leaves it at 0: the
# C++ wraps its atomicInc at the tile count), kept for the process. Inside a CUDA-graph capture
# every call gets a fresh zeroed counter instead (the zeroing is captured with the launch, so
# each replay starts from 0): a replay, which runs on whatever stream replays it, must not share
# a counter with launches that may overlap it.
_TILE_COUNTERS = {}


def _tile_counter(D: Tensor, s: int) -> Optional[Tensor]:
    """The tile counter of D's device and stream s (a one-element int32 tensor: the C++ reads
    it as uint32), or None for a host D (CPU stand-ins: the C++ rejects it with its message)."""
    if not D.is_cuda:
        return None
    with torch.cuda.device(D.device):  # the capture state of D's device's current stream
        if torch.cuda.is_current_stream_capturing():
            return torch.zeros(1, dtype=torch.int32, device=D.device)
    key = (D.get_device(), s)
    t = _TILE_COUNTERS.get(key)
    if t is None:
        t = _TILE_COUNTERS.setdefault(key, torch.zeros(1, dtype=torch.int32, device=D.device))
    return t


# Stream-K workspaces (GemmArgs::streamk_workspace), one per (device, stream): zeroed once when
# made (every launch leaves its flags zero again), kept for the process (one flag and one fp32
# tile per SM: ~17 MB on an H200). Passed by default, so the C++ rule (src/gemm/streamk.h) turns
# stream-K on where it pays; the C++ reads QUACK_GEMM_STREAMK at every call (0: off, 1: forced
# on every cooperative tile), and with 0 no workspace is made here. Not made during CUDA-graph
# capture: a stream first seen inside a capture runs without stream-K (a warm-up call before
# the capture makes its workspace).
_STREAMK_WS = {}


def _streamk_workspace(D: Tensor, s: Optional[int] = None) -> Tuple[int, int]:
    """(pointer, bytes) of the stream-K workspace of D's device and the stream s (default:
    stream(D), D's current stream)."""
    # A host D (CPU stand-ins, or bad input the C++ rejects with its own message) gets none.
    if not D.is_cuda:
        return 0, 0
    key = (D.get_device(), stream(D) if s is None else s)
    ws = _STREAMK_WS.get(key)
    if ws is None:
        if os.environ.get("QUACK_GEMM_STREAMK") == "0" or torch.cuda.is_current_stream_capturing():
            return 0, 0
        nbytes = _C.gemm_streamk_workspace_size(D.device.index)
        # setdefault: two threads' first calls on one stream share the first one stored (the
        # C++ path keeps the pointer it is given for the process).
        ws = _STREAMK_WS.setdefault(key, torch.zeros(nbytes, dtype=torch.uint8, device=D.device))
    return ws.data_ptr(), ws.numel()


if _torch_ext is not None and hasattr(_torch_ext, "_gemm_set_streamk"):
    _torch_ext._gemm_set_streamk(_streamk_workspace)  # one owner of the workspaces


def _scalar(fn: str, name: str, v, A: Tensor) -> Tuple[float, Optional[Tensor]]:
    """alpha / beta as (host value, device scalar or None). A tensor must be one fp32 element on
    A's device; it is read by the kernel when it runs (CUDA-graph replays see its current
    value), and its host placeholder is 1.0 (so C counts as read for the layout choice)."""
    if not isinstance(v, Tensor):
        return float(v), None
    _check_device_scalar(fn, name, v, A, "a Python float")
    return 1.0, v


def _check_device_scalar(fn: str, name: str, v: Optional[Tensor], A: Tensor,
                         other: str = "None") -> None:
    """Raises ValueError unless v is None or one float32 element on A's device: the kernel reads
    4 bytes through v's pointer on A's device (a CPU tensor would hand it a host pointer, a
    bf16 one a 2-byte buffer). other: what else the argument may be, for the message."""
    if v is None:
        return
    if v.dtype != torch.float32 or v.numel() != 1 or v.device != A.device:
        raise ValueError(f"{fn}: {name} is a tensor of shape {tuple(v.shape)} "
                         f"{dtype_name(v.dtype)} on {v.device}, expected one float32 element "
                         f"on {A.device} (or {other})")


def _check_device_scalars(fn: str, A: Tensor, alpha_t: Optional[Tensor],
                          beta_t: Optional[Tensor]) -> None:
    # The custom ops' own check (impl and fake): torch.ops.quack_cpp.gemm / gemm_add_inplace
    # called directly skip the functional API's _scalar.
    if alpha_t is not None or beta_t is not None:
        _check_device_scalar(fn, "alpha_t", alpha_t, A)
        _check_device_scalar(fn, "beta_t", beta_t, A)


# --------------------------------------------------------------------------------------------
# Ops
# --------------------------------------------------------------------------------------------


def check_colvec_bias(fn: str, colvec_bias: Optional[Tensor], A: Tensor) -> None:
    """Raises unless colvec_bias is None or a column bias the C++ takes (quack::GemmBias::col,
    include/quack/gemm.h) for the product of A (M, K) or (L, M, K) (its rank checked before):
    a tensor (TypeError otherwise) of shape (M,), or (L, M) when A is 3-D, dtype
    float32, float16 or bfloat16, on A's device, with stride 1 along M (where M > 1); any
    batch stride (0: one vector shared by the batches). ValueError naming ``fn``,
    ``colvec_bias``, what came and what was expected. Metadata only: runs on fake tensors too
    (the ops' fake kernels call it), before any launch, so the message names the Python
    argument rather than the C++'s ``bias.col``."""
    if colvec_bias is None:
        return
    t = colvec_bias
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: colvec_bias is {type(t).__name__}, expected a torch.Tensor or "
                        "None")
    batched = A.dim() == 3
    M, L = A.shape[-2], (A.shape[0] if batched else None)
    want = f"(M,) or (L, M) = ({M},) or ({L}, {M})" if batched else f"(M,) = ({M},)"
    nd = t.dim()
    if nd != 1 and not (nd == 2 and batched):
        raise ValueError(f"{fn}: colvec_bias has {nd} dimensions {_shape(t)}, expected {want}")
    sh = t.shape
    if sh[-1] != M or (nd == 2 and sh[0] != L):
        raise ValueError(f"{fn}: colvec_bias has shape {_shape(t)}, expected {want}")
    if t.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"{fn}: colvec_bias has dtype {dtype_name(t.dtype)}, expected float32, "
                         "float16 or bfloat16")
    if t.device != A.device:
        raise ValueError(f"{fn}: colvec_bias is on {t.device}, expected A's device {A.device}")
    if M > 1 and t.stride(-1) != 1:
        raise ValueError(f"{fn}: colvec_bias has stride {t.stride(-1)} along M "
                         f"{_shape(t)}, expected a contiguous vector (stride 1)")


def _gemm_impl(A, B, C, alpha, beta, out_dtype, tuned=False, alpha_t=None, beta_t=None,
               bias=None, colvec_bias=None, dynamic_scheduler=False):
    """gemm_op's implementation: D allocated by ``_new_out`` (through ``_new_out_and_args``'s
    plan cache when C is not read), then ``_C.gemm``."""
    _check_device_scalars("gemm", A, alpha_t, beta_t)
    if colvec_bias is not None:
        _out_shape(A, B)  # the rank, K and L errors first, as without it
        check_colvec_bias("gemm", colvec_bias, A)
    beta = beta if C is not None else 0.0
    beta_t = beta_t if C is not None else None
    beta_d = 1.0 if beta_t is not None else beta  # what _new_out sees
    if C is None or beta_d == 0:  # the usual case: planned once per layout
        D, args = _new_out_and_args(A, B, C, out_dtype)
    else:  # D in C's layout
        D, args = _new_out(A, B, C, beta_d, out_dtype), None
    _launch(A, B, C, D, alpha, beta, tuned, alpha_t, beta_t, args, bias, colvec_bias,
            dynamic_scheduler)
    return D


def _bias_grad(g: Tensor, bias: Tensor) -> Tensor:
    """The gradient of a row bias (N,) or (L, N) added to every row of D (M, N) / (L, M, N): the
    column sums of dD over M (and L for a (N,) bias shared by the batches), in fp32, cast to the
    bias's dtype. torch's reduction: deterministic, one read of dD."""
    if bias.dim() == 1:
        return _rows(g, g.shape[-1]).sum(0, dtype=torch.float32).to(bias.dtype)  # N = 0 too
    return g.sum(-2, dtype=torch.float32).to(bias.dtype)


def _colvec_bias_grad(g: Tensor, colvec_bias: Tensor) -> Tensor:
    """The gradient of a column bias (M,) or (L, M) added to every column of D (M, N) /
    (L, M, N): the row sums of dD over N (and over L for a (M,) bias shared by the batches), in
    fp32, cast to the bias's dtype. torch's reduction: deterministic, one read of dD (N = 0:
    zeros)."""
    s = g.sum(-1, dtype=torch.float32)  # (M,) or (L, M)
    if colvec_bias.dim() == 1 and s.dim() == 2:
        s = s.sum(0)
    return s.to(colvec_bias.dtype)


class Gemm:
    name = "quack_cpp::gemm"
    sharding = _dtensor.GEMM  # DTensor placements (quack_cpp._dtensor)

    def signature(A: Tensor, B: Tensor, C: Optional[Tensor], alpha: float, beta: float,
                  out_dtype: torch.dtype, tuned: bool = False, alpha_t: Optional[Tensor] = None,
                  beta_t: Optional[Tensor] = None, bias: Optional[Tensor] = None,
                  colvec_bias: Optional[Tensor] = None,
                  dynamic_scheduler: bool = False) -> Tensor:
        """D = alpha * A @ B + beta * C (+ bias) (+ colvec_bias) as a functional custom op
        (``torch.ops.quack_cpp.gemm``): D[l, m, n] += bias[l, n] + colvec_bias[l, m].

        Args:
            A: (M, K) or (L, M, K), bfloat16/float16, CUDA; any strides the C++ accepts.
            B: (K, N) or (L, K, N), A's dtype.
            C: (M, N) or (L, M, N) in out_dtype, or None (then beta is ignored).
            alpha, beta: fp32 scalars. beta = 0: C is never read.
            out_dtype: A's dtype or float32.
            alpha_t, beta_t: optional one-element fp32 tensors on A's device that replace alpha /
                beta, read by the kernel (device scalars; a device beta of 0 reads no C).
            tuned: autotune the tile configuration on first use per shape class (quack::GemmArgs::
                tuned: timed on a scratch output, cached on disk; never during graph capture).
            bias: (N,) or (L, N) added to every row (quack::GemmBias::row), fp32 or 16-bit,
                contiguous; compiled for bf16 and fp16 A, B and D (D of A's dtype) with A
                row-major and B column-major (x @ W.T + b).
                Its gradient is the column sum of dD (``_bias_grad``).
            colvec_bias: (M,) or (L, M) added to every column (quack::GemmBias::col; QuACK's
                colvec_bias), fp32 or 16-bit, stride 1 along M, on A's device; checked here
                (``check_colvec_bias``, also in the fake); compiled as bias (the same
                epilogue). Its gradient is the row sum of dD (``_colvec_bias_grad``).
            dynamic_scheduler: persistent clusters take output tiles from a counter
                (quack::GemmArgs::tile_counter, the stream's ``_tile_counter``) instead of the
                static schedule, with stream-K off; the same result bit for bit (each tile's
                arithmetic is the same). The cluster-less 128x64 tile ignores it.

        Returns:
            D, same rank as A. Layout: C's (row- or column-major) when C is read; else row-major,
            or column-major when the C++ supports only that for A's and B's layouts (A and B both
            column-major). The contiguous run is padded to 16 bytes (row-major D is contiguous
            unless N * itemsize % 16 != 0).

        Raises:
            ValueError: mismatched ranks/L/K, alpha_t / beta_t not one float32 element on
                A's device, or a colvec_bias of another shape, dtype, device or stride (this
                layer, also in the fake: torch.compile raises too), or anything the C++
                ``can_implement`` rejects (its message). RuntimeError: a CUDA error.
        """

    impl = _gemm_impl

    # The C++ fast path (python/torch_ext.cpp, gemm) for the calls autograd does not record
    # (inference calls, the GEMMs of Linear's Python Function); QUACK_CPP_EAGER_GEMM=0 (or
    # QUACK_CPP_EAGER=0, every op's) keeps the Python fast path for them.
    eager = _torch_ext.gemm if _torch_ext is not None and _CPP_GEMM else None

    def fake(A, B, C, alpha, beta, out_dtype, tuned=False, alpha_t=None, beta_t=None, bias=None,
             colvec_bias=None, dynamic_scheduler=False):
        _check_device_scalars("gemm", A, alpha_t, beta_t)
        beta = 1.0 if (beta_t is not None and C is not None) else beta
        D = _new_out(A, B, C, beta if C is not None else 0.0, out_dtype)
        check_colvec_bias("gemm", colvec_bias, A)
        return D

    def setup_context(ctx, inputs, output):
        A, B, C, alpha, beta, out_dtype, tuned, alpha_t, beta_t, bias, colvec_bias, _ = inputs
        need_a, need_b = ctx.needs_input_grad[:2]
        ctx.alpha, ctx.beta = alpha, beta
        ctx.a_dtype, ctx.b_dtype = A.dtype, B.dtype
        ctx.c_dtype = C.dtype if C is not None else None
        ctx.save_for_backward(
            A if need_b else None, B if need_a else None, alpha_t, beta_t,
            bias if bias is not None and ctx.needs_input_grad[9] else None,
            colvec_bias if colvec_bias is not None and ctx.needs_input_grad[10] else None)

    def backward(ctx, dD):
        """dA = alpha * dD @ B^T, dB = alpha * A^T @ dD (our gemm: the fast path in eager
        mode, the custom op under torch.compile; outputs in A's / B's dtype; dD cast to A's
        dtype and made a row-major operand), dC = beta * dD, dbias = the column sums of dD,
        dcolvec_bias = its row sums (fp32, in each bias's dtype). Device scalars pass on to the
        backward GEMMs (alpha) or multiply dD (beta); they get no gradient themselves."""
        A, B, alpha_t, beta_t, bias, colvec_bias = ctx.saved_tensors
        need_a, need_b, need_c = ctx.needs_input_grad[:3]
        dA = dB = dC = None
        dbias = _bias_grad(dD, bias) if bias is not None else None
        dcol = _colvec_bias_grad(dD, colvec_bias) if colvec_bias is not None else None
        if need_c:
            if beta_t is not None:
                dC = (dD * beta_t.reshape(())).to(ctx.c_dtype)
            else:
                dC = (dD if ctx.beta == 1.0 else dD * ctx.beta).to(ctx.c_dtype)
        if need_a or need_b:
            g = _as_operand(dD.to(ctx.a_dtype))
            if need_a:
                dA = gemm_op(g, B.mT, None, ctx.alpha, 0.0, ctx.a_dtype, False, alpha_t, None)
            if need_b:
                dB = gemm_op(A.mT, g, None, ctx.alpha, 0.0, ctx.b_dtype, False, alpha_t, None)
        return dA, dB, dC, None, None, None, None, None, None, dbias, dcol, None


class GemmAddInplace:
    name = "quack_cpp::gemm_add_inplace"
    mutates_args = ("out",)

    def signature(A: Tensor, B: Tensor, out: Tensor, alpha: float, beta: float,
                  tuned: bool = False, alpha_t: Optional[Tensor] = None,
                  beta_t: Optional[Tensor] = None, dynamic_scheduler: bool = False) -> None:
        """out = alpha * A @ B + beta * out, in place (``torch.ops.quack_cpp.gemm_add_inplace``).
        C = D = out in the C++ call (tile-local read then write). Shapes and dtypes as
        ``gemm_op`` with out as C and D; dynamic_scheduler as ``gemm_op``'s. Not
        differentiable. Raises as ``gemm_op``."""

    def impl(A, B, out, alpha, beta, tuned=False, alpha_t=None, beta_t=None,
             dynamic_scheduler=False):
        _check_device_scalars("gemm_add_inplace", A, alpha_t, beta_t)
        _out_shape(A, B)
        _launch(A, B, out, out, alpha, beta, tuned, alpha_t, beta_t,
                dynamic_scheduler=dynamic_scheduler)

    def fake(A, B, out, alpha, beta, tuned=False, alpha_t=None, beta_t=None,
             dynamic_scheduler=False):
        _check_device_scalars("gemm_add_inplace", A, alpha_t, beta_t)
        _out_shape(A, B)


gemm_op = register(Gemm)
gemm_add_inplace_op = register(GemmAddInplace)

# --------------------------------------------------------------------------------------------
# Functional API
# --------------------------------------------------------------------------------------------


def _check(fn: str, **tensors) -> None:
    # Runs on the custom-op path only: route's fast path implies it (plain CUDA tensors).
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}: {name} is {type(t).__name__}, expected a torch.Tensor")
        if t.device.type not in _reg.DEVICE_TYPES:
            raise ValueError(f"{fn}: {name} is on {t.device}, expected a CUDA tensor")


def _out_dtype(fn: str, out_dtype: Optional[torch.dtype], A: Tensor) -> torch.dtype:
    if out_dtype is None:
        return A.dtype
    if out_dtype not in _FLOAT_DTYPES:
        raise ValueError(f"{fn}: out_dtype is {out_dtype}, expected float32, float16 or "
                         "bfloat16")
    return out_dtype


def gemm(A: Tensor, B: Tensor, out_dtype: Optional[torch.dtype] = None,
         alpha: Union[float, Tensor] = 1.0, tuned: bool = False,
         bias: Optional[Tensor] = None, *, colvec_bias: Optional[Tensor] = None,
         dynamic_scheduler: bool = False) -> Tensor:
    """Matrix product ``D = alpha * A @ B (+ bias) (+ colvec_bias)`` (batched over L),
    differentiable::

        D[l, m, n] = alpha * sum_k A[l, m, k] * B[l, k, n] + bias[l, n] + colvec_bias[l, m]

    (a (N,) bias or (M,) colvec_bias is the same for every l; 2-D: drop l).

    Products and sums in fp32 (WGMMA accumulators), one rounding to out_dtype. Backward (our
    gemm too): ``dA = alpha * dD @ B^T``, ``dB = alpha * A^T @ dD``, dD cast to A's dtype;
    ``dbias`` the column sums of dD, ``dcolvec_bias`` its row sums.

    Args:
        A: (M, K) or (L, M, K), bfloat16 or float16, CUDA. Any major (row-major, or a transposed
            view: column-major), passed through with its strides.
        B: (K, N) or (L, K, N), A's dtype; any major (``W.T`` of a row-major (N, K) weight is
            the column-major fast path).
        out_dtype: bfloat16, float16 or float32 (default: A's dtype; the C++ accepts A's dtype
            or float32).
        alpha: Python float (an int is converted), or a device scalar: a one-element float32
            tensor on A's device, read by the kernel when it runs (so a captured CUDA graph
            uses its value at replay time; QuACK's alpha pointer mode). No gradient flows to a
            tensor alpha; the backward GEMMs use it too.
        tuned: QuACK's ``tuned=True``: the forward GEMM picks the fastest compiled tile
            configuration (the default one unless another is > 1 % faster), timed on the first call per (M, N, K rounded up to powers of two,
            dtypes, layouts) on a scratch output and cached on disk (QUACK_CACHE_DIR); never
            timed during CUDA-graph capture. The backward GEMMs use the default. Default False
            (QuACK 0.2.0 defaults to True): the tile rule picks without a timing pass (the GPU
            test Gemm.TunedCallsAreCorrectAndCached covers tuned calls). Unlike QuACK's,
            tuning never runs candidates on the real output, so an in-place call accumulates
            once (QuACK reference §16 hazard).
        bias: None, or the row vector (N,) / (L, N) added to every row of D in the epilogue
            (QuACK's ``bias``, its rowvec_bias; quack::GemmBias::row), fp32 or A's dtype,
            contiguous, on A's device; added in fp32 before the rounding. Compiled for bf16 and
            fp16 A, B and D (out_dtype = A's dtype; a float32 D with a bias raises ValueError),
            A row-major and B column-major (``x @ W.T + b``, D row-major; column-major D too);
            other layouts raise ValueError. Its gradient is the column sum of dD (fp32, cast to
            bias's dtype; torch's deterministic reduction), over the batches too for a (N,)
            bias.
        colvec_bias: keyword-only; None, or the column vector (M,) / (L, M) added to every
            column of D (QuACK's ``colvec_bias``; quack::GemmBias::col): D[.., m, :] +=
            colvec_bias[.., m]. float32, bfloat16 or float16 (fp32 or the output dtype are the
            usual ones), stride 1 along M (an (L, M) tensor may have any batch stride, 0
            included), on A's device; added in fp32 before the rounding, with or without a row
            bias. Compiled as bias: the same epilogue, dtypes and layouts (out_dtype = A's
            dtype, A row-major, B column-major). Its gradient is the row sum of dD (fp32, cast
            to colvec_bias's dtype), over the batches too for a (M,) vector.
        dynamic_scheduler: keyword-only (QuACK's ``dynamic_scheduler``, default False as
            there): the persistent clusters take output tiles from a per-stream counter
            (atomicInc; quack::GemmArgs::tile_counter) instead of the static schedule (stream-K
            off for the call), the same result bit for bit. The forward GEMM only (the backward
            GEMMs use the static schedule); the cluster-less 128x64 tile ignores it. CUDA graphs
            (a counter per captured call) and torch.compile take it.

    Returns:
        D (M, N) or (L, M, N) in out_dtype on A's device; row-major with the row stride N
        rounded up to 16 bytes (contiguous unless N * itemsize % 16 != 0), except where the C++
        supports only a column-major D for A's and B's layouts (A and B both column-major):
        then column-major, the same padding along M. M = 0 or N = 0: an empty D, nothing
        launched. K = 0 (A @ B is zero): D = the biases broadcast (bias over the rows,
        colvec_bias over the columns) where given, else zeros (a fill kernel, no GEMM).

    Raises:
        ValueError: a tensor not on a CUDA device, ranks other than 2/2 or 3/3, mismatched K or
            L, a bad out_dtype, a colvec_bias that is not (M,) / (L, M) (L only with 3-D A),
            not float32 / float16 / bfloat16, not on A's device or not of stride 1 along M
            (this layer, before any launch; the message names ``colvec_bias``, e.g. ``gemm:
            colvec_bias has shape (64,) float32, expected (M,) = (200,)``); anything
            ``quack::can_implement`` rejects (dtypes,
            layouts not yet supported), with the C++ message, e.g. ``gemm: b has shape (65, 64)
            bfloat16, expected (K, N) = (64, *)``. Any alignment works: operands whose leading
            strides are not multiples of 16 bytes (K = 63) are copied into padded rows first.
        TypeError: colvec_bias not a tensor or None. RuntimeError: a CUDA error.

    Source: QuACK 0.2.0 ``gemm_interface.gemm``; kernel after CUTLASS 3.x sm90 TMA + WGMMA.
    """
    if colvec_bias is not None or dynamic_scheduler:
        return _gemm_keywords(A, B, out_dtype, alpha, tuned, bias, colvec_bias,
                              bool(dynamic_scheduler))
    path = _reg.route(A, B, bias)
    if path == _reg.CUSTOM:
        _check("gemm", A=A, B=B)
        if bias is not None:
            _check("gemm", bias=bias)
    a, a_t = _scalar("gemm", "alpha", alpha, A)
    if a_t is not None:
        path = _reg.route(A, B, a_t, bias)
    if bias is None:
        return gemm_op.run(path, A, B, None, a, 0.0, _out_dtype("gemm", out_dtype, A),
                           bool(tuned), a_t, None)
    return gemm_op.run(path, A, B, None, a, 0.0, _out_dtype("gemm", out_dtype, A), bool(tuned),
                       a_t, None, bias)


def _gemm_keywords(A, B, out_dtype, alpha, tuned, bias, colvec_bias,
                   dynamic_scheduler=False) -> Tensor:
    """``gemm`` with a column bias or the dynamic scheduler (kept apart so the usual call pays
    nothing for them): the colvec_bias checks (``check_colvec_bias``) before the op runs, then
    gemm_op."""
    if colvec_bias is not None and not isinstance(colvec_bias, Tensor):
        check_colvec_bias("gemm", colvec_bias, A)  # the TypeError
    path = _reg.route(A, B, bias, colvec_bias)
    if path == _reg.CUSTOM:
        _check("gemm", A=A, B=B)
        if colvec_bias is not None:
            _check("gemm", colvec_bias=colvec_bias)
        if bias is not None:
            _check("gemm", bias=bias)
    _out_shape(A, B)  # the rank, K and L errors first
    check_colvec_bias("gemm", colvec_bias, A)
    a, a_t = _scalar("gemm", "alpha", alpha, A)
    if a_t is not None:
        path = _reg.route(A, B, a_t, bias, colvec_bias)
    return gemm_op.run(path, A, B, None, a, 0.0, _out_dtype("gemm", out_dtype, A), bool(tuned),
                       a_t, None, bias, colvec_bias, dynamic_scheduler)


def gemm_add(A: Tensor, B: Tensor, C: Tensor, alpha: Union[float, Tensor] = 1.0,
             beta: Union[float, Tensor] = 1.0, out_dtype: Optional[torch.dtype] = None,
             tuned: bool = False, *, dynamic_scheduler: bool = False) -> Tensor:
    """``D = alpha * A @ B + beta * C`` (batched over L), differentiable (dC = beta * dD).

    With beta = 0, C is never read: NaN or Inf in C does not reach D (BLAS rule).

    Args:
        A, B, out_dtype, alpha, tuned, dynamic_scheduler: as ``gemm``.
        C: (M, N) or (L, M, N), CUDA, in out_dtype (or float32 with bfloat16 A, B and D, and
            with float16 ones in the wgrad's layout (A column-major, B row-major): an fp32
            residual added into a 16-bit result, rounded once); row- or column-major with a
            16-byte-multiple leading stride.
        beta: Python float, or a device scalar as ``gemm``'s alpha (a device beta of 0 reads no
            C; with a tensor beta, D takes C's layout).

    Returns:
        D as ``gemm``, but in C's layout (row- or column-major) when beta != 0: the C++ needs
        C and D alike.

    Raises:
        As ``gemm``; C's shape, dtype, device and layout are checked by the C++.

    Source: QuACK 0.2.0 ``gemm_interface.gemm_add``.
    """
    if not isinstance(C, Tensor):  # gemm_op takes C = None as "no C": gemm_add must not
        raise TypeError(f"gemm_add: C is {type(C).__name__}, expected a Tensor")
    if _reg.route(A, B, C) == _reg.CUSTOM:
        _check("gemm_add", A=A, B=B, C=C)
    a, a_t = _scalar("gemm_add", "alpha", alpha, A)
    b, b_t = _scalar("gemm_add", "beta", beta, A)
    return gemm_op(A, B, C, a, b, _out_dtype("gemm_add", out_dtype, A), bool(tuned), a_t, b_t,
                   None, None, bool(dynamic_scheduler))


def gemm_add_inplace(A: Tensor, B: Tensor, out: Tensor, alpha: Union[float, Tensor] = 1.0,
                     beta: Union[float, Tensor] = 1.0, tuned: bool = False, *,
                     dynamic_scheduler: bool = False) -> None:
    """``out = alpha * A @ B + beta * out``, in place (C = D = out; each tile reads out then
    writes it). Not differentiable (out must not require grad). Returns None, like QuACK.

    Args:
        A, B, alpha, tuned, dynamic_scheduler: as ``gemm`` (tuning times a scratch output: out
            is written once).
        out: (M, N) or (L, M, N), CUDA, A's dtype or float32 (float32 accumulates bf16/fp16
            products into fp32, e.g. a weight gradient); layout decided by the C++.
        beta: Python float, or a device scalar as ``gemm``'s alpha; beta = 0 overwrites out
            without reading it.

    Raises:
        As ``gemm``.

    Source: QuACK 0.2.0 ``gemm_interface.gemm_add_inplace`` (used for fused gradient
    accumulation).
    """
    if _reg.route(A, B, out) == _reg.CUSTOM:
        _check("gemm_add_inplace", A=A, B=B, out=out)
    a, a_t = _scalar("gemm_add_inplace", "alpha", alpha, A)
    b, b_t = _scalar("gemm_add_inplace", "beta", beta, A)
    gemm_add_inplace_op(A, B, out, a, b, bool(tuned), a_t, b_t, bool(dynamic_scheduler))



# --------------------------------------------------------------------------------------------
# Linear (y = x @ W^T) with fused weight-gradient accumulation
# --------------------------------------------------------------------------------------------


def linear_dtype(x: Tensor, weight: Tensor) -> Optional[torch.dtype]:
    """The dtype ``linear`` computes in for these inputs, or None when the kernels do not apply:
    the autocast dtype when autocast is on for x's device type, else x's dtype, which must
    equal weight's; it must be bfloat16 or float16."""
    return _linear_dtype(x, weight, x.device.type)


def _linear_dtype(x: Tensor, weight: Tensor, dev: str) -> Optional[torch.dtype]:
    # linear_dtype, given dev = x.device.type (a caller that has it: nn.Linear)
    if dev in ("cuda", "cpu") and torch.is_autocast_enabled(dev):
        dtype = torch.get_autocast_dtype(dev)
    elif x.dtype == weight.dtype:
        dtype = x.dtype
    else:
        return None
    return dtype if dtype in _INPUT_DTYPES else None


def _cast(t: Tensor, dtype: torch.dtype) -> Tensor:
    # t.to(dtype), which is t itself when the dtype matches, without that call (~1 µs).
    return t if t.dtype == dtype else t.to(dtype)


def _rows(t: Tensor, k: int) -> Tensor:
    # t (..., k) as (M, k), M the product of the leading dims (1 for a 1-D t); a 2-D t is
    # returned itself (reshape's same-shape view of it, ~1 µs). k = 0 (in_features = 0, or a
    # gradient with out_features = 0) names M itself: reshape(-1, 0) raises (-1 is ambiguous).
    if t.dim() == 2:
        return t
    if k:
        return t.reshape(-1, k)
    m = 1
    for s in t.shape[:-1]:
        m *= s
    return t.reshape(m, 0)


def weight_grad(g: Tensor, x2: Tensor, weight: Optional[Tensor], dtype: torch.dtype,
                fuse: bool, path: Optional[int] = None,
                weight_dtype: Optional[torch.dtype] = None) -> Tensor:
    """The wgrad of y = x2 @ W^T for the output gradient g (M, N) and x2 (M, K): dW = g^T @ x2,
    produced in weight's dtype where the C++ has that instance (else in ``dtype``, then cast).
    fuse: accumulate into an existing ``weight.grad`` in place (gemm_add_inplace, beta = 1) and
    hand it to autograd with ``weight.grad`` cleared (QuACK's fuse_grad_accum; eager only).
    path: ``_registrar.EAGER`` when the caller's ``route`` over tensors including g and x2 gave
    it (the GEMM then runs without routing again); None: the GEMM routes its own call.
    weight may be None where fuse is False, with weight_dtype its dtype."""
    a, b, wdt = g.mT, x2, weight.dtype if weight is not None else weight_dtype
    grad = weight.grad if fuse else None
    if grad is not None and _accepts(a, b, grad, grad, 1.0):
        gemm_add_inplace_op(a, b, grad, 1.0, 1.0, False, None, None)
        weight.grad = None  # autograd's AccumulateGrad then takes grad as it is
        return grad
    # e.g. an fp16 weight under a bf16 autocast: bf16 dW, then cast (as torch does). Asked where
    # the answer matters: wdt == dtype computes in dtype either way.
    ok = wdt == dtype
    if not ok:
        shape = (a.shape[0], b.shape[1])
        ok = any(_accepts(a, b, None, (shape, wdt, col)) for col in (False, True))
    out = wdt if ok else dtype
    if path == _reg.EAGER:
        return _cast(gemm_op.run(path, a, b, None, 1.0, 0.0, out, False, None, None, None), wdt)
    return _cast(gemm_op(a, b, None, 1.0, 0.0, out, False, None, None), wdt)


class Linear:
    """y = x @ W^T (+ b) for x (..., K) and W (N, K) in a compute dtype, with the dgrad and wgrad
    GEMMs in its backward and eager-only fused weight-gradient accumulation (see ``linear``).
    A composite: its GEMMs are ``gemm_op`` / ``gemm_add_inplace_op``, so torch.compile sees
    those custom ops.

    path: ``linear``'s ``route`` over x, weight and bias. On ``EAGER`` and ``EAGER_GRAD`` the
    forward GEMM runs on ``EAGER`` without routing again (inside the Function grad mode is off,
    and x2 and w are plain tensors made from plain x and weight, so its own route would give
    ``EAGER``); on ``CUSTOM`` it routes its call. The backward routes once over dy's operand,
    w and x2: on ``EAGER`` its GEMMs run there, else each routes its call. It computes the
    gradients the engine's current graph task needs (``_task_grads``: not weight's under
    ``autograd.grad(loss, x)``, and no fused accumulation there).

    C++ eager path (python/torch_ext.cpp, ``linear``): both eager paths in C++, forward and
    backward alike, with the autograd node ``LinearFn``, where the operands are TMA's and the
    call is not tuned; its backward hands fused accumulation and every backward not routed
    ``EAGER`` (create_graph=True, modes, a subclass dy) to this backward
    (``_linear_node_backward``). ``QUACK_CPP_EAGER_LINEAR=0`` (or ``QUACK_CPP_EAGER_GEMM=0``,
    whose C++ GEMM it runs, or ``QUACK_CPP_EAGER=0``) keeps this Function."""

    name = "quack_cpp::linear"
    eager = (_torch_ext.linear if _torch_ext is not None and hasattr(_torch_ext, "linear")
             and _CPP_LINEAR and _CPP_GEMM else None)
    eager_node = "LinearFn"

    def forward(ctx, x: Tensor, weight: Tensor, bias: Optional[Tensor], dtype: torch.dtype,
                fuse_grad_accum: bool, tuned: bool, path: int) -> Tensor:
        N, K = weight.shape
        x2 = _as_operand(_rows(_cast(x, dtype), K))
        w = _cast(weight, dtype)
        if path != _reg.CUSTOM:
            y = gemm_op.run(_reg.EAGER, x2, w.mT, None, 1.0, 0.0, dtype, bool(tuned), None, None,
                            bias)
        elif bias is None:
            y = gemm_op(x2, w.mT, None, 1.0, 0.0, dtype, bool(tuned), None, None)
        else:
            y = gemm_op(x2, w.mT, None, 1.0, 0.0, dtype, bool(tuned), None, None, bias)
        need_x, need_w = ctx.needs_input_grad[:2]
        lead = x.shape[:-1] if x.dim() != 2 else None  # None: y and dx as made, (M, N) / (M, K)
        ctx.dtype, ctx.weight_dtype, ctx.lead, ctx.n = dtype, weight.dtype, lead, N
        ctx.bias_dtype = bias.dtype if bias is not None else None
        # Fused accumulation reads weight.grad at backward time: eager only (as QuACK).
        ctx.fuse = bool(fuse_grad_accum and need_w and not torch.compiler.is_compiling())
        # dW = dy^T x2, dx = dy W: weight itself only for its .grad (fused), so an in-place
        # update of weight before the backward is an error only where dx reads W.
        ctx.save_for_backward(x2 if need_w else None, w if need_x else None,
                              weight if ctx.fuse else None)
        # y (M, N) with x's leading dims: detached, a tensor of its own for autograd (a view
        # made inside a Function would forbid in-place ops on the output), the same storage.
        return y if lead is None else y.view(*lead, N).detach()

    def backward(ctx, dy):
        return _linear_backward(ctx, dy, *_task_grads(ctx)) + (None,) * 4


linear_op = register_function(Linear)


def _task_grads(ctx) -> Tuple[bool, bool, bool, bool]:
    """(need_x, need_w, need_b, fuse) for Linear.backward running now (``task_grads``)."""
    flags, fuse = _reg.task_grads(ctx, (0, 1, 2), 1, ctx.fuse)
    return flags + (fuse,)


def _linear_backward(ctx, dy: Tensor, need_x: bool, need_w: bool, need_b: bool,
                     fuse: bool) -> Tuple[Optional[Tensor], Optional[Tensor], Optional[Tensor]]:
    """(dx, dw, db) of y = x W^T (+ b) for dy, None where not needed; ctx: saved_tensors
    (x2, w, weight; None where not saved) and the fields Linear.forward sets. fuse: accumulate
    the wgrad into weight.grad (``weight_grad``)."""
    x2, w, weight = ctx.saved_tensors
    g = _as_operand(_rows(_cast(dy, ctx.dtype), ctx.n))
    dx = dw = db = None
    path = _reg.route(g, w, x2) if need_x or need_w else None
    if need_x:  # dgrad: dx = dy @ W
        if path == _reg.EAGER:
            dx = gemm_op.run(path, g, w, None, 1.0, 0.0, ctx.dtype, False, None, None, None)
        else:
            dx = gemm_op(g, w, None, 1.0, 0.0, ctx.dtype, False, None, None)
        if ctx.lead is not None:
            dx = dx.view(*ctx.lead, w.shape[1])
    if need_w:  # wgrad: dW = dy^T @ x, in weight's dtype where the C++ has that instance
        dw = weight_grad(g, x2, weight, ctx.dtype, fuse, path if path == _reg.EAGER else None,
                         ctx.weight_dtype)
    if need_b:  # the column sum of dy (fp32, in bias's dtype)
        db = g.sum(0, dtype=torch.float32).to(ctx.bias_dtype)
    return dx, dw, db


class _NodeCtx:
    """Linear.backward's ctx rebuilt from the C++ node's saved state (``_linear_node_backward``)."""

    __slots__ = ("saved_tensors", "dtype", "weight_dtype", "lead", "n", "bias_dtype")


def _linear_node_backward(dy, saved, needs, dtype, weight_dtype, lead, n, bias_dtype, fuse):
    """(dx, dw, db) of ``Linear.backward`` for the C++ node ``LinearFn`` (python/torch_ext.cpp)
    where that node leaves the backward to Python: saved = (x2, w, weight) with None where
    not saved, needs = (need_x, need_w, need_b) and fuse for the current graph task (the
    node's LinearState::for_task), the rest as Linear.forward sets them on ctx."""
    ctx = _NodeCtx()
    ctx.saved_tensors, ctx.dtype, ctx.weight_dtype, ctx.lead = saved, dtype, weight_dtype, lead
    ctx.n, ctx.bias_dtype = n, bias_dtype
    return _linear_backward(ctx, dy, *needs, fuse)


if _torch_ext is not None and hasattr(_torch_ext, "_linear_set_python"):
    _torch_ext._linear_set_python(_linear_node_backward, _reg)


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
           fuse_grad_accum: bool = False, tuned: bool = False) -> Tensor:
    """``y = x @ weight^T + bias`` (``torch.nn.functional.linear``) on our GEMM.

    Forward ``gemm(x2, W^T)`` with x2 = x flattened to (M, K); backward: dgrad
    ``dx = dy @ W`` and wgrad ``dW = dy^T @ x2``, both with our GEMM, dW produced directly in
    weight's dtype (fp32 accumulation; an fp32 weight under autocast gets an fp32 gradient
    without a bf16 rounding). Under ``torch.autocast`` x and weight are cast to the autocast
    dtype first, like ``nn.Linear``.

    Where the C++ has no kernel for the compute dtype to weight's dtype in the wgrad's layouts
    (``can_implement`` says so; e.g. bf16 -> fp16), dW is computed in the compute dtype and
    cast, as ``nn.Linear`` does under autocast.

    fuse_grad_accum=True (eager only; ignored under torch.compile, as in QuACK): when
    ``weight.grad`` already exists (in weight's dtype: fp32 or the compute dtype) and the C++
    accepts it as C and D, the wgrad is accumulated into it in place with ``gemm_add_inplace`` (beta = 1), then handed to autograd
    as the gradient with ``weight.grad`` cleared for the moment, so AccumulateGrad stores the
    same tensor (no extra add, no new allocation; gradient hooks still run). Should anything
    else hold a reference to that gradient tensor, AccumulateGrad stores a copy instead (the
    values are the same). A backward that does not store weight's gradient into
    ``weight.grad`` (``torch.autograd.grad``, or ``backward(inputs=...)`` without weight)
    leaves ``weight.grad`` as it is: dW is then computed alone, or not at all where the pass
    does not ask for it.

    bias (QuACK's LinearFunc): added in the forward GEMM's epilogue in fp32 (a bias of any float
    dtype, also under autocast: not rounded to the compute dtype first); its gradient is the
    column sum of dy over the rows (fp32 reduction in torch, deterministic; bias's dtype).

    Args:
        x: (..., K) CUDA; bfloat16/float16, or any float dtype under autocast.
        weight: (N, K), x's dtype (or any float dtype under autocast); any N and K (where
            they are not multiples of 8 the GEMM copies the operands TMA cannot address into
            padded rows: x when K is odd, once per call; W^T per forward, W per dgrad).
            Zero sizes as torch: K = 0 gives y = bias (or zeros), an empty dx and a (N, 0) dW;
            N = 0 an empty y, a zero dx and a (0, K) dW; M = 0 an empty y and dx, a zero dW.
        bias: None or (N,), float32 or the compute dtype (bfloat16 or float16).
        fuse_grad_accum: see above.
        tuned: autotune the forward GEMM's tile configuration (as ``gemm``'s ``tuned``).

    Returns:
        y (..., N) in the compute dtype (x's, or autocast's); row-major, contiguous when
        N * itemsize is a multiple of 16 bytes (N a multiple of 8 for bfloat16/float16). Else
        the rows are padded (TMA's 16-byte leading-stride rule, no copy made here): the row
        stride y.stride(-2) is N rounded up to a multiple of 8 (e.g. 50264 for N = 50257),
        stride(-1) = 1, the leading dims' strides multiples of it; with more than one row
        ``y.is_contiguous()`` is then False and ``y.contiguous()`` copies.

    Raises:
        ValueError: no bfloat16/float16 compute dtype (see ``linear_dtype``), or what ``gemm``
            raises. RuntimeError: a CUDA error.

    Source: QuACK 0.2.0 ``linear.LinearFunc`` / ``linear_func``.
    """
    return _linear(x, weight, bias, None, fuse_grad_accum, tuned)


def _linear_eager(x: Tensor, weight: Tensor, bias: Optional[Tensor], fuse_grad_accum: bool,
                  tuned: bool, path: int):
    """``linear_op``'s C++ eager path for a call routed ``EAGER`` or ``EAGER_GRAD`` (path, from
    ``route(x, weight, bias)``), computing ``linear_dtype`` itself: y, or ``NotImplemented``
    where it is off (``QUACK_CPP_EAGER_LINEAR=0``, ``QUACK_CPP_EAGER=0``) or leaves the call to
    Python (no bfloat16 / float16 compute dtype, tuning, bad shapes, unaligned operands)."""
    eager = linear_op.eager
    if eager is None or not _reg.CPP_EAGER:
        return NotImplemented
    return eager(x, weight, bias, None, bool(fuse_grad_accum), bool(tuned), path)


def _linear(x: Tensor, weight: Tensor, bias: Optional[Tensor], dtype: Optional[torch.dtype],
            fuse_grad_accum: bool, tuned: bool, path: Optional[int] = None,
            cpp_tried: bool = False) -> Tensor:
    """``linear``; dtype: ``linear_dtype(x, weight)`` where the caller has it and it is not None
    (``nn.Linear``), else None (then computed here, after the device checks); path:
    ``route(x, weight, bias)`` where the caller has it; cpp_tried: the caller called the C++
    eager path (``_linear_eager``) for this call and it answered NotImplemented (the Python
    path then runs without asking again)."""
    if path is None:
        path = _reg.route(x, weight, bias)
    if path == _reg.CUSTOM:
        _check("linear", x=x, weight=weight)
        if bias is not None:
            _check("linear", bias=bias)
    if dtype is None:
        dtype = linear_dtype(x, weight)
        if dtype is None:
            raise ValueError(f"linear: x {_shape(x)} and weight {_shape(weight)}: expected both "
                             "bfloat16 or both float16 (or autocast to one of them)")
    if weight.dim() != 2 or x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: x has shape {tuple(x.shape)} and weight {tuple(weight.shape)},"
                         " expected (..., K) and (N, K)")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != weight.shape[0]):
        raise ValueError(f"linear: bias has shape {tuple(bias.shape)}, expected "
                         f"({weight.shape[0]},) (out_features)")
    run = linear_op.run_python if cpp_tried else linear_op.run
    return run(path, x, weight, bias, dtype, bool(fuse_grad_accum), bool(tuned), path)
