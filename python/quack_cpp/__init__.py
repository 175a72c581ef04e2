"""quack_cpp: the PyTorch layer of QuACK-C++ (CUDA C++ kernels for Hopper, sm_90a).

``import quack_cpp`` needs neither torch nor a GPU (it imports torch first when installed): it
loads the extension ``quack_cpp._C`` (pointer-level bindings of the C++ API) and gives
``__version__``. The torch-facing parts load
on first use and need torch:

- ``quack_cpp.rmsnorm(x, weight=None, bias=None, residual=None, eps=1e-6, prenorm=False,
  residual_dtype=None, out_dtype=None, weight_offset=0.0)``: differentiable RMSNorm (see
  ``quack_cpp.ops``);
- ``quack_cpp.ops``: the custom ops ``torch.ops.quack_cpp.rmsnorm_fwd`` / ``rmsnorm_bwd``
  (``torch.library.custom_op`` with fake kernels: ``torch.compile(fullgraph=True)`` and CUDA
  graphs work);
- ``quack_cpp.layernorm(x, weight=None, bias=None, residual=None, eps=1e-5, prenorm=False,
  residual_dtype=None, out_dtype=None, weight_offset=0.0, return_mean=False,
  return_rstd=False)``: differentiable LayerNorm (see ``quack_cpp.layernorm_ops``; custom ops
  ``torch.ops.quack_cpp.layernorm_fwd`` / ``layernorm_bwd``);
- ``quack_cpp.gemm(A, B, out_dtype=None, alpha=1.0, tuned=False, bias=None, *,
  colvec_bias=None, dynamic_scheduler=False)`` (bias: a row vector (N,) / (L, N) added to every
  row; colvec_bias: a column vector (M,) / (L, M) added to every column; dynamic_scheduler:
  QuACK's, tiles taken from a per-stream counter), ``gemm_add(A, B, C, alpha=1.0, beta=1.0,
  out_dtype=None, tuned=False, *, dynamic_scheduler=False)``, ``gemm_add_inplace(A, B, out,
  alpha=1.0, beta=1.0, tuned=False, *, dynamic_scheduler=False)``,
  ``linear(x, weight, bias=None, fuse_grad_accum=False)``: the Hopper GEMM (see ``quack_cpp.gemm_ops``;
  custom ops ``torch.ops.quack_cpp.gemm`` / ``gemm_add_inplace``);
- ``quack_cpp.topk(x, k, dim=-1, largest=True, sorted=True, softmax=False)``: top-k like
  ``torch.topk`` (int64 indices; NaN largest; ties: lower index first), with the MoE router's
  softmax fused (``softmax=True``: over the k values; ``"pre"``: over the row), differentiable
  (see ``quack_cpp.topk_ops``; custom ops ``torch.ops.quack_cpp.topk_fwd`` / ``topk_bwd``);
- ``quack_cpp.softmax(x, dim=-1)``, ``log_softmax(x, dim=-1)`` (see ``quack_cpp.softmax_ops``);
- ``quack_cpp.apply_rotary_emb(x, cos, sin, interleaved=False, inplace=False,
  seqlen_offsets=0, conjugate=False)``, ``apply_rotary_emb_qkv(qkv, cos, sin, ...)``: rotary
  position embedding (non-interleaved or interleaved; ``conjugate``: by -angle, the inverse),
  the packed-qkv form rotating q and k and copying v in one launch, differentiable; ``apply_rotary_emb_qkv_split(qkv, cos, sin, ...)``: the packed form's q, k, v
  as three contiguous (B, S, H, D) tensors, its backward writing the packed gradient in one
  launch (see ``quack_cpp.rotary_ops``; custom ops ``torch.ops.quack_cpp.rotary`` /
  ``rotary_inplace`` / ``rotary_qkv_split`` / ``rotary_qkv_pack``);
- ``quack_cpp.linear_rotary_qkv(x, weight, cos, sin, n_heads)``: an attention layer's qkv
  projection with q and k rotated (interleaved pairs) in the GEMM's epilogue, differentiable;
  ``interleave_rotary_rows(w, n_heads, head_dim)``: a rotate_half model's [W_q; W_k; W_v] rows
  permuted once for it (see ``quack_cpp.gemm_rotary_ops``; custom op
  ``torch.ops.quack_cpp.gemm_rotary``);
- ``quack_cpp.cross_entropy(logits, target, *, ignore_index=-100, reduction="mean", ...)``
  (see ``quack_cpp.cross_entropy_ops``);
- ``quack_cpp.linear_cross_entropy(x, weight, target, bias=None, ignore_index=-100,
  reduction="mean", label_smoothing=0.0, z_loss=0.0, logit_softcap=None, chunk_size=None,
  *, low_memory=False, fuse_grad_accum=False)``: an LM head and its cross-entropy without the
  logits, differentiable (see ``quack_cpp.linear_cross_entropy_ops``; custom ops
  ``torch.ops.quack_cpp.linear_cross_entropy_fwd`` / ``_bwd`` / ``_scale_grad``);
- ``quack_cpp.gemm_act(A, B, activation, C=None, bias=None, store_preact=True, out_dtype=None,
  postact_dtype=None, ..., *, colvec_bias=None)``, ``gemm_dact(A, B, preact, activation, ...,
  *, dynamic_scheduler=False)``, ``gemm_gated(A, B, activation="swiglu", ...,
  concat_layout=False, *, colvec_bias=None)``, ``gemm_dgated(A, B, preact, activation, ..., *,
  dynamic_scheduler=False)``:
  GEMMs with an activation (or a gated one) fused into the epilogue, and the layers
  ``linear_act``, ``act_linear``, ``mlp`` (see ``quack_cpp.gemm_act_ops``; custom ops
  ``torch.ops.quack_cpp.gemm_act`` / ``gemm_dact`` / ``gemm_gated`` / ``gemm_dgated``);
- ``quack_cpp.distributed``: tensor-parallel pieces over torch.distributed:
  ``vocab_parallel_cross_entropy(logits_shard, target, group=None, *, vocab_start=None, ...)``
  (the logits sharded over the vocabulary), ``vocab_parallel_linear_cross_entropy`` (the LM
  head with a vocabulary-sharded weight), ``column_parallel_linear`` and
  ``row_parallel_linear`` (Megatron-LM's layers on ``quack_cpp.linear``);
- ``quack_cpp.nn.RMSNorm``: a drop-in for ``torch.nn.RMSNorm``; ``quack_cpp.nn.LayerNorm``:
  for ``torch.nn.LayerNorm``; ``quack_cpp.nn.Linear``: for ``torch.nn.Linear`` (bias too);
  ``quack_cpp.nn.LinearAct`` / ``DActLinear``: an MLP's two layers with the activation fused;
  ``quack_cpp.nn.MLP``: the block (plain or gated activations; ``MLP.from_llama``);
  ``quack_cpp.nn.CrossEntropyLoss``: for ``torch.nn.CrossEntropyLoss`` on (N, C) logits;
  ``quack_cpp.nn.LinearCrossEntropy``: for an ``nn.Linear`` head + ``nn.CrossEntropyLoss``.

In plain eager mode on CUDA tensors the functions skip the dispatcher (the eager fast path, see
``quack_cpp.ops``); ``QUACK_EAGER_CUSTOM_OP=1`` makes every call use the custom ops.
"""

try:
    # torch first when it is installed: on the H200 machine (torch 2.11+cu130) a fresh process
    # that loads _C before torch dies with SIGSEGV while importing torch
    # (tests/python/test_fastpath_cpu.py::test_env_switch_read_at_import). Without torch the
    # extension loads alone.
    import torch  # noqa: F401
except ImportError:
    pass

from . import _C

__version__ = _C.version()  # one source: include/quack/version.h

# Lazy attributes: name -> the submodule that holds it (None: the submodule itself).
_LAZY = {
    "ops": None, "nn": None, "gemm_ops": None, "layernorm_ops": None, "softmax_ops": None,
    "cross_entropy_ops": None, "rmsnorm": "ops", "layernorm": "layernorm_ops",
    "gemm": "gemm_ops", "gemm_add": "gemm_ops", "gemm_add_inplace": "gemm_ops",
    "linear": "gemm_ops", "topk_ops": None, "topk": "topk_ops", "softmax": "softmax_ops",
    "log_softmax": "softmax_ops", "cross_entropy": "cross_entropy_ops",
    "linear_cross_entropy_ops": None, "linear_cross_entropy": "linear_cross_entropy_ops",
    "gemm_act_ops": None, "gemm_act": "gemm_act_ops", "gemm_dact": "gemm_act_ops",
    "gemm_gated": "gemm_act_ops", "gemm_dgated": "gemm_act_ops", "linear_act": "gemm_act_ops",
    "act_linear": "gemm_act_ops", "mlp": "gemm_act_ops", "distributed": None,
    "rotary_ops": None, "apply_rotary_emb": "rotary_ops", "apply_rotary_emb_qkv": "rotary_ops",
    "apply_rotary_emb_qkv_split": "rotary_ops", "gemm_rotary_ops": None,
    "linear_rotary_qkv": "gemm_rotary_ops", "interleave_rotary_rows": "gemm_rotary_ops",
}

__all__ = ["__version__"] + list(_LAZY)


def __getattr__(name):
    # Lazy: torch is imported only when the torch layer is used.
    if name in _LAZY:
        import importlib

        sub = _LAZY[name] or name
        try:
            module = importlib.import_module(f"{__name__}.{sub}")
        except ModuleNotFoundError as e:
            if e.name == "torch":
                raise ImportError(f"quack_cpp.{name} needs PyTorch (pip install torch); "
                                  "quack_cpp._C works without it") from e
            raise
        value = getattr(module, name) if _LAZY[name] else module
        globals()[name] = value  # later lookups are plain attributes
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
