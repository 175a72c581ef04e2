"""Top-k for torch tensors on QuACK-C++ kernels: op descriptions and the functional API.

- ``topk(x, k, dim=-1, largest=True, sorted=True, softmax=False)``: differentiable, what users
  call (MoE routing: ``softmax=True`` or ``"pre"``);
- ``topk_fwd`` / ``topk_bwd``: the ops, registered by ``quack_cpp._registrar`` as the custom ops
  ``torch.ops.quack_cpp.topk_fwd`` / ``topk_bwd`` with fake kernels (``torch.compile``,
  ``fullgraph=True`` included) and an autograd formula; eager calls take the registrar's fast
  path;
- ``quack_cpp._C.topk_fwd`` / ``topk_bwd``: the C++ API (``include/quack/topk.h``).

Outputs are allocated with torch's caching allocator on x's device (and, for k > 256, the sort
workspace); launches go to the current stream of x's device; nothing synchronises with the
host, so calls can be captured in CUDA graphs.
"""

from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from . import _C, _dtensor
from ._registrar import (CUSTOM, EAGER_GRAD, FLOAT_DTYPES, as_dim, check_float, dtype_name,
                         from_rows, records_grad, register, route, rows_cols, stream, tensor_arg,
                         to_rows)

__all__ = ["topk", "topk_fwd", "topk_bwd"]

# TopkSoftmax (include/quack/topk.h).
SOFTMAX_NONE, SOFTMAX_SELECTED, SOFTMAX_ROW = 0, 1, 2
# quack::kTopkMaxKWithoutWorkspace: larger k sorts each row in a workspace (read once here, so
# smaller k asks for no workspace size per call).
_QUEUE_MAX_K = _C.topk_max_k_without_workspace


class TopkFwd:
    name = "quack_cpp::topk_fwd"
    sharding = _dtensor.ROW  # DTensor placements (quack_cpp._dtensor)
    absent = (None, None, torch.float32)  # lse's placeholder is fp32

    def signature(
        x: Tensor,
        k: int,
        largest: bool,
        softmax: int,
        index_dtype: torch.dtype,
        values_dtype: torch.dtype,
        store_lse: bool,
    ) -> Tuple[Tensor, Tensor, Tensor]:
        """Top-k over the rows of x as a functional custom op (``torch.ops.quack_cpp.topk_fwd``;
        ``quack::topk_fwd``).

        For each row of x (M, N), the k best elements, best first (largest: descending;
        smallest: ascending); NaN is larger than every number (as torch.topk), equal values keep
        the lower column first. softmax: 0 none; 1 the softmax over the k selected values; 2 the
        softmax over the whole row at the selected columns (lse_i = log sum_n exp(x[i, n]) is
        stored when store_lse).

        Returns:
            ``(values, indices, lse)``: values (M, k) in values_dtype, indices (M, k) in
            index_dtype (int64 or int32), lse (M,) float32 or a (0,) placeholder.

        Raises:
            ValueError: a bad argument (the message names it). RuntimeError: a CUDA error.
        """

    def outputs(x, k, largest, softmax, index_dtype, values_dtype, store_lse):
        M, N = rows_cols(x, "topk_fwd")
        return (
            x.new_empty(M, k, dtype=values_dtype),
            x.new_empty(M, k, dtype=index_dtype),
            x.new_empty(M, dtype=torch.float32) if store_lse else None,
        )

    def launch(outs, x, k, largest, softmax, index_dtype, values_dtype, store_lse):
        fn = "topk_fwd"
        values, indices, lse = outs
        args = (tensor_arg(x, fn, "x"), tensor_arg(values, fn, "values"),
                tensor_arg(indices, fn, "indices"), tensor_arg(lse, fn, "lse"))
        ws_bytes, ws_ptr = 0, 0
        if k > _QUEUE_MAX_K:
            ws_bytes = _C.topk_fwd_workspace_size(*args, largest, True, softmax)
            workspace = x.new_empty(ws_bytes, dtype=torch.uint8)
            ws_ptr = workspace.data_ptr()
        _C.topk_fwd(*args, largest, True, softmax, ws_ptr, ws_bytes, stream(x))

    def setup_context(ctx, inputs, output):
        x, k, largest, softmax, index_dtype, values_dtype, store_lse = inputs
        values, indices, lse = output
        ctx.set_materialize_grads(False)
        ctx.softmax = softmax
        ctx.x_dtype = x.dtype
        ctx.N = x.shape[1]
        ctx.can_backward = softmax != SOFTMAX_ROW or store_lse
        if softmax == SOFTMAX_SELECTED:
            ctx.save_for_backward(indices, values)
        elif softmax == SOFTMAX_ROW:
            ctx.save_for_backward(indices, x, lse)
        else:
            ctx.save_for_backward(indices)

    def backward(ctx, dvalues, _dindices, _dlse):
        if dvalues is None or not ctx.needs_input_grad[0]:
            return None, None, None, None, None, None, None
        if not ctx.can_backward:
            raise RuntimeError(
                "quack_cpp::topk_fwd backward: softmax=2 ran with store_lse=False; call it with "
                "store_lse=True (quack_cpp.topk does this when a gradient is needed)")
        saved = ctx.saved_tensors
        indices = saved[0]
        values = saved[1] if ctx.softmax == SOFTMAX_SELECTED else None
        x, lse = (saved[1], saved[2]) if ctx.softmax == SOFTMAX_ROW else (None, None)
        # indices are int: route over the float tensors (route takes kernel dtypes only).
        path = route(dvalues, values, x, lse)
        dx = topk_bwd.run(path, dvalues, indices, values, x, lse, ctx.N, ctx.x_dtype,
                          ctx.softmax)
        return dx, None, None, None, None, None, None


class TopkBwd:
    name = "quack_cpp::topk_bwd"
    sharding = _dtensor.ROW  # DTensor placements (quack_cpp._dtensor)

    def signature(
        dvalues: Tensor,
        indices: Tensor,
        values: Optional[Tensor],
        x: Optional[Tensor],
        lse: Optional[Tensor],
        N: int,
        dx_dtype: torch.dtype,
        softmax: int,
    ) -> Tensor:
        """Top-k backward as a functional custom op (``torch.ops.quack_cpp.topk_bwd``;
        ``quack::topk_bwd``): dx (M, N) in dx_dtype, every element written. softmax 0:
        dx[i, c_ij] = dvalues[i, j], 0 elsewhere; 1: dx[i, c_ij] = p_ij (dvalues[i, j] - s_i),
        s_i = sum_j p_ij dvalues[i, j], p = values; 2: dx = y (g - s) with y = exp(x - lse), g =
        dvalues scattered to the selected columns, s_i = sum_j y[i, c_ij] dvalues[i, j]. fp32
        math. Indices outside [0, N) are skipped.
        """

    def outputs(dvalues, indices, values, x, lse, N, dx_dtype, softmax):
        return dvalues.new_empty(dvalues.shape[0], N, dtype=dx_dtype)

    def launch(dx, dvalues, indices, values, x, lse, N, dx_dtype, softmax):
        fn = "topk_bwd"
        _C.topk_bwd(tensor_arg(dvalues, fn, "dvalues"), tensor_arg(indices, fn, "indices"),
                    tensor_arg(values, fn, "values"), tensor_arg(x, fn, "x"),
                    tensor_arg(lse, fn, "lse"), tensor_arg(dx, fn, "dx"), softmax,
                    stream(dvalues))


topk_bwd = register(TopkBwd)
topk_fwd = register(TopkFwd)


def topk(
    x: Tensor,
    k: int,
    dim: int = -1,
    largest: bool = True,
    sorted: bool = True,
    softmax: Union[bool, str] = False,
    index_dtype: torch.dtype = torch.int64,
    values_dtype: Optional[torch.dtype] = None,
) -> "torch.return_types.topk":
    """The k largest (or smallest) elements of x along ``dim``, like ``torch.topk``, on
    QuACK-C++'s kernels, with the MoE router's softmax fused. Differentiable in x.

    Order: best first; NaN counts as larger than every number (as torch.topk); among equal
    values the lower index comes first (torch leaves it unspecified); +0 ranks above -0.
    ``sorted=False`` allows any order (the values come back sorted anyway).

    softmax (values are then probabilities, computed in fp32):

    - ``False``: values are x's elements (exact);
    - ``True``: the softmax over the k selected values (router gating after top-k);
    - ``"pre"``: the softmax over the whole of x along ``dim``, at the selected positions
      (router gating before top-k; the selection is the same, softmax being monotone).

    Args:
        x: (..., N, ...) float32, float16 or bfloat16 on a CUDA device, any strides (``dim`` is
            moved last and the rest flattened with views where the strides allow).
        k: 0 <= k <= N. The kernel (``include/quack/topk.h``; every path exact):
            16-bit x with 16-byte rows, N <= 4096, k <= 32, and k <= 16 or N <= 2048: the
            register (bitonic) kernel; float32 x with 16-byte rows takes it at N <= 2048 with
            k <= 16, and with k <= 32 on short rows (N <= 512, or N = 1024). 16-bit x with
            16-byte rows, 4096 <= N <= 8192, k <= 256, where the register kernel does not take
            the row, except N = 4096 with k >= 32: radix select (one CTA per row). Any other
            k <= 256: the warp-queue kernel (from k = 32 with a prefix bound on 16-byte rows).
            k > 256 sorts each row (a workspace of ~16 bytes per element of x).
        dim: the dimension to select along (default the last).
        largest, sorted: as torch.topk.
        softmax: False, True or "pre".
        index_dtype: torch.int64 (default, as torch) or torch.int32.
        values_dtype: dtype of values (float32/float16/bfloat16); default x's.

    Returns:
        ``torch.return_types.topk(values, indices)`` (as torch.topk): x's shape with ``dim`` of
        size k. A 0-d x (k 0 or 1, dim -1 or 0) gives 0-d values and index 0, as torch.topk;
        at k = 0 the value is x's element (CUDA torch.topk leaves it unwritten).

    Backward: the gradient of values is scattered to the selected positions (through the
    softmax when fused; ``"pre"`` gives every element of x a gradient).

    Raises:
        ValueError: x not a CUDA float tensor, k out of range, a bad option (the message names
            it). TypeError: k or dim a bool or a float. IndexError: dim out of range.
            RuntimeError: a CUDA error.
    """
    if isinstance(k, (bool, float)):  # torch.topk refuses them too; 2.5 would reach the op
        raise TypeError(f"topk: k is {k!r} ({type(k).__name__}), expected an int")
    if type(dim) is not int:
        dim = as_dim("topk", dim)
    if softmax is False or softmax is None:
        sm = SOFTMAX_NONE
    elif softmax is True:
        sm = SOFTMAX_SELECTED
    elif softmax == "pre":
        sm = SOFTMAX_ROW
    else:
        raise ValueError(f"topk: softmax is {softmax!r}, expected False, True or 'pre'")
    if index_dtype not in (torch.int64, torch.int32):
        raise ValueError(f"topk: index_dtype is {dtype_name(index_dtype)}, expected int64 or "
                         "int32")
    if values_dtype is not None and values_dtype not in FLOAT_DTYPES:
        raise ValueError(f"topk: values_dtype is {dtype_name(values_dtype)}, expected float32, "
                         "float16 or bfloat16")
    path = route(x)
    if path == CUSTOM:  # on the fast path x is a plain CUDA float tensor
        check_float("topk", x, "x")
        need_grad = records_grad(x)
    else:
        need_grad = path == EAGER_GRAD
    if x.dim() == 0:  # as torch.topk: one element, 0-d values and index (k 0 or 1)
        if dim not in (-1, 0):
            raise IndexError(f"topk: dim is {dim}, expected -1 or 0 for a 0-dimensional x")
        if k not in (0, 1):
            raise ValueError(f"topk: k is {k}, expected 0 or 1 for a 0-dimensional x")
        v, i = topk(x.reshape(1), 1, 0, largest, sorted, softmax, index_dtype, values_dtype)
        return torch.return_types.topk((v.reshape(()), i.reshape(())))
    x2, shape = to_rows(x, dim)
    N = shape[-1]
    if not 0 <= k <= N:
        raise ValueError(f"topk: k is {k}, expected 0 <= k <= {N} (the size of dim {dim})")
    values, indices, _lse = topk_fwd.run(
        path, x2, k, bool(largest), sm, index_dtype,
        values_dtype if values_dtype is not None else x.dtype, sm == SOFTMAX_ROW and need_grad)
    out_shape = shape[:-1] + (k,)
    return torch.return_types.topk((from_rows(values, out_shape, dim),
                                    from_rows(indices, out_shape, dim)))
