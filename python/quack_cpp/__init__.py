"""quack_cpp: the PyTorch layer of QuACK-C++ (CUDA C++ kernels for Hopper, sm_90a).

``import quack_cpp`` needs neither torch nor a GPU: it loads the extension ``quack_cpp._C``
(pointer-level bindings of the C++ API) and gives ``__version__``. The torch-facing parts load
on first use and need torch:

- ``quack_cpp.rmsnorm(x, weight=None, bias=None, residual=None, eps=1e-6, prenorm=False,
  residual_dtype=None, out_dtype=None)``: differentiable RMSNorm (see ``quack_cpp.ops``);
- ``quack_cpp.ops``: the custom ops ``torch.ops.quack_cpp.rmsnorm_fwd`` / ``rmsnorm_bwd``
  (``torch.library.custom_op`` with fake kernels: ``torch.compile(fullgraph=True)`` and CUDA
  graphs work);
- ``quack_cpp.nn.RMSNorm``: a drop-in for ``torch.nn.RMSNorm``.
"""

from . import _C

__version__ = _C.version()  # one source: include/quack/version.h

__all__ = ["__version__", "rmsnorm", "ops", "nn"]


def __getattr__(name):
    # Lazy: torch is imported only when the torch layer is used.
    if name in ("ops", "nn", "rmsnorm"):
        import importlib

        try:
            module = importlib.import_module(f"{__name__}.{'ops' if name == 'rmsnorm' else name}")
        except ModuleNotFoundError as e:
            if e.name == "torch":
                raise ImportError(f"quack_cpp.{name} needs PyTorch (pip install torch); "
                                  "quack_cpp._C works without it") from e
            raise
        return module.rmsnorm if name == "rmsnorm" else module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"rmsnorm", "ops", "nn"})
