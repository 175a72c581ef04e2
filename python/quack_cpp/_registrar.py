"""The registrar: one op description -> the torch custom op, its fake, its autograd and the
eager fast path. Plus the argument helpers every op shares (tensor tuples for ``_C``, streams,
dtype codes, rows of ``(..., N)`` inputs, a ``dim`` moved to the last axis).

Adding an op
============

Write its description as a class (its functions are read as plain functions: no ``self``, no
``@staticmethod``) and pass it to ``register``::

    from . import _C
    from ._registrar import register, rows_cols, tensor_arg, stream

    class SoftmaxFwd:
        '''Docstring of torch.ops.quack_cpp.softmax_fwd (formula, shapes, dtypes, errors).'''
        name = "quack_cpp::softmax_fwd"

        # The schema, read from the annotations (torch.library.infer_schema's rules).
        def signature(x: Tensor, out_dtype: torch.dtype) -> Tensor: ...

        # The outputs, allocated like x: runs on real tensors (eager) and on fake ones (the
        # fake kernel: torch.compile, FakeTensorMode, meta). Raise here what the fake must raise.
        def outputs(x, out_dtype):
            M, N = rows_cols(x, "softmax_fwd")
            return x.new_empty((M, N), dtype=out_dtype)

        # The launch on real CUDA tensors: `out` is what outputs() returned.
        def launch(out, x, out_dtype):
            _C.softmax_fwd(tensor_arg(x, "softmax_fwd", "x"),
                           tensor_arg(out, "softmax_fwd", "out"), stream(x))

        # Autograd (leave both out for an op without a gradient).
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)
            ctx.x_dtype = inputs[0].dtype

        def backward(ctx, dy):
            (y,) = ctx.saved_tensors
            dx = softmax_bwd(y, dy, ctx.x_dtype) if ctx.needs_input_grad[0] else None
            return dx, None                    # one entry per input of signature()

    softmax_fwd = register(SoftmaxFwd)

``softmax_fwd`` is then an ``Op``: ``softmax_fwd(x, torch.bfloat16)`` runs the op on the
cheapest path that is the same (below), ``torch.ops.quack_cpp.softmax_fwd`` is the custom op
(with its fake and autograd registered), ``softmax_fwd.Function`` the fast path's
``torch.autograd.Function``. A backward formula calls other ``Op`` s (``softmax_bwd`` above)
the same way: on the fast path they take it again, under torch.compile the custom ops. The
user-facing function (``quack_cpp.softmax(x, dim=-1)``) stays a short hand-written wrapper: it
checks what the C++ cannot see (e.g. shapes that flatten alike), turns ``(..., N)`` into rows
(``to_rows`` / ``from_rows``) and calls the Op; with ``route`` it can run its Python checks on
the custom-op path only (the fast path's predicate implies them; see ``quack_cpp.ops.rmsnorm``).

Description fields:

- ``name``: ``"quack_cpp::<op>"``. ``signature``: annotated stub (its docstring or the class's
  is the op's doc). ``mutates_args``: names of the arguments written in place (default none).
- ``outputs`` + ``launch``, or ``impl`` (+ ``fake``): ``impl(*args)`` allocates and launches
  (use it when the real allocation differs from the fake one, e.g. a cached plan); ``fake`` is
  then the fake kernel. With ``outputs`` + ``launch``, impl = launch(outputs(...), ...) and
  fake = outputs.
- Absent outputs: an output may be ``None`` (not asked for). The fast path returns ``None``
  (nothing allocated); the custom op, which must return tensors, returns an empty (0,)
  placeholder in ``absent[i]``'s dtype (default: the first tensor argument's dtype). Callers
  must not read an absent output.
- ``index_args``: names of integer index tensors (int32/int64, e.g. class targets). ``route``
  looks at the other tensor arguments; an index tensor keeps the fast path when it is a plain
  dense CUDA tensor of an index dtype (``route_index``).
- ``eager_only``: names of trailing arguments (with defaults, not tensors) that only the eager
  fast path honours, e.g. "write this output into an input's storage", which a functional
  custom op cannot do. The custom op's schema leaves them out; its kernel, fake, setup_context
  and backward see their defaults (setup_context and backward always get the full argument
  tuple; backward returns one entry per argument, eager-only ones included).
- ``eager`` (optional) and ``eager_node``: a C++ implementation of the fast path (e.g.
  ``quack_cpp._torch.rmsnorm_fwd``, built where torch is importable): called with the full
  positional arguments on both fast paths; it returns the outputs (None where absent) and makes
  its own C++ autograd node (named ``torch::autograd::CppNode<ns::<eager_node>>``) where autograd
  records the call, or ``NotImplemented`` (before doing anything) for arguments it does not
  cover: the Python fast path then runs the call. It must match impl + setup_context +
  backward exactly; ``CPP_EAGER`` (``QUACK_CPP_EAGER=0``) turns it off. Functional ops only.
- ``sharding`` (optional): the op's DTensor sharding rule, one of quack_cpp._dtensor's names
  (``ROW_NORM_FWD``, ``GEMM``, ...): which input placements it runs on locally and what its
  outputs' placements are; registered with ``register_sharding`` once torch.distributed.tensor
  is imported. Without it DTensor's dispatch refuses the op.
- ``setup_context(ctx, inputs, output)`` and ``backward(ctx, *grads)``: as
  ``torch.library.register_autograd`` takes them; used by the custom op and, unchanged, by the
  fast path's autograd.Function. ``inputs`` is the full positional argument tuple (defaults
  filled in); ``output`` may hold ``None`` (fast path) or placeholders (custom op) for absent
  outputs; grads of absent outputs are None (``ctx.set_materialize_grads(False)`` to get None
  for unused ones too). Without ``backward`` an op is not differentiable: a call that autograd
  would record goes to the custom op (which then raises at backward, as torch does).

Paths (``Op.__call__``; ``route`` computes which):

- ``CUSTOM``: ``torch.ops.quack_cpp.<op>`` through the dispatcher: while compiling or tracing
  (torch.compile, jit trace), under a torch dispatch mode (FakeTensorMode, FunctionalTensorMode,
  a user's mode) or a functorch transform (vmap, grad, functionalize), for tensors that are not
  plain dense CUDA tensors of a kernel dtype (CPU, meta, fake, subclasses, nested, sparse), and
  whenever ``FORCE_CUSTOM_OP`` is set (``QUACK_EAGER_CUSTOM_OP=1`` at import, or at run time
  ``quack_cpp.ops.FORCE_CUSTOM_OP = True``).
- ``EAGER``: no input requires grad (or grad mode is off): ``impl`` directly, no dispatcher, no
  autograd node. Mutated arguments get their version counter bumped, as the custom op's
  ADInplaceOrView kernel does.
- ``EAGER_GRAD``: autograd records the call: ``Op.Function`` (impl + setup_context forward,
  the description's backward) with the C apply, skipping the dispatcher.
- Both eager paths go to the description's C++ ``eager`` instead when it has one and
  ``CPP_EAGER`` is set.

All three give the same outputs, errors, streams and CUDA-graph behaviour; only the custom op
shows as a ``quack_cpp::*`` row in profiler traces and to Python TorchFunctionModes. Why the
fast path exists, and what it saves per call: docs/architecture.md, "The Python layer".
"""

import inspect
import operator
import os
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import _inductor

__all__ = [
    "Op", "register", "route", "CUSTOM", "EAGER", "EAGER_GRAD", "FORCE_CUSTOM_OP",
    "dtype_code", "dtype_name", "tensor_arg", "scalar_arg", "stream", "rows_cols", "as_rows",
    "to_rows", "from_rows", "check_float", "check_index", "FLOAT_DTYPES", "INDEX_DTYPES",
    "DEVICE_TYPES", "route_index", "records_grad", "functional_context", "graph_retained",
    "autocast_fp32",
]

# --------------------------------------------------------------------------------------------
# Argument helpers (one copy for every op)
# --------------------------------------------------------------------------------------------

# quack::DType codes (include/quack/tensor.h).
DTYPE_CODE = {
    torch.float32: 0,
    torch.float16: 1,
    torch.bfloat16: 2,
    torch.int32: 3,
    torch.int64: 4,
}
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
INDEX_DTYPES = (torch.int32, torch.int64)
# Device types the functional APIs accept: CUDA tensors run the kernels; meta (and fake)
# tensors only propagate shapes through the fake kernels. (The CPU stand-ins of the tests add
# "cpu".)
DEVICE_TYPES = ("cuda", "meta")


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def dtype_code(dtype: torch.dtype, fn: str = "quack_cpp", name: str = "tensor") -> int:
    """The ``quack::DType`` code of a torch dtype (0 float32, 1 float16, 2 bfloat16, 3 int32,
    4 int64). Raises ValueError naming ``fn`` and ``name`` for any other dtype."""
    code = DTYPE_CODE.get(dtype)
    if code is None:
        raise ValueError(
            f"{fn}: {name} has dtype {dtype_name(dtype)}, expected float32, float16 or bfloat16"
        )
    return code


def tensor_arg(t: Optional[Tensor], fn: str, name: str):
    """A tensor as ``_C`` takes it: (data_ptr, dtype_code, shape, strides, device), device the
    CUDA ordinal or -1; None stays None. Shape is the tensor's torch.Size (a tuple), strides
    ``t.stride()`` (a tuple); no torch.device objects. Raises ValueError for a dtype without a
    code."""
    if t is None:
        return None
    code = DTYPE_CODE.get(t.dtype)
    if code is None:
        dtype_code(t.dtype, fn, name)  # raises
    return (t.data_ptr(), code, t.shape, t.stride(), t.get_device() if t.is_cuda else -1)


def scalar_arg(t: Tensor, fn: str, name: str):
    """A one-element tensor (0-d or (1,)) as ``_C`` takes a (1) tensor: ``tensor_arg`` with
    shape (1,) and stride (1,) (a 0-d loss or grad_output without a view). Raises ValueError
    naming ``fn`` and ``name`` when t has more than one element (or none): the C++ would read
    element 0 and silently ignore the rest."""
    if t.numel() != 1:
        raise ValueError(f"{fn}: {name} has shape {tuple(t.shape)} ({t.numel()} elements), "
                         "expected one element (0-d or (1,))")
    code = DTYPE_CODE.get(t.dtype)
    if code is None:
        dtype_code(t.dtype, fn, name)  # raises
    return (t.data_ptr(), code, (1,), (1,), t.get_device() if t.is_cuda else -1)


# torch.cuda.current_stream(d).cuda_stream without building a Stream object (what
# torch._inductor's get_raw_stream calls); absent from CPU-only builds.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def stream(t: Tensor) -> int:
    """The current CUDA stream of t's device as an int; 0 for host tensors (which the C++
    rejects by name)."""
    if not t.is_cuda:
        return 0
    if _raw_stream is not None:
        return _raw_stream(t.get_device())
    return torch.cuda.current_stream(t.device).cuda_stream


def rows_cols(x: Tensor, fn: str, name: str = "x"):
    """x's (M, N) (a torch.Size; unpack it); ValueError naming ``fn`` and the argument ``name``
    (softmax_bwd's y, ...) unless x is 2-D."""
    if x.dim() != 2:
        raise ValueError(f"{fn}: {name} has {x.dim()} dimensions {tuple(x.shape)}, expected 2 "
                         "(M, N)")
    return x.shape


def check_float(fn: str, t: Optional[Tensor], name: str) -> None:
    """ValueError naming ``fn`` and ``name`` unless t is None or a float32/float16/bfloat16
    tensor on a device type of ``DEVICE_TYPES``."""
    if t is None:
        return
    if t.device.type not in DEVICE_TYPES:
        raise ValueError(f"{fn}: {name} is on {t.device}, expected a CUDA tensor")
    if t.dtype not in FLOAT_DTYPES:
        raise ValueError(
            f"{fn}: {name} has dtype {dtype_name(t.dtype)}, expected float32, float16 or bfloat16"
        )


def check_index(fn: str, t: Optional[Tensor], name: str) -> None:
    """ValueError naming ``fn`` and ``name`` unless t is None or an int32/int64 tensor on a
    device type of ``DEVICE_TYPES``."""
    if t is None:
        return
    if t.device.type not in DEVICE_TYPES:
        raise ValueError(f"{fn}: {name} is on {t.device}, expected a CUDA tensor")
    if t.dtype not in INDEX_DTYPES:
        raise ValueError(f"{fn}: {name} has dtype {dtype_name(t.dtype)}, expected int32 or int64")


_autocast_cuda = torch.is_autocast_enabled  # no argument: CUDA's autocast (0.16 µs)


def autocast_fp32(x: Tensor) -> bool:
    """Whether an op on the autocast float32 list (softmax, log_softmax, cross_entropy, ...)
    computes in float32 for x: CUDA autocast is on and x is a CUDA tensor. torch casts such
    an op's float16/bfloat16 inputs to float32 (its output is float32); our kernels read the
    16-bit input as it is and write float32 (same result, no cast copy). CPU autocast leaves
    softmax in the input's dtype, as torch does."""
    return x.is_cuda and _autocast_cuda()


def as_rows(t: Tensor) -> Tensor:
    """(..., N) -> (M, N): t itself when 2-D, a (1, N) view of a vector, else
    ``t.flatten(0, -2)`` (a view where the strides allow it, a row stride wider than N kept;
    else a copy). 0-d tensors are the caller's to reject."""
    nd = t.dim()
    if nd == 2:
        return t
    if nd == 1:
        return t.unsqueeze(0)
    return t.flatten(0, -2)


def as_dim(fn: str, dim) -> int:
    """dim as an int: numpy's ints and other integers by ``__index__``; a bool or a float raises
    TypeError, as torch's ops do (``dim == -1`` holds for -1.0, which would otherwise pass
    unnoticed). Callers test ``type(dim) is not int`` first: this runs only for other types."""
    if isinstance(dim, bool) or not hasattr(type(dim), "__index__"):
        raise TypeError(f"{fn}: dim is {dim!r} ({type(dim).__name__}), expected an int")
    return operator.index(dim)


def to_rows(x: Tensor, dim: int = -1):
    """Rows of x along ``dim``: ``(x2, shape)`` with x2 (M, N) = x with ``dim`` moved last and
    the other dims flattened (views where the strides allow, else a copy), and ``shape`` the
    moved shape, for ``from_rows``. dim is checked as torch checks it (IndexError)."""
    nd = x.dim()
    if dim != -1 and dim != nd - 1:
        if not -nd <= dim < max(nd, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-max(nd, 1)}, {max(nd, 1) - 1}], but got {dim})")
        x = x.movedim(dim, -1)
    return as_rows(x), x.shape


def from_rows(y2: Tensor, shape, dim: int = -1) -> Tensor:
    """The inverse of ``to_rows`` for an output y2 (M, N): viewed as ``shape`` and ``dim``
    moved back (no copy; a moved dim gives a non-contiguous view)."""
    nd = len(shape)
    y = y2 if (nd == 2 and y2.shape == shape) else y2.view(shape)
    if dim != -1 and dim != nd - 1:
        y = y.movedim(-1, dim)
    return y


# --------------------------------------------------------------------------------------------
# Which path a call takes
# --------------------------------------------------------------------------------------------

CUSTOM, EAGER, EAGER_GRAD = 0, 1, 2

# True: every call takes the custom ops (QUACK_EAGER_CUSTOM_OP, read once: an environment
# lookup per call would cost more than the rest of route). quack_cpp.ops.FORCE_CUSTOM_OP
# reads and writes this flag.
FORCE_CUSTOM_OP = os.environ.get("QUACK_EAGER_CUSTOM_OP", "") not in ("", "0")
# True: ops whose description has a C++ eager path (``eager``, from quack_cpp._torch) take it on
# the fast path; QUACK_CPP_EAGER=0 at import (or this flag at run time) keeps the Python one.
CPP_EAGER = os.environ.get("QUACK_CPP_EAGER", "1") not in ("", "0")
_PLAIN_TYPES = (Tensor, torch.nn.Parameter)
KERNEL_DTYPES = frozenset(FLOAT_DTYPES)
_STRIDED = torch.strided
# Queries of route, bound once (attribute lookups cost).
_is_compiling = torch.compiler.is_compiling
_dispatch_modes = torch._C._len_torch_dispatch_stack
_jit_tracing_state = torch._C._get_tracing_state
_functorch_level = torch._C._functorch.peek_interpreter_stack
_grad_enabled = torch.is_grad_enabled
_is_wrapped = torch._C._functorch.is_functorch_wrapped_tensor


def _is_plain_cuda(t: Tensor) -> bool:
    """A dense CUDA tensor of a kernel dtype whose class is exactly Tensor or Parameter (a
    subclass may wrap or intercept: FakeTensor, FunctionalTensor, DTensor, ...) and that is no
    functorch wrapper (one left over from a finished vmap/grad)."""
    return (type(t) in _PLAIN_TYPES and t.is_cuda and t.layout == _STRIDED
            and not t.is_nested and t.dtype in KERNEL_DTYPES and not _is_wrapped(t))


def route(*tensors: Optional[Tensor]) -> int:
    """The path of a call on these tensors (None: absent): ``CUSTOM`` while compiling (checked
    first: Dynamo folds it, so nothing below is traced), with ``FORCE_CUSTOM_OP``, under a jit
    trace, a torch dispatch mode or a functorch transform, or when a tensor is not
    ``_is_plain_cuda``; else ``EAGER_GRAD`` when grad mode is on and a tensor requires grad,
    else ``EAGER``. Host-only, well under a microsecond per tensor."""
    if _is_compiling() or FORCE_CUSTOM_OP:
        return CUSTOM
    if _dispatch_modes() or _jit_tracing_state() is not None or _functorch_level() is not None:
        return CUSTOM
    grad = False
    for t in tensors:
        if t is not None:
            if not _is_plain_cuda(t):
                return CUSTOM
            if t.requires_grad:
                grad = True
    return EAGER_GRAD if grad and _grad_enabled() else EAGER


_INDEX_DTYPES = frozenset(INDEX_DTYPES)


def _is_plain_cuda_index(t: Tensor) -> bool:
    """``_is_plain_cuda`` for index tensors: int32 or int64 instead of a float dtype."""
    return (type(t) in _PLAIN_TYPES and t.is_cuda and t.layout == _STRIDED
            and not t.is_nested and t.dtype in _INDEX_DTYPES and not _is_wrapped(t))


def route_index(path: int, *tensors: Optional[Tensor]) -> int:
    """``path`` (from ``route`` over a call's float tensors), or ``CUSTOM`` when one of these
    index tensors (None: absent) is not ``_is_plain_cuda_index``."""
    if path == CUSTOM:
        return path
    for t in tensors:
        if t is not None and not _is_plain_cuda_index(t):
            return CUSTOM
    return path


def functional_context(*tensors: Optional[Tensor]) -> bool:
    """Whether code running now must stay functional (no writes into tensors it did not
    allocate, e.g. a backward formula rescaling a saved tensor in place): while compiling or
    tracing (torch.compile, AOTAutograd, compiled autograd, jit trace), under a torch dispatch
    mode (FakeTensorMode, FunctionalTensorMode, ...) or a functorch transform, or when one of
    these tensors is a subclass (fake, functional, ...). Eager calls on plain tensors, CPU
    ones included, are not."""
    if _is_compiling() or _dispatch_modes() or _jit_tracing_state() is not None:
        return True
    if _functorch_level() is not None:
        return True
    for t in tensors:
        if t is not None and type(t) not in _PLAIN_TYPES:
            return True
    return False


_keep_graph = getattr(torch._C._autograd, "_get_current_graph_task_keep_graph", None)


def graph_retained() -> bool:
    """In a backward formula: whether the running backward keeps the graph (retain_graph=True
    or create_graph=True), i.e. whether this node's backward may run again on the same saved
    tensors. True outside a backward, while compiling (Dynamo cannot trace the query) and where
    torch lacks it: the safe answer for a formula that would otherwise consume a saved tensor
    in place."""
    if _keep_graph is None or _is_compiling():
        return True
    return bool(_keep_graph())


def refuse_double_backward(fn: str, why: str) -> None:
    """In a backward formula whose gradient is not differentiable (e.g. computed in the
    forward and saved): RuntimeError naming ``fn`` when the running backward records a graph
    (create_graph=True: grad mode is on inside a backward), where returning the gradient
    would let a later differentiation through it silently miss this op's second derivative.
    Not while compiling (AOTAutograd traces backward formulas without create_graph)."""
    if _grad_enabled() and not _is_compiling():
        raise RuntimeError(f"{fn}: backward with create_graph=True (double backward) is not "
                           f"supported: {why}; call backward without create_graph, or use "
                           "torch's version of the op for higher-order gradients")


_will_execute = getattr(torch._C, "_will_engine_execute_node", None)
_AccumulateGrad = torch._C._functions.AccumulateGrad  # a leaf's node along its edge


def _engine_runs(node) -> Optional[bool]:
    """Whether the engine's current graph task runs node (the next node along one of a
    backward's edges): True or False, None where autograd.grad captures its gradient without
    running it (a leaf's AccumulateGrad: ``torch._C._will_engine_execute_node`` raises then;
    and outside a backward)."""
    try:
        return _will_execute(node)
    except RuntimeError:
        return None


def task_grads(ctx, inputs: Sequence[int], weight: Optional[int] = None,
               fuse: bool = False) -> Tuple[Tuple[bool, ...], bool]:
    """(flags, fuse) for a backward formula running now. flags: ctx.needs_input_grad at the
    argument positions ``inputs`` (fixed at forward time) narrowed to the gradients the
    engine's current graph task computes (autograd.grad and backward(inputs=...) may leave
    any out); fuse: the forward's fused weight-gradient accumulation kept only where the task
    runs the AccumulateGrad of the argument at position ``weight`` (not where autograd.grad
    captures its gradient, nor for a weight that is not a leaf), so that ``weight.grad`` is
    written only where the engine would write it. While torch.compile traces, or without the
    engine's query (an older torch): the forward's flags and no fusion (the safe answer for a
    formula that would otherwise write into weight.grad itself).
    Positions index ctx.needs_input_grad, which counts every forward argument, and
    ctx.next_functions, which has an edge per Tensor argument only: each position asked must
    have only Tensor arguments before it (x, weight, bias first, as every caller here).
    Linear's C++ node narrows alike (python/torch_ext.cpp, LinearState::for_task)."""
    needs = tuple(bool(ctx.needs_input_grad[i]) for i in inputs)
    if _is_compiling() or _will_execute is None:
        return needs, False
    edges = ctx.next_functions
    flags = tuple(need and _engine_runs(edges[i][0]) is not False for i, need in zip(inputs, needs))
    if fuse:
        node = edges[weight][0] if weight is not None else None
        fuse = isinstance(node, _AccumulateGrad) and _engine_runs(node) is True
    return flags, fuse


def records_grad(*tensors: Optional[Tensor]) -> bool:
    """Whether autograd would record a call on these tensors (the custom op's rule)."""
    if _grad_enabled():
        for t in tensors:
            if t is not None and t.requires_grad:
                return True
    return False


# --------------------------------------------------------------------------------------------
# The op
# --------------------------------------------------------------------------------------------

_FunctionBase_apply = torch._C._FunctionBase.__dict__["apply"]


def _is_tensor_annotation(a) -> bool:
    return a is Tensor or a == Optional[Tensor]


def _getter(positions):
    """args -> the tuple of args[i] for i in positions (operator.itemgetter, which returns a
    bare item for one position)."""
    if len(positions) == 1:
        i = positions[0]
        return lambda args: (args[i],)
    if not positions:
        return lambda args: ()
    return operator.itemgetter(*positions)


class Op:
    """A registered op (see the module docstring): call it like the custom op (positional or
    keyword arguments of ``signature``); it takes the cheapest path that is the same.

    Attributes: ``name`` ("quack_cpp::<op>"), ``custom_op`` (torch's CustomOpDef; calling it
    always takes the dispatcher), ``default`` (``torch.ops.quack_cpp.<op>.default``),
    ``impl(*args)`` (the real implementation: outputs with None where absent; replaceable, both
    paths look it up per call), ``kernel`` (the custom op's CUDA kernel: impl with placeholders
    for absent outputs), ``Function`` (the fast path's autograd.Function, or None),
    ``tensor_positions`` (indices of the tensor arguments but index ones: what ``route`` looks
    at), ``index_positions`` (the ``index_args``), ``mutated_positions``, ``n_custom`` (the
    number of leading arguments the custom op takes: all but the ``eager_only`` ones)."""

    def __init__(self, desc):
        self.desc = desc
        self.name = desc.name
        ns, _, short = desc.name.partition("::")
        self.__name__ = short
        self.__qualname__ = short
        self.__doc__ = inspect.getdoc(desc.signature) or inspect.getdoc(desc)
        mutates = tuple(getattr(desc, "mutates_args", ()))
        sig = inspect.signature(desc.signature)
        self.signature = sig
        params = list(sig.parameters.values())
        self._nparams = len(params)
        self._defaults = tuple(p.default for p in params)
        self._first_default = next((i for i, p in enumerate(params)
                                    if p.default is not inspect.Parameter.empty), len(params))
        index_names = tuple(getattr(desc, "index_args", ()))
        self.index_positions = tuple(i for i, p in enumerate(params) if p.name in index_names)
        self.tensor_positions = tuple(i for i, p in enumerate(params)
                                      if _is_tensor_annotation(p.annotation)
                                      and p.name not in index_names)
        self._tensors_of = _getter(self.tensor_positions)
        self._index_of = _getter(self.index_positions) if self.index_positions else None
        # Eager-only trailing arguments: not in the custom op's schema; its kernel, fake,
        # setup_context and backward see their defaults.
        eager_only = tuple(getattr(desc, "eager_only", ()))
        self.n_custom = len(params) - len(eager_only)
        tail = params[self.n_custom:]
        if (tuple(p.name for p in tail) != eager_only
                or any(p.default is inspect.Parameter.empty
                       or _is_tensor_annotation(p.annotation) for p in tail)):
            raise TypeError(f"{desc.name}: eager_only {eager_only} must name the last "
                            "arguments of signature, each with a default and not a tensor")
        self._eager_defaults = tuple(p.default for p in tail)
        custom_sig = sig.replace(parameters=params[:self.n_custom])
        self._custom_sig = custom_sig
        self.mutated_positions = tuple(i for i, p in enumerate(params) if p.name in mutates)
        self._absent = tuple(getattr(desc, "absent", ()))
        outputs, launch = getattr(desc, "outputs", None), getattr(desc, "launch", None)
        if hasattr(desc, "impl"):
            self.impl = desc.impl
            fake = getattr(desc, "fake", None) or outputs
        else:
            if outputs is None or launch is None:
                raise TypeError(f"{desc.name}: the description needs outputs + launch, or impl")

            def impl(*args):
                out = outputs(*args)
                launch(out, *args)
                return out

            impl.__name__ = f"{short}_impl"
            self.impl = impl
            fake = outputs
        if eager_only:
            def proto(*args):
                pass
            proto.__signature__ = custom_sig
            proto.__name__ = short
        else:
            proto = desc.signature
        schema = torch.library.infer_schema(proto, mutates_args=mutates)
        returns_none = sig.return_annotation is None

        def kernel(*args, **kwargs):
            args = self._full_custom(args, kwargs)
            out = self.impl(*args)
            return None if returns_none else self._fill(out, args)

        def fake_kernel(*args, **kwargs):
            _inductor.note_fake_call()
            args = self._full_custom(args, kwargs)
            out = fake(*args)
            return None if returns_none else self._fill(out, args)

        kernel.__name__ = short
        kernel.__doc__ = self.__doc__
        self.kernel = kernel  # the custom op's CUDA kernel (tests register it for the CPU too)
        self.custom_op = torch.library.custom_op(desc.name, kernel, mutates_args=mutates,
                                                 device_types="cuda", schema=schema)
        self.custom_op.register_fake(fake_kernel)
        self.default = getattr(getattr(torch.ops, ns), short).default
        _inductor.add(self.default)
        # The C++ eager path (optional): a callable with the signature's arguments that runs
        # the op and, where autograd records the call, its C++ autograd node.
        self.eager = getattr(desc, "eager", None)
        self.eager_node = getattr(desc, "eager_node", None)
        # The DTensor sharding rule (quack_cpp._dtensor), registered when torch.distributed.tensor
        # is imported.
        self.sharding = getattr(desc, "sharding", None)
        if self.eager is not None and mutates:
            raise TypeError(f"{desc.name}: a C++ eager path is for functional ops only")
        backward = getattr(desc, "backward", None)
        setup_context = getattr(desc, "setup_context", None)
        self.Function = None
        if backward is not None:
            if eager_only:  # the custom op's inputs lack the eager-only tail
                n, tail_defaults = self.n_custom, self._eager_defaults

                def custom_setup(ctx, inputs, output):
                    setup_context(ctx, tuple(inputs) + tail_defaults, output)

                def custom_backward(ctx, *grads):
                    return tuple(backward(ctx, *grads))[:n]

                torch.library.register_autograd(
                    desc.name, custom_backward,
                    setup_context=custom_setup if setup_context is not None else None)
            else:
                torch.library.register_autograd(desc.name, backward,
                                                setup_context=setup_context)
            self.Function = self._make_function(short, setup_context, backward)
            self._apply = _FunctionBase_apply.__get__(None, self.Function)

    # -- argument normalisation --------------------------------------------------------------

    def _full(self, args, kwargs=None):
        """args as a full positional tuple: keywords bound, defaults filled in."""
        if kwargs:
            bound = self.signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return bound.args
        n = len(args)
        if n < self._nparams:
            if n < self._first_default:
                self.signature.bind(*args)  # raises the TypeError of a missing argument
            return tuple(args) + self._defaults[n:]
        return args

    def _full_custom(self, args, kwargs=None):
        """The custom op's arguments (its schema: no eager-only ones) as the full positional
        tuple of ``signature``: defaults filled in, eager-only arguments at their defaults."""
        if not self._eager_defaults:
            return self._full(args, kwargs)
        bound = self._custom_sig.bind(*args, **(kwargs or {}))
        bound.apply_defaults()
        return tuple(bound.args) + self._eager_defaults

    def _fill(self, out, args):
        """The custom op's outputs: None (absent) -> an empty (0,) placeholder."""
        if isinstance(out, Tensor):
            return out
        if not any(o is None for o in out):
            return out
        like = next(args[i] for i in self.tensor_positions + self.index_positions
                    if args[i] is not None)
        absent = self._absent
        return tuple(
            o if o is not None else like.new_empty(
                0, dtype=(absent[i] if i < len(absent) and absent[i] is not None
                          else like.dtype))
            for i, o in enumerate(out))

    def _make_function(self, short, setup_context, backward):
        op = self

        def forward(ctx, *inputs):
            output = op.impl(*inputs)
            if setup_context is not None:
                setup_context(ctx, inputs, output)
            return output

        def fn_backward(ctx, *grads):
            return backward(ctx, *grads)

        # forward/backward as staticmethods; setup_context is called inside forward (a separate
        # setup_context staticmethod would make the Python apply bind every call's arguments
        # with inspect.signature).
        name = "".join(p.capitalize() for p in short.split("_")) + "Function"
        return type(name, (torch.autograd.Function,), {
            "forward": staticmethod(forward), "backward": staticmethod(fn_backward),
            "__module__": __name__, "__doc__": f"The eager fast path of {self.name} with "
                                               "autograd (see quack_cpp._registrar)."})

    # -- calls ---------------------------------------------------------------------------------

    def route(self, args) -> int:
        """``route`` of this op's tensor arguments in a full positional tuple (index tensors
        by ``route_index``)."""
        path = route(*self._tensors_of(args))
        if self._index_of is not None:
            path = route_index(path, *self._index_of(args))
        return path

    def is_fast_node(self, node) -> bool:
        """Whether an autograd node (a ``grad_fn``) was made by this op's fast path: its
        ``Function``'s, or the C++ eager path's node (named ``...<...::<eager_node>>``)."""
        if node is None:
            return False
        if self.Function is not None and type(node) is self.Function._backward_cls:
            return True
        return self.eager_node is not None and node.name().endswith(f"::{self.eager_node}>")

    def __call__(self, *args, **kwargs):
        if _is_compiling():  # first: Dynamo then traces only the custom op's call
            if self._eager_defaults:
                return self.custom_op(*self._full(args, kwargs)[:self.n_custom])
            return self.custom_op(*args, **kwargs)
        if kwargs or len(args) < self._nparams:
            args = self._full(args, kwargs)
        path = route(*self._tensors_of(args))
        if self._index_of is not None:
            path = route_index(path, *self._index_of(args))
        return self.run(path, *args)

    def run(self, path: int, *args):
        """Runs the op on ``path`` (from ``route`` over this op's tensor arguments, which the
        caller computed, e.g. with other checks); args positional, defaults may be left out."""
        if len(args) < self._nparams:
            args = self._full(args)
        if path != CUSTOM and self.eager is not None and CPP_EAGER:
            out = self.eager(*args)
            if out is not NotImplemented:  # else: a call the C++ path leaves to Python's
                return out
        if path == EAGER:
            for i in self.mutated_positions:
                torch.autograd.graph.increment_version(args[i])
            return self.impl(*args)
        if path == EAGER_GRAD and self.Function is not None:
            return self._apply(*args)
        if self._eager_defaults:
            return self.custom_op(*args[:self.n_custom])
        return self.custom_op(*args)


def register(desc) -> Op:
    """Registers ``desc`` (an op description, see the module docstring) and returns its Op."""
    op = Op(desc)
    if op.sharding is not None:
        from . import _dtensor
        _dtensor.install(op)
    return op


# --------------------------------------------------------------------------------------------
# Composite ops: an autograd.Function over registered Ops (no custom op of its own)
# --------------------------------------------------------------------------------------------


class _NoGradCtx:
    """The ctx a composite's forward gets when nothing is recorded: no input needs a gradient,
    saving is a no-op; attributes may be set (and are dropped)."""

    needs_input_grad = (False,) * 64

    def save_for_backward(self, *tensors):
        pass

    def mark_non_differentiable(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        pass


class FunctionOp:
    """A composite op (``register_function``): ``forward(ctx, *args)`` calls registered Ops
    (each of which takes its own path) and saves what ``backward(ctx, *grads)`` needs, as in a
    ``torch.autograd.Function``. For an op whose pieces are custom ops already, so that
    torch.compile sees those (e.g. ``linear``: a forward GEMM, the dgrad and wgrad GEMMs, with
    eager-only fused gradient accumulation). No custom op of its own, so it needs no fake.

    Paths of ``__call__``: ``EAGER``: ``forward`` with a no-grad ctx (no autograd node);
    ``EAGER_GRAD``: ``Function`` through the C apply; ``CUSTOM``: ``Function.apply`` (what
    Dynamo traces and functorch transforms). Both eager paths go to the description's C++
    ``eager`` instead where it has one and ``CPP_EAGER`` is set (as ``Op``'s: called with the
    arguments of ``forward`` after ctx; its node named by ``eager_node``; ``NotImplemented``,
    before doing anything, for a call it leaves to the Python path)."""

    def __init__(self, desc):
        self.desc = desc
        self.name = desc.name
        self.__name__ = self.__qualname__ = desc.name.rpartition("::")[2]
        self.__doc__ = inspect.getdoc(desc)
        sig = inspect.signature(desc.forward)
        params = list(sig.parameters.values())[1:]  # without ctx
        self.signature = sig.replace(parameters=params)
        self.tensor_positions = tuple(i for i, p in enumerate(params)
                                      if _is_tensor_annotation(p.annotation))
        self._tensors_of = _getter(self.tensor_positions)
        self._forward = desc.forward
        self.eager = getattr(desc, "eager", None)
        self.eager_node = getattr(desc, "eager_node", None)
        name = "".join(p.capitalize() for p in self.__name__.split("_")) + "Function"
        self.Function = type(name, (torch.autograd.Function,), {
            "forward": staticmethod(desc.forward), "backward": staticmethod(desc.backward),
            "__module__": __name__, "__doc__": f"{self.name} as an autograd.Function."})
        self._apply = _FunctionBase_apply.__get__(None, self.Function)

    def __call__(self, *args):
        """Positional arguments of ``forward`` after ctx, all of them."""
        if _is_compiling():  # first: Dynamo then traces Function.apply
            return self.Function.apply(*args)
        return self.run(route(*self._tensors_of(args)), *args)

    is_fast_node = Op.is_fast_node

    def run(self, path: int, *args):
        """Runs the op on ``path`` (from ``route`` over its tensor arguments, which the caller
        computed): on an eager path the C++ ``eager`` first where there is one and
        ``CPP_EAGER`` is set, else (or where it answers ``NotImplemented``) ``run_python``.
        args: all positional arguments of ``forward`` after ctx."""
        if path != CUSTOM and self.eager is not None and CPP_EAGER:
            out = self.eager(*args)
            if out is not NotImplemented:  # else: a call the C++ path leaves to Python's
                return out
        return self.run_python(path, *args)

    def run_python(self, path: int, *args):
        """``run`` without the C++ eager path (for a caller that tried it already): ``EAGER``:
        ``forward`` with a no-grad ctx; ``EAGER_GRAD``: ``Function`` through the C apply;
        ``CUSTOM``: ``Function.apply``."""
        if path == EAGER:
            return self._forward(_NoGradCtx(), *args)
        if path == EAGER_GRAD:
            return self._apply(*args)
        return self.Function.apply(*args)


def register_function(desc) -> FunctionOp:
    """Registers a composite op: ``desc`` has ``name``, ``forward(ctx, *args)`` (annotated:
    the Tensor / Optional[Tensor] arguments are what ``route`` looks at) and
    ``backward(ctx, *grads)``, as a ``torch.autograd.Function``'s; optionally ``eager`` and
    ``eager_node``, a C++ implementation of both eager paths (as an ``Op`` description's)."""
    return FunctionOp(desc)
