"""DTensor sharding rules of the custom ops: which placements of the inputs an op runs on
locally, and what placements its outputs then have.

An op description names its rule (``sharding = _dtensor.ROW_NORM_FWD`` etc., read by the
registrar, see quack_cpp._registrar); this module turns the rule into a
``torch.distributed.tensor.experimental.register_sharding`` strategy. Registration is lazy:
nothing of torch.distributed is imported here. ``install()`` (called by the registrar for
every registered op) registers at once when ``torch.distributed.tensor`` is already imported,
else when it is first imported (a one-shot import hook), so ``import quack_cpp`` imports
nothing of torch.distributed and DTensor users get the rules whatever the import order.

Rules (one mesh dimension's placements; DTensor expands them to every mesh dimension and
redistributes inputs that match none, e.g. all-gathers a column-sharded x of a norm). The ops
take rows (M, N): "rows sharded" is Shard(0) of those.

- ``ROW_NORM_FWD`` (rmsnorm_fwd, layernorm_fwd): all Replicate; or x, residual Shard(0),
  weight, bias Replicate -> every output (out, residual_out, rstd / mean) Shard(0).
- ``ROW_NORM_BWD`` (rmsnorm_bwd, layernorm_bwd): all Replicate; or x, dout, the statistics,
  dresidual_out Shard(0), weight Replicate -> dx, dresidual Shard(0), dweight and dbias
  Partial(sum) (each rank holds its rows' column sums).
- ``ROW`` (softmax / log_softmax fwd and bwd, topk_fwd / topk_bwd): every tensor Replicate, or
  every tensor Shard(0). Top-k selects within a row, so a rows shard is its own top-k: values,
  indices, lse (and topk_bwd's dx) Shard(0); a column-sharded x is not a strategy (DTensor
  all-gathers the columns).
- ``GEMM`` (D = alpha A @ B + beta C + bias + colvec_bias; A (M, K) / (L, M, K), B (K, N) /
  (L, K, N), bias (N,) / (L, N), colvec_bias (M,) / (L, M)): the matmul strategies: all
  Replicate; rows (A, C, colvec_bias Shard on M, B and bias Replicate -> D on M); columns (B, C
  Shard on N, bias Shard on N, A and colvec_bias Replicate -> D on N: a column-parallel
  linear); the reduction (A Shard on K, B Shard on K -> D Partial(sum), C and both biases
  Partial: a row-parallel linear); batched: everything Shard(0) on L (a 1-D bias or
  colvec_bias, shared by the batches, Replicate). alpha_t / beta_t Replicate.
- ``GEMM_ACT`` / ``GEMM_GATED`` (the activation in the epilogue): Replicate, rows, columns (no
  reduction: the activation is not linear); colvec_bias as in ``GEMM``. Gated: columns only
  with the interleaved gate/up layout (``concat_layout`` False) and N a multiple of 2 * mesh
  size, so that every rank holds whole (gate, up) pairs and its postact columns are the
  matching slice.
- ``GEMM_DACT`` / ``GEMM_DGATED`` (dpreact = (A @ B) * act'(preact)): Replicate, rows (A,
  preact on M), columns (B, preact on N; gated as above).
- ``CROSS_ENTROPY_FWD`` / ``CROSS_ENTROPY_BWD``: Replicate; or rows: x, target, lse_partial,
  target_logit (and lse, a per-row dloss) Shard(0), class weight Replicate -> loss: Shard(0)
  for reduction 'none', Partial(sum) for 'sum' (also the z-loss part), and no row strategy for
  'mean' (its denominator counts the rows of every rank: DTensor all-gathers the rows). A
  vocabulary-sharded x is not a strategy (DTensor would all-gather it): that is
  ``quack_cpp.distributed.vocab_parallel_cross_entropy``.
- ``LINEAR_CROSS_ENTROPY_FWD`` (x (T, D), weight (V, D), bias (V), target (T) -> loss, lse, dx,
  dweight, dbias; the gradients for grad_output 1): Replicate; or rows: x, target Shard(0),
  weight, bias Replicate -> lse, dx Shard(0), dweight and dbias Partial(sum) (each rank's rows'
  sum), loss Shard(0) for 'none' and Partial(sum) for 'sum'; no row strategy for 'mean' (as
  cross-entropy: DTensor all-gathers the rows). A vocabulary-sharded weight is not a strategy
  (the lse needs the whole vocabulary): that is ``quack_cpp.distributed``'s vocab-parallel head.
- ``LINEAR_CROSS_ENTROPY_BWD`` (the recompute of 'none' and float16: x, weight, bias, target,
  lse, dloss -> dx, dweight, dbias): Replicate; or rows: x, target, lse and a per-token dloss (T,)
  Shard(0) (a 0-d dloss Replicate), weight, bias Replicate -> dx Shard(0), dweight and dbias
  Partial(sum).

The backward formulas see DTensors as tensor subclasses (``_registrar.functional_context``), so
they rescale the saved gradients out of place (``g * grad_output``: plain DTensor ops) instead of
calling the in-place scale_grad ops.

Absent outputs (the (0,) placeholders) get the placement of the output they stand for; callers
never read them. Ops without a rule (the in-place ones: gemm_add_inplace, the scale_grad ops)
stay refused by DTensor's dispatch.
"""

import sys
import warnings

__all__ = ["ROW_NORM_FWD", "ROW_NORM_BWD", "ROW", "GEMM", "GEMM_ACT", "GEMM_GATED", "GEMM_DACT",
           "GEMM_DGATED", "CROSS_ENTROPY_FWD", "CROSS_ENTROPY_BWD", "LINEAR_CROSS_ENTROPY_FWD",
           "LINEAR_CROSS_ENTROPY_BWD", "install", "registered"]

ROW_NORM_FWD, ROW_NORM_BWD, ROW = "row_norm_fwd", "row_norm_bwd", "row"
GEMM, GEMM_ACT, GEMM_GATED = "gemm", "gemm_act", "gemm_gated"
GEMM_DACT, GEMM_DGATED = "gemm_dact", "gemm_dgated"
CROSS_ENTROPY_FWD, CROSS_ENTROPY_BWD = "cross_entropy_fwd", "cross_entropy_bwd"
LINEAR_CROSS_ENTROPY_FWD = "linear_cross_entropy_fwd"
LINEAR_CROSS_ENTROPY_BWD = "linear_cross_entropy_bwd"

_pending = []      # Ops waiting for torch.distributed.tensor
_failed = {}       # op name -> why register_sharding refused it (this torch)
_done = set()      # names of the ops registered with DTensor
_active = False    # torch.distributed.tensor imported and the rules usable


def is_dtensor(t) -> bool:
    """Whether t is a DTensor (without importing torch.distributed.tensor; plain tensors and
    None answer at once)."""
    if t is None or "torch.distributed.tensor" not in sys.modules:
        return False
    return isinstance(t, sys.modules["torch.distributed.tensor"].DTensor)


def _is_spec(a) -> bool:
    # What register_sharding hands a strategy function for a tensor argument: a DTensorSpec.
    return hasattr(a, "placements") and hasattr(a, "mesh")


def _mesh_size(args) -> int:
    for a in args:
        if _is_spec(a):
            return a.mesh.size()
    return 1


def _strategy_fn(rule, n_out):
    """The register_sharding function of ``rule`` for an op with n_out outputs."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    R, P, S = Replicate(), Partial(), Shard

    def inputs(args, place):
        """One placement per argument: place(i, spec) for tensors, None otherwise."""
        return [place(i, a) if _is_spec(a) else None for i, a in enumerate(args)]

    def replicate(args):
        return ([R] * n_out, inputs(args, lambda i, a: R))

    def row_norm_fwd(*args):
        # x, weight, bias, residual, ...
        return [replicate(args),
                ([S(0)] * n_out, inputs(args, lambda i, a: R if i in (1, 2) else S(0)))]

    def row_norm_bwd(*args):
        # rmsnorm: x, weight, dout, rstd, dresidual_out; layernorm: x, weight, dout, mean, rstd,
        # dresidual_out. Outputs dx, dresidual, dweight, dbias.
        return [replicate(args),
                ([S(0), S(0), P, P], inputs(args, lambda i, a: R if i == 1 else S(0)))]

    def row(*args):
        return [replicate(args), ([S(0)] * n_out, inputs(args, lambda i, a: S(0)))]

    def _gemm_dims(A):
        b = len(A.shape) - 2  # 0 for (M, K), 1 for (L, M, K)
        return b, b, b + 1     # batch offset, M dim of A (= of D), K dim of A

    def _vec_dim(v):
        # The M (or N) dim of a bias vector (M,) / (L, M): 0, or 1 when per batch.
        return (len(v.shape) - 1) if v is not None else 0

    def gemm(*args):
        # (A, B, C, alpha, beta, out_dtype, tuned, alpha_t, beta_t, bias, colvec_bias,
        # dynamic_scheduler): one placement per argument given (trailing defaults may be left
        # out), tensors at 0-2, 7-8 (device scalars), 9 (bias), 10 (colvec_bias).
        A, B = args[0], args[1]
        bias = args[9] if len(args) > 9 else None
        colvec_bias = args[10] if len(args) > 10 else None
        b, m, k = _gemm_dims(A)
        nb = _vec_dim(bias)  # N dim of bias
        nc = _vec_dim(colvec_bias)  # M dim of colvec_bias
        scal = (7, 8)

        def strat(out, a, bb, c, bias_p, col_p):
            places = {0: a, 1: bb, 2: c, 9: bias_p, 10: col_p}
            return ([out], inputs(args, lambda i, t: R if i in scal else places[i]))

        out = [replicate(args),
               strat(S(m), S(m), R, S(m), R, S(nc)),              # rows
               strat(S(m + 1), R, S(b + 1), S(m + 1), S(nb), R),  # columns
               strat(P, S(k), S(b), P, P, P)]                     # reduction over K
        if b:
            out.append(strat(S(0), S(0), S(0), S(0), S(0) if nb else R, S(0) if nc else R))
        return out

    def gemm_act(A, B, C, bias, *rest):
        # Tensors: A, B, C, bias (0-3), and colvec_bias, the only one after them (the op's
        # last argument: 11 for gemm_act, 12 for gemm_gated).
        args = (A, B, C, bias) + rest
        gated = rule in (GEMM_GATED,)
        b, m, k = _gemm_dims(A)
        nb = _vec_dim(bias)
        col = next((a for a in rest if _is_spec(a)), None)
        nc = _vec_dim(col)
        places_rows = {0: S(m), 1: R, 2: S(m), 3: R}
        out = [replicate(args),
               ([S(m)] * n_out, inputs(args, lambda i, t: places_rows.get(i, S(nc))))]
        N = B.shape[-1]
        concat = gated and len(rest) > 6 and bool(rest[6])  # concat_layout
        if not gated or (not concat and N % (2 * _mesh_size(args)) == 0):
            places = {0: R, 1: S(b + 1), 2: S(m + 1), 3: S(nb)}
            out.append(([S(m + 1)] * n_out, inputs(args, lambda i, t: places.get(i, R))))
        if b:
            batched = {3: S(0) if nb else R}
            out.append(([S(0)] * n_out, inputs(args, lambda i, t: batched.get(
                i, S(0) if i < 4 or nc else R))))
        return out

    def gemm_dact(A, B, preact, *rest):
        args = (A, B, preact) + rest
        gated = rule == GEMM_DGATED
        b, m, k = _gemm_dims(A)
        out = [replicate(args),
               ([S(m)] * n_out, inputs(args, lambda i, t: R if i == 1 else S(m)))]
        N = preact.shape[-1]
        if not gated or N % (2 * _mesh_size(args)) == 0:
            out.append(([S(m + 1)] * n_out,
                        inputs(args, lambda i, t: {0: R, 1: S(b + 1), 2: S(m + 1)}[i])))
        if b:
            out.append(([S(0)] * n_out, inputs(args, lambda i, t: S(0))))
        return out

    def cross_entropy_fwd(x, target, weight, lse_partial, target_logit, ignore_index,
                          reduction, *rest):
        args = (x, target, weight, lse_partial, target_logit, ignore_index, reduction) + rest
        out = [replicate(args)]
        if reduction != "mean":
            red = S(0) if reduction == "none" else P
            out.append(([red, S(0), red, S(0), R],  # dx_state: a placeholder here
                        inputs(args, lambda i, t: R if i == 2 else S(0))))
        return out

    def cross_entropy_bwd(x, target, lse, dloss, weight, *rest):
        args = (x, target, lse, dloss, weight) + rest
        per_row = len(dloss.shape) == 1 and dloss.shape[0] == x.shape[0] and x.shape[0] != 1
        return [replicate(args),
                ([S(0)], inputs(args, lambda i, t: R if i == 4 or (i == 3 and not per_row)
                                else S(0)))]

    def linear_cross_entropy_fwd(x, weight, bias, target, ignore_index, reduction, *rest):
        # Outputs loss, lse, dx, dweight, dbias; weight (1) and bias (2) Replicate on rows.
        args = (x, weight, bias, target, ignore_index, reduction) + rest
        out = [replicate(args)]
        if reduction != "mean":
            loss = S(0) if reduction == "none" else P
            out.append(([loss, S(0), S(0), P, P],
                        inputs(args, lambda i, t: R if i in (1, 2) else S(0))))
        return out

    def linear_cross_entropy_bwd(x, weight, bias, target, lse, dloss, *rest):
        # Outputs dx, dweight, dbias; dloss (5) per token (T,) or a 0-d scalar.
        args = (x, weight, bias, target, lse, dloss) + rest
        per_row = len(dloss.shape) == 1
        return [replicate(args),
                ([S(0), P, P], inputs(args, lambda i, t: R if i in (1, 2) or (i == 5 and not
                                                                               per_row)
                                      else S(0)))]

    return {ROW_NORM_FWD: row_norm_fwd, ROW_NORM_BWD: row_norm_bwd, ROW: row, GEMM: gemm,
            GEMM_ACT: gemm_act, GEMM_GATED: gemm_act, GEMM_DACT: gemm_dact,
            GEMM_DGATED: gemm_dact, CROSS_ENTROPY_FWD: cross_entropy_fwd,
            CROSS_ENTROPY_BWD: cross_entropy_bwd,
            LINEAR_CROSS_ENTROPY_FWD: linear_cross_entropy_fwd,
            LINEAR_CROSS_ENTROPY_BWD: linear_cross_entropy_bwd}[rule]


def _register(op) -> None:
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.experimental import register_sharding

    overload = op.default
    n_out = len(overload._schema.returns)
    register_sharding(overload)(_strategy_fn(op.sharding, n_out))
    # register_sharding keys its cache on the tensor placements and the arguments from the
    # first int one on; our rules also read bools and strings before it (concat_layout,
    # reduction): key on every argument.
    prop = DTensor._op_dispatcher.sharding_propagator
    info = getattr(prop, "op_to_schema_info", {}).get(overload)
    if info is not None and hasattr(info, "static_argnum"):
        first = next((i for i, a in enumerate(overload._schema.arguments)
                      if not isinstance(a.type, _tensor_types())), len(
                          overload._schema.arguments))
        info.static_argnum = min(info.static_argnum, first)
    _done.add(op.name)


def _tensor_types():
    import torch
    return (torch.TensorType, torch.OptionalType)


def _activate() -> None:
    global _active
    if not _active:
        try:
            import torch.distributed.tensor.experimental  # noqa: F401
        except Exception:  # no torch.distributed, or a torch without register_sharding
            return
        _active = True
    while _pending:
        op = _pending.pop(0)
        try:
            _register(op)
        except Exception as e:  # noqa: BLE001 - never break the importer of torch.distributed.tensor
            # A torch whose DTensor internals differ: the op keeps DTensor's default refusal.
            _failed[op.name] = f"{type(e).__name__}: {e}"
            warnings.warn(f"quack_cpp: no DTensor sharding rule for {op.name} ({_failed[op.name]})",
                          RuntimeWarning, stacklevel=2)


class _Hook:
    """A one-shot sys.meta_path entry: after ``torch.distributed.tensor`` is imported, the
    pending rules are registered (before its first DTensor op can run)."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch.distributed.tensor":
            return None
        import importlib.util
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_register(module):
            exec_module(module)
            _activate()
        spec.loader = _Loader(loader, exec_and_register)
        return spec


class _Loader:
    def __init__(self, loader, exec_module):
        self._loader, self.exec_module = loader, exec_module

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def __getattr__(self, name):
        return getattr(self._loader, name)


_hook = None


def install(op) -> None:
    """Registers op's rule (``op.sharding``) with DTensor now, or once torch.distributed.tensor
    is imported. Ops without a rule are left alone."""
    global _hook
    if getattr(op, "sharding", None) is None:
        return
    _pending.append(op)
    if _active or "torch.distributed.tensor" in sys.modules:
        _activate()
    elif _hook is None:
        _hook = _Hook()
        sys.meta_path.insert(0, _hook)


def registered():
    """Names of the ops whose rules DTensor has (after torch.distributed.tensor's import)."""
    return sorted(_done)
